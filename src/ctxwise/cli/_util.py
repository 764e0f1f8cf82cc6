"""Helpers shared by the CLI modules: error mapping, buffered output and tables.

Every report table is made with :func:`_table` and its columns with
:func:`_text_col` (the cell wraps at spaces and folds a long word) or
:func:`_num_col` (a figure, kept on one line), so a report fits an 80-column
terminal: a table that does not fit grows taller instead of losing text. Only a
cell longer than :data:`MAX_CELL_CHARS` is cut, with an ellipsis (:func:`_clip`):
an id or a name of megabytes would take minutes to lay out and screens to show.
``--json`` output is never cut.

:func:`max_input_option` and :func:`max_input_bytes` are the ``--max-input-bytes``
option of the commands that read a transcript or a catalog; ``MaxIdOpt`` is the
``--max-id-chars`` option of those that read a transcript.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar

import typer
from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.style import StyleType
from rich.table import Table
from rich.text import Text

from ctxwise._io import format_size
from ctxwise.assembly import Assembly
from ctxwise.errors import CtxwiseError, UsageError

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


MAX_CELL_CHARS = 200
"""The longest text a report cell or line shows; a longer one is cut to this many
characters, the last an ellipsis (``--json`` prints it whole)."""


def _clip(text: str, limit: int = MAX_CELL_CHARS) -> str:
    """``text``, cut to ``limit`` characters with an ellipsis when it is longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip_cell(cell: Any) -> Any:
    """A table cell with its text cut by :func:`_clip` (a long string cell is shown
    as plain text, its styles kept for a :class:`~rich.text.Text`)."""
    if isinstance(cell, Text) and len(cell.plain) > MAX_CELL_CHARS:
        cut = cell[: MAX_CELL_CHARS - 1]
        cut.append("…")
        return cut
    if isinstance(cell, str) and len(cell) > MAX_CELL_CHARS:
        return Text(_clip(cell))
    return cell


class _ReportTable(Table):
    """A rich table whose cells are cut to :data:`MAX_CELL_CHARS` characters."""

    def add_row(
        self,
        *renderables: RenderableType | None,
        style: StyleType | None = None,
        end_section: bool = False,
    ) -> None:
        cells = (_clip_cell(r) for r in renderables)
        super().add_row(*cells, style=style, end_section=end_section)


def _table(title: str | None = None, **options: Any) -> Table:
    """A report table, its title shown as text (a file name or a session id can
    hold ``[...]``, which is not rich markup here), left-aligned and on one line
    when the terminal is wide enough (the table is at least as wide as its title).
    Its title and cells are cut to :data:`MAX_CELL_CHARS` characters."""
    if title is not None:
        title = _clip(title)
        options.setdefault("min_width", cell_len(title))
    return _ReportTable(
        title=None if title is None else escape(title), title_justify="left", **options
    )


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", re.IGNORECASE)


def parse_size(value: str, option: str) -> int:
    """A size in bytes from ``value``: a whole number of bytes, or a number with a
    unit (``KB``, ``MB``, ``GB`` in powers of ten; ``KiB``, ``MiB``, ``GiB`` in powers
    of two; any case). Raises :class:`UsageError` naming ``option`` otherwise."""
    m = _SIZE.fullmatch(value)
    unit = _UNITS.get(m.group(2).lower()) if m else None
    if m is None or unit is None or (unit == 1 and "." in m.group(1)):
        raise UsageError(
            f"{option} takes a size: bytes, or a number with KB, MB, GB, KiB, MiB or GiB "
            f"(e.g. 512MiB), got {value!r}"
        )
    size = int(float(m.group(1)) * unit) if "." in m.group(1) else int(m.group(1)) * unit
    if size < 1:
        raise UsageError(f"{option} must be at least 1 byte, got {value!r}")
    return size


def max_input_option(what: str, default: int) -> Any:
    """The ``--max-input-bytes`` option of a command that reads ``what``."""
    return typer.Option(
        "--max-input-bytes",
        metavar="SIZE",
        help=f"Refuse {what} larger than this, before reading it (bytes, or with KB, MB, "
        f"GB, KiB, MiB, GiB; default {format_size(default)}).",
    )


MaxIdOpt = Annotated[
    int,
    typer.Option(
        "--max-id-chars",
        min=1,
        help="Refuse a transcript holding a longer id (a message's, a tool call's, the "
        "one a tool result answers).",
    ),
]


def max_input_bytes(value: str | None, default: int) -> int:
    """The limit ``--max-input-bytes`` gave, else ``default``."""
    return default if value is None else parse_size(value, "--max-input-bytes")


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
