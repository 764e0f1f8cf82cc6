"""Summarizers: fold evicted turns into a rolling summary.

:class:`ExtractiveSummarizer`, the offline default, keeps sentences verbatim: the
ones that carry numbers, amounts, dates, ids, names, file paths and instructions
("do not…", "must…", "until…"), within a token budget, in their original order.
It never paraphrases, so what it keeps is exactly what was said.
"""

from __future__ import annotations

import heapq
import json
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

# Details are found token by token (str.split, then cheap checks): about three
# times faster than one regex pass over the text, which matters at 150k tokens.
_HAS_DIGIT = re.compile(r"\d").search
_HAS_ALPHA = re.compile(r"[^\W\d_]").search
_AMOUNT = re.compile(r"[$€£¥]|\b(usd|eur|gbp|dollars?|euros?|cents?)\b", re.IGNORECASE)
_STRIP = ".,;:()[]{}\"'`<>!?*"


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


_EXTENSIONS = _wordset(
    "py pyi js jsx mjs ts tsx ex exs heex erl rb go rs "
    "java kt c h cc cpp hpp cs swift php sh sql md rst "
    "txt json jsonl yaml yml toml ini cfg csv html css scss vue xml "
    "proto lock log"
)
_DATE_WORDS = _wordset(
    "jan feb mar apr may jun jul aug sep sept "
    "oct nov dec january february march april june july august "
    "september october november december monday tuesday wednesday thursday friday saturday "
    "sunday today tomorrow yesterday tonight"
)
_INSTRUCTION_WORDS = _wordset(
    "never always must mustn't until unless only require required requires deadline"
)
_INSTRUCTION_PHRASES = (
    "do not",
    "don't",
    "should not",
    "shouldn't",
    "make sure",
    "be sure",
    "no later than",
    "from now on",
)
_ERROR_WORDS = _wordset("error errors exception failed failure traceback fatal")
_INSTRUCTION_WEIGHT = 8  # instructions outrank facts: losing one changes behaviour
_CONVERSATION_FACTOR = 2  # what the user and assistant said outranks tool output,
# which a tool call can fetch again


@dataclass(frozen=True, slots=True)
class _Sentence:
    instruction: bool
    units: dict[str, int]
    """The details it carries, normalized text → worth: ids, paths and amounts 3
    (the hardest to reconstruct), dates and error lines 2-3, numbers and names 1."""


_WORD, _ID, _NUMBER, _OTHER = range(4)
_TokenInfo = tuple[str, int, bool, bool, bool, bool, bool]


def _classify(raw: str) -> _TokenInfo:
    """What a whitespace-separated token is, apart from its neighbours:
    (normalized text, kind, capitalised, date word, instruction word, error word,
    ends in lowercase or , ; :)."""
    tok = raw.strip(_STRIP)
    low = tok.casefold()
    kind = _OTHER
    if not tok or tok.isalpha():  # most tokens: a plain word
        kind = _WORD if tok else _OTHER
    elif _HAS_DIGIT(tok):
        kind = _ID if (_HAS_ALPHA(tok) or "/" in tok) else _NUMBER  # an id, a version
    elif ("/" in tok and _HAS_ALPHA(tok)) or (  # a path, a file name
        "." in tok and tok.rsplit(".", 1)[1].casefold() in _EXTENSIONS
    ):
        kind = _ID
    capital = bool(tok) and tok[0].isupper() and tok[1:].islower()
    return (
        low if tok else "",
        kind,
        capital,
        low in _DATE_WORDS,
        low in _INSTRUCTION_WORDS,
        low in _ERROR_WORDS,
        bool(raw) and (raw[-1].islower() or raw[-1] in ",;:"),
    )


def _read(sentence: str, cache: dict[str, _TokenInfo]) -> _Sentence:
    folded = sentence.casefold()
    instruction = any(p in folded for p in _INSTRUCTION_PHRASES)
    error = False
    units: dict[str, int] = {}
    amount = 0
    prev_lower = False
    for raw in sentence.split():
        info = cache.get(raw)
        if info is None:
            info = cache[raw] = _classify(raw)
        low, kind, capital, date_word, instruction_word, error_word, ends_lower = info
        worth = 0
        if kind == _ID:
            worth = 3  # ids, versions, paths and file names: the hardest to reconstruct
        elif kind == _NUMBER:
            if amount == 0:
                amount = 3 if _AMOUNT.search(sentence) else 1
            worth = amount
        elif low:
            if date_word:
                worth = 2
            elif prev_lower and capital:
                worth = 1  # a capitalised word mid-sentence: likely a name
            else:
                instruction = instruction or instruction_word
                error = error or error_word
        prev_lower = ends_lower
        if worth > units.get(low, 0):
            units[low] = worth
    if error:
        units["error: " + " ".join(folded.split())[:60]] = 3
    return _Sentence(instruction, units)


_ARG_CHARS = 120
_TOOL_LINES = 40
"""A long tool result is read by its first and last this many lines: what a
command reported and how it ended (errors, totals) sit there, while the middle of
a file listing or a log is what a tool call can fetch again. On the shared Claude
Code sessions this skips about two thirds of the text and keeps the retention
figures of ``benchmarks/bench_retention.py`` within a few specifics."""


def _call(block: ToolUseBlock) -> str:
    """A tool call as ``name(key=value, …)``, long values elided: the call's
    details (paths, ids) without the file body an edit carries."""
    args = []
    for key, value in block.input.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        text = " ".join(text.split())
        if len(text) > _ARG_CHARS:
            text = text[: _ARG_CHARS // 2].rstrip() + " […]"
        args.append(f"{key}={text}")
    return f"{block.name}({', '.join(args)})"


def _lines(turns: Sequence[Message]) -> list[tuple[int, str]]:
    """Like :func:`render_turns`, with tool calls in their short form; each line
    with the number of the block it came from."""
    lines = []
    group = 0
    for m in turns:
        for b in m.content:
            group += 1
            if isinstance(b, ToolUseBlock):
                lines.append((group, f"{m.role} called {_call(b)}"))
                continue
            text = block_text(b).strip()
            if not text:
                continue
            rows = [x for x in text.splitlines() if x.strip()]
            if isinstance(b, ToolResultBlock):
                if len(rows) > 2 * _TOOL_LINES:
                    rows = rows[:_TOOL_LINES] + rows[-_TOOL_LINES:]
                lines.extend((group, f"tool result: {x}") for x in rows)
            else:
                lines.extend((group, f"{m.role}: {x}") for x in rows)
    return lines


@dataclass(slots=True)
class _Candidate:
    order: int
    group: int
    text: str
    cost: int
    base: int
    factor: int
    units: dict[str, int]


def _gain(c: _Candidate, covered: set[str], taken: dict[int, int]) -> float:
    fresh = sum(w for u, w in c.units.items() if u not in covered)
    if c.factor == 1:
        # tool output: each further line from the same result is worth less, so
        # one long listing (scan ids, line numbers) cannot fill the summary
        return (c.base + fresh) / (1 + taken.get(c.group, 0))
    return float(c.factor * (c.base + fresh))


class ExtractiveSummarizer:
    """Verbatim sentences that carry facts and instructions, in order, under a budget.

    Selection is a budgeted greedy cover: a sentence is worth its instruction
    weight plus the details (ids, paths, amounts, dates, numbers, names, error
    lines) it carries *that the summary does not hold yet*, doubled for what the
    user or assistant said (tool output can be fetched again), divided by its
    tokens. So a detail repeated in twenty tool results costs one sentence, and
    the budget goes to distinct specifics. Identical sentences are kept once.

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
        plain: list[tuple[int, str]] = []  # sentences with no detail and no instruction
        tokens: dict[str, _TokenInfo] = {}  # token → what it is, read once a call
        seen: set[str] = set()
        earlier = [(-i, line) for i, line in enumerate(previous.splitlines(), start=1)]
        for group, line in [*earlier, *_lines(turns)]:
            prefix = ""
            body = line
            head, sep, rest = line.partition(": ")
            if sep and head in ("user", "assistant", "system", "tool result"):
                prefix, body = head + ": ", rest
            factor = 1 if prefix == "tool result: " else _CONVERSATION_FACTOR
            for piece in _SENTENCE_END.split(body):
                sentence = piece.strip()
                text = prefix + sentence
                if not sentence or text in seen:
                    continue
                seen.add(text)
                read = _read(sentence, tokens)
                base = _INSTRUCTION_WEIGHT if read.instruction else 0
                units = read.units
                if not base and not units:
                    plain.append((factor, text))
                    continue
                cost = self.counter.count(text) + 1  # + the newline
                candidates.append(
                    _Candidate(len(candidates), group, text, cost, base, factor, units)
                )
        # Lazy greedy: a gain only shrinks as the summary covers more, so a stale
        # heap entry is re-scored when it surfaces. Ties go to newer sentences.
        covered: set[str] = set()
        taken: dict[int, int] = {}
        heap = [(-_gain(c, covered, taken) / c.cost, -c.order) for c in candidates]
        heapq.heapify(heap)
        kept: list[int] = []
        used = 0
        while heap and used < budget:
            neg_ratio, neg_order = heapq.heappop(heap)
            c = candidates[-neg_order]
            if used + c.cost > budget:
                continue
            ratio = _gain(c, covered, taken) / c.cost
            if ratio <= 0:
                continue
            if ratio < -neg_ratio and heap and ratio < -heap[0][0]:
                heapq.heappush(heap, (-ratio, neg_order))
                continue
            kept.append(c.order)
            used += c.cost
            covered.update(c.units)
            taken[c.group] = taken.get(c.group, 0) + 1
        if not kept:
            return self._latest(plain, budget)
        return "\n".join(candidates[i].text for i in sorted(kept))

    def _latest(self, plain: Sequence[tuple[int, str]], budget: int) -> str:
        """Nothing carried a detail or an instruction: keep the latest sentences the
        user and the assistant said (tool output only if they said nothing) that fit."""
        pool = [t for f, t in plain if f != 1] or [t for _, t in plain]
        chosen: list[str] = []
        used = 0
        for text in reversed(pool):
            cost = self.counter.count(text) + 1
            if used + cost > budget:
                break
            chosen.append(text)
            used += cost
        return "\n".join(reversed(chosen))


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
