"""``ctxwise assemble`` and ``ctxwise inspect``: a window packed under a budget, and
where a transcript's tokens go."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from ctxwise import (
    Assembly,
    Budget,
    BudgetError,
    UsageError,
    assemble,
    composition,
    get_counter,
)
from ctxwise.cli._util import (
    MaxIdOpt,
    _assembly_table,
    _bar,
    _buffered_console,
    _clip,
    _guard,
    _num_col,
    _print_json,
    _table,
    _text_col,
    _window_bar,
    _write,
    max_input_bytes,
    max_input_option,
)
from ctxwise.formats import FORMATS, MAX_ID_CHARS, MAX_TRANSCRIPT_BYTES, read_transcript_file
from ctxwise.messages import Placement

__all__ = ["assemble_cmd", "inspect_cmd"]


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
    max_input: Annotated[
        str | None, max_input_option("a transcript file", MAX_TRANSCRIPT_BYTES)
    ] = None,
    max_id_chars: MaxIdOpt = MAX_ID_CHARS,
    as_json: Annotated[bool, typer.Option("--json", help="Print the composition as JSON.")] = False,
) -> None:
    """Show where a transcript's tokens go, like Claude Code's /context.

    Ids, names and previews longer than 200 characters are cut with an ellipsis in
    the text report; --json prints them whole."""

    def run() -> tuple[Any, str, str, int]:
        if format not in FORMATS:
            raise UsageError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
        if top < 0:
            raise UsageError("--top must be 0 or more")
        limit = max_input_bytes(max_input, MAX_TRANSCRIPT_BYTES)
        file = read_transcript_file(
            transcript,
            format,  # type: ignore[arg-type]
            max_bytes=limit,
            max_id_chars=max_id_chars,
        )
        items = file.transcripts
        if not -len(items) <= index < len(items):
            raise UsageError(
                f"{transcript} holds {len(items)} transcript(s); --index {index} is out of range"
            )
        t = items[index].live_window() if live else items[index]
        fmt = file.format
        placement: Placement = "openai" if fmt == "openai" else "anthropic"
        comp = composition(t, get_counter(counter), top=top, placement=placement)
        return comp, fmt, file.shape, len(items)

    comp, fmt, shape, count = _guard(run)
    if as_json:
        _print_json(
            {
                "source": str(transcript),
                "format": fmt,
                "shape": shape,
                "transcripts": count,
                "index": index % count,
                **comp.to_dict(),
            }
        )
        return
    console, buf = _buffered_console()
    console.print(
        f"[bold]{escape(str(transcript))}[/bold] ({fmt} {shape}"
        + (f", transcript {index % count} of {count}" if count > 1 else "")
        + f"): {comp.messages:,} messages, "
        f"{comp.total_tokens:,} tokens ({comp.counter}), {comp.compactions} compaction(s)"
    )
    kinds = sorted(((k, v) for k, v in comp.by_kind.items() if v), key=lambda kv: -kv[1])
    console.print(_bar(kinds, comp.total_tokens))
    table = _table("by kind")
    _text_col(table, "kind")
    _num_col(table, "tokens")
    _num_col(table, "share")
    for k, v in kinds:
        table.add_row(k, f"{v:,}", f"{v / comp.total_tokens:.1%}" if comp.total_tokens else "-")
    console.print(table)
    if comp.tools:
        tools = _table("tokens by tool (inputs + results)")
        _text_col(tools, "tool")
        for col in ("calls", "inputs", "results", "tokens"):
            _num_col(tools, col)
        for name, t in list(comp.tools.items())[:15]:
            tools.add_row(
                Text(name), f"{t.calls:,}", f"{t.inputs:,}", f"{t.results:,}", f"{t.tokens:,}"
            )
        console.print(tools)
    if comp.largest:
        big = _table(f"{len(comp.largest)} largest items")
        _num_col(big, "msg")
        _text_col(big, "kind")
        _text_col(big, "tool")
        _num_col(big, "tokens")
        _text_col(big, "preview", ratio=1)
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
                Text(
                    f"  message {p.message_index}: {p.kind.value} {_clip(p.tool_use_id)} — "
                    + _clip(p.detail)
                )
            )
    else:
        console.print("[green]no tool pairing problems[/green]")
    _write(buf)
