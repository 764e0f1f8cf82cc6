"""``ctxwise demo``: the whole story of one support session, through the Engine."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ctxwise._demo import BUDGET, DemoRun, run_demo
from ctxwise._northwind import SESSION_ID, SYSTEM
from ctxwise.cli._util import _buffered_console, _guard, _print_json, _write

__all__ = ["demo_cmd"]


def demo_cmd(
    db: Annotated[
        Path | None,
        typer.Option(
            help="SQLite file for the sessions, kept afterwards (default: a temp folder)."
        ),
    ] = None,
    budget: Annotated[int, typer.Option(help="Token budget of every ctxwise request.")] = BUDGET,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report (turns, totals, checks) as JSON.")
    ] = False,
) -> None:
    """Route, recall, pin, clear, compact and gate: a scripted support session on
    order 4417, run by ctxwise.Engine and by a kitchen sink of the same script.

    Every turn's request is searched for what the model needs on that turn; the
    command exits with 1 when anything is missing.
    """
    if db is None:
        with tempfile.TemporaryDirectory(prefix="ctxwise-demo-") as tmp:
            run = _guard(lambda: run_demo(str(Path(tmp) / "demo.db"), budget))
    else:
        run = _guard(lambda: run_demo(str(db), budget))
    if as_json:
        _print_json(run.to_dict())
    else:
        console, buf = _buffered_console()
        _print_report(console, run, db)
        _write(buf)
    if not run.ok:
        raise typer.Exit(1)


def _cleared(trace: Any) -> str:
    c = trace.cleared
    return "-" if c is None else f"{c.tool_uses} (−{c.tokens_freed:,})"


def _compacted(trace: Any) -> str:
    c = trace.compacted
    return "-" if c is None else f"{c.summarized_messages} msgs"


def _print_report(console: Any, run: DemoRun, db: Path | None) -> None:
    console.rule("[bold]ctxwise demo[/bold]: order 4417, twelve turns, one ctxwise.Engine")
    console.print(Text(f"system: {SYSTEM}"))
    table = Table(title_justify="left")
    for col, justify in (
        ("turn", "right"),
        ("step", "left"),
        ("route", "left"),
        ("sources", "left"),
        ("kept/drop", "right"),
        ("cleared", "right"),
        ("compacted", "right"),
        ("tokens/budget", "right"),
        ("needed", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for t in run.turns:
        tr = t.trace
        kept = sum(s.status != "dropped" for s in tr.sections)
        dropped = len(tr.sections) - kept
        label = tr.route.label or f"refused ({tr.route.reason})"
        present = sum(c.present for c in t.needs)
        mark = "✓" if t.ok else "✗"
        table.add_row(
            str(t.turn),
            Text(t.note),
            label + (" ↺" if tr.route.reused else ""),
            Text(", ".join(tr.chosen) or "(none)"),
            f"{kept}/{dropped}",
            _cleared(tr),
            _compacted(tr),
            f"{tr.tokens.total:,}/{tr.tokens.budget:,}",
            Text(f"{mark} {present}/{len(t.needs)}", style="green" if t.ok else "red"),
        )
    console.print(table)
    console.print(
        Text(
            "↺: a tool-result turn, routed with its user message; cleared: tool results "
            "(tokens freed); needed: what the model needs on the turn, found in the request",
            style="dim",
        )
    )
    for t in run.turns:
        for c in t.needs:
            if not c.present:
                console.print(Text(f"✗ turn {t.turn}: the request lacks {c.text!r}", style="red"))
    chitchat = [t for t in run.turns if t.trace.route.label == "chitchat"]
    for t in chitchat:
        console.print(
            Text(f"turn {t.turn} (chitchat) skipped: {', '.join(t.trace.skipped)}", style="dim")
        )
    for t in run.turns:
        if t.note == "memory recall":
            where = "; ".join(f"{c.text[:40]!r} in {', '.join(c.found_in) or '-'}" for c in t.needs)
            console.print(Text(f"turn {t.turn} (memory recall): {where}", style="dim"))
    console.print()
    console.print("[bold]policy gate[/bold] (Engine.check_tool before every tool call):")
    for t in run.turns:
        for g in t.gate:
            if g.tool in ("issue_refund", "verify_address"):
                args = ", ".join(f"{k}={v!r}" for k, v in g.input.items())
                verdict = "Allowed" if g.allowed else f"Blocked: {g.reason}"
                console.print(
                    Text(
                        f"  before turn {t.turn}: {g.tool}({args}) → {verdict}",
                        style="green" if g.allowed else "red",
                    )
                )
    data = run.to_dict()
    totals, checks = data["totals"], data["checks"]
    console.print()
    console.print(
        f"[bold]session[/bold]: {totals['ctxwise_tokens']:,} input tokens with ctxwise vs "
        f"{totals['kitchen_sink_tokens']:,} for the kitchen sink (every source every turn, "
        f"the unedited history) — {run.saving:.0%} fewer; {totals['clears']} clear(s), "
        f"{totals['compactions']} compaction(s)"
    )
    verdict = "every one present" if run.ok else "SOME MISSING"
    console.print(
        f"needed facts checked in the rendered requests: "
        f"{checks['needs_present']}/{checks['needs_total']}, {verdict}"
    )
    if db is not None:
        console.print(
            Text(
                f"sessions {SESSION_ID!r} and {SESSION_ID + '-kitchen-sink'!r} kept in {db}: "
                f"ctxwise trace {SESSION_ID} --db {db}"
            )
        )
