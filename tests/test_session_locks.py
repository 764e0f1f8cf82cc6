"""A session's write lock (``SessionStore.lock``) on every backend, and the Engine's
turns under it: writers of one session wait for each other instead of failing.

Real stores: the in-memory one, a SQLite file, a private in-memory SQLite database,
PostgreSQL (``CTXWISE_PG_DSN``), and a third-party store that does not override
``lock``. Other processes are real too: a child holding the lock
(:mod:`tests._children`) and spawned writers. No assertion reads a clock: a wait is
shown by the order things happen in, a timeout by the error's type.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from ctxwise.config import EngineConfig
from ctxwise.engine import BACKOFF_FIRST, BACKOFF_MAX, Engine
from ctxwise.errors import SessionBusyError, SessionConflictError, StepError, UsageError
from ctxwise.messages import Message
from ctxwise.sessions import (
    InMemorySessionStore,
    SessionCommit,
    SessionSnapshot,
    SessionStore,
    SQLiteSessionStore,
    open_session_store,
)
from ctxwise.sessions import store as session_store
from ctxwise.sessions.sqlite import LOCKS_SUFFIX
from ctxwise.turn import TurnContext, TurnState, step
from tests._children import child_line, python_child

WRITERS = 4
TURNS = 8
TINY = 0.01  # a lock timeout that a held lock always outlasts (the holder waits on us)
LONG = 60.0  # a lock timeout no test reaches: the holder is let go first


class PlainStore(SessionStore):
    """A third party's store: the contract's abstract methods only, no ``lock`` of
    its own (it gets the base's in-process lock)."""

    def __init__(self) -> None:
        self.inner = InMemorySessionStore()

    def version(self, session_id: str) -> int:
        return self.inner.version(session_id)

    def load(self, session_id: str) -> SessionSnapshot:
        return self.inner.load(session_id)

    def commit(self, session_id: str, expected_version: int, change: SessionCommit) -> int:
        return self.inner.commit(session_id, expected_version, change)

    def traces(self, session_id: str) -> list[dict[str, Any]]:
        return self.inner.traces(session_id)

    def log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        return self.inner.log(session_id, start, stop)

    def sessions(self) -> list[str]:
        return self.inner.sessions()


KINDS = ["memory", "sqlite", "sqlite-memory", "postgres", "third-party"]
SHARED = ["sqlite", "postgres"]  # backends other store objects and processes reach


def _dsn() -> str:
    dsn = os.environ.get("CTXWISE_PG_DSN")
    if not dsn:
        pytest.skip("no PostgreSQL: set CTXWISE_PG_DSN (scripts/pg_server.py start DIR prints one)")
    pytest.importorskip("psycopg", reason="needs the postgres extra")
    return dsn


class Backend:
    """Opens store objects over one backing database (a new object each time where
    the backend has more than one; the one object otherwise), and its URL."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.made: list[SessionStore] = []
        self.schema = f"l_{uuid.uuid4().hex[:12]}"
        self.url = {
            "sqlite": f"sqlite:///{tmp_path / 's.db'}",
            "postgres": _dsn() if kind == "postgres" else "",
        }.get(kind, "")
        self.single: SessionStore | None = {
            "memory": InMemorySessionStore,
            "sqlite-memory": lambda: SQLiteSessionStore(":memory:"),
            "third-party": PlainStore,
        }.get(kind, lambda: None)()

    def open(self) -> SessionStore:
        if self.single is not None:
            return self.single
        store = open_session_store(self.url, schema=self.schema)
        self.made.append(store)
        return store

    def close(self) -> None:
        for store in self.made:
            store.close()
        if self.single is not None:
            self.single.close()
        if self.kind == "postgres":
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b = Backend(request.param, tmp_path)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(params=SHARED)
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b = Backend(request.param, tmp_path)
    try:
        yield b
    finally:
        b.close()


def _sid() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


class Holder:
    """A thread that holds ``lock`` until :meth:`let_go` (the test thread may not
    hold it itself: the holding thread takes the lock again at once)."""

    def __init__(self, lock: AbstractContextManager[None]) -> None:
        self.held, self.go = threading.Event(), threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(lock,), daemon=True)
        self.thread.start()
        assert self.held.wait(LONG) or self.error is not None, "the holder never got the lock"
        assert self.error is None, self.error

    def _run(self, lock: AbstractContextManager[None]) -> None:
        try:
            with lock:
                self.held.set()
                self.go.wait(LONG)
        except BaseException as e:  # seen by the test thread
            self.error = e
            self.held.set()

    def let_go(self) -> None:
        self.go.set()
        self.thread.join(LONG)
        assert not self.thread.is_alive()

    def __enter__(self) -> Holder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.let_go()


def _in_thread(fn: Callable[[], object]) -> object:
    """``fn()``'s value (or its error, raised here) when run on another thread."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:
            out.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join(LONG)
    assert out, "the thread never finished"
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def _take(store: SessionStore, session_id: str, timeout: float = 0.0) -> bool:
    with store.lock(session_id, timeout=timeout):
        return True


# -------------------------------------------------------------- the store's lock


def test_a_second_holder_times_out_with_a_typed_error(backend: Backend) -> None:
    sid = _sid()
    first, second = backend.open(), backend.open()
    with Holder(first.lock(sid)):
        with pytest.raises(SessionBusyError) as raised:
            _take(second, sid, TINY)
        assert (raised.value.session_id, raised.value.waited) == (sid, TINY)
        with pytest.raises(SessionBusyError):
            _take(second, sid, 0)  # 0: one try
        assert _take(second, "another session")  # other sessions are free
    # LONG: a SQLite waiter that gave up may still take and let go the lock once
    assert _take(second, sid, LONG)


def test_a_waiter_gets_the_lock_when_the_holder_lets_go(backend: Backend) -> None:
    sid, seen = _sid(), []
    store = backend.open()
    holder = Holder(store.lock(sid))
    seen.append("held")

    def wait_for_it() -> None:
        with backend.open().lock(sid, timeout=LONG):
            seen.append("taken")

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    _until_someone_waits()
    seen.append("let go")
    holder.let_go()
    waiter.join(LONG)
    assert seen == ["held", "let go", "taken"]


def _until_someone_waits(n: int = 1) -> None:
    """Until ``n`` threads wait in line for an in-process session lock (every backend
    queues there first)."""
    done = threading.Event()
    for _ in range(200_000):
        with session_store._GUARD:
            if sum(len(h.queue) for h in session_store._HOLDERS.values()) >= n:
                return
        done.wait(0.001)
    pytest.fail(f"{n} waiter(s) never queued")


def test_waiters_in_one_process_go_in_the_order_they_came(backend: Backend) -> None:
    sid, order = _sid(), []
    holder = Holder(backend.open().lock(sid))
    waiters = []
    for i in range(3):

        def wait(i: int = i) -> None:
            with backend.open().lock(sid, timeout=LONG):
                order.append(i)

        waiters.append(threading.Thread(target=wait))
        waiters[-1].start()
        _until_someone_waits(i + 1)
    holder.let_go()
    for t in waiters:
        t.join(LONG)
    assert order == [0, 1, 2]


def test_the_lock_is_let_go_when_the_block_raises(backend: Backend) -> None:
    sid = _sid()
    store = backend.open()
    with pytest.raises(ZeroDivisionError), store.lock(sid):
        _ = 1 / 0
    assert _in_thread(lambda: _take(backend.open(), sid)) is True


def test_the_holding_thread_takes_it_again(backend: Backend) -> None:
    sid = _sid()
    first, second = backend.open(), backend.open()
    with (
        first.lock(sid),
        second.lock(sid, timeout=0),
        first.lock(sid, timeout=0),
        pytest.raises(SessionBusyError),  # still held by this thread
    ):
        _in_thread(lambda: _take(backend.open(), sid))
    assert _in_thread(lambda: _take(backend.open(), sid)) is True


@pytest.mark.parametrize("timeout", [-1, float("nan"), float("inf"), True, "1", None])
def test_a_bad_timeout_is_a_usage_error(timeout: object) -> None:
    store = InMemorySessionStore()
    with pytest.raises(UsageError, match="lock timeout"), store.lock("s", timeout=timeout):  # type: ignore[arg-type]
        pass
    with pytest.raises(UsageError, match="session id"), store.lock(""):
        pass


def test_sqlite_keeps_one_lock_file_per_session(tmp_path: Path) -> None:
    folder = tmp_path / f"s.db{LOCKS_SUFFIX}"
    with SQLiteSessionStore(tmp_path / "s.db") as store:
        for _ in range(2):
            with store.lock("a"), store.lock("b"):
                pass
    assert len(list(folder.iterdir())) == 2  # made once, taken again


def test_sqlite_locks_a_file_whose_name_is_not_utf8(tmp_path: Path) -> None:
    name = tmp_path / "runs\udcff.db"  # the byte 0xff, as Python reads it from the OS
    with SQLiteSessionStore(name) as first, SQLiteSessionStore(name) as second:
        with Holder(first.lock("s")), pytest.raises(SessionBusyError):
            _take(second, "s", TINY)
        assert _take(second, "s", LONG)


_HOLD = """
import sys
from ctxwise.sessions import open_session_store
store = open_session_store(sys.argv[1], schema=sys.argv[3])
with store.lock(sys.argv[2]):
    print("held", flush=True)
    sys.stdin.readline()
print("let go", flush=True)
"""


@pytest.mark.parametrize("end", ["let go", "killed"])
def test_another_process_holds_the_lock_until_it_ends(shared: Backend, end: str) -> None:
    sid = _sid()
    store = shared.open()
    with python_child(_HOLD, shared.url, sid, shared.schema) as child:
        assert child_line(child) == "held", child.stderr.read() if child.stderr else ""
        with pytest.raises(SessionBusyError):
            _take(store, sid, TINY)
        if end == "killed":
            child.kill()  # a holder that dies lets go with its process
        else:
            assert child.stdin is not None
            child.stdin.write("\n")
            child.stdin.flush()
            assert child_line(child) == "let go"
        child.wait()
        assert _take(store, sid, LONG)


# -------------------------------------------------------------- the Engine's turns


def _text(tag: str) -> list[Message]:
    return [Message.text_message("user", tag)]


def _engine(backend: Backend, **kw: Any) -> Engine:
    """An Engine on ``backend`` with its own store object where the backend has more
    than one."""
    cfg = EngineConfig(store="memory", budget=50_000)
    return Engine(cfg, sessions=backend.open(), **kw)


def _logged(store: SessionStore, sid: str) -> list[str]:
    return [m["content"][0]["text"] for m in store.log(sid)]


def _check_serial(
    store: SessionStore, sid: str, versions: Sequence[int], tags: Sequence[str]
) -> None:
    """Every writer's turns are in the log exactly once, each writer's in its order,
    and the versions the turns got are 1, 2, … with none twice."""
    texts = _logged(store, sid)
    expected = [f"{t}-{j}" for t in tags for j in range(TURNS)]
    assert sorted(texts) == sorted(expected)
    for t in tags:
        assert [x for x in texts if x.startswith(f"{t}-")] == [f"{t}-{j}" for j in range(TURNS)]
    assert sorted(versions) == list(range(1, len(expected) + 1))
    assert store.version(sid) == len(expected)
    assert [t["turn"] for t in store.traces(sid)] == list(range(1, len(expected) + 1))


def test_writers_on_threads_wait_instead_of_failing(backend: Backend) -> None:
    """One try each (``max_attempts=1``): a turn that overlapped another's commit
    would raise SessionConflictError, so every turn passing shows they took turns."""
    sid = _sid()
    tags = [f"W{i}" for i in range(WRITERS)]
    engines = [_engine(backend, max_attempts=1, lock_timeout=LONG) for _ in tags]
    versions: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(WRITERS)

    def write(engine: Engine, tag: str) -> None:
        start.wait()
        try:
            for j in range(TURNS):
                result = engine.turn(sid, _text(f"{tag}-{j}"), warn_unanswered=False)
                assert result.trace.attempts == 1
                versions.append(result.version)
        except BaseException as e:
            errors.append(e)

    threads = [
        threading.Thread(target=write, args=pair) for pair in zip(engines, tags, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(LONG)
    try:
        assert errors == []
        _check_serial(backend.open(), sid, versions, tags)
    finally:
        for engine in engines:
            engine.close()


def drive_locked(url: str, session_id: str, tag: str, turns: int) -> list[int]:
    """A spawned writer: ``turns`` turns of one try each; the versions they got."""
    cfg = EngineConfig(store=url, budget=50_000)
    with Engine(cfg, max_attempts=1, lock_timeout=LONG) as engine:
        return [
            engine.turn(session_id, _text(f"{tag}-{j}"), warn_unanswered=False).version
            for j in range(turns)
        ]


def test_writers_in_processes_wait_instead_of_failing(tmp_path: Path, shared: Backend) -> None:
    sid = _sid()
    url = shared.url
    tags = [f"P{i}" for i in range(WRITERS)]
    with mp.get_context("spawn").Pool(WRITERS) as pool:
        got = pool.starmap(drive_locked, [(url, sid, t, TURNS) for t in tags])
    store = open_session_store(url)  # the Engine's default schema
    try:
        _check_serial(store, sid, [v for vs in got for v in vs], tags)
    finally:
        store.close()


def test_expected_version_fails_at_once_and_never_waits(backend: Backend) -> None:
    sid = _sid()
    with _engine(backend, lock_timeout=TINY) as first, _engine(backend) as second:
        first.turn(sid, "one")
        with pytest.raises(SessionConflictError) as raised:
            second.turn(sid, "two", expected_version=0, warn_unanswered=False)
        assert (raised.value.expected, raised.value.found) == (0, 1)
        # with the lock held elsewhere, a caller that names its version does not
        # wait (a wait would outlast TINY and raise SessionBusyError)
        with Holder(backend.open().lock(sid)):
            result = first.turn(sid, "three", expected_version=1, warn_unanswered=False)
            assert result.version == 2
            with pytest.raises(SessionBusyError):
                first.turn(sid, "four", warn_unanswered=False)
            with pytest.raises(SessionBusyError):
                first.record(sid, "five")
        assert _logged(backend.open(), sid) == ["one", "three"]


def test_the_lock_is_let_go_when_a_step_raises(backend: Backend) -> None:
    sid = _sid()

    @step("boom")
    def boom(state: TurnState, ctx: TurnContext) -> TurnState:
        raise RuntimeError("boom")

    with _engine(backend) as engine:
        engine.turn(sid, "one")
        engine.steps.insert(boom, after="route")
        with pytest.raises(StepError):
            engine.turn(sid, "two", warn_unanswered=False)
        assert _in_thread(lambda: _take(backend.open(), sid)) is True
        engine.steps.remove("boom")
        assert engine.turn(sid, "three", warn_unanswered=False).version == 2


class _Pauses:
    def __init__(self) -> None:
        self.seen: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.seen.append(seconds)


def _racing(other: Engine, sid: str, times: int) -> Any:
    """A step that has ``other`` commit to the session while the turn runs, on the
    turn's first ``times`` tries (the turn's thread holds the lock, so ``other``, on
    the same thread, takes it again: a writer that does not wait)."""

    @step("race")
    def race(state: TurnState, ctx: TurnContext) -> TurnState:
        if state.attempt <= times:
            other.record(sid, f"raced {state.attempt}")
        return state

    return race


def _expected_pauses(seed: int, n: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(0.0, min(BACKOFF_MAX, BACKOFF_FIRST * 2**i)) for i in range(n)]


def test_a_turn_overtaken_is_tried_again_after_jittered_pauses(backend: Backend) -> None:
    sid, pauses = _sid(), _Pauses()
    with _engine(backend, rng=random.Random(7), sleep=pauses) as engine, _engine(backend) as other:
        engine.turn(sid, "one")
        engine.steps.insert(_racing(other, sid, 2), after="route")
        result = engine.turn(sid, "two", warn_unanswered=False)
    assert result.trace.attempts == 3
    assert pauses.seen == _expected_pauses(7, 2)
    assert _logged(backend.open(), sid) == ["one", "raced 1", "raced 2", "two"]


def test_a_turn_always_overtaken_fails_after_max_attempts(backend: Backend) -> None:
    sid, pauses = _sid(), _Pauses()
    with (
        _engine(backend, rng=random.Random(1), sleep=pauses, max_attempts=3) as engine,
        _engine(backend) as other,
    ):
        engine.turn(sid, "one")
        engine.steps.insert(_racing(other, sid, 99), after="route")
        with pytest.raises(SessionConflictError):
            engine.turn(sid, "two", warn_unanswered=False)
    assert pauses.seen == _expected_pauses(1, 2)
    assert all(0 <= p <= BACKOFF_MAX for p in pauses.seen)


def test_backoff_pauses_are_capped() -> None:
    caps = [min(BACKOFF_MAX, BACKOFF_FIRST * 2**i) for i in range(20)]
    assert caps[0] == BACKOFF_FIRST and caps[-1] == BACKOFF_MAX
    assert caps == sorted(caps)


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"lock_timeout": -1}, "lock timeout"),
        ({"lock_timeout": "soon"}, "lock timeout"),
        ({"rng": 7}, "rng must be a random.Random"),
        ({"sleep": 0.1}, "sleep must be a function"),
    ],
)
def test_engine_lock_arguments_are_checked(kw: dict[str, Any], said: str) -> None:
    with pytest.raises(UsageError, match=said):
        Engine(EngineConfig(store="memory"), **kw)
