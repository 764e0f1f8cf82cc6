"""Tiered memory: working turns, a rolling summary, long-term recall, pinned facts.

- **Working tier**: the last turns verbatim, bounded by tokens and by turns.
  Eviction takes whole exchanges: a tool call leaves together with its results,
  so a tool_use is never separated from its tool_result.
- **Session tier**: evicted turns are folded into a rolling summary by the
  injected :class:`~ctxwise.summarize.Summarizer`, and kept verbatim in the
  archive (and in the long-term store, when there is one): nothing evicted is
  silently lost.
- **Long-term tier**: :class:`~ctxwise.memory.LongTermMemory` recall. Evicted
  turns are remembered one item per turn (:func:`turn_items`): a user message, an
  assistant reply, or an assistant message that calls tools together with the
  messages holding their results, with role, speaker, tool, position and time as
  metadata. ``ctxwise eval memory`` remembers its conversations the same way.
- **Pinned**: case facts and standing rules (anything with ``section()``), in every
  window, never summarized.

:meth:`TieredMemory.sections` gives the assembler its sections: recent turns
highest, then recalled items, then the summary; case facts and rules pinned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ctxwise.assembly import Section
from ctxwise.errors import SummarizerError, UsageError
from ctxwise.memory.longterm import LongTermMemory
from ctxwise.memory.store import MAX_TEXT_CHARS, NamespaceNotFoundError, NewItem
from ctxwise.messages import Message, message_problem
from ctxwise.summarize import ExtractiveSummarizer, Summarizer, render_turns, summarize_range
from ctxwise.tokens import DEFAULT_MARKER, CharCounter, TokenCounter, truncate_to_tokens

__all__ = ["Pinned", "TieredMemory", "turn_items", "turn_spans"]


@runtime_checkable
class Pinned(Protocol):
    """Something rendered as a pinned section every turn (case facts, rules)."""

    def section(self) -> Section: ...


def _results_end(messages: Sequence[Message], start: int) -> int:
    """Index after the messages, from ``start + 1`` on, that answer the tool calls
    of ``messages[start]``."""
    pending = {b.id for b in messages[start].tool_uses}
    end = start + 1
    while pending and end < len(messages):
        answered = {b.tool_use_id for b in messages[end].tool_results}
        if not answered & pending:
            break
        pending -= answered
        end += 1
    return end


_SURROGATE = re.compile("[\ud800-\udfff]")


def _storable(text: str) -> str:
    """``text`` as every store accepts it: a surrogate pair as the character it
    encodes, each lone surrogate (an emoji cut in two) as U+FFFD, and at most
    :data:`~ctxwise.memory.store.MAX_TEXT_CHARS` characters (a longer text keeps its
    start, then the cut marker)."""
    if _SURROGATE.search(text):
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if len(text) > MAX_TEXT_CHARS:
        text = text[: MAX_TEXT_CHARS - len(DEFAULT_MARKER)] + DEFAULT_MARKER
    return text


def _storable_str(value: Any) -> Any:
    return _storable(value) if isinstance(value, str) else value


def turn_spans(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """Where each turn of ``messages`` starts and stops (``[start, stop)``), as
    :func:`turn_items` groups them: a message, or a message that calls tools with the
    messages that hold their results."""
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(messages):
        end = _results_end(messages, i) if messages[i].tool_uses else i + 1
        spans.append((i, end))
        i = end
    return spans


def turn_items(messages: Sequence[Message], first: int = 0) -> list[NewItem]:
    """What long-term memory keeps of ``messages``: one item per turn.

    A turn is a user message, an assistant reply, or an assistant message that
    calls tools together with the messages that hold their results (so a tool
    result is never an item apart from its call). The text is the turn rendered
    as :func:`~ctxwise.summarize.render_turns` does, its first line headed by the
    speaker: the message's ``extra["name"]`` when it has one (OpenAI's participant
    name), otherwise its role. Metadata: ``role``, ``speaker``, ``tool`` (the
    called tools' names, comma-separated, or None), ``position`` (the index of the
    turn's first message, counted from ``first``) and ``time`` (that message's
    timestamp, or None). The item's id is that message's id, when it has one (the
    same message remembered twice is one item). Turns with no text are skipped.

    Every item is one a store accepts: lone surrogates (a truncated emoji in a
    tool's output) are remembered as U+FFFD (a surrogate pair as its character),
    and a turn longer than :data:`~ctxwise.memory.store.MAX_TEXT_CHARS` characters
    by its start (the archive keeps every turn verbatim).
    """
    items: list[NewItem] = []
    for i, end in turn_spans(messages):
        message = messages[i]
        name = message.extra.get("name")
        speaker = name if isinstance(name, str) and name.strip() else message.role
        lines = render_turns(messages[i:end]).splitlines()
        if lines and lines[0].startswith(f"{message.role}: "):
            lines[0] = f"{speaker}: " + lines[0][len(message.role) + 2 :]
        elif lines and lines[0].startswith(f"{message.role} called "):
            lines[0] = f"{speaker} " + lines[0][len(message.role) + 1 :]
        text = _storable("\n".join(lines))
        if text.strip():
            tools = [b.name for b in message.tool_uses]
            metadata: dict[str, Any] = {
                "role": message.role,
                "speaker": _storable(speaker),
                "tool": _storable(", ".join(dict.fromkeys(tools))) if tools else None,
                "position": first + i,
                "time": _storable_str(message.timestamp),
            }
            ident = message.id
            if isinstance(ident, str) and _SURROGATE.search(ident):
                ident = ident.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            items.append(NewItem(text, metadata, ident))
    return items


class TieredMemory:
    def __init__(
        self,
        *,
        counter: TokenCounter | None = None,
        working_tokens: int = 2000,
        working_turns: int = 20,
        summarizer: Summarizer | None = None,
        summary_tokens: int = 400,
        longterm: LongTermMemory | None = None,
        recall_k: int = 5,
        pinned: Sequence[Pinned] = (),
    ) -> None:
        for name, value in (
            ("working_tokens", working_tokens),
            ("working_turns", working_turns),
            ("summary_tokens", summary_tokens),
            ("recall_k", recall_k),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} must be a positive integer, got {value!r}")
        checks: tuple[tuple[str, object, type], ...] = (
            ("counter", counter, TokenCounter),
            ("summarizer", summarizer, Summarizer),
            ("longterm", longterm, LongTermMemory),
        )
        for name, given, kind in checks:
            if given is not None and not isinstance(given, kind):
                raise UsageError(f"{name} is a {kind.__name__} or None, got {type(given).__name__}")
        given_pinned: Any = pinned  # the caller's, unchecked
        pins = [] if isinstance(given_pinned, str) else list(pinned)
        if isinstance(given_pinned, str) or not all(isinstance(p, Pinned) for p in pins):
            raise UsageError(
                "pinned is a sequence of objects with section() (CaseFacts, Rules), got"
                f" {pinned!r:.80}"
            )
        self.counter = counter if counter is not None else CharCounter()
        self.working_tokens = working_tokens
        self.working_turns = working_turns
        self.summarizer: Summarizer = (
            summarizer if summarizer is not None else ExtractiveSummarizer(self.counter)
        )
        self.summary_tokens = summary_tokens
        self.longterm = longterm
        self.recall_k = recall_k
        self.pinned = pins
        self.working: list[Message] = []
        self.summary = ""
        self.archive: list[Message] = []

    def _tokens(self, messages: Sequence[Message]) -> int:
        return self.counter.count_messages(messages)

    def add(self, message: Message) -> list[Message]:
        """Append a turn; evict the oldest exchanges past the bounds. Returns what
        was evicted (now in the summary and the archive).

        All or nothing: if summarizing or remembering the evicted turns fails (a
        summarizer or a store error), the error propagates and the working turns,
        summary and archive are as they were before the call.

        Raises:
            UsageError: ``message`` is not a Message, or one whose fields are wrong
                (:func:`~ctxwise.messages.message_problem`), as the Engine refuses it.
            SummarizerError: the summarizer raised, returned something other than
                text, or (any summarizer but the extractive one) returned an empty
                summary of turns that hold text. A summary over ``summary_tokens`` is
                cut to it on a word boundary.
        """
        if not isinstance(message, Message):
            raise UsageError(f"add() takes a Message, got {type(message).__name__}")
        problem = message_problem(message)
        if problem is not None:
            raise UsageError(f"add() takes a well-formed Message: {problem}")
        working = [*self.working, message]
        evicted: list[Message] = []
        # keep the newest exchange even if it alone exceeds the bounds
        while len(working) > 1 and (
            len(working) > self.working_turns or self._tokens(working) > self.working_tokens
        ):
            end = _results_end(working, 0)
            if end >= len(working):
                break  # the only exchange left is still open (tool call awaiting results)
            evicted.extend(working[:end])
            del working[:end]
        if evicted:
            first = len(self.archive)  # the evicted turns' index in the archive
            summary = self._summarize(evicted, first)
            if self.longterm is not None:
                self.longterm.remember_many(turn_items(evicted, first))
            self.archive.extend(evicted)
            self.summary = summary
        self.working[:] = working
        return evicted

    def _summarize(self, evicted: Sequence[Message], first: int) -> str:
        """The rolling summary with ``evicted`` folded in, checked (see :meth:`add`)."""
        name = type(self.summarizer).__name__
        try:
            summary: object = summarize_range(
                self.summarizer, self.summary, evicted, self.summary_tokens, first_index=first
            )
        except Exception as exc:
            raise SummarizerError(name, f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(summary, str):
            raise SummarizerError(name, f"returned {type(summary).__name__}, not text")
        if (
            not summary.strip()
            and not isinstance(self.summarizer, ExtractiveSummarizer)
            and (self.summary.strip() or render_turns(evicted).strip())
        ):
            raise SummarizerError(name, "it returned an empty summary")
        if self.counter.count(summary) > self.summary_tokens:
            summary = truncate_to_tokens(summary, self.summary_tokens, self.counter)
        return summary

    def sections(self, query: str | None = None) -> list[Section]:
        """Sections for the assembler (pinned facts and rules first). Long-term
        memory is recalled for ``query`` when there is one (None, empty or blank:
        nothing is recalled)."""
        out = [p.section() for p in self.pinned]
        if self.working:
            out.append(Section("recent turns", render_turns(self.working), 80, truncatable=True))
        blank = isinstance(query, str) and not query.strip()
        if self.longterm is not None and query is not None and not blank:
            try:
                hits = self.longterm.recall(query, k=self.recall_k)
            except NamespaceNotFoundError:
                hits = []  # nothing remembered yet
            if hits:
                text = "\n".join(h.item.text for h in hits)
                out.append(
                    Section("recalled", "Recalled from memory:\n" + text, 60, truncatable=True)
                )
        if self.summary:
            out.append(
                Section(
                    "summary", "Summary of earlier turns:\n" + self.summary, 40, truncatable=True
                )
            )
        return out
