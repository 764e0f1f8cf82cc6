"""The per-turn pipeline without a session: route → gather (only the chosen
sources) → assemble. It runs the choice of sources and the gathering of the
Engine's turn (:func:`ctxwise.turn.route.choose`,
:func:`ctxwise.turn.gather.gather_sections`), on a query instead of a session.

A routes table maps each label to the sources it needs. When the router refuses
(``low_confidence``, ``ambiguous_tie``, no intents) or names a label the table
does not know, the pipeline falls back to the broader source set: it fails safe,
it never guesses a label. A source that was not chosen is never called.

The kitchen sink (every source, same assembler, same budget) is the baseline:
``turn(..., baseline=True)`` runs it too and the trace reports the tokens saved.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxwise.assembly import Assembly, Budget, Order, Section, SectionStatus, assemble
from ctxwise.errors import UsageError
from ctxwise.routing.decision import RouteDecision
from ctxwise.sources import Source
from ctxwise.tokens import CharCounter, TokenCounter
from ctxwise.turn.context import Classifier
from ctxwise.turn.gather import gather_sections
from ctxwise.turn.route import choose

__all__ = ["Classifier", "Pipeline", "Trace", "TurnResult"]


@dataclass(frozen=True, slots=True)
class Trace:
    """What the turn did, with tokens."""

    reason: str
    label: str | None
    fallback: str | None
    chosen: tuple[str, ...]
    skipped: tuple[str, ...]
    tokens_by_source: Mapping[str, int]
    total_tokens: int
    kitchen_sink_tokens: int | None = None
    kitchen_sink_by_source: Mapping[str, int] = field(default_factory=dict)

    @property
    def saved_tokens(self) -> int | None:
        if self.kitchen_sink_tokens is None:
            return None
        return self.kitchen_sink_tokens - self.total_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "label": self.label,
            "fallback": self.fallback,
            "chosen": list(self.chosen),
            "skipped": list(self.skipped),
            "tokens_by_source": dict(self.tokens_by_source),
            "total_tokens": self.total_tokens,
            "kitchen_sink_tokens": self.kitchen_sink_tokens,
            "kitchen_sink_by_source": dict(self.kitchen_sink_by_source),
            "saved_tokens": self.saved_tokens,
        }


@dataclass(frozen=True, slots=True)
class TurnResult:
    decision: RouteDecision
    sources: tuple[str, ...]
    assembly: Assembly
    trace: Trace
    baseline: Assembly | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision.to_dict(),
            "sources": list(self.sources),
            "assembly": self.assembly.to_dict(),
            "trace": self.trace.to_dict(),
        }


class Pipeline:
    """Route a query, call only the chosen sources, assemble under a budget.

    ``base`` sections (a system prompt, standing rules) go into every window.
    ``fallback`` is the source set used when the router refuses; by default
    every source.
    """

    def __init__(
        self,
        router: Classifier,
        sources: Sequence[Source],
        routes: Mapping[str, Sequence[str]],
        budget: int | Budget,
        counter: TokenCounter | None = None,
        *,
        fallback: Sequence[str] | None = None,
        base: Sequence[Section] = (),
        order: Order = "given",
    ) -> None:
        if not isinstance(router, Classifier):
            raise UsageError(f"a router needs a route(query) method; got {router!r}")
        sources = list(sources)  # a generator is read once: its names, then its sources
        for s in sources:
            if not isinstance(getattr(s, "name", None), str) or not callable(
                getattr(s, "sections", None)
            ):
                raise UsageError(f"a source needs a name and a sections() method; got {s!r}")
        names = [s.name for s in sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise UsageError(f"duplicate source names: {', '.join(dupes)}")
        self.sources: dict[str, Source] = {s.name: s for s in sources}
        if not isinstance(routes, Mapping):
            raise UsageError(f"routes must map each label to its source names, got {routes!r}")
        self.routes = {
            label: self._names(chosen, f"route {label!r}") for label, chosen in routes.items()
        }
        self.fallback = tuple(names) if fallback is None else self._names(fallback, "fallback")
        self.router = router
        self.budget = budget if isinstance(budget, Budget) else Budget(budget)
        self.counter = counter if counter is not None else CharCounter()
        self.base = tuple(base)
        for section in self.base:
            if not isinstance(section, Section):
                raise UsageError(f"a base section must be a Section, got {section!r}")
        self.order: Order = order

    def _names(self, chosen: object, what: str) -> tuple[str, ...]:
        """Source names as given for a route or the fallback: a sequence of known names,
        each once (a source named twice was called twice and its section refused)."""
        if isinstance(chosen, str) or not isinstance(chosen, Iterable):
            raise UsageError(f"{what}: give a list of source names, not {chosen!r}")
        out = tuple(chosen)  # a generator is read once
        unknown = [str(n) for n in out if not isinstance(n, str) or n not in self.sources]
        if unknown:
            raise UsageError(
                f"{what} names unknown source(s): {', '.join(unknown)}; "
                f"known: {', '.join(self.sources) or 'none'}"
            )
        twice = sorted({n for n in out if out.count(n) > 1})
        if twice:
            raise UsageError(f"{what} names source(s) more than once: {', '.join(twice)}")
        return out

    def _gather(
        self, chosen: Sequence[str], query: str, state: Mapping[str, Any]
    ) -> tuple[list[Section], dict[str, str]]:
        sections = list(self.base)
        owner = {s.name: "(base)" for s in self.base}
        for section, name in gather_sections(self.sources, chosen, query, state):
            if section.name in owner:
                raise UsageError(
                    f"section name {section.name!r} from source {name!r} "
                    f"is already used by {owner[section.name]!r}"
                )
            owner[section.name] = name
            sections.append(section)
        return sections, owner

    def choose(self, decision: RouteDecision) -> tuple[tuple[str, ...], str | None]:
        """The sources for a decision, and why the fallback set was used (or None)."""
        return choose(self.routes, self.fallback, decision.label, decision.reason.value)

    def assemble_sources(
        self, chosen: Sequence[str], query: str, state: Mapping[str, Any] | None = None
    ) -> tuple[Assembly, dict[str, int]]:
        """Call the ``chosen`` sources (only those), assemble with the base sections,
        and count the window's tokens per source."""
        chosen = self._names(chosen, "chosen sources")  # as a route's: a list, each once
        sections, owner = self._gather(chosen, query, state or {})
        assembly = assemble(sections, self.budget, self.counter, order=self.order)
        by_source = dict.fromkeys(chosen, 0)
        for report in assembly.reports:
            src = owner[report.name]
            if src != "(base)" and report.status is not SectionStatus.DROPPED:
                by_source[src] += report.tokens
        return assembly, by_source

    def kitchen_sink(self, query: str, state: Mapping[str, Any] | None = None) -> Assembly:
        """The baseline: every source, the same assembler and budget."""
        return self.assemble_sources(tuple(self.sources), query, state)[0]

    def turn(
        self, query: str, state: Mapping[str, Any] | None = None, *, baseline: bool = False
    ) -> TurnResult:
        st: Mapping[str, Any] = state or {}
        decision = self.router.route(query)
        if not isinstance(decision, RouteDecision):
            raise UsageError(f"the router's route() returned {decision!r}, not a RouteDecision")
        chosen, fallback = self.choose(decision)
        assembly, by_source = self.assemble_sources(chosen, query, st)
        sink: Assembly | None = None
        sink_by: dict[str, int] = {}
        if baseline:
            sink, sink_by = self.assemble_sources(tuple(self.sources), query, st)
        trace = Trace(
            reason=decision.reason.value,
            label=decision.label,
            fallback=fallback,
            chosen=tuple(chosen),
            skipped=tuple(n for n in self.sources if n not in chosen),
            tokens_by_source=by_source,
            total_tokens=assembly.tokens,
            kitchen_sink_tokens=sink.tokens if sink is not None else None,
            kitchen_sink_by_source=sink_by,
        )
        return TurnResult(decision, tuple(chosen), assembly, trace, sink)
