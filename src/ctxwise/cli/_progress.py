"""Progress on standard error, for the commands that can run for seconds.

Library functions that loop (``evaluate``, ``evaluate_recall``, ``evaluate_handoff``,
``replay``, ``evaluate_tool_search``) take an optional ``progress`` callback,
called with the work done and the work in all, and never print. A command passes
them the callback :func:`progress` gives: a rich progress bar on standard error,
removed when the work ends, so only the report stays on the screen.

The bar is drawn only when standard error is a terminal and the command was not
asked for ``--json``: a pipe, a log file or a program reading the JSON gets no
control characters. Standard output is never touched (the commands buffer their
report and write it at the end).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

__all__ = ["ProgressFn", "progress", "scaled"]

ProgressFn = Callable[[int, int], None]
"""``report(done, total)``: the callback library functions take as ``progress``."""


@contextmanager
def progress(
    what: str, *, enabled: bool = True, console: Console | None = None
) -> Iterator[ProgressFn | None]:
    """A callback that draws ``what`` and a bar on standard error while the block
    runs, or ``None`` (draw nothing) when ``enabled`` is false (``--json``) or
    standard error is not a terminal. Until the callback is first called the bar
    is a spinner with the time elapsed, so a step that reports nothing (a fit)
    still shows the command is working."""
    out = console if console is not None else Console(stderr=True)
    if not enabled or not out.is_terminal:
        yield None
        return
    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=out,
        transient=True,
        redirect_stdout=False,  # the report is written to stdout after the bar is gone
    )
    task = bar.add_task(what, total=None)

    def report(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield report


def scaled(report: ProgressFn | None, offset: int, parts: int) -> ProgressFn | None:
    """``report`` for one of ``parts`` equal passes over the same work (the
    ``offset``-th, 0-based), so two runs of one loop fill one bar."""
    if report is None:
        return None

    def part(done: int, total: int) -> None:
        report(offset * total + done, parts * total)

    return part
