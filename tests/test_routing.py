from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise import FormatError, OutputError, UsageError
from ctxwise.routing import (
    BowScorer,
    EmbeddingScorer,
    Intent,
    IntentRouter,
    KeywordClassifier,
    RouteReason,
    calibrate,
    routing_metrics,
)
from ctxwise.routing.calibration import harmonic_mean
from tests._routers import saved_arrays


def _two_topic_router(topics: tuple[str, str]) -> IntentRouter:
    """A hashing-embedding router (it saves arrays) over two of four small topics."""
    examples = {
        "billing": ["refund my payment", "send the invoice"],
        "cancel": ["cancel my subscription", "close the account"],
        "weather": ["will it rain", "how hot is it"],
        "music": ["play a song", "next track please"],
    }
    router = IntentRouter(EmbeddingScorer("hashing"), threshold=0.1)
    for topic in topics:
        router.add(topic, examples[topic])
    return router


def billing_router(**kwargs: float) -> IntentRouter:
    router = IntentRouter(BowScorer(), **kwargs)
    router.add("billing", keywords=["refund", "charge", "invoice", "payment", "money"])
    router.add("cancel", keywords=["cancel", "charge", "subscription", "stop", "account"])
    return router


class TestIssueExamples:
    def test_tie_names_both(self) -> None:
        d = billing_router().route("cancel and refund charge")
        assert d.reason is RouteReason.AMBIGUOUS_TIE
        assert d.label is None and d.refused
        assert set(d.candidates) == {"billing", "cancel"}
        assert "billing or cancel" in d.explain() or "cancel or billing" in d.explain()

    def test_clear_billing(self) -> None:
        d = billing_router().route("I need a refund for my invoice payment")
        assert d.reason is RouteReason.MATCH and d.label == "billing"
        assert d.runner_up == "cancel" and d.score > d.runner_up_score

    def test_low_confidence(self) -> None:
        d = billing_router().route("what is the weather in Lisbon")
        assert d.reason is RouteReason.LOW_CONFIDENCE and d.label is None

    def test_no_intents(self) -> None:
        d = IntentRouter().route("anything")
        assert d.reason is RouteReason.NO_INTENTS and d.label is None


def test_bow_cosine_is_shared_vocabulary_over_norms() -> None:
    router = IntentRouter(BowScorer())
    router.add("a", ["red red blue"])
    router.add("b", ["green"])
    d = router.route("red blue blue")
    # q = {red:1, blue:2}, a = {red:2, blue:1}: dot 4, norms sqrt5*sqrt5
    assert d.scores["a"] == pytest.approx(4 / 5)
    assert d.scores["b"] == 0.0


def test_an_intent_scores_its_best_example() -> None:
    router = IntentRouter(BowScorer(), threshold=0.5)
    router.add("pay", ["pay my bill", "what do I owe this month"])
    router.add("other", ["tell me a joke"])
    assert router.route("what do I owe").label == "pay"


@given(
    st.lists(
        st.sampled_from(["refund", "cancel", "charge", "stop", "money", "hello", "x"]),
        min_size=1,
        max_size=8,
    )
)
def test_decisions_are_consistent(words: list[str]) -> None:
    router = billing_router()
    d = router.route(" ".join(words))
    if d.reason is RouteReason.MATCH:
        assert d.label == d.top and d.score >= d.threshold
        assert d.score - d.runner_up_score >= d.margin or d.runner_up_score < d.threshold
    else:
        assert d.label is None
    assert max(d.scores.values()) == d.score


class TestBadInput:
    def test_queries(self) -> None:
        router = billing_router()
        with pytest.raises(UsageError, match="empty"):
            router.route("   ")
        with pytest.raises(UsageError, match="exceeds"):
            router.route("refund " * 200_000)

    def test_intents(self) -> None:
        router = billing_router()
        with pytest.raises(UsageError, match="duplicate"):
            router.add("billing", ["x"])
        with pytest.raises(UsageError, match="no utterances"):
            router.add("empty")
        with pytest.raises(UsageError, match="no utterances"):
            Intent("blank", ("  ",))
        with pytest.raises(UsageError, match="reserved"):
            router.add("oos", ["x"])

    def test_settings(self) -> None:
        with pytest.raises(UsageError):
            IntentRouter(threshold=float("nan"))
        with pytest.raises(UsageError):
            IntentRouter(margin=-0.1)
        with pytest.raises(UsageError):
            EmbeddingScorer(head="tree")


class TestPersistence:
    def test_round_trip(self, tmp_path: Path) -> None:
        router = billing_router(threshold=0.25, margin=0.1)
        router.add_negatives(["tell me a joke"])
        path = tmp_path / "router.json"
        router.save(path)
        loaded = IntentRouter.load(path)
        for q in ["cancel and refund charge", "I need a refund", "stop my account", "hello"]:
            assert loaded.route(q).to_dict() == router.route(q).to_dict()
        data = json.loads(path.read_text())
        assert data["format"] == "ctxwise-router" and data["version"] == 2
        assert data["state"] is None  # bag of words: nothing fitted, no arrays file
        assert saved_arrays(path) is None
        assert [p.name for p in tmp_path.iterdir()] == ["router.json"]

    def test_version_1_files_load_and_refit(self, tmp_path: Path) -> None:
        router = billing_router(threshold=0.25, margin=0.1)
        doc = router.to_dict()
        doc["version"] = 1
        del doc["state"]
        path = tmp_path / "v1.json"
        path.write_text(json.dumps(doc))
        loaded = IntentRouter.load(path)
        assert (
            loaded.route("I need a refund").to_dict() == router.route("I need a refund").to_dict()
        )

    def test_hashing_embedding_scorer_is_restored_not_refitted(self, tmp_path: Path) -> None:
        router = IntentRouter(EmbeddingScorer("hashing"), threshold=0.1)
        router.add("billing", ["refund my payment", "send the invoice"])
        router.add("cancel", ["cancel my subscription", "close the account"])
        path = tmp_path / "emb.json"
        router.save(path)
        arrays = saved_arrays(path)
        assert arrays is not None and arrays.is_file()
        loaded = IntentRouter.load(path)
        assert loaded._fitted  # restored from the arrays
        for q in ["refund the invoice", "close it", "weather"]:
            assert loaded.route(q).to_dict() == router.route(q).to_dict()

    def test_save_refuses_stdout_and_missing_folders(self, tmp_path: Path) -> None:
        router = IntentRouter(EmbeddingScorer("hashing"))
        router.add("a", ["hello there"])
        router.add("b", ["goodbye now"])
        with pytest.raises(UsageError, match="two files"):
            router.save("-")
        with pytest.raises(OutputError, match="does not exist"):
            router.save(tmp_path / "missing" / "r.json")
        with pytest.raises(OutputError, match="directory"):
            router.save(tmp_path)
        assert list(tmp_path.iterdir()) == []

    def test_a_failed_save_leaves_the_earlier_router_loadable(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import ctxwise.routing.router as module

        old = IntentRouter(EmbeddingScorer("hashing"), threshold=0.1)
        old.add("billing", ["refund my payment", "send the invoice"])
        old.add("cancel", ["cancel my subscription", "close the account"])
        path = tmp_path / "r.json"
        old.save(path)
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
        new = IntentRouter(EmbeddingScorer("hashing"), threshold=0.1)
        new.add("weather", ["will it rain", "how hot is it"])
        new.add("music", ["play a song", "next track please"])
        real = module.write_output

        def fail_on_the_json(target: object, data: bytes) -> None:
            if Path(str(target)) == path:
                raise OutputError(str(path), "disk full")
            real(target, data)  # type: ignore[arg-type]

        monkeypatch.setattr(module, "write_output", fail_on_the_json)
        with pytest.raises(OutputError, match="disk full"):
            new.save(path)
        monkeypatch.undo()
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
        assert IntentRouter.load(path).route("refund the invoice").label == "billing"

    def test_a_save_killed_between_its_two_files_leaves_the_earlier_router_loadable(
        self, tmp_path: Path
    ) -> None:
        # the process dies (no clean-up runs) after the new arrays are written and
        # before the JSON is: the old JSON must still find the old arrays
        path = tmp_path / "r.json"
        _two_topic_router(("billing", "cancel")).save(path)
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
        script = f"""
import os, sys
from pathlib import Path
sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
import ctxwise.routing.router as module
from tests.test_routing import _two_topic_router
real = module.write_output
def die_on_the_json(target, data):
    if Path(str(target)) == Path({str(path)!r}):
        os._exit(9)
    real(target, data)
module.write_output = die_on_the_json
_two_topic_router(("weather", "music")).save({str(path)!r})
"""
        import subprocess
        import sys

        done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
        assert done.returncode == 9, done.stderr
        after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
        assert {k: v for k, v in after.items() if k in before} == before
        assert len(after) == len(before) + 1  # the new arrays, named by their content
        assert IntentRouter.load(path).route("refund the invoice").label == "billing"

    def test_saving_again_replaces_the_arrays_and_removes_the_old_ones(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "r.json"
        first = _two_topic_router(("billing", "cancel"))
        first.save(path)
        old = saved_arrays(path)
        first.save(path)  # the same arrays: the same file, kept
        assert saved_arrays(path) == old and old is not None and old.is_file()
        _two_topic_router(("weather", "music")).save(path)
        new = saved_arrays(path)
        assert new != old and sorted(p.name for p in tmp_path.iterdir()) == sorted(
            ["r.json", new.name]  # type: ignore[union-attr]
        )
        assert IntentRouter.load(path).route("will it rain").label == "weather"

    def test_save_never_writes_over_or_removes_a_file_it_did_not_write(
        self, tmp_path: Path
    ) -> None:
        router = _two_topic_router(("billing", "cancel"))
        probe = tmp_path / "probe"
        probe.mkdir()
        router.save(probe / "r.json")
        name = saved_arrays(probe / "r.json").name  # type: ignore[union-attr]
        # a file of the arrays' name that holds something else is refused, untouched
        (tmp_path / name).write_bytes(b"someone else's data")
        with pytest.raises(OutputError, match="is not these arrays"):
            router.save(tmp_path / "r.json")
        assert (tmp_path / name).read_bytes() == b"someone else's data"
        assert not (tmp_path / "r.json").exists()
        (tmp_path / name).unlink()
        # a router file naming another file as its arrays: saving over it keeps that file
        (tmp_path / "notes.txt").write_text("keep me")
        doc = json.loads((probe / "r.json").read_text())
        doc["state"]["file"] = "notes.txt"
        (tmp_path / "r.json").write_text(json.dumps(doc))
        router.save(tmp_path / "r.json")
        assert (tmp_path / "notes.txt").read_text() == "keep me"
        assert IntentRouter.load(tmp_path / "r.json").route("refund my payment").label == "billing"

    @pytest.mark.parametrize(
        ("doc", "match"),
        [
            ({"format": "ctxwise-router", "version": 99}, "version 99"),
            ({"format": "ctxwise-router", "version": True}, "version True"),
            ([1, 2], "not a ctxwise router"),
            ({"format": "something-else", "version": 1}, "not a ctxwise router"),
            ({"format": "ctxwise-router", "version": 1}, "malformed"),
            (
                {
                    "format": "ctxwise-router",
                    "version": 1,
                    "scorer": {"name": "bow"},
                    "calibration": {"threshold": 0.3, "margin": 0.05},
                    "intents": [
                        {"name": "a", "utterances": ["x"]},
                        {"name": "a", "utterances": ["y"]},
                    ],
                },
                "duplicate",
            ),
        ],
    )
    def test_bad_files(self, tmp_path: Path, doc: dict, match: str) -> None:  # type: ignore[type-arg]
        path = tmp_path / "r.json"
        path.write_text(json.dumps(doc))
        with pytest.raises((FormatError, UsageError), match=match):
            IntentRouter.load(path)


class TestCalibration:
    def test_fit_chooses_a_threshold_that_refuses_out_of_scope(self) -> None:
        router = IntentRouter(BowScorer(), threshold=0.0, margin=0.0)
        router.add("billing", ["refund my payment", "I was charged twice", "send the invoice"])
        router.add("cancel", ["cancel my subscription", "stop my account", "close the account"])
        labeled = [
            ("refund the payment please", "billing"),
            ("charged twice on my card", "billing"),
            ("cancel the subscription", "cancel"),
            ("please stop my account", "cancel"),
            ("what's the weather like", "oos"),
            ("tell me a joke about my account", "oos"),
            ("play some music", "oos"),
        ]
        report = router.fit(labeled, per_intent=False)
        assert report.after.oos_recall == 1.0 and report.after.in_scope_accuracy == 1.0
        assert report.before.oos_recall < 1.0
        assert router.calibration.threshold > 0
        assert router.route("play some jazz music").refused

    def test_fit_needs_out_of_scope_examples(self) -> None:
        router = billing_router()
        with pytest.raises(UsageError, match="out-of-scope"):
            router.fit([("refund", "billing")])
        with pytest.raises(UsageError, match="no intent"):
            router.fit([("refund", "billing"), ("x", "shipping"), ("y", "oos")])

    def test_metrics(self) -> None:
        m = routing_metrics(["a", "a", "b", "oos", "oos"], ["a", None, "b", None, "a"])
        assert m.in_scope_accuracy == pytest.approx(2 / 3)
        assert m.oos_recall == 0.5 and m.oos_precision == 0.5

    def test_balanced_is_the_harmonic_mean_and_the_default(self) -> None:
        assert harmonic_mean(0.9, 0.6) == pytest.approx(0.72)
        assert harmonic_mean(0.0, 0.0) == 0.0
        m = routing_metrics(["a", "b", "oos", "oos"], ["a", None, None, "a"])
        assert m.harmonic_mean == pytest.approx(harmonic_mean(0.5, 0.5))
        assert m.to_dict()["harmonic_mean"] == 0.5
        router = billing_router()
        report = router.fit([("refund payment", "billing"), ("stop it", "cancel"), ("hi", "oos")])
        assert report.objective == "balanced"

    def test_calibrate_validates(self) -> None:
        import numpy as np

        with pytest.raises(UsageError, match="objective"):
            calibrate(np.zeros((1, 1)), ["oos"], ["a"], objective="recall")  # type: ignore[arg-type]


class TestKeywordClassifier:
    def test_precedence_and_default(self) -> None:
        c = KeywordClassifier(
            [("coding", ["bug", "test"]), ("factual", ["what", "is"])], default="factual"
        )
        assert c.route("What is this bug?").label == "coding"
        assert c.route("hello there").label == "factual"
        assert (
            KeywordClassifier([("a", ["x"])]).route("nothing").reason is RouteReason.LOW_CONFIDENCE
        )
        with pytest.raises(UsageError):
            KeywordClassifier([("a", ["x"]), ("a", ["y"])])


class TestExactTies:
    """Two intents that score exactly the same are never told apart by the order
    they were added in: the router refuses and names both."""

    @staticmethod
    def twins(order: tuple[str, str], **kwargs: float) -> IntentRouter:
        router = IntentRouter(BowScorer(), **kwargs)
        for name in order:
            router.add(name, ["reset my password"])  # the same utterance in two intents
        return router

    @pytest.mark.parametrize("order", [("a", "b"), ("b", "a")])
    def test_a_tie_refuses_with_a_margin_of_zero(self, order: tuple[str, str]) -> None:
        d = self.twins(order, threshold=0.3, margin=0.0).route("reset my password")
        assert d.reason is RouteReason.AMBIGUOUS_TIE and d.label is None
        assert set(d.candidates) == {"a", "b"}
        assert "tie at 1.000" in d.explain()

    @pytest.mark.parametrize("order", [("a", "b"), ("b", "a")])
    def test_a_tie_with_per_intent_thresholds_does_not_depend_on_order(
        self, order: tuple[str, str]
    ) -> None:
        from ctxwise.routing.calibration import Calibration

        router = self.twins(order, threshold=0.3, margin=0.05)
        router.calibration = Calibration(0.3, 0.05, {"b": 1.5})  # b cannot pass alone
        d = router.route("reset my password")
        assert d.reason is RouteReason.AMBIGUOUS_TIE and set(d.candidates) == {"a", "b"}

    def test_fit_metrics_count_a_tie_as_a_refusal(self) -> None:
        import numpy as np

        from ctxwise.routing.calibration import decide

        scores = np.array([[0.5, 0.5], [0.5, 0.4], [0.0, 0.0]])
        assert decide(scores, np.array([0.3, 0.3]), 0.0).tolist() == [-1, 0, -1]
        assert decide(scores, np.array([0.3, 0.9]), 0.0).tolist() == [-1, 0, -1]
        assert decide(scores, np.array([0.9, 0.3]), 0.0).tolist() == [-1, -1, -1]
        assert decide(scores, np.array([-1.0, -1.0]), 0.0).tolist() == [-1, 0, -1]


class FixedScorer:
    """A scorer that gives every query the same row of scores."""

    def __init__(self, row: list[float]) -> None:
        self.row = row
        self._labels: tuple[str, ...] = ()

    name = "fixed"

    @property
    def labels(self) -> tuple[str, ...]:
        return self._labels

    def fit(self, intents: object, negatives: object = ()) -> None:
        self._labels = tuple(i.name for i in intents)  # type: ignore[attr-defined]

    def scores(self, queries: list[str]) -> object:
        import numpy as np

        return np.array([self.row] * len(queries), dtype=float)

    def params(self) -> dict[str, object]:
        return {}


class TestScorerOutput:
    @pytest.mark.parametrize(
        ("row", "match"),
        [
            ([float("nan"), float("nan")], "nan"),
            ([0.9, float("nan")], "'b' the score nan"),
            ([float("inf"), float("inf")], "inf"),
            ([float("-inf"), 0.2], "-inf"),
            ([0.5], "shape"),
        ],
    )
    def test_a_score_that_is_not_a_finite_number_is_refused(
        self, row: list[float], match: str
    ) -> None:
        router = IntentRouter(FixedScorer(row))  # type: ignore[arg-type]
        router.add("a", ["x"])
        router.add("b", ["y"])
        with pytest.raises(UsageError, match=match):
            router.route("anything")
        with pytest.raises(UsageError, match=match):
            router.fit([("x", "a"), ("q", "oos")])


class TestThreads:
    def test_the_first_routes_from_several_threads_fit_once(self) -> None:
        import threading
        import time

        class SlowBow(BowScorer):
            fits = 0

            def fit(self, intents: object, negatives: object = ()) -> None:
                SlowBow.fits += 1
                time.sleep(0.05)  # a fit takes a while: every thread arrives during it
                super().fit(intents, negatives)  # type: ignore[arg-type]

        router = IntentRouter(SlowBow())
        router.add("billing", ["refund my payment", "send the invoice"])
        router.add("cancel", ["cancel my subscription", "close the account"])
        start = threading.Barrier(8)
        decisions: list[str | None] = []

        def work() -> None:
            start.wait()
            decisions.append(router.route("refund the invoice").label)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert SlowBow.fits == 1
        assert decisions == ["billing"] * 8

    def test_a_router_still_copies_and_pickles(self) -> None:
        import copy
        import pickle

        router = billing_router()
        for clone in (copy.deepcopy(router), pickle.loads(pickle.dumps(router))):
            assert clone.route("refund my invoice").label == "billing"
            clone.add("shipping", ["where is my parcel"])  # its own lock and intents
            assert clone.route("where is my parcel").label == "shipping"
        assert [i.name for i in router.intents] == ["billing", "cancel"]


class TestKeywordNormalization:
    def test_keywords_are_read_as_the_query_is(self) -> None:
        c = KeywordClassifier([("travel", ["Straße", "ﬁle", "Credit Card"])])
        assert c.route("which STRASSE is it").label == "travel"
        assert c.route("open the file").label == "travel"
        assert c.route("my credit card was declined").label == "travel"
        assert c.route("a card for credit").label is None  # the words, in order

    @pytest.mark.parametrize(
        ("rules", "match"),
        [
            ([("a", "refund")], "not a string"),
            ([("a", ["refund", "  "])], "no word"),
            ([("a", ["?!"])], "no word"),
            ([("a", [3])], "not a string"),
            ([("", ["x"])], "non-empty label"),
        ],
    )
    def test_bad_rules(self, rules: list[tuple[str, object]], match: str) -> None:
        with pytest.raises(UsageError, match=match):
            KeywordClassifier(rules)  # type: ignore[arg-type]


class TestExampleShapes:
    def test_negatives_must_be_a_list_of_strings(self) -> None:
        router = billing_router()
        with pytest.raises(UsageError, match="not a string"):
            router.add_negatives("tell me a joke")  # was read letter by letter
        with pytest.raises(UsageError, match="must be a string"):
            router.add_negatives(["tell me a joke", None])  # type: ignore[list-item]
        assert router.to_dict()["negatives"] == []

    @pytest.mark.parametrize(
        "rows",
        [
            [("refund",)],
            [("refund", "billing", "extra")],
            [("refund", None)],
            [(3, "billing")],
            ["refund billing"],
            "refund",
        ],
    )
    def test_labeled_examples_must_be_pairs_of_strings(self, rows: object) -> None:
        with pytest.raises(UsageError, match=r"\(text, label\) pair"):
            billing_router().fit(rows)  # type: ignore[arg-type]
        with pytest.raises(UsageError, match=r"\(text, label\) pair"):
            IntentRouter.from_labeled(rows)  # type: ignore[arg-type]


def test_a_router_file_with_a_utf8_byte_order_mark_loads(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    billing_router().save(path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    assert IntentRouter.load(path).route("I need a refund for my invoice").label == "billing"


def test_a_match_in_a_one_intent_router_names_no_runner_up() -> None:
    router = IntentRouter(BowScorer())
    router.add("greeting", ["hello there"])
    d = router.route("hello there")
    assert d.label == "greeting" and d.runner_up is None
    assert d.explain() == "'greeting' scored 1.000 (threshold 0.300), the only intent"
