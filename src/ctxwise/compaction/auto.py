"""``AutoCompactor``: compact when a window is over its trigger, and stop thrashing."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Unpack

from ctxwise.compaction.core import compact, scannable
from ctxwise.compaction.errors import CompactionThrashError, largest_item
from ctxwise.compaction.result import Compaction
from ctxwise.compaction.settings import CompactionSettings, SettingsOverrides, positive
from ctxwise.compaction.summary import summarizer_call
from ctxwise.errors import UsageError
from ctxwise.memory.facts import CaseFacts, Fact, Rule, Rules
from ctxwise.memory.store import Store, check_namespace
from ctxwise.messages import Message, Transcript
from ctxwise.summarize import ExtractiveSummarizer, Summarizer
from ctxwise.tokens import CharCounter, TokenCounter

__all__ = ["DEFAULT_TRIGGER_TOKENS", "AutoCompactor"]

DEFAULT_TRIGGER_TOKENS = 150_000
""":class:`AutoCompactor` compacts a transcript over this many tokens."""


def _same_turns(a: Sequence[Message], b: Sequence[Message]) -> bool:
    return len(a) == len(b) and all(
        x is y or (x.role == y.role and x.content == y.content) for x, y in zip(a, b, strict=True)
    )


class AutoCompactor:
    """Compacts a transcript when it is over ``trigger_tokens``, and stops thrashing.

    Call :meth:`maybe_compact` with the current transcript before each model call.
    Under the trigger it returns ``None``. Over it, it compacts with the settings
    given here (a :class:`CompactionSettings` or its fields as keywords, as
    :func:`compact` takes them) to ``budget`` (default: half the trigger; it must
    be below the trigger) and returns the :class:`Compaction`; carry on with its
    transcript.

    Facts and rules: with ``extract=True`` (a setting) every call scans only the
    messages that are new since the previous call (a transcript that extends the previous one,
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
    came in since the last compaction, instead of compacting again. A window whose
    system part and latest user message alone exceed the budget raises
    :class:`CompactionBudgetError`, as :func:`compact` does. :meth:`reset` forgets
    the count.
    """

    def __init__(
        self,
        summarizer: Summarizer | None = None,
        *,
        trigger_tokens: int = DEFAULT_TRIGGER_TOKENS,
        budget: int | None = None,
        settings: CompactionSettings | None = None,
        facts: CaseFacts | Iterable[Fact] | None = None,
        rules: Rules | Iterable[Rule | str] | None = None,
        store: Store | None = None,
        counter: TokenCounter | None = None,
        max_attempts: int = 3,
        refill_messages: int = 6,
        **overrides: Unpack[SettingsOverrides],
    ) -> None:
        positive("trigger_tokens", trigger_tokens)
        positive("max_attempts", max_attempts)
        positive("refill_messages", refill_messages)
        cfg = (settings if settings is not None else CompactionSettings()).with_overrides(overrides)
        if budget is None:
            budget = max(1, trigger_tokens // 2)
        positive("budget", budget)
        if budget >= trigger_tokens:
            raise UsageError(
                f"budget ({budget:,}) must be below trigger_tokens ({trigger_tokens:,}), or "
                "every compaction would end over the trigger"
            )
        if store is not None:
            check_namespace(cfg.namespace)
        self.counter: TokenCounter = counter if counter is not None else CharCounter()
        self.summarizer: Summarizer = (
            summarizer if summarizer is not None else ExtractiveSummarizer(self.counter)
        )
        summarizer_call(self.summarizer, cfg.instructions)  # refuse unusable instructions now
        self.trigger_tokens = trigger_tokens
        self.budget = budget
        self.settings = cfg
        self.facts = facts
        self.rules = rules
        self.store = store
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
            scanned = [scannable(m) for m in new]
            self.tracked_facts.update_from_messages(
                scanned, offset=offset, extractor=self.settings.extractor
            )
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
        if self.settings.extract:
            self._track(transcript.messages)
        tokens = self.counter.count_messages(transcript.messages)
        if tokens <= self.trigger_tokens:
            return None
        refill_at = self._refill_start(transcript)
        streak = self._streak + 1 if refill_at is not None else 1
        if refill_at is not None and streak > self.max_attempts:
            item = largest_item(
                transcript.messages, refill_at, len(transcript.messages), self.counter
            )
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
            budget=self.budget,
            settings=self.settings,
            facts=facts,
            rules=rules,
            store=self.store,
            counter=self.counter,
            extract=False,
        )
        self._streak = streak
        self.compactions += 1
        self.last = result
        self._scanned = result.transcript.messages
        return result
