"""``ctxwise replay --cost``: every turn priced with the provider's cache simulated,
beside what a Claude Code recording was billed (issue 30 item 5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxwise.formats.usage import claude_code_billed
from ctxwise.pricing import cost_usd, price_for
from tests._cli import assert_usage_error, ok_json, run
from tests.conftest import DATA, long_sessions

FIXTURE = DATA / "transcripts" / "claude_code" / "tool_heavy.jsonl"


def fixture() -> Path:
    if not FIXTURE.is_file():
        pytest.skip(f"shared data not found at {DATA} (set CTXWISE_DATA)")
    return FIXTURE


def test_a_claude_code_recording_is_priced_beside_what_it_was_billed() -> None:
    path = fixture()
    data = ok_json("replay", path, "--budget", "100000", "--cost", "--repair")
    cost = data["cost"]
    billed, _ = claude_code_billed(path.read_text(encoding="utf-8"))
    assert cost["recorded_calls"] == len(billed) > 0
    expected = sum(cost_usd(c.split, price_for(c.model)) or 0.0 for c in billed)
    assert cost["recorded_usd"] == pytest.approx(expected)
    # priced at the model the recording used, per turn and in total
    models = {c.model for c in billed}
    assert cost["model"] in models
    assert len(cost["turns"]) == data["turns"]
    assert cost["usd"] == pytest.approx(sum(t["usd"] for t in cost["turns"]))
    total = cost["total"]
    assert total["cache_read"] == sum(t["cache_read"] for t in cost["turns"])
    assert any(t["recorded"] is not None for t in cost["turns"])
    assert data["over_budget_turns"] == 0


def test_a_model_without_a_price_is_unknown_in_json_and_text() -> None:
    path = fixture()
    data = ok_json(
        "replay", path, "--budget", "100000", "--cost", "--repair", "--model", "my-model"
    )
    assert data["cost"]["model"] == "my-model"
    assert data["cost"]["usd"] is None
    assert all(t["usd"] is None for t in data["cost"]["turns"])
    shown = run("replay", path, "--budget", "100000", "--cost", "--repair", "--model", "my-model")
    assert shown.exit_code == 0
    assert "unknown" in shown.stdout and "$0.0000" not in shown.stdout.split("in total")[-1]


def test_without_cost_the_report_has_none() -> None:
    data = ok_json("replay", fixture(), "--budget", "100000", "--repair")
    assert data["cost"] is None


def test_an_empty_model_is_refused_in_one_line() -> None:
    assert_usage_error(
        run("replay", fixture(), "--budget", "1000", "--cost", "--model", " "), "--model"
    )


@pytest.mark.data
def test_every_long_session_replays_with_its_recorded_cost_beside() -> None:
    sessions = long_sessions()
    if not sessions:
        pytest.skip(f"shared data not found at {DATA} (set CTXWISE_DATA)")
    for path in sessions[:1]:  # one here; bench_costs runs all three
        data = ok_json("replay", path, "--budget", "50000", "--cost", "--repair")
        assert data["cost"]["recorded_calls"] > 100
        assert data["over_budget_turns"] == 0
        assert data["cost"]["usd"] is not None and data["cost"]["recorded_usd"] is not None
