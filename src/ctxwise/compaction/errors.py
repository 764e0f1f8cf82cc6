"""What a compaction refuses or fails on: one typed error each, with the numbers.

The errors are defined in :mod:`ctxwise.errors` (the one exception tree) and
re-exported here; this module keeps :class:`WindowItem`, the item they name, and
:func:`largest_item`, which finds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxwise.errors import (
    CompactionArchiveError,
    CompactionBudgetError,
    CompactionThrashError,
    EmptyTranscriptError,
    SummarizerError,
)
from ctxwise.messages import (
    ContentBlock,
    MediaBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ctxwise.tokens import TokenCounter

__all__ = [
    "CompactionArchiveError",
    "CompactionBudgetError",
    "CompactionThrashError",
    "EmptyTranscriptError",
    "SummarizerError",
    "WindowItem",
]


@dataclass(frozen=True, slots=True)
class WindowItem:
    """One content block of a transcript, named so a person can find it."""

    message_index: int
    role: str
    kind: str
    """``text``, ``tool_use``, ``tool_result``, ``thinking``, ``image``, ``document`` or
    the type of an opaque block."""
    tokens: int
    tool_name: str | None = None
    tool_use_id: str | None = None

    def describe(self) -> str:
        what = self.kind
        if self.tool_name or self.tool_use_id:
            what += f" of {self.tool_name or '?'} ({self.tool_use_id or 'no id'})"
        return f"message {self.message_index} ({self.role} {what}, {self.tokens:,} tokens)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "message_index": self.message_index,
            "role": self.role,
            "kind": self.kind,
            "tokens": self.tokens,
            "tool_name": self.tool_name,
            "tool_use_id": self.tool_use_id,
        }


def _block_kind(b: ContentBlock) -> str:
    if isinstance(b, TextBlock):
        return "text"
    if isinstance(b, ToolUseBlock):
        return "tool_use"
    if isinstance(b, ToolResultBlock):
        return "tool_result"
    if isinstance(b, ThinkingBlock):
        return "thinking"
    if isinstance(b, MediaBlock):
        return b.media
    return b.type


def largest_item(
    messages: Sequence[Message], lo: int, hi: int, counter: TokenCounter
) -> WindowItem | None:
    """The largest block of ``messages[lo:hi]``."""
    names: dict[str, str] = {}
    best: WindowItem | None = None
    for i in range(hi):
        m = messages[i]
        for b in m.content:
            if isinstance(b, ToolUseBlock):
                names[b.id] = b.name
            if i < lo:
                continue
            tokens = counter.count_messages((Message(m.role, (b,)),))
            if best is None or tokens > best.tokens:
                tid = (
                    b.id
                    if isinstance(b, ToolUseBlock)
                    else b.tool_use_id
                    if isinstance(b, ToolResultBlock)
                    else None
                )
                best = WindowItem(
                    i, m.role, _block_kind(b), tokens, names.get(tid) if tid else None, tid
                )
    return best
