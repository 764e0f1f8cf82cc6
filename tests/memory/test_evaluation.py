"""Recall evaluation: the LoCoMo converter and the eval CLI on the real dev set."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxwise.memory.evaluation import evaluate_recall, load_conversations, locomo_to_generic
from tests.conftest import DATA

LOCOMO = DATA / "locomo" / "locomo_dev5.json"


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
    assert conv["questions"] == [
        {"question": "What pet?", "evidence": ["D1:1", "D1:2"], "category": "1"}
    ]


@pytest.mark.data
def test_recall_on_locomo_dev(data_dir: Path) -> None:
    data = load_conversations(LOCOMO)
    assert sum(len(c["questions"]) for c in data["conversations"]) > 700
    result = evaluate_recall(data, (1, 10))
    assert {"n", "recall_at", "by_category", "baselines", "p50_ms", "p99_ms"} <= set(result)
    assert set(result["by_category"]) == {"1", "2", "3", "4"}
    lexical = result["baselines"]["lexical"]["recall_at"]["10"]
    assert lexical > 0.6  # BM25 over turns in context (the plain-BM25 reference: 0.525)
    assert result["recall_at"]["1"] <= result["recall_at"]["10"]


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
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert set(json.loads(out.stdout)["recall_at"]) == {"1", "5"}
    bad = subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", "eval", "memory", "--data", str(LOCOMO), "--k", "x"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("ctxwise: error:")
