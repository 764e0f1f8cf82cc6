"""Session stores, traces and the trace command on damaged or unusual stores (QA, stop 25)."""

from __future__ import annotations

import datetime
import os
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxwise import Engine, EngineConfig
from ctxwise.errors import FormatError, SessionStoreError, UsageError
from ctxwise.messages import Message
from ctxwise.sessions import (
    HistoryRow,
    InMemorySessionStore,
    SessionCommit,
    SessionStore,
    SQLiteSessionStore,
)
from ctxwise.trace import Trace
from tests._cli import assert_usage_error, run


def _two_turns(db: Path, session: str = "s1") -> None:
    with Engine(EngineConfig(store=f"sqlite:///{db}")) as engine:
        engine.turn(session, [Message.text_message("user", "please look at order 4417")])
        engine.turn(
            session,
            [Message.text_message("assistant", "on it"), Message.text_message("user", "thanks")],
        )


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("stored") / "base.db"
    _two_turns(db)
    return db


def _damaged(stored: Path, tmp_path: Path, sql: str) -> Path:
    db = tmp_path / "damaged.db"
    shutil.copy(stored, db)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(sql)
    conn.close()
    return db


@pytest.mark.parametrize(
    ("sql", "what"),
    [
        ("UPDATE ctxwise_sessions SET state = substr(state, 1, 30)", "'s1': state"),
        (
            "UPDATE ctxwise_session_history SET message = '{' WHERE pos = 0",
            "'s1': history row 0",
        ),
        ("UPDATE ctxwise_session_history SET tokens = 'abc' WHERE pos = 0", "'s1': damaged"),
    ],
)
def test_a_damaged_session_row_is_a_session_store_error(
    stored: Path, tmp_path: Path, sql: str, what: str
) -> None:
    db = _damaged(stored, tmp_path, sql)
    with SQLiteSessionStore(db) as store, pytest.raises(SessionStoreError, match=what):
        store.load("s1")
    engine = Engine(EngineConfig(store=f"sqlite:///{db}"))
    with engine, pytest.raises(SessionStoreError, match="damaged"):
        engine.turn("s1", [Message.text_message("assistant", "ok")])
    # nothing was written: the damaged row is still there and the version unchanged
    with SQLiteSessionStore(db) as store:
        assert store.version("s1") == 2


@pytest.mark.parametrize(
    ("sql", "method", "what"),
    [
        (
            "UPDATE ctxwise_session_turns SET trace = substr(trace, 1, 50) WHERE turn = 2",
            "traces",
            "trace of turn 2 is not valid JSON",
        ),
        (
            "UPDATE ctxwise_session_log SET message = '[' WHERE seq = 1",
            "log",
            "log message 1 is not valid JSON",
        ),
    ],
)
def test_a_damaged_trace_or_log_row_is_a_session_store_error(
    stored: Path, tmp_path: Path, sql: str, method: str, what: str
) -> None:
    db = _damaged(stored, tmp_path, sql)
    with SQLiteSessionStore(db) as store, pytest.raises(SessionStoreError, match=what):
        getattr(store, method)("s1")


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        (
            "UPDATE ctxwise_session_turns SET trace = json_set(trace, '$.format', 2) "
            "WHERE turn = 2",
            ("trace of turn 2", "unsupported trace format 2", "this ctxwise reads 1"),
        ),
        (
            "UPDATE ctxwise_session_turns SET trace = json_set(trace, '$.shiny', 1) WHERE turn = 2",
            ("trace of turn 2", "shiny: unknown key"),
        ),
        (
            "UPDATE ctxwise_session_turns SET trace = json_remove(trace, '$.tokens') "
            "WHERE turn = 1",
            ("trace of turn 1", "tokens: missing"),
        ),
        ("UPDATE ctxwise_session_turns SET trace = '[1]' WHERE turn = 2", ("(top level)",)),
        (
            "UPDATE ctxwise_session_turns SET trace = substr(trace, 1, 50) WHERE turn = 2",
            ("trace of turn 2 is not valid JSON", "damaged"),
        ),
    ],
)
def test_trace_of_a_trace_it_cannot_read_exits_2_with_one_line(
    stored: Path, tmp_path: Path, sql: str, words: tuple[str, ...]
) -> None:
    db = _damaged(stored, tmp_path, sql)
    before = db.read_bytes()
    assert_usage_error(run("trace", "s1", "--db", db), "session 's1'", *words)
    assert_usage_error(run("trace", "s1", "--db", db, "--json"), *words)
    assert db.read_bytes() == before


def test_trace_from_stored_reads_what_a_turn_stored(stored: Path) -> None:
    with SQLiteSessionStore(stored) as store:
        rows = store.traces("s1")
    traces = [Trace.from_stored(t, session_id="s1") for t in rows]
    assert [t.turn for t in traces] == [1, 2]
    with pytest.raises(FormatError, match="s1': trace of turn 1: unsupported trace format '1'"):
        Trace.from_stored({**rows[0], "format": "1"}, session_id="s1")


def test_engine_traces_of_a_trace_it_cannot_read_is_a_format_error(
    stored: Path, tmp_path: Path
) -> None:
    # Engine.traces (and the MCP traces tool through it) raised pydantic's
    # ValidationError, which is outside the library's exception tree
    from ctxwise import Engine, EngineConfig

    sql = "UPDATE ctxwise_session_turns SET trace = json_set(trace, '$.shiny', 1) WHERE turn = 2"
    db = _damaged(stored, tmp_path, sql)
    with (
        Engine(EngineConfig(store=f"sqlite:///{db}")) as engine,
        pytest.raises(FormatError, match=r"trace of turn 2.*shiny: unknown key"),
    ):
        engine.traces("s1")


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@pytest.mark.parametrize("session_id", ["a\ud800", "a\x00b", "x" * 201, "", 123, None, ["s1"]])
@pytest.mark.parametrize("method", ["version", "traces", "log"])
def test_every_read_refuses_a_bad_session_id_as_load_does(
    stored: Path, tmp_path: Path, backend: str, session_id: object, method: str
) -> None:
    # SQLite raised UnicodeEncodeError for a lone surrogate and SessionStoreError (a
    # store failure) for a list; the memory store answered 0 / [] for anything
    db = tmp_path / "copy.db"
    shutil.copy(stored, db)
    store: SessionStore = SQLiteSessionStore(db) if backend == "sqlite" else InMemorySessionStore()
    with store:
        with pytest.raises(UsageError, match="session id"):
            store.load(session_id)  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="session id"):
            getattr(store, method)(session_id)
        assert store.version("s1") == (2 if backend == "sqlite" else 0)


def test_an_id_with_path_separators_is_only_a_key(tmp_path: Path) -> None:
    odd = "../../etc/passwd\\C:\\x"
    _two_turns(tmp_path / "s.db", session=odd)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("s.db")) == []
    with SQLiteSessionStore(tmp_path / "s.db") as store:
        assert store.sessions() == [odd] and store.version(odd) == 2
        assert [t["session_id"] for t in store.traces(odd)] == [odd, odd]


@pytest.mark.parametrize(
    ("sql", "method", "what"),
    [
        ("UPDATE {s}.sessions SET state = '{{\"fac'", "load", "'s1': state is not valid JSON"),
        ("UPDATE {s}.session_history SET message = '['", "load", "'s1': history row 0 is not"),
        ("UPDATE {s}.session_turns SET trace = 'nul'", "traces", "trace of turn 1 is not valid"),
        ("UPDATE {s}.session_log SET message = ''", "log", "log message 0 is not valid JSON"),
    ],
)
def test_a_damaged_postgres_row_is_a_session_store_error(sql: str, method: str, what: str) -> None:
    dsn = os.environ.get("CTXWISE_PG_DSN")
    if not dsn:
        pytest.skip("no PostgreSQL: set CTXWISE_PG_DSN (scripts/pg_server.py start DIR prints one)")
    psycopg = pytest.importorskip("psycopg", reason="needs the postgres extra")
    from ctxwise.sessions.postgres import PostgresSessionStore

    schema = f"s_{uuid.uuid4().hex[:12]}"
    message = {"role": "user", "content": [{"type": "text", "text": "order 4417"}]}
    change = SessionCommit({"format": 1}, 0, [HistoryRow(message, 3, 0)], [message], {"t": 1})
    try:
        with PostgresSessionStore(dsn, schema=schema) as store:
            assert store.commit("s1", 0, change) == 1
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(sql.format(s=schema))
            with pytest.raises(SessionStoreError, match=what):
                getattr(store, method)("s1")
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.mark.parametrize("session", ["s[/]", "[bold]x", "a[red]b[/red]"])
def test_trace_shows_a_session_id_with_brackets_as_text(tmp_path: Path, session: str) -> None:
    # 's[/]' raised rich's MarkupError (a traceback, exit 1); '[bold]x' lost its brackets
    db = tmp_path / "s.db"
    _two_turns(db, session=session)
    result = run("trace", session, "--db", db)
    assert result.exit_code == 0, result.stderr
    assert f"session {session}" in result.stdout


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "memory":
        yield InMemorySessionStore()
        return
    if request.param == "sqlite":
        with SQLiteSessionStore(tmp_path / "k.db") as store:
            yield store
        return
    dsn = os.environ.get("CTXWISE_PG_DSN")
    if not dsn:
        pytest.skip("no PostgreSQL: set CTXWISE_PG_DSN (scripts/pg_server.py start DIR prints one)")
    psycopg = pytest.importorskip("psycopg", reason="needs the postgres extra")
    from ctxwise.sessions.postgres import PostgresSessionStore

    schema = f"s_{uuid.uuid4().hex[:12]}"
    try:
        with PostgresSessionStore(dsn, schema=schema) as store:
            yield store
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _row(text: str, origin: int) -> HistoryRow:
    return HistoryRow({"role": "user", "content": [{"type": "text", "text": text}]}, 1, origin)


def _texts(store: SessionStore) -> list[str]:
    return [r.message["content"][0]["text"] for r in store.load("s").history]


@pytest.mark.parametrize("keep", [3, 5, -1, True, "1", None])
def test_a_commit_keeping_past_its_history_is_refused_on_every_backend(
    any_store: SessionStore, keep: object
) -> None:
    # keep=5 of 2 rows: SQLite left a gap at 2-4 and the memory store none, so a later
    # keep=3 kept different rows; keep=-1 emptied SQLite but dropped one row in memory
    v = any_store.commit("s", 0, SessionCommit({}, 0, [_row("a", 0), _row("b", 1)], []))
    with pytest.raises(UsageError, match=r"commit keep=.* is not a position in its history of 2"):
        any_store.commit("s", v, SessionCommit({}, keep, [_row("c", 2)], []))  # type: ignore[arg-type]
    assert any_store.version("s") == 1 and _texts(any_store) == ["a", "b"]
    assert any_store.commit("s", v, SessionCommit({}, 2, [_row("c", 2)], [])) == 2
    assert any_store.commit("s", 2, SessionCommit({}, 1, [_row("d", 3)], [])) == 3
    assert _texts(any_store) == ["a", "d"]


@pytest.mark.parametrize(
    "change",
    [
        SessionCommit({"seen": {1, 2}}, 0, [], []),
        SessionCommit({}, 0, [HistoryRow({"at": datetime.date(2026, 1, 2)}, 1, 0)], []),
        SessionCommit({}, 0, [], [{"raw": b"\xff"}]),
        SessionCommit({}, 0, [], [], {"turn": object()}, 1),
    ],
)
def test_a_commit_json_cannot_hold_is_refused_alike_on_every_backend(
    any_store: SessionStore, change: SessionCommit
) -> None:
    # SQLite raised TypeError; the memory store kept a date, bytes or an object in the
    # history, log or trace, and its traces() / log() raised TypeError on reading them
    with pytest.raises(UsageError, match="a value JSON cannot hold"):
        any_store.commit("s", 0, change)
    assert any_store.version("s") == 0
    assert (any_store.traces("s"), any_store.log("s")) == ([], [])


def test_the_memory_store_keeps_a_copy_of_what_was_committed() -> None:
    store = InMemorySessionStore()
    message = {"role": "user", "content": [{"type": "text", "text": "order 4417"}]}
    trace = {"turn": 1, "route": {"label": "billing"}}
    store.commit("s", 0, SessionCommit({}, 0, [HistoryRow(message, 3, 0)], [message], trace, 1))
    message["content"][0]["text"] = "order 9999"  # type: ignore[index]
    trace["route"]["label"] = "other"  # type: ignore[index]
    assert store.load("s").history[0].message["content"][0]["text"] == "order 4417"
    assert store.log("s")[0]["content"][0]["text"] == "order 4417"
    assert store.traces("s")[0]["route"]["label"] == "billing"


def test_trace_of_a_folder_says_it_is_a_folder(tmp_path: Path) -> None:
    # it said 'the file does not exist' of a folder that exists
    assert_usage_error(run("trace", "s1", "--db", tmp_path), "is a folder, not a SQLite file")
    assert list(tmp_path.iterdir()) == []


def test_the_memory_store_lists_sessions_under_its_lock() -> None:
    # sessions() iterated the dict that commit() adds to, without the lock: a commit in
    # another thread raised 'dictionary changed size during iteration'
    store = InMemorySessionStore()
    store.commit("a", 0, SessionCommit({}, 0, [], []))
    held: list[bool] = []

    class Watched(dict[str, Any]):
        def items(self) -> Any:
            held.append(store._lock.locked())
            return super().items()

    store._sessions = Watched(store._sessions)
    assert store.sessions() == ["a"]
    assert held == [True]


@pytest.mark.parametrize(
    ("path", "match"),
    [
        ("a\x00b.db", "holds a NUL character"),  # was ValueError: embedded null byte
        ("x\ud800.db", "holds a lone surrogate"),  # was UnicodeEncodeError
        (5, "a session store path is a str or a Path"),  # opened a file named '5'
    ],
)
def test_a_session_store_path_no_file_can_have_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: object, match: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=match):
        SQLiteSessionStore(path)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_a_file_name_that_is_not_utf8_opens(tmp_path: Path) -> None:
    name = tmp_path / "runs\udcff.db"  # the byte 0xff, as Python reads it from the OS
    with SQLiteSessionStore(name) as store:
        store.commit("s", 0, SessionCommit({}, 0, [], []))
    with SQLiteSessionStore(name) as store:
        assert store.version("s") == 1
