"""The embedded default store: one SQLite file.

- WAL journal, so readers never block the writer and a killed process leaves
  every committed transaction intact;
- FTS5 (``unicode61`` tokenizer, BM25 ranking) for lexical search;
- vectors as float32 blobs, searched by brute force with numpy from a per-namespace
  matrix cached in memory and refreshed when the file changes (``PRAGMA
  data_version`` catches other processes' writes);
- migrations ordered, named, idempotent and recorded in a ``migrations`` table; a
  file whose schema is newer than this code is refused, untouched.

This Python cannot load SQLite extensions (no ``enable_load_extension``), so
sqlite-vec is not used.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxwise.errors import UsageError
from ctxwise.memory.store import (
    MemoryItem,
    Namespace,
    NewItem,
    Store,
    StoreError,
    Vector,
    check_k,
    check_namespace,
    check_text,
    fts_tokens,
)

__all__ = ["SCHEMA_VERSION", "SQLiteStore"]

# (name, statements): append only; never edit a migration that has shipped.
MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
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
)
SCHEMA_VERSION = len(MIGRATIONS)
# A query term in more than this share of all rows (and more than MIN_COMMON rows)
# is left out of the lexical query: it adds almost nothing to BM25 (its idf is
# near zero) and makes FTS5 score most of the table.
COMMON_SHARE = 0.05
MIN_COMMON = 2000

_COLUMNS = "rowid, ns, id, seq, text, metadata, created_at"


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


def _filter_sql(filters: Mapping[str, Any] | None) -> tuple[str, list[Any]]:
    if not filters:
        return "", []
    clauses: list[str] = []
    params: list[Any] = []
    for key, value in filters.items():
        if not isinstance(key, str) or not isinstance(value, str | int | float | bool | None):
            raise UsageError(f"filter {key!r}: only scalar values can be matched")
        path = "$." + json.dumps(key)
        if value is None:
            clauses.append("json_type(items.metadata, ?) = 'null'")
            params.append(path)
        else:
            clauses.append("json_extract(items.metadata, ?) = ?")
            params.extend([path, int(value) if isinstance(value, bool) else value])
    return " AND " + " AND ".join(clauses), params


class SQLiteStore(Store):
    """A store in one SQLite file (``":memory:"`` for a private in-memory database)."""

    def __init__(self, path: str | Path, *, timeout: float = 30.0) -> None:
        self.path = str(path)
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=timeout, check_same_thread=False, isolation_level=None
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a usable SQLite store ({exc})") from None
        self._lock = threading.RLock()
        self._matrices: dict[str, tuple[int, npt.NDArray[np.int64], npt.NDArray[np.float32]]] = {}

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
                for statement in statements:
                    c.execute(statement)
                c.execute("INSERT INTO migrations (position, name) VALUES (?, ?)", (position, name))
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise

    @property
    def migrations(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT name FROM migrations ORDER BY position")]

    # writes -------------------------------------------------------------------

    def put_many(self, namespace: Sequence[str], items: Sequence[NewItem]) -> list[str]:
        ns = check_namespace(namespace)
        key = _key(ns)
        rows = []
        for item in items:
            check_text(item.text)
            try:
                meta = json.dumps(dict(item.metadata), ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise UsageError(f"metadata must be JSON-serialisable: {exc}") from None
            blob = None
            if item.vector is not None:
                vec = np.asarray(item.vector, dtype=np.float32)
                if vec.ndim != 1:
                    raise UsageError("a vector must be one-dimensional")
                blob = vec.tobytes()
            rows.append((item, meta, blob))
        if not rows:
            return []
        with self._lock:
            c = self._conn
            c.execute("BEGIN IMMEDIATE")
            try:
                self._check_dim(rows)
                found = c.execute("SELECT next_seq FROM counters WHERE ns = ?", (key,)).fetchone()
                seq = found[0] if found else 0
                ids = []
                for item, meta, blob in rows:
                    item_id = item.id if item.id is not None else f"m{seq}"
                    c.execute("DELETE FROM items WHERE ns = ? AND id = ?", (key, item_id))
                    indexed = item.index_text if item.index_text is not None else item.text
                    c.execute(
                        "INSERT INTO items (ns, id, seq, text, index_text, metadata, created_at,"
                        " vector) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (key, item_id, seq, item.text, indexed, meta, item.created_at, blob),
                    )
                    ids.append(item_id)
                    seq += 1
                c.execute(
                    "INSERT INTO counters (ns, next_seq) VALUES (?, ?) "
                    "ON CONFLICT (ns) DO UPDATE SET next_seq = excluded.next_seq",
                    (key, seq),
                )
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
            self._matrices.pop(key, None)
        return ids

    def _check_dim(self, rows: Sequence[tuple[NewItem, str, bytes | None]]) -> None:
        dims = {len(blob) // 4 for _, _, blob in rows if blob is not None}
        if not dims:
            return
        found = self._conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
        known = {int(found[0])} if found else set()
        if len(dims | known) > 1:
            raise UsageError(f"vector dimension mismatch: store holds {known or dims}, got {dims}")
        if not found:
            self._conn.execute(
                "INSERT INTO meta (key, value) VALUES ('dim', ?)", (str(dims.pop()),)
            )

    def delete(self, namespace: Sequence[str], ids: Sequence[str]) -> int:
        key = _key(check_namespace(namespace))
        with self._lock:
            c = self._conn
            c.execute("BEGIN IMMEDIATE")
            try:
                n = sum(
                    c.execute("DELETE FROM items WHERE ns = ? AND id = ?", (key, i)).rowcount
                    for i in ids
                )
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
            self._matrices.pop(key, None)
        return n

    # reads --------------------------------------------------------------------

    def get_many(self, namespace: Sequence[str], ids: Sequence[str]) -> list[MemoryItem]:
        key = _key(check_namespace(namespace))
        if not ids:
            return []
        with self._lock:
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
        check_k(k)
        terms = sorted(set(fts_tokens(query)))
        if not terms:
            return []
        with self._lock:
            terms = self._selective(terms)
        if not terms:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        where, params = _filter_sql(filters)
        sql = (
            f"SELECT {', '.join('items.' + c for c in _COLUMNS.split(', '))}, bm25(items_fts) "
            "FROM items_fts JOIN items ON items.rowid = items_fts.rowid "
            f"WHERE items_fts MATCH ? AND items.ns = ?{where} "
            "ORDER BY bm25(items_fts), items.seq LIMIT ?"
        )
        with self._lock:
            rows = self._conn.execute(sql, (match, key, *params, k)).fetchall()
        return [(_row(r), -float(r[7])) for r in rows]

    def _selective(self, terms: list[str]) -> list[str]:
        """Drop terms common enough to be near-stopwords (keep at least the two rarest).

        A term's frequency is counted by FTS5 itself (so with its own stemming),
        stopping at the limit, which bounds the cost of the check.
        """
        total = self._conn.execute("SELECT max(rowid) FROM items").fetchone()[0] or 0
        limit = max(MIN_COMMON, int(total * COMMON_SHARE))
        if total <= limit:
            return terms
        df = {}
        for t in terms:
            df[t] = self._conn.execute(
                "SELECT count(*) FROM"
                " (SELECT rowid FROM items_fts WHERE items_fts MATCH ? LIMIT ?)",
                ('"' + t.replace('"', '""') + '"', limit + 1),
            ).fetchone()[0]
        present = [t for t in terms if df[t] > 0]  # absent terms cannot match
        kept = [t for t in present if df[t] <= limit]
        if len(kept) < 2:
            kept = sorted(present, key=lambda t: df[t])[:2]
        return sorted(kept)

    def _matrix(self, key: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        version = self._conn.execute("PRAGMA data_version").fetchone()[0]
        cached = self._matrices.get(key)
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        rows = self._conn.execute(
            "SELECT rowid, vector FROM items WHERE ns = ? AND vector IS NOT NULL ORDER BY seq",
            (key,),
        ).fetchall()
        rowids = np.array([r[0] for r in rows], dtype=np.int64)
        if rows:
            matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(
                len(rows), -1
            )
        else:
            matrix = np.zeros((0, 0), dtype=np.float32)
        self._matrices[key] = (version, rowids, matrix)
        return rowids, matrix

    def vector_search(
        self,
        namespace: Sequence[str],
        vector: Vector,
        k: int,
        filters: Mapping[str, Any] | None = None,
    ) -> list[tuple[MemoryItem, float]]:
        key = _key(check_namespace(namespace))
        check_k(k)
        q = np.asarray(vector, dtype=np.float32)
        with self._lock:
            rowids, matrix = self._matrix(key)
            if not len(rowids):
                return []
            if matrix.shape[1] != q.shape[0]:
                raise UsageError(
                    f"query vector has {q.shape[0]} dimensions, the store {matrix.shape[1]}"
                )
            sims = matrix @ q
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
            take = min(k, len(rowids))
            part = np.argpartition(-sims, take - 1)[:take]
            part = part[np.argsort(-sims[part], kind="stable")]
            top = [int(i) for i in part if np.isfinite(sims[i])]
            if not top:
                return []
            chosen = [int(rowids[i]) for i in top]
            marks = ",".join("?" * len(chosen))
            found = {
                r[0]: _row(r)
                for r in self._conn.execute(
                    f"SELECT {_COLUMNS} FROM items WHERE rowid IN ({marks})", chosen
                )
            }
        return [(found[r], float(sims[i])) for r, i in zip(chosen, top, strict=True) if r in found]

    def by_seq(self, namespace: Sequence[str], seqs: Sequence[int]) -> list[MemoryItem]:
        key = _key(check_namespace(namespace))
        if not seqs:
            return []
        marks = ",".join("?" * len(seqs))
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM items WHERE ns = ? AND seq IN ({marks}) ORDER BY seq",
                (key, *[int(s) for s in seqs]),
            ).fetchall()
        return [_row(r) for r in rows]

    def namespaces(self) -> list[Namespace]:
        with self._lock:
            keys = [r[0] for r in self._conn.execute("SELECT DISTINCT ns FROM items ORDER BY ns")]
        return [tuple(k.split("/")) for k in keys]

    def count(self, namespace: Sequence[str]) -> int:
        key = _key(check_namespace(namespace))
        with self._lock:
            return int(
                self._conn.execute("SELECT count(*) FROM items WHERE ns = ?", (key,)).fetchone()[0]
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            self._matrices.clear()
