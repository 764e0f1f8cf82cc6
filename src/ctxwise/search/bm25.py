"""BM25: the formula every store scores by, and one incremental in-process index.

The formula is SQLite FTS5's (k1 1.2, b 0.75; idf ``ln((N - df + 0.5) / (df + 0.5))``,
1e-6 where that is not positive), so the in-memory store, SQLite's FTS5 and the
PostgreSQL store's SQL compute the same scores. :class:`BM25Index` is the index code
that ranks in process uses (the in-memory store, tool search, handoff scoring):
documents are added (and removed) over time, and a query reads only the postings
of its terms.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from ctxwise.text import DEFAULT_ANALYZER, Analyzer

__all__ = [
    "BM25_B",
    "BM25_K1",
    "SCORE_DIGITS",
    "BM25Index",
    "bm25_idf",
    "bm25_term",
    "rank_candidates",
    "rank_key",
]

BM25_K1 = 1.2
BM25_B = 0.75

SCORE_DIGITS = 9
"""Scores are ranked to 9 significant digits, then by ``seq``: every store computes
the same score with its own float arithmetic (numpy, SQLite's FTS5, PostgreSQL's
float8), so two scores equal in exact arithmetic may differ in their last bits,
and a tie would be broken by that noise, differently on each store. This makes the
stores agree; it does not make every exact tie a tie: a vector score is computed in
float64 from unit vectors stored in float32, whose rounding (about one part in
2**24) differs from vector to vector, so two cosines equal in exact arithmetic can
still differ in their ninth digit and be ranked by it, alike on every store."""


def rank_key(score: float, seq: int) -> tuple[float, int]:
    """The sort key of a hit, best first: its score to :data:`SCORE_DIGITS`
    significant digits, descending, then its ``seq``, ascending."""
    return (-float(f"{score:.{SCORE_DIGITS}g}"), seq)


_RANK_MARGIN = 1e-7
"""Relative: ten times the widest step of a score rounded to :data:`SCORE_DIGITS`
significant digits, so a score this far below another rounds below it."""


def rank_candidates(scores: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.intp]:
    """The positions of the ``scores`` that can be among the best ``k`` by
    :func:`rank_key`, whatever their seqs: every score not below the k-th largest
    by more than a margin wider than :func:`rank_key`'s rounding (the rest round
    strictly below at least ``k`` others). Ranking only these by :func:`rank_key`
    and cutting at ``k`` gives the same hits, in the same order, as ranking all of
    them, without sorting every score; ascending positions."""
    n = len(scores)
    if k >= n:
        return np.arange(n)
    kth = float(np.partition(scores, n - k)[n - k])
    return np.flatnonzero(scores >= kth - abs(kth) * _RANK_MARGIN)


def bm25_idf(n_items: float, df: float) -> float:
    """BM25's idf as every store computes it (SQLite FTS5's formula):
    ``ln((N - df + 0.5) / (df + 0.5))``, and 1e-6 where that is not positive (a
    term in at least half of the items)."""
    value = math.log((n_items - df + 0.5) / (df + 0.5))
    return value if value > 0 else 1e-6


def bm25_term(idf: float, tf: float, length: float, avgdl: float) -> float:
    """One term's BM25 contribution (k1 1.2, b 0.75; the collection's statistics)."""
    return idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * length / avgdl))


class BM25Index:
    """BM25 (:func:`bm25_term`) over ``analyzer``'s terms, documents added over time.

    :meth:`add` indexes a text and returns its document number (0, 1, 2, ... in the
    order added, never reused); :meth:`remove` takes a document out. The collection
    statistics (document count, average length, document frequencies) are those of
    the documents in the index at query time. :meth:`score_terms` sums each matching
    document's terms in the order given, so the scores are the same to the bit as a
    scan of every document adding its terms in that order.
    """

    def __init__(self, analyzer: Analyzer = DEFAULT_ANALYZER, texts: Iterable[str] = ()) -> None:
        self.analyzer = analyzer
        self._postings: dict[str, dict[int, int]] = {}
        self._counts: list[Counter[str] | None] = []  # per document; None: removed
        self._lengths: list[int] = []
        self._live = 0
        self._total = 0
        # per term: its postings as arrays (documents, counts), made when a query
        # reads the term and dropped when a document holding it comes or goes
        self._arrays: dict[str, tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]] = {}
        self._length_array = np.zeros(0, dtype=np.float64)  # of documents 0..n-1
        for text in texts:
            self.add(text)

    def __len__(self) -> int:
        """Documents in the index (removed ones left out)."""
        return self._live

    @property
    def size(self) -> int:
        """Document numbers handed out so far (the length of :meth:`scores`)."""
        return len(self._lengths)

    def add(self, text: str) -> int:
        """Index ``text`` (its :meth:`Analyzer.words`); its document number."""
        return self.add_terms(self.analyzer.words(text))

    def add_terms(self, terms: Sequence[str]) -> int:
        """Index a document of these terms (already analyzed); its document number."""
        doc = len(self._lengths)
        counts = Counter(terms)
        postings = self._postings
        arrays = self._arrays
        for term, tf in counts.items():
            if arrays:
                arrays.pop(term, None)
            holders = postings.get(term)
            if holders is None:
                postings[term] = {doc: tf}
            else:
                holders[doc] = tf
        length = len(terms)
        self._counts.append(counts)
        self._lengths.append(length)
        self._live += 1
        self._total += length
        return doc

    def remove(self, doc: int) -> bool:
        """Take document ``doc`` out; whether it was in the index."""
        counts = self._counts[doc] if 0 <= doc < len(self._counts) else None
        if counts is None:
            return False
        postings = self._postings
        for term in counts:
            self._arrays.pop(term, None)
            holders = postings[term]
            del holders[doc]
            if not holders:
                del postings[term]
        self._counts[doc] = None
        self._live -= 1
        self._total -= self._lengths[doc]
        self._lengths[doc] = 0
        return True

    def length(self, doc: int) -> int:
        """How many terms document ``doc`` has (0 once removed)."""
        return self._lengths[doc]

    def score_terms(self, terms: Sequence[str]) -> dict[int, float]:
        """Each document holding one of ``terms``: its BM25 score for them (the
        query's terms: distinct, in the order their contributions are summed)."""
        n = self._live
        if not n:
            return {}
        mean = self._total / n
        avgdl = mean if mean > 0 else 1.0
        lengths = self._lengths
        sums: dict[int, float] = {}
        for t in terms:  # in term order for every document, as a scan of each adds them
            holders = self._postings.get(t)
            if not holders:
                continue
            idf = bm25_idf(n, len(holders))
            for doc, tf in holders.items():
                sums[doc] = sums.get(doc, 0.0) + bm25_term(idf, tf, lengths[doc], avgdl)
        return sums

    def score_arrays(
        self, terms: Sequence[str]
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
        """The documents holding one of ``terms`` (ascending) and their BM25 scores:
        :meth:`score_terms` as arrays, each score the same to the bit (the same
        operations, term by term, in numpy)."""
        sums, touched = self._sums(terms)
        if touched is None:
            return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.float64)
        docs = np.flatnonzero(touched)
        return docs, sums[docs]

    def scores(self, terms: Sequence[str]) -> npt.NDArray[np.float64]:
        """Every document's score for ``terms`` (0 where none occurs), by document number."""
        return self._sums(terms)[0]

    def _sums(
        self, terms: Sequence[str]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_] | None]:
        """Every document's score for ``terms`` and which documents hold one (None:
        none does). Each document's contributions are added in term order from 0.0,
        each by :func:`bm25_term`'s operations in its order, so a score equals
        :meth:`score_terms`' to the bit."""
        size = len(self._lengths)
        sums = np.zeros(size, dtype=np.float64)
        n = self._live
        if not n:
            return sums, None
        mean = self._total / n
        avgdl = mean if mean > 0 else 1.0
        lengths = self._lengths_now()
        touched: npt.NDArray[np.bool_] | None = None
        for t in terms:
            found = self._postings_of(t)
            if found is None:
                continue
            docs, tfs = found
            idf = bm25_idf(n, len(docs))
            norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths[docs] / avgdl)
            sums[docs] += idf * tfs * (BM25_K1 + 1) / (tfs + norm)
            if touched is None:
                touched = np.zeros(size, dtype=bool)
            touched[docs] = True
        return sums, touched

    def _postings_of(
        self, term: str
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]] | None:
        found = self._arrays.get(term)
        if found is None:
            holders = self._postings.get(term)
            if not holders:
                return None
            docs = np.fromiter(holders, dtype=np.intp, count=len(holders))
            tfs = np.fromiter(holders.values(), dtype=np.float64, count=len(holders))
            found = self._arrays[term] = (docs, tfs)
        return found

    def _lengths_now(self) -> npt.NDArray[np.float64]:
        """Every document's length as an array (grown as documents are added; a
        removed document's stale length is never read: no posting names it)."""
        have = len(self._length_array)
        size = len(self._lengths)
        if have < size:
            self._length_array = np.concatenate(
                [self._length_array, np.asarray(self._lengths[have:], dtype=np.float64)]
            )
        return self._length_array

    def query(self, query: str) -> npt.NDArray[np.float64]:
        """Every document's score for ``query`` (its :meth:`Analyzer.query_terms`)."""
        return self.scores(self.analyzer.query_terms(query))
