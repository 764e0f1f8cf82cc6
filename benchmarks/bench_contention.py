"""Four writers on one session: turn latency and conflicts, with the session lock and
with the retry-only behaviour it replaced, in the same run.

Each writer is a process of its own (spawned) with its own Engine, driving ``TURNS``
turns of one user message each into ONE session, all four started together, on a
SQLite file and, when ``CTXWISE_PG_DSN`` names a server, on PostgreSQL. Two ways:

- ``lock``: the Engine as shipped: a turn holds the session's lock from load to
  commit (``SessionStore.lock``), so writers wait for each other;
- ``retry-only`` (the baseline, the behaviour before the lock): the same Engine on a
  store whose ``lock`` holds nothing and with no pause between tries, so a turn whose
  commit found the session moved on is re-applied at once, up to ``max_attempts``
  (5) times, then fails with ``SessionConflictError``.

Per way: p50 / p99 of one turn's wall time (turns that failed included, up to their
error), the turns that failed with ``SessionConflictError``, the tries that were
thrown away (re-applied), the wall time from the start to the last writer's end, and
(``lock``) how long a turn held the lock. Every run checks that the log holds each
committed turn once.

Read with care: under the lock the writers go in turn, so nearly every turn follows
another writer's commit and loads the session afresh (a turn on a session its own
Engine last wrote reuses what it holds, and costs less); without the lock, a writer
that keeps winning the race runs on what it holds, while the others fail or try again.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import fmt_ms, percentile, print_table, write_results
from ctxwise import Engine, EngineConfig, Message, SessionConflictError
from ctxwise.sessions import SessionStore, open_session_store

WRITERS = 4
TURNS = 60
START_DELAY = 3.0  # seconds for every writer to import and open its stores


def _unlocked(store: SessionStore) -> SessionStore:
    """``store`` with a ``lock`` that holds nothing: the retry-only baseline."""

    def lock(session_id: str, *, timeout: float = 0.0) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    store.lock = lock  # type: ignore[method-assign]
    return store


def _timed(store: SessionStore, held: list[int]) -> SessionStore:
    """``store`` whose ``lock`` records how long each hold lasted (ns) in ``held``."""
    inner = store.lock

    @contextlib.contextmanager
    def lock(session_id: str, *, timeout: float = 30.0) -> Iterator[None]:
        with inner(session_id, timeout=timeout):
            t0 = time.perf_counter_ns()
            try:
                yield
            finally:
                held.append(time.perf_counter_ns() - t0)

    store.lock = lock  # type: ignore[method-assign]
    return store


def writer(url: str, way: str, session_id: str, tag: str, start_at: float) -> dict[str, Any]:
    """One writer's ``TURNS`` turns: per turn its wall time (ns), tries, and whether
    it failed with SessionConflictError."""
    cfg = EngineConfig(store=url, budget=50_000)
    sessions = open_session_store(url)
    extra: dict[str, Any] = {}
    held: list[int] = []
    if way == "retry-only":
        sessions = _unlocked(sessions)
        extra["sleep"] = lambda seconds: None
    else:
        sessions = _timed(sessions, held)
    times, tries, failed = [], [], []
    with Engine(cfg, sessions=sessions, **extra) as engine:
        while time.time() < start_at:
            time.sleep(0.001)
        for j in range(TURNS):
            t0 = time.perf_counter_ns()
            try:
                result = engine.turn(
                    session_id,
                    [Message.text_message("user", f"{tag}-{j}")],
                    warn_unanswered=False,
                )
                tries.append(result.trace.attempts)
                failed.append(False)
            except SessionConflictError:
                tries.append(engine.max_attempts)
                failed.append(True)
            times.append(time.perf_counter_ns() - t0)
        ended = time.time()
    sessions.close()
    return {"tag": tag, "ns": times, "tries": tries, "failed": failed, "ended": ended, "held": held}


def run(store: str, url: str, way: str) -> dict[str, Any]:
    session_id = f"contention-{way}-{uuid.uuid4().hex[:8]}"
    tags = [f"W{i}" for i in range(WRITERS)]
    start_at = time.time() + START_DELAY
    with mp.get_context("spawn").Pool(WRITERS) as pool:
        got = pool.starmap(writer, [(url, way, session_id, t, start_at) for t in tags])
    wall = max(w["ended"] for w in got) - start_at
    ms = [n / 1e6 for w in got for n in w["ns"]]
    held = [n / 1e6 for w in got for n in w["held"]]
    failed = sum(f for w in got for f in w["failed"])
    rethrown = sum(
        t - 1 for w in got for t, f in zip(w["tries"], w["failed"], strict=True) if not f
    )
    committed = {f"{w['tag']}-{j}" for w in got for j, f in enumerate(w["failed"]) if not f}
    sessions = open_session_store(url)
    try:
        texts = [m["content"][0]["text"] for m in sessions.log(session_id)]
        version = sessions.version(session_id)
    finally:
        sessions.close()
    assert sorted(texts) == sorted(committed), "a committed turn is missing or twice in the log"
    assert version == len(committed)
    return {
        "store": store,
        "way": way,
        "writers": WRITERS,
        "turns": WRITERS * TURNS,
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "failed_turns": failed,
        "failed_share": failed / (WRITERS * TURNS),
        "reapplied_tries": rethrown,
        "wall_s": wall,
        "held_p50_ms": percentile(held, 50) if held else None,
    }


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        stores = [("sqlite", f"sqlite:///{Path(tmp) / 'contention.db'}")]
        dsn = os.environ.get("CTXWISE_PG_DSN")
        if dsn:
            stores.append(("postgres", dsn))
        else:
            print("no CTXWISE_PG_DSN: PostgreSQL left out", file=sys.stderr)
        for store, url in stores:
            for way in ("retry-only", "lock"):
                rows.append(run(store, url, way))
    print_table(
        f"{WRITERS} writers on one session, {TURNS} turns each",
        ["store", "way", "p50 ms", "p99 ms", "failed turns", "re-applied", "wall s", "held p50"],
        [
            [
                r["store"],
                r["way"],
                fmt_ms(r["p50_ms"]),
                fmt_ms(r["p99_ms"]),
                f"{r['failed_turns']} ({r['failed_share']:.1%})",
                r["reapplied_tries"],
                f"{r['wall_s']:.2f}",
                "" if r["held_p50_ms"] is None else fmt_ms(r["held_p50_ms"]),
            ]
            for r in rows
        ],
        align="llrrrrrr",
        caption="one turn's wall time, failed turns included; retry-only: no lock, "
        "up to 5 tries with no pause (the behaviour before the lock)",
    )
    write_results("contention", {"writers": WRITERS, "turns_per_writer": TURNS, "rows": rows})


if __name__ == "__main__":
    main()
