"""The PostgreSQL store's lexical search: BM25 in SQL over ``tsvector`` rows, and
those rows as the bounded pass (:func:`ctxwise.search.bounded_search`) reads them.

Every score is BM25 as every store computes it (:func:`ctxwise.search.bm25_idf`,
:func:`~ctxwise.search.bm25_term`), summed over a row's lexemes in one order (the
lexemes', ``COLLATE "C"``) whatever plan the server picks. A namespace within the
cap is ranked by :data:`_LEXICAL`, which counts document frequencies itself; above
it, each step of the bounded pass is one :data:`_LEXICAL_BOUNDED` statement over
the rows it selects, with document frequencies counted beforehand and remembered
(per process) until the namespace has changed by more than ``DF_DRIFT`` of the
count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql

from ctxwise.memory.store import INT64_MAX, rank_key
from ctxwise.search import BM25_B, BM25_K1, Selection

__all__: list[str] = []  # the store searches through these; PostgresStore is the API

COLUMNS = "i.id, i.seq, i.text, i.raw, i.metadata, i.created_at"

_LEXICAL = """
WITH terms AS MATERIALIZED (
    SELECT t.lex, t.quoted FROM unnest(%(lexes)s::text[], %(quoted)s::text[]) AS t(lex, quoted)
), st AS MATERIALIZED (
    SELECT c.n_items::float8 AS n,
           greatest(c.n_tokens::float8 / c.n_items, 1e-9) AS avgdl
    FROM {schema}.counters c WHERE c.ns = %(ns)s AND c.n_items > 0
), idf AS MATERIALIZED (
    SELECT terms.lex, greatest(ln((st.n - d.df + 0.5) / (d.df + 0.5)), 0) AS w
    FROM terms CROSS JOIN st
    CROSS JOIN LATERAL (
        SELECT count(*)::float8 AS df FROM {schema}.items j
        WHERE j.ns = %(ns)s AND j.tsv @@ terms.quoted::tsquery
    ) AS d
    WHERE d.df > 0
), tf AS MATERIALIZED (
    SELECT i.seq, i.ntok, x.lexeme AS lex,
           CASE WHEN cardinality(x.positions) = 1 THEN x.positions[1]
                ELSE (SELECT sum(p) FROM unnest(x.positions) AS p) END::float8 AS tf
    FROM {schema}.items i
    CROSS JOIN LATERAL unnest(
        ts_filter(setweight(i.tsv, 'A', ARRAY(SELECT idf.lex FROM idf)), '{{a}}')
    ) AS x
    WHERE i.ns = %(ns)s
      AND i.tsv @@ (SELECT string_agg(terms.quoted, ' | ')::tsquery FROM terms) {filters}
), hits AS (
    SELECT tf.seq,
           sum(coalesce(nullif(idf.w, 0), 1e-6) * tf.tf * {k1p1}
               / (tf.tf + {k1} * ({one_b} + {b} * tf.ntok / st.avgdl))
               ORDER BY tf.lex COLLATE "C") AS score
    FROM tf JOIN idf ON idf.lex = tf.lex CROSS JOIN st
    GROUP BY tf.seq
    ORDER BY score DESC, tf.seq
    LIMIT %(k)s
)
SELECT {columns}, hits.score
FROM hits JOIN {schema}.items i ON i.ns = %(ns)s AND i.seq = hits.seq
ORDER BY hits.score DESC, hits.seq
"""

# Exact BM25 (as _LEXICAL) of the rows of one selection, selected and scored in one
# statement: the rows matching the tsquery %(match)s (the newest %(newest)s of them
# when {order} is set). %(lexes)s are the lexemes scored and %(dfs)s their document
# frequencies, counted beforehand. setweight + ts_filter keep only those lexemes of
# a row (in C), so unnest expands those alone; a lexeme's frequency is the sum of
# its positions.
_LEXICAL_BOUNDED = """
WITH idf AS MATERIALIZED (
    SELECT t.lex, greatest(ln((%(n)s - t.df + 0.5) / (t.df + 0.5)), 0) AS w
    FROM unnest(%(lexes)s::text[], %(dfs)s::float8[]) AS t(lex, df)
), cands AS MATERIALIZED (
    SELECT i.seq, i.ntok, i.tsv FROM {schema}.items i
    WHERE i.ns = %(ns)s AND i.tsv @@ %(match)s::tsquery{filters}{order}
), tf AS MATERIALIZED (
    SELECT c.seq, c.ntok, x.lexeme AS lex,
           CASE WHEN cardinality(x.positions) = 1 THEN x.positions[1]
                ELSE (SELECT sum(p) FROM unnest(x.positions) AS p) END::float8 AS tf
    FROM cands AS c
    CROSS JOIN LATERAL unnest(ts_filter(setweight(c.tsv, 'A', %(lexes)s::text[]), '{{a}}')) AS x
), hits AS (
    SELECT tf.seq,
           sum(coalesce(nullif(idf.w, 0), 1e-6) * tf.tf * {k1p1}
               / (tf.tf + {k1} * ({one_b} + {b} * tf.ntok / %(avgdl)s))
               ORDER BY tf.lex COLLATE "C") AS score
    FROM tf JOIN idf ON idf.lex = tf.lex
    GROUP BY tf.seq
    ORDER BY score DESC, tf.seq
    LIMIT %(fetch)s
)
SELECT {columns}, hits.score
FROM hits JOIN {schema}.items i ON i.ns = %(ns)s AND i.seq = hits.seq
ORDER BY hits.score DESC, hits.seq
"""

_BM25_SQL = {
    "{k1p1}": repr(BM25_K1 + 1),
    "{k1}": repr(BM25_K1),
    "{one_b}": repr(1 - BM25_B),
    "{b}": repr(BM25_B),
}
for _name, _value in _BM25_SQL.items():
    _LEXICAL = _LEXICAL.replace(_name, _value)
    _LEXICAL_BOUNDED = _LEXICAL_BOUNDED.replace(_name, _value)

DF_DRIFT = 0.02
"""A lexeme's count is used again until its namespace has changed (items added
plus items removed since the count) by more than this share of it, so its
document frequency is off by at most that share. Without it, a namespace that
takes a write between queries counts every lexeme again on every query, and a
common lexeme is slow to count in a large namespace. A share of the newest rows
(the stop rule's) is used again while the namespace has changed by at most this
share of the window."""
_DF_CACHE = 10_000

OVERFETCH = 16
"""Rows a search fetches past k, ranked in Python as every store ranks them
(:func:`~ctxwise.memory.store.rank_key`) and cut to k: SQL orders by the raw score,
and pgvector's float32 distances may order two near-equal rows unlike the float64
scores every store ranks by (:func:`~ctxwise.memory.store.exact_dots`)."""

Counted = tuple[int, int, int]
"""When a count was taken (the namespace's next seq and item count) and its value."""


def quote(lexeme: str) -> str:
    """A lexeme quoted for a tsvector or tsquery literal."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _fresh(cached: Counted | None, next_seq: int, n_items: int, allowed: float) -> bool:
    """Whether a count taken at ``cached`` may be used at (``next_seq``, ``n_items``):
    the namespace changed since by at most ``allowed`` items (added plus removed)."""
    if cached is None:
        return False
    seq0, n0, _ = cached
    added = next_seq - seq0
    removed = n0 + added - n_items
    return added >= 0 and removed >= 0 and added + removed <= allowed


class PostgresRows:
    """A namespace's rows inside one transaction, as
    :func:`ctxwise.search.bounded_search` reads them (a
    :class:`~ctxwise.search.LexicalRows`; rows are seqs). Each step's statement
    returns the rows' columns too, kept in :attr:`found` by seq, so the search
    reads no row twice."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        render: Callable[..., sql.Composed],
        key: str,
        stats: Sequence[Any],
        where: sql.Composable,
        params: Mapping[str, Any],
        counts: dict[tuple[str, str], Counted],
        shares: dict[tuple[str, str, int], Counted],
    ) -> None:
        self.conn = conn
        self.render = render
        self.key = key
        self.next_seq, self.n_items, self.n_tokens = (int(x) for x in stats)
        self.where = where
        self.params = dict(params)
        self.counts = counts
        self.shares = shares
        self.df: dict[str, int] = {}  # exact document frequencies counted for this search
        self.found: dict[int, Sequence[Any]] = {}

    def _one(self, statement: str, args: Sequence[Any]) -> int:
        row = self.conn.execute(self.render(statement), list(args)).fetchone()
        return int(row[0]) if row else 0

    def count(self, term: str, limit: int) -> int:
        """The namespace's rows holding ``term``, no further than ``limit``; a count
        that reaches it is taken exactly (BM25's idf needs it) and remembered."""
        key = (self.key, term)
        cached = self.counts.get(key)
        if cached is not None and _fresh(cached, self.next_seq, self.n_items, DF_DRIFT * cached[2]):
            self.df[term] = cached[2]
            return min(cached[2], limit)
        q = quote(term)
        df = self._one(
            "SELECT count(*) FROM (SELECT 1 FROM {schema}.items i"
            " WHERE i.ns = %s AND i.tsv @@ %s::tsquery LIMIT %s) AS x",
            [self.key, q, limit],
        )
        if df >= limit:  # common: count exactly (for idf)
            df = self._one(
                "SELECT count(*) FROM {schema}.items i WHERE i.ns = %s AND i.tsv @@ %s::tsquery",
                [self.key, q],
            )
        if len(self.counts) >= _DF_CACHE:
            self.counts.clear()
        self.counts[key] = (self.next_seq, self.n_items, df)
        self.df[term] = df
        return min(df, limit)

    def share(self, term: str, window: int) -> float:
        """The share of the namespace's newest ``window`` rows that hold ``term``."""
        window = max(min(window, self.n_items), 1)
        key = (self.key, term, window)
        cached = self.shares.get(key)
        if cached is None or not _fresh(cached, self.next_seq, self.n_items, DF_DRIFT * window):
            found = self._one(
                "SELECT count(*) FROM {schema}.items i WHERE i.ns = %s AND i.tsv @@ %s::tsquery"
                " AND i.seq >= (SELECT j.seq FROM {schema}.items j WHERE j.ns = %s"
                " ORDER BY j.seq DESC LIMIT 1 OFFSET %s)",
                [self.key, quote(term), self.key, window - 1],
            )
            if len(self.shares) >= _DF_CACHE:
                self.shares.clear()
            cached = self.shares[key] = (self.next_seq, self.n_items, found)
        return cached[2] / window

    def score(
        self, selection: Selection, scored: Sequence[str], depth: int
    ) -> list[tuple[int, float]]:
        """Best ``depth`` (seq, BM25 over ``scored``) of ``selection``: one statement."""
        fetch = min(depth + OVERFETCH, INT64_MAX)
        if not all(t in self.df for t in scored):  # within the cap: nothing counted
            statement = self.render(_LEXICAL, columns=sql.SQL(COLUMNS), filters=self.where)
            args: dict[str, Any] = {
                "lexes": list(scored),
                "quoted": [quote(x) for x in scored],
                "k": fetch,
            }
        else:
            order = " ORDER BY i.seq DESC LIMIT %(newest)s" if selection.newest else ""
            statement = self.render(
                _LEXICAL_BOUNDED,
                columns=sql.SQL(COLUMNS),
                filters=self.where,
                order=sql.SQL(order),
            )
            glue = " & " if selection.every else " | "
            args = {
                "match": glue.join(quote(t) for t in selection.terms),
                "newest": selection.newest,
                "fetch": fetch,
                "n": float(self.n_items),
                "avgdl": max(self.n_tokens / self.n_items, 1e-9),
                "lexes": list(scored),
                "dfs": [float(self.df[t]) for t in scored],
            }
        rows = self.conn.execute(statement, {"ns": self.key, **self.params, **args}).fetchall()
        for row in rows:
            self.found[int(row[1])] = row
        hits = [(int(row[1]), float(row[6])) for row in rows]
        hits.sort(key=lambda p: rank_key(p[1], p[0]))
        return hits[:depth]
