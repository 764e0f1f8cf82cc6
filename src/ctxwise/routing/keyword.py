"""A keyword classifier with an order of precedence: simple, explainable rules.

Each label has a set of words; the first label in order whose words appear in
the query wins, else the default. Keywords go through the same analyzer as the
query (:func:`ctxwise.text.words`: NFKC, case folding, Unicode words), so
``"Straße"`` matches ``"STRASSE"``; a keyword of several words (``"credit card"``)
matches when they appear in the query one after another. Useful when intents are few and clear-cut,
and as a fixed classifier in tests and demos.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ctxwise.embeddings import tokenize
from ctxwise.errors import UsageError
from ctxwise.routing.decision import RouteDecision, RouteReason

__all__ = ["KeywordClassifier"]


class KeywordClassifier:
    """``rules`` in precedence order: ``[(label, words), ...]``; ``default`` when none match."""

    def __init__(
        self, rules: Sequence[tuple[str, Iterable[str]]], default: str | None = None
    ) -> None:
        labels = [label for label, _ in rules]
        if len(set(labels)) != len(labels):
            raise UsageError("duplicate labels in keyword rules")
        self.rules: list[tuple[str, frozenset[str]]] = []
        for label, words in rules:
            if not isinstance(label, str) or not label.strip():
                raise UsageError(f"a keyword rule needs a non-empty label, got {label!r}")
            if isinstance(words, str | bytes):
                raise UsageError(
                    f"label {label!r}: keywords must be a list of strings, not a string"
                )
            phrases = set()
            for word in words:
                if not isinstance(word, str):
                    raise UsageError(f"label {label!r}: keyword {word!r} is not a string")
                terms = tokenize(word)
                if not terms:
                    raise UsageError(f"label {label!r}: keyword {word!r} has no word in it")
                phrases.add(" ".join(terms))
            if not phrases:
                raise UsageError(f"label {label!r} has no keywords")
            self.rules.append((label, frozenset(phrases)))
        self._lengths = sorted({p.count(" ") + 1 for _, ps in self.rules for p in ps})
        self.default = default

    def route(self, query: str) -> RouteDecision:
        if not isinstance(query, str) or not query.strip():
            raise UsageError("empty query: there is nothing to route")
        terms = tokenize(query)
        grams = {
            " ".join(terms[i : i + n]) for n in self._lengths for i in range(len(terms) - n + 1)
        }
        hits = {label: len(grams & words) for label, words in self.rules}
        for label, _ in self.rules:
            if hits[label]:
                return RouteDecision(
                    label,
                    float(hits[label]),
                    None,
                    0.0,
                    RouteReason.MATCH,
                    {k: float(v) for k, v in hits.items()},
                    1.0,
                    0.0,
                    label,
                )
        if self.default is not None:
            return RouteDecision(
                self.default,
                0.0,
                None,
                0.0,
                RouteReason.MATCH,
                {k: float(v) for k, v in hits.items()},
                0.0,
                0.0,
                self.default,
            )
        return RouteDecision(
            None,
            0.0,
            None,
            0.0,
            RouteReason.LOW_CONFIDENCE,
            {k: float(v) for k, v in hits.items()},
            1.0,
            0.0,
            None,
        )
