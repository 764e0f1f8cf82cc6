"""The ``ctxwise`` command line. It uses only the public API.

Every error ctxwise raises on purpose (bad spec, unknown format, truncated
JSONL, budget of 0, binary file, …) prints one line on stderr and exits with
code 2; nothing is printed on stdout in that case.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ctxwise import (
    Assembly,
    Budget,
    BudgetError,
    CtxwiseError,
    UsageError,
    assemble,
    composition,
    get_counter,
    read_transcripts,
)
from ctxwise.formats import FORMATS
from ctxwise.messages import Placement

app = typer.Typer(
    name="ctxwise",
    help="Decide what enters an LLM's context window, and show why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_PALETTE = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta")
T = TypeVar("T")


def _fail(message: str) -> typer.Exit:
    typer.echo(f"ctxwise: error: {message}", err=True)
    return typer.Exit(2)


def _guard(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except CtxwiseError as exc:
        raise _fail(str(exc)) from None


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _write(buf: io.StringIO) -> None:
    sys.stdout.write(buf.getvalue())


def _buffered_console() -> tuple[Console, io.StringIO]:
    """A console that renders into memory, so a failure never leaves half a report."""
    probe = Console()
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=probe.width,
        force_terminal=probe.is_terminal,
        color_system=probe.color_system,  # type: ignore[arg-type]
        no_color=probe.no_color,
    )
    return console, buf


def _bar(parts: Sequence[tuple[str, int]], total: int, width: int = 60) -> Text:
    """A one-line bar of ``parts`` over ``total`` tokens, with a legend."""
    bar = Text()
    used = 0
    shown = [(label, n) for label, n in parts if n > 0]
    for i, (_label, n) in enumerate(shown):
        cells = max(1, round(width * n / total)) if total else 0
        cells = min(cells, width - used)
        bar.append("█" * cells, style=_PALETTE[i % len(_PALETTE)])
        used += cells
    bar.append("░" * max(0, width - used), style="dim")
    legend = Text("\n")
    for i, (label, n) in enumerate(shown):
        legend.append("■ ", style=_PALETTE[i % len(_PALETTE)])
        legend.append(f"{label} {n:,}  ")
    return bar + legend


def _assembly_table(result: Assembly, title: str) -> Table:
    table = Table(title=escape(title), title_justify="left")
    for col, justify in (
        ("section", "left"),
        ("prio", "right"),
        ("flags", "left"),
        ("tokens", "right"),
        ("asked", "right"),
        ("status", "left"),
        ("why", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    style = {"included": "green", "truncated": "yellow", "dropped": "red"}
    for r in result.reports:
        s = r.section
        flags = ",".join(
            f for f, on in (("pin", s.pinned), ("stable", s.stable), ("cut", s.truncatable)) if on
        )
        table.add_row(
            Text(s.name),
            f"{s.priority:g}",
            flags,
            f"{r.tokens:,}",
            f"{r.original_tokens:,}",
            Text(r.status.value, style=style[r.status.value]),
            Text(r.reason),
        )
    return table


def _window_bar(result: Assembly) -> Text:
    parts = [(s.name, result.report(s.name).tokens) for s in result.sections]
    if result.budget.reserve:
        parts.append(("reserved", result.budget.reserve))
    return _bar(parts, result.budget.tokens)


@app.command("assemble")
def assemble_cmd(
    spec: Annotated[Path, typer.Argument(help="YAML or JSON file of sections and a budget.")],
    budget: Annotated[int | None, typer.Option(help="Override the spec's budget (tokens).")] = None,
    counter: Annotated[
        str | None, typer.Option(help="char | word | tiktoken (default: spec's, else char).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Assemble sections under a token budget and report every decision."""

    def run() -> Assembly:
        if budget is not None and budget <= 0:
            raise BudgetError(budget, "must be greater than 0")
        from ctxwise.spec import load_spec

        spec_obj, sections = load_spec(spec)
        ctr = get_counter(counter or spec_obj.counter)
        b = spec_obj.to_budget(budget)
        return assemble(sections, Budget(b.tokens, b.reserve), ctr, order=spec_obj.order)

    result = _guard(run)
    if as_json:
        _print_json(result.to_dict())
        return
    console, buf = _buffered_console()
    console.print(
        _assembly_table(
            result,
            f"{spec} — {result.tokens:,} of {result.budget.tokens:,} tokens ({result.counter})",
        )
    )
    console.print(_window_bar(result))
    _write(buf)


@app.command("inspect")
def inspect_cmd(
    transcript: Annotated[
        Path, typer.Argument(help="A transcript file (JSON or Claude Code JSONL).")
    ],
    format: Annotated[
        str, typer.Option("--format", help=f"One of: {', '.join(FORMATS)}.")
    ] = "auto",
    counter: Annotated[str, typer.Option(help="char | word | tiktoken.")] = "char",
    index: Annotated[int, typer.Option(help="Which transcript of a multi-transcript file.")] = 0,
    live: Annotated[
        bool, typer.Option("--live", help="Only the window after the last compaction.")
    ] = False,
    top: Annotated[int, typer.Option(help="How many of the largest items to list.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print the composition as JSON.")] = False,
) -> None:
    """Show where a transcript's tokens go, like Claude Code's /context."""

    def run() -> tuple[Any, str]:
        if format not in FORMATS:
            raise UsageError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
        if top < 0:
            raise UsageError("--top must be 0 or more")
        items = read_transcripts(transcript, format)  # type: ignore[arg-type]
        if not -len(items) <= index < len(items):
            raise UsageError(
                f"{transcript} holds {len(items)} transcript(s); --index {index} is out of range"
            )
        t = items[index].live_window() if live else items[index]
        fmt = t.format or format
        placement: Placement = "openai" if fmt == "openai" else "anthropic"
        return composition(t, get_counter(counter), top=top, placement=placement), fmt

    comp, fmt = _guard(run)
    if as_json:
        _print_json({"source": str(transcript), "format": fmt, **comp.to_dict()})
        return
    console, buf = _buffered_console()
    console.print(
        f"[bold]{escape(str(transcript))}[/bold] ({fmt}): {comp.messages:,} messages, "
        f"{comp.total_tokens:,} tokens ({comp.counter}), {comp.compactions} compaction(s)"
    )
    kinds = sorted(((k, v) for k, v in comp.by_kind.items() if v), key=lambda kv: -kv[1])
    console.print(_bar(kinds, comp.total_tokens))
    table = Table(title="by kind", title_justify="left")
    table.add_column("kind")
    table.add_column("tokens", justify="right")
    table.add_column("share", justify="right")
    for k, v in kinds:
        table.add_row(k, f"{v:,}", f"{v / comp.total_tokens:.1%}" if comp.total_tokens else "-")
    console.print(table)
    if comp.by_tool:
        tools = Table(title="tool results by tool", title_justify="left")
        tools.add_column("tool")
        tools.add_column("tokens", justify="right")
        for name, v in list(comp.by_tool.items())[:15]:
            tools.add_row(Text(name), f"{v:,}")
        console.print(tools)
    if comp.largest:
        big = Table(title=f"{len(comp.largest)} largest items", title_justify="left")
        for col in ("msg", "kind", "tool", "tokens", "preview"):
            big.add_column(
                col, justify="right" if col in ("msg", "tokens") else "left", overflow="ellipsis"
            )
        for it in comp.largest:
            big.add_row(
                str(it.message_index),
                it.kind,
                Text(it.tool or ""),
                f"{it.tokens:,}",
                Text(it.preview),
            )
        console.print(big)
    if comp.problems:
        console.print(f"[red]{len(comp.problems)} pairing problem(s):[/red]")
        for p in comp.problems:
            console.print(
                Text(f"  message {p.message_index}: {p.kind.value} {p.tool_use_id} — {p.detail}")
            )
    else:
        console.print("[green]no tool pairing problems[/green]")
    _write(buf)


@app.command("demo")
def demo_cmd(
    budget: Annotated[int, typer.Option(help="Token budget for every turn's window.")] = 700,
    counter: Annotated[str, typer.Option(help="char | word | tiktoken.")] = "char",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print every turn's report as JSON.")
    ] = False,
) -> None:
    """Replay a scripted agent session and show, per turn, what entered the window."""
    from ctxwise.demo import run_demo

    steps = _guard(lambda: run_demo(budget, get_counter(counter)))
    if as_json:
        _print_json(
            [
                {
                    "turn": s.turn,
                    "task": s.task,
                    "kitchen_sink_tokens": s.kitchen_sink_tokens,
                    "window_tokens": s.assembly.tokens + s.assembly.budget.reserve,
                    **s.assembly.to_dict(),
                }
                for s in steps
            ]
        )
        return
    console, buf = _buffered_console()
    console.rule("[bold]ctxwise demo[/bold]: a coding agent fixes a rounding bug in five turns")
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
        f"block {cached[-1] + 1 if cached else '-'}, task last in the user message"
    )
    _write(buf)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the app, mapping usage errors to one line and exit code 2."""
    # Transcripts can hold lone surrogates (a truncated emoji); print them escaped
    # rather than fail half-way through a report.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    args = list(argv) if argv is not None else sys.argv[1:]
    if not args:
        args = ["--help"]
    try:
        rv = app(args=args, prog_name="ctxwise", standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("ctxwise: aborted", err=True)
        sys.exit(1)
    except Exception as exc:
        # Usage errors of the CLI parser (an unknown option, a missing argument, a
        # value of the wrong type). Typer has shipped these as click's exceptions
        # and, since 0.29, as its own vendored copies: match on their shape.
        format_message = getattr(exc, "format_message", None)
        if callable(format_message) and hasattr(exc, "exit_code"):
            typer.echo(f"ctxwise: error: {format_message()}", err=True)
            sys.exit(2)
        raise
    if isinstance(rv, int) and rv:
        sys.exit(rv)


if __name__ == "__main__":  # pragma: no cover
    main()
