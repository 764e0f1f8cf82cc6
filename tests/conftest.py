from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests import _ci_skips

# Deterministic property tests: the same examples on every run and machine.
settings.register_profile(
    "ctxwise", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ctxwise")


def pytest_configure(config: pytest.Config) -> None:
    # With CI=true a skip (no data, no PostgreSQL, a missing extra) fails the test.
    config.pluginmanager.register(_ci_skips, "ctxwise-ci-skips")


ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("CTXWISE_DATA", ROOT.parent / "shared" / "data"))
TRANSCRIPTS = DATA / "transcripts"


def claude_code_files() -> list[Path]:
    base = TRANSCRIPTS / "claude_code"
    return sorted([*base.glob("*.jsonl"), *base.glob("*/subagents/*.jsonl")])


def long_sessions() -> list[Path]:
    return [
        p
        for p in claude_code_files()
        if p.parent.name == "claude_code" and p.stat().st_size > 1_000_000
    ]


TAU = TRANSCRIPTS / "tau_bench" / "gpt-4o-airline.json"


@pytest.fixture(scope="session", autouse=True)
def _embedding_cache_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The eval commands keep model vectors in a cache file under the user's cache
    folder by default: in the tests, in a folder of the test run (each test that
    checks the cache names its own file)."""
    before = os.environ.get("CTXWISE_CACHE_DIR")
    os.environ["CTXWISE_CACHE_DIR"] = str(tmp_path_factory.mktemp("ctxwise-cache"))
    yield
    if before is None:
        os.environ.pop("CTXWISE_CACHE_DIR", None)
    else:
        os.environ["CTXWISE_CACHE_DIR"] = before


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not TRANSCRIPTS.is_dir():
        pytest.skip(f"shared data not found at {DATA} (set CTXWISE_DATA)")
    return DATA
