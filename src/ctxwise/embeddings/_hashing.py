"""The offline default: feature hashing of the analyzer's words."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import pairwise

import numpy as np

from ctxwise.embeddings._base import Vectors
from ctxwise.errors import UsageError
from ctxwise.text import words


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
        terms = words(text)
        if self.bigrams:
            return terms + [f"{a} {b}" for a, b in pairwise(terms)]
        return terms

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
