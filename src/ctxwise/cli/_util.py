"""Helpers shared by the CLI modules: error mapping and buffered output."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import typer
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
