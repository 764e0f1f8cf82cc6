"""The session store contract, on every backend: memory, SQLite, PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctxwise.errors import SessionConflictError, SessionStoreError, UnknownSessionError, UsageError
from ctxwise.sessions import (
    HistoryRow,
    InMemorySessionStore,
    SessionCommit,
    SessionStore,
    SQLiteSessionStore,
    open_session_store,
)

BACKENDS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def make_sessions(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[], SessionStore]]:
    made: list[SessionStore] = []
    if request.param == "memory":
        shared = InMemorySessionStore()

        def factory() -> SessionStore:
            return shared

    elif request.param == "sqlite":

        def factory() -> SessionStore:
            store = SQLiteSessionStore(tmp_path / "s.db")
            made.append(store)
            return store

    else:
        dsn = os.environ.get("CTXWISE_PG_DSN")
        if not dsn:
            pytest.skip(
                "no PostgreSQL: set CTXWISE_PG_DSN (scripts/pg_server.py start DIR prints one)"
            )
        pytest.importorskip("psycopg", reason="needs the postgres extra")
        from ctxwise.sessions.postgres import PostgresSessionStore

        schema = f"s_{uuid.uuid4().hex[:12]}"

        def factory() -> SessionStore:
            store = PostgresSessionStore(dsn, schema=schema)
            made.append(store)
            return store

    yield factory
    for store in made:
        store.close()


def _row(text: str, origin: int | None) -> HistoryRow:
    return HistoryRow({"role": "user", "content": [{"type": "text", "text": text}]}, 3, origin)


def _commit(keep: int, rows: list[HistoryRow], log: list[str], turn: int | None) -> SessionCommit:
    return SessionCommit(
        {"format": 1, "n": len(rows)},
        keep,
        rows,
        [{"role": "user", "content": [{"type": "text", "text": t}]} for t in log],
        {"turn": turn} if turn is not None else None,
        turn,
    )


def test_new_session_is_empty(make_sessions: Callable[[], SessionStore]) -> None:
    store = make_sessions()
    assert store.version("nobody") == 0
    snap = store.load("nobody")
    assert (snap.version, snap.history, snap.log_length, dict(snap.state)) == (0, (), 0, {})
    with pytest.raises(UnknownSessionError, match="nobody"):
        store.require("nobody")
    assert "nobody" not in store.sessions()


def test_commit_appends_rewrites_and_versions(make_sessions: Callable[[], SessionStore]) -> None:
    store = make_sessions()
    v1 = store.commit("s", 0, _commit(0, [_row("a", 0), _row("b", 1)], ["a", "b"], 1))
    assert v1 == 1
    v2 = store.commit("s", 1, _commit(2, [_row("c", 2)], ["c"], 2))
    assert v2 == 2
    snap = store.load("s")
    assert [r.message["content"][0]["text"] for r in snap.history] == ["a", "b", "c"]
    assert [r.origin for r in snap.history] == [0, 1, 2]
    assert snap.log_length == 3
    # a compaction rewrites from position 0: a summary (no origin) and the tail
    v3 = store.commit("s", 2, _commit(0, [_row("summary", None), _row("c", 2)], [], 3))
    snap = store.load("s")
    assert v3 == 3 and snap.version == 3
    assert [r.origin for r in snap.history] == [None, 2]
    assert [m["content"][0]["text"] for m in store.log("s")] == ["a", "b", "c"]
    assert store.traces("s") == [{"turn": 1}, {"turn": 2}, {"turn": 3}]
    assert store.sessions() == ["s"]
    assert snap.state == {"format": 1, "n": 2}


def test_a_stale_commit_writes_nothing(make_sessions: Callable[[], SessionStore]) -> None:
    store = make_sessions()
    store.commit("s", 0, _commit(0, [_row("a", 0)], ["a"], 1))
    with pytest.raises(SessionConflictError) as info:
        store.commit("s", 0, _commit(0, [_row("x", 0)], ["x"], 1))
    assert (info.value.expected, info.value.found) == (0, 1)
    snap = store.load("s")
    assert snap.version == 1
    assert [r.message["content"][0]["text"] for r in snap.history] == ["a"]
    assert len(store.log("s")) == 1 and len(store.traces("s")) == 1


def test_two_stores_on_one_database_see_each_other(
    make_sessions: Callable[[], SessionStore],
) -> None:
    a, b = make_sessions(), make_sessions()
    a.commit("s", 0, _commit(0, [_row("a", 0)], ["a"], 1))
    assert b.version("s") == 1
    with pytest.raises(SessionConflictError):
        b.commit("s", 0, _commit(0, [_row("b", 0)], ["b"], 1))
    b.commit("s", 1, _commit(1, [_row("b", 1)], ["b"], 2))
    assert [m["content"][0]["text"] for m in a.log("s")] == ["a", "b"]


def test_text_survives_exactly(make_sessions: Callable[[], SessionStore]) -> None:
    store = make_sessions()
    odd = "Café naïve 東京 \x00 nul, emoji 🦀, quotes \" ' and \\ backslash"
    store.commit("s/1", 0, _commit(0, [_row(odd, 0)], [odd], 1))
    assert store.load("s/1").history[0].message["content"][0]["text"] == odd
    assert store.log("s/1")[0]["content"][0]["text"] == odd


def test_bad_session_ids(make_sessions: Callable[[], SessionStore]) -> None:
    store = make_sessions()
    for bad in ("", "   ", "x" * 201, "a\x00b"):
        with pytest.raises(UsageError):
            store.load(bad)


def test_open_session_store_by_url(tmp_path: Path) -> None:
    assert isinstance(open_session_store("memory"), InMemorySessionStore)
    store = open_session_store(f"sqlite:///{tmp_path / 'x.db'}")
    assert isinstance(store, SQLiteSessionStore)
    store.close()


def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "s.db"
    SQLiteSessionStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO ctxwise_session_migrations (name) VALUES ('999_future')")
    with pytest.raises(SessionStoreError, match="newer ctxwise"):
        SQLiteSessionStore(path)


def test_sqlite_on_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(SessionStoreError, match="cannot open"):
        SQLiteSessionStore(path)
    assert path.read_bytes() == b"this is not sqlite" * 100


def test_a_lone_surrogate_is_stored_and_read_back(
    make_sessions: Callable[[], SessionStore],
) -> None:
    store = make_sessions()
    broken = "pasted \ud83d emoji, and 東京"
    store.commit("s", 0, _commit(0, [_row(broken, 0)], [broken], 1))
    again = make_sessions().load("s")
    assert again.history[0].message["content"][0]["text"] == broken
    assert make_sessions().log("s")[0]["content"][0]["text"] == broken
    with pytest.raises(UsageError, match="lone surrogate"):
        store.commit("bad\udc00", 0, _commit(0, [_row("x", 0)], ["x"], 1))


def test_tool_ids_are_added_by_commits_and_kept_once(
    make_sessions: Callable[[], SessionStore],
) -> None:
    # a commit writes the ids it adds (issue 33: they were in the state row, which
    # every turn rewrote whole); an id given twice, or again later, is kept once
    store = make_sessions()
    odd = ["toolu_1", "call a/b", "nul \x00 id", "broken \ud83d", "東京"]
    store.commit("s", 0, SessionCommit({"format": 1}, 0, [], [], tool_ids=[*odd, "toolu_1"]))
    with pytest.raises(SessionConflictError):  # a stale commit adds none
        store.commit("s", 0, SessionCommit({}, 0, [], [], tool_ids=["stale"]))
    store.commit("s", 1, SessionCommit({"format": 1}, 0, [], [], tool_ids=["toolu_1", "t2"]))
    assert make_sessions().load("s").tool_ids == frozenset([*odd, "t2"])
    assert store.load("s").state == {"format": 1}
    assert store.load("other").tool_ids == frozenset()
    with pytest.raises(UsageError, match="tool_ids are a list of strings"):
        store.commit("s", 2, SessionCommit({}, 0, [], [], tool_ids="t3"))
    assert store.version("s") == 2


def test_a_span_of_the_log_is_read_alone(make_sessions: Callable[[], SessionStore]) -> None:
    store = make_sessions()
    store.commit("s", 0, _commit(0, [], ["a", "b", "c", "d"], None))

    def texts(start: int = 0, stop: int | None = None) -> list[str]:
        return [m["content"][0]["text"] for m in store.log("s", start, stop)]

    assert texts() == texts(0, None) == ["a", "b", "c", "d"]
    assert (texts(1, 3), texts(3), texts(2, 2), texts(3, 1), texts(9)) == (
        ["b", "c"],
        ["d"],
        [],
        [],
        [],
    )
    assert texts(0, 2**70) == texts() and texts(2**70) == []  # past any integer SQL holds
    for bad in ((-1, None), (0, -2), (True, None), (0, 1.5), ("1", None)):
        with pytest.raises(UsageError, match=r"log (start|stop) is a non-negative integer"):
            store.log("s", *bad)
