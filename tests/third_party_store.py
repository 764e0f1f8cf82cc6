"""A store as a third party would write one: plain dicts, only ctxwise's public API.

It lives outside ``src/`` on purpose: ``tests/test_testing.py`` runs the
conformance suite of :mod:`ctxwise.testing` on it, as a plugin author would. It
shares no code with :class:`~ctxwise.memory.InMemoryStore`: items sit in one dict
keyed by (namespace, id), lexical search scores every item of the namespace by the
public BM25 formula (:func:`ctxwise.search.bm25_idf`, :func:`ctxwise.search.bm25_term`),
vector search takes a cosine per item. It validates input with the same public
``check_*`` helpers every shipped backend uses, so it accepts and refuses alike.

It writes only the core of the contract (``put_many``, ``delete``, ``recent``,
``namespaces``, ``lexical_search``, ``vector_search``): ``get_many``, ``by_seq``,
``count`` and every async twin are the base's, so the suite checks those defaults
too. Its calls take turns on a lock, as the async twins' worker threads need. It
keeps no resources, so it does not override ``close``: the suite detects that and
skips its closed-store check.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ctxwise.memory import MemoryItem, Namespace, NewItem, Store
from ctxwise.memory.store import (
    check_dims,
    check_filters,
    check_ids,
    check_item,
    check_k,
    check_n,
    check_namespace,
    check_query,
    check_vector,
    matches,
    rank_key,
)
from ctxwise.search import bm25_idf, bm25_term


class DictStore(Store):
    """Every item in ``self.items[(namespace, id)] = (item, vector, term counts)``."""

    def __init__(self) -> None:
        self.items: dict[tuple[Namespace, str], tuple[MemoryItem, Any, Counter[str]]] = {}
        self.next_seq: dict[Namespace, int] = {}
        self.dim: int | None = None
        self.lock = threading.RLock()

    def _in(self, ns: Namespace) -> list[tuple[MemoryItem, Any, Counter[str]]]:
        return [row for (n, _), row in self.items.items() if n == ns]

    def put_many(self, namespace: Sequence[str], items: Sequence[NewItem]) -> list[str]:
        with self.lock:
            ns = check_namespace(namespace)
            checked = [check_item(item) for item in items]
            self.dim = check_dims(
                {len(i.vector) for i in checked if i.vector is not None}, self.dim
            )
            ids = []
            for item in checked:
                seq = self.next_seq.get(ns, 0)
                self.next_seq[ns] = seq + 1
                item_id = item.id or f"m{seq}"
                text = item.index_text if item.index_text is not None else item.text
                vector = None if item.vector is None else np.asarray(item.vector, dtype=np.float64)
                stored = MemoryItem(item_id, ns, item.text, item.metadata, seq, item.created_at)
                self.items[(ns, item_id)] = (stored, vector, Counter(self.analyzer.words(text)))
                ids.append(item_id)
            return ids

    def delete(self, namespace: Sequence[str], ids: Sequence[str]) -> int:
        with self.lock:
            ns = check_namespace(namespace)
            return sum(self.items.pop((ns, i), None) is not None for i in set(check_ids(ids)))

    def lexical_search(
        self, namespace: Sequence[str], query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[tuple[MemoryItem, float]]:
        with self.lock:
            ns = check_namespace(namespace)
            check_k(k)
            terms = sorted(set(self.analyzer.words(check_query(query))))
            filters = check_filters(filters)
            rows = self._in(ns)
            if not rows or not terms:
                return []
            n = len(rows)
            avgdl = sum(sum(counts.values()) for _, _, counts in rows) / n
            df = {t: sum(1 for _, _, counts in rows if counts[t]) for t in terms}
            scored = []
            for item, _, counts in rows:
                length = sum(counts.values())
                score = 0.0
                for t in terms:
                    if counts[t]:
                        score += bm25_term(bm25_idf(n, df[t]), counts[t], length, avgdl)
                if score > 0 and matches(item.metadata, filters):
                    scored.append((item, score))
            scored.sort(key=lambda p: rank_key(p[1], p[0].seq))
            return scored[:k]

    def vector_search(
        self,
        namespace: Sequence[str],
        vector: Any,
        k: int,
        filters: Mapping[str, Any] | None = None,
    ) -> list[tuple[MemoryItem, float]]:
        with self.lock:
            ns = check_namespace(namespace)
            check_k(k)
            q = np.asarray(check_vector(vector, "the query vector"), dtype=np.float64)
            check_dims({len(q)}, self.dim)
            filters = check_filters(filters)
            q_norm = float(np.linalg.norm(q))
            scored = []
            for item, vec, _ in self._in(ns):
                if vec is None or not matches(item.metadata, filters):
                    continue
                norms = q_norm * float(np.linalg.norm(vec))
                scored.append((item, float(vec @ q) / norms if norms > 0 else 0.0))
            scored.sort(key=lambda p: rank_key(p[1], p[0].seq))
            return scored[:k]

    def recent(self, namespace: Sequence[str], n: int) -> list[MemoryItem]:
        with self.lock:
            n = check_n(n)
            rows = sorted(
                (it for it, _, _ in self._in(check_namespace(namespace))), key=lambda i: i.seq
            )
            return rows[-n:] if n > 0 else []

    def namespaces(self) -> list[Namespace]:
        with self.lock:
            return sorted({ns for ns, _ in self.items})
