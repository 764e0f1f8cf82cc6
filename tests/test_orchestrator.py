from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from ctxwise import Section, UsageError, WordCounter
from ctxwise._demo import ROUTING_QUERIES, ROUTING_SOURCES, routing_pipeline
from ctxwise.orchestrator import Pipeline
from ctxwise.routing import BowScorer, IntentRouter
from ctxwise.sources import StaticSource


class CountingSource:
    """Wraps a source and counts every call to it."""

    def __init__(self, inner: StaticSource) -> None:
        self.inner = inner
        self.calls = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def sections(self, query: str, state: Mapping[str, Any]) -> Sequence[Section]:
        self.calls += 1
        return self.inner.sections(query, state)

    def cost_estimate(self, query: str, state: Mapping[str, Any]) -> int:
        return self.inner.cost_estimate(query, state)


def counting_sources() -> list[CountingSource]:
    counter = WordCounter()
    return [
        CountingSource(StaticSource(name, text * repeat, counter=counter))
        for name, (text, repeat) in ROUTING_SOURCES.items()
    ]


def test_reference_scenario_exactly() -> None:
    pipeline = routing_pipeline()
    results = [pipeline.turn(q, baseline=True) for q in ROUTING_QUERIES]
    assert [r.decision.label for r in results] == [
        "factual",
        "coding",
        "chitchat",
        "factual",
        "coding",
    ]
    assert [r.trace.kitchen_sink_tokens for r in results] == [1038] * 5
    assert [r.trace.total_tokens for r in results] == [541, 695, 0, 541, 695]
    routed = sum(r.trace.total_tokens for r in results)
    sink = sum(r.trace.kitchen_sink_tokens or 0 for r in results)
    assert (routed, sink) == (2472, 5190)
    assert round(100 * (1 - routed / sink)) == 52
    for r in results:
        assert r.assembly.tokens <= 4000
        if r.decision.label == "coding":
            assert {"code", "tools"} <= set(r.trace.tokens_by_source)
            assert r.trace.tokens_by_source["code"] > 0 and r.trace.tokens_by_source["tools"] > 0
    assert results[0].trace.tokens_by_source == {"retrieval": 343, "memory": 198}
    assert results[0].trace.saved_tokens == 1038 - 541


def test_a_source_not_chosen_is_never_called() -> None:
    sources = counting_sources()
    pipeline = routing_pipeline(sources)
    for q in ROUTING_QUERIES:
        pipeline.turn(q)
    calls = {s.name: s.calls for s in sources}
    # factual twice (retrieval, memory), coding twice (code, tools, memory), chitchat none
    assert calls == {"retrieval": 2, "memory": 4, "tools": 2, "code": 2}
    pipeline.turn("hey thanks")
    assert {s.name: s.calls for s in sources} == calls


def test_refusal_falls_back_to_the_broader_set_not_a_guess() -> None:
    router = IntentRouter(BowScorer(), threshold=0.3, margin=0.05)
    router.add("billing", keywords=["refund", "charge", "invoice"])
    router.add("cancel", keywords=["cancel", "charge", "subscription"])
    sources = [
        CountingSource(StaticSource(n, f"{n} text")) for n in ("invoices", "accounts", "faq")
    ]
    pipeline = Pipeline(router, sources, {"billing": ["invoices"], "cancel": ["accounts"]}, 500)
    tie = pipeline.turn("cancel and refund charge")
    assert tie.decision.label is None and tie.trace.reason == "ambiguous_tie"
    assert tie.sources == ("invoices", "accounts", "faq")
    assert tie.trace.fallback and "ambiguous_tie" in tie.trace.fallback
    low = pipeline.turn("what is the weather")
    assert low.sources == ("invoices", "accounts", "faq") and low.trace.reason == "low_confidence"
    hit = pipeline.turn("I want a refund on this invoice")
    assert hit.sources == ("invoices",) and hit.trace.skipped == ("accounts", "faq")


def test_configuration_errors() -> None:
    sources = [StaticSource("a", "x"), StaticSource("b", "y")]
    router = IntentRouter()
    with pytest.raises(UsageError, match="unknown source"):
        Pipeline(router, sources, {"l": ["a", "zzz"]}, 100)
    with pytest.raises(UsageError, match="duplicate source"):
        Pipeline(router, [*sources, StaticSource("a", "z")], {}, 100)
    with pytest.raises(UsageError, match="fallback"):
        Pipeline(router, sources, {}, 100, fallback=["nope"])
    with pytest.raises(UsageError, match="list of source names"):
        Pipeline(router, sources, {"l": "a"}, 100)  # type: ignore[dict-item]


def test_base_sections_are_always_in() -> None:
    pipeline = Pipeline(
        IntentRouter(),
        [StaticSource("docs", "some docs")],
        {},
        100,
        base=[Section("system", "be brief", pinned=True, stable=True)],
    )
    r = pipeline.turn("anything")
    assert r.assembly.report("system").tokens > 0
    assert r.trace.fallback is not None  # no intents: refuse, fall back
