"""What :func:`~ctxwise.compaction.compact` did, and the media that left with it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxwise.memory.facts import Fact, Rule
from ctxwise.messages import ContentBlock, MediaBlock, Message, ToolResultBlock, Transcript

__all__ = ["Compaction", "DroppedMedia", "dropped_media", "media_note"]


@dataclass(frozen=True, slots=True)
class DroppedMedia:
    """An image or document that left the window with the summarized range.

    ``message_index`` is its message in the input transcript; ``tool_use_id`` is set
    when it was inside a tool result. ``reference`` is the URL or file id when the
    source has one, else a short description of the inline data.
    """

    message_index: int
    media: str
    source_type: str
    reference: str | None = None
    tool_use_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "message_index": self.message_index,
            "media": self.media,
            "source_type": self.source_type,
            "reference": self.reference,
            "tool_use_id": self.tool_use_id,
        }


@dataclass(frozen=True, slots=True)
class Compaction:
    """What :func:`compact` did.

    ``summary`` is the summary message's text: the header line, the user's
    messages kept verbatim, the summarizer's part and the media note ("" when the
    budget held only the system part and the task).

    ``transcript`` is the compacted transcript (the input, after repair if asked,
    when nothing was compacted: then ``reason`` says why). ``cut_index`` is the
    input index where the verbatim tail starts; ``summarized_messages`` how many
    messages the summary replaced (a previous summary included). ``tail_tokens``
    and ``summary_tokens`` are the sizes of the kept tail and of the summary
    message, without the counter's per-request overhead (tiktoken's 3 tokens of
    reply priming), which ``tokens_after`` counts once; ``facts`` and ``rules``
    what the pinned block holds. ``budget`` is the total budget asked for
    (``None``: only the tail was bounded), and ``tokens_after`` never exceeds it.
    ``user_messages`` are the input indices of the user messages kept verbatim in
    the summary (the latest one always, when it was in the summarized range);
    ``mid_turn`` says the tail starts inside a turn (not at a user message).
    """

    transcript: Transcript
    summary: str
    cut_index: int
    tokens_before: int
    tokens_after: int
    tail_tokens: int
    summary_tokens: int
    summarized_messages: int
    dropped_media: tuple[DroppedMedia, ...]
    archive_id: str | None
    facts: tuple[Fact, ...]
    rules: tuple[Rule, ...]
    counter: str
    reason: str = ""
    repaired: tuple[str, ...] = ()
    budget: int | None = None
    user_messages: tuple[int, ...] = ()
    mid_turn: bool = False

    @property
    def compacted(self) -> bool:
        return self.summarized_messages > 0

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def to_dict(self) -> dict[str, Any]:
        return {
            "compacted": self.compacted,
            "reason": self.reason,
            "budget": self.budget,
            "counter": self.counter,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_saved": self.tokens_saved,
            "cut_index": self.cut_index,
            "summarized_messages": self.summarized_messages,
            "kept_messages": len(self.transcript.messages),
            "tail_tokens": self.tail_tokens,
            "summary_tokens": self.summary_tokens,
            "user_messages": list(self.user_messages),
            "mid_turn": self.mid_turn,
            "summary": self.summary,
            "dropped_media": [d.to_dict() for d in self.dropped_media],
            "archive_id": self.archive_id,
            "facts": [f.to_dict() for f in self.facts],
            "rules": [{"text": r.text, "source": r.source} for r in self.rules],
            "repaired": list(self.repaired),
        }


def _media_reference(b: MediaBlock) -> tuple[str, str | None]:
    src = b.source
    kind = str(src.get("type", "unknown"))
    if isinstance(src.get("url"), str):
        return kind, str(src["url"])
    if isinstance(src.get("file_id"), str):
        return kind, str(src["file_id"])
    data = src.get("data")
    media_type = src.get("media_type")
    if isinstance(data, str):
        return kind, f"{media_type or 'inline'} data, {len(data):,} characters"
    return kind, None


def dropped_media(messages: Sequence[Message], lo: int, hi: int) -> tuple[DroppedMedia, ...]:
    out: list[DroppedMedia] = []
    for i in range(lo, hi):
        for b in messages[i].content:
            inner: Iterable[tuple[ContentBlock, str | None]] = ((b, None),)
            if isinstance(b, ToolResultBlock) and not isinstance(b.content, str):
                inner = ((x, b.tool_use_id) for x in b.content)
            for x, tid in inner:
                if isinstance(x, MediaBlock):
                    kind, ref = _media_reference(x)
                    out.append(DroppedMedia(i, x.media, kind, ref, tid))
    return tuple(out)


def media_note(dropped: Sequence[DroppedMedia], archive_id: str | None) -> str:
    if not dropped:
        return ""
    images = sum(1 for d in dropped if d.media == "image")
    docs = len(dropped) - images
    parts = []
    if images:
        parts.append(f"{images} image{'s' if images != 1 else ''}")
    if docs:
        parts.append(f"{docs} document{'s' if docs != 1 else ''}")
    where = f"; archive {archive_id} lists them" if archive_id else ""
    return f"[Dropped with the summarized messages: {' and '.join(parts)}{where}.]"
