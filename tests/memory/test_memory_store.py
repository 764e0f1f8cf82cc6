"""The in-memory store ranks only the hits that can reach its top k: the same
results, to the bit, as scoring and sorting every item (issue 33)."""

from __future__ import annotations

import numpy as np
import pytest

from ctxwise.memory import InMemoryStore, MemoryItem, NewItem
from ctxwise.memory.store import matches, rank_key, unit
from ctxwise.search import BM25Index

NS = ("t", "1")
WORDS = ["router", "refund", "mia", "berlin", "desk", "late", "broken", "osaka"]


def _every_vector(
    kept: dict[str, tuple[MemoryItem, np.ndarray | None]], q: np.ndarray, k: int, filters: dict
) -> list[tuple[str, float]]:
    """The search as a scan: every vector's float64 cosine, every hit sorted."""
    q64 = unit(q).astype(np.float64)
    scored = [
        (item, float(unit(vec).astype(np.float64) @ q64))
        for item, vec in kept.values()
        if vec is not None and matches(item.metadata, filters)
    ]
    scored.sort(key=lambda p: rank_key(p[1], p[0].seq))
    return [(it.id, s) for it, s in scored[:k]]


@pytest.mark.parametrize("dim", [8, 64])
def test_vector_search_is_a_scan_after_writes_replacements_and_deletes(dim: int) -> None:
    rng = np.random.default_rng(dim)
    store = InMemoryStore()
    kept: dict[str, tuple[MemoryItem, np.ndarray | None]] = {}
    base = rng.normal(size=(6, dim)).astype(np.float32)  # few directions: many near-ties
    for step in range(6):
        items = []
        for j in range(120):
            vec = None if j % 7 == 0 else base[j % 6] + rng.normal(size=dim) * 1e-4 * (j % 3)
            items.append(
                NewItem(
                    f"item {j}", {"n": j % 3}, f"i{(step * 61 + j) % 400}",
                    None if vec is None else vec.astype(np.float32),
                )
            )  # fmt: skip
        store.put_many(NS, items)
        for item in items:
            got = store.get(NS, item.id or "")
            assert got is not None
            kept[got.id] = (got, item.vector)
        doomed = [i for i in list(kept) if rng.random() < 0.4]
        assert store.delete(NS, doomed) == len(doomed)
        for i in doomed:
            del kept[i]
        for q in [*base[:3], rng.normal(size=dim).astype(np.float32)]:
            for k in (1, 5, 40, 10_000):
                for filters in ({}, {"n": 1}):
                    got = [(it.id, s) for it, s in store.vector_search(NS, q, k, filters)]
                    assert got == _every_vector(kept, q, k, filters)


def test_lexical_search_is_a_full_sort_of_every_hit() -> None:
    rng = np.random.default_rng(3)
    texts = [" ".join(rng.choice(WORDS, int(rng.integers(1, 6)))) for _ in range(500)]
    store = InMemoryStore()
    store.put_many(NS, [NewItem(t, {"n": i % 2}) for i, t in enumerate(texts)])
    index = BM25Index(store.analyzer, texts)
    for query in ["router", "refund mia berlin", "late late desk", "osaka broken router mia"]:
        terms = sorted(set(store.analyzer.words(query)))
        sums = index.score_terms(terms)
        for filters in ({}, {"n": 0}):
            hits = sorted(
                ((d, s) for d, s in sums.items() if s > 0 and matches({"n": d % 2}, filters)),
                key=lambda p: rank_key(p[1], p[0]),
            )
            for k in (1, 7, 100, 1000):
                got = [(it.seq, s) for it, s in store.lexical_search(NS, query, k, filters)]
                assert got == hits[:k]
