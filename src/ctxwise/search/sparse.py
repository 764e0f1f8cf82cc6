"""Sparse weighted vectors and their dot products: the index cosine rankers share.

Routing's bag-of-words scorer and the relay's example scorer compare a text with
a few hundred to a few thousand examples by cosine over term weights. Both are a
dot product between a query's weights and every example holding one of its terms;
:class:`SparseIndex` holds the examples' weights as postings (term → examples and
their weights, as arrays), so a query reads only the postings of its own terms and
memory grows with the examples' terms, not examples × vocabulary.

Sums are added term by term in the order the query gives its weights, so a caller
that fixes that order (the relay sorts its features) gets the same bits in every
process.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

__all__ = ["SparseIndex"]


class SparseIndex:
    """Documents as term → weight maps, added in order (document numbers 0, 1, 2, …).

    :meth:`dot` is every document's dot product with a query's weights. Weights are
    taken as given: a caller that wants cosine normalizes the vectors it adds, or
    divides by the norms it keeps (:meth:`norm` is each document's Euclidean norm).
    """

    def __init__(self, documents: Iterable[Mapping[str, float]] = ()) -> None:
        self._building: dict[str, tuple[list[int], list[float]]] = {}
        self._norms: list[float] = []
        # per term: the documents holding it and their weights, made on first read
        # and dropped when a document holding the term is added
        self._arrays: dict[str, tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]] = {}
        for weights in documents:
            self.add(weights)

    def __len__(self) -> int:
        return len(self._norms)

    def add(self, weights: Mapping[str, float]) -> int:
        """Index a document of these term weights; its document number."""
        doc = len(self._norms)
        squares = 0.0
        for term, weight in weights.items():
            w = float(weight)
            squares += w * w
            postings = self._building.get(term)
            if postings is None:
                self._building[term] = ([doc], [w])
            else:
                postings[0].append(doc)
                postings[1].append(w)
            self._arrays.pop(term, None)
        self._norms.append(float(np.sqrt(squares)))
        return doc

    def norm(self) -> npt.NDArray[np.float64]:
        """Each document's Euclidean norm, by document number."""
        return np.asarray(self._norms, dtype=np.float64)

    def postings(self, term: str) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]] | None:
        """The documents holding ``term`` (ascending) and their weights; None when none does."""
        found = self._arrays.get(term)
        if found is None:
            building = self._building.get(term)
            if building is None:
                return None
            found = self._arrays[term] = (
                np.asarray(building[0], dtype=np.intp),
                np.asarray(building[1], dtype=np.float64),
            )
        return found

    def dot(self, query: Mapping[str, float]) -> npt.NDArray[np.float64]:
        """Every document's dot product with ``query`` (0 where no term is shared),
        by document number.

        Each document's products are added from 0.0 in ``query``'s order."""
        docs: list[npt.NDArray[np.intp]] = []
        products: list[npt.NDArray[np.float64]] = []
        for term, weight in query.items():
            found = self.postings(term)
            if found is not None:
                docs.append(found[0])
                products.append(found[1] * float(weight))
        size = len(self._norms)
        if not docs:
            return np.zeros(size, dtype=np.float64)
        # bincount adds each document's products in the order they come: query order
        sums = np.bincount(np.concatenate(docs), weights=np.concatenate(products), minlength=size)
        return sums.astype(np.float64, copy=False)  # float64 already: weights are
