"""The per-turn pipeline on inputs the first tests did not try (QA, stop 25)."""

from __future__ import annotations

from typing import Any

import pytest

from ctxwise import UsageError, WordCounter
from ctxwise.orchestrator import Pipeline
from ctxwise.routing import KeywordClassifier
from ctxwise.sources import StaticSource

ROUTER = KeywordClassifier([("billing", ["invoice"]), ("code", ["python"])])


def sources() -> list[StaticSource]:
    counter = WordCounter()
    return [
        StaticSource("docs", "the product docs", counter=counter),
        StaticSource("faq", "frequent questions and answers", counter=counter),
    ]


def test_sources_given_as_a_generator() -> None:
    # the names were read from the generator, which left no source to keep: 'route
    # billing names unknown source(s): docs; known: docs, faq'
    pipeline = Pipeline(ROUTER, (s for s in sources()), {"billing": ["docs"]}, 100)
    assert sorted(pipeline.sources) == ["docs", "faq"]
    result = pipeline.turn("where is my invoice")
    assert result.sources == ("docs",) and result.trace.skipped == ("faq",)
    assert pipeline.turn("hello there").sources == ("docs", "faq")  # the fallback: all


@pytest.mark.parametrize(
    ("routes", "fallback", "match"),
    [
        # a source named twice was called twice, and every turn refused its own section
        ({"billing": ["docs", "docs"]}, None, "route 'billing' names source.s. more than once"),
        ({"billing": ["docs"]}, ["faq", "faq"], "fallback names source.s. more than once"),
        ({"billing": None}, None, "route 'billing': give a list of source names, not None"),
        ({"billing": ["docs"]}, "faq", "fallback: give a list of source names, not 'faq'"),
        ({"billing": [7]}, None, "route 'billing' names unknown source.s.: 7"),
        ([("billing", ["docs"])], None, "routes must map each label"),
    ],
)
def test_routes_and_fallback_it_cannot_use_are_usage_errors(
    routes: Any, fallback: Any, match: str
) -> None:
    with pytest.raises(UsageError, match=match):
        Pipeline(ROUTER, sources(), routes, 100, fallback=fallback)


def test_a_route_given_as_a_generator_keeps_its_sources() -> None:
    # the names were checked by reading the generator, which left the route empty
    pipeline = Pipeline(ROUTER, sources(), {"billing": (n for n in ["faq"])}, 100)
    assert pipeline.turn("my invoice").sources == ("faq",)


@pytest.mark.parametrize("router", [object(), None, "billing"])
def test_a_router_without_route_is_refused_when_the_pipeline_is_made(router: object) -> None:
    with pytest.raises(UsageError, match="a router needs a route"):
        Pipeline(router, sources(), {}, 100)  # type: ignore[arg-type]


@pytest.mark.parametrize("source", ["faq", None, object()])
def test_a_source_without_a_name_is_refused(source: object) -> None:
    with pytest.raises(UsageError, match="a source needs a name"):
        Pipeline(ROUTER, [*sources(), source], {}, 100)  # type: ignore[list-item]
