"""Recall evaluation: the LoCoMo converter and the eval CLI on the real dev set."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxwise.embeddings import Embedder, HashingEmbedder
from ctxwise.errors import FormatError, UsageError
from ctxwise.handoff.evaluation import evaluate_handoff
from ctxwise.memory import PRESETS, InMemoryStore, SQLiteStore, Store
from ctxwise.memory.evaluation import (
    HeldOut,
    evaluate_recall,
    held_out_recall,
    load_conversations,
    locomo_to_generic,
)
from tests._cli import assert_usage_error, ok_json, run
from tests._embedders import minilm
from tests.conftest import DATA
from tests.memory.conftest import DIM

LOCOMO = DATA / "locomo" / "locomo_dev5.json"

# A small grid around both dialogue presets (bench_presets.py scores the whole
# one): what a test can choose from on four conversations and score on the fifth
GRID = [
    {"successor_share": share, "mention_boost": 1.0, "weights": (1.0, w), "rrf_k": k}
    for share in (0.5, 0.7)
    for w in (0.1, 0.25, 0.5)
    for k in (10, 20)
]


def _held_out(embedder: Embedder | None = None) -> dict[str, HeldOut]:
    """Hybrid, lexical-only and vector-only recall@10 on LoCoMo dev, each with its
    own setting chosen from GRID on four conversations and scored on the fifth."""
    data = load_conversations(LOCOMO)
    return {
        mode: held_out_recall(
            data, GRID, mode=mode, embedder=embedder, options={"preset": "dialogue"}
        )
        for mode in ("hybrid", "lexical", "vector")
    }


def test_locomo_converter_parses_malformed_evidence() -> None:
    sample = {
        "sample_id": "c1",
        "conversation": {
            "session_1_date_time": "1 May 2023",
            "session_1": [
                {"speaker": "A", "dia_id": "D1:1", "text": "I adopted a dog named Rex"},
                {"speaker": "B", "dia_id": "D1:2", "text": "Lovely!"},
            ],
        },
        "qa": [
            {"question": "What pet?", "evidence": ["D1:1; D1:2"], "category": 1},
            {"question": "Bad ids", "evidence": ["D:11:26", "D30:05", "D"], "category": 2},
            {"question": "Adversarial", "evidence": ["D1:1"], "category": 5},
        ],
    }
    out = locomo_to_generic([sample])
    conv = out["conversations"][0]
    assert [t["id"] for t in conv["turns"]] == ["D1:1", "D1:2"] and conv["turns"][0][
        "date"
    ] == "1 May 2023"
    # a question none of whose ids names a turn is kept, without evidence, so the
    # evaluations count it as skipped and say why; category 5 is counted as excluded
    assert conv["questions"] == [
        {"question": "What pet?", "evidence": ["D1:1", "D1:2"], "category": "1"},
        {
            "question": "Bad ids",
            "evidence": [],
            "category": "2",
            "unresolved_evidence": ["D:11:26", "D30:05", "D"],
        },
    ]
    assert out["excluded"] == {"category 5": 1}


def test_locomo_evidence_with_leading_zeros_names_its_turn() -> None:
    # upstream writes one evidence id as "D30:05" for the turn D30:5: it was dropped,
    # with its question, and counted nowhere (775 questions where BM25 scored 776)
    turns = [{"speaker": "A", "dia_id": f"D30:{n}", "text": f"turn {n}"} for n in range(1, 7)]
    sample = {
        "sample_id": "c1",
        "conversation": {"session_30": turns},
        "qa": [
            {"question": "Which turn?", "evidence": ["D30:05"], "category": 4},
            {"question": "Both?", "evidence": ["D030:1; D30:006"], "category": 1},
        ],
    }
    (conv,) = locomo_to_generic([sample])["conversations"]
    assert [q["evidence"] for q in conv["questions"]] == [["D30:5"], ["D30:1", "D30:6"]]


def test_skipped_questions_are_listed_with_their_reason(tmp_path: Path) -> None:
    sample = {
        "sample_id": "c1",
        "conversation": {"session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "a dog"}]},
        "qa": [
            {"question": "Which pet?", "evidence": ["D1:1"], "category": 1},
            {"question": "Unknown turn", "evidence": ["D9:9"], "category": 2},
            {"question": "None given", "evidence": [], "category": 3},
            {"question": "Adversarial", "evidence": ["D1:1"], "category": 5},
        ],
    }
    data = locomo_to_generic([sample])
    result = evaluate_recall(data, [1])
    assert result["n"] == 1 and result["skipped"] == 2
    assert [(q["question"], q["text"]) for q in result["skipped_questions"]] == [
        (2, "Unknown turn"),
        (3, "None given"),
    ]
    reasons = [q["reason"] for q in result["skipped_questions"]]
    assert "'D9:9'" in reasons[0] and "names no turn" in reasons[0]
    assert reasons[1] == "it has no evidence"
    assert result["excluded"] == {"category 5": 1}
    handoff = evaluate_handoff(data, 200)
    assert handoff["skipped_questions"] == result["skipped_questions"]
    assert handoff["n"] == result["n"] and handoff["excluded"] == result["excluded"]


def test_locomo_categories_written_as_strings_are_read() -> None:
    # a file converted through strings ("category": "1") lost every question and
    # evaluated to n=0 without a word; a JSON true is no category (True == 1)
    sample = {
        "sample_id": "c1",
        "conversation": {"session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "a dog"}]},
        "qa": [
            {"question": "Which pet?", "evidence": ["D1:1"], "category": "1"},
            {"question": "Adversarial", "evidence": ["D1:1"], "category": "5"},
            {"question": "Odd", "evidence": ["D1:1"], "category": True},
        ],
    }
    (conv,) = locomo_to_generic([sample])["conversations"]
    assert conv["questions"] == [{"question": "Which pet?", "evidence": ["D1:1"], "category": "1"}]


def test_locomo_converter_reads_image_captions_only() -> None:
    turn = {
        "speaker": "Mel",
        "dia_id": "D1:1",
        "text": "Take a look at this.",
        "blip_caption": "a photo of a painting of a sunset over a lake",
        "query": "painting sunrise",
    }
    sample = {"sample_id": "c", "conversation": {"session_1": [turn]}, "qa": []}
    with_caption = locomo_to_generic([sample])["conversations"][0]["turns"][0]["text"]
    assert with_caption == (
        "Take a look at this. [shares a photo of a painting of a sunset over a lake]"
    )
    assert "sunrise" not in with_caption  # the image search query is never used
    plain = locomo_to_generic([sample], captions=False)["conversations"][0]["turns"][0]
    assert plain["text"] == "Take a look at this."


SMALL = {
    "conversations": [
        {
            "id": "c1",
            "turns": [
                {
                    "id": "D1:1",
                    "speaker": "Ann",
                    "text": "I adopted a dog named Rex",
                    "date": "1 May",
                },
                {"id": "D1:2", "speaker": "Bob", "text": "Lovely! What breed?", "date": "1 May"},
                {"id": "D1:3", "speaker": "Ann", "text": "A beagle", "date": "1 May"},
                {"id": "D2:1", "speaker": "Bob", "text": "I started pottery", "date": "9 May"},
            ],
            "questions": [
                {"question": "What breed is Ann's dog?", "evidence": ["D1:3"], "category": "4"},
                {"question": "What did Bob start?", "evidence": ["D2:1"], "category": "4"},
            ],
        }
    ]
}


def test_evaluate_recall_reports_its_settings_and_takes_options() -> None:
    result = evaluate_recall(SMALL, (1, 2))
    assert result["n"] == 2 and result["recall_at"]["2"] == 1.0
    assert result["settings"]["context"] == 2 and result["embedder"] == "hashing:1024"
    changed = evaluate_recall(SMALL, (1,), options={"context": 0, "weights": (1.0, 0.0)})
    assert changed["settings"]["context"] == 0 and changed["settings"]["weights"] == [1.0, 0.0]
    with pytest.raises(UsageError, match="unknown memory option"):
        evaluate_recall(SMALL, (1,), options={"contxt": 0})


@pytest.mark.data
def test_recall_on_locomo_dev(data_dir: Path) -> None:
    data = load_conversations(LOCOMO)
    assert sum(len(c["questions"]) for c in data["conversations"]) > 700
    neutral = evaluate_recall(data, (1, 10))
    assert neutral["settings"]["preset"] == "neutral"
    result = evaluate_recall(data, (1, 10), options={"preset": "dialogue"})
    assert {"n", "recall_at", "by_category", "baselines", "p50_ms", "p99_ms"} <= set(result)
    assert set(result["by_category"]) == {"1", "2", "3", "4"}
    # issue 4's offline target is 0.60 (README: the figures per preset)
    assert neutral["recall_at"]["10"] >= 0.70
    # the preset's figures on the conversations it was chosen on are not held: each
    # mode's setting is chosen on four conversations and scored on the fifth, the
    # baselines from the same grid cut to what they read (issue 28)
    held = _held_out()
    hybrid, lexical, vector = (held[m].recall for m in ("hybrid", "lexical", "vector"))
    assert all(h.n == result["n"] for h in held.values())  # every question held out once
    assert hybrid > neutral["recall_at"]["10"]  # the preset is worth having on dialogue
    # the weak hashing vector ranking does not cost recall (nor, fit alike, add any:
    # on bench_presets' whole grid lexical-only is level with it)
    assert hybrid >= lexical - 0.01
    assert hybrid > vector
    # the preset ships what the grid chooses on all five (an in-sample choice)
    preset = PRESETS["dialogue"]
    assert held["hybrid"].best_on_all == {
        "successor_share": preset.successor_share,
        "mention_boost": preset.mention_boost,
        "weights": preset.weights,
        "rrf_k": preset.rrf_k,
    }
    assert result["recall_at"]["1"] <= result["recall_at"]["10"]


@pytest.mark.data
def test_recall_on_locomo_dev_with_minilm(data_dir: Path) -> None:
    embedder = minilm()  # each text embedded once across the three runs
    # the dialogue preset's vector weight (0.1) was chosen with the hashing embedder;
    # dialogue-minilm is the same grid's best with MiniLM (bench_presets.py
    # --embedder minilm), whose ranking is worth more
    # held out: each mode's setting chosen from GRID on four conversations, scored on
    # the fifth (issue 28; issue 11's 0.78 was a figure on the five it was chosen on)
    held = _held_out(embedder)
    hybrid = held["hybrid"].recall
    best_single = max(held["lexical"].recall, held["vector"].recall)
    # beats each baseline fit the same way (by less than the point it led by when the
    # baselines ran with the hybrid's tuned settings)
    assert hybrid > best_single
    hashing_weights = evaluate_recall(
        load_conversations(LOCOMO), (10,), embedder=embedder, options={"preset": "dialogue"}
    )
    assert hybrid > hashing_weights["recall_at"]["10"]  # choosing with MiniLM is worth it
    # the neutral default: 0.748 against 0.714 for lexical alone (+3.4 points)
    neutral = evaluate_recall(load_conversations(LOCOMO), (10,), embedder=embedder)
    lexical = neutral["baselines"]["lexical"]["recall_at"]["10"]
    assert neutral["recall_at"]["10"] >= lexical + 0.02


@pytest.mark.data
def test_eval_memory_cli(data_dir: Path, tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxwise.cli",
            "eval",
            "memory",
            "--data",
            str(LOCOMO),
            "--k",
            "1,5",
            "--preset",
            "dialogue",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert set(result["recall_at"]) == {"1", "5"} and result["settings"]["preset"] == "dialogue"
    unknown = subprocess.run(
        [
            *(sys.executable, "-m", "ctxwise.cli", "eval", "memory", "--data", str(LOCOMO)),
            *("--preset", "locomo"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert unknown.returncode == 2 and "unknown recall preset" in unknown.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", "eval", "memory", "--data", str(LOCOMO), "--k", "x"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("ctxwise: error:")


@functools.cache
def _reference(preset: str) -> float:
    result = evaluate_recall(
        load_conversations(LOCOMO),
        (10,),
        embedder=HashingEmbedder(DIM),
        store_factory=InMemoryStore,
        options={"preset": preset},
    )
    return float(result["recall_at"]["10"])


@pytest.mark.data
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("preset", ["neutral", "dialogue"])
def test_every_store_recalls_locomo_alike(
    data_dir: Path, tmp_path: Path, backend: str, preset: str
) -> None:
    """Issue 11: SQLite and PostgreSQL within 0.01 of the in-memory store, for both
    presets (evaluate_recall closes the store it is given)."""
    factory: Callable[[], Store] = lambda: SQLiteStore(tmp_path / "eval.db")  # noqa: E731
    schema = f"t_{uuid.uuid4().hex[:12]}"
    if backend == "postgres":
        dsn = os.environ.get("CTXWISE_PG_DSN")
        if not dsn:
            pytest.skip("no PostgreSQL: set CTXWISE_PG_DSN")
        pytest.importorskip("psycopg", reason="needs the postgres extra")
        from ctxwise.memory.postgres import PostgresStore

        factory = lambda: PostgresStore(dsn, dim=DIM, schema=schema)  # noqa: E731
    try:
        result = evaluate_recall(
            load_conversations(LOCOMO),
            (10,),
            embedder=HashingEmbedder(DIM),
            store_factory=factory,
            options={"preset": preset},
        )
    finally:
        if backend == "postgres":
            store = factory()
            store.drop()  # type: ignore[attr-defined]
            store.close()
    assert result["settings"]["preset"] == preset
    assert abs(result["recall_at"]["10"] - _reference(preset)) <= 0.01


@pytest.mark.parametrize(
    "data",
    [
        {"conversations": []},
        {"conversations": [{"id": "c1", "turns": [{"speaker": "a", "text": "hi"}]}]},
        {"conversations": [{"turns": [{"id": "t1"}], "questions": [{"evidence": ["t1"]}]}]},
        {
            "conversations": [
                {"turns": [{"id": "t1"}], "questions": [{"question": "q", "evidence": "t1"}]}
            ]
        },
    ],
    ids=["empty", "turn-without-id", "question-without-text", "evidence-not-a-list"],
)
def test_a_malformed_generic_file_is_a_format_error(tmp_path: Path, data: object) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(FormatError) as err:
        load_conversations(path)
    assert str(path) in str(err.value)


def _write(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _conv(turns: list[Any], questions: list[Any]) -> dict[str, Any]:
    return {"conversations": [{"id": "c", "turns": turns, "questions": questions}]}


SECRET = [{"id": "t1", "speaker": "A", "text": "the secret code is pineapple"}]


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (
            {
                "conversations": [
                    {"id": "c", "turns": [{"id": "a", "text": "x"}], "questions": []},
                    {"id": "c", "turns": [{"id": "b", "text": "y"}], "questions": []},
                ]
            },
            ("two conversations have the id 'c'",),
        ),
        (
            _conv(
                SECRET,
                [{"question": "code?", "evidence": ["t1"]}, {"question": "q", "evidence": ["x"]}],
            ),
            ("conversation 'c'", "question 2's evidence names unknown turn 'x'"),
        ),
        (_conv([], [{"question": "q", "evidence": []}]), ("conversation 'c' has no turns",)),
        (
            _conv([{"id": "a", "text": ""}, {"id": "b", "text": "  "}], []),
            ("conversation 'c' has no turns to remember",),
        ),
    ],
    ids=["duplicate-id", "unknown-evidence", "no-turns", "only-empty-turns"],
)
def test_conversations_eval_cannot_use_are_refused_in_one_line(
    tmp_path: Path, data: object, words: tuple[str, ...]
) -> None:
    """Both eval commands refuse them alike: one line naming the file (no traceback,
    no 'unknown namespace', no silent overwrite of the first conversation)."""
    path = _write(tmp_path, "conversations.json", data)
    with pytest.raises(FormatError) as err:
        load_conversations(path)
    assert str(path) in str(err.value)
    for command in ("memory", "handoff"):
        for extra in ([], ["--json"]):
            assert_usage_error(run("eval", command, "--data", path, *extra), str(path), *words)


def test_questions_without_evidence_are_skipped_and_counted_by_both_evals(
    tmp_path: Path,
) -> None:
    """A question with no or empty evidence was a ZeroDivisionError in eval memory;
    both evals now leave it out of every figure and say how many they skipped."""
    data = _conv(
        SECRET,
        [
            {"question": "hello?"},
            {"question": "nothing", "evidence": []},
            {"question": "what is the secret code?", "evidence": ["t1"]},
        ],
    )
    path = _write(tmp_path, "noevid.json", data)
    memory = ok_json("eval", "memory", "--data", path)
    handoff = ok_json("eval", "handoff", "--data", path)
    for result in (memory, handoff):
        assert result["n"] == 1 and result["skipped"] == 2
    assert memory["recall_at"]["1"] == 1.0 and handoff["evidence_recall"] == 1.0
    only = _write(tmp_path, "only.json", _conv(SECRET, [{"question": "hello?"}]))
    assert ok_json("eval", "memory", "--data", only)["skipped"] == 1


def test_integer_turn_ids_match_as_strings_in_both_evals(tmp_path: Path) -> None:
    data = _conv(
        [
            {"id": 1, "speaker": "A", "text": "the secret code is pineapple"},
            {"id": 2, "text": "ok"},
        ],
        [{"question": "what is the secret code?", "evidence": [1]}],
    )
    path = _write(tmp_path, "intids.json", data)
    assert ok_json("eval", "memory", "--data", path, "--k", "1")["recall_at"]["1"] == 1.0
    assert ok_json("eval", "handoff", "--data", path)["evidence_recall"] == 1.0


def test_a_namespace_holding_other_items_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    """Run twice on one SQLite file with different data: the first run's items were
    recalled in the second (wrong recall). Now the second is refused, naming the
    store and namespace, and the store is left as it was; a rerun of the same
    data still works."""
    db = tmp_path / "persist.db"
    url = f"sqlite:///{db}"
    first = _write(
        tmp_path,
        "run1.json",
        _conv(
            [{"id": "old1", "text": "the secret code is pineapple"}],
            [{"question": "what is the secret code?", "evidence": ["old1"]}],
        ),
    )
    ok = _conv([{"id": "a", "text": "some other talk"}], [{"question": "talk", "evidence": ["a"]}])
    second = _write(
        tmp_path,
        "run2.json",
        {
            "conversations": [
                {**ok["conversations"][0], "id": "fresh"},
                {
                    "id": "c",
                    "turns": [{"id": "new1", "text": "hello there"}, {"id": "new2", "text": "no"}],
                    "questions": [{"question": "what is the secret code?", "evidence": ["new1"]}],
                },
            ]
        },
    )
    assert ok_json("eval", "memory", "--data", first, "--store", url)["recall_at"]["1"] == 1.0
    again = ok_json("eval", "memory", "--data", first, "--store", url)  # the same data: fine
    assert again["recall_at"]["1"] == 1.0
    assert_usage_error(
        run("eval", "memory", "--data", second, "--store", url), str(db), "'eval/c'", "holds 1"
    )
    store = SQLiteStore(db)
    try:
        assert store.namespaces() == [("eval", "c")]  # 'fresh' was not written either
        assert [it.id for it in store.recent(("eval", "c"), 10)] == ["old1"]
    finally:
        store.close()
    with pytest.raises(UsageError, match="eval/c"):
        evaluate_recall(load_conversations(second), (1,), store_factory=lambda: SQLiteStore(db))
