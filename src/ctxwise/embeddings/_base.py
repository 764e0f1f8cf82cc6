"""The :class:`Embedder` protocol, and what every adapter shares: normalising rows,
a model folder's fingerprint, thread counts."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ctxwise.errors import UsageError

Vectors = npt.NDArray[np.float32]

MAX_AUTO_THREADS = 4
"""The most threads ``threads = 0`` (auto) gives an encoder."""


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised float32 vectors of a fixed dimension."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors: ...


def normalized(rows: npt.ArrayLike, dim: int, source: str) -> Vectors:
    """``rows`` as an L2-normalised float32 matrix of width ``dim`` (a zero row stays
    zero). :class:`UsageError` naming ``source`` when the width is another or a value
    is not finite."""
    out = np.array(rows, dtype=np.float32)
    if out.ndim != 2 or out.shape[1] != dim:
        raise UsageError(f"{source} gave vectors of shape {out.shape}, not (n, {dim})")
    if not np.isfinite(out).all():
        raise UsageError(f"{source} gave a vector holding NaN or infinity")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def auto_threads() -> int:
    """Half the CPUs this process may run on, at least 1 and at most
    :data:`MAX_AUTO_THREADS`: an encoder at every core of a small shared machine
    waits on the others (MiniLM's single query slowed many times over on a loaded
    2-core machine), and a single query gains little from more than a few."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_AUTO_THREADS, cpus // 2))


def resolve_threads(threads: int | None) -> int | None:
    """``threads`` as a count: None leaves the library's own default, 0 is
    :func:`auto_threads`."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise UsageError(f"threads must be a whole number of at least 0, got {threads!r}")
    return threads or auto_threads()


def model_dir(path: str | Path, what: str) -> Path:
    """``path`` when it is a folder; :class:`UsageError` naming ``what`` otherwise (a
    model is only ever read from disk: nothing downloads one)."""
    folder = Path(path)
    if not str(path) or not folder.is_dir():
        raise UsageError(f"model path {folder} is not a directory holding a {what} model")
    return folder


def folder_digest(folder: Path) -> str:
    """A digest of a model folder: every file's relative path and size, and the bytes
    of its small JSON and text files, so a changed model gives another digest."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        size = path.stat().st_size
        digest.update(f"{rel}\x00{size}\x00".encode("utf-8", "surrogatepass"))
        if path.suffix in (".json", ".txt") and size <= 1 << 20:
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
