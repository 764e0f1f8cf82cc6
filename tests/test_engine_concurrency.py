"""Two processes driving different sessions, and two driving one session, against
one SQLite file and against PostgreSQL: no turn lost or applied twice, and writers
of one session take turns (each turn is applied on its first try)."""

from __future__ import annotations

import multiprocessing as mp
import os
import uuid
from pathlib import Path

import pytest

from ctxwise.sessions import open_session_store
from tests._engine_driver import drive

TURNS = 25


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    dsn = os.environ.get("CTXWISE_PG_DSN")
    if not dsn:
        pytest.skip("no PostgreSQL: set CTXWISE_PG_DSN (scripts/pg_server.py start DIR prints one)")
    pytest.importorskip("psycopg", reason="needs the postgres extra")
    return dsn


def _run(store: str, jobs: list[tuple[str, str]]) -> list[int]:
    ctx = mp.get_context("spawn")
    with ctx.Pool(len(jobs)) as pool:
        return pool.starmap(drive, [(store, sid, tag, TURNS) for sid, tag in jobs])


def _texts(store: str, session_id: str) -> list[str]:
    sessions = open_session_store(store)
    try:
        return [m["content"][0]["text"] for m in sessions.log(session_id)]
    finally:
        sessions.close()


def test_two_processes_two_sessions(store_url: str) -> None:
    a, b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    _run(store_url, [(a, "A"), (b, "B")])
    assert _texts(store_url, a) == [f"A-{j}" for j in range(TURNS)]
    assert _texts(store_url, b) == [f"B-{j}" for j in range(TURNS)]


def test_two_processes_one_session(store_url: str) -> None:
    sid = f"shared-{uuid.uuid4().hex[:8]}"
    attempts = _run(store_url, [(sid, "A"), (sid, "B")])
    texts = _texts(store_url, sid)
    # every turn applied exactly once, each process's turns in its own order
    assert sorted(texts) == sorted(
        [f"A-{j}" for j in range(TURNS)] + [f"B-{j}" for j in range(TURNS)]
    )
    assert [t for t in texts if t.startswith("A")] == [f"A-{j}" for j in range(TURNS)]
    assert [t for t in texts if t.startswith("B")] == [f"B-{j}" for j in range(TURNS)]
    sessions = open_session_store(store_url)
    try:
        assert sessions.version(sid) == 2 * TURNS
        traces = sessions.traces(sid)
        assert [t["turn"] for t in traces] == list(range(1, 2 * TURNS + 1))
        # the live history holds every message once, in the log's order
        history = [r.message["content"][0]["text"] for r in sessions.load(sid).history]
        assert history == texts
    finally:
        sessions.close()
    # the session's lock serializes the two writers: no turn was built twice
    assert sum(attempts) == 2 * TURNS
