"""Helpers shared by the CLI modules: error mapping, buffered output and tables.

Every report table is made with :func:`_table` and its columns with
:func:`_text_col` (the cell wraps at spaces and folds a long word, never cut with
an ellipsis) or :func:`_num_col` (a figure, kept on one line), so a report fits an
80-column terminal: a table that does not fit grows taller instead of losing text.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import typer
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ctxwise.assembly import Assembly
from ctxwise.errors import CtxwiseError

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


def _table(title: str | None = None, **options: Any) -> Table:
    """A report table, its title shown as text (a file name or a session id can
    hold ``[...]``, which is not rich markup here), left-aligned and on one line
    when the terminal is wide enough (the table is at least as wide as its title)."""
    if title is not None:
        options.setdefault("min_width", cell_len(title))
    return Table(title=None if title is None else escape(title), title_justify="left", **options)


def _text_col(table: Table, header: str, **options: Any) -> None:
    """A column of text: wrapped at spaces, a word longer than the column folded."""
    table.add_column(header, overflow="fold", **options)


def _num_col(table: Table, header: str, **options: Any) -> None:
    """A column of figures: right-aligned, never wrapped (the text columns give way)."""
    table.add_column(header, justify="right", no_wrap=True, **options)


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
    table = _table(title)
    _text_col(table, "section")
    _num_col(table, "prio")
    _text_col(table, "flags")
    _num_col(table, "tokens")
    _num_col(table, "asked")
    _text_col(table, "status")
    _text_col(table, "why")
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
