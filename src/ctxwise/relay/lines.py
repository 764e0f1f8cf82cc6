"""The verbatim line store: which lines of a chunk to keep, kept byte for byte.

A :class:`LineScorer` scores each line of a chunk; lines scoring above its
``threshold`` go into the :class:`LineStore`, which holds them exactly as read
(never retyped by a model) under a token budget. When the store is over its
budget it drops lines by a stated policy and reports each one it dropped.

The offline default, :class:`ExampleScorer`, compares a line with the job's
examples: the nearest example it should keep against the nearest one it should
skip.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from ctxwise.errors import RelayError
from ctxwise.search.sparse import SparseIndex
from ctxwise.text import DEFAULT_ANALYZER, Analyzer
from ctxwise.tokens import TokenCounter

__all__ = [
    "DropPolicy",
    "DroppedLine",
    "ExampleScorer",
    "KeptLine",
    "LineScorer",
    "LineStore",
    "line_shape",
]

DropPolicy = Literal["lowest-score", "oldest"]


@runtime_checkable
class LineScorer(Protocol):
    """Scores lines for keeping: a line is kept when its score is above ``threshold``."""

    threshold: float

    def score(self, lines: Sequence[str]) -> Sequence[float]:
        """One score per line, in order."""
        ...


_RAW = re.compile(r"\w+(?:'\w+)?|[^\w\s]", re.UNICODE)


def line_shape(line: str, analyzer: Analyzer = DEFAULT_ANALYZER) -> list[str]:
    """The terms :class:`ExampleScorer` compares: the analyzer's words of ``line``
    with the parts that name rather than say masked — a token holding a digit
    (ids, codes, numbers, times) becomes ``#``, a capitalised token (a name, a
    code letter) becomes ``<cap>`` — and punctuation kept as a term.

    What a line *says* about its names is then what it is compared by: "Ana
    Ruiz handed pump P-104 to Bo Sato" and "Dev Weber handed crane CR-7 to Uma
    Iqbal" have the same shape but for the asset's kind.
    """
    out: list[str] = []
    for token in _RAW.findall(line):
        if any(c.isdigit() for c in token):
            out.append("#")
        elif (token[:1].isupper() and not token.isupper()) or (len(token) == 1 and token.isupper()):
            out.append("<cap>")
        elif token[:1].isalpha() or token[:1] == "_":
            out.extend(analyzer.words(token))
        else:
            out.append(token)
    return out


def _features(terms: Sequence[str], ngram: int) -> set[str]:
    feats = set(terms)
    for n in range(2, ngram + 1):
        feats.update(" ".join(terms[i : i + n]) for i in range(len(terms) - n + 1))
    return feats


class ExampleScorer:
    """Scores a line by how much nearer it is to an example to keep than to one to
    skip: ``max cos(line, keep) - max cos(line, skip)``.

    Lines and examples are compared as sets of their ``terms`` (default
    :func:`line_shape` with ``analyzer``) and their ``ngram``-grams (default 2),
    weighted by their inverse document frequency over the examples, by cosine
    similarity. With ``skip`` examples the default
    ``threshold`` is 0 (keep a line nearer to a keep example); without them a line
    must reach a cosine of 0.5 with a keep example. When there are no keep
    examples, the instruction is the one example to keep.

    Raises:
        RelayError: (``"spec"``) nothing to compare with, or ``ngram`` < 1.
    """

    def __init__(
        self,
        keep: Sequence[str],
        skip: Sequence[str] = (),
        *,
        instruction: str | None = None,
        threshold: float | None = None,
        ngram: int = 2,
        analyzer: Analyzer = DEFAULT_ANALYZER,
        terms: Callable[[str], list[str]] | None = None,
    ) -> None:
        positives = [k for k in keep if k.strip()]
        if not positives and instruction and instruction.strip():
            positives = [instruction]
        if not positives:
            raise RelayError(
                "spec", "the example scorer needs an example to keep or an instruction"
            )
        if ngram < 1:
            raise RelayError("spec", f"ngram must be ≥ 1, not {ngram}")
        negatives = [s for s in skip if s.strip()]
        self.ngram = ngram
        self.analyzer = analyzer
        self._terms = terms if terms is not None else partial(line_shape, analyzer=analyzer)
        self.threshold = (0.0 if negatives else 0.5) if threshold is None else float(threshold)
        docs = [_features(self._terms(d), ngram) for d in (*positives, *negatives)]
        df: dict[str, int] = {}
        for feats in docs:
            for f in feats:
                df[f] = df.get(f, 0) + 1
        n = len(docs)
        # features in sorted order, so every process computes the same bits
        self._idf = {f: math.log(1.0 + (n - df[f] + 0.5) / (df[f] + 0.5)) for f in sorted(df)}
        # the examples' unit vectors as postings (memory grows with the examples'
        # terms, not examples x vocabulary)
        self._examples = SparseIndex(self._vector(feats) for feats in docs)
        self._n_keep = len(positives)
        self._n = n

    def _vector(self, feats: set[str]) -> dict[str, float]:
        """The unit idf vector of ``feats`` (those an example holds), in sorted
        feature order: the order a line's products are summed in."""
        known = sorted(f for f in feats if f in self._idf)
        weights = np.array([self._idf[f] for f in known], dtype=np.float64)
        norm = float(np.sqrt(np.sum(weights * weights))) or 1.0
        return dict(zip(known, (weights / norm).tolist(), strict=True))

    @property
    def settings(self) -> dict[str, object]:
        """What decides this scorer's output besides its examples (a run's
        fingerprint includes it): n-gram length, threshold, terms function."""
        terms = getattr(self._terms, "func", self._terms)
        return {
            "ngram": self.ngram,
            "threshold": self.threshold,
            "terms": f"{getattr(terms, '__module__', '')}.{getattr(terms, '__qualname__', '')}",
            "analyzer": self.analyzer.name,
            "examples": [self._n_keep, self._n - self._n_keep],
        }

    def score(self, lines: Sequence[str]) -> list[float]:
        """``max cos`` to a keep example minus ``max cos`` to a skip example, per line."""
        out = []
        for line in lines:
            vector = self._vector(_features(self._terms(line), self.ngram))
            if not vector:
                out.append(0.0)
                continue
            sims = self._examples.dot(vector)
            keep = float(sims[: self._n_keep].max())
            skip = float(sims[self._n_keep :].max()) if self._n > self._n_keep else 0.0
            out.append(max(keep, 0.0) - max(skip, 0.0))
        return out


@dataclass(frozen=True, slots=True)
class KeptLine:
    """A line in the store: where it came from (chunk and line index), its exact
    text and its score."""

    chunk: int
    line: int
    text: str
    score: float


@dataclass(frozen=True, slots=True)
class DroppedLine:
    """A line the store let go at ``step`` to stay within its budget, by ``policy``."""

    chunk: int
    line: int
    text: str
    score: float
    step: int
    policy: DropPolicy


@dataclass(slots=True)
class LineStore:
    """Kept lines, verbatim, within ``budget`` tokens of their rendering
    (:meth:`render`: one line each, in input order).

    ``policy`` says which line goes first when the store is over budget:
    ``"lowest-score"`` (ties: the oldest) or ``"oldest"``.
    """

    budget: int
    counter: TokenCounter
    policy: DropPolicy = "lowest-score"
    lines: list[KeptLine] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.policy not in ("lowest-score", "oldest"):
            raise RelayError(
                "spec", f"unknown drop policy {self.policy!r}; choose lowest-score or oldest"
            )
        if self.budget < 0:
            raise RelayError("spec", f"the line store budget must be ≥ 0, not {self.budget}")

    def render(self) -> str:
        """The kept lines, in input order, one per line."""
        return "\n".join(k.text for k in self.lines)

    @property
    def tokens(self) -> int:
        """Tokens of :meth:`render`."""
        return self.counter.count(self.render()) if self.lines else 0

    def add(self, new: Sequence[KeptLine], step: int) -> list[DroppedLine]:
        """Add ``new`` lines, then drop by :attr:`policy` until within :attr:`budget`.
        Returns the dropped lines (new ones among them, if they lost)."""
        merged = sorted([*self.lines, *new], key=lambda k: (k.chunk, k.line))
        self.lines = merged
        dropped: list[DroppedLine] = []
        while self.lines and self.tokens > self.budget:
            if self.policy == "oldest":
                victim = 0
            else:
                victim = min(range(len(self.lines)), key=lambda i: (self.lines[i].score, i))
            k = self.lines.pop(victim)
            dropped.append(DroppedLine(k.chunk, k.line, k.text, k.score, step, self.policy))
        return dropped
