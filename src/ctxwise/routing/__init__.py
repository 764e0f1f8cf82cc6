"""Intent routing: classify a query, with a confidence threshold and a top-2
margin, and refuse rather than guess."""

from ctxwise.routing.calibration import (
    OUT_OF_SCOPE,
    Calibration,
    FitReport,
    RoutingMetrics,
    calibrate,
    routing_metrics,
)
from ctxwise.routing.decision import Intent, RouteDecision, RouteReason
from ctxwise.routing.keyword import KeywordClassifier
from ctxwise.routing.router import IntentRouter
from ctxwise.routing.scorers import (
    SCORERS,
    BowScorer,
    EmbeddingScorer,
    HybridScorer,
    LexicalScorer,
    Scorer,
    make_scorer,
)

__all__ = [
    "OUT_OF_SCOPE",
    "SCORERS",
    "BowScorer",
    "Calibration",
    "EmbeddingScorer",
    "FitReport",
    "HybridScorer",
    "Intent",
    "IntentRouter",
    "KeywordClassifier",
    "LexicalScorer",
    "RouteDecision",
    "RouteReason",
    "RoutingMetrics",
    "Scorer",
    "calibrate",
    "make_scorer",
    "routing_metrics",
]
