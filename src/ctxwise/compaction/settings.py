"""One settings object for :func:`~ctxwise.compaction.compact` and
:class:`~ctxwise.compaction.AutoCompactor`.

Every knob has a default that needs no model, no network and no tuning to a
dataset. Pass a :class:`CompactionSettings`, or its fields as keywords (they
override the settings given)::

    compact(t, budget=20_000)                                   # the defaults
    compact(t, budget=20_000, keep_tail_tokens=8_000)           # one override
    s = CompactionSettings(summary_tokens=2_000, repair=True)
    compact(t, budget=20_000, settings=s)
    AutoCompactor(trigger_tokens=150_000, settings=s)           # the same object
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import TypedDict

from ctxwise.errors import UsageError
from ctxwise.memory.facts import Extractor

__all__ = [
    "DEFAULT_NAMESPACE",
    "DEFAULT_SUMMARY_TOKENS",
    "DEFAULT_TAIL_SHARE",
    "DEFAULT_USER_SHARE",
    "CompactionSettings",
    "SettingsOverrides",
]

DEFAULT_SUMMARY_TOKENS = 4_000
"""The summary's ceiling, about the size of Claude Code's own summaries."""
DEFAULT_USER_SHARE = 0.25
"""Share of the summary budget kept for the user's earlier messages, verbatim."""
DEFAULT_TAIL_SHARE = 0.5
"""With a total budget and no ``keep_tail_tokens``: the tail's target as a share
of what the budget leaves after the system part, the pinned block and the task."""
DEFAULT_NAMESPACE: tuple[str, ...] = ("ctxwise", "compaction-archive")
"""Where compaction archives transcripts when given a store."""


class SettingsOverrides(TypedDict, total=False):
    """:class:`CompactionSettings` fields given as keywords."""

    keep_tail_tokens: int | None
    keep_tail_turns: int | None
    summary_tokens: int
    user_share: float
    tail_share: float
    instructions: str | None
    extract: bool
    extractor: Extractor | None
    repair: bool
    namespace: Sequence[str]


def positive(name: str, value: object) -> int:
    """``value`` when it is a positive int; else :class:`UsageError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a positive integer, got {value!r}")
    return value


def _share(name: str, value: object, *, low_open: bool) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok:
        v = float(value)  # type: ignore[arg-type]
        ok = (v > 0.0 if low_open else v >= 0.0) and v <= 1.0
    if not ok:
        bound = "(0, 1]" if low_open else "[0, 1]"
        raise UsageError(f"{name} must be a number in {bound}, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionSettings:
    """How a compaction splits the window (every default documented).

    - ``keep_tail_tokens``: the verbatim tail's target. The tail is the longest
      suffix from a safe cut that holds at most this many tokens (within a total
      budget, also at most what the budget leaves the summary's minimum).
      ``None``: with a budget, ``tail_share`` of the room the budget leaves after
      the system part, the pinned block and the task; without one, give this or
      ``keep_tail_turns``.
    - ``keep_tail_turns``: instead, keep the last N user turns verbatim (the tail
      starts at the N-th last real user message). At most one of the two.
    - ``summary_tokens`` (4,000): the summary's ceiling. Within a budget the
      summary gets what is left after the tail, up to this.
    - ``user_share`` (0.25): the share of the summary budget that the user's
      earlier messages of the summarized range take, verbatim and whole, newest
      first, before the summarizer chooses anything (the latest user message is
      kept whatever its size).
    - ``tail_share`` (0.5): see ``keep_tail_tokens``.
    - ``instructions``: extra instructions for an LLM summarizer (or any
      summarizer whose ``summarize`` takes ``instructions=``).
    - ``extract`` (True) and ``extractor`` (None: the default
      :class:`~ctxwise.memory.FactExtractor`): scan the summarized range for case
      facts and standing rules to pin. Only what the configured extractor finds is
      pinned.
    - ``repair`` (False): repair tool pairing problems instead of refusing them.
    - ``namespace``: where the archive goes in a store.
    """

    keep_tail_tokens: int | None = None
    keep_tail_turns: int | None = None
    summary_tokens: int = DEFAULT_SUMMARY_TOKENS
    user_share: float = DEFAULT_USER_SHARE
    tail_share: float = DEFAULT_TAIL_SHARE
    instructions: str | None = None
    extract: bool = True
    extractor: Extractor | None = None
    repair: bool = False
    namespace: Sequence[str] = DEFAULT_NAMESPACE

    def __post_init__(self) -> None:
        if self.keep_tail_tokens is not None and self.keep_tail_turns is not None:
            raise UsageError("give at most one of keep_tail_tokens and keep_tail_turns")
        if self.keep_tail_tokens is not None:
            positive("keep_tail_tokens", self.keep_tail_tokens)
        if self.keep_tail_turns is not None:
            positive("keep_tail_turns", self.keep_tail_turns)
        positive("summary_tokens", self.summary_tokens)
        _share("user_share", self.user_share, low_open=False)
        _share("tail_share", self.tail_share, low_open=True)
        if self.instructions is not None and (
            not isinstance(self.instructions, str) or not self.instructions.strip()
        ):
            raise UsageError("instructions must be a non-empty string or None")
        if self.extractor is not None and not callable(getattr(self.extractor, "extract", None)):
            raise UsageError("extractor must have an extract(text) method")
        if isinstance(self.namespace, str):
            raise UsageError("namespace must be a sequence of strings, not one string")
        object.__setattr__(self, "namespace", tuple(self.namespace))

    def with_overrides(self, overrides: SettingsOverrides) -> CompactionSettings:
        """These settings with ``overrides`` applied (unknown names are refused)."""
        if not overrides:
            return self
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise UsageError(
                f"unknown compaction setting(s) {', '.join(unknown)}; known: "
                f"{', '.join(sorted(known))}"
            )
        changes = dict(overrides)
        # one tail option replaces the other
        if changes.get("keep_tail_tokens") is not None:
            changes.setdefault("keep_tail_turns", None)
        if changes.get("keep_tail_turns") is not None:
            changes.setdefault("keep_tail_tokens", None)
        return replace(self, **changes)  # type: ignore[arg-type]
