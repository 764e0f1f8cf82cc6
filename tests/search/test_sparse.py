"""SparseIndex: dot products over postings equal a dense scan, summed in query order."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise.search import SparseIndex

TERMS = st.sampled_from(["a", "b", "c", "d", "e", "f"])
VECTORS = st.dictionaries(TERMS, st.floats(-4, 4, allow_nan=False, width=32), max_size=6)


def dense(docs: list[dict[str, float]], query: dict[str, float]) -> list[float]:
    """Each document's dot product, adding the query's terms in its order from 0.0."""
    out = []
    for doc in docs:
        total = 0.0
        for term, weight in query.items():
            if term in doc:
                total += doc[term] * weight
        out.append(total)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(VECTORS, max_size=12), VECTORS)
def test_dot_equals_a_dense_scan_to_the_bit(
    docs: list[dict[str, float]], query: dict[str, float]
) -> None:
    index = SparseIndex(docs)
    assert len(index) == len(docs)
    assert index.dot(query).tolist() == dense(docs, query)
    assert index.norm().tolist() == [math.sqrt(squares(d)) for d in docs]


def squares(doc: dict[str, float]) -> float:
    total = 0.0
    for w in doc.values():
        total += w * w
    return total


def test_postings_and_documents_added_after_a_read() -> None:
    index = SparseIndex([{"x": 1.0, "y": 2.0}, {"y": 3.0}])
    docs, weights = index.postings("y") or (None, None)
    assert docs is not None and weights is not None
    assert docs.tolist() == [0, 1] and weights.tolist() == [2.0, 3.0]
    assert index.postings("z") is None
    assert index.add({"y": 5.0, "z": 1.0}) == 2
    found = index.postings("y")
    assert found is not None and found[0].tolist() == [0, 1, 2]
    assert index.dot({"y": 1.0, "z": 2.0}).tolist() == [2.0, 3.0, 7.0]


def test_a_query_sharing_no_term_scores_every_document_zero() -> None:
    index = SparseIndex([{"x": 1.0}, {"y": 1.0}])
    assert index.dot({"q": 1.0}).tolist() == [0.0, 0.0]
    assert index.dot({}).tolist() == [0.0, 0.0]
    assert SparseIndex().dot({"x": 1.0}).tolist() == []
