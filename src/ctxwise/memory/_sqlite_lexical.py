"""The SQLite store's bounded lexical search over a namespace's FTS5 table."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from ctxwise.memory.store import BM25_K1, INT64_MAX, rank_key

LEXICAL_CAP = 4000
"""Most rows one lexical step scores (see :mod:`ctxwise.memory.sqlite`)."""
STOP_SHARE = 0.5
"""A term in at least this share of the recent rows is left out of a big query."""
STOP_WINDOW = 20_000
"""How many of the newest rows that share is measured over."""
_BM25_BOUND = BM25_K1 + 1  # no term adds more than idf x this to a bm25 score


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _any(terms: Sequence[str]) -> str:
    return " OR ".join(_phrase(t) for t in terms)


def _all(terms: Sequence[str]) -> str:
    return " AND ".join(_phrase(t) for t in terms)


def _idf_bound(total: int, more_than: int) -> float:
    """The largest idf FTS5 can give a term found in more than ``more_than`` of at
    most ``total`` rows (its formula, clamped at 1e-6 as FTS5 does)."""
    n = more_than + 1
    return max(1e-6, math.log(max(total - n + 0.5, 1e-9) / (n + 0.5)))


_OVERFETCH = 16
"""Rows a lexical query fetches past its depth, ranked in Python as every store
ranks them (:func:`~ctxwise.memory.store.rank_key`) and cut: FTS5 orders by its raw
BM25, whose last bits may differ from another store's for an equal score."""


def _top(scores: Mapping[int, float], depth: int) -> list[tuple[int, float]]:
    return sorted(scores.items(), key=lambda p: rank_key(p[1], p[0]))[:depth]


class _Lexical:
    """One bounded lexical search inside a read transaction (see the module docstring)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        table: str,
        key: str,
        total: int,
        where: str,
        params: list[Any],
    ) -> None:
        self.conn = conn
        self.table = t = f'"{table}"'
        self.key = key
        self.total = total
        if where:
            self.source = f"FROM {t} JOIN items ON items.rowid = {t}.rowid WHERE {t} MATCH ?{where}"
            self.args: list[Any] = list(params)
        else:
            self.source = f"FROM {t} WHERE {t} MATCH ?"
            self.args = []

    def count(self, term: str, limit: int) -> int:
        """The namespace's rows holding ``term``, counting no further than ``limit``."""
        t = self.table
        sql = f"SELECT count(*) FROM (SELECT rowid FROM {t} WHERE {t} MATCH ? LIMIT ?)"
        return int(self.conn.execute(sql, (_phrase(term), limit)).fetchone()[0])

    def share(self, term: str) -> float:
        """The share of the namespace's newest ``STOP_WINDOW`` rows that hold ``term``."""
        window = min(STOP_WINDOW, self.total)
        lo = self.conn.execute(
            "SELECT rowid FROM items WHERE ns = ? ORDER BY seq DESC LIMIT 1 OFFSET ?",
            (self.key, max(window - 1, 0)),
        ).fetchone()
        found = self.conn.execute(
            f"SELECT count(*) FROM {self.table} WHERE {self.table} MATCH ? AND rowid >= ?",
            (_phrase(term), int(lo[0]) if lo else 0),
        ).fetchone()[0]
        return float(found) / max(window, 1)

    def window(self, match: str) -> int | None:
        """The rowid of the ``LEXICAL_CAP``-th newest match, or None if there are fewer."""
        t = self.table
        found = self.conn.execute(
            f"SELECT {t}.rowid {self.source} ORDER BY {t}.rowid DESC LIMIT 1 OFFSET ?",
            (match, *self.args, LEXICAL_CAP - 1),
        ).fetchone()
        return None if found is None else int(found[0])

    def score(self, match: str, depth: int, *, recent: bool = False) -> list[tuple[int, float]]:
        """Best ``depth`` (rowid, BM25) for ``match``; ``recent``: the newest cap only."""
        t = self.table
        lo = self.window(match) if recent else None
        bound = "" if lo is None else f" AND {t}.rowid >= ?"
        rows = self.conn.execute(
            f"SELECT {t}.rowid, bm25({t}) {self.source}{bound} "
            f"ORDER BY bm25({t}), {t}.rowid LIMIT ?",
            (match, *self.args, *([] if lo is None else [lo]), min(depth + _OVERFETCH, INT64_MAX)),
        ).fetchall()
        return _top({int(r): -float(s) for r, s in rows}, depth)  # ranked as every store

    def run(self, terms: list[str], depth: int) -> list[tuple[int, float]]:
        total = self.total
        if total <= LEXICAL_CAP:
            return self.score(_any(terms), depth)
        df = {t: self.count(t, LEXICAL_CAP + 1) for t in terms}
        present = sorted((t for t in terms if df[t]), key=lambda t: (df[t], t))
        if not present:
            return []
        if sum(df[t] for t in present) <= LEXICAL_CAP:
            return self.score(_any(present), depth)
        stop = {t for t in present if df[t] > LEXICAL_CAP and self.share(t) >= STOP_SHARE}
        kept = [t for t in present if t not in stop] or present[:1]
        rare: list[str] = []
        used = 0
        for t in kept:
            if used + df[t] > LEXICAL_CAP:
                break
            rare.append(t)
            used += df[t]
        common = kept[len(rare) :]
        if not common:
            return self.score(_any(rare), depth)
        best: dict[int, float] = {}

        def merge(found: list[tuple[int, float]]) -> None:
            for rowid, s in found:
                if s > best.get(rowid, -math.inf):
                    best[rowid] = s

        if rare:
            merge(self.score(_any(rare), depth))
            merge(self.score(f"({_any(rare)}) AND ({_any(common)})", depth))
            ranked = _top(best, depth)
            ceiling = sum(_BM25_BOUND * _idf_bound(total, LEXICAL_CAP) for _ in common)
            if len(ranked) == depth and ranked[-1][1] >= ceiling:
                return ranked  # no row without a rare term can reach the top
            merge(self.score(_any(common), depth, recent=True))
        else:
            merge(self.score(_all(kept), depth, recent=True))
            if len(best) < depth:
                merge(self.score(_any(kept), depth, recent=True))
        return _top(best, depth)
