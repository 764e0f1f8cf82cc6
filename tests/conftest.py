from __future__ import annotations

import asyncio
import os
import weakref
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


# ------------------------------------------------------- event loops left open
# pydantic-ai's ``Agent.run_sync`` makes an event loop, sets it as the thread's
# current one and leaves it open (to reuse it); once something replaces it, the
# garbage collector finds it open during whatever test runs then, and warnings-as-
# errors fail that unrelated test (seen in CI as an unclosed loop and its self-pipe
# sockets). Every loop made during the run is remembered (weakly); after each test,
# a loop it left neither closed nor running is closed here, where it was left
# (``CTXWISE_LOOP_REPORT=FILE`` lists those tests).

_LOOPS: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
_loop_init = asyncio.BaseEventLoop.__init__


def _remembered_init(self: asyncio.BaseEventLoop) -> None:
    _loop_init(self)
    _LOOPS.add(self)


asyncio.BaseEventLoop.__init__ = _remembered_init  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _no_event_loop_left_open(request: pytest.FixtureRequest) -> Iterator[None]:
    before = {id(loop) for loop in _LOOPS}
    yield
    left = [
        loop
        for loop in list(_LOOPS)
        if id(loop) not in before and not loop.is_closed() and not loop.is_running()
    ]
    if not left:
        return
    policy = asyncio.get_event_loop_policy()
    for loop in left:
        loop.close()
    current = getattr(getattr(policy, "_local", None), "_loop", None)
    if current is not None and current.is_closed():
        policy.set_event_loop(None)
    report = os.environ.get("CTXWISE_LOOP_REPORT")
    if report:
        with open(report, "a", encoding="utf-8") as out:
            out.write(f"{request.node.nodeid}\t{len(left)}\n")
