"""The Claude Code reader's branch walk stays linear however the links jump.

A link to no entry continues the walk at the closest earlier entry not yet on
it; finding that entry by stepping over the ones already on the chain made a
crafted file (each missing link sitting just above a growing block of entries
already walked) cost time quadratic in its length. The cost is measured here in
lines of the reader executed (deterministic, no clock): doubling the file must
about double it.
"""

from __future__ import annotations

import json
import sys
from types import FrameType
from typing import Any

from ctxwise.formats import _claude_code_events, claude_code
from ctxwise.formats.claude_code import read_claude_code_lines

_READER_FILES = {claude_code.__file__, _claude_code_events.__file__}


def _event(uuid: str, parent: str | None, n: int) -> str:
    return json.dumps(
        {
            "type": "user",
            "uuid": uuid,
            "parentUuid": parent,
            "message": {"role": "user", "content": f"message {n}"},
        }
    )


def _zigzag(half: int) -> list[str]:
    """2*half+1 entries: the leaf links to the middle one, whose link names no
    entry; the walk goes down one, which links up past the block walked, whose
    link names no entry again, and so on outwards."""
    middle = half
    links: dict[int, str | None] = {middle: "missing", 0: None, 2 * half: f"u{middle}"}
    for k in range(1, half):
        links[middle - k] = f"u{middle + k}"
        links[middle + k] = "missing"
    return [_event(f"u{p}", links[p], p) for p in range(2 * half + 1)]


def _lines_run(lines: list[str]) -> tuple[int, int, int]:
    count = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if frame.f_code.co_filename not in _READER_FILES:
            return None
        if event == "line":
            count += 1
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        transcript, report = read_claude_code_lines(lines)
    finally:
        sys.settrace(previous)
    return count, len(transcript.messages), report.unresolved_links


def test_zigzag_links_are_read_whole() -> None:
    _, messages, unresolved = _lines_run(_zigzag(50))
    assert messages == 101  # every entry is on the one chain
    assert unresolved == 50


def test_branch_walk_is_linear_in_the_file() -> None:
    small, _, _ = _lines_run(_zigzag(400))
    large, _, _ = _lines_run(_zigzag(800))
    # linear: about 2x; the step-over scan made it about 3.5x at these sizes
    assert large < 2.5 * small, (small, large)
