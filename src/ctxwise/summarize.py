"""Summarizers: fold evicted turns into a rolling summary.

:class:`ExtractiveSummarizer`, the offline default, writes excerpts: each line is a
verbatim, contiguous piece of one line of one content block, with its origin in
front (``[m12 user] …``, ``[m40 Bash result] […] lib/app/session.ex […]``; see
:func:`format_excerpt` and :func:`parse_excerpt`). It never paraphrases, so what it
keeps is exactly what was said, and where; a reader (or compaction's archive) can
go back to the message.

What it keeps is chosen by a budgeted greedy cover of *details*, the tokens a
reader cannot rebuild from the gist: tokens written like data (a path, a file
name, a dotted name, letters mixed with digits, a number of two or more digits, a
URL), names written like code (an underscore or a capital inside) where the user
or the agent wrote them, error messages, and the user's instructions ("do not…",
"must…", "until…"). Each detail weighs by its *salience* in the range: how many
messages came back to it, and whether the user or the agent wrote it (text or a
tool call), which stands, or only a tool printed it, which weighs less, and the
less the earlier it was printed. Candidates are fine-grained: the sentences of
what the user and the assistant said, and, in any other line, the windows over
each run of neighbouring details, so a long tool-output line costs the few
characters around its path rather than the whole line. A candidate is worth the
salience of the details it holds that the summary does not hold yet (an
instruction of the user's outranks any detail), per character of the line it
writes, origin prefix and cut markers included; the best is taken while it fits,
windows of one line that come close are merged into one excerpt, and the lines
come out in transcript order.

The summarizer has its own reading of a text (this module and the shared
analyzer, :mod:`ctxwise.text`): it does not use :mod:`ctxwise.retention`, which
scores summaries, so a score there is a measurement, not what it optimised.
``LLMSummarizer`` asks a model instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ctxwise.errors import UsageError
from ctxwise.messages import (
    Message,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    block_text,
)
from ctxwise.tokens import TokenCounter, truncate_to_tokens

if TYPE_CHECKING:
    from ctxwise.providers.chat import ChatModel

from ctxwise._extractive import (
    CUT_LEFT,
    CUT_RIGHT,
    Excerpt,
    ExtractiveSummarizer,
    check_input,
    counter_or_default,
    format_excerpt,
    parse_excerpt,
)

__all__ = [
    "CUT_LEFT",
    "CUT_RIGHT",
    "DEFAULT_INSTRUCTIONS",
    "Excerpt",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "Summarizer",
    "format_excerpt",
    "parse_excerpt",
    "render_turns",
    "summarize_range",
]


@runtime_checkable
class Summarizer(Protocol):
    """Folds turns into a summary of at most ``budget`` tokens."""

    def summarize(self, previous: str, turns: Sequence[Message], budget: int) -> str: ...


def summarize_range(
    summarizer: Summarizer,
    previous: str,
    turns: Sequence[Message],
    budget: int,
    *,
    first_index: int = 0,
) -> str:
    """``summarizer.summarize(previous, turns, budget)``, telling it that ``turns[0]``
    is message ``first_index`` when its ``summarize`` takes ``first_index=`` (the
    origin an excerpt names)."""
    try:
        takes = "first_index" in inspect.signature(summarizer.summarize).parameters
    except (TypeError, ValueError):
        takes = False
    if takes:
        loose: Callable[..., str] = summarizer.summarize
        return loose(previous, turns, budget, first_index=first_index)
    return summarizer.summarize(previous, turns, budget)


def render_turns(turns: Sequence[Message]) -> str:
    """Turns as plain lines (``role: text``; tool calls and results labelled).

    Thinking is left out, redacted or not: it is the model's private reasoning, not
    something it said, so it is neither remembered (TieredMemory's recent turns and
    long-term items), nor summarized (the LLM summarizer's prompt), nor archived by
    compaction as text (a redacted block's ``thinking`` is encrypted data anyway).
    The blocks themselves stay in the messages, where a provider needs them sent
    back (Anthropic thinking in a tool loop is the render path, not this text)."""
    lines = []
    for m in turns:
        for b in m.content:
            if isinstance(b, ThinkingBlock):
                continue
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
        if not isinstance(instructions, str) or not instructions.strip():
            raise UsageError(
                f"summarizer instructions must be non-empty text, got {instructions!r:.60}"
            )
        self.model = model
        self.instructions = instructions
        self.counter = counter_or_default(counter)

    def prompt(self, previous: str, turns: Sequence[Message], budget: int) -> tuple[str, str]:
        """The (system, user) pair sent to the model."""
        check_input(previous, turns)
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
