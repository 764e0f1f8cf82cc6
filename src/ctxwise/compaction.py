"""Compaction: summarize the older part of a transcript and keep a verbatim tail.

:func:`compact` cuts a transcript in two. The older range goes to an injected
:class:`~ctxwise.summarize.Summarizer` (default: the offline
:class:`~ctxwise.summarize.ExtractiveSummarizer`); the result is

1. the system part: the leading system messages, unchanged, plus one *pinned*
   block that starts with :data:`PINNED_HEADER` and holds the case facts and
   standing rules (:meth:`CaseFacts.render`, :meth:`Rules.render`). They are
   re-injected there and never inside the summary;
2. one summary message (a ``user`` message of kind ``compact_summary`` that starts
   with :data:`SUMMARY_HEADER`), which also lists the images and documents that
   left with the summarized range;
3. the tail, verbatim.

Where the cut may fall (:func:`safe_cut_points`): on a real user message (a
``user`` message of kind ``"message"`` with content and no tool results), never
between a tool_use and its tool_result, and never past the latest user message,
which therefore always stays verbatim. ``keep_tail_tokens`` takes the earliest
safe cut whose tail fits; ``keep_tail_turns`` keeps that many user turns.

Facts and rules: with ``extract=True`` (the default) the summarized range is
scanned with :meth:`CaseFacts.update_from_messages` and
:meth:`Rules.capture_messages`; the ``facts`` and ``rules`` given are merged on top
(a given fact wins over an extracted one with the same key). A transcript that
was compacted before keeps its earlier pinned facts and rules: the old pinned
block is read back and merged, and the old summary is passed to the summarizer
as ``previous``, so the summary rolls. Fact sources (``message 12``) are message
indices of the transcript that was compacted (the archive's indices). Summary
lines that restate a pinned rule are dropped from the summary.

Archive first: with a ``store``, every message of the input is written to the
store (one item per message, or per million-character part, with its index, role,
kind, tool ids and names, and any media reference in the metadata) in one
all-or-nothing ``put_many``, *before* the summarizer runs. The archive id is a
hash of the transcript (:mod:`hashlib`), so archiving the same transcript twice
replaces the same items. If the summarizer then fails, the archive stays (it is
complete, not half-written) and :class:`SummarizerError` says so. Nothing is
archived when nothing is compacted.

Bad input is refused before anything is archived: an empty transcript
(:class:`EmptyTranscriptError`), tool pairing problems
(:class:`~ctxwise.editing.PairingError`, or repaired with ``repair=True`` by
:func:`~ctxwise.editing.repair_pairing`), a tail that cannot fit
``keep_tail_tokens`` (:class:`TailOverBudgetError`, naming the sizes and the
largest item). A summarizer that raises or returns nothing raises
:class:`SummarizerError`; the input transcript is never modified (values are
immutable).

:class:`AutoCompactor` compacts when a transcript is over ``trigger_tokens``
(default 150,000) and stops thrashing: when the window is over the trigger again
within ``refill_messages`` messages of its previous compaction three times in a
row, the fourth attempt raises :class:`CompactionThrashError` naming the item that
refilled it.

The compacted transcript encodes and decodes through its format's codec
(Anthropic requests, OpenAI messages; a Claude Code transcript is written as an
Anthropic request): for Anthropic the pinned block joins the system blocks, for
OpenAI it is its own ``system`` message, and the summary is a plain user message.

Cost, measured by ``benchmarks/bench_compaction.py`` (CharCounter, 123k–152k-token
transcripts: the three long Claude Code sessions, a 150k scaled session, a 150k
synthetic support conversation; p50 on 2 quiet cores): ctxwise's own work (cut
points, token counts, media, pinned block, assembly) takes 2.4–5.1 ms, the
extractive summarizer 38–48 ms and the fact and rule scan of the summarized range
29–36 ms. So ``compact()`` with its defaults takes 76–90 ms (target: 100 ms); with
``extract=False`` (facts kept current as messages arrive, as
:class:`AutoCompactor` does for about 0.1 ms a message) 40–53 ms.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxwise.editing import PairingError, repair_pairing
from ctxwise.errors import BackendError, UsageError
from ctxwise.memory.facts import MAX_TEXT_CHARS as FACT_TEXT_CHARS
from ctxwise.memory.facts import CaseFacts, Fact, Rule, Rules
from ctxwise.memory.store import MAX_TEXT_CHARS, NewItem, Store, check_namespace
from ctxwise.messages import (
    ContentBlock,
    MediaBlock,
    Message,
    OpaqueBlock,
    Placement,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    block_text,
)
from ctxwise.summarize import ExtractiveSummarizer, LLMSummarizer, Summarizer, render_turns
from ctxwise.tokens import CharCounter, TokenCounter, truncate_to_tokens

__all__ = [
    "DEFAULT_NAMESPACE",
    "DEFAULT_SUMMARY_TOKENS",
    "DEFAULT_TRIGGER_TOKENS",
    "PINNED_HEADER",
    "SUMMARY_HEADER",
    "AutoCompactor",
    "Compaction",
    "CompactionArchiveError",
    "CompactionThrashError",
    "DroppedMedia",
    "EmptyTranscriptError",
    "SummarizerError",
    "TailOverBudgetError",
    "WindowItem",
    "compact",
    "safe_cut_points",
]

DEFAULT_TRIGGER_TOKENS = 150_000
""":class:`AutoCompactor` compacts a transcript over this many tokens."""
DEFAULT_SUMMARY_TOKENS = 4_000
"""The summary budget: Claude Code's own summaries in the shared sessions hold
3,046–3,936 tokens (CharCounter)."""
DEFAULT_NAMESPACE: tuple[str, ...] = ("ctxwise", "compaction-archive")
"""Where :func:`compact` archives transcripts when given a store."""

SUMMARY_HEADER = (
    "Summary of the earlier conversation (compacted; the messages after this one are verbatim):"
)
"""First line of the summary message; a later compaction recognises it."""
PINNED_HEADER = "Pinned through compaction (kept verbatim, never summarized):"
"""First line of the system block holding case facts and rules."""

_INSTRUCTIONS_LEAD = "\n\nAdditional instructions for this compaction:\n"
_SURROGATE = re.compile("[\ud800-\udfff]")


# --------------------------------------------------------------------------- errors


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


class TailOverBudgetError(UsageError):
    """The smallest tail a compaction may keep is larger than ``keep_tail_tokens``.

    ``tail_start`` is where that smallest tail starts (the latest user message, or
    the first conversation message when there is no safe cut), ``tail_tokens`` its
    size, ``largest`` its largest item.
    """

    def __init__(
        self,
        keep_tail_tokens: int,
        tail_tokens: int,
        tail_start: int,
        largest: WindowItem | None,
        detail: str,
    ) -> None:
        self.keep_tail_tokens = keep_tail_tokens
        self.tail_tokens = tail_tokens
        self.tail_start = tail_start
        self.largest = largest
        self.detail = detail
        biggest = f"; its largest item is {largest.describe()}" if largest else ""
        super().__init__(
            f"keep_tail_tokens is {keep_tail_tokens:,} but the smallest tail that can be kept "
            f"verbatim ({detail}, from message {tail_start}) holds {tail_tokens:,} tokens"
            f"{biggest}; raise keep_tail_tokens or clear that item first"
        )


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


# --------------------------------------------------------------------------- results


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

    ``transcript`` is the compacted transcript (the input, after repair if asked,
    when nothing was compacted: then ``reason`` says why). ``cut_index`` is the
    input index where the verbatim tail starts; ``summarized_messages`` how many
    messages the summary replaced (a previous summary included). ``tail_tokens``
    and ``summary_tokens`` are the sizes of the kept tail and of the summary
    message; ``facts`` and ``rules`` what the pinned block holds.
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
            "counter": self.counter,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_saved": self.tokens_saved,
            "cut_index": self.cut_index,
            "summarized_messages": self.summarized_messages,
            "kept_messages": len(self.transcript.messages),
            "tail_tokens": self.tail_tokens,
            "summary_tokens": self.summary_tokens,
            "summary": self.summary,
            "dropped_media": [d.to_dict() for d in self.dropped_media],
            "archive_id": self.archive_id,
            "facts": [f.to_dict() for f in self.facts],
            "rules": [{"text": r.text, "source": r.source} for r in self.rules],
            "repaired": list(self.repaired),
        }


# --------------------------------------------------------------------------- cut points


def _system_prefix(messages: Sequence[Message]) -> int:
    s = 0
    while s < len(messages) and messages[s].role == "system":
        s += 1
    return s


def _is_summary(msg: Message) -> bool:
    return msg.role == "user" and (
        msg.kind == "compact_summary"
        or (
            bool(msg.content)
            and isinstance(msg.content[0], TextBlock)
            and msg.content[0].text.startswith(SUMMARY_HEADER)
        )
    )


def _is_real_user(msg: Message) -> bool:
    """A user speaking: kind ``message``, some content, and no tool result."""
    if msg.role != "user" or msg.kind != "message" or _is_summary(msg):
        return False
    has_content = False
    for b in msg.content:
        if isinstance(b, ToolResultBlock):
            return False
        if (isinstance(b, TextBlock) and b.text.strip()) or isinstance(b, MediaBlock | OpaqueBlock):
            has_content = True
    return has_content


def _head(messages: Sequence[Message]) -> tuple[int, int]:
    """``(s, start)``: the system prefix's length, and where new (not yet summarized)
    conversation starts (after a previous summary message, if one leads)."""
    s = _system_prefix(messages)
    start = s + 1 if s < len(messages) and _is_summary(messages[s]) else s
    return s, start


def _cuts(messages: Sequence[Message], start: int) -> list[int]:
    n = len(messages)
    # a call at i answered at j forbids every cut c with i < c <= j: +1 at i + 1 and
    # -1 at j + 1 (an unanswered call forbids every cut after it)
    diff = [0] * (n + 2)
    pending: dict[str, int] = {}
    for j, m in enumerate(messages):
        for b in m.content:
            if isinstance(b, ToolUseBlock):
                pending[b.id] = j
            elif isinstance(b, ToolResultBlock) and b.tool_use_id in pending:
                diff[pending.pop(b.tool_use_id) + 1] += 1
                diff[j + 1] -= 1
    for i in pending.values():
        diff[i + 1] += 1
    out: list[int] = []
    open_pairs = 0
    for c in range(n):
        open_pairs += diff[c]
        if c > start and open_pairs == 0 and _is_real_user(messages[c]):
            out.append(c)
    return out


def safe_cut_points(transcript: Transcript) -> tuple[int, ...]:
    """Every index where a compaction's verbatim tail may start, ascending.

    A cut ``c`` is safe when ``messages[c]`` is a real user message (kind
    ``"message"``, some content, no tool result), no tool_use before ``c`` is
    answered at or after ``c``, and at least one message that is not a system
    message or a previous summary lies before it. The last safe cut is the
    latest user message, so no cut ever summarizes it away.
    """
    _, start = _head(transcript.messages)
    return tuple(_cuts(transcript.messages, start))


# --------------------------------------------------------------------------- helpers


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a positive integer, got {value!r}")
    return value


def _placement(t: Transcript) -> Placement:
    if t.format == "openai":
        return "openai"
    if t.format in ("anthropic", "claude-code"):
        return "anthropic"
    return "loose"


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


def _largest(
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


def _dropped(messages: Sequence[Message], lo: int, hi: int) -> tuple[DroppedMedia, ...]:
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


def _media_note(dropped: Sequence[DroppedMedia], archive_id: str | None) -> str:
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


# --------------------------------------------------------------------------- pinned block


def _is_pinned(b: ContentBlock) -> bool:
    return isinstance(b, TextBlock) and b.text.startswith(PINNED_HEADER)


def _read_pinned(text: str) -> tuple[list[Fact], list[str]]:
    """Facts and rules back from a pinned block (the inverse of its rendering: a
    line ``- key: value (source, at)`` re-renders to itself)."""
    facts: list[Fact] = []
    rules: list[str] = []
    section = ""
    for line in text.splitlines()[1:]:
        if line in ("Case facts:", "Rules:"):
            section = line
            continue
        if not line.startswith("- "):
            continue
        body = line[2:]
        if section == "Rules:":
            if body.strip():
                rules.append(body)
            continue
        if section != "Case facts:":
            continue
        key, sep, rest = body.partition(": ")
        if not sep:
            continue
        source = at = None
        if rest.endswith(")") and " (" in rest:
            rest, where = rest[:-1].rsplit(" (", 1)
            src, _, when = where.partition(", ")
            source, at = src or None, when or None
        try:
            facts.append(Fact(key, rest, source, at))
        except UsageError:
            continue  # not a line ctxwise wrote; it leaves with the old block
    return facts, rules


def _pinned_state(
    system: Sequence[Message],
    messages: Sequence[Message],
    s: int,
    cut: int,
    facts: CaseFacts | Iterable[Fact] | None,
    rules: Rules | Iterable[Rule | str] | None,
    extract: bool,
) -> tuple[CaseFacts, Rules]:
    merged = CaseFacts()
    kept_rules = Rules()
    # the pinned block lives in the system part, or, where a format has none
    # (Claude Code files), as the first block of the summary message
    carriers = [*system, *(messages[s : s + 1] if s < cut and _is_summary(messages[s]) else ())]
    for m in carriers:
        for b in m.content:
            if _is_pinned(b):
                assert isinstance(b, TextBlock)
                old_facts, old_rules = _read_pinned(b.text)
                for f in old_facts:
                    merged.set(f.key, f.value, source=f.source, at=f.at)
                for text in old_rules:
                    kept_rules.add(text)
    for given in rules or ():
        if isinstance(given, Rule):
            kept_rules.add(given.text, source=given.source)
        else:
            kept_rules.add(given)
    if extract:
        # a summary ctxwise wrote is not rescanned: its facts are in the old pinned
        # block, and its older sentences would undo newer values
        ours = s < cut and any(
            isinstance(b, TextBlock) and b.text.startswith(SUMMARY_HEADER)
            for b in messages[s].content
        )
        lo = s + 1 if ours else s
        scanned = [_scannable(m) for m in messages[lo:cut]]
        merged.update_from_messages(scanned, offset=lo)
        kept_rules.capture_messages(scanned, offset=lo)
    for f in facts or ():
        merged.set(f.key, f.value, source=f.source, at=f.at)
    return merged, kept_rules


def _scannable(m: Message) -> Message:
    """``m`` with every text and tool result cut to what the fact extractor accepts
    (its first :data:`~ctxwise.memory.facts.MAX_TEXT_CHARS` characters)."""
    if all(len(block_text(b)) <= FACT_TEXT_CHARS for b in m.content):
        return m
    blocks: list[ContentBlock] = []
    for b in m.content:
        text = block_text(b)
        if len(text) <= FACT_TEXT_CHARS:
            blocks.append(b)
        elif isinstance(b, ToolResultBlock):
            blocks.append(ToolResultBlock(b.tool_use_id, text[:FACT_TEXT_CHARS], b.is_error))
        elif isinstance(b, TextBlock):
            blocks.append(TextBlock(text[:FACT_TEXT_CHARS]))
    return replace(m, content=tuple(blocks))


def _pinned_text(facts: CaseFacts, rules: Rules) -> str:
    parts = [p for p in (facts.render(), rules.render()) if p]
    return "\n".join([PINNED_HEADER, *parts]) if parts else ""


def _system_part(system: Sequence[Message], pinned: str, fmt: str | None) -> list[Message]:
    """The leading system messages without an old pinned block, plus the new one.

    OpenAI: its own ``system`` message. Otherwise a text block appended to the last
    system message (an Anthropic request has one ``system`` field, so a second
    system message would not come back as one), or a new system message.
    """
    out: list[Message] = []
    for m in system:
        blocks = tuple(b for b in m.content if not _is_pinned(b))
        if len(blocks) == len(m.content):
            out.append(m)
        elif blocks:
            out.append(replace(m, content=blocks))
    if not pinned:
        return out
    block = TextBlock(pinned)
    if fmt == "openai" or not out:
        return [*out, Message("system", (block,), plain=True)]
    last = out[-1]
    return [*out[:-1], replace(last, content=(*last.content, block), plain=False)]


# --------------------------------------------------------------------------- summarizer


def _summarize_fn(
    summarizer: Summarizer, instructions: str | None
) -> Callable[[str, Sequence[Message], int], str]:
    if instructions is None:
        return summarizer.summarize
    if not isinstance(instructions, str) or not instructions.strip():
        raise UsageError("instructions must be a non-empty string or None")
    if isinstance(summarizer, LLMSummarizer):
        extended = LLMSummarizer(
            summarizer.model,
            instructions=summarizer.instructions + _INSTRUCTIONS_LEAD + instructions.strip(),
            counter=summarizer.counter,
        )
        return extended.summarize
    try:
        accepts = "instructions" in inspect.signature(summarizer.summarize).parameters
    except (TypeError, ValueError):
        accepts = False
    if accepts:
        method = summarizer.summarize

        def call(previous: str, turns: Sequence[Message], budget: int) -> str:
            return method(previous, turns, budget, instructions=instructions)  # type: ignore[call-arg]

        return call
    raise UsageError(
        f"{type(summarizer).__name__} takes no instructions: use an LLMSummarizer, or a "
        "summarizer whose summarize() accepts instructions=..."
    )


def _strip_rules(summary: str, rules: Rules) -> str:
    """The summary without lines that restate a pinned rule."""
    if not len(rules):
        return summary
    kept = []
    for line in summary.splitlines():
        head, sep, rest = line.partition(": ")
        body = rest if sep and head in ("user", "assistant", "system") else line
        if body.strip() and body.strip() in rules:
            continue
        kept.append(line)
    return "\n".join(kept)


# --------------------------------------------------------------------------- archive


def _archive_items(t: Transcript, archive_id: str) -> list[NewItem]:
    items: list[NewItem] = []
    names: dict[str, str] = {}
    for i, m in enumerate(t.messages):
        uses = [b for b in m.content if isinstance(b, ToolUseBlock)]
        for b in uses:
            names[b.id] = b.name
        result_ids = [b.tool_use_id for b in m.content if isinstance(b, ToolResultBlock)]
        text = _SURROGATE.sub("\ufffd", render_turns([m]))
        if not text.strip():
            text = f"({m.role} message without text)"
        chunks = [text[k : k + MAX_TEXT_CHARS] for k in range(0, len(text), MAX_TEXT_CHARS)]
        chunks = [c for c in chunks if c.strip()]
        media = [d.to_dict() for d in _dropped(t.messages, i, i + 1)]
        for part, chunk in enumerate(chunks):
            meta: dict[str, Any] = {
                "archive_id": archive_id,
                "message_index": i,
                "part": part,
                "parts": len(chunks),
                "role": m.role,
                "kind": m.kind,
                "message_id": m.id,
                "timestamp": m.timestamp,
                "source": t.source,
                "format": t.format,
                "tool_use_ids": [b.id for b in uses] + result_ids,
                "tools": sorted({b.name for b in uses} | {names.get(r, "?") for r in result_ids}),
                "media": media,
            }
            item_id = f"{archive_id}:{i}" + (f".{part}" if part else "")
            items.append(NewItem(chunk, meta, id=item_id))
    return items


def _archive_id(items: Sequence[NewItem], t: Transcript) -> str:
    h = hashlib.sha256()
    h.update(f"{t.source}\x00{t.format}\x00{len(t.messages)}\x00".encode())
    for item in items:
        h.update(f"{item.metadata['role']}\x00{item.metadata['kind']}\x00".encode())
        h.update(item.text.encode("utf-8"))
        h.update(b"\x01")
    return "compaction-" + h.hexdigest()[:20]


def _archive(store: Store, namespace: Sequence[str], t: Transcript) -> str:
    draft = _archive_items(t, "")
    archive_id = _archive_id(draft, t)
    items = [
        NewItem(
            it.text,
            {**it.metadata, "archive_id": archive_id},
            id=archive_id + (it.id or ""),
        )
        for it in draft
    ]
    try:
        store.put_many(namespace, items)
    except Exception as exc:
        raise CompactionArchiveError(namespace, f"{type(exc).__name__}: {exc}") from exc
    return archive_id


# --------------------------------------------------------------------------- compact


def compact(
    transcript: Transcript,
    summarizer: Summarizer | None = None,
    *,
    keep_tail_tokens: int | None = None,
    keep_tail_turns: int | None = None,
    summary_tokens: int = DEFAULT_SUMMARY_TOKENS,
    instructions: str | None = None,
    facts: CaseFacts | Iterable[Fact] | None = None,
    rules: Rules | Iterable[Rule | str] | None = None,
    store: Store | None = None,
    namespace: Sequence[str] = DEFAULT_NAMESPACE,
    counter: TokenCounter | None = None,
    extract: bool = True,
    repair: bool = False,
) -> Compaction:
    """Summarize the older part of ``transcript`` and keep a verbatim tail (see the
    module doc for every rule).

    Give exactly one of ``keep_tail_tokens`` (the tail is the longest suffix from a
    safe cut that fits) and ``keep_tail_turns`` (the tail holds that many user
    turns). ``summary_tokens`` is the summarizer's budget; a longer answer is cut on
    a word boundary. ``instructions`` extend an :class:`LLMSummarizer`'s
    instructions, or go to a summarizer whose ``summarize`` takes
    ``instructions=``; any other summarizer refuses them. When the whole
    conversation already fits, nothing is compacted and ``reason`` says so.
    """
    if not isinstance(transcript, Transcript):
        raise UsageError(f"compact() takes a Transcript, got {type(transcript).__name__}")
    if (keep_tail_tokens is None) == (keep_tail_turns is None):
        raise UsageError("give exactly one of keep_tail_tokens and keep_tail_turns")
    if keep_tail_tokens is not None:
        _positive("keep_tail_tokens", keep_tail_tokens)
    if keep_tail_turns is not None:
        _positive("keep_tail_turns", keep_tail_turns)
    _positive("summary_tokens", summary_tokens)
    ns = check_namespace(namespace) if store is not None else tuple(namespace)
    ctr = counter if counter is not None else CharCounter()
    chosen: Summarizer = summarizer if summarizer is not None else ExtractiveSummarizer(ctr)
    run_summarizer = _summarize_fn(chosen, instructions)

    messages = transcript.messages
    s, start = _head(messages)
    if not messages:
        raise EmptyTranscriptError(transcript.source, "the transcript has no messages")
    if s == len(messages):
        raise EmptyTranscriptError(transcript.source, "the transcript has only system messages")

    repaired: tuple[str, ...] = ()
    rule = _placement(transcript)
    if repair:
        fixed, problems = repair_pairing(transcript, placement=rule)
        repaired = tuple(
            f"message {p.message_index}: {p.kind.value} {p.tool_use_id}" for p in problems
        )
        work = fixed
    else:
        problems = tuple(transcript.problems(rule))
        if problems:
            raise PairingError(problems, rule, transcript.source)
        work = transcript
    messages = work.messages
    s, start = _head(messages)

    sizes = [ctr.count_messages((m,)) for m in messages]
    suffix = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + sizes[i]
    tokens_before = ctr.count_messages(messages)
    cuts = _cuts(messages, start)

    def noop(reason: str) -> Compaction:
        return Compaction(
            transcript=work,
            summary="",
            cut_index=s,
            tokens_before=tokens_before,
            tokens_after=tokens_before,
            tail_tokens=ctr.count_messages(messages[s:]),
            summary_tokens=0,
            summarized_messages=0,
            dropped_media=(),
            archive_id=None,
            facts=(),
            rules=(),
            counter=ctr.name,
            reason=reason,
            repaired=repaired,
        )

    if keep_tail_tokens is not None:
        if suffix[start] <= keep_tail_tokens:
            return noop(
                f"the conversation after the system part ({suffix[s]:,} tokens) already fits "
                f"keep_tail_tokens={keep_tail_tokens:,}"
            )
        fitting = [c for c in cuts if suffix[c] <= keep_tail_tokens]
        if not fitting:
            smallest = cuts[-1] if cuts else s
            detail = "the turn of the latest user message" if cuts else "no safe cut point"
            raise TailOverBudgetError(
                keep_tail_tokens,
                suffix[smallest],
                smallest,
                _largest(messages, smallest, len(messages), ctr),
                detail,
            )
        cut = fitting[0]
    else:
        assert keep_tail_turns is not None
        if keep_tail_turns > len(cuts):
            return noop(
                f"the conversation has {len(cuts) + 1} user turn(s) at most; "
                f"keep_tail_turns={keep_tail_turns} keeps them all"
            )
        cut = cuts[-keep_tail_turns]

    system = messages[:s]
    merged_facts, merged_rules = _pinned_state(system, messages, s, cut, facts, rules, extract)
    dropped = _dropped(messages, s, cut)
    previous = ""
    if start > s:
        head = "".join(
            b.text for b in messages[s].content if isinstance(b, TextBlock) and not _is_pinned(b)
        )
        previous = (
            head[len(SUMMARY_HEADER) :].lstrip("\n") if head.startswith(SUMMARY_HEADER) else head
        )

    # Archive first: the full input, in one atomic write, before the summarizer runs.
    archive_id = _archive(store, ns, transcript) if store is not None else None

    name = type(chosen).__name__
    try:
        raw = run_summarizer(previous, messages[start:cut], summary_tokens)
    except Exception as exc:
        raise SummarizerError(
            name,
            f"{type(exc).__name__}: {exc}",
            archive_id=archive_id,
            archived_messages=len(transcript.messages) if archive_id else 0,
        ) from exc
    if not isinstance(raw, str):
        raise SummarizerError(
            name,
            f"returned {type(raw).__name__}, not text",
            archive_id=archive_id,
            archived_messages=len(transcript.messages) if archive_id else 0,
        )
    summary = _strip_rules(raw.strip(), merged_rules).strip()
    if ctr.count(summary) > summary_tokens:
        summary = truncate_to_tokens(summary, summary_tokens, ctr)
    if not summary:
        raise SummarizerError(
            name,
            "it returned an empty summary"
            if not raw.strip()
            else "its summary only restated the pinned rules",
            archive_id=archive_id,
            archived_messages=len(transcript.messages) if archive_id else 0,
        )

    note = _media_note(dropped, archive_id)
    body = "\n".join(x for x in (SUMMARY_HEADER, summary, note) if x)
    summary_msg = Message("user", (TextBlock(body),), kind="compact_summary", plain=True)
    new_system = _system_part(system, _pinned_text(merged_facts, merged_rules), work.format)
    tail = messages[cut:]
    new_messages = (*new_system, summary_msg, *tail)
    result = Transcript(new_messages, work.params, (), work.source, work.format)
    return Compaction(
        transcript=result,
        summary=summary,
        cut_index=cut,
        tokens_before=tokens_before,
        tokens_after=ctr.count_messages(new_messages),
        tail_tokens=ctr.count_messages(tail),
        summary_tokens=ctr.count_messages((summary_msg,)),
        summarized_messages=cut - s,
        dropped_media=dropped,
        archive_id=archive_id,
        facts=tuple(merged_facts),
        rules=tuple(merged_rules),
        counter=ctr.name,
        reason=f"summarized messages {s}–{cut - 1}; the tail from message {cut} is verbatim",
        repaired=repaired,
    )


# --------------------------------------------------------------------------- auto policy


def _same_turns(a: Sequence[Message], b: Sequence[Message]) -> bool:
    return len(a) == len(b) and all(
        x is y or (x.role == y.role and x.content == y.content) for x, y in zip(a, b, strict=True)
    )


class AutoCompactor:
    """Compacts a transcript when it is over ``trigger_tokens``, and stops thrashing.

    Call :meth:`maybe_compact` with the current transcript before each model call.
    Under the trigger it returns ``None``. Over it, it compacts with the settings
    given here (as :func:`compact`; with neither ``keep_tail_tokens`` nor
    ``keep_tail_turns``, ``keep_tail_tokens`` is a fifth of the trigger) and
    returns the :class:`Compaction`; carry on with its transcript.

    Facts and rules: with ``extract=True`` every call scans only the messages that
    are new since the previous call (a transcript that extends the previous one,
    compared by role and content) into a running :class:`CaseFacts` and
    :class:`Rules`, so a compaction does not rescan the whole range. They are
    pinned at each compaction together with ``facts`` and ``rules`` (read at every
    compaction, so a caller that keeps its own current gets the current ones
    pinned; a given fact wins over an extracted one). A transcript that does not
    extend the previous one starts the scan afresh.

    Thrash protection: a compaction *refills* when the transcript is over the
    trigger again and is the last compacted one plus at most ``refill_messages``
    messages. After ``max_attempts`` (3) compactions in a row that refilled, the
    next one raises :class:`CompactionThrashError` naming the largest item that
    came in since the last compaction, instead of compacting again. A compaction
    that cannot get under the trigger at all raises it at once: retrying the same
    deterministic compaction cannot do better. :meth:`reset` forgets the count.
    """

    def __init__(
        self,
        summarizer: Summarizer | None = None,
        *,
        trigger_tokens: int = DEFAULT_TRIGGER_TOKENS,
        keep_tail_tokens: int | None = None,
        keep_tail_turns: int | None = None,
        summary_tokens: int = DEFAULT_SUMMARY_TOKENS,
        instructions: str | None = None,
        facts: CaseFacts | Iterable[Fact] | None = None,
        rules: Rules | Iterable[Rule | str] | None = None,
        store: Store | None = None,
        namespace: Sequence[str] = DEFAULT_NAMESPACE,
        counter: TokenCounter | None = None,
        extract: bool = True,
        repair: bool = False,
        max_attempts: int = 3,
        refill_messages: int = 6,
    ) -> None:
        _positive("trigger_tokens", trigger_tokens)
        _positive("summary_tokens", summary_tokens)
        _positive("max_attempts", max_attempts)
        _positive("refill_messages", refill_messages)
        if keep_tail_tokens is not None and keep_tail_turns is not None:
            raise UsageError("give at most one of keep_tail_tokens and keep_tail_turns")
        if keep_tail_tokens is None and keep_tail_turns is None:
            keep_tail_tokens = max(1, trigger_tokens // 5)
        if keep_tail_tokens is not None:
            _positive("keep_tail_tokens", keep_tail_tokens)
            if keep_tail_tokens + summary_tokens >= trigger_tokens:
                raise UsageError(
                    f"keep_tail_tokens ({keep_tail_tokens:,}) + summary_tokens "
                    f"({summary_tokens:,}) must stay under trigger_tokens ({trigger_tokens:,}), "
                    "or every compaction would end over the trigger"
                )
        if keep_tail_turns is not None:
            _positive("keep_tail_turns", keep_tail_turns)
        if store is not None:
            check_namespace(namespace)
        self.counter: TokenCounter = counter if counter is not None else CharCounter()
        self.summarizer: Summarizer = (
            summarizer if summarizer is not None else ExtractiveSummarizer(self.counter)
        )
        _summarize_fn(self.summarizer, instructions)  # refuse unusable instructions now
        self.trigger_tokens = trigger_tokens
        self.keep_tail_tokens = keep_tail_tokens
        self.keep_tail_turns = keep_tail_turns
        self.summary_tokens = summary_tokens
        self.instructions = instructions
        self.facts = facts
        self.rules = rules
        self.store = store
        self.namespace = tuple(namespace)
        self.extract = extract
        self.repair = repair
        self.max_attempts = max_attempts
        self.refill_messages = refill_messages
        self.compactions = 0
        self.last: Compaction | None = None
        self.tracked_facts = CaseFacts()
        self.tracked_rules = Rules()
        self._scanned: tuple[Message, ...] = ()
        self._streak = 0

    def reset(self) -> None:
        """Forget the thrash count, the last compaction and the tracked facts and rules."""
        self._streak = 0
        self.last = None
        self.tracked_facts = CaseFacts()
        self.tracked_rules = Rules()
        self._scanned = ()

    def _track(self, messages: tuple[Message, ...]) -> None:
        done = len(self._scanned)
        if len(messages) >= done and _same_turns(messages[:done], self._scanned):
            new, offset = messages[done:], done
        else:
            self.tracked_facts, self.tracked_rules = CaseFacts(), Rules()
            new, offset = messages, 0
        if new:
            scanned = [_scannable(m) for m in new]
            self.tracked_facts.update_from_messages(scanned, offset=offset)
            self.tracked_rules.capture_messages(scanned, offset=offset)
        self._scanned = messages

    def _refill_start(self, transcript: Transcript) -> int | None:
        """Where the messages added since the last compaction start, if ``transcript``
        is the last compacted one plus at most ``refill_messages`` messages."""
        if self.last is None:
            return None
        before = self.last.transcript.messages
        now = transcript.messages
        added = len(now) - len(before)
        if 0 <= added <= self.refill_messages and _same_turns(now[: len(before)], before):
            return len(before)
        return None

    def maybe_compact(self, transcript: Transcript) -> Compaction | None:
        """The compaction of ``transcript`` when it is over the trigger, else ``None``."""
        if not isinstance(transcript, Transcript):
            raise UsageError(f"maybe_compact() takes a Transcript, got {type(transcript).__name__}")
        if self.extract:
            self._track(transcript.messages)
        tokens = self.counter.count_messages(transcript.messages)
        if tokens <= self.trigger_tokens:
            return None
        refill_at = self._refill_start(transcript)
        streak = self._streak + 1 if refill_at is not None else 1
        if refill_at is not None and streak > self.max_attempts:
            item = _largest(transcript.messages, refill_at, len(transcript.messages), self.counter)
            raise CompactionThrashError(
                self._streak,
                self.trigger_tokens,
                tokens,
                item,
                f"the window refilled over the trigger within {self.refill_messages} messages "
                f"of each of the last {self._streak} compactions",
            )
        facts: list[Fact] = [*self.tracked_facts, *(self.facts or ())]
        rules: list[Rule | str] = [*(self.rules or ()), *self.tracked_rules]
        result = compact(
            transcript,
            self.summarizer,
            keep_tail_tokens=self.keep_tail_tokens,
            keep_tail_turns=self.keep_tail_turns,
            summary_tokens=self.summary_tokens,
            instructions=self.instructions,
            facts=facts,
            rules=rules,
            store=self.store,
            namespace=self.namespace,
            counter=self.counter,
            extract=False,
            repair=self.repair,
        )
        if result.tokens_after > self.trigger_tokens:
            msgs = result.transcript.messages
            item = _largest(msgs, _system_prefix(msgs) + 1, len(msgs), self.counter)
            raise CompactionThrashError(
                streak,
                self.trigger_tokens,
                result.tokens_after,
                item,
                "compaction could not bring the window under the trigger"
                if result.compacted
                else f"nothing could be compacted ({result.reason})",
            )
        self._streak = streak
        self.compactions += 1
        self.last = result
        self._scanned = result.transcript.messages
        return result
