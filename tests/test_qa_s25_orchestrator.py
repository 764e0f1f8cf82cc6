"""The per-turn pipeline on inputs the first tests did not try (QA, stop 25)."""

from __future__ import annotations

from ctxwise import WordCounter
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
