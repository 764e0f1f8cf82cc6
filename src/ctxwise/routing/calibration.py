"""Choosing a router's threshold and margin on labeled data, and routing metrics.

A labeled example is ``(text, label)``; the label :data:`OUT_OF_SCOPE` (``"oos"``)
marks a query no intent should take. A refusal (``low_confidence`` or
``ambiguous_tie``) is a correct detection on an out-of-scope query and an error
on an in-scope one.

:func:`calibrate` grid-searches the global threshold and margin for the best
``objective``, then gives an intent its own threshold only where that
improves the objective by at least ``min_gain`` on the same data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from ctxwise.errors import UsageError

__all__ = [
    "DEFAULT_OBJECTIVE",
    "OBJECTIVES",
    "OUT_OF_SCOPE",
    "Calibration",
    "FitReport",
    "RoutingMetrics",
    "calibrate",
    "decide",
    "harmonic_mean",
    "routing_metrics",
]

OUT_OF_SCOPE = "oos"
MARGINS = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3)
Objective: TypeAlias = Literal["accuracy", "balanced", "macro_f1"]
"""``balanced`` (the default): the harmonic mean of in-scope accuracy and OOS
recall, ``2ar / (a + r)``, which is high only when both are: neither can be traded
away for the other. ``accuracy``: the share of queries handled right (routed to the
right intent, or refused when out of scope) when a share ``oos_share`` of traffic
is out of scope, i.e. ``(1 - oos_share) × in-scope accuracy + oos_share × OOS
recall``; ``macro_f1``: macro F1 over the intents and the out-of-scope class."""
OBJECTIVES: tuple[Objective, ...] = ("accuracy", "balanced", "macro_f1")
DEFAULT_OBJECTIVE: Objective = "balanced"


def harmonic_mean(in_scope_accuracy: float, oos_recall: float) -> float:
    """The ``balanced`` objective: ``2ar / (a + r)``, 0 when both are 0."""
    total = in_scope_accuracy + oos_recall
    return 2 * in_scope_accuracy * oos_recall / total if total > 0 else 0.0


Matrix = npt.NDArray[np.float64]
TopTwo: TypeAlias = tuple[npt.NDArray[np.int64], Matrix, npt.NDArray[np.int64], Matrix]


@dataclass(frozen=True, slots=True)
class Calibration:
    """A router's operating point."""

    threshold: float
    margin: float
    per_intent: Mapping[str, float] = field(default_factory=dict)

    def threshold_for(self, label: str) -> float:
        return self.per_intent.get(label, self.threshold)

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "margin": self.margin,
            "per_intent": dict(sorted(self.per_intent.items())),
        }


@dataclass(frozen=True, slots=True)
class RoutingMetrics:
    n: int
    in_scope: int
    out_of_scope: int
    in_scope_accuracy: float
    oos_recall: float
    oos_precision: float
    macro_f1: float

    @property
    def harmonic_mean(self) -> float:
        """Of in-scope accuracy and OOS recall: the ``balanced`` objective."""
        return harmonic_mean(self.in_scope_accuracy, self.oos_recall)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "in_scope": self.in_scope,
            "out_of_scope": self.out_of_scope,
            "in_scope_accuracy": round(self.in_scope_accuracy, 4),
            "oos_recall": round(self.oos_recall, 4),
            "harmonic_mean": round(self.harmonic_mean, 4),
            "oos_precision": round(self.oos_precision, 4),
            "macro_f1": round(self.macro_f1, 4),
        }


@dataclass(frozen=True, slots=True)
class FitReport:
    """What :meth:`IntentRouter.fit` chose, and how the router did on the fit data."""

    calibration: Calibration
    objective: str
    before: RoutingMetrics
    after: RoutingMetrics

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.calibration.to_dict(),
            "objective": self.objective,
            "per_intent_thresholds": len(self.calibration.per_intent),
            "before": self.before.to_dict(),
            "after": self.after.to_dict(),
        }


def routing_metrics(gold: Sequence[str], predicted: Sequence[str | None]) -> RoutingMetrics:
    """Metrics for predictions (``None``: refused) vs gold labels (``"oos"``: out of scope)."""
    if len(gold) != len(predicted):
        raise UsageError("gold and predicted labels differ in length")
    pred = [OUT_OF_SCOPE if p is None else p for p in predicted]
    n_in = sum(g != OUT_OF_SCOPE for g in gold)
    n_oos = len(gold) - n_in
    correct_in = sum(g == p for g, p in zip(gold, pred, strict=True) if g != OUT_OF_SCOPE)
    detected = sum(p == OUT_OF_SCOPE for g, p in zip(gold, pred, strict=True) if g == OUT_OF_SCOPE)
    refused = sum(p == OUT_OF_SCOPE for p in pred)
    f1s = []
    for label in sorted(set(gold) | set(pred)):
        tp = sum(g == label and p == label for g, p in zip(gold, pred, strict=True))
        fp = sum(g != label and p == label for g, p in zip(gold, pred, strict=True))
        fn = sum(g == label and p != label for g, p in zip(gold, pred, strict=True))
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return RoutingMetrics(
        n=len(gold),
        in_scope=n_in,
        out_of_scope=n_oos,
        in_scope_accuracy=correct_in / n_in if n_in else 0.0,
        oos_recall=detected / n_oos if n_oos else 0.0,
        oos_precision=detected / refused if refused else 0.0,
        macro_f1=sum(f1s) / len(f1s) if f1s else 0.0,
    )


def _top_two(scores: Matrix) -> TopTwo:
    if scores.shape[1] == 1:
        n = scores.shape[0]
        zeros_i = np.zeros(n, dtype=np.int64)
        return zeros_i, scores[:, 0], np.full(n, -1, dtype=np.int64), np.full(n, -np.inf)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :2]
    rows = np.arange(scores.shape[0])
    return order[:, 0], scores[rows, order[:, 0]], order[:, 1], scores[rows, order[:, 1]]


def decide(
    scores: Matrix, thresholds: npt.NDArray[np.float64], margin: float
) -> npt.NDArray[np.int64]:
    """Vectorised decisions: the chosen column per row, or -1 for a refusal.

    ``thresholds`` holds one threshold per column (intent).
    """
    return _decide(_top_two(scores), thresholds, margin)


def _decide(
    top_two: TopTwo, thresholds: npt.NDArray[np.float64], margin: float
) -> npt.NDArray[np.int64]:
    top, top_s, second, second_s = top_two
    passes = top_s >= thresholds[top]
    second_passes = (second >= 0) & (second_s >= thresholds[np.maximum(second, 0)])
    exact_tie = (second >= 0) & (second_s == top_s)  # never broken by column order
    tie = exact_tie | (second_passes & (top_s - second_s < margin))
    return np.where(passes & ~tie, top, -1)


def _objective_value(
    gold_idx: npt.NDArray[np.int64],
    chosen: npt.NDArray[np.int64],
    objective: Objective,
    oos_share: float = 0.5,
) -> float:
    in_scope = gold_idx >= 0
    acc = float((chosen[in_scope] == gold_idx[in_scope]).mean()) if in_scope.any() else 0.0
    rec = float((chosen[~in_scope] == -1).mean()) if (~in_scope).any() else 0.0
    if objective == "balanced":
        return harmonic_mean(acc, rec)
    if objective == "accuracy":
        return (1 - oos_share) * acc + oos_share * rec
    # macro F1 over intents present and the out-of-scope class (-1)
    labels = np.union1d(np.unique(gold_idx), np.unique(chosen))
    f1 = []
    for label in labels:
        tp = int(((gold_idx == label) & (chosen == label)).sum())
        fp = int(((gold_idx != label) & (chosen == label)).sum())
        fn = int(((gold_idx == label) & (chosen != label)).sum())
        f1.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return float(np.mean(f1))


def calibrate(
    scores: Matrix,
    gold: Sequence[str],
    labels: Sequence[str],
    *,
    objective: Objective = DEFAULT_OBJECTIVE,
    oos_share: float = 0.25,
    per_intent: bool = True,
    min_gain: float = 0.005,
) -> Calibration:
    """The threshold, margin and per-intent thresholds that do best on ``(scores, gold)``
    for ``objective`` (see :data:`Objective`; ``oos_share`` applies to ``accuracy``)."""
    if objective not in OBJECTIVES:
        raise UsageError(f"unknown objective {objective!r}; choose accuracy, balanced or macro_f1")
    if not (0 < oos_share < 1):
        raise UsageError(f"oos_share must be between 0 and 1, got {oos_share!r}")
    index = {label: i for i, label in enumerate(labels)}
    unknown = sorted({g for g in gold if g != OUT_OF_SCOPE and g not in index})
    if unknown:
        raise UsageError(f"labels with no intent in the router: {', '.join(unknown[:5])}")
    if OUT_OF_SCOPE not in gold:
        raise UsageError(
            f"calibration needs out-of-scope examples (label {OUT_OF_SCOPE!r}) "
            "to choose a threshold"
        )
    if not any(g != OUT_OF_SCOPE for g in gold):
        raise UsageError("calibration needs in-scope examples too")
    gold_idx = np.array([index.get(g, -1) for g in gold], dtype=np.int64)
    k = len(labels)
    top_two = _top_two(scores)
    top, top_s = top_two[0], top_two[1]
    candidates = np.unique(np.quantile(top_s, np.linspace(0, 1, 201)))
    candidates = np.concatenate([[float(top_s.min()) - 1e-9], candidates])
    best = (-1.0, 0.0, 0.0)
    for margin in MARGINS:
        for t in candidates:
            value = _objective_value(
                gold_idx, _decide(top_two, np.full(k, t), margin), objective, oos_share
            )
            # on ties the first found wins: the smaller margin, then the lower threshold
            if value > best[0] + 1e-12:
                best = (value, float(t), margin)
    value, threshold, margin = best
    thresholds = np.full(k, threshold)
    chosen_per_intent: dict[str, float] = {}
    if per_intent:
        # greedy, one intent after the other: by name, so the intents' order in the
        # training file does not choose which thresholds are kept
        for j in sorted(range(k), key=lambda i: labels[i]):
            label = labels[j]
            mine = top_s[top == j]
            if mine.size == 0:
                continue
            base = value
            best_t = threshold
            for t in np.unique(np.concatenate([mine - 1e-9, mine])):
                trial = thresholds.copy()
                trial[j] = t
                v = _objective_value(
                    gold_idx, _decide(top_two, trial, margin), objective, oos_share
                )
                if v > base + 1e-12:
                    base, best_t = v, float(t)
            if base - value >= min_gain:
                thresholds[j] = best_t
                chosen_per_intent[label] = best_t
                value = base
    return Calibration(threshold, margin, chosen_per_intent)
