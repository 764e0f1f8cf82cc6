"""The store contract: a small ABC every memory backend implements.

A store keeps :class:`MemoryItem` rows in namespaces (tenant / user / session, a
tuple of non-empty strings). Every method takes the namespace, and no call returns
another namespace's rows. Backends implement the abstract methods; search fusion,
recency and neighbour expansion live above the store, in
:class:`ctxwise.memory.LongTermMemory`, so every backend behaves the same.

Backends: :class:`InMemoryStore` (the reference, shipped), ``SQLiteStore`` (the
embedded default, one file), ``PostgresStore`` (extra ``postgres``).
"""

from __future__ import annotations

import heapq
import math
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from ctxwise.errors import NamespaceNotFoundError, StoreError, UsageError
from ctxwise.text import DEFAULT_ANALYZER, Analyzer

__all__ = [
    "BM25_B",
    "BM25_K1",
    "MAX_TEXT_CHARS",
    "InMemoryStore",
    "MemoryItem",
    "Namespace",
    "NamespaceNotFoundError",
    "NewItem",
    "Store",
    "StoreError",
    "bm25_idf",
    "bm25_term",
    "check_k",
    "check_namespace",
    "fts_tokens",
]

Namespace: TypeAlias = tuple[str, ...]
Vector: TypeAlias = npt.NDArray[np.float32]
MAX_TEXT_CHARS = 1_000_000


@dataclass(frozen=True, slots=True)
class NewItem:
    """An item to store. ``id`` is optional (the store assigns one); ``vector`` is
    the embedding of the indexed text (unit length), or ``None`` for lexical-only items."""

    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    vector: Vector | None = None
    created_at: float | None = None
    index_text: str | None = None
    """What lexical search indexes, when it differs from ``text`` (e.g. the text
    with the turn before it); recall returns ``text``."""


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """A stored item. ``seq`` is its insertion order within the namespace."""

    id: str
    namespace: Namespace
    text: str
    metadata: Mapping[str, Any]
    seq: int
    created_at: float | None = None


def check_namespace(namespace: Sequence[str]) -> Namespace:
    """A valid namespace tuple, or a :class:`UsageError`."""
    if isinstance(namespace, str) or not namespace:
        raise UsageError("a namespace is a non-empty tuple of strings, e.g. ('acme', 'user-7')")
    ns = tuple(namespace)
    for part in ns:
        if not isinstance(part, str) or not part or "\x00" in part or "/" in part:
            raise UsageError(f"bad namespace part {part!r}: non-empty strings without '/' only")
    return ns


def check_text(text: str) -> str:
    if not isinstance(text, str):
        raise UsageError(f"memory text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise UsageError("empty text: there is nothing to remember")
    if len(text) > MAX_TEXT_CHARS:
        raise UsageError(
            f"text of {len(text):,} characters exceeds {MAX_TEXT_CHARS:,}; split it into turns"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError("text is not valid Unicode (lone surrogates)") from None
    return text


def fts_tokens(text: str) -> list[str]:
    """The default analyzer's terms of ``text`` (:func:`ctxwise.text.words`)."""
    return DEFAULT_ANALYZER.words(text)


BM25_K1 = 1.2
BM25_B = 0.75


def bm25_idf(n_items: float, df: float) -> float:
    """BM25's idf as every store computes it (SQLite FTS5's formula):
    ``ln((N - df + 0.5) / (df + 0.5))``, and 1e-6 where that is not positive (a
    term in at least half of the namespace's items)."""
    value = math.log((n_items - df + 0.5) / (df + 0.5))
    return value if value > 0 else 1e-6


def bm25_term(idf: float, tf: float, length: float, avgdl: float) -> float:
    """One term's BM25 contribution (k1 1.2, b 0.75; statistics of one namespace)."""
    return idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * length / avgdl))


def matches(metadata: Mapping[str, Any], filters: Mapping[str, Any] | None) -> bool:
    return not filters or all(metadata.get(k) == v for k, v in filters.items())


class Store(ABC):
    """The contract. Implement the abstract methods; the rest builds on them.

    Lexical search indexes and queries the terms of :attr:`analyzer` (by default
    :data:`ctxwise.text.DEFAULT_ANALYZER`) and scores them by BM25 (:func:`bm25_idf`,
    :func:`bm25_term`) with the statistics (item count, average length, document
    frequencies) of the searched namespace only, so every backend ranks alike and
    no namespace's items change another's scores.
    """

    analyzer: Analyzer = DEFAULT_ANALYZER

    @abstractmethod
    def put_many(self, namespace: Sequence[str], items: Sequence[NewItem]) -> list[str]:
        """Store items atomically (all or none); return their ids in order.
        An existing id in the namespace is replaced."""

    @abstractmethod
    def get_many(self, namespace: Sequence[str], ids: Sequence[str]) -> list[MemoryItem]:
        """Items by id (missing ids are left out), in the order asked."""

    @abstractmethod
    def delete(self, namespace: Sequence[str], ids: Sequence[str]) -> int:
        """Delete items; return how many existed."""

    @abstractmethod
    def lexical_search(
        self, namespace: Sequence[str], query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[tuple[MemoryItem, float]]:
        """Best ``k`` items by a BM25-style lexical score, best first."""

    @abstractmethod
    def vector_search(
        self,
        namespace: Sequence[str],
        vector: Vector,
        k: int,
        filters: Mapping[str, Any] | None = None,
    ) -> list[tuple[MemoryItem, float]]:
        """Best ``k`` items by cosine similarity, best first."""

    @abstractmethod
    def by_seq(self, namespace: Sequence[str], seqs: Sequence[int]) -> list[MemoryItem]:
        """Items by insertion order (for neighbour expansion)."""

    @abstractmethod
    def recent(self, namespace: Sequence[str], n: int) -> list[MemoryItem]:
        """The ``n`` items stored last in the namespace (highest ``seq``), oldest first."""

    @abstractmethod
    def namespaces(self) -> list[Namespace]:
        """Every namespace holding at least one item."""

    @abstractmethod
    def count(self, namespace: Sequence[str]) -> int:
        """Items in a namespace (0 if unknown)."""

    def close(self) -> None:  # noqa: B027 - optional for backends without resources
        """Release resources; the store is unusable afterwards."""

    # convenience, built on the contract -----------------------------------------

    def put(self, namespace: Sequence[str], item: NewItem) -> str:
        return self.put_many(namespace, [item])[0]

    def get(self, namespace: Sequence[str], id: str) -> MemoryItem | None:
        found = self.get_many(namespace, [id])
        return found[0] if found else None

    def require(self, namespace: Sequence[str]) -> Namespace:
        """The checked namespace; :class:`NamespaceNotFoundError` if it is empty."""
        ns = check_namespace(namespace)
        if self.count(ns) == 0:
            raise NamespaceNotFoundError(ns)
        return ns

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_k(k: int) -> int:
    """``k`` if it is a positive integer, else a :class:`UsageError`."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UsageError(f"k must be a positive integer, got {k!r}")
    return k


class InMemoryStore(Store):
    """The reference store: plain Python and numpy, nothing persisted.

    Lexical scoring is BM25 (:func:`bm25_term`) over the analyzer's terms, from
    per-namespace postings (term → item → count), so a search reads only the items
    holding a query term; the sums run in the same order as a scan of every item,
    so the scores are the same to the bit.
    """

    def __init__(self, *, analyzer: Analyzer | None = None) -> None:
        if analyzer is not None:
            self.analyzer = analyzer
        self._rows: dict[Namespace, dict[str, tuple[MemoryItem, Vector | None, Counter[str]]]] = {}
        self._postings: dict[Namespace, dict[str, dict[str, int]]] = {}
        self._length: dict[Namespace, dict[str, int]] = {}  # item → its term count
        self._lengths: dict[Namespace, int] = {}  # the namespace's total
        self._seq: dict[Namespace, int] = {}
        self._clock = 0

    def _unindex(self, ns: Namespace, item_id: str) -> bool:
        row = self._rows.get(ns, {}).pop(item_id, None)
        if row is None:
            return False
        postings = self._postings[ns]
        for term in row[2]:
            holders = postings[term]
            del holders[item_id]
            if not holders:
                del postings[term]
        self._lengths[ns] -= self._length[ns].pop(item_id)
        return True

    def put_many(self, namespace: Sequence[str], items: Sequence[NewItem]) -> list[str]:
        ns = check_namespace(namespace)
        prepared = []
        for item in items:
            check_text(item.text)
            prepared.append(item)
        rows = self._rows.setdefault(ns, {})
        ids = []
        for item in prepared:
            seq = self._seq.get(ns, 0)
            self._seq[ns] = seq + 1
            item_id = item.id or f"m{seq}"
            stored = MemoryItem(item_id, ns, item.text, dict(item.metadata), seq, item.created_at)
            vec = None if item.vector is None else np.asarray(item.vector, dtype=np.float32)
            indexed = item.index_text if item.index_text is not None else item.text
            counts = Counter(self.analyzer.words(indexed))
            self._unindex(ns, item_id)
            rows[item_id] = (stored, vec, counts)
            postings = self._postings.setdefault(ns, {})
            for term, tf in counts.items():
                postings.setdefault(term, {})[item_id] = tf
            length = sum(counts.values())
            self._length.setdefault(ns, {})[item_id] = length
            self._lengths[ns] = self._lengths.get(ns, 0) + length
            ids.append(item_id)
        return ids

    def get_many(self, namespace: Sequence[str], ids: Sequence[str]) -> list[MemoryItem]:
        rows = self._rows.get(check_namespace(namespace), {})
        return [rows[i][0] for i in ids if i in rows]

    def delete(self, namespace: Sequence[str], ids: Sequence[str]) -> int:
        ns = check_namespace(namespace)
        return sum(1 for i in dict.fromkeys(ids) if self._unindex(ns, i))

    def lexical_search(
        self, namespace: Sequence[str], query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[tuple[MemoryItem, float]]:
        ns = check_namespace(namespace)
        rows = self._rows.get(ns, {})
        check_k(k)
        terms = sorted(set(self.analyzer.words(query)))
        if not rows or not terms:
            return []
        n = len(rows)
        avg = self._lengths[ns] / n
        postings, lengths = self._postings[ns], self._length[ns]
        sums: dict[str, float] = {}
        for t in terms:  # in term order for every item, as a scan of each item adds them
            holders = postings.get(t)
            if not holders:
                continue
            idf = bm25_idf(n, len(holders))
            for item_id, tf in holders.items():
                term = bm25_term(idf, tf, lengths[item_id], avg)
                sums[item_id] = sums.get(item_id, 0.0) + term
        scored = [
            (rows[i][0], score)
            for i, score in sums.items()
            if score > 0 and matches(rows[i][0].metadata, filters)
        ]
        scored.sort(key=lambda p: (-p[1], p[0].seq))
        return scored[:k]

    def vector_search(
        self,
        namespace: Sequence[str],
        vector: Vector,
        k: int,
        filters: Mapping[str, Any] | None = None,
    ) -> list[tuple[MemoryItem, float]]:
        rows = self._rows.get(check_namespace(namespace), {})
        check_k(k)
        q = np.asarray(vector, dtype=np.float32)
        scored = [
            (item, float(vec @ q))
            for item, vec, _ in rows.values()
            if vec is not None and matches(item.metadata, filters)
        ]
        scored.sort(key=lambda p: (-p[1], p[0].seq))
        return scored[:k]

    def by_seq(self, namespace: Sequence[str], seqs: Sequence[int]) -> list[MemoryItem]:
        rows = self._rows.get(check_namespace(namespace), {})
        wanted = set(seqs)
        return sorted((it for it, _, _ in rows.values() if it.seq in wanted), key=lambda it: it.seq)

    def recent(self, namespace: Sequence[str], n: int) -> list[MemoryItem]:
        rows = self._rows.get(check_namespace(namespace), {})
        if n <= 0:
            return []
        return sorted(
            heapq.nlargest(n, (it for it, _, _ in rows.values()), key=lambda it: it.seq),
            key=lambda it: it.seq,
        )

    def namespaces(self) -> list[Namespace]:
        return sorted(ns for ns, rows in self._rows.items() if rows)

    def count(self, namespace: Sequence[str]) -> int:
        return len(self._rows.get(check_namespace(namespace), {}))


def batched(items: Iterable[NewItem], size: int) -> Iterable[list[NewItem]]:
    batch: list[NewItem] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
