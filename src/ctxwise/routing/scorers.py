"""Scorers: given intents (and optional out-of-scope examples), score queries.

Every scorer returns, for a batch of queries, a float matrix of shape
``(queries, intents)`` aligned with :attr:`Scorer.labels`; higher is a better
match. The router turns a row into a decision with a threshold and a margin.

- :class:`BowScorer` — bag-of-words cosine: token → count maps, cosine is the
  dot product over the shared vocabulary divided by the norms; an intent's score
  is its best-matching example. No dependencies, no training.
- :class:`LexicalScorer` — TF-IDF word and character n-grams with a linear SVM
  trained on the utterances (scikit-learn, extra ``lexical``). Out-of-scope
  examples become their own class, which pulls score away from the intents.
- :class:`EmbeddingScorer` — an :class:`~ctxwise.embeddings.Embedder` with either
  a nearest-example cosine head (no training) or a logistic-regression head on
  the embeddings (scikit-learn).

A scorer that learns parameters can also be a :class:`SavableScorer`: ``state()``
gives them as JSON-ready metadata plus numpy arrays, and ``restore()`` rebuilds the
fitted scorer from them without fitting (or importing scikit-learn), which is how
a saved router loads in milliseconds.
"""

from __future__ import annotations

import importlib.util
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ctxwise.embeddings import Embedder, get_embedder, tokenize
from ctxwise.errors import MissingDependencyError, UsageError
from ctxwise.routing._ngrams import CharWbNgrams, WordNgrams, analyzer_from_spec
from ctxwise.routing.decision import Intent
from ctxwise.search.sparse import SparseIndex

__all__ = [
    "SCORERS",
    "BowScorer",
    "EmbeddingScorer",
    "HybridScorer",
    "LexicalScorer",
    "SavableScorer",
    "Scorer",
    "ScorerState",
    "make_scorer",
]

Matrix = npt.NDArray[np.float64]
ScorerState = tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]
"""A fitted scorer's parameters: JSON-ready metadata and named numpy arrays
(numeric dtypes only, so they load with ``allow_pickle=False``)."""
OOS = "__out_of_scope__"


@runtime_checkable
class Scorer(Protocol):
    """Scores queries against intents; see the module docstring."""

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> tuple[str, ...]: ...

    def fit(self, intents: Sequence[Intent], negatives: Sequence[str] = ()) -> None: ...

    def scores(self, queries: Sequence[str]) -> Matrix: ...

    def params(self) -> dict[str, Any]:
        """JSON-ready constructor arguments, for saving a router."""
        ...


@runtime_checkable
class SavableScorer(Scorer, Protocol):
    """A scorer whose fitted parameters can be saved and restored without fitting."""

    def state(self) -> ScorerState:
        """The fitted parameters; a :class:`~ctxwise.errors.UsageError` if not fitted."""
        ...

    def restore(
        self,
        labels: Sequence[str],
        meta: Mapping[str, Any],
        arrays: Mapping[str, npt.NDArray[Any]],
    ) -> None:
        """Become the fitted scorer ``state()`` described; ``ValueError`` (or
        ``KeyError``, ``TypeError``) when the parameters are inconsistent."""
        ...


def _texts_to_array(texts: Sequence[str]) -> npt.NDArray[np.uint8]:
    """Strings as one UTF-8 byte array, newline-separated (no string holds one)."""
    if any("\n" in t for t in texts):
        raise UsageError("a vocabulary entry contains a newline; it cannot be saved")
    data = "\n".join(texts).encode("utf-8", "surrogatepass")
    return np.frombuffer(data, dtype=np.uint8)


def _array_to_texts(data: npt.NDArray[Any], count: int) -> list[str]:
    if data.dtype != np.uint8 or data.ndim != 1:
        raise ValueError("a vocabulary must be a 1-D uint8 array")
    texts = data.tobytes().decode("utf-8", "surrogatepass").split("\n") if count else []
    if len(texts) != count:
        raise ValueError(f"vocabulary holds {len(texts)} entries, expected {count}")
    return texts


def _float_array(arrays: Mapping[str, npt.NDArray[Any]], key: str, shape: tuple[int, ...]) -> Any:
    value = arrays[key]
    if value.dtype.kind != "f" or value.shape != shape:
        raise ValueError(f"array {key!r}: expected float {shape}, got {value.dtype} {value.shape}")
    _check_finite(value, key)
    return value


def _check_finite(value: npt.NDArray[Any], key: str) -> None:
    if not np.isfinite(value).all():
        raise ValueError(f"array {key!r} holds NaN or infinite values")


def _positive(name: str, value: Any) -> float:
    """``value`` as a float, or a :class:`~ctxwise.errors.UsageError` unless it is a
    finite number above 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not value > 0
    ):
        raise UsageError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _embedder(value: Any) -> Embedder:
    if isinstance(value, str):
        return get_embedder(value)
    if not isinstance(value, Embedder):
        raise UsageError(f"embedder must be an embedder or its name, got {value!r}")
    return value


def _embed(embedder: Embedder, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """``embedder``'s vectors of ``texts``, encoded as their distinct texts in sorted
    order: the same texts give the same vectors whatever their order or repeats (an
    encoder's float noise depends on the batch a text is padded in with)."""
    distinct = sorted(set(texts))
    vectors = np.asarray(embedder.embed(distinct), dtype=np.float32)
    where = {text: i for i, text in enumerate(distinct)}
    return vectors[[where[t] for t in texts]] if texts else vectors


def _sorted_rows(texts: Sequence[str], labels: Sequence[str]) -> tuple[list[str], list[str]]:
    """The training rows in one order, by label then text: a fit reads the same
    rows in the same order however the training file was ordered (a solver's float
    sums, and liblinear's seeded passes, follow the row order)."""
    rows = sorted(zip(labels, texts, strict=True))
    return [t for _, t in rows], [y for y, _ in rows]


def _require_fit(labels: tuple[str, ...], name: str) -> None:
    if not labels:
        raise UsageError(f"the {name} scorer has not been fitted: add intents first")


class BowScorer:
    """Bag-of-words cosine, best example per intent."""

    def __init__(self) -> None:
        self._labels: tuple[str, ...] = ()
        self._bags = SparseIndex()  # each example's token counts
        self._norms: npt.NDArray[np.float64] = np.zeros(0)
        self._owner: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)

    @property
    def name(self) -> str:
        return "bow"

    @property
    def labels(self) -> tuple[str, ...]:
        return self._labels

    def params(self) -> dict[str, Any]:
        return {}

    def fit(self, intents: Sequence[Intent], negatives: Sequence[str] = ()) -> None:
        bags = SparseIndex()
        owner: list[int] = []
        for i, intent in enumerate(intents):
            for example in intent.examples():
                counts = Counter(tokenize(example))
                if counts:
                    bags.add(counts)
                    owner.append(i)
        self._labels = tuple(i.name for i in intents)
        self._bags = bags
        self._norms = bags.norm()
        self._owner = np.array(owner, dtype=np.int64)

    def scores(self, queries: Sequence[str]) -> Matrix:
        _require_fit(self._labels, self.name)
        out = np.zeros((len(queries), len(self._labels)))
        for row, query in enumerate(queries):
            counts = Counter(tokenize(query))
            qnorm = math.sqrt(sum(c * c for c in counts.values()))
            if qnorm == 0:
                continue
            acc = self._bags.dot(counts)
            bags = np.flatnonzero(acc)  # counts are positive: the bags sharing a token
            if not len(bags):
                continue
            cos = acc[bags] / (qnorm * self._norms[bags])
            np.maximum.at(out[row], self._owner[bags], cos)
        return out


def _sklearn(purpose: str) -> None:
    """Fail early, naming the extra, when scikit-learn is not installed (found, not
    imported: importing it costs most of a second, which a loaded router never pays)."""
    if importlib.util.find_spec("sklearn") is None:
        raise MissingDependencyError("scikit-learn", "lexical", purpose)


class LexicalScorer:
    """TF-IDF word 1–2-grams and character 2–5-grams, and a linear SVM (one vs rest).

    Scores are the SVM decision values through the logistic function, so they lie
    in (0, 1) with 0.5 on the decision boundary. Out-of-scope examples, when given,
    train their own class. Training uses scikit-learn; scoring one query runs on the
    fitted arrays directly (no scikit-learn call), which keeps it well under a
    millisecond; the analyzers are :mod:`ctxwise.routing._ngrams`, which match
    scikit-learn's, so a restored scorer (:meth:`restore`) never imports it.
    """

    def __init__(self, c: float = 0.5, char_ngrams: bool = True) -> None:
        _sklearn(f"the {self.name} scorer")
        self.c = _positive("c", c)
        if not isinstance(char_ngrams, bool):
            raise UsageError(f"char_ngrams must be true or false, got {char_ngrams!r}")
        self.char_ngrams = char_ngrams
        self.embedder: Embedder | None = None
        self.embedding_weight = 1.0
        self._labels: tuple[str, ...] = ()
        self._parts: list[tuple[Any, dict[str, int], npt.NDArray[np.float64], int]] = []
        self._coef: npt.NDArray[np.float64] = np.zeros((0, 0))
        self._bias: npt.NDArray[np.float64] = np.zeros(0)

    @property
    def name(self) -> str:
        return "lexical"

    @property
    def labels(self) -> tuple[str, ...]:
        return self._labels

    def params(self) -> dict[str, Any]:
        return {"c": self.c, "char_ngrams": self.char_ngrams}

    def fit(self, intents: Sequence[Intent], negatives: Sequence[str] = ()) -> None:
        import scipy.sparse as sp
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.svm import LinearSVC

        texts: list[str] = []
        y: list[str] = []
        for intent in intents:
            for example in intent.examples():
                texts.append(example)
                y.append(intent.name)
        texts.extend(negatives)
        y.extend([OOS] * len(negatives))
        if len(set(y)) < 2:
            raise UsageError(
                "the lexical scorer needs two intents, or one intent and out-of-scope examples"
            )
        texts, y = _sorted_rows(texts, y)
        analyzers: list[WordNgrams | CharWbNgrams] = [WordNgrams(1, 2)]
        min_dfs = [1]
        if self.char_ngrams:
            analyzers.append(CharWbNgrams(2, 5))
            min_dfs.append(2)
        vectorizers = [
            TfidfVectorizer(sublinear_tf=True, analyzer=a, min_df=m)
            for a, m in zip(analyzers, min_dfs, strict=True)
        ]
        try:
            blocks = [v.fit_transform(texts) for v in vectorizers]
        except ValueError:  # "empty vocabulary", "After pruning, no terms remain"
            raise UsageError(
                f"too little text for the {self.name} scorer ({len(texts)} examples): no "
                "word or character n-gram is shared by two of them; add examples"
            ) from None
        if self.embedder is not None:
            blocks.append(sp.csr_matrix(_embed(self.embedder, texts) * self.embedding_weight))
        model = LinearSVC(C=self.c, random_state=0)
        model.fit(sp.hstack(blocks).tocsr(), y)
        classes = list(model.classes_)
        coef = np.asarray(model.coef_, dtype=np.float64)
        bias = np.asarray(model.intercept_, dtype=np.float64)
        if coef.shape[0] == 1:  # two classes: one decision function, for classes[1]
            coef = np.vstack([-coef, coef])
            bias = np.array([-bias[0], bias[0]])
        columns = [classes.index(i.name) for i in intents]
        self._labels = tuple(i.name for i in intents)
        self._coef = np.ascontiguousarray(coef[columns].T)  # features × intents
        self._bias = bias[columns]
        offset = 0
        self._parts = []
        for a, v in zip(analyzers, vectorizers, strict=True):
            vocab = {str(k): int(idx) for k, idx in v.vocabulary_.items()}
            self._parts.append((a, vocab, np.asarray(v.idf_, dtype=np.float64), offset))
            offset += len(vocab)
        self._embedding_offset = offset

    def state(self) -> ScorerState:
        """Vocabularies, idf weights, the SVM's weights (stored sparse: its many exact
        zeros are left out) and intercepts."""
        _require_fit(self._labels, self.name)
        arrays: dict[str, npt.NDArray[Any]] = {}
        for n, (_, vocab, idf, _) in enumerate(self._parts):
            terms = sorted(vocab, key=vocab.__getitem__)
            arrays[f"vocab_{n}"] = _texts_to_array(terms)
            arrays[f"idf_{n}"] = idf
        flat = np.flatnonzero(self._coef)
        arrays["coef_index"] = flat.astype(np.int32 if self._coef.size < 2**31 else np.int64)
        arrays["coef_value"] = self._coef.ravel()[flat]
        arrays["bias"] = self._bias
        meta = {
            "analyzers": [a.spec() for a, *_ in self._parts],
            "vocab_sizes": [len(vocab) for _, vocab, _, _ in self._parts],
            "coef_shape": list(self._coef.shape),
        }
        return meta, arrays

    def restore(
        self,
        labels: Sequence[str],
        meta: Mapping[str, Any],
        arrays: Mapping[str, npt.NDArray[Any]],
    ) -> None:
        specs, sizes = meta["analyzers"], meta["vocab_sizes"]
        rows, k = (int(x) for x in meta["coef_shape"])
        if len(specs) != len(sizes) or k != len(labels) or k == 0:
            raise ValueError("scorer state does not match the router's intents")
        parts = []
        offset = 0
        for n, (spec, size) in enumerate(zip(specs, sizes, strict=True)):
            terms = _array_to_texts(arrays[f"vocab_{n}"], int(size))
            vocab = {t: i for i, t in enumerate(terms)}
            if len(vocab) != len(terms):
                raise ValueError(f"vocabulary {n} has duplicate entries")
            idf = _float_array(arrays, f"idf_{n}", (len(terms),))
            parts.append((analyzer_from_spec(spec), vocab, idf.astype(np.float64), offset))
            offset += len(terms)
        extra = rows - offset
        if extra != (0 if self.embedder is None else self.embedder.dim):
            raise ValueError(
                f"weights have {rows} rows for {offset} lexical features"
                + ("" if self.embedder is None else f" and {self.embedder.dim} embedding dims")
            )
        index = arrays["coef_index"]
        if index.dtype.kind not in "iu" or index.ndim != 1:
            raise ValueError("coef_index must be a 1-D integer array")
        if index.size and (int(index.min()) < 0 or int(index.max()) >= rows * k):
            raise ValueError("coef_index out of range")
        coef = np.zeros(rows * k, dtype=np.float64)
        coef[index] = _float_array(arrays, "coef_value", (index.size,))
        self._coef = coef.reshape(rows, k)
        self._bias = _float_array(arrays, "bias", (k,)).astype(np.float64)
        self._parts = parts
        self._embedding_offset = offset
        self._labels = tuple(labels)

    def _decision(self, query: str, embedding: Any = None) -> npt.NDArray[np.float64]:
        out = self._bias.copy()
        if embedding is not None:
            out += (embedding * self.embedding_weight) @ self._coef[self._embedding_offset :]
        for analyzer, vocab, idf, offset in self._parts:
            counts = Counter(analyzer(query))
            idx = [vocab[f] for f in counts if f in vocab]
            if not idx:
                continue
            cols = np.array(idx, dtype=np.int64)
            tf = np.array([counts[f] for f in counts if f in vocab], dtype=np.float64)
            values = (1.0 + np.log(tf)) * idf[cols]
            values /= np.linalg.norm(values)
            out += values @ self._coef[cols + offset]
        return out

    def scores(self, queries: Sequence[str]) -> Matrix:
        _require_fit(self._labels, self.name)
        embeddings: Any = (
            _embed(self.embedder, list(queries))
            if self.embedder is not None
            else [None] * len(queries)
        )
        decisions = np.array(
            [self._decision(q, e) for q, e in zip(queries, embeddings, strict=True)]
        ).reshape(len(queries), len(self._labels))
        result: Matrix = 1.0 / (1.0 + np.exp(-decisions))
        return result


class HybridScorer(LexicalScorer):
    """The lexical scorer's TF-IDF features and an embedder's vector, side by side,
    in one linear SVM: lexical overlap and meaning vote together.

    With all-MiniLM-L6-v2 it has the best balance of in-scope accuracy and
    out-of-scope recall on CLINC150 at the fitted operating point (the linear
    embedding head alone routes in-scope queries slightly better but refuses far
    fewer out-of-scope ones); see ``benchmarks/bench_routing.py``.
    """

    def __init__(
        self,
        embedder: Embedder | str = "minilm",
        c: float = 0.5,
        embedding_weight: float = 2.0,
        char_ngrams: bool = True,
    ) -> None:
        super().__init__(c=c, char_ngrams=char_ngrams)
        self.embedding_weight = _positive("embedding_weight", embedding_weight)
        self.embedder = _embedder(embedder)

    @property
    def name(self) -> str:
        return "hybrid"

    def params(self) -> dict[str, Any]:
        assert self.embedder is not None
        return {
            **super().params(),
            "embedder": self.embedder.name,
            "embedding_weight": self.embedding_weight,
        }


class EmbeddingScorer:
    """An embedder with a ``nearest`` (best example cosine) or ``linear`` head."""

    def __init__(
        self, embedder: Embedder | str = "hashing", head: str = "nearest", c: float = 10.0
    ) -> None:
        if head not in ("nearest", "linear"):
            raise UsageError(f"unknown head {head!r}; choose 'nearest' or 'linear'")
        if head == "linear":
            _sklearn("the embedding scorer's linear head")
        self.c = _positive("c", c)
        self.embedder = _embedder(embedder)
        self.head = head
        self._labels: tuple[str, ...] = ()
        self._vectors: npt.NDArray[np.float32] = np.zeros((0, 0), dtype=np.float32)
        self._starts: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._weights: Matrix = np.zeros((0, 0))  # linear head: dims × classes
        self._intercept: Matrix = np.zeros(0)
        self._columns: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)

    @property
    def name(self) -> str:
        return "embedding"

    @property
    def labels(self) -> tuple[str, ...]:
        return self._labels

    def params(self) -> dict[str, Any]:
        return {"embedder": self.embedder.name, "head": self.head, "c": self.c}

    def fit(self, intents: Sequence[Intent], negatives: Sequence[str] = ()) -> None:
        texts: list[str] = []
        owner: list[int] = []
        for i, intent in enumerate(intents):
            for example in intent.examples():
                texts.append(example)
                owner.append(i)
        self._labels = tuple(i.name for i in intents)
        if self.head == "nearest":
            # examples grouped by intent, so a row's per-intent max is one reduceat
            order = np.argsort(np.array(owner, dtype=np.int64), kind="stable")
            self._vectors = _embed(self.embedder, [texts[k] for k in order])
            owners = np.array(owner, dtype=np.int64)[order]
            self._starts = np.searchsorted(owners, np.arange(len(self._labels)))
            return
        from sklearn.linear_model import LogisticRegression

        y = [self._labels[o] for o in owner] + [OOS] * len(negatives)
        if len(set(y)) < 2:
            raise UsageError(
                "the linear head needs two intents, or one intent and out-of-scope examples"
            )
        rows, y = _sorted_rows([*texts, *negatives], y)
        model = LogisticRegression(C=self.c, max_iter=2000, random_state=0)
        model.fit(_embed(self.embedder, rows), y)
        classes = list(model.classes_)
        self._columns = np.array([classes.index(n) for n in self._labels], dtype=np.int64)
        self._weights = np.ascontiguousarray(np.asarray(model.coef_, dtype=np.float64).T)
        self._intercept = np.asarray(model.intercept_, dtype=np.float64)

    def _proba(self, q: npt.NDArray[Any]) -> Matrix:
        """The logistic regression's class probabilities, as ``predict_proba``."""
        z = np.asarray(q, dtype=np.float64) @ self._weights + self._intercept
        if z.shape[1] == 1:  # two classes: one logit, for the second
            p1 = 1.0 / (1.0 + np.exp(-z[:, 0]))
            return np.column_stack([1.0 - p1, p1])
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        result: Matrix = e / e.sum(axis=1, keepdims=True)
        return result

    def state(self) -> ScorerState:
        """``nearest``: the examples' vectors grouped by intent; ``linear``: the
        logistic regression's weights, intercepts and class columns."""
        _require_fit(self._labels, self.name)
        if self.head == "nearest":
            return {"head": "nearest"}, {"vectors": self._vectors, "starts": self._starts}
        arrays = {"weights": self._weights, "intercept": self._intercept}
        return {"head": "linear"}, {**arrays, "columns": self._columns}

    def restore(
        self,
        labels: Sequence[str],
        meta: Mapping[str, Any],
        arrays: Mapping[str, npt.NDArray[Any]],
    ) -> None:
        if meta.get("head") != self.head:
            raise ValueError(f"state is for head {meta.get('head')!r}, not {self.head!r}")
        k = len(labels)
        if self.head == "nearest":
            vectors, starts = arrays["vectors"], arrays["starts"]
            if vectors.dtype.kind != "f" or vectors.ndim != 2 or starts.shape != (k,):
                raise ValueError("nearest-head state has the wrong shapes")
            if vectors.shape[1] != self.embedder.dim:
                raise ValueError(
                    f"nearest-head vectors have {vectors.shape[1]} dims; "
                    f"the {self.embedder.name} embedder gives {self.embedder.dim}"
                )
            _check_finite(vectors, "vectors")
            if starts.dtype.kind not in "iu" or (
                k and (starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= len(vectors))
            ):
                raise ValueError("nearest-head starts must rise from 0 within the vectors")
            self._vectors, self._starts = vectors, starts.astype(np.int64)
        else:
            weights, columns = arrays["weights"], arrays["columns"]
            if weights.dtype.kind != "f" or weights.ndim != 2:
                raise ValueError("linear-head weights must be a 2-D float array")
            if weights.shape[0] != self.embedder.dim:
                raise ValueError(
                    f"linear-head weights have {weights.shape[0]} rows; "
                    f"the {self.embedder.name} embedder gives {self.embedder.dim} dims"
                )
            _check_finite(weights, "weights")
            classes = weights.shape[1] if weights.shape[1] > 1 else 2
            if columns.shape != (k,) or columns.dtype.kind not in "iu":
                raise ValueError("linear-head columns do not match the intents")
            if k and (int(columns.min()) < 0 or int(columns.max()) >= classes):
                raise ValueError("linear-head columns out of range")
            self._weights = weights.astype(np.float64)
            self._intercept = _float_array(arrays, "intercept", (weights.shape[1],))
            self._columns = columns.astype(np.int64)
        self._labels = tuple(labels)

    def scores(self, queries: Sequence[str]) -> Matrix:
        _require_fit(self._labels, self.name)
        q = _embed(self.embedder, list(queries))
        if self.head == "linear":
            return np.ascontiguousarray(self._proba(q)[:, self._columns])
        out = np.empty((len(queries), len(self._labels)))
        for lo in range(0, len(queries), 256):  # bounded memory for large batches
            sims = q[lo : lo + 256] @ self._vectors.T  # cosines: rows are unit vectors
            out[lo : lo + 256] = np.maximum.reduceat(sims, self._starts, axis=1)
        return out


SCORERS = ("bow", "lexical", "embedding", "hybrid")


def make_scorer(name: str, params: dict[str, Any] | None = None) -> Scorer:
    """A scorer by name (``bow``, ``lexical``, ``embedding``, ``hybrid``) and constructor params."""
    p = dict(params or {})
    try:
        if name == "bow":
            return BowScorer(**p)
        if name == "lexical":
            return LexicalScorer(**p)
        if name == "embedding":
            return EmbeddingScorer(**p)
        if name == "hybrid":
            return HybridScorer(**p)
    except TypeError as exc:
        raise UsageError(f"bad parameters for the {name} scorer: {exc}") from None
    raise UsageError(f"unknown scorer {name!r}; choose one of {', '.join(SCORERS)}")
