"""The bounded lexical pass every store's lexical search runs.

A full-text engine scores every row a query matches, so a query of common words
over a big collection would score most of it. :func:`bounded_search` decides which
rows to score, at most :data:`LEXICAL_CAP` per step, and merges what the steps
return; a store gives it the rows through a :class:`LexicalRows` over its own
full-text engine (SQLite's FTS5, PostgreSQL's ``tsvector``), so every store bounds
alike:

1. each query term's row count is taken, stopping at ``LEXICAL_CAP + 1``;
2. a collection of at most ``LEXICAL_CAP`` rows, or a query whose terms match at
   most that many rows in all, is ranked exactly (every row holding a term);
3. otherwise a term in more than ``LEXICAL_CAP`` rows and in at least
   :data:`STOP_SHARE` of the newest :data:`STOP_WINDOW` rows is left out (BM25
   gives a term in half of the rows an idf of 1e-6: it can hardly change a
   ranking); the rarest terms whose counts add up to at most the cap are *rare*,
   the rest *common*;
4. with rare terms, every row holding one is scored over every kept term; when
   the k-th score is above what the common terms alone could give a row (2.2 x
   the largest idf of a term in more than the cap, each), the result is exact;
   otherwise the newest ``LEXICAL_CAP`` rows holding a common term are scored too
   (over the common terms, which are all such a row holds);
5. with no rare term, the newest ``LEXICAL_CAP`` rows holding every term are
   scored, then, if fewer than ``k`` came back, the newest ``LEXICAL_CAP`` holding
   any of them.

A score is always the row's exact BM25 for the terms its step scored, never more
than its full score; the best ``k`` are ranked by :func:`~ctxwise.search.rank_key`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ctxwise.search.bm25 import BM25_K1, rank_key

__all__ = [
    "LEXICAL_CAP",
    "STOP_SHARE",
    "STOP_WINDOW",
    "LexicalRows",
    "Selection",
    "bounded_search",
]

LEXICAL_CAP = 4000
"""Most rows one step of :func:`bounded_search` scores."""
STOP_SHARE = 0.5
"""A common term in at least this share of the newest rows selects no rows."""
STOP_WINDOW = 20_000
"""How many of the newest rows that share is measured over."""
_BM25_BOUND = BM25_K1 + 1  # no term adds more than idf x this to a BM25 score


@dataclass(frozen=True, slots=True)
class Selection:
    """Rows to score: those holding any of ``terms`` (every one of them when
    ``every``), only the ``newest`` so many (by insertion) when it is set."""

    terms: tuple[str, ...]
    every: bool = False
    newest: int | None = None


class LexicalRows(Protocol):
    """A store's rows as :func:`bounded_search` reads them, within one snapshot.
    Rows are named by an integer that grows with insertion (a rowid, a ``seq``)."""

    def count(self, term: str, limit: int) -> int:
        """The rows holding ``term``, counted no further than ``limit``."""
        ...

    def share(self, term: str, window: int) -> float:
        """The share of the newest ``window`` rows (all, when fewer) holding ``term``."""
        ...

    def score(
        self, selection: Selection, scored: Sequence[str], depth: int
    ) -> list[tuple[int, float]]:
        """The best ``depth`` rows of ``selection`` (the store's filters applied),
        each with its exact BM25 over the ``scored`` terms, best first by
        :func:`~ctxwise.search.rank_key`."""
        ...


def _idf_bound(total: int, more_than: int) -> float:
    """The largest idf a term found in more than ``more_than`` of at most ``total``
    rows can have (:func:`~ctxwise.search.bm25_idf`, clamped at 1e-6 as it is)."""
    n = more_than + 1
    return max(1e-6, math.log(max(total - n + 0.5, 1e-9) / (n + 0.5)))


def _top(scores: Mapping[int, float], depth: int) -> list[tuple[int, float]]:
    return sorted(scores.items(), key=lambda p: rank_key(p[1], p[0]))[:depth]


def bounded_search(
    rows: LexicalRows, terms: Sequence[str], total: int, depth: int, cap: int | None = None
) -> list[tuple[int, float]]:
    """The best ``depth`` rows for the distinct query ``terms`` among ``total`` rows,
    scoring at most ``cap`` (default :data:`LEXICAL_CAP`) rows a step (module
    docstring), best first by :func:`~ctxwise.search.rank_key`."""
    cap = LEXICAL_CAP if cap is None else cap
    if total <= cap:
        return rows.score(Selection(tuple(terms)), terms, depth)
    df = {t: rows.count(t, cap + 1) for t in terms}
    present = sorted((t for t in terms if df[t]), key=lambda t: (df[t], t))
    if not present:
        return []
    if sum(df[t] for t in present) <= cap:
        return rows.score(Selection(tuple(present)), present, depth)
    stop = {t for t in present if df[t] > cap and rows.share(t, STOP_WINDOW) >= STOP_SHARE}
    kept = [t for t in present if t not in stop] or present[:1]
    rare: list[str] = []
    used = 0
    for t in kept:
        if used + df[t] > cap:
            break
        rare.append(t)
        used += df[t]
    common = kept[len(rare) :]
    if not common:
        return rows.score(Selection(tuple(rare)), rare, depth)
    best: dict[int, float] = {}

    def merge(found: list[tuple[int, float]]) -> None:
        for row, s in found:
            if s > best.get(row, -math.inf):
                best[row] = s

    if rare:
        merge(rows.score(Selection(tuple(rare)), kept, depth))
        ranked = _top(best, depth)
        ceiling = sum(_BM25_BOUND * _idf_bound(total, cap) for _ in common)
        if len(ranked) == depth and ranked[-1][1] >= ceiling:
            return ranked  # no row without a rare term can reach the top
        merge(rows.score(Selection(tuple(common), newest=cap), common, depth))
    else:
        merge(rows.score(Selection(tuple(kept), every=True, newest=cap), kept, depth))
        if len(best) < depth:
            merge(rows.score(Selection(tuple(kept), newest=cap), kept, depth))
    return _top(best, depth)
