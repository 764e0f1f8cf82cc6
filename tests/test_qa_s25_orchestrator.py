"""The per-turn pipeline on inputs the first tests did not try (QA, stop 25)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from ctxwise import Section, UsageError, WordCounter
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


class Returning:
    """A source whose sections() returns ``value`` as it is."""

    name = "odd"

    def __init__(self, value: object) -> None:
        self.value = value

    def sections(self, query: str, state: Mapping[str, Any]) -> Any:
        return self.value

    def cost_estimate(self, query: str, state: Mapping[str, Any]) -> int:
        return 0


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (None, "source 'odd' returned None from sections"),
        (Section("odd", "one section, not a list"), "returned Section.*not a list of Sections"),
        ("some text", "returned 'some text' from sections"),
        (["some text"], "returned 'some text' among its sections, not a Section"),
    ],
)
def test_a_source_that_breaks_its_contract_is_named(value: object, match: str) -> None:
    # None raised TypeError ('NoneType' object is not iterable), a string AttributeError
    pipeline = Pipeline(ROUTER, [*sources(), Returning(value)], {"billing": ["odd"]}, 100)
    with pytest.raises(UsageError, match=match):
        pipeline.turn("my invoice")


def test_a_router_that_returns_no_decision_is_named() -> None:
    class Labeller:
        def route(self, query: str) -> str:
            return "billing"

    pipeline = Pipeline(Labeller(), sources(), {"billing": ["docs"]}, 100)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"route\(\) returned 'billing', not a RouteDecision"):
        pipeline.turn("my invoice")


def test_a_base_section_that_is_not_a_section_is_refused() -> None:
    with pytest.raises(UsageError, match=r"a base section must be a Section, got 'Be brief\.'"):
        Pipeline(ROUTER, sources(), {}, 100, base=["Be brief."])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("chosen", "match"),
    [
        ("docs", "chosen sources: give a list of source names, not 'docs'"),  # was 'd, o, c, s'
        (["docs", "docs"], "chosen sources names source.s. more than once: docs"),
        (None, "chosen sources: give a list of source names, not None"),  # was TypeError
        (["nope"], "chosen sources names unknown source.s.: nope; known: docs, faq"),
    ],
)
def test_assemble_sources_checks_its_names_as_a_route_does(chosen: Any, match: str) -> None:
    pipeline = Pipeline(ROUTER, sources(), {}, 100)
    with pytest.raises(UsageError, match=match):
        pipeline.assemble_sources(chosen, "my invoice")
    assert list(pipeline.assemble_sources(["faq"], "my invoice")[1]) == ["faq"]
