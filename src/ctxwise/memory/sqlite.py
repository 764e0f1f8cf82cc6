"""The embedded default store: one SQLite file.

- WAL journal, so readers never block the writer and a killed process leaves
  every committed transaction intact;
- migrations ordered, named, idempotent and recorded in a ``migrations`` table; a
  file whose schema is newer than this code is refused, untouched;
- per-namespace counts kept by triggers, so ``count`` and ``namespaces`` read one
  small table.

Lexical search is FTS5 BM25 over the store analyzer's terms
(:mod:`ctxwise.text`): each item's ``terms`` column holds them, space-joined, and
each namespace has an FTS5 table of its own over that column (``tokenize='ascii'``:
every non-ASCII character is a token character and terms hold no ASCII
punctuation, so FTS5 sees exactly the analyzer's terms). A namespace's BM25
statistics (item count, average length, document frequencies) are its own, so
another namespace's writes never change its scores, and the scores equal
:class:`InMemoryStore`'s and ``PostgresStore``'s. The analyzer's name is recorded
in the file; opening it with another analyzer re-indexes every item. A namespace's
table costs some space and time when its first item is written, and every table is
in the schema SQLite reads when it opens the file, so the file grows and opens more
slowly with the number of namespaces: for many thousands of tenants, prefer
``PostgresStore``.

The search's cost is bounded, as every store's is: FTS5 scores every row a query
matches, so a query of common words over a big namespace would score most of it.
:func:`ctxwise.search.bounded_search` chooses the rows to score, at most
``LEXICAL_CAP`` (:data:`ctxwise.search.LEXICAL_CAP`) per step, and FTS5 scores
them: a namespace of at most ``LEXICAL_CAP`` rows, or a query whose terms match at
most that many rows in all, is ranked exactly (every small store, e.g. each LoCoMo
conversation, is searched exactly); above it, terms in at least half of the recent
rows are left out and the rows holding the rarest terms are scored exactly, then
the most recent rows holding the common ones when that can change the top ``k``.
A score is always the row's exact BM25 for the terms its step queried, never more
than its full score. ``benchmarks/bench_memory.py`` compares this plan's top 10
with the exact top 10 on synthetic support sentences.

FTS5's ``bm25()`` reads every instance of every query term in each row it scores,
so a long question over many long items (a coding session's remembered turns) is
slow. A namespace this store searches again, or wrote from
empty, keeps its postings in memory instead (``memory/_sqlite_postings.py``): the
same plan and the same scores from numpy arrays, built a bounded amount per search
and caught up with the file as the vector matrix is; searches with metadata
filters, and the first search of a namespace in a process, read FTS5.

Vector search, per namespace:

- below ``ann_min_items`` vectors (default 50,000), or without the ``usearch``
  package (extra ``ann``), or with metadata filters on a namespace that has no
  index: brute force with numpy over a matrix cached in memory and caught up when
  the file changes (``PRAGMA data_version`` catches other processes' writes): rows
  added since are appended, a deletion in the namespace reloads it;
  one thread (see ``_dots``);
- from ``ann_min_items`` up, with usearch: an HNSW index (see
  :mod:`ctxwise.memory._ann`), built on the first search (one thread,
  deterministic), saved beside the file (``<file>.ann/``), caught up
  incrementally with rows added since (by ``seq``, which is never reused) and
  pruned of deleted rows (found by the trigger-kept vector count); its candidates
  are re-scored exactly from the stored float32 vectors. Filtered searches scan
  the namespace's matching rows exactly. The SQLite file stays the source of
  truth: a missing, stale, foreign or damaged index file is rebuilt from it.

This Python cannot load SQLite extensions (no ``enable_load_extension``), so
sqlite-vec is not used.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeAlias

try:
    import fcntl
except ImportError:  # Windows: exclusive() holds against this process only
    fcntl = None  # type: ignore[assignment]

from ctxwise._migrations import Migration, SQLiteDatabase, migrate, status
from ctxwise._sqlite import use_wal
from ctxwise.errors import MissingDependencyError, UsageError
from ctxwise.memory import _ann
from ctxwise.memory._sqlite_lexical import _Lexical
from ctxwise.memory._sqlite_postings import POSTINGS_KEPT, WARM_CHARS, Postings, PostingsRows
from ctxwise.memory._sqlite_rows import (
    _COLUMNS,
    _by_rowid,
    _filter_sql,
    _key,
    _metadata_equal,
    _row,
)
from ctxwise.memory._sqlite_vectors import SQLiteVectors, VectorIndexInfo, _Matrix
from ctxwise.memory.store import (
    INT64_MAX,
    LockBusy,
    MemoryItem,
    Namespace,
    NewItem,
    Store,
    StoreError,
    Vector,
    check_dims,
    check_filters,
    check_ids,
    check_item,
    check_k,
    check_lock_name,
    check_n,
    check_namespace,
    check_query,
    check_seqs,
    check_vector,
    local_lock,
    lock_held,
    unit,
)
from ctxwise.search import LEXICAL_CAP, bounded_search
from ctxwise.text import Analyzer

__all__ = ["ANN_MIN_ITEMS", "LEXICAL_CAP", "SCHEMA_VERSION", "SQLiteStore", "VectorIndexInfo"]

Step: TypeAlias = "str | Callable[[SQLiteStore, sqlite3.Connection], None]"


def _reindex(store: SQLiteStore, c: sqlite3.Connection) -> None:
    """Every item's ``terms`` from its ``index_text`` by the store's analyzer, and
    each namespace's FTS5 table rebuilt from them (inside the caller's transaction)."""
    rows = c.execute("SELECT rowid, index_text FROM items").fetchall()
    for start in range(0, len(rows), _CHUNK):
        part = rows[start : start + _CHUNK]
        c.executemany(
            "UPDATE items SET terms = ? WHERE rowid = ?",
            [(store.analyzer.terms(text), rowid) for rowid, text in part],
        )
    for (name,) in c.execute("SELECT name FROM lexical_tables").fetchall():
        c.execute(f'DROP TABLE IF EXISTS "{name}"')
    c.execute("DELETE FROM lexical_tables")
    for (key,) in c.execute("SELECT DISTINCT ns FROM items").fetchall():
        name = _create_table(c, key)
        c.execute(
            f'INSERT INTO "{name}" (rowid, terms) SELECT rowid, terms FROM items WHERE ns = ?',
            (key,),
        )
    c.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('analyzer', ?)", (store.analyzer.name,)
    )


def _table_name(key: str) -> str:
    return "lex_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


def _create_table(c: sqlite3.Connection, key: str) -> str:
    """The namespace's FTS5 table, created (and registered) if missing."""
    name = _table_name(key)
    c.execute(
        f'CREATE VIRTUAL TABLE IF NOT EXISTS "{name}" USING fts5('
        "terms, content='items', content_rowid='rowid', tokenize='ascii')"
    )
    c.execute("INSERT OR IGNORE INTO lexical_tables (ns, name) VALUES (?, ?)", (key, name))
    return name


# (name, steps): append only; never edit a migration that has shipped. A step is a
# statement or a function of (store, connection), run in the migration's transaction.
MIGRATIONS: tuple[tuple[str, tuple[Step, ...]], ...] = (
    (
        "001_items",
        (
            """CREATE TABLE IF NOT EXISTS items (
                rowid INTEGER PRIMARY KEY,
                ns TEXT NOT NULL,
                id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                text TEXT NOT NULL,
                index_text TEXT NOT NULL,
                metadata TEXT NOT NULL,
                created_at REAL,
                vector BLOB,
                UNIQUE (ns, id)
            )""",
            "CREATE INDEX IF NOT EXISTS items_ns_seq ON items (ns, seq)",
            "CREATE TABLE IF NOT EXISTS counters (ns TEXT PRIMARY KEY, next_seq INTEGER NOT NULL)",
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ),
    ),
    (
        "002_fts",
        (
            """CREATE VIRTUAL TABLE IF NOT EXISTS items_fts USING fts5(
                index_text, content='items', content_rowid='rowid', tokenize='porter unicode61'
            )""",
            """CREATE TRIGGER IF NOT EXISTS items_ai AFTER INSERT ON items BEGIN
                INSERT INTO items_fts (rowid, index_text) VALUES (new.rowid, new.index_text);
            END""",
            """CREATE TRIGGER IF NOT EXISTS items_ad AFTER DELETE ON items BEGIN
                INSERT INTO items_fts (items_fts, rowid, index_text)
                VALUES ('delete', old.rowid, old.index_text);
            END""",
        ),
    ),
    (
        "003_counts",
        (
            # per-namespace counts kept by triggers: count() and the vector index's
            # staleness check cost one row read instead of a scan
            "ALTER TABLE counters ADD COLUMN n_items INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE counters ADD COLUMN n_vectors INTEGER NOT NULL DEFAULT 0",
            """INSERT OR IGNORE INTO counters (ns, next_seq)
                SELECT ns, max(seq) + 1 FROM items GROUP BY ns""",
            """UPDATE counters SET
                n_items = (SELECT count(*) FROM items WHERE items.ns = counters.ns),
                n_vectors = (SELECT count(vector) FROM items WHERE items.ns = counters.ns)""",
            """CREATE TRIGGER IF NOT EXISTS items_count_ai AFTER INSERT ON items BEGIN
                UPDATE counters SET n_items = n_items + 1,
                    n_vectors = n_vectors + (new.vector IS NOT NULL)
                WHERE ns = new.ns;
            END""",
            """CREATE TRIGGER IF NOT EXISTS items_count_ad AFTER DELETE ON items BEGIN
                UPDATE counters SET n_items = n_items - 1,
                    n_vectors = n_vectors - (old.vector IS NOT NULL)
                WHERE ns = old.ns;
            END""",
        ),
    ),
    (
        "004_analyzed_terms_per_namespace",
        (
            # one analyzer for every store (ctxwise.text), and BM25 statistics per
            # namespace: each namespace gets an FTS5 table over the analyzed terms
            "ALTER TABLE items ADD COLUMN terms TEXT NOT NULL DEFAULT ''",
            "DROP TRIGGER IF EXISTS items_ai",
            "DROP TRIGGER IF EXISTS items_ad",
            "DROP TABLE IF EXISTS items_fts",
            """CREATE TABLE IF NOT EXISTS lexical_tables (
                ns TEXT PRIMARY KEY, name TEXT UNIQUE NOT NULL
            )""",
            _reindex,
        ),
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)

ANN_MIN_ITEMS = 50_000
"""Vectors in a namespace from which an HNSW index is used (with usearch)."""
_MMAP_BYTES = 1 << 30
_CHUNK = 50_000


@contextmanager
def _file_lock(path: str, busy: LockBusy) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created), refused at once (``busy()``) when
    another open file holds it, in this process or another; the file is removed
    when the lock is let go. A holder that opened the file just before its last
    holder removed it finds its lock on a file no longer there and takes the new
    one instead."""
    assert fcntl is not None
    for _ in range(100):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as exc:
            raise StoreError(f"{path}: cannot open the lock file ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise busy() from None
        except BaseException:
            os.close(fd)
            raise
        mine = os.fstat(fd)
        try:
            there = os.stat(path)
        except FileNotFoundError:
            there = None
        if there is not None and (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino):
            break
        os.close(fd)  # removed (and maybe made again) by its last holder: try again
    else:
        raise StoreError(f"{path}: the lock file keeps being replaced")
    holder = os.getpid()
    try:
        yield
    finally:
        # only the holder removes the file: a child forked inside the block that
        # leaves it too shares the lock, and removing the file there would let a
        # newcomer make a new one and take it while the holder still runs
        if os.getpid() == holder:
            with contextlib.suppress(OSError):
                os.unlink(path)  # still holding it: a newcomer's open makes a new file
        os.close(fd)


class SQLiteStore(SQLiteVectors, Store):
    """A store in one SQLite file (``":memory:"`` for a private in-memory database).

    ``ann_min_items``: vectors in a namespace from which an HNSW index is used when
    the ``usearch`` package (extra ``ann``) is installed; ``None`` always searches by
    brute force. The index of a file-backed store is saved in ``<file>.ann/``.
    ``analyzer`` (default :data:`ctxwise.text.DEFAULT_ANALYZER`) makes the lexical
    terms; a file indexed by another analyzer is re-indexed when opened.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        timeout: float = 30.0,
        ann_min_items: int | None = ANN_MIN_ITEMS,
        ann_params: _ann.AnnParams | None = None,
        analyzer: Analyzer | None = None,
    ) -> None:
        if analyzer is not None:
            self.analyzer = analyzer
        if ann_min_items is not None and (
            isinstance(ann_min_items, bool) or not isinstance(ann_min_items, int)
        ):
            raise UsageError(f"ann_min_items must be an integer or None, got {ann_min_items!r}")
        self.path = str(path)
        if "\x00" in self.path:
            raise UsageError(f"bad SQLite path {self.path!r}: it holds a NUL character")
        self.ann_min_items = None if ann_min_items is None else max(1, ann_min_items)
        self.ann_params = ann_params if ann_params is not None else _ann.AnnParams()
        in_memory = self.path in ("", ":memory:") or self.path.startswith("file:")
        self.ann_dir: Path | None = None if in_memory else Path(self.path + ".ann")
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=timeout, check_same_thread=False, isolation_level=None
            )
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a usable SQLite store ({exc})") from None
        try:
            use_wal(self._conn, timeout)
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")
            self._conn.create_function(
                "ctxwise_metadata_equal", 3, _metadata_equal, deterministic=True
            )
            self._migrate()
            self._check_analyzer()
        except BaseException as exc:
            self._conn.close()  # a store that cannot open holds no connection
            if isinstance(exc, sqlite3.DatabaseError):
                raise StoreError(f"{self.path}: not a usable SQLite store ({exc})") from None
            raise
        self._lock = threading.RLock()
        self._closed = False
        self._matrices: dict[str, _Matrix] = {}
        self._postings: dict[str, Postings] = {}  # lexical postings in memory, per namespace
        # namespace -> (data_version it was checked at, or None after own writes; index)
        self._indexes: dict[str, tuple[int | None, _ann.NamespaceIndex]] = {}

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """The connection, for one call at a time; a closed store or a failing
        database (locked past the timeout, read-only, full) is a :class:`StoreError`."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.path}: the SQLite store is closed")
            try:
                yield self._conn
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: {exc}") from exc

    # schema -------------------------------------------------------------------

    def _migrations(self) -> tuple[SQLiteDatabase, list[Migration]]:
        """The runner's view of the file, and MIGRATIONS with their functions bound
        to this store."""
        steps = [
            Migration(name, tuple(s if isinstance(s, str) else partial(s, self) for s in steps))
            for name, steps in MIGRATIONS
        ]
        return SQLiteDatabase(self._conn, "migrations", self.path), steps

    def _migrate(self) -> None:
        db, steps = self._migrations()
        migrate(db, steps, fail=StoreError)

    def _check_analyzer(self) -> None:
        """Re-index the file when its terms were made by another analyzer."""
        c = self._conn
        found = c.execute("SELECT value FROM meta WHERE key = 'analyzer'").fetchone()
        if found is not None and found[0] == self.analyzer.name:
            return
        c.execute("BEGIN IMMEDIATE")
        try:
            found = c.execute("SELECT value FROM meta WHERE key = 'analyzer'").fetchone()
            if found is None or found[0] != self.analyzer.name:
                _reindex(self, c)
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def lexical_table(self, namespace: Sequence[str]) -> str | None:
        """The name of the namespace's FTS5 table (None before its first write)."""
        key = _key(check_namespace(namespace))
        with self._db():
            found = self._conn.execute(
                "SELECT name FROM lexical_tables WHERE ns = ?", (key,)
            ).fetchone()
        return None if found is None else str(found[0])

    @property
    def migrations(self) -> list[str]:
        """The names of the migrations applied to the file, in order."""
        with self._db():
            db, steps = self._migrations()
            return [m.name for m in status(db, steps, fail=StoreError).applied]

    # writes -------------------------------------------------------------------

    def put_many(self, namespace: Sequence[str], items: Sequence[NewItem]) -> list[str]:
        ns = check_namespace(namespace)
        key = _key(ns)
        rows = []
        for item in map(check_item, items):
            meta = json.dumps(item.metadata, ensure_ascii=False)
            blob = None if item.vector is None else unit(item.vector).tobytes()
            indexed = item.index_text if item.index_text is not None else item.text
            rows.append((item, meta, blob, indexed, self.analyzer.terms(indexed)))
        if not rows:
            return []
        with self._db():
            c = self._conn
            c.execute("BEGIN IMMEDIATE")
            try:
                self._check_dim([(item, meta, blob) for item, meta, blob, _, _ in rows])
                table = _create_table(c, key)
                c.execute("INSERT OR IGNORE INTO counters (ns, next_seq) VALUES (?, 0)", (key,))
                first = c.execute(
                    "SELECT next_seq, n_items FROM counters WHERE ns = ?", (key,)
                ).fetchone()
                seq, empty = int(first[0]), not first[1]
                ids = [
                    item.id if item.id is not None else f"m{seq + i}"
                    for i, (item, _, _, _, _) in enumerate(rows)
                ]
                last = {item_id: i for i, item_id in enumerate(ids)}  # a repeated id: last wins
                unique = list(last)
                for start in range(0, len(unique), 500):
                    part = unique[start : start + 500]
                    self._delete_rows(c, table, key, part)
                c.executemany(
                    "INSERT INTO items (ns, id, seq, text, index_text, metadata, created_at,"
                    " vector, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            key,
                            ids[i],
                            seq + i,
                            item.text,
                            indexed,
                            meta,
                            item.created_at,
                            blob,
                            terms,
                        )
                        for i, (item, meta, blob, indexed, terms) in enumerate(rows)
                        if last[ids[i]] == i
                    ],
                )
                c.execute(
                    f'INSERT INTO "{table}" (rowid, terms) SELECT rowid, terms FROM items'
                    " WHERE ns = ? AND seq >= ?",
                    (key, seq),
                )
                c.execute("UPDATE counters SET next_seq = ? WHERE ns = ?", (seq + len(rows), key))
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
            if empty and key not in self._postings:
                self._keep_postings(key, Postings(ready=True))  # nothing to read first
            self._changed(key)
        return ids

    def _changed(self, key: str) -> None:
        """This connection wrote ``key``: its caches are checked again on next use;
        a vector matrix in use and postings that were complete take the write in
        now, on the writer's thread (a turn's effect), not in the next search."""
        slot = self._indexes.get(key)
        if slot is not None:
            self._indexes[key] = (None, slot[1])
        matrix = self._matrices.get(key)
        postings = self._postings.get(key)
        if matrix is not None:
            matrix.version = None
        if postings is not None:
            ready, postings.version = postings.ready, None
            if not ready:
                postings = None
        if matrix is None and postings is None:
            return
        c = self._conn
        try:
            if matrix is not None:
                self._matrix(key)
            if postings is not None:
                c.execute("BEGIN")
                try:
                    postings.advance(c, key, None)
                finally:
                    c.execute("COMMIT")
        except sqlite3.Error:
            # the write is committed: the next search reads the file afresh
            self._matrices.pop(key, None)
            self._postings.pop(key, None)

    def _keep_postings(self, key: str, postings: Postings) -> None:
        """Keep ``postings`` for ``key``, forgetting the least recently used
        namespace's past ``POSTINGS_KEPT``."""
        self._postings.pop(key, None)
        self._postings[key] = postings
        while len(self._postings) > POSTINGS_KEPT:
            self._postings.pop(next(iter(self._postings)))

    def _postings_for(self, key: str) -> Postings | None:
        """The namespace's postings if every row is in (inside a read transaction),
        else None (FTS5 then): the first search starts nothing, each later one reads
        up to ``WARM_CHARS`` of terms into them (module ``_sqlite_postings``)."""
        postings = self._postings.get(key)
        if postings is None:
            self._keep_postings(key, Postings())
            return None
        self._keep_postings(key, postings)  # the most recently used
        return postings if postings.advance(self._conn, key, WARM_CHARS) else None

    def _check_dim(self, rows: Sequence[tuple[NewItem, str, bytes | None]]) -> None:
        dims = {len(blob) // 4 for _, _, blob in rows if blob is not None}
        stored = self._stored_dim()
        dim = check_dims(dims, stored)
        if stored is None and dim is not None:
            self._conn.execute("INSERT INTO meta (key, value) VALUES ('dim', ?)", (str(dim),))

    @staticmethod
    def _delete_rows(c: sqlite3.Connection, table: str, key: str, ids: Sequence[str]) -> int:
        """Delete the namespace's rows with these ids, and their terms from its index."""
        marks = ",".join("?" * len(ids))
        old = c.execute(
            f"SELECT rowid, terms FROM items WHERE ns = ? AND id IN ({marks})", (key, *ids)
        ).fetchall()
        if not old:
            return 0
        c.executemany(
            f'INSERT INTO "{table}" ("{table}", rowid, terms) VALUES (\'delete\', ?, ?)', old
        )
        c.executemany("DELETE FROM items WHERE rowid = ?", [(r,) for r, _ in old])
        return len(old)

    def delete(self, namespace: Sequence[str], ids: Sequence[str]) -> int:
        key = _key(check_namespace(namespace))
        unique = list(dict.fromkeys(check_ids(ids)))
        with self._db():
            c = self._conn
            c.execute("BEGIN IMMEDIATE")
            try:
                found = c.execute("SELECT name FROM lexical_tables WHERE ns = ?", (key,)).fetchone()
                n = 0
                if found is not None:
                    for start in range(0, len(unique), 500):
                        n += self._delete_rows(c, found[0], key, unique[start : start + 500])
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
            self._changed(key)
        return n

    # reads --------------------------------------------------------------------

    def get_many(self, namespace: Sequence[str], ids: Sequence[str]) -> list[MemoryItem]:
        key = _key(check_namespace(namespace))
        ids = check_ids(ids)
        if not ids:
            return []
        with self._db():
            marks = ",".join("?" * len(ids))
            found = {
                r[2]: _row(r)
                for r in self._conn.execute(
                    f"SELECT {_COLUMNS} FROM items WHERE ns = ? AND id IN ({marks})", (key, *ids)
                )
            }
        return [found[i] for i in ids if i in found]

    def lexical_search(
        self, namespace: Sequence[str], query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[tuple[MemoryItem, float]]:
        key = _key(check_namespace(namespace))
        k = min(check_k(k), INT64_MAX)
        terms = sorted(set(self.analyzer.words(check_query(query))))
        where, params = _filter_sql(filters)
        if not terms:
            return []
        with self._db():
            c = self._conn
            c.execute("BEGIN")  # one snapshot for every step
            try:
                found = c.execute(
                    "SELECT t.name, c.n_items FROM lexical_tables t JOIN counters c"
                    " ON c.ns = t.ns WHERE t.ns = ?",
                    (key,),
                ).fetchone()
                if found is None or not found[1]:
                    return []
                postings = None if where else self._postings_for(key)
                if postings is not None:
                    scored = bounded_search(PostingsRows(postings), terms, postings.n_live, k)
                else:
                    lexical = _Lexical(c, found[0], key, int(found[1]), where, params)
                    scored = bounded_search(lexical, terms, int(found[1]), k)
                rows = _by_rowid(c, key, [r for r, _ in scored])
            finally:
                c.execute("COMMIT")
        return [(rows[r], s) for r, s in scored if r in rows]

    def vector_search(
        self,
        namespace: Sequence[str],
        vector: Vector,
        k: int,
        filters: Mapping[str, Any] | None = None,
    ) -> list[tuple[MemoryItem, float]]:
        key = _key(check_namespace(namespace))
        k = check_k(k)
        q = unit(check_vector(vector, "the query vector"))
        filters = check_filters(filters)
        with self._db():
            dim = self._stored_dim()
            if dim is not None and q.shape != (dim,):
                raise UsageError(
                    f"the query vector has shape {q.shape}; this store holds "
                    f"{dim}-dimensional vectors"
                )
            index = self._index(key)
            if index is not None and not filters:
                return self._search_index(key, index, q, k)
            if index is not None:
                return self._search_scan(key, q, k, filters)
            return self._search_matrix(key, q, k, filters)

    def index_info(self, namespace: Sequence[str]) -> VectorIndexInfo:
        """How ``namespace``'s vectors are searched now (building or catching up its
        HNSW index first, if it qualifies): call it after a bulk load to pay the build
        before the first query."""
        key = _key(check_namespace(namespace))
        with self._db():
            found = self._conn.execute(
                "SELECT n_vectors FROM counters WHERE ns = ?", (key,)
            ).fetchone()
            vectors = int(found[0]) if found else 0
            if self.ann_min_items is None:
                return VectorIndexInfo("exact", vectors, "the index is switched off")
            if not _ann.available():
                return VectorIndexInfo(
                    "exact",
                    vectors,
                    f"usearch is not installed: {MissingDependencyError.install_command('ann')}",
                )
            if self._index(key) is None:
                return VectorIndexInfo(
                    "exact", vectors, f"fewer than {self.ann_min_items:,} vectors"
                )
            return VectorIndexInfo("hnsw", vectors, f"{self.ann_min_items:,} vectors or more")

    def by_seq(self, namespace: Sequence[str], seqs: Sequence[int]) -> list[MemoryItem]:
        key = _key(check_namespace(namespace))
        wanted = check_seqs(seqs)
        if not wanted:
            return []
        marks = ",".join("?" * len(wanted))
        with self._db():
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM items WHERE ns = ? AND seq IN ({marks}) ORDER BY seq",
                (key, *wanted),
            ).fetchall()
        return [_row(r) for r in rows]

    def recent(self, namespace: Sequence[str], n: int) -> list[MemoryItem]:
        key = _key(check_namespace(namespace))
        n = check_n(n)
        if n <= 0:
            return []
        with self._db():
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM items WHERE ns = ? ORDER BY seq DESC LIMIT ?", (key, n)
            ).fetchall()
        return [_row(r) for r in reversed(rows)]

    def namespaces(self) -> list[Namespace]:
        with self._db():
            keys = [r[0] for r in self._conn.execute("SELECT ns FROM counters WHERE n_items > 0")]
        return sorted(tuple(k.split("/")) for k in keys)  # as tuples: ('a', 'b') < ('a-b',)

    def count(self, namespace: Sequence[str]) -> int:
        key = _key(check_namespace(namespace))
        with self._db():
            found = self._conn.execute(
                "SELECT n_items FROM counters WHERE ns = ?", (key,)
            ).fetchone()
        return int(found[0]) if found else 0

    @contextmanager
    def exclusive(self, name: str, *, busy: LockBusy | None = None) -> Iterator[None]:
        """Hold ``name`` (see :meth:`Store.exclusive`): an exclusive ``flock`` on
        ``DB.HASH.lock`` beside the database file (HASH: 16 hex digits of the name's
        SHA-256; the file is removed when let go), which every process opening the
        file sees and the system drops when its holder dies. A database with no
        file (``":memory:"``), or a system without ``flock`` (Windows), is held
        against this process only."""
        name = check_lock_name(name)
        refuse = busy or lock_held(name)
        with self._db() as c:  # the file SQLite opened, wherever the path led
            row = c.execute("SELECT file FROM pragma_database_list WHERE name = 'main'")
            found = row.fetchone()
        file = str(found[0]) if found and found[0] else ""
        with local_lock(self, name, refuse):
            if not file or fcntl is None:
                yield
                return
            digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]
            with _file_lock(f"{file}.{digest}.lock", refuse):
                yield

    def close(self) -> None:
        """Save any HNSW index with unsaved changes, then close the file (again: nothing)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self.ann_dir is not None:
                    for key, (_, index) in self._indexes.items():
                        if index.unsaved:
                            probe = self._probe(key, index)
                            index.save(self.ann_dir, self._index_name(key), key, probe)
            finally:
                self._indexes.clear()
                self._conn.close()
                self._matrices.clear()
                self._postings.clear()
