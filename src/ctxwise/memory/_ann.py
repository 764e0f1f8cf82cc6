"""An HNSW index over one namespace's vectors, for :class:`~ctxwise.memory.SQLiteStore`.

Built on ``usearch`` (extra ``ann``), imported on first use: without it the store
searches vectors by brute force and never calls this module.

Keys are the items' ``seq`` numbers, which the store never reuses within a namespace
(an item that is replaced gets a new one), so a key names one vector for ever. The
index knows the ``upto`` seq it has caught up with; everything newer is added from
SQLite, and the store removes keys whose rows are gone. SQLite stays the source of
truth: the index is a cache that can always be rebuilt from it.

Determinism: vectors are added one thread at a time, in ``seq`` order, so the same
store built the same way gives the same index, byte for byte.

Parameters: half-precision storage, connectivity 16, expansion 64 when adding (one
thread); when searching, expansion 256, or one per 1,000 vectors up to 1,024: a
larger index needs the larger expansion to keep finding most of the exact top 10.
They were chosen on synthetic support sentences with ``benchmarks/bench_memory.py``,
which measures build time, search time and the share of the exact top 10 found.

On disk (beside the SQLite file, ``<file>.ann/``): ``<h>.usearch`` (the index) and
``<h>.json`` (namespace, dimension, build parameters, ``upto``, size, the SHA-256 of the
index file and of a few indexed vectors). Both are written to a temporary name and
renamed into place; a pair whose hashes disagree is ignored and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxwise._io import replace_file
from ctxwise.errors import MissingDependencyError

__all__ = ["AnnParams", "NamespaceIndex", "available"]

FORMAT = 1


def _usearch() -> Any:
    try:
        from usearch.index import Index
    except ImportError:  # pragma: no cover - exercised without the extra
        raise MissingDependencyError("usearch", "ann", "the HNSW vector index") from None
    return Index


def available() -> bool:
    """Whether ``usearch`` (extra ``ann``) can be imported."""
    try:
        _usearch()
    except MissingDependencyError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class AnnParams:
    """HNSW build and search parameters (see the module docstring for their figures)."""

    connectivity: int = 16
    expansion_add: int = 64
    expansion_search: int = 256
    """The least search expansion; it grows with the index (one per 1,000 vectors)
    up to ``expansion_cap``, and is never below the number of results asked for."""
    expansion_cap: int = 1024
    dtype: str = "f16"


class NamespaceIndex:
    """One namespace's vectors in a usearch HNSW index (inner product on unit vectors)."""

    def __init__(self, dim: int, params: AnnParams, index: Any = None, upto: int = 0) -> None:
        self.dim = dim
        self.params = params
        self.index = index if index is not None else self._new()
        self.index.expansion_search = params.expansion_search
        self.upto = upto
        """Every live vector with a smaller seq is in the index."""
        self.unsaved = 0
        """Vectors added or removed since the last save (or load)."""

    def _new(self) -> Any:
        return _usearch()(
            ndim=self.dim,
            metric="ip",
            dtype=self.params.dtype,
            connectivity=self.params.connectivity,
            expansion_add=self.params.expansion_add,
            expansion_search=self.params.expansion_search,
        )

    def __len__(self) -> int:
        return len(self.index)

    def add(self, seqs: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        if len(seqs):
            self.index.add(seqs.astype(np.uint64), vectors, threads=1)
            self.unsaved += len(seqs)

    def remove(self, seqs: npt.NDArray[np.int64]) -> None:
        if len(seqs):
            self.index.remove(seqs.astype(np.uint64))
            self.unsaved += len(seqs)

    def keys(self) -> npt.NDArray[np.int64]:
        return np.asarray(self.index.keys, dtype=np.uint64).astype(np.int64)

    def search(
        self, query: npt.NDArray[np.float32], count: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Approximate best ``count`` seqs and their inner products, best first."""
        if not len(self.index):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        per_size = min(self.params.expansion_cap, len(self.index) // 1000)
        self.index.expansion_search = max(self.params.expansion_search, per_size, count)
        found = self.index.search(query, count, threads=1)
        seqs = np.asarray(found.keys, dtype=np.uint64).astype(np.int64)
        return seqs, (1.0 - np.asarray(found.distances, dtype=np.float32))

    # persistence ------------------------------------------------------------------

    def save(self, directory: Path, name: str, namespace: str, probe: dict[int, str]) -> None:
        """Write the index and its description atomically (temporary name, then rename).

        ``probe`` maps a few indexed seqs to the SHA-256 of their vector bytes, so a
        later load can tell that the file still belongs to this store.
        """
        directory.mkdir(parents=True, exist_ok=True)
        blob = bytes(self.index.save())
        meta = {
            "format": FORMAT,
            "namespace": namespace,
            "dim": self.dim,
            "build": _build_params(self.params),
            "upto": self.upto,
            "size": len(self.index),
            "sha256": hashlib.sha256(blob).hexdigest(),
            "probe": {str(k): v for k, v in probe.items()},
        }
        replace_file(directory / f"{name}.usearch", blob)
        replace_file(directory / f"{name}.json", json.dumps(meta).encode())
        self.unsaved = 0

    @classmethod
    def load(
        cls, directory: Path, name: str, namespace: str, dim: int, params: AnnParams
    ) -> tuple[NamespaceIndex, dict[int, str]] | None:
        """The saved index and its probe, or None if absent, foreign or inconsistent."""
        try:
            meta = json.loads((directory / f"{name}.json").read_text())
            blob = (directory / f"{name}.usearch").read_bytes()
        except (OSError, ValueError):
            return None
        if (
            not isinstance(meta, dict)
            or meta.get("format") != FORMAT
            or meta.get("namespace") != namespace
            or meta.get("dim") != dim
            or meta.get("build") != _build_params(params)
            or meta.get("sha256") != hashlib.sha256(blob).hexdigest()
        ):
            return None
        try:
            index = _usearch().restore(blob)
        except (RuntimeError, ValueError):  # pragma: no cover - hashes matched
            return None
        if index is None or len(index) != meta.get("size") or index.ndim != dim:
            return None
        probe = {int(k): str(v) for k, v in dict(meta.get("probe", {})).items()}
        return cls(dim, params, index, int(meta["upto"])), probe


def _build_params(params: AnnParams) -> dict[str, Any]:
    """What shapes the saved graph (the search expansion does not)."""
    found = asdict(params)
    del found["expansion_search"], found["expansion_cap"]
    return found


def vector_digest(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()
