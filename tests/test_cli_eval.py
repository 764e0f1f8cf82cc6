"""The ``eval`` commands say what they ran, and refuse what they cannot honour.

Every ``eval`` command puts the embedder, preset, store and counts it used in its
output; a combination that cannot be honoured exits 2 with one line naming the flag
to add; model vectors are kept in the embedding cache between runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests._cli import assert_usage_error, ok_json, run
from tests._stores import fresh_schema, postgres_dsn
from tests.conftest import DATA

LOCOMO = DATA / "locomo" / "locomo_dev5.json"


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first LoCoMo conversation, with three of its questions, and two that
    cannot be scored (an evidence id naming no turn, and none) and one of category 5."""
    if not LOCOMO.is_file():
        pytest.skip(f"LoCoMo not found at {LOCOMO} (set CTXWISE_DATA)")
    sample = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]
    qa = [q for q in sample["qa"] if q.get("category") in (1, 2, 4)][:3]
    qa += [
        {"question": "Where did they meet?", "evidence": ["D99:1"], "category": 2},
        {"question": "Which colour?", "evidence": [], "category": 4},
        {"question": "Adversarial", "evidence": ["D1:1"], "category": 5},
    ]
    path = tmp_path_factory.mktemp("locomo") / "one.json"
    path.write_text(json.dumps([{**sample, "qa": qa}]), encoding="utf-8")
    return path


def test_eval_memory_says_what_it_ran_and_what_it_skipped(small: Path) -> None:
    result = ok_json("eval", "memory", "--data", small, "--k", "1,5")
    assert result["n"] == 3 and result["skipped"] == 2
    assert (result["embedder"], result["preset"], result["store"]) == (
        "hashing:1024",
        "neutral",
        "sqlite",
    )
    assert result["schema"] is None and result["embedding_cache"] is None  # hashing: none
    assert result["excluded"] == {"category 5": 1}
    reasons = {q["text"]: q["reason"] for q in result["skipped_questions"]}
    assert "'D99:1'" in reasons["Where did they meet?"]
    assert reasons["Which colour?"] == "it has no evidence"
    text = run("eval", "memory", "--data", small, "--k", "1,5")
    assert text.exit_code == 0
    assert "skipped 2 question(s)" in text.stdout and "1 question(s) of category 5" in text.stdout


def test_eval_handoff_takes_the_memory_options_and_says_what_it_ran(small: Path) -> None:
    result = ok_json("eval", "handoff", "--data", small, "--budget", "2000", "--preset", "dialogue")
    assert result["preset"] == "dialogue" and result["embedder"] == "hashing:1024"
    assert result["scorer"] == "hybrid:hashing:1024:dialogue"
    assert result["n"] == 3 and result["skipped"] == 2 and result["counter"] == "char"
    neutral = ok_json("eval", "handoff", "--data", small, "--budget", "2000")
    assert neutral["scorer"] == "hybrid:hashing:1024:neutral"


@pytest.mark.parametrize("command", ["memory", "handoff"])
def test_a_preset_for_another_embedder_is_refused_naming_the_flag(
    small: Path, command: str
) -> None:
    for more in ([], ["--embedder", "hashing:256"]):
        result = run("eval", command, "--data", small, "--preset", "dialogue-minilm", *more)
        assert_usage_error(result, "--preset dialogue-minilm", "--embedder minilm")


def test_options_that_do_not_apply_are_refused(small: Path, tmp_path: Path) -> None:
    result = run("eval", "memory", "--data", small, "--schema", "mine")
    assert_usage_error(result, "--schema", "PostgreSQL")
    cache = tmp_path / "e.sqlite"
    result = run(
        "eval", "memory", "--data", small, "--embedding-cache", cache, "--no-embedding-cache"
    )
    assert_usage_error(result, "--embedding-cache", "--no-embedding-cache")
    assert not cache.exists()
    train = tmp_path / "train.jsonl"
    train.write_text('{"text": "refund", "label": "a"}\n{"text": "parcel", "label": "b"}\n')
    result = run(
        "eval", "routing", "--train", train, "--test", train, "--scorer", "lexical",
        "--embedding-cache", cache,
    )  # fmt: skip
    assert_usage_error(result, "--embedding-cache")


def test_the_default_hybrid_embedder_missing_names_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # without the minilm extra, --scorer hybrid (MiniLM by default) said only what to
    # install, not that --embedder hashing runs without it
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails
    train = tmp_path / "train.jsonl"
    train.write_text('{"text": "refund", "label": "a"}\n{"text": "parcel", "label": "b"}\n')
    result = run("eval", "routing", "--train", train, "--test", train, "--scorer", "hybrid")
    assert_usage_error(result, "minilm", "--embedder hashing")
    # an embedder the user named is theirs to fix: no hint to change it
    result = run(
        "eval", "routing", "--train", train, "--test", train, "--scorer", "embedding",
        "--embedder", "minilm",
    )  # fmt: skip
    assert_usage_error(result, "minilm")
    assert "--embedder hashing" not in result.stderr


def test_a_schema_of_another_dimension_names_schema(small: Path) -> None:
    dsn = postgres_dsn()
    schema = fresh_schema()
    first = ok_json("eval", "memory", "--data", small, "--store", dsn, "--schema", schema)
    assert first["store"] == "postgresql" and first["schema"] == schema
    result = run(
        "eval", "memory", "--data", small, "--store", dsn, "--schema", schema,
        "--embedder", "hashing:256",
    )  # fmt: skip
    assert_usage_error(result, "1024-dimensional", "hashing:256", "--schema")
    other = fresh_schema()
    second = ok_json(
        "eval", "memory", "--data", small, "--store", dsn, "--schema", other,
        "--embedder", "hashing:256",
    )  # fmt: skip
    assert second["embedder"] == "hashing:256" and second["n"] == first["n"]
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in (schema, other):
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
