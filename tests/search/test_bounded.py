"""The bounded lexical pass (ctxwise.search.bounded_search) on plain-Python rows."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise.search import Selection, bounded_search, rank_key
from tests.search._reference import ReferenceRows

WORDS = ["refund", "parcel", "router", "laptop", "berlin", "osaka", "late", "mia"]


def _docs(n: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    return [[*rng.sample(WORDS, rng.randint(1, 4)), f"case{i}"] for i in range(n)]


def _exact(rows: ReferenceRows, terms: list[str], depth: int) -> list[tuple[int, float]]:
    hits = [(i, rows.bm25(i, terms)) for i in rows.kept if rows.sets[i] & set(terms)]
    return sorted(hits, key=lambda p: rank_key(p[1], p[0]))[:depth]


def test_within_the_cap_every_row_is_ranked_exactly() -> None:
    rows = ReferenceRows(_docs(300, 1))
    for terms in (["router"], ["late", "mia", "refund"], ["case7", "osaka"]):
        assert bounded_search(rows, terms, 300, 10, cap=300) == _exact(rows, terms, 10)
    assert rows.calls == [
        Selection(("router",)),
        Selection(("late", "mia", "refund")),
        Selection(("case7", "osaka")),
    ]


def test_rare_terms_alone_are_ranked_exactly_and_prove_the_top() -> None:
    docs = _docs(400, 2)
    rows = ReferenceRows(docs)
    # case12 is in one row: it alone is rare, its row outscores any common-only row
    got = bounded_search(rows, ["case12", "router"], 400, 1, cap=40)
    assert got == _exact(rows, ["case12", "router"], 1)
    assert rows.calls == [Selection(("case12",))]  # the proof skipped the common step


def test_common_terms_score_the_newest_rows_holding_every_one_first() -> None:
    rows = ReferenceRows(_docs(400, 3))
    bounded_search(rows, ["mia", "router"], 400, 5, cap=40)
    assert rows.calls[0] == Selection(("mia", "router"), every=True, newest=40)


def test_a_term_in_half_of_the_newest_rows_selects_nothing() -> None:
    docs = [["late", f"case{i}"] + (["mia"] if i % 5 == 0 else []) for i in range(400)]
    rows = ReferenceRows(docs)
    bounded_search(rows, ["late", "mia"], 400, 5, cap=40)
    assert all("late" not in s.terms for s in rows.calls)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from([*WORDS, "case3", "case77"]), min_size=1, max_size=5, unique=True),
    st.integers(min_value=1, max_value=30),
    st.integers(min_value=1, max_value=120),
    st.integers(min_value=0, max_value=5),
)
def test_invariants(terms: list[str], depth: int, cap: int, seed: int) -> None:
    """At most depth rows, each holding a query term, best first, each scored at
    most its exact BM25 over every term; exact when the cap covers the rows."""
    docs = _docs(200, seed)
    rows = ReferenceRows(docs)
    got = bounded_search(rows, sorted(terms), len(docs), depth, cap=cap)
    assert len(got) <= depth
    assert got == sorted(got, key=lambda p: rank_key(p[1], p[0]))
    for row, score in got:
        assert rows.sets[row] & set(terms)
        assert score <= rows.bm25(row, sorted(terms)) + 1e-9
    if cap >= len(docs) or sum(rows.df(t) for t in terms) <= cap:
        assert got == _exact(rows, sorted(terms), depth)
    assert all(s.newest is None or s.newest == cap for s in rows.calls)
