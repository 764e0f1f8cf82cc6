"""The search core every lexical ranking in ctxwise shares.

- :mod:`ctxwise.search.bm25`: the BM25 formula (:func:`bm25_idf`, :func:`bm25_term`)
  every store scores by, and :class:`BM25Index`, the one incremental in-process
  index (the in-memory store, tool search and handoff scoring rank with it);
- :mod:`ctxwise.search.fusion`: weighted reciprocal rank fusion.

Terms come from :mod:`ctxwise.text`'s analyzer (identifier splitting is its
``identifiers`` option).
"""

from __future__ import annotations

from ctxwise.search.bm25 import BM25_B, BM25_K1, BM25Index, bm25_idf, bm25_term
from ctxwise.search.fusion import reciprocal_rank_fusion

__all__ = [
    "BM25_B",
    "BM25_K1",
    "BM25Index",
    "bm25_idf",
    "bm25_term",
    "reciprocal_rank_fusion",
]
