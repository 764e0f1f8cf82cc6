"""A run killed with SIGKILL at a random point resumes to the uninterrupted result."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ctxwise.relay import DirectoryRuns
from tests.relay._killed_run import CHUNKS, relay_job

CHILD = Path(__file__).with_name("_killed_run.py")


def _same(a: object, b: object) -> None:
    for field in ("steps", "lines", "table", "notes", "dropped", "rejections", "records", "carry"):
        assert getattr(a, field) == getattr(b, field), field


@pytest.mark.parametrize("seed", range(10))
def test_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    kill_step = rng.randrange(0, CHUNKS - 2)
    delay_ms = 0 if seed % 3 == 0 else rng.randrange(1, 60)
    killed_runs = tmp_path / "killed"
    done = subprocess.run(
        [sys.executable, str(CHILD), str(killed_runs), str(seed), str(kill_step), str(delay_ms)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    at_kill = DirectoryRuns(killed_runs).manifest("job")
    assert kill_step <= at_kill.step < CHUNKS - 1, "the kill must land before the run ends"
    assert at_kill.phase == "running"

    resumed = relay_job(killed_runs, seed).resume("job")
    whole = relay_job(tmp_path / "whole", seed).run("job")
    assert resumed.done and whole.done
    _same(resumed, whole)
    # no line lost or duplicated: every kept line once, in input order
    keys = [(k.chunk, k.line) for k in resumed.lines]
    assert keys == sorted(set(keys))
    assert [p.name for p in (killed_runs / "job").glob("state-*.json")] == ["state-000096.json"]
