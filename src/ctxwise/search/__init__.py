"""The search core every lexical ranking in ctxwise shares.

- :mod:`ctxwise.search.bm25`: the BM25 formula (:func:`bm25_idf`, :func:`bm25_term`)
  every store scores by, and :class:`BM25Index`, the one incremental in-process
  index (the in-memory store, tool search and handoff scoring rank with it);
- :mod:`ctxwise.search.sparse`: :class:`SparseIndex`, postings of weighted term
  vectors and their dot products (routing's bag-of-words scorer and the relay's
  example scorer rank by cosine over it);
- :mod:`ctxwise.search.fusion`: weighted reciprocal rank fusion;
- :func:`bounded_search`: the bounded lexical pass every store's lexical search
  runs over its own full-text engine (at most :data:`LEXICAL_CAP` rows scored a
  step; :class:`LexicalRows` is what a store gives it).

Terms come from :mod:`ctxwise.text`'s analyzer (identifier splitting is its
``identifiers`` option).
"""

from __future__ import annotations

from ctxwise.search._bounded import (
    LEXICAL_CAP,
    STOP_SHARE,
    STOP_WINDOW,
    LexicalRows,
    Selection,
    bounded_search,
)
from ctxwise.search.bm25 import (
    BM25_B,
    BM25_K1,
    SCORE_DIGITS,
    BM25Index,
    bm25_idf,
    bm25_term,
    rank_candidates,
    rank_key,
)
from ctxwise.search.fusion import reciprocal_rank_fusion
from ctxwise.search.sparse import SparseIndex

__all__ = [
    "BM25_B",
    "BM25_K1",
    "LEXICAL_CAP",
    "SCORE_DIGITS",
    "STOP_SHARE",
    "STOP_WINDOW",
    "BM25Index",
    "LexicalRows",
    "Selection",
    "SparseIndex",
    "bm25_idf",
    "bm25_term",
    "bounded_search",
    "rank_candidates",
    "rank_key",
    "reciprocal_rank_fusion",
]
