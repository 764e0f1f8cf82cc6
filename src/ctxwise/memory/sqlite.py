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

The search's cost is bounded. FTS5
scores every row a query matches, so a query of common words over a big namespace
would score most of it. Here, at most ``LEXICAL_CAP`` (4,000) rows are scored per
step:

1. each query term's row count is taken, stopping at ``LEXICAL_CAP + 1``;
2. a namespace of at most ``LEXICAL_CAP`` rows, or a query whose terms match at most
   that many rows in all, is ranked exactly (one OR query): every small store,
   e.g. each LoCoMo conversation, is searched exactly;
3. otherwise terms found in at least half of the recent rows are left out (FTS5
   gives them an idf of 1e-6, so they cannot change a ranking), the rarest terms
   whose counts add up to at most the cap are "rare" and the rest "common";
   documents holding a rare term are scored exactly (rare terms alone, and rare
   AND common); when the k-th score is above what the common terms could add
   (2.2 x idf upper bound each), the result is provably exact; otherwise the
   most recent ``LEXICAL_CAP`` rows holding common terms are scored too;
4. with no rare term, the rows holding every term are scored (if there are more
   than the cap, the most recent ones), then, if fewer than ``k`` came back, the
   most recent rows holding any of them.

A score is always the row's exact BM25 for the terms its step queried, never more
than its full score. ``benchmarks/bench_memory.py`` compares this plan's top 10
with the exact top 10 on synthetic support sentences.

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
import math
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

try:
    import fcntl
except ImportError:  # Windows: exclusive() holds against this process only
    fcntl = None  # type: ignore[assignment]

from ctxwise._sqlite import use_wal
from ctxwise.errors import MissingDependencyError, UsageError
from ctxwise.memory import _ann
from ctxwise.memory.store import (
    BM25_K1,
    DOT_SLACK,
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
    exact_dots,
    json_equal,
    local_lock,
    lock_held,
    rank_key,
    unit,
)
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

LEXICAL_CAP = 4000
"""Most rows one lexical step scores (see the module docstring)."""
STOP_SHARE = 0.5
"""A term in at least this share of the recent rows is left out of a big query."""
STOP_WINDOW = 20_000
"""How many of the newest rows that share is measured over."""
ANN_MIN_ITEMS = 50_000
"""Vectors in a namespace from which an HNSW index is used (with usearch)."""
ANN_SAVE_SHARE = 0.1
"""The index is saved again once this share of it changed (and on close)."""
_BM25_BOUND = BM25_K1 + 1  # no term adds more than idf x this to a bm25 score
_MMAP_BYTES = 1 << 30
_CHUNK = 50_000

_COLUMNS = "rowid, ns, id, seq, text, metadata, created_at"


@dataclass(frozen=True, slots=True)
class VectorIndexInfo:
    """How a namespace's vectors are searched, and why."""

    method: Literal["exact", "hnsw"]
    vectors: int
    reason: str


def _key(ns: Namespace) -> str:
    return "/".join(ns)


def _row(r: Sequence[Any]) -> MemoryItem:
    return MemoryItem(
        id=r[2],
        namespace=tuple(r[1].split("/")),
        text=r[4],
        metadata=json.loads(r[5]),
        seq=r[3],
        created_at=r[6],
    )


_INT64_MIN = -(2**63)
_NUL_JSON = json.dumps("\x00")[1:-1]  # how a NUL character reads in JSON text
_ENTRY = "EXISTS (SELECT 1 FROM json_each(items.metadata) AS j WHERE j.key = ?"


def _metadata_equal(metadata: str, key: str, value: str) -> bool:
    """SQL function ``ctxwise_metadata_equal``: :func:`json_equal` of the item's
    value under ``key`` (None when missing) and the filter value (JSON text)."""
    found = json.loads(metadata).get(key)
    return json_equal(found, json.loads(value))


def _native_filter(key: str, value: Any) -> tuple[str, list[Any]] | None:
    """SQL for one filter in SQLite's JSON functions, or None where they cannot
    compare it exactly."""
    if "\x00" in key:
        return None
    if value is None:
        return f"NOT {_ENTRY} AND j.type != 'null')", [key]
    if isinstance(value, bool):
        return f"{_ENTRY} AND j.type = ?)", [key, "true" if value else "false"]
    if isinstance(value, float) or (isinstance(value, int) and _INT64_MIN <= value <= INT64_MAX):
        return f"{_ENTRY} AND j.type IN ('integer', 'real') AND j.atom = ?)", [key, value]
    if isinstance(value, str) and "\x00" not in value:
        return f"{_ENTRY} AND j.type = 'text' AND j.atom = ?)", [key, value]
    return None


def _filter_sql(filters: Mapping[str, Any] | None) -> tuple[str, list[Any]]:
    """SQL for :func:`ctxwise.memory.store.matches` over ``items.metadata``.

    Top-level values are found by ``json_each`` (any key, no JSON path to escape)
    and compared by JSON type: ``true`` is not ``1``, a missing key matches
    ``None``. Lists, objects, integers past 64 bits and strings with NUL (which
    SQLite's JSON functions cut short) are compared in Python."""
    checked = check_filters(filters)
    if not checked:
        return "", []
    clauses: list[str] = []
    params: list[Any] = []
    for key, value in checked.items():
        exact = "ctxwise_metadata_equal(items.metadata, ?, ?)"
        exact_params = [key, json.dumps(value, ensure_ascii=False)]
        native = _native_filter(key, value)
        if native is None:
            clauses.append(exact)
            params.extend(exact_params)
        else:  # metadata holding a NUL anywhere (JSON text \u0000) is compared in Python
            clauses.append(
                f"(CASE WHEN instr(items.metadata, ?) THEN {exact} ELSE {native[0]} END)"
            )
            params.extend([_NUL_JSON, *exact_params, *native[1]])
    return " AND " + " AND ".join(clauses), params


def _dots(matrix: npt.NDArray[np.float32], q: Vector) -> npt.NDArray[np.float32]:
    """``matrix @ q`` in one thread. A matrix-vector product is memory-bound, and
    OpenBLAS's threads made it slower, not faster, on a busy 2-core machine."""
    return np.asarray(np.einsum("ij,j->i", matrix, q), dtype=np.float32)


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


class _Matrix:
    """A namespace's vectors in seq order, in a buffer that grows by doubling (so
    appending the rows of one write does not copy the namespace)."""

    def __init__(self) -> None:
        self.version: int | None = None  # PRAGMA data_version it was checked at
        self.upto = 0  # seqs below this are loaded
        self.n = 0
        self.rowids = np.zeros(0, dtype=np.int64)
        self.vectors = np.zeros((0, 0), dtype=np.float32)

    def fits(self, rows: Sequence[tuple[int, bytes]]) -> bool:
        """Whether ``rows`` have this matrix's dimension (always, when it is empty)."""
        dim = self.vectors.shape[1]
        return not self.n or all(len(blob) == 4 * dim for _, blob in rows)

    def append(self, rows: Sequence[tuple[int, bytes]]) -> None:
        if not rows:
            return
        dim = len(rows[0][1]) // 4
        need = self.n + len(rows)
        if need > len(self.rowids) or self.vectors.shape[1] != dim:
            cap = max(need, 2 * len(self.rowids))
            rowids = np.zeros(cap, dtype=np.int64)
            vectors = np.zeros((cap, dim), dtype=np.float32)
            rowids[: self.n] = self.rowids[: self.n]
            if self.n:
                vectors[: self.n] = self.vectors[: self.n]
            self.rowids, self.vectors = rowids, vectors
        self.rowids[self.n : need] = [r[0] for r in rows]
        self.vectors[self.n : need] = np.frombuffer(
            b"".join(r[1] for r in rows), dtype=np.float32
        ).reshape(len(rows), dim)
        self.n = need

    def view(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        if not self.n:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        return self.rowids[: self.n], self.vectors[: self.n]


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


class SQLiteStore(Store):
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

    def _migrate(self) -> None:
        c = self._conn
        c.execute(
            "CREATE TABLE IF NOT EXISTS migrations"
            " (position INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL)"
        )
        applied = dict(c.execute("SELECT position, name FROM migrations").fetchall())
        if applied and max(applied) > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: schema version {max(applied)} is newer than this ctxwise "
                f"knows ({SCHEMA_VERSION}); upgrade ctxwise to open it"
            )
        for position, (name, statements) in enumerate(MIGRATIONS, start=1):
            if applied.get(position) == name:
                continue
            if position in applied:
                raise StoreError(
                    f"{self.path}: migration {position} is {applied[position]!r}, expected {name!r}"
                )
            c.execute("BEGIN IMMEDIATE")
            try:
                if c.execute(
                    "SELECT 1 FROM migrations WHERE position = ?", (position,)
                ).fetchone():  # another process applied it meanwhile
                    c.execute("ROLLBACK")
                    continue
                for statement in statements:
                    if isinstance(statement, str):
                        c.execute(statement)
                    else:
                        statement(self, c)
                c.execute("INSERT INTO migrations (position, name) VALUES (?, ?)", (position, name))
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise

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
        with self._db() as c:
            return [r[0] for r in c.execute("SELECT name FROM migrations ORDER BY position")]

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
                first = c.execute("SELECT next_seq FROM counters WHERE ns = ?", (key,)).fetchone()
                seq = int(first[0])
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
            self._changed(key)
        return ids

    def _changed(self, key: str) -> None:
        """This connection wrote ``key``: its caches are checked again on next use."""
        matrix = self._matrices.get(key)
        if matrix is not None:
            matrix.version = None
        slot = self._indexes.get(key)
        if slot is not None:
            self._indexes[key] = (None, slot[1])

    def _stored_dim(self) -> int | None:
        found = self._conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
        return int(found[0]) if found else None

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

    def _by_rowid(self, key: str, rowids: Sequence[int]) -> dict[int, MemoryItem]:
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        return {
            r[0]: _row(r)
            for r in self._conn.execute(
                f"SELECT {_COLUMNS} FROM items WHERE rowid IN ({marks}) AND +ns = ?",
                (*rowids, key),
            )
        }

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
                plan = _Lexical(c, found[0], key, int(found[1]), where, params)
                scored = plan.run(terms, k)
                rows = self._by_rowid(key, [r for r, _ in scored])
            finally:
                c.execute("COMMIT")
        return [(rows[r], s) for r, s in scored if r in rows]

    def _matrix(self, key: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The namespace's vectors (and their rowids), in seq order.

        Kept in memory and caught up when the file changed: rows added since are
        appended (seqs are never reused), unless a row it holds was deleted (the
        trigger-kept vector count says so), which reloads it. A write between
        queries costs the new rows, not the namespace."""
        c = self._conn
        version = int(c.execute("PRAGMA data_version").fetchone()[0])
        cached = self._matrices.get(key)
        if cached is not None and cached.version == version:
            return cached.view()
        c.execute("BEGIN")  # one snapshot: counts and rows agree
        try:
            found = c.execute(
                "SELECT next_seq, n_vectors FROM counters WHERE ns = ?", (key,)
            ).fetchone()
            next_seq, n_vectors = (int(found[0]), int(found[1])) if found else (0, 0)
            if cached is not None and cached.upto <= next_seq:
                rows = c.execute(
                    "SELECT rowid, vector FROM items WHERE ns = ? AND seq >= ? AND seq < ?"
                    " AND vector IS NOT NULL ORDER BY seq",
                    (key, cached.upto, next_seq),
                ).fetchall()
                if cached.n + len(rows) != n_vectors or not cached.fits(rows):
                    cached = None
            if cached is None:
                rows = c.execute(
                    "SELECT rowid, vector FROM items WHERE ns = ? AND seq < ?"
                    " AND vector IS NOT NULL ORDER BY seq",
                    (key, next_seq),
                ).fetchall()
                cached = _Matrix()
            cached.append(rows)
        finally:
            c.execute("COMMIT")
        cached.version, cached.upto = version, next_seq
        self._matrices[key] = cached
        return cached.view()

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

    def _search_matrix(
        self, key: str, q: Vector, k: int, filters: Mapping[str, Any] | None
    ) -> list[tuple[MemoryItem, float]]:
        rowids, matrix = self._matrix(key)
        if not len(rowids):
            return []
        if matrix.shape[1] != q.shape[0]:
            raise UsageError(
                f"query vector has {q.shape[0]} dimensions, the store {matrix.shape[1]}"
            )
        sims = _dots(matrix, q)
        if filters:
            where, params = _filter_sql(filters)
            allowed = {
                r[0]
                for r in self._conn.execute(
                    f"SELECT rowid FROM items WHERE ns = ?{where}", (key, *params)
                )
            }
            mask = np.isin(rowids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
            sims = np.where(mask, sims, -np.inf)
        return self._best(key, rowids, sims, k, matrix, q)

    def _search_scan(
        self, key: str, q: Vector, k: int, filters: Mapping[str, Any] | None
    ) -> list[tuple[MemoryItem, float]]:
        """Exact search over the rows a filter allows (a namespace with an index)."""
        where, params = _filter_sql(filters)
        rows = self._conn.execute(
            f"SELECT rowid, vector FROM items WHERE ns = ? AND vector IS NOT NULL{where}",
            (key, *params),
        ).fetchall()
        if not rows:
            return []
        rowids = np.array([r[0] for r in rows], dtype=np.int64)
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
        matrix = matrix.reshape(len(rows), -1)
        return self._best(key, rowids, _dots(matrix, q), k, matrix, q)

    def _best(
        self,
        key: str,
        rowids: npt.NDArray[np.int64],
        sims: npt.NDArray[Any],
        k: int,
        matrix: npt.NDArray[np.float32],
        q: Vector,
    ) -> list[tuple[MemoryItem, float]]:
        """The best ``k`` rows by ``sims`` (float32; -inf: filtered out), rescored
        and ranked as every store ranks them (:func:`exact_dots`, :func:`rank_key`)."""
        take = min(k, len(rowids))
        kth = sims[np.argpartition(-sims, take - 1)[:take]].min()
        cand = np.flatnonzero((sims >= kth - DOT_SLACK) & np.isfinite(sims))
        if not len(cand):
            return []
        exact = exact_dots(matrix[cand], q)
        order = sorted(
            range(len(cand)), key=lambda i: rank_key(float(exact[i]), int(rowids[cand[i]]))
        )
        order = order[:take]
        chosen = [int(rowids[cand[i]]) for i in order]
        found = self._by_rowid(key, chosen)
        return [
            (found[r], float(exact[i])) for r, i in zip(chosen, order, strict=True) if r in found
        ]

    def _search_index(
        self, key: str, index: _ann.NamespaceIndex, q: Vector, k: int
    ) -> list[tuple[MemoryItem, float]]:
        seqs, _ = index.search(q, k)
        if not len(seqs):
            return []
        marks = ",".join("?" * len(seqs))
        rows = self._conn.execute(
            f"SELECT {_COLUMNS}, vector FROM items WHERE ns = ? AND seq IN ({marks})",
            (key, *[int(s) for s in seqs]),
        ).fetchall()
        if not rows:
            return []
        matrix = np.frombuffer(b"".join(r[7] for r in rows), dtype=np.float32)
        sims = exact_dots(matrix.reshape(len(rows), -1), q)  # as every store scores them
        order = sorted(range(len(rows)), key=lambda i: rank_key(float(sims[i]), rows[i][3]))
        return [(_row(rows[i]), float(sims[i])) for i in order]

    # the HNSW index -----------------------------------------------------------

    def _index(self, key: str) -> _ann.NamespaceIndex | None:
        """The namespace's HNSW index, caught up with the file; None = brute force."""
        if self.ann_min_items is None or not _ann.available():
            return None
        c = self._conn
        version = int(c.execute("PRAGMA data_version").fetchone()[0])
        slot = self._indexes.get(key)
        if slot is not None and slot[0] == version:
            return slot[1]
        c.execute("BEGIN")  # one snapshot: counts and rows agree
        try:
            found = c.execute(
                "SELECT next_seq, n_vectors FROM counters WHERE ns = ?", (key,)
            ).fetchone()
            dim = self._stored_dim()
            if found is None or dim is None or found[1] < self.ann_min_items:
                self._indexes.pop(key, None)
                return None
            next_seq, n_vectors = int(found[0]), int(found[1])
            index = slot[1] if slot is not None else self._load_index(key, dim)
            if index is None or index.dim != dim:
                index = self._build_index(key, dim, next_seq)
            else:
                self._add_rows(index, key, index.upto, next_seq)
                index.upto = next_seq
                excess = len(index) - n_vectors
                if excess < 0 or excess > n_vectors // 4:
                    index = self._build_index(key, dim, next_seq)
                elif excess:
                    live = np.array(
                        [
                            r[0]
                            for r in c.execute(
                                "SELECT seq FROM items WHERE ns = ? AND vector IS NOT NULL",
                                (key,),
                            )
                        ],
                        dtype=np.int64,
                    )
                    index.remove(np.setdiff1d(index.keys(), live))
            probe = self._probe(key, index) if self._should_save(index) else None
        finally:
            c.execute("COMMIT")
        if probe is not None and self.ann_dir is not None:
            index.save(self.ann_dir, self._index_name(key), key, probe)
        self._indexes[key] = (version, index)
        return index

    def _should_save(self, index: _ann.NamespaceIndex) -> bool:
        return self.ann_dir is not None and index.unsaved > ANN_SAVE_SHARE * len(index)

    @staticmethod
    def _index_name(key: str) -> str:
        return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]

    def _build_index(self, key: str, dim: int, upto: int) -> _ann.NamespaceIndex:
        index = _ann.NamespaceIndex(dim, self.ann_params)
        self._add_rows(index, key, 0, upto)
        index.upto = upto
        return index

    def _add_rows(self, index: _ann.NamespaceIndex, key: str, lo: int, hi: int) -> None:
        """Add the vectors of seqs ``lo`` to ``hi`` (exclusive), in seq order."""
        cur = self._conn.execute(
            "SELECT seq, vector FROM items WHERE ns = ? AND seq >= ? AND seq < ?"
            " AND vector IS NOT NULL ORDER BY seq",
            (key, lo, hi),
        )
        while rows := cur.fetchmany(_CHUNK):
            seqs = np.array([r[0] for r in rows], dtype=np.int64)
            vectors = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
            index.add(seqs, vectors.reshape(len(rows), index.dim))

    def _probe(self, key: str, index: _ann.NamespaceIndex) -> dict[int, str]:
        """SHA-256 of the vectors of the lowest and highest indexed seqs."""
        keys = index.keys()
        if not len(keys):
            return {}
        wanted = sorted({int(keys.min()), int(keys.max())})
        marks = ",".join("?" * len(wanted))
        return {
            int(r[0]): _ann.vector_digest(r[1])
            for r in self._conn.execute(
                f"SELECT seq, vector FROM items WHERE ns = ? AND seq IN ({marks})", (key, *wanted)
            )
        }

    def _load_index(self, key: str, dim: int) -> _ann.NamespaceIndex | None:
        """The saved index if it still describes this file's rows, else None."""
        if self.ann_dir is None:
            return None
        loaded = _ann.NamespaceIndex.load(
            self.ann_dir, self._index_name(key), key, dim, self.ann_params
        )
        if loaded is None:
            return None
        index, probe = loaded
        if not probe and len(index):
            return None
        if probe != self._probe_seqs(key, list(probe)):
            return None
        return index

    def _probe_seqs(self, key: str, seqs: list[int]) -> dict[int, str]:
        if not seqs:
            return {}
        marks = ",".join("?" * len(seqs))
        return {
            int(r[0]): _ann.vector_digest(r[1])
            for r in self._conn.execute(
                f"SELECT seq, vector FROM items WHERE ns = ? AND seq IN ({marks})"
                " AND vector IS NOT NULL",
                (key, *seqs),
            )
        }

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
