"""The one BM25 index: the stores' formula, documents added and removed over time."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise.memory.store import InMemoryStore, NewItem
from ctxwise.search import BM25Index, bm25_idf, bm25_term, rank_candidates, rank_key
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


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.sampled_from([*DOCS, "router router", "desk", "Mia Mia"])),
        min_size=1,
        max_size=25,
    ),
    st.sampled_from(["router", "Mia desk refund", "the router in Osaka", "nothing here"]),
)
def test_the_array_scores_are_the_dict_scores_to_the_bit(
    steps: list[tuple[bool, str]], query: str
) -> None:
    """Documents added and removed in any order, the index queried between writes
    (its per-term arrays cached, then dropped): the arrays hold score_terms' floats."""
    index = BM25Index()
    live: list[int] = []
    terms = sorted(set(DEFAULT_ANALYZER.words(query)))
    for remove, text in steps:
        if remove and live:
            index.remove(live.pop(len(live) // 2))
        else:
            live.append(index.add(text))
        want = index.score_terms(terms)
        docs, scores = index.score_arrays(terms)
        assert list(docs) == sorted(want)
        assert [float(x) for x in scores] == [want[d] for d in sorted(want)]
        dense = index.scores(terms)
        assert [float(dense[d]) for d in sorted(want)] == [want[d] for d in sorted(want)]
        assert not dense[[d for d in range(index.size) if d not in want]].any()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.floats(-2, 2, allow_nan=False),
            st.sampled_from([1.0, 1.0 + 1e-12, 1.0 - 4e-10, 0.0, -0.0, 3.3333333333, 3.33333333]),
        ),
        min_size=0,
        max_size=40,
    ),
    st.integers(1, 45),
)
def test_rank_candidates_keep_the_top_k_of_a_full_sort(scores: list[float], k: int) -> None:
    """Ranking only the candidates gives the full sort's top k, near-ties and
    rounding to nine digits included, whatever the seqs."""
    array = np.asarray(scores, dtype=np.float64)
    for seqs in (list(range(len(scores))), list(range(len(scores)))[::-1]):
        full = sorted(range(len(scores)), key=lambda i: rank_key(scores[i], seqs[i]))[:k]
        cand = rank_candidates(array, k).tolist()
        assert cand == sorted(cand)
        got = sorted(cand, key=lambda i: rank_key(scores[i], seqs[i]))[:k]
        assert got == full
