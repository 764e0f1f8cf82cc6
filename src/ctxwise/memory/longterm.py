"""Long-term memory: remember text, recall it by similarity.

Each item is indexed for lexical search together with the ``context`` items
remembered just before it (default one: in a conversation, the turn it answers),
which lets a question about an exchange find the turn that holds the answer;
vectors embed the item's own text, and recall returns it. The context comes from
what this instance remembered, in order.

Recall is hybrid by default: a lexical (BM25/FTS) ranking and a vector ranking
are fused with weighted reciprocal rank fusion (``weight / (60 + rank)`` summed
over the rankings; default weights 1.0 lexical and 0.3 vector, chosen on LoCoMo
dev, where the lexical ranking is the stronger one). Optional: recency weighting
(a half-life in seconds, against an injected clock), neighbour expansion (a hit
brings its adjacent items), and de-duplication of identical texts. The same
logic runs over every store.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ctxwise.embeddings import Embedder, HashingEmbedder
from ctxwise.errors import UsageError
from ctxwise.memory.store import (
    MemoryItem,
    Namespace,
    NewItem,
    Store,
    batched,
    check_k,
    check_namespace,
    check_text,
)

__all__ = ["RRF_K", "LongTermMemory", "RecallMode", "Recalled"]

RRF_K = 60
RecallMode: TypeAlias = Literal["hybrid", "lexical", "vector"]


@dataclass(frozen=True, slots=True)
class Recalled:
    """A recalled item and how it was found (ranks are 1-based, None = not ranked)."""

    item: MemoryItem
    score: float
    lexical_rank: int | None
    vector_rank: int | None
    via: Literal["hit", "neighbour"] = "hit"


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


class LongTermMemory:
    """Remember and recall in one namespace of a store."""

    def __init__(
        self,
        store: Store,
        namespace: Sequence[str],
        embedder: Embedder | None = None,
        *,
        clock: Callable[[], float] | None = None,
        weights: tuple[float, float] = (1.0, 0.3),
        context: int = 1,
    ) -> None:
        if isinstance(context, bool) or not isinstance(context, int) or context < 0:
            raise UsageError(f"context must be 0 or more items, got {context!r}")
        self.weights = weights
        self.context = context
        self._tail: deque[str] = deque(maxlen=max(context, 1))
        self.store = store
        self.namespace: Namespace = check_namespace(namespace)
        self.embedder: Embedder = embedder if embedder is not None else HashingEmbedder()
        self.clock = clock

    def _created(self, created_at: float | None) -> float | None:
        if created_at is not None:
            return created_at
        return self.clock() if self.clock is not None else None

    def remember(
        self,
        text: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        id: str | None = None,
        created_at: float | None = None,
    ) -> str:
        """Store one text with its embedding; returns its id."""
        return self.remember_many([NewItem(text, dict(metadata or {}), id, None, created_at)])[0]

    def remember_many(self, items: Iterable[NewItem], *, batch_size: int = 1024) -> list[str]:
        """Store many items, embedding and writing them in batches (each batch atomic)."""
        ids: list[str] = []
        for batch in batched(items, batch_size):
            for item in batch:
                check_text(item.text)
            indexed = []
            for it in batch:
                if self.context and self._tail:
                    indexed.append(" ".join([*list(self._tail)[-self.context :], it.text]))
                else:
                    indexed.append(it.text)
                self._tail.append(it.text)
            # vectors embed the item's own text: on LoCoMo, embedding the context
            # too blurs what a turn says (MiniLM recall@10 0.446 vs 0.508 alone)
            vectors = self.embedder.embed([it.text for it in batch])
            ready = [
                NewItem(
                    it.text,
                    it.metadata,
                    it.id,
                    vectors[i],
                    self._created(it.created_at),
                    indexed[i],
                )
                for i, it in enumerate(batch)
            ]
            ids.extend(self.store.put_many(self.namespace, ready))
        return ids

    def recall(
        self,
        query: str,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        *,
        mode: RecallMode = "hybrid",
        pool: int = 50,
        recency_half_life: float | None = None,
        neighbours: int = 0,
        dedupe: bool = True,
        weights: tuple[float, float] | None = None,
    ) -> list[Recalled]:
        """The ``k`` best items for ``query`` (then their neighbours, when asked)."""
        if not isinstance(query, str) or not query.strip():
            raise UsageError("empty query: there is nothing to recall")
        check_k(k)
        if mode not in ("hybrid", "lexical", "vector"):
            raise UsageError(f"unknown recall mode {mode!r}; choose hybrid, lexical or vector")
        self.store.require(self.namespace)
        depth = max(pool, k)
        lexical: list[tuple[MemoryItem, float]] = []
        vector: list[tuple[MemoryItem, float]] = []
        if mode in ("hybrid", "lexical"):
            lexical = self.store.lexical_search(self.namespace, query, depth, filters)
        if mode in ("hybrid", "vector"):
            q = self.embedder.embed([query])[0]
            vector = self.store.vector_search(self.namespace, q, depth, filters)
        w_lex, w_vec = weights if weights is not None else self.weights
        fused: dict[str, list[Any]] = {}
        for ranking, slot, weight in ((lexical, 2, w_lex), (vector, 3, w_vec)):
            for rank, (item, _) in enumerate(ranking, start=1):
                entry = fused.setdefault(item.id, [item, 0.0, None, None])
                entry[1] += weight / (RRF_K + rank)
                entry[slot] = rank
        if recency_half_life is not None:
            if self.clock is None:
                raise UsageError("recency weighting needs a clock: LongTermMemory(..., clock=...)")
            if recency_half_life <= 0:
                raise UsageError("recency_half_life must be positive (seconds)")
            now = self.clock()
            for entry in fused.values():
                created = entry[0].created_at
                if created is not None:
                    entry[1] *= 0.5 ** (max(0.0, now - created) / recency_half_life)
        ranked = sorted(fused.values(), key=lambda e: (-e[1], e[0].seq))
        out: list[Recalled] = []
        seen_texts: set[str] = set()
        for item, score, lex_rank, vec_rank in ranked:
            if dedupe:
                norm = _norm(item.text)
                if norm in seen_texts:
                    continue
                seen_texts.add(norm)
            out.append(Recalled(item, score, lex_rank, vec_rank))
            if len(out) == k:
                break
        if neighbours > 0:
            out = self._expand(out, neighbours)
        return out

    def _expand(self, hits: list[Recalled], n: int) -> list[Recalled]:
        have = {h.item.id for h in hits}
        wanted = sorted({h.item.seq + d for h in hits for d in range(-n, n + 1) if d})
        by_seq = {it.seq: it for it in self.store.by_seq(self.namespace, wanted)}
        out: list[Recalled] = []
        for hit in hits:
            out.append(hit)
            for d in [*range(-n, 0), *range(1, n + 1)]:
                neighbour = by_seq.get(hit.item.seq + d)
                if neighbour is not None and neighbour.id not in have:
                    have.add(neighbour.id)
                    out.append(Recalled(neighbour, hit.score, None, None, "neighbour"))
        return out
