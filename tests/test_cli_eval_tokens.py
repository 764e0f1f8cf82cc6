"""``ctxwise eval tokens``: counters against the provider's recorded deltas."""

from __future__ import annotations

import json
from pathlib import Path

from tests._cli import assert_usage_error, ok_json, run

SUBAGENT = "transcripts/claude_code/subagent.jsonl"


def test_scores_each_counter_on_a_real_file(data_dir: Path) -> None:
    out = ok_json(
        "eval", "tokens", data_dir / SUBAGENT, "--counter", "char", "--counter", "anthropic:chars"
    )
    assert out["steps"] == 11 and out["skipped"] == {}
    assert [f["calls"] for f in out["files"]] == [12]
    names = [c["counter"] for c in out["counters"]]
    assert names == ["char", "anthropic:chars"]
    for c in out["counters"]:
        assert c["steps"] == 11 and c["provider"] > 0
        assert c["ratio"] == c["estimate"] / c["provider"]
        assert 0 <= c["p50_error"] <= c["p90_error"] <= c["p95_error"]


def test_the_default_counters_and_the_table(data_dir: Path) -> None:
    out = ok_json("eval", "tokens", data_dir / SUBAGENT)
    names = {c["counter"] for c in out["counters"]} | set(out["not_installed"])
    assert {"char", "anthropic:chars"} <= names
    result = run("eval", "tokens", data_dir / SUBAGENT)
    assert result.exit_code == 0
    assert "anthropic:chars" in result.stdout.replace("\n", "")


def test_skipped_pairs_are_counted(data_dir: Path, tmp_path: Path) -> None:
    lines = (data_dir / SUBAGENT).read_text(encoding="utf-8").split("\n")
    # drop the usage of every line of the second response: two pairs lose a side
    ids = []
    for i, line in enumerate(lines):
        if line.strip() and json.loads(line).get("type") == "assistant":
            event = json.loads(line)
            mid = event["message"]["id"]
            if mid not in ids:
                ids.append(mid)
            if len(ids) == 2 and mid == ids[1]:
                del event["message"]["usage"]
                lines[i] = json.dumps(event)
    path = tmp_path / "no-usage.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    out = ok_json("eval", "tokens", path, "--counter", "char")
    assert out["skipped"] == {"missing_usage": 2}
    assert out["steps"] == 9


def test_bad_input_exits_2_with_one_line(data_dir: Path, tmp_path: Path) -> None:
    assert_usage_error(run("eval", "tokens", tmp_path / "missing.jsonl"), "no such file")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"type": "user", "message": {"role": "user", "content": "hi"}}\n{cut', encoding="utf-8"
    )
    assert_usage_error(run("eval", "tokens", bad), "bad.jsonl")
    one_call = data_dir / "transcripts/claude_code/short.jsonl"
    assert_usage_error(run("eval", "tokens", one_call), "no usage steps")
    assert_usage_error(
        run("eval", "tokens", data_dir / SUBAGENT, "--counter", "bpe"), "unknown counter"
    )
