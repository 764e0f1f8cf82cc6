"""The SQLite store's rows for the bounded lexical pass
(:func:`ctxwise.search.bounded_search`), over a namespace's FTS5 table."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from ctxwise.memory.store import INT64_MAX, rank_key
from ctxwise.search import Selection


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _any(terms: Sequence[str]) -> str:
    return " OR ".join(_phrase(t) for t in terms)


def _all(terms: Sequence[str]) -> str:
    return " AND ".join(_phrase(t) for t in terms)


_OVERFETCH = 16
"""Rows a lexical query fetches past its depth, ranked in Python as every store
ranks them (:func:`~ctxwise.memory.store.rank_key`) and cut: FTS5 orders by its raw
BM25, whose last bits may differ from another store's for an equal score."""


def _top(scores: Mapping[int, float], depth: int) -> list[tuple[int, float]]:
    return sorted(scores.items(), key=lambda p: rank_key(p[1], p[0]))[:depth]


class _Lexical:
    """A namespace's FTS5 rows inside a read transaction, as
    :func:`ctxwise.search.bounded_search` reads them (a
    :class:`~ctxwise.search.LexicalRows`; rows are rowids)."""

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

    def share(self, term: str, window: int) -> float:
        """The share of the namespace's newest ``window`` rows that hold ``term``."""
        window = min(window, self.total)
        lo = self.conn.execute(
            "SELECT rowid FROM items WHERE ns = ? ORDER BY seq DESC LIMIT 1 OFFSET ?",
            (self.key, max(window - 1, 0)),
        ).fetchone()
        found = self.conn.execute(
            f"SELECT count(*) FROM {self.table} WHERE {self.table} MATCH ? AND rowid >= ?",
            (_phrase(term), int(lo[0]) if lo else 0),
        ).fetchone()[0]
        return float(found) / max(window, 1)

    def _window(self, match: str, newest: int) -> int | None:
        """The rowid of the ``newest``-th newest match, or None if there are fewer."""
        t = self.table
        found = self.conn.execute(
            f"SELECT {t}.rowid {self.source} ORDER BY {t}.rowid DESC LIMIT 1 OFFSET ?",
            (match, *self.args, newest - 1),
        ).fetchone()
        return None if found is None else int(found[0])

    def _bm25(self, match: str, lo: int | None, depth: int) -> list[tuple[int, float]]:
        """Best ``depth`` (rowid, BM25 over ``match``'s terms), rowids from ``lo``."""
        t = self.table
        bound = "" if lo is None else f" AND {t}.rowid >= ?"
        rows = self.conn.execute(
            f"SELECT {t}.rowid, bm25({t}) {self.source}{bound} "
            f"ORDER BY bm25({t}), {t}.rowid LIMIT ?",
            (match, *self.args, *([] if lo is None else [lo]), min(depth + _OVERFETCH, INT64_MAX)),
        ).fetchall()
        return [(int(r), -float(s)) for r, s in rows]

    def score(
        self, selection: Selection, scored: Sequence[str], depth: int
    ) -> list[tuple[int, float]]:
        """Best ``depth`` (rowid, BM25 over ``scored``) of ``selection``. FTS5 scores
        the terms of its query: a row of the selection is scored over the other
        terms by a second query, the selection AND any of them (the higher wins)."""
        match = (_all if selection.every else _any)(selection.terms)
        lo = None if selection.newest is None else self._window(match, selection.newest)
        best = dict(self._bm25(match, lo, depth))
        extra = [t for t in scored if t not in selection.terms]
        if extra:
            for rowid, s in self._bm25(f"({match}) AND ({_any(extra)})", lo, depth):
                if s > best.get(rowid, -math.inf):
                    best[rowid] = s
        return _top(best, depth)  # ranked as every store
