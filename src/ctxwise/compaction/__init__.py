"""Compaction: summarize the older part of a transcript, keep a verbatim tail, fit a budget.

:func:`compact` cuts a transcript's window in two. The older range goes to an
injected :class:`~ctxwise.summarize.Summarizer` (default: the offline
:class:`~ctxwise.summarize.ExtractiveSummarizer`); the result is

1. the system part: the leading system messages, unchanged, plus one *pinned
   block* holding the case facts and standing rules (:mod:`.pinned`; re-injected
   there, never inside the summary, and carried as data);
2. one summary message, the first conversation message (:mod:`.summary`): the
   user's messages of the range verbatim (the latest always), then the
   summarizer's excerpts, and the images and documents that left;
3. the tail, verbatim.

**Where the cut falls** (:mod:`.cuts`): at any message boundary where no tool call
is waiting for its result, inside a tool loop too, or after the last message (no
tail); inside a running tool loop whose turn opened with thinking, only before a step
that opens with thinking too (Anthropic wants that turn to open with its thinking).
The result passes :meth:`Transcript.problems` under the format's placement rule
(Anthropic and OpenAI alike).

**The total budget.** ``compact(t, budget=N)``: the output window (system part +
pinned block + summary + tail) holds at most ``N`` tokens by the same counter, or
:class:`CompactionBudgetError` names the parts that alone exceed it (system,
pinned, the latest user message, the summary's framing). The split: the tail is
the longest suffix from a safe cut within ``keep_tail_tokens`` (default: half of
what the budget leaves after the system part, the pinned block and the task) that
still leaves the summary a quarter of the room (or ``summary_tokens`` if smaller);
the summary gets what is left, up to ``summary_tokens`` (4,000) beyond the latest
user message. Of the summary's budget, ``user_share`` (25%) goes first to the
user's earlier messages, verbatim and whole, newest first. Without a budget,
``keep_tail_tokens`` or ``keep_tail_turns`` bound only the tail, and the window must
still shrink: the summary is cut back until it does, and nothing is compacted when
even the smallest summary is no smaller than the messages it would replace.

**Facts and rules**: with ``extract=True`` (the default) the new conversation (the
range and the tail) is scanned by the configured extractor
(:attr:`CompactionSettings.extractor`); the ``facts`` and ``rules`` given are
merged on top (a given fact wins). A transcript compacted before keeps its pinned
state and its summary rolls: the earlier summary's user lines stay candidates for
the user part, its other lines go to the summarizer as ``previous``.

**Archive first**: with a ``store``, every message of the input is written to the
store (one item per message) in one all-or-nothing ``put_many`` before the
summarizer runs; the archive id is a hash of the transcript.

**Bad input** is refused before anything is archived: a message that is not well
formed (:func:`~ctxwise.messages.message_problem`: a tool input that is not JSON data,
an empty id, …; a :class:`~ctxwise.errors.UsageError` naming it), an empty transcript
(:class:`EmptyTranscriptError`), tool pairing problems
(:class:`~ctxwise.pairing.PairingError`, or repaired with ``repair=True``), a
budget below what must stay (:class:`CompactionBudgetError`). A summarizer that
raises, returns no text, or returns nothing when it had room and text to work with
raises :class:`SummarizerError`. The input transcript is never modified.

:class:`AutoCompactor` compacts when a window is over ``trigger_tokens``, to a
budget below the trigger, and raises :class:`CompactionThrashError` when one item
keeps refilling the window. Both take one :class:`CompactionSettings`.

:func:`write_back_compaction` writes a compaction back into the file its
transcript was read from, in the file's shape (a Claude Code session the way
Claude Code records its own compactions).

Cost is measured by ``benchmarks/bench_compaction.py`` (its output gives the
figures; the Benchmarks page, docs/benchmarks.md, has the runs over every transcript).
"""

from __future__ import annotations

from ctxwise.compaction.auto import DEFAULT_TRIGGER_TOKENS, AutoCompactor
from ctxwise.compaction.core import compact
from ctxwise.compaction.cuts import SUMMARY_HEADER, safe_cut_points
from ctxwise.compaction.errors import (
    CompactionArchiveError,
    CompactionBudgetError,
    CompactionThrashError,
    EmptyTranscriptError,
    SummarizerError,
    WindowItem,
)
from ctxwise.compaction.pinned import PINNED_HEADER, PinnedState
from ctxwise.compaction.result import Compaction, DroppedMedia
from ctxwise.compaction.settings import (
    DEFAULT_NAMESPACE,
    DEFAULT_SUMMARY_TOKENS,
    CompactionSettings,
)
from ctxwise.compaction.write_back import write_back_compaction

__all__ = [
    "DEFAULT_NAMESPACE",
    "DEFAULT_SUMMARY_TOKENS",
    "DEFAULT_TRIGGER_TOKENS",
    "PINNED_HEADER",
    "SUMMARY_HEADER",
    "AutoCompactor",
    "Compaction",
    "CompactionArchiveError",
    "CompactionBudgetError",
    "CompactionSettings",
    "CompactionThrashError",
    "DroppedMedia",
    "EmptyTranscriptError",
    "PinnedState",
    "SummarizerError",
    "WindowItem",
    "compact",
    "safe_cut_points",
    "write_back_compaction",
]
