"""Reader for Claude Code session transcripts (JSONL, one event a line).

What becomes a message:

- ``user`` and ``assistant`` events carry an Anthropic ``message``. Claude Code
  writes one event per content block of a streamed response, all with the same
  ``message.id``, and may interleave the tool results of that response between
  them. The reader rebuilds the API's view: one assistant message per
  ``message.id`` and one user message holding the tool results that answer it.
- A ``user`` event with ``isCompactSummary`` becomes a message of kind
  ``compact_summary``.
- A ``system`` event with ``subtype: "compact_boundary"`` becomes a
  :class:`~ctxwise.messages.CompactBoundary` on the transcript.

Skipped (counted in :attr:`ClaudeCodeReadReport.skipped`): ``progress``,
``file-history-snapshot``, ``queue-operation`` and other bookkeeping events, and
``system`` events other than compaction boundaries (hook summaries, turn
durations, local command echoes), which the model never sees.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxwise.errors import FormatError
from ctxwise.formats._extra import keep
from ctxwise.formats.anthropic import decode_block
from ctxwise.messages import (
    CompactBoundary,
    ContentBlock,
    Message,
    MessageKind,
    TextBlock,
    ToolResultBlock,
    Transcript,
)

__all__ = ["ClaudeCodeReadReport", "read_claude_code", "read_claude_code_lines"]


@dataclass(slots=True)
class ClaudeCodeReadReport:
    """What the reader did with each event type."""

    events: int = 0
    skipped: Counter[str] = field(default_factory=Counter)


def read_claude_code(text: str, *, source: str = "claude-code") -> Transcript:
    """A transcript from the full text of a Claude Code JSONL file."""
    # JSONL lines end in "\n" only: str.splitlines would also split on U+2028,
    # U+2029 and U+0085, which JSON strings may hold raw.
    transcript, _ = read_claude_code_lines(text.split("\n"), source=source)
    return transcript


def _parse_line(line: str, lineno: int, source: str) -> Mapping[str, Any]:
    try:
        event = json.loads(line)
    except RecursionError:
        raise FormatError(source, "JSON nested too deeply", line=lineno) from None
    except json.JSONDecodeError as exc:
        raise FormatError(
            source, f"invalid JSON ({exc.msg}); the line may be truncated", line=lineno
        ) from None
    if not isinstance(event, Mapping):
        raise FormatError(source, "each line must be a JSON object", line=lineno)
    return event


def read_claude_code_lines(
    lines: Iterable[str], *, source: str = "claude-code"
) -> tuple[Transcript, ClaudeCodeReadReport]:
    """A transcript and a read report from JSONL lines (blank lines ignored)."""
    report = ClaudeCodeReadReport()
    out: list[Message] = []
    boundaries: list[CompactBoundary] = []
    open_assistant: int | None = None  # index in out of the assistant message being built
    open_results: int | None = None  # index in out of the user message collecting its results
    events = [
        (lineno, _parse_line(line, lineno, source))
        for lineno, line in enumerate(lines, start=1)
        if line.strip()
    ]
    # Older Claude Code versions wrote subagent (sidechain) events into the main
    # session file; they are not part of the main conversation. A subagent's own
    # file holds sidechain events only, and those are its conversation.
    has_main = any(
        e.get("type") in ("user", "assistant") and not e.get("isSidechain") for _, e in events
    )
    for lineno, event in events:
        report.events += 1
        etype = event.get("type")
        if has_main and event.get("isSidechain") and etype in ("user", "assistant"):
            report.skipped["sidechain"] += 1
            continue
        if etype == "system" and event.get("subtype") == "compact_boundary":
            meta = event.get("compactMetadata") or {}
            pre = meta.get("preTokens") if isinstance(meta, Mapping) else None
            boundaries.append(
                CompactBoundary(
                    index=len(out),
                    trigger=_text(meta.get("trigger")) if isinstance(meta, Mapping) else None,
                    pre_tokens=_count(pre),
                    timestamp=_text(event.get("timestamp")),
                )
            )
            open_assistant = open_results = None
            continue
        if etype not in ("user", "assistant"):
            report.skipped[
                str(etype) if etype != "system" else f"system:{event.get('subtype')}"
            ] += 1
            continue
        raw = event.get("message")
        if not isinstance(raw, Mapping) or "content" not in raw:
            raise FormatError(source, f"{etype} event without a message", line=lineno)
        blocks = _blocks(raw["content"], source, lineno)
        if etype == "assistant":
            mid = _text(raw.get("id"))
            same_stream = (
                mid is not None and mid == out[open_assistant].id
                if open_assistant is not None
                else False
            )
            # without ids, only directly consecutive assistant events are one message
            no_ids = mid is None and open_assistant == len(out) - 1 and out[-1].id is None
            if open_assistant is not None and (same_stream or no_ids):
                prev = out[open_assistant]
                out[open_assistant] = Message(
                    "assistant",
                    prev.content + blocks,
                    id=prev.id,
                    timestamp=prev.timestamp,
                    extra=prev.extra,
                )
                continue
            out.append(
                Message(
                    "assistant",
                    blocks,
                    id=mid,
                    timestamp=_text(event.get("timestamp")),
                    extra=keep("claude_code", raw, {"role", "content", "id"}),
                )
            )
            open_assistant = len(out) - 1
            open_results = None
            continue
        # user event
        # an event that answers the open tool calls (results, possibly with a note
        # after them) belongs to the one user message the API saw
        answers = bool(blocks) and isinstance(blocks[0], ToolResultBlock)
        if answers and open_results is not None:
            prev = out[open_results]
            out[open_results] = Message(
                "user", prev.content + blocks, id=prev.id, timestamp=prev.timestamp
            )
            continue
        plain = isinstance(raw["content"], str)
        kind: MessageKind = "compact_summary" if event.get("isCompactSummary") else "message"
        out.append(
            Message(
                "user",
                blocks,
                kind=kind,
                plain=plain,
                id=_text(event.get("uuid")),
                timestamp=_text(event.get("timestamp")),
            )
        )
        if answers and open_assistant is not None:
            open_results = len(out) - 1
        else:
            open_assistant = open_results = None
    return (
        Transcript(tuple(out), compactions=tuple(boundaries), source=source, format="claude-code"),
        report,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value)


def _blocks(content: Any, source: str, lineno: int) -> tuple[ContentBlock, ...]:
    if isinstance(content, str):
        return (TextBlock(content),)
    if not isinstance(content, list):
        raise FormatError(source, "message content must be a string or a list", line=lineno)
    try:
        return tuple(decode_block(b, source) for b in content)
    except FormatError as exc:
        raise FormatError(source, exc.detail, line=lineno) from None
