"""``ctxwise simulate``: a real subprocess, JSON keys, the table, exit code 2 on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ctxwise import simulate_compaction

ISSUE_ARGS = [
    "--start-tokens", "12000", "--growth", "6000", "--calls", "60",
    "--summary-tokens", "8000", "--trigger", "150000",
]  # fmt: skip


def ctxwise(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "120", "NO_COLOR": "1"},
    )


def test_compaction_json_matches_the_library() -> None:
    out = ctxwise("simulate", "compaction", *ISSUE_ARGS, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {"with_compaction", "without_compaction", "compactions", "summary_calls"} <= set(data)
    sim = simulate_compaction(
        start_tokens=12_000, growth=6_000, calls=60, summary_tokens=8_000, trigger=150_000
    )
    assert data == sim.to_dict()
    assert data["without_compaction"] == 11_340_000
    assert abs(data["with_compaction"] - 4_850_000) / 4_850_000 <= 0.02


def test_compaction_cache_json_and_table() -> None:
    out = ctxwise("simulate", "compaction", *ISSUE_ARGS, "--cache-read-factor", "0.1", "--json")
    assert out.returncode == 0, out.stderr
    cache = json.loads(out.stdout)["cache"]
    assert cache["read_factor"] == 0.1 and cache["write_factor"] == 1.25
    assert cache["with_compaction"]["cost"] < cache["without_compaction"]["cost"]
    table = ctxwise("simulate", "compaction", *ISSUE_ARGS, "--cache-read-factor", "0.1")
    assert table.returncode == 0, table.stderr
    for text in ("without compaction", "11,340,000", "with compaction", "cost with cache"):
        assert text in table.stdout


def test_clearing() -> None:
    args = ["--context-tokens", "100000", "--cleared-tokens", "30000", "--edit-point-tokens"]
    out = ctxwise("simulate", "clearing", *args, "20000", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["calls_to_break_even"] == 19
    text = ctxwise("simulate", "clearing", *args, "20000")
    assert "pays after 19 more call(s)" in text.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["compaction", *ISSUE_ARGS[:-2], "--trigger", "8000"],
        ["compaction", *ISSUE_ARGS, "--calls", "0"],
        ["compaction", *ISSUE_ARGS, "--growth", "-1"],
        ["compaction", *ISSUE_ARGS, "--cache-read-factor", "2"],
        ["compaction", "--start-tokens", "12000"],
        ["compaction", *ISSUE_ARGS, "--calls", "many"],
        ["compaction", *ISSUE_ARGS, "--calls", "10000000000"],  # ran for hours
        [
            "clearing",
            "--context-tokens",
            "10",
            "--cleared-tokens",
            "20",
            "--edit-point-tokens",
            "0",
        ],
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str]) -> None:
    out = ctxwise("simulate", *args)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctxwise: error: "), out.stderr
