"""A store's rows for the bounded lexical pass in plain Python: what SQLite's and
PostgreSQL's :class:`~ctxwise.search.LexicalRows` must agree with."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ctxwise.search import Selection, bm25_idf, bm25_term, rank_key


class ReferenceRows:
    """Rows ``0..n-1`` (in insertion order) holding ``docs[i]``'s terms; ``kept``:
    the rows the filters keep (statistics count every row)."""

    def __init__(self, docs: Sequence[Sequence[str]], kept: Collection[int] | None = None) -> None:
        self.docs = [list(d) for d in docs]
        self.sets = [set(d) for d in docs]
        self.kept = set(range(len(docs))) if kept is None else set(kept)
        self.calls: list[Selection] = []
        n = len(docs)
        self.avgdl = max(sum(len(d) for d in docs) / n, 1e-9) if n else 1.0

    def df(self, term: str) -> int:
        return sum(term in s for s in self.sets)

    def count(self, term: str, limit: int) -> int:
        return min(self.df(term), limit)

    def share(self, term: str, window: int) -> float:
        w = min(window, len(self.docs))
        return sum(term in s for s in self.sets[len(self.sets) - w :]) / max(w, 1)

    def bm25(self, row: int, scored: Sequence[str]) -> float:
        n = len(self.docs)
        doc = self.docs[row]
        total = 0.0
        for t in scored:
            tf = doc.count(t)
            if tf:
                total += bm25_term(bm25_idf(n, self.df(t)), tf, len(doc), self.avgdl)
        return total

    def score(
        self, selection: Selection, scored: Sequence[str], depth: int
    ) -> list[tuple[int, float]]:
        self.calls.append(selection)
        want = set(selection.terms)
        rows = [
            i
            for i in range(len(self.docs) - 1, -1, -1)
            if i in self.kept and (want <= self.sets[i] if selection.every else want & self.sets[i])
        ]
        if selection.newest is not None:
            rows = rows[: selection.newest]
        hits = [(i, self.bm25(i, scored)) for i in rows]
        return sorted(hits, key=lambda p: rank_key(p[1], p[0]))[:depth]
