"""A small in-process BM25 index over the analyzer's terms (the stores' formula)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ctxwise.memory.store import bm25_idf, bm25_term
from ctxwise.text import Analyzer

__all__ = ["BM25Index"]


class BM25Index:
    """BM25 (:func:`ctxwise.memory.store.bm25_term`) over ``texts``, indexed with
    ``analyzer``'s terms; :meth:`scores` gives one score per text."""

    def __init__(self, texts: Sequence[str], analyzer: Analyzer) -> None:
        self.analyzer = analyzer
        self.postings: dict[str, list[tuple[int, int]]] = {}
        self.lengths = np.zeros(len(texts))
        for i, text in enumerate(texts):
            terms = analyzer.words(text)
            self.lengths[i] = len(terms)
            counts: dict[str, int] = {}
            for term in terms:
                counts[term] = counts.get(term, 0) + 1
            for term, c in counts.items():
                self.postings.setdefault(term, []).append((i, c))
        n = max(len(texts), 1)
        self.idf = {t: bm25_idf(n, len(p)) for t, p in self.postings.items()}
        mean = float(self.lengths.mean()) if len(texts) else 0.0
        self.avgdl = mean if mean > 0 else 1.0

    def scores(self, terms: Sequence[str]) -> npt.NDArray[np.float64]:
        """Each text's BM25 score for ``terms`` (query terms: distinct, no stopwords)."""
        out = np.zeros(len(self.lengths))
        for term in terms:
            for i, tf in self.postings.get(term, ()):
                out[i] += bm25_term(self.idf[term], tf, float(self.lengths[i]), self.avgdl)
        return out

    def query(self, query: str) -> npt.NDArray[np.float64]:
        """Each text's score for ``query`` (its :meth:`Analyzer.query_terms`)."""
        return self.scores(self.analyzer.query_terms(query))
