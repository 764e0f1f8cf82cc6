"""The one BM25 index: the stores' formula, documents added and removed over time."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise.memory.store import InMemoryStore, NewItem
from ctxwise.search import BM25Index, bm25_idf, bm25_term
from ctxwise.text import DEFAULT_ANALYZER

DOCS = [
    "Mia returned the router to the Berlin store",
    "the router was refunded to Mia",
    "Omar ordered a standing desk",
    "a refund for the broken router",
    "Kenji asked about the monitor in Osaka",
]


def _scan(texts: list[str], terms: list[str]) -> list[float]:
    """BM25 by a scan of every document, as the stores define it."""
    docs = [DEFAULT_ANALYZER.words(t) for t in texts]
    n = len(docs)
    avgdl = sum(map(len, docs)) / n
    out = []
    for words in docs:
        score = 0.0
        for t in terms:
            tf = words.count(t)
            if tf:
                df = sum(1 for d in docs if t in d)
                score += bm25_term(bm25_idf(n, df), tf, len(words), avgdl)
        out.append(score)
    return out


def test_scores_are_a_scan_of_every_document() -> None:
    index = BM25Index(DEFAULT_ANALYZER, DOCS)
    terms = DEFAULT_ANALYZER.query_terms("refund for Mia's router")
    assert list(index.scores(terms)) == _scan(DOCS, terms)
    assert list(index.query("refund for Mia's router")) == _scan(DOCS, terms)


def test_the_idf_is_fts5s() -> None:
    assert bm25_idf(10, 1) == pytest.approx(math.log(9.5 / 1.5))
    assert bm25_idf(10, 8) == 1e-6  # a term in most documents


def test_adding_over_time_equals_indexing_at_once() -> None:
    grown = BM25Index()
    docs = [grown.add(t) for t in DOCS]
    assert docs == list(range(len(DOCS)))
    terms = DEFAULT_ANALYZER.query_terms("router refund desk")
    assert list(grown.scores(terms)) == list(BM25Index(DEFAULT_ANALYZER, DOCS).scores(terms))


def test_a_removed_document_leaves_the_statistics() -> None:
    index = BM25Index(DEFAULT_ANALYZER, DOCS)
    assert index.remove(1) and not index.remove(1) and not index.remove(99)
    assert len(index) == len(DOCS) - 1 and index.size == len(DOCS)
    kept = [t for i, t in enumerate(DOCS) if i != 1]
    terms = DEFAULT_ANALYZER.query_terms("router refunded Mia")
    scores = index.score_terms(terms)
    assert 1 not in scores
    expected = dict(zip([0, 2, 3, 4], _scan(kept, terms), strict=True))
    assert scores == {d: s for d, s in expected.items() if s}


def test_an_empty_index_scores_nothing() -> None:
    index = BM25Index()
    assert index.score_terms(["router"]) == {}
    assert list(index.query("router")) == []
    doc = index.add("router")
    index.remove(doc)
    assert index.score_terms(["router"]) == {}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([*DOCS, "router", "desk desk desk", "Mia"]), min_size=1, max_size=12),
    st.sampled_from(["router", "Mia desk", "refund broken", "nothing here"]),
)
def test_the_in_memory_store_scores_as_the_index(texts: list[str], query: str) -> None:
    store = InMemoryStore()
    store.put_many(("t",), [NewItem(t) for t in texts])
    index = BM25Index(DEFAULT_ANALYZER, texts)
    terms = sorted(set(DEFAULT_ANALYZER.words(query)))
    expected = index.scores(terms)
    for item, score in store.lexical_search(("t",), query, len(texts)):
        assert score == expected[item.seq]
