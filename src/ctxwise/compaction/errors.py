"""What a compaction refuses or fails on: one typed error each, with the numbers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxwise.errors import BackendError, UsageError
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


class EmptyTranscriptError(UsageError):
    """A transcript with no conversation message: there is nothing to compact."""

    def __init__(self, source: str | None, detail: str) -> None:
        self.source = source
        self.detail = detail
        where = f"{source}: " if source else ""
        super().__init__(f"{where}nothing to compact: {detail}")


class CompactionBudgetError(UsageError):
    """What a compaction must keep does not fit the total budget.

    ``parts`` names each part that must stay and its tokens (``system``: the
    system part; ``pinned``: the pinned facts and rules; ``latest user message``:
    the task, kept verbatim; ``summary framing``: the summary message's header and
    overhead), ``required`` their sum. ``largest`` is the largest item among them.
    Nothing was compacted or archived.
    """

    def __init__(
        self,
        budget: int,
        parts: Mapping[str, int],
        largest: WindowItem | None = None,
        *,
        source: str | None = None,
    ) -> None:
        self.budget = budget
        self.parts = dict(parts)
        self.required = sum(self.parts.values())
        self.largest = largest
        self.source = source
        named = ", ".join(f"{k} {v:,}" for k, v in self.parts.items() if v)
        biggest = f"; its largest item is {largest.describe()}" if largest else ""
        where = f"{source}: " if source else ""
        super().__init__(
            f"{where}budget {budget:,} tokens is too small: what a compaction must keep "
            f"needs {self.required:,} ({named}){biggest}; raise the budget"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_budget_error, (self.budget, self.parts, self.largest, self.source))


def _rebuild_budget_error(
    budget: int, parts: Mapping[str, int], largest: WindowItem | None, source: str | None
) -> CompactionBudgetError:
    return CompactionBudgetError(budget, parts, largest, source=source)


class SummarizerError(BackendError):
    """The summarizer raised, or returned no text. The transcript is unchanged.

    ``archive_id`` is set when the full transcript had already been archived
    (complete, in one atomic write) before the summarizer ran.
    """

    def __init__(
        self,
        summarizer: str,
        reason: str,
        *,
        archive_id: str | None = None,
        archived_messages: int = 0,
    ) -> None:
        self.summarizer = summarizer
        self.reason = reason
        self.archive_id = archive_id
        self.archived_messages = archived_messages
        archived = (
            f"; the full transcript ({archived_messages} messages) was archived first as "
            f"{archive_id!r} and stays in the store"
            if archive_id
            else "; nothing was archived"
        )
        super().__init__(
            f"summarizer {summarizer} failed: {reason}; the transcript is unchanged{archived}"
        )


class CompactionArchiveError(BackendError):
    """Archiving the transcript before compaction failed; nothing was compacted.

    The store's ``put_many`` is all-or-nothing, so no item of this archive was kept.
    """

    def __init__(self, namespace: Sequence[str], reason: str) -> None:
        self.namespace = tuple(namespace)
        self.reason = reason
        super().__init__(
            f"archiving the transcript to {'/'.join(self.namespace)!r} failed, so it was not "
            f"compacted (the write is all-or-nothing: nothing was archived): {reason}"
        )


class CompactionThrashError(UsageError):
    """Compaction cannot keep the window under the trigger: one item keeps refilling it.

    ``attempts`` compactions in a row were followed by the window going over
    ``trigger_tokens`` again within a few messages (or a compaction could not get
    under it at all). ``item`` is the largest item that came in since the last
    compaction (or the largest one left in the window).
    """

    def __init__(
        self, attempts: int, trigger_tokens: int, tokens: int, item: WindowItem | None, detail: str
    ) -> None:
        self.attempts = attempts
        self.trigger_tokens = trigger_tokens
        self.tokens = tokens
        self.item = item
        self.detail = detail
        culprit = f"; {item.describe()} refills it" if item else ""
        super().__init__(
            f"compaction is thrashing after {attempts} attempt(s): {detail} "
            f"({tokens:,} tokens, trigger {trigger_tokens:,}){culprit}; clear or trim that "
            "item, or raise the trigger"
        )


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
