"""Scorer options that do not apply to the chosen scorer are refused, not ignored."""

from __future__ import annotations

import json
from pathlib import Path

from tests._cli import assert_usage_error, run


def _rows(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text(
        "".join(json.dumps({"text": t, "label": g}) + "\n" for t, g in rows), encoding="utf-8"
    )
    return path


def test_head_applies_to_the_embedding_scorer_only(tmp_path: Path) -> None:
    words = ["refund my order", "where is my parcel", "cancel the plan", "reset my password"]
    labels = ["refund", "shipping", "cancel", "account"]
    pairs = list(zip(words, labels, strict=True))
    train = _rows(tmp_path / "train.jsonl", pairs * 3)
    fit = _rows(tmp_path / "fit.jsonl", [*pairs, ("tell me a joke", "oos")])
    out = tmp_path / "router.json"
    for scorer in ("bow", "hybrid"):
        result = run(
            "router", "build", "--train", train, "--fit-on", fit, "--out", out,
            "--scorer", scorer, "--head", "linear",
        )  # fmt: skip
        assert_usage_error(result, "--head applies to the embedding scorer", scorer)
        assert not out.exists()
        result = run(
            "eval", "routing", "--train", train, "--test", fit, "--scorer", scorer,
            "--head", "linear",
        )  # fmt: skip
        assert_usage_error(result, "--head applies to the embedding scorer", scorer)
    built = run(
        "router", "build", "--train", train, "--fit-on", fit, "--out", out,
        "--scorer", "embedding", "--head", "linear",
    )  # fmt: skip
    assert built.exit_code == 0, built.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["scorer"]["params"]["head"] == "linear"
