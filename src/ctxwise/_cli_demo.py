"""``ctxwise demo``: the one place that shows the whole engine at work."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ctxwise._cli_util import (
    _assembly_table,
    _buffered_console,
    _guard,
    _print_json,
    _window_bar,
    _write,
)
from ctxwise.tokens import get_counter


def demo_cmd(
    budget: Annotated[int, typer.Option(help="Token budget for every turn's window.")] = 700,
    counter: Annotated[str, typer.Option(help="char | word | tiktoken.")] = "char",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print every turn's report as JSON.")
    ] = False,
) -> None:
    """Route, assemble, compact and enforce: the whole engine on scripted sessions.

    Five queries go only to the sources they need; a coding agent's five turns are
    assembled under a budget with a report per turn; a support agent's rule survives
    compaction and blocks a refund in code (the Northwind scenario).
    """
    from ctxwise._demo import ROUTING_QUERIES, routing_pipeline, run_demo
    from ctxwise._northwind import run_northwind

    steps = _guard(lambda: run_demo(budget, get_counter(counter)))
    northwind = _guard(lambda: run_northwind(counter=get_counter(counter)))
    pipeline = routing_pipeline()
    turns = [pipeline.turn(q, baseline=True) for q in ROUTING_QUERIES]
    if as_json:
        _print_json(
            {
                "routing": [
                    {"query": q, **t.to_dict()} for q, t in zip(ROUTING_QUERIES, turns, strict=True)
                ],
                "session": [
                    {
                        "turn": s.turn,
                        "task": s.task,
                        "kitchen_sink_tokens": s.kitchen_sink_tokens,
                        "window_tokens": s.assembly.tokens + s.assembly.budget.reserve,
                        **s.assembly.to_dict(),
                    }
                    for s in steps
                ],
                "northwind": northwind.to_dict(),
            }
        )
        return
    console, buf = _buffered_console()
    _print_routing(console, turns, ROUTING_QUERIES)
    console.rule("[bold]2. assemble[/bold]: a coding agent fixes a rounding bug in five turns")
    for s in steps:
        a = s.assembly
        window = a.tokens + a.budget.reserve
        console.print(_assembly_table(a, f"turn {s.turn}: {s.task}"))
        console.print(_window_bar(a))
        console.print(
            f"window {window:,} of {a.budget.tokens:,} tokens · "
            f"kitchen sink {s.kitchen_sink_tokens:,} · kept {len(a.included)}, "
            f"truncated {len(a.truncated)}, dropped {len(a.dropped)}\n"
        )
    total_window = sum(s.assembly.tokens + s.assembly.budget.reserve for s in steps)
    total_sink = sum(s.kitchen_sink_tokens for s in steps)
    saved = 1 - total_window / total_sink if total_sink else 0.0
    console.print(
        f"[bold]session[/bold]: {total_window:,} tokens sent vs {total_sink:,} "
        f"for the kitchen sink ({saved:.0%} smaller)"
    )
    last = steps[-1].request
    system = last.get("system", [])
    cached = [i for i, b in enumerate(system) if "cache_control" in b]
    console.print(
        f"rendered Anthropic request: {len(system)} stable system block(s), cache breakpoint after "
        f"block {cached[-1] + 1 if cached else '-'}, task last in the user message\n"
    )
    _print_northwind(console, northwind)
    _write(buf)


def _print_northwind(console: Any, run: Any) -> None:
    from ctxwise._northwind import RULE

    console.rule(
        "[bold]3. compact and enforce[/bold]: a rule stated at step 12 survives compaction "
        "and blocks a refund in code"
    )
    table = Table(title_justify="left")
    for col, justify in (("step", "right"), ("actor", "left"), ("event", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    table.add_column("tokens", justify="right")
    for s in run.steps:
        style = {False: "red", True: "green"}.get(s.allowed, "")
        if s.step in (1, 12) or s.step >= 23:
            table.add_row(str(s.step), s.actor, Text(s.event, style=style), f"{s.tokens:,}")
        elif s.step == 2:
            table.add_row("…", "", Text("(steps 2–11: order, customer, tracking, policy)"), "")
        elif s.step == 13:
            table.add_row("…", "", Text("(steps 13–22: carrier trace, tracking, tickets)"), "")
    console.print(table)
    kept = "yes" if all(run.rule_in_window) else "NO"
    console.print(
        f"rule in every window after compaction, verbatim: {kept} · "
        f"archived {run.messages_before_compaction} messages as {run.compaction.archive_id}"
    )
    console.print(Text(f"rule: {RULE}"))


def _print_routing(console: Any, turns: Any, queries: Any) -> None:
    console.rule(
        "[bold]1. route[/bold]: load only the sources a query needs (tokens = words × 1.3)"
    )
    table = Table(title_justify="left")
    for col, justify in (
        ("query", "left"),
        ("label", "left"),
        ("sources", "left"),
        ("routed", "right"),
        ("kitchen sink", "right"),
        ("saved", "right"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for q, t in zip(queries, turns, strict=True):
        sink = t.trace.kitchen_sink_tokens or 0
        table.add_row(
            Text(q),
            t.decision.label or f"refused: {t.decision.reason.value}",
            ", ".join(t.sources) or "(none)",
            f"{t.trace.total_tokens:,}",
            f"{sink:,}",
            f"{1 - t.trace.total_tokens / sink:.0%}" if sink else "-",
        )
    console.print(table)
    routed = sum(t.trace.total_tokens for t in turns)
    sink_total = sum(t.trace.kitchen_sink_tokens or 0 for t in turns)
    console.print(
        f"routed {routed:,} tokens vs {sink_total:,} for the kitchen sink "
        f"({1 - routed / sink_total:.0%} smaller); every coding turn still carries code and tools\n"
    )
