"""A keyword classifier with an order of precedence: simple, explainable rules.

Each label has a set of words; the first label in order whose words appear in
the query wins, else the default. Useful when intents are few and clear-cut,
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
        self.rules = [(label, frozenset(w.lower() for w in words)) for label, words in rules]
        for label, words in self.rules:
            if not words:
                raise UsageError(f"label {label!r} has no keywords")
        self.default = default

    def route(self, query: str) -> RouteDecision:
        if not isinstance(query, str) or not query.strip():
            raise UsageError("empty query: there is nothing to route")
        tokens = set(tokenize(query))
        hits = {label: len(tokens & words) for label, words in self.rules}
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
