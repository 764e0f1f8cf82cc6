"""The PostgreSQL store (extra ``postgres``): psycopg 3 and pgvector.

One schema per store (``ctxwise`` by default) holds three tables:

``items``
    one row per item, keyed by ``(ns, id)``, where ``ns`` is the namespace joined by
    ``/`` (namespace parts never contain ``/``). ``tsv`` is a ``tsvector`` of the
    store analyzer's terms of the item's indexed text (:mod:`ctxwise.text`; built in
    Python as a ``tsvector`` literal, so PostgreSQL's parser and locale never change a
    term) with a GIN index; ``index_text`` is that text when it is not ``text``;
    ``metadata`` is ``jsonb`` with a GIN index for containment filters;
    ``embedding`` is a pgvector ``vector(dim)``, NULL for lexical-only items.
``counters``
    one row per namespace: the next ``seq``, the number of items and of tokens. Every
    write locks its namespace's row first, so concurrent writers never share a ``seq``
    and never deadlock, and BM25's collection statistics cost one row read.
``settings``
    the analyzer's name: a store opened with another analyzer re-indexes every item.
``migrations``
    the name and time of every schema migration applied, in order (as in simonw/llm).
    A schema that records a migration this code does not know was written by a newer
    ctxwise, and is refused.

Lexical search is BM25 as every store computes it
(:func:`ctxwise.search.bm25_idf`, :func:`~ctxwise.search.bm25_term`: SQLite
FTS5's formula), in SQL over the analyzer's terms of the query, an item matching any
of them; the namespace's statistics come from ``counters`` and document frequencies
are counted in the namespace. Its cost is bounded as every store's is
(:func:`ctxwise.search.bounded_search`, at most :data:`ctxwise.search.LEXICAL_CAP`
rows scored a step): a namespace within the cap, or a query whose lexemes match at
most that many rows in all, is ranked exactly; above it, each step is one statement
scoring the rows it selects (:mod:`ctxwise.memory._postgres_lexical`). Document
frequencies are counted exactly and remembered, per process, until the namespace
has changed by more than ``DF_DRIFT`` (2%) of the count (a rare lexeme's count,
below 50, is taken again after any write). A tsvector keeps at most 256 positions per lexeme,
each at most 16,383, so the positions ctxwise writes are not where a term stands
(it never searches phrases) but its frequency: distinct numbers that add up to it
(``_frequency``), which BM25 reads back as their sum. One limit of PostgreSQL's
text search applies: an item
whose index would exceed the 1 MB ``tsvector`` limit is indexed from the longest
prefix of its terms (halving) that fits.

Vector search ranks by cosine similarity (``1 - (embedding <=> query)``) within the
namespace. An HNSW index (``vector_cosine_ops``, m 16, ef_construction 64; searched
with ``hnsw.ef_search`` = max(200, k) and, from pgvector 0.8, ``hnsw.iterative_scan =
relaxed_order`` so that the namespace and filters still fill k) serves big
namespaces approximately; PostgreSQL's planner scans a small namespace's rows
exactly instead (:mod:`ctxwise.memory._postgres_vectors`). The index is
maintained on every insert, which slows writes (see benchmarks/bench_memory.py for
both figures).

Texts and metadata may hold NUL characters, which PostgreSQL's ``text`` and ``jsonb``
cannot: such an item keeps its exact text and metadata in a ``bytea`` column, and the
indexed columns hold a copy with NUL replaced (by a space in text, by U+FFFD in
metadata).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from ctxwise._migrations import Migration, PostgresDatabase, migrate, status
from ctxwise.errors import MissingDependencyError, UsageError
from ctxwise.memory.store import (
    INT64_MAX,
    LockBusy,
    MemoryItem,
    Namespace,
    NewItem,
    Store,
    StoreError,
    check_filters,
    check_ids,
    check_item,
    check_k,
    check_lock_name,
    check_n,
    check_namespace,
    check_query,
    check_seqs,
    local_lock,
    lock_held,
)
from ctxwise.search import bounded_search
from ctxwise.text import Analyzer

try:
    import pgvector.psycopg.vector  # noqa: F401 - the vector half needs it: refused here
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict
except ImportError as e:  # pragma: no cover - exercised without the extra
    missing = "pgvector" if (e.name or "").startswith("pgvector") else "psycopg"
    raise MissingDependencyError(missing, "postgres", "the PostgreSQL store") from None

from ctxwise.memory._postgres_lexical import COLUMNS as _COLUMNS
from ctxwise.memory._postgres_lexical import Counted, PostgresRows
from ctxwise.memory._postgres_lexical import quote as _quote
from ctxwise.memory._postgres_vectors import EXACT_MAX_ITEMS as EXACT_MAX_ITEMS
from ctxwise.memory._postgres_vectors import HNSW_EF_SEARCH as HNSW_EF_SEARCH
from ctxwise.memory._postgres_vectors import HNSW_INDEX, PostgresVectors
from ctxwise.memory._postgres_vectors import MAX_DIM as _MAX_DIM
from ctxwise.memory._postgres_vectors import one_line as _one_line

__all__ = ["MIGRATIONS", "PostgresStore"]

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_FTS_FAST_BYTES = 100_000  # below this, a text's tsvector fits in 1 MB: no subtransaction
_TSV_MAX_BYTES = 1_000_000  # PostgreSQL's tsvector limit is 1 MiB; stay under it
_MAX_POSITIONS = 256  # positions kept per lexeme
_MAX_POS = 16_383  # the largest position


def _frequency(count: int) -> list[int]:
    """Distinct tsvector positions (each at most 16,383, at most 256 of them) that
    add up to ``count``, as few as can: one position up to 16,383 occurrences."""
    positions: list[int] = []
    top = _MAX_POS
    while count > top and len(positions) < _MAX_POSITIONS - 1:
        positions.append(top)
        count -= top
        top -= 1
    positions.append(min(count, top))
    return positions


def _tsvector(terms: Sequence[str]) -> tuple[str, int]:
    """A ``tsvector`` literal of ``terms`` and how many terms it holds: the longest
    prefix (halving) that fits. Each lexeme's positions are :func:`_frequency` of
    its count (see the module docstring)."""
    n = len(terms)
    while True:
        counts = {t: _frequency(c) for t, c in Counter(terms[:n]).items()}
        size = sum(len(t.encode("utf-8")) + 2 * len(p) + 8 for t, p in counts.items())
        if size <= _TSV_MAX_BYTES or n <= 1:
            literal = " ".join(_quote(t) + ":" + ",".join(map(str, p)) for t, p in counts.items())
            return literal, n
        n //= 2


_REINDEX = "-- ctxwise: every item's terms by the store's analyzer"
"""A migration step run in Python (:meth:`PostgresStore._reindex`), not as SQL."""

# Ordered, named, applied once each and recorded in <schema>.migrations. Append only:
# never edit or reorder a migration that has shipped. Placeholders: {schema} (the
# schema), {vector} (the vector type with its dimension), {fast} (_FTS_FAST_BYTES).
MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "m001_items",
        (
            # PostgreSQL's tsvector holds at most 1 MB: a text whose index would not fit
            # is indexed from the longest prefix (halving) that does.
            """CREATE FUNCTION {schema}.fts(t text) RETURNS tsvector
            LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
            DECLARE
                n integer := length(t);
            BEGIN
                IF octet_length(t) <= {fast} THEN
                    RETURN to_tsvector('pg_catalog.simple', t);
                END IF;
                LOOP
                    BEGIN
                        RETURN to_tsvector('pg_catalog.simple', left(t, n));
                    EXCEPTION WHEN program_limit_exceeded THEN
                        n := n / 2;
                    END;
                END LOOP;
            END $$""",
            """CREATE TABLE {schema}.items (
                ns text COLLATE "C" NOT NULL,
                id text COLLATE "C" NOT NULL,
                seq bigint NOT NULL,
                text text NOT NULL,
                raw bytea,
                metadata jsonb NOT NULL,
                created_at double precision,
                ntok integer NOT NULL,
                embedding {vector},
                tsv tsvector GENERATED ALWAYS AS ({schema}.fts(text)) STORED,
                PRIMARY KEY (ns, id),
                UNIQUE (ns, seq)
            )""",
            "CREATE INDEX items_tsv ON {schema}.items USING gin (tsv)",
            """CREATE TABLE {schema}.counters (
                ns text COLLATE "C" PRIMARY KEY,
                next_seq bigint NOT NULL,
                n_items bigint NOT NULL,
                n_tokens bigint NOT NULL
            )""",
        ),
    ),
    (
        "m002_metadata_index",
        ("CREATE INDEX items_metadata ON {schema}.items USING gin (metadata jsonb_path_ops)",),
    ),
    (
        "m003_hnsw",
        (
            # approximate nearest neighbours for big namespaces; the planner still
            # scans a small namespace's rows exactly through the primary key
            HNSW_INDEX,
        ),
    ),
    (
        "m004_analyzed_terms",
        (
            # one analyzer for every store (ctxwise.text): tsv holds its terms, written
            # by the store; index_text is what was indexed when it is not the text
            "ALTER TABLE {schema}.items DROP COLUMN tsv",
            "ALTER TABLE {schema}.items ADD COLUMN index_text text",
            "ALTER TABLE {schema}.items ADD COLUMN tsv tsvector NOT NULL DEFAULT ''",
            "ALTER TABLE {schema}.items ALTER COLUMN tsv DROP DEFAULT",
            "CREATE TABLE {schema}.settings (key text PRIMARY KEY, value text NOT NULL)",
            _REINDEX,  # every item's terms by the store's analyzer (PostgresStore._reindex)
            "CREATE INDEX items_tsv ON {schema}.items USING gin (tsv)",
        ),
    ),
    (
        "m005_frequency_positions",
        # positions hold a term's frequency (_frequency): re-index the items whose
        # terms occurred more than 256 times or past word 16,383 (counted too few)
        (_REINDEX,),
    ),
)


def _ns_key(ns: Namespace) -> str:
    return "/".join(ns)


def _connect_message(e: BaseException) -> str:
    """'cannot connect to PostgreSQL at "host", port N: reason' from libpq's text."""
    first = _one_line(e)
    where = ""
    m = re.search(r"connection to server (.*?) failed: ", first)
    if m:
        where = " " + m.group(1)
    reason = re.sub(r"^.*failed: ", "", first).replace("FATAL:", "").strip()
    hint = " (is the server running?)" if "refused" in reason or "No such file" in reason else ""
    return f"cannot connect to PostgreSQL{where}: {reason}{hint}"


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    return value


def _jsonb(value: Any, what: str) -> str:
    """JSON text PostgreSQL's jsonb accepts (no NUL, valid Unicode)."""
    text = json.dumps(_without_nul(value), ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{what} is not valid Unicode (lone surrogates)") from None
    return text


class PostgresStore(PostgresVectors, Store):
    """A :class:`Store` in a PostgreSQL schema, with pgvector for embeddings.

    ``conninfo`` is a libpq connection string or URI. ``dim`` is the embedding
    dimension (fixed when the schema is made; a store opened with another ``dim`` is
    refused). ``create=True`` creates the ``vector`` extension if it is missing (which
    needs a role allowed to) and the schema, and applies pending migrations;
    ``create=False`` only opens an existing, up-to-date schema. A server that is down,
    refuses the login, or holds a schema from a newer ctxwise raises
    :class:`StoreError`. One store holds one connection; its methods may be called from
    several threads (they take turns). :meth:`drop` deletes the schema and its data.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        dim: int,
        schema: str = "ctxwise",
        create: bool = True,
        connect_timeout: int = 10,
        analyzer: Analyzer | None = None,
    ) -> None:
        if analyzer is not None:
            self.analyzer = analyzer
        if not isinstance(conninfo, str):
            raise UsageError("conninfo must be a libpq connection string or postgresql:// URI")
        if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= _MAX_DIM:
            raise UsageError(f"dim must be an integer from 1 to {_MAX_DIM:,}, got {dim!r}")
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise UsageError(
                f"bad schema name {schema!r}: lower-case letters, digits and '_' "
                "(not first a digit), at most 63"
            )
        try:
            params = conninfo_to_dict(conninfo)
        except psycopg.ProgrammingError as e:
            raise UsageError(f"bad PostgreSQL connection string: {_one_line(e)}") from None
        extra: dict[str, Any] = {}
        if "connect_timeout" not in params:
            extra["connect_timeout"] = connect_timeout
        if "application_name" not in params:
            extra["application_name"] = "ctxwise"
        self.dim = dim
        self.schema = schema
        self._lock = threading.RLock()
        self._iterative = False  # pgvector >= 0.8 (set on connect)
        # libpq >= 14 sends a search's statements together (pipeline mode)
        self._pipelined = psycopg.Pipeline.is_supported()
        # (namespace, lexeme) -> ((next_seq, n_items) when counted, document frequency)
        self._df: dict[tuple[str, str], Counted] = {}  # (seq, items, df)
        # (namespace, lexeme, window) -> when counted and the rows of the window holding it
        self._shares: dict[tuple[str, str, int], Counted] = {}
        try:
            self._conn: psycopg.Connection[Any] | None = psycopg.connect(
                conninfo, autocommit=True, **extra
            )
        except psycopg.Error as e:
            raise StoreError(_connect_message(e)) from None
        try:
            with self._db():
                self._ext = self._vector_extension(create)
                self._migrate(create)
                self._check_dim()
                self._check_analyzer()
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r}, dim={self.dim})"

    # connection and schema ---------------------------------------------------------

    @contextmanager
    def _db(self) -> Iterator[psycopg.Connection[Any]]:
        with self._lock:
            if self._conn is None:
                raise StoreError("the PostgreSQL store is closed")
            try:
                yield self._conn
            except psycopg.errors.ProgramLimitExceeded as e:
                raise UsageError(f"PostgreSQL cannot store this: {_one_line(e)}") from e
            except psycopg.Error as e:
                raise StoreError(f"PostgreSQL: {_one_line(e)}") from e

    def _batch(self, conn: psycopg.Connection[Any]) -> AbstractContextManager[Any]:
        """A pipeline where libpq has them: the statements inside are sent together
        and their results read at the end (or when one is fetched), saving a round
        trip each; without one they run one by one, with the same results."""
        return conn.pipeline() if self._pipelined else nullcontext()

    def _sql(self, template: str, **parts: sql.Composable) -> sql.Composed:
        return sql.SQL(template).format(schema=sql.Identifier(self.schema), **parts)

    def _migrations(self) -> tuple[PostgresDatabase, list[Migration]]:
        """The runner's view of the schema, and MIGRATIONS as it runs them: SQL with
        the schema, vector type and sizes filled in, _REINDEX as :meth:`_reindex`."""
        assert self._conn is not None
        parts = {
            "vector": sql.SQL("{}({})").format(
                sql.Identifier(self._ext, "vector"), sql.SQL(str(self.dim))
            ),
            "fast": sql.SQL(str(_FTS_FAST_BYTES)),
            "ext": sql.Identifier(self._ext),
        }
        db = PostgresDatabase(
            self._conn,
            "migrations",
            f"PostgreSQL schema {self.schema!r}",
            render=lambda template: self._sql(template, **parts),
            lock=f"ctxwise:schema:{self.schema}",
        )
        steps = [
            Migration(name, tuple(self._reindex if s == _REINDEX else s for s in statements))
            for name, statements in MIGRATIONS
        ]
        return db, steps

    def _migrate(self, create: bool) -> None:
        db, steps = self._migrations()
        state = status(db, steps, fail=StoreError)
        if not state.pending:
            self._heal_vector_index()
            return
        if not create:
            what = "needs migrating" if state.exists else "does not exist"
            raise StoreError(
                f"ctxwise schema {self.schema!r} {what} in this database (open with create=True)"
            )
        migrate(db, steps, fail=StoreError)

    def _reindex(self, conn: psycopg.Connection[Any]) -> None:
        """Every item's ``tsv`` and ``ntok`` from its indexed text by the store's
        analyzer, the namespaces' token counts, and the analyzer's name (inside the
        caller's transaction)."""
        last: tuple[str, int] = ("", -1)
        while True:
            rows = conn.execute(
                self._sql(
                    "SELECT ns, seq, coalesce(index_text, text) FROM {schema}.items"
                    " WHERE (ns, seq) > (%s, %s) ORDER BY ns, seq LIMIT 5000"
                ),
                list(last),
            ).fetchall()
            if not rows:
                break
            updates = []
            for ns, seq, indexed in rows:
                literal, ntok = _tsvector(self.analyzer.words(indexed))
                updates.append([literal, ntok, ns, seq])
            with conn.cursor() as cur:
                cur.executemany(
                    self._sql(
                        "UPDATE {schema}.items SET tsv = %s::tsvector, ntok = %s"
                        " WHERE ns = %s AND seq = %s"
                    ),
                    updates,
                )
            last = (rows[-1][0], rows[-1][1])
        conn.execute(
            self._sql(
                "UPDATE {schema}.counters c SET n_tokens = coalesce("
                "(SELECT sum(i.ntok) FROM {schema}.items i WHERE i.ns = c.ns), 0)"
            )
        )
        conn.execute(
            self._sql(
                "INSERT INTO {schema}.settings (key, value) VALUES ('analyzer', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            ),
            [self.analyzer.name],
        )
        self._df.clear()
        self._shares.clear()

    def _analyzer_name(self, conn: psycopg.Connection[Any]) -> str | None:
        row = conn.execute(
            self._sql("SELECT value FROM {schema}.settings WHERE key = 'analyzer'")
        ).fetchone()
        return None if row is None else str(row[0])

    def _check_analyzer(self) -> None:
        """Re-index the schema when its terms were made by another analyzer."""
        assert self._conn is not None
        conn = self._conn
        if self._analyzer_name(conn) == self.analyzer.name:
            return
        with conn.transaction():
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                [f"ctxwise:schema:{self.schema}"],
            )
            if self._analyzer_name(conn) != self.analyzer.name:
                self._reindex(conn)

    def migrations(self) -> list[tuple[str, str]]:
        """Applied migrations as (name, ISO time), in order; the time is empty for
        a migration an older ctxwise recorded without one."""
        with self._db():
            db, steps = self._migrations()
            applied = status(db, steps, fail=StoreError).applied
        return [(m.name, "" if m.applied_at is None else m.applied_at.isoformat()) for m in applied]

    def _lock_key(self, name: str) -> int:
        """The advisory lock key :meth:`exclusive` takes for ``name``: the first 8
        bytes (signed) of the SHA-256 of the schema and the name, so two schemas
        never share a lock, and no name is read as another."""
        seed = b"\x00".join([b"ctxwise-exclusive", self.schema.encode(), name.encode("utf-8")])
        return int.from_bytes(hashlib.sha256(seed).digest()[:8], "big", signed=True)

    @contextmanager
    def exclusive(self, name: str, *, busy: LockBusy | None = None) -> Iterator[None]:
        """Hold ``name`` (see :meth:`Store.exclusive`): a session advisory lock
        (``pg_try_advisory_lock``, keyed by the schema and the name) on this store's
        connection, which every session of the database sees and the server drops
        when the connection ends: a crash, or :meth:`close` inside the block. This
        store's other holders are refused too (an advisory lock is re-entrant within
        one session)."""
        name = check_lock_name(name)
        refuse = busy or lock_held(name)
        key = self._lock_key(name)
        with local_lock(self, name, refuse):
            with self._db() as conn:
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", [key]).fetchone()
            if not (row and row[0]):
                raise refuse()
            holder = os.getpid()
            try:
                yield
            finally:
                # only the holder unlocks: a child forked inside the block shares the
                # connection's socket, and its unlock there would let the lock go
                # while the holder still runs (and garble the holder's connection)
                if os.getpid() == holder:
                    # a closed store's connection holds no lock any more
                    with contextlib.suppress(StoreError), self._db() as conn:
                        conn.execute("SELECT pg_advisory_unlock(%s)", [key])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def drop(self) -> None:
        """Delete the store's schema with all its data, then close the store."""
        with self._db() as conn:
            if self._ext == self.schema:
                raise StoreError(
                    f"pgvector lives in schema {self.schema!r}: dropping it would remove the "
                    "extension from the whole database; drop it by hand"
                )
            conn.execute(self._sql("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        self.close()

    # validation ---------------------------------------------------------------------

    def _row(self, item: NewItem) -> tuple[str | None, list[Any]]:
        """The id asked for and the column values (id and seq filled in later)."""
        item = check_item(item)
        text = item.text
        metadata = item.metadata
        metadata_text = _jsonb(metadata, "metadata")
        raw = None
        if "\x00" in text or _has_nul(metadata):
            raw = json.dumps({"text": text, "metadata": metadata}).encode("utf-8")
            text = text.replace("\x00", " ")
        created_at = item.created_at
        vector = None if item.vector is None else self._vector(item.vector, "an item's vector")
        indexed = text
        if item.index_text is not None and item.index_text != item.text:
            indexed = item.index_text.replace("\x00", " ")
        tsv, ntok = _tsvector(self.analyzer.words(indexed))
        index_text = None if indexed == text else indexed
        return item.id or None, [
            text,
            raw,
            metadata_text,
            created_at,
            ntok,
            vector,
            index_text,
            tsv,
        ]

    def _filters(self, filters: Mapping[str, Any] | None) -> tuple[sql.Composable, dict[str, Any]]:
        """SQL for ``matches(metadata, filters)``: jsonb containment for scalars,
        equality for lists and objects, absent-or-null for None. Named parameters."""
        filters = check_filters(filters)
        if not filters:
            return sql.SQL(""), {}
        parts: list[sql.Composable] = []
        params: dict[str, Any] = {}

        def param(value: Any) -> sql.Placeholder:
            name = f"f{len(params)}"
            params[name] = value
            return sql.Placeholder(name)

        contained: dict[str, Any] = {}
        for key, value in filters.items():
            key = key.replace("\x00", "\ufffd")
            if value is None:
                parts.append(
                    sql.SQL("coalesce(i.metadata -> {}, 'null') = 'null'").format(param(key))
                )
            elif isinstance(value, str | int | float | bool):
                contained[key] = value
            else:
                text = _jsonb(value, "a filter value")
                parts.append(
                    sql.SQL("i.metadata -> {} = {}::jsonb").format(param(key), param(text))
                )
        if contained:
            text = _jsonb(contained, "a filter value")
            parts.append(sql.SQL("i.metadata @> {}::jsonb").format(param(text)))
        return sql.SQL(" AND ") + sql.SQL(" AND ").join(parts), params

    def _item(self, ns: Namespace, row: Sequence[Any]) -> MemoryItem:
        item_id, seq, text, raw, metadata, created_at = row[:6]
        if raw is not None:
            exact = json.loads(bytes(raw).decode("utf-8"))
            text, metadata = exact["text"], exact["metadata"]
        return MemoryItem(item_id, ns, text, metadata, seq, created_at)

    # the contract -------------------------------------------------------------------

    def put_many(self, namespace: Sequence[str], items: Sequence[NewItem]) -> list[str]:
        ns = check_namespace(namespace)
        key = _ns_key(ns)
        rows = [self._row(item) for item in items]
        if not rows:
            return []
        with self._db() as conn, conn.transaction():
            # locks the namespace's counter row until commit: writers take turns here
            end = conn.execute(
                self._sql(
                    "INSERT INTO {schema}.counters AS c (ns, next_seq, n_items, n_tokens)"
                    " VALUES (%s, %s, 0, 0) ON CONFLICT (ns)"
                    " DO UPDATE SET next_seq = c.next_seq + excluded.next_seq"
                    " RETURNING c.next_seq"
                ),
                [key, len(rows)],
            ).fetchone()
            assert end is not None
            base = end[0] - len(rows)
            ids = [asked or f"m{base + i}" for i, (asked, _) in enumerate(rows)]
            last = {item_id: i for i, item_id in enumerate(ids)}  # a repeated id: last wins
            removed = conn.execute(
                self._sql(
                    "DELETE FROM {schema}.items WHERE ns = %s AND id = ANY(%s) RETURNING ntok"
                ),
                [key, list(last)],
            ).fetchall()
            kept = sorted(last.values())
            with conn.cursor() as cur:
                cur.executemany(
                    self._sql(
                        "INSERT INTO {schema}.items"
                        " (ns, id, seq, text, raw, metadata, created_at, ntok, embedding,"
                        " index_text, tsv)"
                        " VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s::tsvector)"
                    ),
                    [[key, ids[i], base + i, *rows[i][1]] for i in kept],
                )
            tokens = sum(rows[i][1][4] for i in kept) - sum(r[0] for r in removed)
            conn.execute(
                self._sql(
                    "UPDATE {schema}.counters SET n_items = n_items + %s,"
                    " n_tokens = n_tokens + %s WHERE ns = %s"
                ),
                [len(kept) - len(removed), tokens, key],
            )
        return ids

    def get_many(self, namespace: Sequence[str], ids: Sequence[str]) -> list[MemoryItem]:
        ns = check_namespace(namespace)
        ids = wanted = check_ids(ids)
        if not wanted:
            return []
        with self._db() as conn:
            rows = conn.execute(
                self._sql(
                    f"SELECT {_COLUMNS} FROM {{schema}}.items i WHERE i.ns = %s AND i.id = ANY(%s)"
                ),
                [_ns_key(ns), list(set(wanted))],
            ).fetchall()
        found = {row[0]: self._item(ns, row) for row in rows}
        return [found[i] for i in ids if i in found]

    def delete(self, namespace: Sequence[str], ids: Sequence[str]) -> int:
        key = _ns_key(check_namespace(namespace))
        wanted = list(dict.fromkeys(check_ids(ids)))
        if not wanted:
            return 0
        with self._db() as conn, conn.transaction():
            locked = conn.execute(
                self._sql("SELECT 1 FROM {schema}.counters WHERE ns = %s FOR UPDATE"), [key]
            ).fetchone()
            if locked is None:
                return 0
            removed = conn.execute(
                self._sql(
                    "DELETE FROM {schema}.items WHERE ns = %s AND id = ANY(%s) RETURNING ntok"
                ),
                [key, wanted],
            ).fetchall()
            if removed:
                conn.execute(
                    self._sql(
                        "UPDATE {schema}.counters SET n_items = n_items - %s,"
                        " n_tokens = n_tokens - %s WHERE ns = %s"
                    ),
                    [len(removed), sum(r[0] for r in removed), key],
                )
        return len(removed)

    def lexical_search(
        self, namespace: Sequence[str], query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[tuple[MemoryItem, float]]:
        ns = check_namespace(namespace)
        k = min(check_k(k), INT64_MAX)
        query = check_query(query)
        where, params = self._filters(filters)
        query = query.replace("\x00", " ")
        if not query.strip():
            return []
        key = _ns_key(ns)
        lexes = sorted(set(self.analyzer.words(query)))
        if not lexes:
            return []
        # a pipeline: BEGIN goes with the statistics, the ranking statement with
        # COMMIT (more round trips only to count a lexeme, or for a second step)
        with self._db() as conn, self._batch(conn), conn.transaction():
            stats = conn.execute(
                self._sql(
                    "SELECT next_seq, n_items, n_tokens FROM {schema}.counters WHERE ns = %s"
                ),
                [key],
            ).fetchone()
            if stats is None or not stats[1]:
                return []
            rows = PostgresRows(conn, self._sql, key, stats, where, params, self._df, self._shares)
            scored = bounded_search(rows, lexes, int(stats[1]), k)
        return [(self._item(ns, rows.found[seq]), s) for seq, s in scored]

    def by_seq(self, namespace: Sequence[str], seqs: Sequence[int]) -> list[MemoryItem]:
        ns = check_namespace(namespace)
        wanted = check_seqs(seqs)
        if not wanted:
            return []
        with self._db() as conn:
            rows = conn.execute(
                self._sql(
                    f"SELECT {_COLUMNS} FROM {{schema}}.items i"
                    " WHERE i.ns = %s AND i.seq = ANY(%s::bigint[]) ORDER BY i.seq"
                ),
                [_ns_key(ns), wanted],
            ).fetchall()
        return [self._item(ns, row) for row in rows]

    def recent(self, namespace: Sequence[str], n: int) -> list[MemoryItem]:
        ns = check_namespace(namespace)
        n = check_n(n)
        if n <= 0:
            return []
        with self._db() as conn:
            rows = conn.execute(
                self._sql(
                    f"SELECT {_COLUMNS} FROM {{schema}}.items i"
                    " WHERE i.ns = %s ORDER BY i.seq DESC LIMIT %s"
                ),
                [_ns_key(ns), n],
            ).fetchall()
        return [self._item(ns, row) for row in reversed(rows)]

    def namespaces(self) -> list[Namespace]:
        with self._db() as conn:
            rows = conn.execute(
                self._sql("SELECT ns FROM {schema}.counters WHERE n_items > 0")
            ).fetchall()
        return sorted(tuple(row[0].split("/")) for row in rows)

    def count(self, namespace: Sequence[str]) -> int:
        key = _ns_key(check_namespace(namespace))
        with self._db() as conn:
            row = conn.execute(
                self._sql("SELECT n_items FROM {schema}.counters WHERE ns = %s"), [key]
            ).fetchone()
        return 0 if row is None else int(row[0])
