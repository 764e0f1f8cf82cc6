"""What a router decides, and why."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ctxwise.errors import UsageError

__all__ = ["Intent", "RouteDecision", "RouteReason"]


class RouteReason(StrEnum):
    MATCH = "match"
    """The top intent passed its threshold and no runner-up came within the margin."""
    LOW_CONFIDENCE = "low_confidence"
    """The top score is below the threshold: refuse rather than guess."""
    AMBIGUOUS_TIE = "ambiguous_tie"
    """Two intents both pass their thresholds within the margin, or the top two score
    exactly the same and either passes its threshold: ask which one."""
    NO_INTENTS = "no_intents"
    """The router has no intents to choose from."""


@dataclass(frozen=True, slots=True)
class Intent:
    """A named intent with example utterances and/or keywords."""

    name: str
    utterances: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise UsageError("an intent needs a non-empty name")
        for what, items in (("utterances", self.utterances), ("keywords", self.keywords)):
            if not isinstance(items, tuple) or not all(isinstance(u, str) for u in items):
                raise UsageError(f"intent {self.name!r}: {what} must be a list of strings")
        if not any(u.strip() for u in (*self.utterances, *self.keywords)):
            raise UsageError(f"intent {self.name!r} has no utterances and no keywords")

    @classmethod
    def build(
        cls, name: str, utterances: Sequence[str] = (), keywords: Sequence[str] = ()
    ) -> Intent:
        for what, items in (("utterances", utterances), ("keywords", keywords)):
            if isinstance(items, str | bytes):
                raise UsageError(f"intent {name!r}: {what} must be a list of strings, not a string")
        return cls(name, tuple(utterances), tuple(keywords))

    def examples(self) -> list[str]:
        """Utterances, plus the keywords as one more example when there are any."""
        out = [u for u in self.utterances if u.strip()]
        if self.keywords:
            out.append(" ".join(self.keywords))
        return out


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """A routing decision. ``label`` is ``None`` whenever the router refuses.

    On ``ambiguous_tie`` both candidates are named (``candidates``) so the caller
    can ask "cancel, or refund?".
    """

    label: str | None
    score: float
    runner_up: str | None
    runner_up_score: float
    reason: RouteReason
    scores: Mapping[str, float] = field(default_factory=dict)
    threshold: float = 0.0
    margin: float = 0.0
    top: str | None = None

    @property
    def refused(self) -> bool:
        return self.label is None

    @property
    def candidates(self) -> tuple[str, ...]:
        """The intents a clarifying question should offer (top two on a tie)."""
        if self.reason is RouteReason.AMBIGUOUS_TIE and self.top and self.runner_up:
            return (self.top, self.runner_up)
        return (self.label,) if self.label else ()

    def explain(self) -> str:
        if self.reason is RouteReason.NO_INTENTS:
            return "no intents are registered"
        if self.reason is RouteReason.LOW_CONFIDENCE:
            return (
                f"refused: best intent {self.top!r} scored {self.score:.3f}, "
                f"below the threshold {self.threshold:.3f}"
            )
        if self.reason is RouteReason.AMBIGUOUS_TIE:
            if self.score == self.runner_up_score:
                return (
                    f"refused: {self.top!r} and {self.runner_up!r} tie at {self.score:.3f}; "
                    f"ask: {self.top} or {self.runner_up}?"
                )
            return (
                f"refused: {self.top!r} ({self.score:.3f}) and {self.runner_up!r} "
                f"({self.runner_up_score:.3f}) are within the margin {self.margin:.3f}; "
                f"ask: {self.top} or {self.runner_up}?"
            )
        if self.runner_up is None:
            return (
                f"{self.label!r} scored {self.score:.3f} (threshold {self.threshold:.3f}), "
                "the only intent"
            )
        return (
            f"{self.label!r} scored {self.score:.3f} (threshold {self.threshold:.3f}), "
            f"{self.score - self.runner_up_score:.3f} ahead of {self.runner_up!r}"
        )

    def to_dict(self, top_scores: int | None = 10) -> dict[str, Any]:
        ranked = sorted(self.scores.items(), key=lambda kv: -kv[1])
        if top_scores is not None:
            ranked = ranked[:top_scores]
        return {
            "label": self.label,
            "reason": self.reason.value,
            "score": round(self.score, 6),
            "top": self.top,
            "runner_up": self.runner_up,
            "runner_up_score": round(self.runner_up_score, 6),
            "threshold": round(self.threshold, 6),
            "margin": round(self.margin, 6),
            "candidates": list(self.candidates),
            "scores": {k: round(v, 6) for k, v in ranked},
            "explanation": self.explain(),
        }
