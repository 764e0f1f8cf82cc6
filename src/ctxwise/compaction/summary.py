"""The summary message: the user's words verbatim, then the summarizer's excerpts.

A summary message is one ``user`` message of kind ``compact_summary``. Its text is

1. :data:`~ctxwise.compaction.cuts.SUMMARY_HEADER`;
2. the user's messages of the summarized range, verbatim, one line per line of
   text, each as an excerpt with its origin (``[m12 user] …``): the latest one
   always, the earlier ones newest first while they fit ``user_share`` of the
   summary budget (whole messages only), written oldest first;
3. a blank line, then what the summarizer returned for the rest of the range (the
   offline summarizer writes excerpts with their origin too: ``[m40 Bash result] …``,
   and ``[m3 user] …`` for a user message it quotes in part);
4. a note listing the images and documents that left with the range.

The latest user message's images and documents stay with it, as blocks of the
summary message after the text.

A later compaction reads a summary back (:func:`read_previous`): the user's
messages are the excerpt lines before the first blank line, and the last of them
is the latest user message, the task; what follows is the summary proper. Without
the blank line, a summarizer's quote of an older user message would be read as
the latest one (a summary written before the blank line was added is read up to
its first line that is not a user excerpt).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxwise.compaction.cuts import SUMMARY_HEADER, starts_with_header
from ctxwise.compaction.pinned import is_pinned
from ctxwise.errors import UsageError
from ctxwise.memory.facts import Rules
from ctxwise.messages import ContentBlock, Message, TextBlock
from ctxwise.summarize import LLMSummarizer, Summarizer, format_excerpt, parse_excerpt
from ctxwise.tokens import TokenCounter

__all__ = ["SummaryCall", "summarizer_call"]

_INSTRUCTIONS_LEAD = "\n\nAdditional instructions for this compaction:\n"

SummaryCall = Callable[[str, Sequence[Message], int, int], str]
"""``(previous, turns, budget, first_index) -> summary``."""


def user_lines(index: int, message: Message) -> list[str]:
    """The user message's text as excerpt lines (blank lines left out)."""
    return [
        format_excerpt(index, "user", line)
        for b in message.content
        if isinstance(b, TextBlock)
        for line in b.text.splitlines()
        if line.strip()
    ]


def extra_blocks(message: Message) -> tuple[ContentBlock, ...]:
    """The blocks of a user message that are not text (images, documents, …)."""
    return tuple(b for b in message.content if not isinstance(b, TextBlock))


@dataclass(frozen=True, slots=True)
class PreviousSummary:
    """A leading summary message, split into the user's lines and the rest."""

    users: tuple[tuple[str, ...], ...]
    """The user messages it kept verbatim, oldest first, each as its lines (the
    excerpt lines of a summary, the text's lines for a bare task)."""
    rest: str
    """Everything else it said, for the summarizer as ``previous``."""
    written: tuple[str, ...] = ()
    """The same user messages as the user wrote them (no excerpt origins), one
    text each, so a window with no room for a summary can hold the task itself."""


_NOTE_LEAD = "[Dropped with the summarized messages"


def read_previous(message: Message | None) -> PreviousSummary:
    """The user's messages and the rest of a leading summary (see the module doc)."""
    if message is None:
        return PreviousSummary((), "")
    text = "\n".join(
        b.text for b in message.content if isinstance(b, TextBlock) and not is_pinned(b)
    )
    if not starts_with_header(text):
        # a window that held only the task: the user's message as it was written
        lines = tuple(x for x in text.splitlines() if x.strip())
        return PreviousSummary((lines,) if lines else (), "", ("\n".join(lines),) if lines else ())
    body = text.split("\n", 1)[1] if "\n" in text else ""
    groups: list[list[str]] = []
    last: int | None = None
    rest: list[str] = []
    in_users = True
    for line in body.split("\n"):
        ex = parse_excerpt(line) if in_users else None
        if ex is not None and ex.who == "user":
            if ex.index != last or not groups:
                groups.append([])
            groups[-1].append(line)
            last = ex.index
            continue
        # the user part ends at the first blank line (or, in a summary written
        # before that line was added, at the first line that is not a user excerpt)
        in_users = False
        if line.strip() and not line.startswith(_NOTE_LEAD):
            rest.append(line)
    written = tuple(
        "\n".join(ex.text if (ex := parse_excerpt(x)) is not None else x for x in g) for g in groups
    )
    return PreviousSummary(tuple(tuple(g) for g in groups), "\n".join(rest), written)


def compose(users: Sequence[str], body: str, note: str, blocks: Sequence[ContentBlock]) -> Message:
    """The summary message: the header and the user's lines, then (after a blank
    line, so that a later compaction can tell them apart) the body and the note."""
    head = "\n".join(x for x in (SUMMARY_HEADER, *users) if x)
    tail = "\n".join(x for x in (body, note) if x)
    text = f"{head}\n\n{tail}" if tail else head
    return Message("user", (TextBlock(text), *blocks), kind="compact_summary", plain=not blocks)


def strip_rules(summary: str, rules: Rules) -> str:
    """The summary without lines that restate a pinned rule."""
    if not len(rules):
        return summary
    kept = []
    for line in summary.splitlines():
        ex = parse_excerpt(line)
        body = ex.text if ex else line
        head, sep, rest = body.partition(": ")
        if sep and head in ("user", "assistant", "system"):
            body = rest
        if body.strip() and body.strip() in rules:
            continue
        kept.append(line)
    return "\n".join(kept)


def fit_lines(lines: Sequence[str], budget: int, counter: TokenCounter) -> str:
    """The longest prefix of ``lines`` (joined by newlines) within ``budget`` tokens."""
    out: list[str] = []
    for line in lines:
        trial = "\n".join([*out, line])
        if counter.count(trial) > budget:
            break
        out.append(line)
    return "\n".join(out)


def summarizer_call(summarizer: Summarizer, instructions: str | None) -> SummaryCall:
    """``summarizer.summarize`` with ``instructions`` and ``first_index`` passed where
    it takes them; instructions a summarizer cannot take raise :class:`UsageError`."""
    method = summarizer.summarize
    if instructions is not None and isinstance(summarizer, LLMSummarizer):
        method = LLMSummarizer(
            summarizer.model,
            instructions=summarizer.instructions + _INSTRUCTIONS_LEAD + instructions.strip(),
            counter=summarizer.counter,
        ).summarize
        instructions = None
    try:
        params: set[str] = set(inspect.signature(method).parameters)
    except (TypeError, ValueError):
        params = set()
    takes_index = "first_index" in params
    if instructions is not None and "instructions" not in params:
        raise UsageError(
            f"{type(summarizer).__name__} takes no instructions: use an LLMSummarizer, or a "
            "summarizer whose summarize() accepts instructions=..."
        )
    extra: dict[str, Any] = {"instructions": instructions} if instructions is not None else {}
    loose: Callable[..., str] = method  # keywords checked against its signature above

    def call(previous: str, turns: Sequence[Message], budget: int, first_index: int) -> str:
        if takes_index:
            return loose(previous, turns, budget, first_index=first_index, **extra)
        return loose(previous, turns, budget, **extra)

    return call
