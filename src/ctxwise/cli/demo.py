"""``ctxwise demo``: the whole story of one support session, through the Engine.

The report reads at 80 columns: one row a turn, with what the user said (and the
tool calls the scripted model made before it) beside what ctxwise sent, then the
policy gate's decisions, the totals, and the next command to try.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ctxwise._demo import BUDGET, DemoRun, DemoTurn, run_demo
from ctxwise._northwind import SESSION_ID, SYSTEM
from ctxwise.cli._store import STORE_HELP, DbAlias, given_store, sqlite_path, writable_store
from ctxwise.cli._util import _buffered_console, _guard, _print_json, _table, _text_col, _write

__all__ = ["demo_cmd"]


def demo_cmd(
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help=f"Keep the sessions in this store ({STORE_HELP}; a new SQLite file is "
            "created). Default: a temporary folder, removed afterwards.",
        ),
    ] = None,
    db: DbAlias = None,
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
    given = _guard(lambda: given_store(store, db))
    if given is None:
        with tempfile.TemporaryDirectory(prefix="ctxwise-demo-") as tmp:
            run = _guard(lambda: run_demo(str(Path(tmp) / "demo.db"), budget))
    else:
        run = _guard(lambda: run_demo(writable_store(given), budget))
    if as_json:
        _print_json(run.to_dict())
    else:
        console, buf = _buffered_console()
        _print_report(console, run, given)
        _write(buf)
    if not run.ok:
        raise typer.Exit(1)


def _said(t: DemoTurn) -> Text:
    """The turn's left cell: the tools the model called since the last request
    (each through the policy gate; a repeated call once, counted), then what the
    user said."""
    text = Text()
    calls: dict[tuple[str, bool], int] = {}
    for g in t.gate:
        calls[g.tool, g.allowed] = calls.get((g.tool, g.allowed), 0) + 1
    if calls:
        text.append("model calls ", style="dim")
        for i, ((tool, allowed), n) in enumerate(calls.items()):
            text.append(", " if i else "", style="dim")
            text.append(tool + (f" ×{n}" if n > 1 else ""), style="dim" if allowed else "red")
            if not allowed:
                text.append(" (Blocked by the gate)", style="red")
        text.append("\n")
    if t.user is None:
        text.append("(tool results only: no user message)", style="dim")
    else:
        text.append("user: ", style="bold")
        text.append(t.user)
    return text


def _sent(t: DemoTurn) -> Text:
    """The turn's right cell: what ctxwise made of it."""
    tr = t.trace
    text = Text(t.note, style="bold")
    label = tr.route.label or f"refused ({tr.route.reason})"
    text.append(f"\nroute {label}{' ↺' if tr.route.reused else ''}")
    text.append(f" → {', '.join(tr.chosen) or '(none)'}")
    if tr.cleared is not None:
        text.append(f"\ncleared {tr.cleared.tool_uses} tool results (−{tr.cleared.tokens_freed:,})")
    if tr.compacted is not None:
        text.append(f"\ncompacted {tr.compacted.summarized_messages} messages")
    text.append(f"\n{tr.tokens.total:,} of {tr.tokens.budget:,} tokens")
    present = sum(c.present for c in t.needs)
    mark = "✓" if t.ok else "✗"
    text.append(f"\n{mark} {present}/{len(t.needs)} needed", style="green" if t.ok else "red")
    return text


def _hanging(label: str, text: Text) -> Table:
    """``label`` then ``text``, wrapped under itself (a hanging indent)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(label, text)
    return grid


def _print_report(console: Any, run: DemoRun, store: str | None) -> None:
    console.rule("[bold]ctxwise demo[/bold]: order 4417, twelve turns, one ctxwise.Engine")
    console.print(_hanging("system:", Text(SYSTEM)))
    console.print()
    table = _table(show_lines=True)
    table.add_column("turn", justify="right", no_wrap=True)
    _text_col(table, "what happened", ratio=3)
    _text_col(table, "what ctxwise sent", ratio=2, min_width=24)
    for t in run.turns:
        table.add_row(str(t.turn), _said(t), _sent(t))
    console.print(table)
    console.print(
        Text(
            "route LABEL → the sources that label loads (↺: a tool-result turn, routed "
            "with its user message); cleared: old tool results (tokens freed); needed: "
            "what the model needs on the turn, found in the request",
            style="dim",
        )
    )
    for t in run.turns:
        for c in t.needs:
            if not c.present:
                console.print(Text(f"✗ turn {t.turn}: the request lacks {c.text!r}", style="red"))
    console.print()
    for t in run.turns:
        if t.trace.route.label == "chitchat":
            skipped = Text(f"skipped {', '.join(t.trace.skipped)}", style="dim")
            console.print(_hanging(f"turn {t.turn} (chitchat):", skipped))
    for t in run.turns:
        if t.note == "memory recall":
            where = "; ".join(f"{c.text!r} in {', '.join(c.found_in) or '-'}" for c in t.needs)
            console.print(_hanging(f"turn {t.turn} (memory recall):", Text(where, style="dim")))
    console.print()
    console.print("[bold]policy gate[/bold] (Engine.check_tool before every tool call):")
    for t in run.turns:
        for g in t.gate:
            if g.tool in ("issue_refund", "verify_address"):
                args = ", ".join(f"{k}={v!r}" for k, v in g.input.items())
                verdict = "Allowed" if g.allowed else f"Blocked: {g.reason}"
                said = Text(f"{g.tool}({args}) → {verdict}", style="green" if g.allowed else "red")
                console.print(_hanging(f"  before turn {t.turn}:", said))
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
    newest = data["newest_first"]
    missed = "; ".join(
        f"turn {b.turn}: {c.text!r}" for b in run.newest for c in b.needs if not c.present
    )
    console.print(
        f"[bold]same budget, newest first[/bold] (the prompt, then the newest messages "
        f"that fit {run.budget:,} tokens; no pinning, no routing): "
        f"{newest['needs_present']}/{newest['needs_total']} needed, "
        f"{newest['tokens']:,} input tokens" + (f"; it lacks {missed}" if missed else "")
    )
    console.print()
    _print_next(console, store)


def _print_next(console: Any, store: str | None) -> None:
    """The last lines: the command to try next (each on a line of its own)."""
    if store is None:
        console.print("next: keep the sessions, then read what any turn did:")
        console.print(Text("  ctxwise demo --store demo.db"))
        console.print(Text(f"  ctxwise trace {SESSION_ID} --store demo.db"))
        console.print(Text(f"  ctxwise explain {SESSION_ID} --store demo.db"))
        return
    # a password in a database URL is not echoed: the URL is shown as a placeholder
    shown = store if "://" not in store or sqlite_path(store) is not None else "URL"
    console.print(
        Text(
            f"sessions {SESSION_ID!r} and {SESSION_ID + '-kitchen-sink'!r} kept in "
            f"{shown}; next, read what any turn did:"
        )
    )
    # one line whatever its length, so it can be copied as it is
    console.print(Text(f"  ctxwise trace {SESSION_ID} --store {shown}"), soft_wrap=True)
    console.print(Text(f"  ctxwise explain {SESSION_ID} --store {shown}"), soft_wrap=True)
