"""A persistent embedding cache: each text's vector kept in a SQLite file, keyed by
the model and the text, so a second run over the same texts does not encode them
again.

:class:`CachedEmbedder` wraps any :class:`~ctxwise.embeddings.Embedder`. A vector
is stored as the float32 bytes the model gave and read back bit for bit, so a
cached run gives the very figures the run that filled the cache gave, whatever
the order or batches its texts come in (an encoder's float noise depends on the
batch a text is padded with; a cached vector does not).

The key of a model is its :func:`model_key`: the embedder's ``fingerprint`` when it
has one (:class:`~ctxwise.embeddings.SentenceTransformerEmbedder`: a digest of
its model folder's file names and sizes and of its small config files, so a
changed model is a new key), else its ``name`` and ``dim``. The key of a text is
the SHA-256 of its UTF-8 bytes: the file holds no text.

The default file is ``embeddings.sqlite`` in :func:`default_cache_dir`; the CLI's
``eval`` commands use it unless given ``--no-embedding-cache``.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

import numpy as np

from ctxwise._sqlite import use_wal
from ctxwise.embeddings._base import Embedder, Vectors
from ctxwise.errors import OutputError, UsageError

__all__ = [
    "CachedEmbedder",
    "bypassing",
    "default_cache_dir",
    "default_cache_path",
    "model_key",
]

_TIMEOUT = 30.0
_BATCH = 500  # keys per SELECT: below SQLite's default limit of bound parameters


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$CTXWISE_CACHE_DIR``, else ``$XDG_CACHE_HOME/ctxwise``, else
    ``~/.cache/ctxwise``."""
    env = os.environ if environ is None else environ
    if env.get("CTXWISE_CACHE_DIR"):
        return Path(env["CTXWISE_CACHE_DIR"])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "ctxwise"
    return Path.home() / ".cache" / "ctxwise"


def default_cache_path(environ: Mapping[str, str] | None = None) -> Path:
    """The default cache file: ``embeddings.sqlite`` in :func:`default_cache_dir`."""
    return default_cache_dir(environ) / "embeddings.sqlite"


def model_key(embedder: Embedder) -> str:
    """What names ``embedder``'s vectors in the cache: its ``fingerprint`` when it
    has one, else ``name:dim``."""
    fingerprint = getattr(embedder, "fingerprint", None)
    if isinstance(fingerprint, str) and fingerprint:
        return fingerprint
    return f"{embedder.name}:{embedder.dim}"


def _text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class CachedEmbedder:
    """``inner``, with every vector it gives kept in the SQLite file ``path`` (made,
    with its folder, when missing) and read from there the next time the same model
    embeds the same text. ``name`` and ``dim`` are ``inner``'s, so presets and
    stores see the model, not the cache. ``hits`` and ``misses`` count the texts
    read from the file and the texts ``inner`` embedded; while ``bypass`` is set
    (:func:`bypassing`), every text goes to ``inner`` and nothing is read or kept.

    Raises:
        OutputError: the file cannot be opened or made, or is not a cache.
    """

    def __init__(self, inner: Embedder, path: str | Path) -> None:
        if not isinstance(inner, Embedder):
            raise UsageError(f"CachedEmbedder wraps an Embedder, got {type(inner).__name__}")
        self.inner = inner
        self.path = Path(path)
        self.model = model_key(inner)
        self.hits = 0
        self.misses = 0
        self.bypass = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=_TIMEOUT, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise OutputError(str(self.path), f"cannot open the embedding cache ({exc})") from None
        try:
            use_wal(self._conn, _TIMEOUT)
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, text_key BLOB NOT NULL,"
                " vector BLOB NOT NULL, PRIMARY KEY (model, text_key)) WITHOUT ROWID"
            )
        except sqlite3.Error as exc:
            self._conn.close()
            raise OutputError(
                str(self.path), f"is not an embedding cache, or is locked ({exc})"
            ) from None

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def _read(self, keys: Sequence[bytes]) -> dict[bytes, Vectors]:
        found: dict[bytes, Vectors] = {}
        width = self.dim * 4
        for lo in range(0, len(keys), _BATCH):
            part = keys[lo : lo + _BATCH]
            rows = self._conn.execute(
                "SELECT text_key, vector FROM vectors WHERE model = ? AND text_key IN"
                f" ({', '.join('?' * len(part))})",
                (self.model, *part),
            ).fetchall()
            for key, blob in rows:
                if len(blob) == width:  # another width: stale, embedded again below
                    found[bytes(key)] = np.frombuffer(blob, dtype=np.float32)
        return found

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.bypass:
            return self.inner.embed(texts)
        keys = {text: _text_key(text) for text in dict.fromkeys(texts)}
        found = self._read(list(keys.values()))
        missing = [text for text, key in keys.items() if key not in found]
        if missing:
            fresh = np.asarray(self.inner.embed(missing), dtype=np.float32)
            rows = [(self.model, keys[t], fresh[i].tobytes()) for i, t in enumerate(missing)]
            with self._conn:  # one transaction: a killed run leaves whole rows only
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.executemany(
                    "INSERT OR REPLACE INTO vectors (model, text_key, vector) VALUES (?, ?, ?)",
                    rows,
                )
            for i, text in enumerate(missing):
                found[keys[text]] = fresh[i]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        return np.stack([found[keys[t]] for t in texts]).astype(np.float32, copy=False)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> CachedEmbedder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, {str(self.path)!r})"


@contextmanager
def bypassing(embedder: object) -> Iterator[None]:
    """While the block runs, ``embedder`` (when it is a :class:`CachedEmbedder`)
    embeds with its model alone, as when a latency is timed; anything else is left
    as it is."""
    if not isinstance(embedder, CachedEmbedder):
        yield
        return
    before = embedder.bypass
    embedder.bypass = True
    try:
        yield
    finally:
        embedder.bypass = before
