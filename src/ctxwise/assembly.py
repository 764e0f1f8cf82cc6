"""Budgeted assembly of a context window from sections.

:func:`assemble` keeps every pinned section, then fills the rest of the budget by
descending priority (ties keep the caller's order): a section is taken whole if
it fits, truncated on a word boundary with an elision marker if it is
truncatable, and dropped otherwise. The :class:`Assembly` it returns reports
every decision with its tokens; its total never exceeds the budget.

The window order puts stable sections first (a byte-identical prefix across
turns is what provider prompt caching needs), then the others either in the
caller's order or, with ``order="recall"``, by :func:`order_for_recall`, which
puts the most important sections at the two edges where models recall best.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Literal, TypeAlias, TypeVar

from ctxwise.errors import BudgetError, PinnedOverflowError, UsageError
from ctxwise.tokens import DEFAULT_MARKER, CharCounter, TokenCounter, truncate_to_tokens

__all__ = [
    "Assembly",
    "Budget",
    "Section",
    "SectionReport",
    "SectionStatus",
    "assemble",
    "fit_as_sent",
    "order_for_recall",
]

Order: TypeAlias = Literal["given", "recall"]

T = TypeVar("T")


def fit_as_sent(
    first: T,
    count: Callable[[T], int],
    limit: int,
    shrink: Callable[[T, int], T | None],
    rounds: int,
) -> tuple[T, int, bool]:
    """Fit what is sent, counted as it is sent, within ``limit`` tokens.

    A window counted part by part can count more once sent whole (the separators
    that join its parts, messages a render sends apart, a counter that does not add
    up block by block). ``first`` is counted (``count``); while it is over ``limit``,
    ``shrink(candidate, excess)`` gives one smaller by that excess (None: it cannot
    shrink further), up to ``rounds`` times. Returns the last candidate, its count,
    and whether it fits. The turn's assembly and compaction's summary both fit so."""
    candidate, total = first, count(first)
    for _ in range(rounds):
        if total <= limit:
            return candidate, total, True
        smaller = shrink(candidate, total - limit)
        if smaller is None:
            break
        candidate, total = smaller, count(smaller)
    return candidate, total, total <= limit


def _finite_number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


@dataclass(frozen=True, slots=True)
class Section:
    """A named piece of context competing for the window.

    ``priority``: higher wins. ``pinned``: always kept, whole. ``truncatable``: may
    be cut to fit. ``stable``: identical across turns, so it belongs to the cached
    prefix. ``refs``: where the content came from, as ledger pointers
    (:mod:`ctxwise.ledger`; the memory source names the items a recall holds).
    """

    name: str
    content: str
    priority: float = 0
    pinned: bool = False
    truncatable: bool = False
    stable: bool = False
    refs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise UsageError("a section needs a non-empty name")
        if not isinstance(self.content, str):
            raise UsageError(f"section {self.name!r}: content must be a string")
        if not _finite_number(self.priority):
            raise UsageError(f"section {self.name!r}: priority must be a number")


@dataclass(frozen=True, slots=True)
class Budget:
    """A token budget: ``tokens`` for the whole window, ``reserve`` of it kept free
    (for the live task, the reply, or framing the counter does not see)."""

    tokens: int
    reserve: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int):
            raise BudgetError(self.tokens, "must be an integer")
        if self.tokens <= 0:
            raise BudgetError(self.tokens, "must be greater than 0")
        if isinstance(self.reserve, bool) or not isinstance(self.reserve, int):
            raise BudgetError(self.tokens, f"reserve must be an integer, got {self.reserve!r}")
        if not (0 <= self.reserve < self.tokens):
            raise BudgetError(
                self.tokens, f"reserve {self.reserve} must be between 0 and the budget"
            )

    @property
    def available(self) -> int:
        return self.tokens - self.reserve


class SectionStatus(StrEnum):
    INCLUDED = "included"
    TRUNCATED = "truncated"
    DROPPED = "dropped"


@dataclass(frozen=True, slots=True)
class SectionReport:
    """The decision about one section: ``tokens`` it occupies in the window
    (0 when dropped), the ``original_tokens`` it asked for, and why."""

    section: Section
    status: SectionStatus
    tokens: int
    original_tokens: int
    content: str
    reason: str

    @property
    def name(self) -> str:
        return self.section.name

    def to_dict(self) -> dict[str, Any]:
        s = self.section
        return {
            "name": s.name,
            "priority": s.priority,
            "pinned": s.pinned,
            "stable": s.stable,
            "truncatable": s.truncatable,
            "tokens": self.tokens,
            "original_tokens": self.original_tokens,
            "status": self.status.value,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class Assembly:
    """The result of :func:`assemble`: decisions in the caller's order, and the
    kept sections in window order (``sections``)."""

    budget: Budget
    tokens: int
    reports: tuple[SectionReport, ...]
    sections: tuple[Section, ...]
    counter: str

    def _with(self, status: SectionStatus) -> tuple[SectionReport, ...]:
        return tuple(r for r in self.reports if r.status is status)

    @property
    def included(self) -> tuple[SectionReport, ...]:
        """Sections kept whole."""
        return self._with(SectionStatus.INCLUDED)

    @property
    def truncated(self) -> tuple[SectionReport, ...]:
        return self._with(SectionStatus.TRUNCATED)

    @property
    def dropped(self) -> tuple[SectionReport, ...]:
        return self._with(SectionStatus.DROPPED)

    @property
    def free(self) -> int:
        return self.budget.available - self.tokens

    def report(self, name: str) -> SectionReport:
        for r in self.reports:
            if r.section.name == name:
                return r
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (the CLI's ``--json`` output)."""
        return {
            "budget": self.budget.tokens,
            "reserve": self.budget.reserve,
            "tokens": self.tokens,
            "counter": self.counter,
            "included": [r.name for r in self.included],
            "truncated": [r.name for r in self.truncated],
            "dropped": [r.name for r in self.dropped],
            "order": [s.name for s in self.sections],
            "sections": [r.to_dict() for r in self.reports],
        }

    def render_text(self, separator: str = "\n\n") -> str:
        """The window as one string, sections in window order."""
        return separator.join(s.content for s in self.sections if s.content)


def order_for_recall(sections: Iterable[Section]) -> list[Section]:
    """Highest priority at the two ends, lowest in the middle.

    Sorted by descending priority (stable), then dealt alternately to the front
    and the back: ``[p1, p3, p5, …, p6, p4, p2]``.
    """
    ranked = sorted(sections, key=lambda s: -s.priority)
    front: list[Section] = []
    back: list[Section] = []
    for i, s in enumerate(ranked):
        (front if i % 2 == 0 else back).append(s)
    return front + back[::-1]


def _as_budget(budget: int | Budget) -> Budget:
    return budget if isinstance(budget, Budget) else Budget(budget)


def assemble(
    sections: Sequence[Section],
    budget: int | Budget,
    counter: TokenCounter | None = None,
    *,
    order: Order = "given",
    marker: str = DEFAULT_MARKER,
) -> Assembly:
    """Fit ``sections`` into ``budget`` tokens, counted by ``counter`` (default
    :class:`~ctxwise.tokens.CharCounter`).

    Raises :class:`~ctxwise.errors.PinnedOverflowError` when the pinned sections
    alone exceed the budget, :class:`~ctxwise.errors.BudgetError` for a budget
    of 0 or below, and :class:`~ctxwise.errors.UsageError` for duplicate names.
    """
    b = _as_budget(budget)
    if order not in ("given", "recall"):
        raise UsageError(f"unknown order {order!r}; choose 'given' or 'recall'")
    ctr = counter if counter is not None else CharCounter()
    count = ctr.count
    seen: set[str] = set()
    for s in sections:
        if s.name in seen:
            raise UsageError(
                f"duplicate section name {s.name!r}: names identify sections in the report"
            )
        seen.add(s.name)

    sizes = [count(s.content) for s in sections]
    pinned_tokens = sum(n for s, n in zip(sections, sizes, strict=True) if s.pinned)
    if pinned_tokens > b.available:
        raise PinnedOverflowError(
            b.available, pinned_tokens, [s.name for s in sections if s.pinned]
        )

    decisions: dict[int, SectionReport] = {}
    used = pinned_tokens
    for i, (s, n) in enumerate(zip(sections, sizes, strict=True)):
        if s.pinned:
            decisions[i] = SectionReport(s, SectionStatus.INCLUDED, n, n, s.content, "pinned")
    rest = sorted(
        (i for i, s in enumerate(sections) if not s.pinned), key=lambda i: -sections[i].priority
    )
    for i in rest:
        s, n = sections[i], sizes[i]
        left = b.available - used
        if n <= left:
            decisions[i] = SectionReport(s, SectionStatus.INCLUDED, n, n, s.content, "fits")
            used += n
            continue
        if s.truncatable and left > 0:
            cut = truncate_to_tokens(s.content, left, ctr, marker)
            if cut:
                m = count(cut)
                decisions[i] = SectionReport(
                    s, SectionStatus.TRUNCATED, m, n, cut, f"cut to fit {left} left"
                )
                used += m
                continue
            reason = f"{left} left: no word fits"
        else:
            reason = f"{left} left" + ("" if s.truncatable else ": not truncatable")
        decisions[i] = SectionReport(s, SectionStatus.DROPPED, 0, n, "", reason)

    reports = tuple(decisions[i] for i in range(len(sections)))
    kept = [
        r.section if r.status is SectionStatus.INCLUDED else replace(r.section, content=r.content)
        for r in reports
        if r.status is not SectionStatus.DROPPED
    ]
    stable = [s for s in kept if s.stable]
    live = [s for s in kept if not s.stable]
    window = stable + (order_for_recall(live) if order == "recall" else live)
    return Assembly(b, used, reports, tuple(window), ctr.name)
