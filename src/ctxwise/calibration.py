"""Counters against what the provider counted: scoring and fitting on usage steps.

A :class:`~ctxwise.formats.usage.UsageStep` holds messages added to a request and
the provider's count of them. :func:`score_counter` replays every step through a
counter (``count_messages`` of the added messages, without the counter's
per-request overhead, which the delta does not hold) and reports the ratio of the
summed estimates to the summed deltas and the percentiles of the per-step relative
error ``|estimate - delta| / delta``. :func:`fit_anthropic` fits the coefficients
of :class:`~ctxwise.tokens.CalibratedAnthropicCounter` on steps, and
:func:`leave_one_out` fits on every group of steps but one and scores the one left
out, in turn, so a reported error is never measured on the data it was fit on.

The fit minimises the squared relative error (each step weighted by the inverse
of its delta, so a large tool result does not outweigh a hundred small steps),
with every coefficient at least zero, by cyclic coordinate descent: deterministic,
numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxwise.errors import UsageError
from ctxwise.formats.usage import UsageStep
from ctxwise.messages import Message
from ctxwise.tokens import (
    AnthropicCalibration,
    AnthropicTokenizer,
    CalibratedAnthropicCounter,
    TokenCounter,
)

__all__ = [
    "CounterScore",
    "HeldOut",
    "fit_anthropic",
    "group_claude_code_files",
    "leave_one_out",
    "percentile",
    "pooled",
    "score_counter",
    "score_estimates",
    "step_estimate",
]

FIT_ROUNDS = 4000
"""Coordinate-descent sweeps of :func:`fit_anthropic` (it stops earlier once no
coefficient moves)."""


@dataclass(frozen=True, slots=True)
class CounterScore:
    """A counter's estimates against the provider's deltas over some steps."""

    counter: str
    steps: int
    estimate: int
    """The summed estimates."""
    provider: int
    """The summed deltas."""
    ratio: float
    """``estimate / provider``."""
    p50: float
    p90: float
    p95: float
    """Percentiles of the per-step relative error ``|estimate - delta| / delta``."""
    median_signed: float
    """The median of ``(estimate - delta) / delta``: below 0, the counter undercounts."""

    def as_dict(self) -> dict[str, float | int | str]:
        """The fields as JSON keys (the percentiles as ``p50_error``, ``p90_error``,
        ``p95_error``)."""
        return {
            "counter": self.counter,
            "steps": self.steps,
            "estimate": self.estimate,
            "provider": self.provider,
            "ratio": self.ratio,
            "p50_error": self.p50,
            "p90_error": self.p90,
            "p95_error": self.p95,
            "median_signed": self.median_signed,
        }


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of ``values``, interpolated between closest ranks (as
    numpy's default); ``nan`` for no values."""
    if not values:
        return math.nan
    return float(np.percentile(np.asarray(values, dtype=float), q))


def step_estimate(counter: TokenCounter, added: Sequence[Message]) -> int:
    """The counter's estimate of messages appended to a request: ``count_messages``
    without its per-request overhead (``request_overhead``, when it has one)."""
    overhead = getattr(counter, "request_overhead", 0)
    n = counter.count_messages(added)
    return n - overhead if isinstance(overhead, int) and n else n


def score_estimates(name: str, estimates: Sequence[int], deltas: Sequence[int]) -> CounterScore:
    """The :class:`CounterScore` of ``estimates`` against ``deltas`` (same order)."""
    if not deltas or len(estimates) != len(deltas):
        raise UsageError("no usage steps to score (or estimates and deltas of different lengths)")
    signed = [(e - d) / d for e, d in zip(estimates, deltas, strict=True)]
    rel = [abs(x) for x in signed]
    return CounterScore(
        name,
        len(deltas),
        int(sum(estimates)),
        int(sum(deltas)),
        sum(estimates) / sum(deltas),
        percentile(rel, 50),
        percentile(rel, 90),
        percentile(rel, 95),
        percentile(signed, 50),
    )


def score_counter(counter: TokenCounter, steps: Sequence[UsageStep]) -> CounterScore:
    """``counter``'s estimate of every step against the provider's delta.

    Raises:
        UsageError: no steps.
    """
    estimates = [step_estimate(counter, s.added) for s in steps]
    return score_estimates(counter.name, estimates, [s.delta for s in steps])


def _nonnegative_weighted_lstsq(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``argmin_c Σ w²(xc - y)²`` subject to ``c ≥ 0``, by cyclic coordinate descent."""
    a = x * w[:, None]
    b = y * w
    scale = np.sqrt((a**2).sum(axis=0))
    scale[scale == 0] = 1.0  # a feature absent from every step keeps coefficient 0
    a = a / scale
    gram = a.T @ a
    rhs = a.T @ b
    c = np.zeros(x.shape[1])
    for _ in range(FIT_ROUNDS):
        moved = 0.0
        for k in range(len(c)):
            if gram[k, k] <= 0:
                continue
            value = max(0.0, (rhs[k] - gram[k] @ c + gram[k, k] * c[k]) / gram[k, k])
            moved = max(moved, abs(value - c[k]))
            c[k] = value
        if moved < 1e-12:
            break
    return np.asarray(c / scale)


def fit_anthropic(
    steps: Sequence[UsageStep], tokenizer: AnthropicTokenizer = "chars", *, provenance: str = ""
) -> AnthropicCalibration:
    """The calibration of ``tokenizer`` fit on ``steps`` (see the module docstring).

    Raises:
        UsageError: no steps.
        MissingDependencyError: ``o200k`` without the ``tiktoken`` extra.
    """
    if not steps:
        raise UsageError("no usage steps to fit on")
    probe = CalibratedAnthropicCounter(tokenizer, calibration=AnthropicCalibration.zeros(tokenizer))
    rows, targets = [], []
    for s in steps:
        feats, media = probe.features(s.added)
        rows.append(feats)
        targets.append(max(float(s.delta - media), 1.0))
    x = np.asarray(rows, dtype=float)
    y = np.asarray([float(s.delta) for s in steps])
    coef = _nonnegative_weighted_lstsq(x, np.asarray(targets), 1.0 / y)
    return AnthropicCalibration.from_coefficients(
        tokenizer, [round(float(v), 6) for v in coef], provenance
    )


@dataclass(frozen=True, slots=True)
class HeldOut:
    """A calibration fit without one group, and its estimates of that group."""

    calibration: AnthropicCalibration
    score: CounterScore
    estimates: tuple[int, ...]
    deltas: tuple[int, ...]


def leave_one_out(
    groups: Mapping[str, Sequence[UsageStep]],
    tokenizer: AnthropicTokenizer = "chars",
    *,
    also_train: Sequence[UsageStep] = (),
) -> dict[str, HeldOut]:
    """For each group, the calibration fit on every other group (and
    ``also_train``, steps never held out) and its score on this one.

    Raises:
        UsageError: fewer than two groups with steps.
    """
    named = {g: list(s) for g, s in groups.items() if s}
    if len(named) < 2:
        raise UsageError("leave-one-out needs at least two groups of usage steps")
    out = {}
    for held, test in named.items():
        train = [s for g, steps in named.items() if g != held for s in steps]
        cal = fit_anthropic([*train, *also_train], tokenizer, provenance=f"fit without {held}")
        counter = CalibratedAnthropicCounter(tokenizer, calibration=cal)
        estimates = tuple(step_estimate(counter, s.added) for s in test)
        deltas = tuple(s.delta for s in test)
        out[held] = HeldOut(
            cal, score_estimates(counter.name, estimates, deltas), estimates, deltas
        )
    return out


def pooled(name: str, held_out: Mapping[str, HeldOut]) -> CounterScore:
    """One score over every group's held-out estimates."""
    estimates = [e for h in held_out.values() for e in h.estimates]
    deltas = [d for h in held_out.values() for d in h.deltas]
    return score_estimates(name, estimates, deltas)


def group_claude_code_files(paths: Sequence[Path]) -> dict[str, list[Path]]:
    """Claude Code files grouped by session: ``<dir>/<id>.jsonl`` with the
    subagent files under ``<dir>/<id>/subagents/`` after it; a file of neither shape
    is its own group (by its stem). Groups are sorted by name."""
    groups: dict[str, list[Path]] = {}
    for path in sorted(paths, key=lambda p: (p.parent.name == "subagents", str(p))):
        key = path.parent.parent.name if path.parent.name == "subagents" else path.stem
        groups.setdefault(key, []).append(path)
    return dict(sorted(groups.items()))
