"""StoreRuns holds a run as DirectoryRuns does: a second process's run or resume
of it is refused, and a holder killed with SIGKILL does not block the resume.

The holder is a real second process running a real relay over the same SQLite
file or PostgreSQL schema; it stops inside its run (after committing step 0) until
the test closes its standard input or kills it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxwise.errors import RelayError
from ctxwise.memory import InMemoryStore, Store
from ctxwise.relay import (
    DirectoryRuns,
    FaultyStep,
    HandoverParser,
    Relay,
    RelayResult,
    RunStore,
    StoreRuns,
    generate,
)
from tests._children import DEADLINE, child_line, python_child
from tests._stores import store_factory

CHUNKS = 6

# The child: run the job over the store named on the command line; after step 0
# is committed, say so and wait, inside the run, until stdin closes.
CHILD = """
import sys
from ctxwise.relay import StoreRuns
from tests.relay.test_store_runs_lock import open_store, relay_job

store = open_store(*sys.argv[1:])
# PostgreSQL: the server session the lock lives on
backend = store._conn.info.backend_pid if sys.argv[1] == "postgres" else 0
def on_commit(step):
    if step == 0:
        print("held", backend, flush=True)
        sys.stdin.read()
result = relay_job(StoreRuns(store)).run("job", on_commit=on_commit)
print("done" if result.done else "not done", flush=True)
store.close()
"""


def relay_job(runs: RunStore) -> Relay:
    """The job both processes build (so the resume is of the same job)."""
    workload = generate(3, variant="counting", chunks=CHUNKS)
    return Relay(workload, FaultyStep(HandoverParser(), rate=0.3, seed=3), runs=runs)


def open_store(kind: str, where: str, schema: str = "") -> Store:
    """The store the test made, opened again in the child."""
    if kind == "sqlite":
        from ctxwise.memory import SQLiteStore

        return SQLiteStore(where)
    from ctxwise.memory.postgres import PostgresStore

    return PostgresStore(where, dim=64, schema=schema)


def _where(kind: str, store: Store) -> list[str]:
    if kind == "sqlite":
        return [kind, str(store.path)]  # type: ignore[attr-defined]
    return [kind, os.environ["CTXWISE_PG_DSN"], store.schema]  # type: ignore[attr-defined]


@pytest.fixture(params=["sqlite", "postgres"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, Callable[[], Store]]]:
    with store_factory(request.param, tmp_path) as stores:
        yield request.param, stores


@contextlib.contextmanager
def _holder(kind: str, store: Store) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """The child, inside its run, and its PostgreSQL session's pid (0: SQLite);
    killed at the end if it still runs."""
    with python_child(CHILD, *_where(kind, store)) as child:
        said = child_line(child).split()
        if said[:1] != ["held"]:
            child.kill()
            pytest.fail(f"the child did not start its run: {child.communicate()[1][-3000:]}")
        yield child, int(said[1])


def _refused(runs: RunStore) -> None:
    """Every way into the held run is refused, before anything is written."""
    before = runs.manifest("job")
    with pytest.raises(RelayError, match="in use by another process") as info:
        relay_job(runs).resume("job")
    assert info.value.reason == "run"
    with pytest.raises(RelayError, match="in use by another process"):
        relay_job(runs).run("job")
    with pytest.raises(RelayError, match="in use by another process"), runs.hold("job"):
        pass
    assert runs.manifest("job") == before  # the holder's commit, untouched


def _finished(result: RelayResult) -> None:
    assert result.done and result.steps == CHUNKS


def _no_lock_files(tmp_path: Path) -> None:
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".lock")) == []


def test_a_second_process_is_refused_while_the_first_runs(
    backend: tuple[str, Callable[[], Store]], tmp_path: Path
) -> None:
    kind, stores = backend
    with _holder(kind, stores()) as (child, _):
        _refused(StoreRuns(stores()))
        assert child.stdin is not None
        child.stdin.close()  # the holder finishes its run and lets go
        assert child_line(child) == "done"
        assert child.wait(DEADLINE) == 0
    runs = StoreRuns(stores())
    _finished(relay_job(runs).resume("job"))  # a finished run returns its result
    _no_lock_files(tmp_path)


def test_a_killed_holder_does_not_block_the_resume(
    backend: tuple[str, Callable[[], Store]], tmp_path: Path
) -> None:
    kind, stores = backend
    store = stores()
    runs = StoreRuns(stores())
    with _holder(kind, store) as (child, backend_pid):
        _refused(runs)
        child.send_signal(signal.SIGKILL)
        assert child.wait(DEADLINE) == -signal.SIGKILL
    if kind == "postgres":
        _wait_for_the_server_to_see_it_gone(store, backend_pid)
    assert runs.manifest("job").step == 0  # killed inside its run, after step 0
    _finished(relay_job(runs).resume("job"))
    _no_lock_files(tmp_path)


def _wait_for_the_server_to_see_it_gone(store: Any, pid: int) -> None:
    """The server ends a killed client's session (and its locks) when it reads the
    closed socket: wait for that session to be gone (a condition, polled)."""
    import time

    assert pid > 0
    with store._db() as conn:
        for _ in range(int(DEADLINE * 20)):
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
            if row.fetchone() == (0,):
                return
            time.sleep(0.05)
    pytest.fail(f"the server kept the killed holder's session {pid}")


# -- one process: two relays on one store, or one store object twice ----------------


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_two_relays_of_one_process_on_one_run(kind: str, tmp_path: Path) -> None:
    with store_factory(kind, tmp_path) as stores:
        store = stores()
        first, second = StoreRuns(store), StoreRuns(store)
        with first.hold("job", create=True):
            with pytest.raises(RelayError, match="in use by another relay"):
                relay_job(second).run("job")
            with pytest.raises(RelayError, match="in use"):
                relay_job(StoreRuns(stores())).run("job")  # another store object
            # another run, or the same run id under another prefix, is free
            with second.hold("other", create=True), StoreRuns(store, prefix=("x",)).hold("job"):
                pass
        _finished(relay_job(second).run("job"))  # let go: free again
    _no_lock_files(tmp_path)


def test_an_in_memory_store_is_held_too() -> None:
    store = InMemoryStore()
    runs = StoreRuns(store)
    with runs.hold("job"), pytest.raises(RelayError, match="in use by another relay"):
        relay_job(StoreRuns(store)).run("job")
    _finished(relay_job(runs).run("job"))


def test_directory_runs_say_the_same(tmp_path: Path) -> None:
    """The error a StoreRuns holder gives is the one a DirectoryRuns holder gives."""
    runs = DirectoryRuns(tmp_path / "runs")
    busy = pytest.raises(RelayError, match="in use by another process")
    with runs.hold("job", create=True), busy as info:
        relay_job(DirectoryRuns(tmp_path / "runs")).run("job")
    assert info.value.reason == "run"
