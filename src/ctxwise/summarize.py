"""Summarizers: fold evicted turns into a rolling summary.

:class:`ExtractiveSummarizer`, the offline default, keeps sentences verbatim: the
ones that carry numbers, amounts, dates, ids, names, file paths and instructions
("do not…", "must…", "until…"), within a token budget, in their original order.
It never paraphrases, so what it keeps is exactly what was said.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ctxwise.errors import UsageError
from ctxwise.messages import Message, ToolResultBlock, ToolUseBlock, block_text
from ctxwise.tokens import CharCounter, TokenCounter, truncate_to_tokens

if TYPE_CHECKING:
    from ctxwise.providers.chat import ChatModel

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "Summarizer",
    "render_turns",
]


@runtime_checkable
class Summarizer(Protocol):
    """Folds turns into a summary of at most ``budget`` tokens."""

    def summarize(self, previous: str, turns: Sequence[Message], budget: int) -> str: ...


def render_turns(turns: Sequence[Message]) -> str:
    """Turns as plain lines (``role: text``; tool calls and results labelled)."""
    lines = []
    for m in turns:
        for b in m.content:
            text = block_text(b).strip()
            if not text:
                continue
            if isinstance(b, ToolUseBlock):
                lines.append(f"{m.role} called {text}")
            elif isinstance(b, ToolResultBlock):
                lines.append(f"tool result: {text}")
            else:
                lines.append(f"{m.role}: {text}")
    return "\n".join(lines)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_INSTRUCTION = re.compile(
    r"\b(do not|don't|never|always|must|mustn't|should not|shouldn't|until|unless|"
    r"make sure|be sure|only|required?|deadline|no later than|from now on)\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\d")
_AMOUNT = re.compile(r"[$€£¥]|\b(usd|eur|gbp|dollars?|euros?|cents?)\b", re.IGNORECASE)
_DATE = re.compile(
    r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b|"
    r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|tomorrow|yesterday)\b",
    re.IGNORECASE,
)
_ID = re.compile(r"\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{4,}\b|#\w+")
_PATH = re.compile(r"(?:[\w.-]+/)+[\w.-]+|\b[\w-]+\.(?:py|js|ts|md|json|yaml|yml|txt|csv|sql)\b")
_NAME = re.compile(r"(?<=[a-z,;:] )[A-Z][a-z]+")


def _weight(sentence: str) -> int:
    """How much a sentence is worth keeping (0: not at all)."""
    score = 0
    if _INSTRUCTION.search(sentence):
        score += 8  # instructions outrank facts: losing one changes behaviour
    if _AMOUNT.search(sentence) and _NUMBER.search(sentence):
        score += 3
    if _ID.search(sentence) or _PATH.search(sentence):
        score += 3
    if _DATE.search(sentence):
        score += 2
    if _NUMBER.search(sentence):
        score += 1
    if _NAME.search(sentence):
        score += 1
    return score


@dataclass(frozen=True, slots=True)
class _Candidate:
    order: int
    weight: int
    text: str


class ExtractiveSummarizer:
    """Verbatim sentences that carry facts and instructions, in order, under a budget.

    The previous summary's sentences compete with the new turns' on the same
    terms, so the summary rolls: older detail leaves only when newer detail that
    weighs more needs the room.
    """

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self.counter = counter if counter is not None else CharCounter()

    def summarize(self, previous: str, turns: Sequence[Message], budget: int) -> str:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise UsageError(f"summary budget must be a positive integer, got {budget!r}")
        candidates: list[_Candidate] = []
        order = 0
        for line in [*previous.splitlines(), *render_turns(turns).splitlines()]:
            prefix = ""
            body = line
            head, sep, rest = line.partition(": ")
            if sep and head in ("user", "assistant", "system", "tool result"):
                prefix, body = head + ": ", rest
            for piece in _SENTENCE_END.split(body):
                sentence = piece.strip()
                if not sentence:
                    continue
                weight = _weight(sentence)
                if weight:
                    candidates.append(_Candidate(order, weight, prefix + sentence))
                    order += 1
        # Greedy by value per token: a short sentence that carries an id beats a long
        # tool dump that carries several; on ties, newer sentences first.
        costs = {c.order: self.counter.count(c.text) + 1 for c in candidates}  # + the newline
        kept: list[_Candidate] = []
        used = 0
        for c in sorted(candidates, key=lambda c: (-c.weight / costs[c.order], -c.order)):
            if used + costs[c.order] <= budget:
                kept.append(c)
                used += costs[c.order]
        seen: set[str] = set()
        out = []
        for c in sorted(kept, key=lambda c: c.order):
            if c.text not in seen:
                seen.add(c.text)
                out.append(c.text)
        return "\n".join(out)


DEFAULT_INSTRUCTIONS = """\
You maintain the running summary of a conversation between a user and an assistant
that has run out of room. You get the summary so far and the turns that are leaving
the window; write the new summary, which replaces both. Do not call tools and do
not answer the user: only summarize.

The summary must keep:
- the difficulties met and how each was handled;
- the options raised, tried or set aside, and why;
- everything asked for, decided, agreed or ruled out, stated exactly;
- where things stand now, and what is still open;
- hard-to-reconstruct details exactly as written: names, numbers, amounts, dates,
  ids, file paths, links and exact wording;
- the user's own words, as close to verbatim as possible.

Drop greetings, thanks and filler. Write plain text, oldest first, and stay
within {budget} tokens."""


class LLMSummarizer:
    """A summarizer that asks a model (any :class:`~ctxwise.providers.ChatModel`).

    ``instructions`` replace :data:`DEFAULT_INSTRUCTIONS` (``{budget}`` is filled
    in). The answer is cut to the budget on a word boundary if the model runs over.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        instructions: str = DEFAULT_INSTRUCTIONS,
        counter: TokenCounter | None = None,
    ) -> None:
        if not instructions.strip():
            raise UsageError("summarizer instructions must not be empty")
        self.model = model
        self.instructions = instructions
        self.counter = counter if counter is not None else CharCounter()

    def prompt(self, previous: str, turns: Sequence[Message], budget: int) -> tuple[str, str]:
        """The (system, user) pair sent to the model."""
        system = self.instructions.replace("{budget}", str(budget))
        user = (
            "Summary so far:\n"
            + (previous.strip() or "(none)")
            + "\n\nTurns leaving the window:\n"
            + (render_turns(turns) or "(none)")
        )
        return system, user

    def summarize(self, previous: str, turns: Sequence[Message], budget: int) -> str:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise UsageError(f"summary budget must be a positive integer, got {budget!r}")
        system, user = self.prompt(previous, turns, budget)
        text = self.model.complete(system, user, max_tokens=budget).strip()
        return truncate_to_tokens(text, budget, self.counter)
