"""The PostgreSQL store's vector search: pgvector's extension, the HNSW index
(dropped and built again around a bulk load, rebuilt when a load died), and the
search itself, exact for a small namespace and through the index for a big one,
every hit rescored as every store scores it (:func:`~ctxwise.memory.store.exact_dots`)."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg.vector import register_vector_info
from psycopg import sql
from psycopg.types import TypeInfo

from ctxwise.errors import StoreDimensionError, UsageError
from ctxwise.memory._postgres_lexical import COLUMNS as _COLUMNS
from ctxwise.memory._postgres_lexical import OVERFETCH as _OVERFETCH
from ctxwise.memory.store import (
    INT64_MAX,
    MemoryItem,
    Namespace,
    StoreError,
    Vector,
    check_k,
    check_namespace,
    check_vector,
    exact_dots,
    rank_key,
    unit,
)

__all__: list[str] = []  # the store searches through these; PostgresStore is the API

MAX_DIM = 16_000  # pgvector's limit for the vector type
_MAX_EF_SEARCH = 1000  # pgvector's limit for hnsw.ef_search

HNSW_INDEX = (
    "CREATE INDEX items_embedding_hnsw ON {schema}.items"
    " USING hnsw (embedding {ext}.vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
)
"""The HNSW index of migration ``m003_hnsw`` (approximate nearest neighbours for big
namespaces), built again by :meth:`PostgresVectors.bulk_load`."""


def one_line(e: BaseException) -> str:
    """The first non-empty line of an error's text (libpq's run over several)."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__


EXACT_MAX_ITEMS = 2_000
"""A namespace of at most this many items is searched exactly (every vector scored,
as the in-memory store always does and SQLite below its ANN threshold of 50,000);
a larger one through the HNSW index, approximately. PostgreSQL's exact scan costs
about 3 microseconds an item (benchmarks/bench_memory.py), so past a few thousand
items the index is the better trade: between 2,000 and 50,000 items a vector
search on PostgreSQL may differ from SQLite's in its last places."""


def _stored_vector(value: Any) -> Vector:
    """A vector column as pgvector's adapter gives it (a ``Vector``), as float32."""
    to_numpy = getattr(value, "to_numpy", None)
    return check_vector(to_numpy() if to_numpy is not None else value, "a stored vector")


def _ranked(found: list[tuple[MemoryItem, float]], k: int) -> list[tuple[MemoryItem, float]]:
    found.sort(key=lambda p: rank_key(p[1], p[0].seq))
    return found[:k]


# Two branches, of which a one-time filter on the namespace's count runs one: an
# exact scan (ORDER BY an expression the HNSW index cannot serve) for a namespace of
# at most %(exact_max)s items, else ORDER BY the bare distance so that the index
# serves it. Ties and the relaxed order of an iterative index scan are settled in
# Python (score, then seq).
_VECTOR_BRANCH = """
(SELECT {columns},
       1 - coalesce(nullif(i.embedding OPERATOR({ext}.<=>) %(q)s, 'NaN'::float8), 1) AS score,
       i.embedding
FROM {schema}.items i
WHERE i.ns = %(ns)s AND i.embedding IS NOT NULL {filters}
  AND (SELECT coalesce(max(c.n_items), 0) FROM {schema}.counters c WHERE c.ns = %(ns)s) @CMP
ORDER BY @ORDER LIMIT %(k)s)"""
_VECTOR = (
    _VECTOR_BRANCH.replace("@CMP", "<= %(exact_max)s").replace(
        "@ORDER", "(i.embedding OPERATOR({ext}.<=>) %(q)s) + 0, i.seq"
    )
    + "\nUNION ALL"
    + _VECTOR_BRANCH.replace("@CMP", "> %(exact_max)s").replace(
        "@ORDER", "i.embedding OPERATOR({ext}.<=>) %(q)s"
    )
)
HNSW_EF_SEARCH = 200
"""Candidates an HNSW search keeps (at least ``k``); pgvector's default is 40."""


class PostgresVectors(ABC):
    """The vector half of ``PostgresStore`` (a mixin): pgvector's extension, the
    HNSW index around bulk loads, and :meth:`vector_search`."""

    schema: str
    dim: int
    _conn: psycopg.Connection[Any] | None
    _ext: str
    _iterative: bool

    @abstractmethod
    def _db(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """The connection, for one call at a time (the store's)."""

    @abstractmethod
    def _batch(self, conn: psycopg.Connection[Any]) -> AbstractContextManager[Any]:
        """The statements inside sent together where libpq can (the store's)."""

    @abstractmethod
    def _sql(self, template: str, **parts: sql.Composable) -> sql.Composed:
        """``template`` with the store's schema filled in (the store's)."""

    @abstractmethod
    def _filters(self, filters: Mapping[str, Any] | None) -> tuple[sql.Composable, dict[str, Any]]:
        """SQL and parameters for metadata filters (the store's)."""

    @abstractmethod
    def _item(self, ns: Namespace, row: Sequence[Any]) -> MemoryItem:
        """A row of :data:`COLUMNS` as an item (the store's)."""

    def _vector_extension(self, create: bool) -> str:
        """The schema pgvector lives in (created if missing and ``create``)."""
        assert self._conn is not None
        conn = self._conn
        query = (
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = 'vector'"
        )
        row = conn.execute(query).fetchone()
        if row is None:
            if not create:
                raise StoreError(
                    "the pgvector extension is not installed in this database "
                    "(open with create=True, or run CREATE EXTENSION vector)"
                )
            try:
                with conn.transaction():
                    conn.execute(
                        "SELECT pg_advisory_xact_lock(hashtextextended('ctxwise:vector', 0))"
                    )
                    if conn.execute(query).fetchone() is None:
                        current = conn.execute("SELECT current_schema()").fetchone()
                        # never inside the store's own schema, which drop() removes
                        into = (
                            sql.SQL(" SCHEMA public")
                            if current is None or current[0] in (None, self.schema)
                            else sql.SQL("")
                        )
                        conn.execute(
                            sql.SQL("CREATE EXTENSION IF NOT EXISTS vector{}").format(into)
                        )
            except psycopg.errors.InsufficientPrivilege:
                raise StoreError(
                    "the pgvector extension is not installed in this database and this role "
                    "may not create it: run CREATE EXTENSION vector as a superuser"
                ) from None
            except (psycopg.errors.UndefinedFile, psycopg.errors.FeatureNotSupported) as e:
                raise StoreError(f"this PostgreSQL server has no pgvector: {one_line(e)}") from None
            row = conn.execute(query).fetchone()
            assert row is not None
        ext: str = row[0]
        register_vector_info(conn, TypeInfo.fetch(conn, sql.Identifier(ext, "vector")))
        version = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        parts = [int(p) for p in re.findall(r"\d+", version[0] if version else "")[:2]]
        self._iterative = parts >= [0, 8]
        return ext

    def _vector_index_sql(self) -> sql.Composed:
        statement = HNSW_INDEX.replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS", 1)
        return self._sql(statement, ext=sql.Identifier(self._ext))

    def _bulk_key(self) -> str:
        return f"ctxwise:bulk:{self.schema}"

    def _heal_vector_index(self) -> None:
        """Rebuild the HNSW index a bulk load left dropped (its process died), unless
        a bulk load holds the schema right now."""
        assert self._conn is not None
        conn = self._conn
        found = conn.execute(
            "SELECT to_regclass(%s)", [f"{self.schema}.items_embedding_hnsw"]
        ).fetchone()
        if found is not None and found[0] is not None:
            return
        got = conn.execute(
            "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [self._bulk_key()]
        ).fetchone()
        if not got or not got[0]:
            return  # a bulk load is running; it builds the index when it ends
        try:
            conn.execute(self._vector_index_sql())
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [self._bulk_key()])

    @contextmanager
    def bulk_load(self, *, maintenance_work_mem: str = "1GB") -> Iterator[None]:
        """Load many items fast: the HNSW vector index is dropped for the load and
        built once when the block ends.

        pgvector maintains an HNSW index row by row far more slowly than it builds
        one (``benchmarks/bench_memory.py`` measures both). Inside the block, vector
        searches in this schema scan exactly: slower, never wrong. The index is
        built and the table vacuumed and analyzed when the block ends, after an
        error too; if the process dies inside the block, the next
        :class:`PostgresStore` opened on the schema builds the index. One
        bulk load per schema at a time (an advisory lock); ``maintenance_work_mem``
        applies to the index build only. Give it enough for the whole graph:
        pgvector builds in memory until the graph outgrows it, then much more
        slowly (for a million vectors the default is not enough). PostgreSQL says so with
        the notice "hnsw graph no longer fits into maintenance_work_mem".
        """
        if not isinstance(maintenance_work_mem, str) or not re.fullmatch(
            r"\d+\s*(?:kB|MB|GB)", maintenance_work_mem
        ):
            raise UsageError(
                "maintenance_work_mem must look like '512MB' or '1GB', "
                f"got {maintenance_work_mem!r}"
            )
        with self._db() as conn:
            conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", [self._bulk_key()])
            try:
                conn.execute(self._sql("DROP INDEX IF EXISTS {schema}.items_embedding_hnsw"))
            except BaseException:
                conn.execute(
                    "SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [self._bulk_key()]
                )
                raise
        try:
            yield
        finally:
            with self._db() as conn:
                try:
                    with conn.transaction():
                        conn.execute(
                            "SELECT set_config('maintenance_work_mem', %s, true)",
                            [maintenance_work_mem],
                        )
                        conn.execute(self._vector_index_sql())
                    # fresh planner statistics: without them the planner guesses
                    # row counts from before the load, and recall is far slower;
                    # VACUUM too, which merges the GIN index's pending list and
                    # records its size: until then the planner prices the index as
                    # never vacuumed and scans every row for a lexical candidate set
                    conn.execute(self._sql("VACUUM (ANALYZE) {schema}.items"))
                finally:
                    conn.execute(
                        "SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [self._bulk_key()]
                    )

    def _check_dim(self) -> None:
        assert self._conn is not None
        row = self._conn.execute(
            "SELECT atttypmod FROM pg_attribute"
            " WHERE attrelid = to_regclass(%s) AND attname = 'embedding'",
            [f"{self.schema}.items"],
        ).fetchone()
        if row is None:
            raise StoreError(f"schema {self.schema!r} has no items table with embeddings")
        if row[0] != self.dim:
            raise StoreDimensionError(self.schema, int(row[0]), self.dim)

    def _vector(self, vector: Any, what: str) -> Vector:
        v = check_vector(vector, what)
        if v.shape != (self.dim,):
            raise UsageError(
                f"{what} has shape {v.shape}; this store holds {self.dim}-dimensional vectors"
            )
        return v

    def vector_search(
        self,
        namespace: Sequence[str],
        vector: Vector,
        k: int,
        filters: Mapping[str, Any] | None = None,
    ) -> list[tuple[MemoryItem, float]]:
        ns = check_namespace(namespace)
        k = min(check_k(k), INT64_MAX)
        q = self._vector(vector, "the query vector")
        where, params = self._filters(filters)
        statement = self._sql(
            _VECTOR, columns=sql.SQL(_COLUMNS), ext=sql.Identifier(self._ext), filters=where
        )
        settings = "SELECT set_config('hnsw.ef_search', %s, true)"
        if self._iterative:  # pgvector >= 0.8: filtered searches still find k rows
            settings += ", set_config('hnsw.iterative_scan', 'relaxed_order', true)"
        with self._db() as conn:
            with self._batch(conn), conn.transaction():  # one round trip
                conn.execute(settings, [str(min(max(HNSW_EF_SEARCH, k), _MAX_EF_SEARCH))])
                cur = conn.execute(
                    statement,
                    {
                        "q": q,
                        "ns": "/".join(ns),
                        "k": min(k + _OVERFETCH, INT64_MAX),
                        "exact_max": EXACT_MAX_ITEMS,
                        **params,
                    },
                    binary=True,  # the vectors come back as float32 bytes, not text to parse
                )
            rows = cur.fetchall()
        if not rows:
            return []
        # rescored as every store scores them (pgvector sums in float32, in its order)
        # as unit vectors, as the other stores keep them (PostgreSQL keeps them as given)
        stored = np.stack([unit(_stored_vector(row[7])) for row in rows])
        exact = exact_dots(stored, unit(q))
        return _ranked(
            [(self._item(ns, r), float(score)) for r, score in zip(rows, exact, strict=True)], k
        )
