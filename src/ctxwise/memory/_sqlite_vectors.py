"""The SQLite store's vector search: an in-memory matrix per namespace searched
exactly, or an HNSW index (:mod:`ctxwise.memory._ann`) for big namespaces."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ctxwise.errors import UsageError
from ctxwise.memory import _ann
from ctxwise.memory._sqlite_rows import _COLUMNS, _by_rowid, _filter_sql, _row
from ctxwise.memory.store import DOT_SLACK, MemoryItem, Vector, exact_dots, rank_key

ANN_SAVE_SHARE = 0.1
"""The index is saved again once this share of it changed (and on close)."""
_CHUNK = 50_000


@dataclass(frozen=True, slots=True)
class VectorIndexInfo:
    """How a namespace's vectors are searched, and why."""

    method: Literal["exact", "hnsw"]
    vectors: int
    reason: str


def _dots(matrix: npt.NDArray[np.float32], q: Vector) -> npt.NDArray[np.float32]:
    """``matrix @ q`` in one thread. A matrix-vector product is memory-bound, and
    OpenBLAS's threads made it slower, not faster, on a busy 2-core machine."""
    return np.asarray(np.einsum("ij,j->i", matrix, q), dtype=np.float32)


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


class SQLiteVectors:
    """The vector-search half of ``SQLiteStore`` (a mixin): the per-namespace
    matrices and HNSW indexes, caught up with the file."""

    _conn: sqlite3.Connection
    _matrices: dict[str, _Matrix]
    # namespace -> (data_version it was checked at, or None after own writes; index)
    _indexes: dict[str, tuple[int | None, _ann.NamespaceIndex]]
    ann_min_items: int | None
    ann_params: _ann.AnnParams
    ann_dir: Path | None

    def _stored_dim(self) -> int | None:
        found = self._conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
        return int(found[0]) if found else None

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
        found = _by_rowid(self._conn, key, chosen)
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
