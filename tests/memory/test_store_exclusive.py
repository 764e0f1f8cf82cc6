"""The store contract's named locks, ``Store.exclusive``, against every backend.

A holder refuses every other one at once: on the same store object (any thread),
on another store object over the same data, and (SQLite file, PostgreSQL) in a
real second process, which also shows that a killed holder's lock is dropped.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxwise import UsageError
from ctxwise.errors import RelayError
from ctxwise.memory import InMemoryStore, Store, StoreError
from tests._children import DEADLINE, child_line, python_child
from tests._stores import store_factory
from tests.memory.conftest import BACKENDS, DIM

Stores = Callable[[], Store]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Stores]]:
    """The backend's kind and a factory of stores over one backing database."""
    with store_factory(request.param, tmp_path, dim=DIM) as stores:
        yield request.param, stores


def _busy() -> RelayError:
    return RelayError("run", "in use elsewhere")


def _refused(store: Store, name: str) -> None:
    """``name`` is held: a holder is refused at once, with the error asked for or,
    by default, a StoreError naming the lock."""
    with pytest.raises(RelayError, match="in use elsewhere"), store.exclusive(name, busy=_busy):
        pytest.fail("the block of a refused holder ran")
    with (
        pytest.raises(StoreError, match=re.escape(f"lock {name!r} is held")),
        store.exclusive(name),
    ):
        pytest.fail("the block of a refused holder ran")


def _free(store: Store, name: str) -> None:
    with store.exclusive(name, busy=_busy):
        pass


def _no_lock_files(root: Path) -> None:
    assert sorted(p.name for p in root.rglob("*.lock")) == []


def test_a_held_lock_refuses_every_other_holder_until_let_go(
    backend: tuple[str, Stores], tmp_path: Path
) -> None:
    _, stores = backend
    store, other = stores(), stores()  # memory: one store; else two over one database
    with store.exclusive("job-7"):
        _refused(store, "job-7")
        _refused(other, "job-7")
        _free(store, "job-8")  # another name is another lock
        _free(other, "job-70")
    _free(other, "job-7")  # let go: free for everyone
    _free(store, "job-7")
    _no_lock_files(tmp_path)


def test_the_lock_is_let_go_when_its_block_raises(
    backend: tuple[str, Stores], tmp_path: Path
) -> None:
    _, stores = backend
    store = stores()
    with pytest.raises(ValueError, match="boom"), store.exclusive("job"):
        raise ValueError("boom")
    _free(stores(), "job")
    _free(store, "job")
    _no_lock_files(tmp_path)


def test_another_database_has_its_own_locks(backend: tuple[str, Stores], tmp_path: Path) -> None:
    """The same name in another in-memory store, SQLite file or PostgreSQL schema
    (on the same server) is another lock."""
    kind, stores = backend
    (tmp_path / "other").mkdir()
    with store_factory(kind, tmp_path / "other", dim=DIM) as elsewhere:
        far = elsewhere()
        assert far is not stores()
        with stores().exclusive("job"):
            _free(far, "job")
            with far.exclusive("job"):
                _refused(elsewhere(), "job")
    _no_lock_files(tmp_path)


def test_a_thread_is_refused_as_another_holder(backend: tuple[str, Stores]) -> None:
    _, stores = backend
    store = stores()
    seen: list[BaseException | None] = []

    def second() -> None:
        try:
            with store.exclusive("job", busy=_busy):
                seen.append(None)
        except RelayError as exc:
            seen.append(exc)

    with store.exclusive("job"):
        worker = threading.Thread(target=second)
        worker.start()
        worker.join()
    assert len(seen) == 1 and isinstance(seen[0], RelayError)
    worker = threading.Thread(target=second)
    worker.start()
    worker.join()
    assert seen[1:] == [None]


@pytest.mark.parametrize("bad", ["", "a\x00b", "lone \ud800", None, 7, ("job",)])
def test_bad_lock_names_are_usage_errors(backend: tuple[str, Stores], bad: Any) -> None:
    _, stores = backend
    store = stores()
    with pytest.raises(UsageError, match="lock name"), store.exclusive(bad):
        pytest.fail("a bad name was held")
    _free(store, "job")


def _closable(kind: str, stores: Stores) -> Store:
    """A store the test may close (not the factory's first: it drops the schema)."""
    if kind == "memory":
        return InMemoryStore()
    stores()
    return stores()


def test_a_closed_store_lends_no_lock(backend: tuple[str, Stores]) -> None:
    kind, stores = backend
    store = _closable(kind, stores)
    store.close()
    with pytest.raises(StoreError, match="closed"), store.exclusive("job"):
        pytest.fail("a closed store lent a lock")


def test_closing_the_store_inside_the_block_is_no_error(
    backend: tuple[str, Stores], tmp_path: Path
) -> None:
    kind, stores = backend
    store = _closable(kind, stores)
    with store.exclusive("job"):
        store.close()
    if kind != "memory":
        _free(stores(), "job")
    _no_lock_files(tmp_path)


def test_a_long_name_and_names_alike_are_distinct_locks(backend: tuple[str, Stores]) -> None:
    """Names are compared whole: a long one, one that is another's prefix, and
    Unicode ones are separate locks."""
    _, stores = backend
    store = stores()
    names = ["x" * 5000, "x" * 4999, "job", "job/1", "jöb", "ジョブ"]
    with contextlib.ExitStack() as held:
        for name in names:
            held.enter_context(store.exclusive(name))
        for name in names:
            _refused(store, name)


class _ThirdPartyStore(InMemoryStore):
    """A backend that does not override ``exclusive``: the contract's base lock."""

    def exclusive(self, name: str, *, busy: Any = None) -> contextlib.AbstractContextManager[None]:
        return Store.exclusive(self, name, busy=busy)


def test_a_backend_that_does_not_override_it_holds_against_this_process() -> None:
    store, other = _ThirdPartyStore(), _ThirdPartyStore()
    with store.exclusive("job"):
        _refused(store, "job")
        _free(other, "job")  # another store object: another store, another lock


# -- a real second process ---------------------------------------------------------

CHILD = """
import sys
kind, where, schema, name = sys.argv[1:]
if kind == "sqlite":
    from ctxwise.memory import SQLiteStore
    store = SQLiteStore(where)
else:
    from ctxwise.memory.postgres import PostgresStore
    store = PostgresStore(where, dim=64, schema=schema, create=False)
with store.exclusive(name):
    print("held", flush=True)
    sys.stdin.read()
print("let go", flush=True)
store.close()
"""


def _where(kind: str, store: Any) -> list[str]:
    if kind == "sqlite":
        return [kind, store.path, ""]
    return [kind, os.environ["CTXWISE_PG_DSN"], store.schema]


@contextlib.contextmanager
def _holder(kind: str, store: Store, name: str) -> Iterator[subprocess.Popen[str]]:
    """A second process holding ``name`` on ``store``'s database; killed at the end
    if it still runs."""
    with python_child(CHILD, *_where(kind, store), name) as child:
        if child_line(child) != "held":
            child.kill()
            pytest.fail(f"the child did not take the lock: {child.communicate()[1][-3000:]}")
        yield child


@pytest.fixture(params=["sqlite", "postgres"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Stores]]:
    """The backends other processes reach."""
    with store_factory(request.param, tmp_path, dim=DIM) as stores:
        yield request.param, stores


def test_a_second_process_is_refused_until_the_holder_lets_go(
    shared: tuple[str, Stores], tmp_path: Path
) -> None:
    kind, stores = shared
    store = stores()
    with _holder(kind, store, "job") as child:
        if kind == "sqlite":  # the lock file, beside the database
            assert [p.name[:10] for p in tmp_path.glob("*.lock")] == ["memory.db."]
        _refused(store, "job")
        _free(store, "other-job")
        assert child.stdin is not None
        child.stdin.close()
        assert child_line(child) == "let go"
        assert child.wait(DEADLINE) == 0
    _free(store, "job")
    _no_lock_files(tmp_path)


def test_a_killed_holder_drops_its_lock(shared: tuple[str, Stores], tmp_path: Path) -> None:
    kind, stores = shared
    store = stores()
    with _holder(kind, store, "job") as child:
        _refused(store, "job")
        child.send_signal(signal.SIGKILL)
        assert child.wait(DEADLINE) == -signal.SIGKILL
    # the system drops a flock with its process; PostgreSQL ends the session (and
    # its locks) when it reads the closed socket: poll for that condition
    for _ in range(int(DEADLINE * 20)):
        try:
            _free(store, "job")
            break
        except RelayError:
            assert kind == "postgres", "a killed process kept its flock"
            time.sleep(0.05)
    else:
        pytest.fail("the killed holder's lock was never dropped")
    if kind == "sqlite":  # nobody removed it: the next holder takes it and removes it
        _no_lock_files(tmp_path)
