"""The one migration runner (ctxwise._migrations): ordered, named, recorded with
``applied_at``, one transaction each, idempotent, a newer schema refused; and the
tables the four runners it replaced wrote, read and upgraded."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ctxwise._migrations import (
    Migration,
    PostgresDatabase,
    SQLiteDatabase,
    migrate,
    status,
)
from ctxwise.errors import NewerSchemaError, SessionStoreError, StoreError
from ctxwise.memory import SQLiteStore
from ctxwise.sessions import SQLiteSessionStore
from ctxwise.sessions.sqlite import _SQLITE_MIGRATIONS
from ctxwise.sessions.store import SessionCommit
from tests._stores import postgres_dsn

T0 = 1_700_000_000.0


def ticking() -> Callable[[], float]:
    """A clock that advances one second per reading."""
    now = [T0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    return clock


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


STEPS = [
    Migration("001_a", ("CREATE TABLE a (x INTEGER)",)),
    Migration("002_b", ("CREATE TABLE b (y TEXT)", "INSERT INTO b VALUES ('seeded')")),
]


def _open(path: Path) -> tuple[sqlite3.Connection, SQLiteDatabase]:
    conn = sqlite3.connect(path, isolation_level=None)
    return conn, SQLiteDatabase(conn, "migrations", str(path))


def test_migrations_apply_in_order_once_each_with_applied_at(tmp_path: Path) -> None:
    conn, db = _open(tmp_path / "x.db")
    assert migrate(db, STEPS, fail=StoreError, clock=ticking()) == ["001_a", "002_b"]
    state = status(db, STEPS, fail=StoreError)
    assert [(m.name, m.position, m.applied_at) for m in state.applied] == [
        ("001_a", 1, at(T0 + 1)),
        ("002_b", 2, at(T0 + 2)),
    ]
    assert state.pending == () and state.version == 2
    assert migrate(db, STEPS, fail=StoreError, clock=ticking()) == []  # idempotent
    more = [*STEPS, Migration("003_c", ("ALTER TABLE a ADD COLUMN z TEXT",))]
    assert migrate(db, more, fail=StoreError, clock=lambda: T0 + 60) == ["003_c"]
    assert status(db, more, fail=StoreError).applied[-1].applied_at == at(T0 + 60)
    assert conn.execute("SELECT y FROM b").fetchall() == [("seeded",)]


def test_a_failing_migration_rolls_back_alone(tmp_path: Path) -> None:
    conn, db = _open(tmp_path / "x.db")
    broken = [*STEPS, Migration("003_bad", ("CREATE TABLE c (z INTEGER)", "NOT SQL"))]
    with pytest.raises(sqlite3.OperationalError):
        migrate(db, broken, fail=StoreError, clock=ticking())
    state = status(db, broken, fail=StoreError)
    assert [m.name for m in state.applied] == ["001_a", "002_b"]  # committed before it
    assert state.pending == ("003_bad",)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "c" not in tables


def test_a_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    conn, db = _open(path)
    migrate(db, [*STEPS, Migration("003_future", ("CREATE TABLE f (x)",))], fail=StoreError)
    conn.close()
    before = path.read_bytes()
    conn, db = _open(path)
    with pytest.raises(NewerSchemaError) as caught:
        migrate(db, STEPS, fail=StoreError)
    err = caught.value
    assert (err.store, err.found, err.known, err.unknown) == (str(path), 3, 2, ("003_future",))
    assert isinstance(err, StoreError) and isinstance(err, SessionStoreError)
    assert "newer ctxwise" in str(err) and "003_future" in str(err)
    conn.close()
    assert path.read_bytes() == before


def test_another_builds_migration_is_the_stores_error(tmp_path: Path) -> None:
    _, db = _open(tmp_path / "x.db")
    migrate(db, [STEPS[0], Migration("002_elsewhere", ())], fail=StoreError)
    with pytest.raises(SessionStoreError, match="another build"):
        migrate(db, STEPS, fail=SessionStoreError)


def test_repeated_names_are_a_programming_error(tmp_path: Path) -> None:
    _, db = _open(tmp_path / "x.db")
    with pytest.raises(ValueError, match="repeat"):
        migrate(db, [STEPS[0], STEPS[0]], fail=StoreError)


# tables the old runners wrote ---------------------------------------------------------


def test_a_session_file_from_the_old_runner_is_read_and_upgraded(tmp_path: Path) -> None:
    """The old session runner: a (name) table, every migration in one transaction.
    A file it wrote at version 1, with a session in it, opens and moves to the
    current schema; the old row keeps no time, the new one has the clock's."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE ctxwise_session_migrations (name TEXT PRIMARY KEY)")
        for statement in _SQLITE_MIGRATIONS[0].steps:
            assert isinstance(statement, str)
            conn.execute(statement)
        conn.execute("INSERT INTO ctxwise_session_migrations VALUES ('001_sessions')")
        conn.execute("INSERT INTO ctxwise_sessions VALUES ('s1', 1, '{\"k\": 1}', 1)")
        conn.execute(
            "INSERT INTO ctxwise_session_history VALUES"
            ' (\'s1\', 0, \'{"role": "user", "content": "hi"}\', 2, 0)'
        )
    conn.close()
    store = SQLiteSessionStore(path, clock=lambda: T0)
    assert [(m.name, m.position, m.applied_at) for m in store.migrations] == [
        ("001_sessions", 1, None),
        ("002_session_tool_ids", 2, at(T0)),
    ]
    snap = store.load("s1")
    assert snap.version == 1 and dict(snap.state) == {"k": 1} and snap.tool_ids == frozenset()
    store.commit("s1", 1, SessionCommit({"k": 2}, 1, (), (), tool_ids=("call-1",)))
    assert store.load("s1").tool_ids == frozenset({"call-1"})
    store.close()
    again = SQLiteSessionStore(path, clock=lambda: T0 + 99)  # nothing more to apply
    assert [m.applied_at for m in again.migrations] == [None, at(T0)]
    again.close()


def test_a_memory_file_from_the_old_runner_is_read_and_upgraded(tmp_path: Path) -> None:
    """The old memory runner: a (position, name) table. A file at version 3 with
    items opens: migration 4 runs, the table gains applied_at, the items stay."""
    from ctxwise.memory import sqlite as sqlite_module

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE migrations (position INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL)"
        )
        for position, (name, steps) in enumerate(sqlite_module.MIGRATIONS[:3], start=1):
            for step in steps:
                assert isinstance(step, str)
                conn.execute(step)
            conn.execute("INSERT INTO migrations VALUES (?, ?)", (position, name))
        conn.execute("INSERT INTO counters (ns, next_seq) VALUES ('a', 1)")
        conn.execute(
            "INSERT INTO items (ns, id, seq, text, index_text, metadata)"
            " VALUES ('a', 'x', 0, 'refund for order 8812', 'refund for order 8812', '{}')"
        )
    conn.close()
    store = SQLiteStore(path)
    assert store.migrations == [name for name, _ in sqlite_module.MIGRATIONS]
    rows = store._conn.execute("SELECT position, name, applied_at FROM migrations").fetchall()
    assert [r[2] is None for r in sorted(rows)] == [True, True, True, False]
    assert [it.id for it, _ in store.lexical_search(("a",), "refund 8812", 3)] == ["x"]
    store.close()
    with sqlite3.connect(path) as conn:  # a newer ctxwise's migration: refused
        conn.execute("INSERT INTO migrations (position, name) VALUES (5, '005_future')")
    conn.close()
    with pytest.raises(NewerSchemaError) as caught:
        SQLiteStore(path)
    assert (caught.value.found, caught.value.known) == (5, 4)


# PostgreSQL ---------------------------------------------------------------------------


@pytest.fixture
def pg() -> Iterator[tuple[Any, str]]:
    dsn = postgres_dsn()
    import psycopg
    from psycopg import sql

    schema = f"t_{uuid.uuid4().hex[:12]}"
    conn = psycopg.connect(dsn, autocommit=True)
    try:
        yield conn, schema
    finally:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        conn.close()


def _pg_db(conn: Any, schema: str) -> PostgresDatabase:
    from psycopg import sql

    return PostgresDatabase(
        conn,
        "migrations",
        f"PostgreSQL schema {schema!r}",
        render=lambda t: sql.SQL(t).format(schema=sql.Identifier(schema)),
        lock=f"test:{schema}",
    )


PG_STEPS = [
    Migration("m001", ("CREATE TABLE {schema}.a (x integer)",)),
    Migration("m002", ("INSERT INTO {schema}.a VALUES (7)",)),
]


def test_postgres_runs_the_same_contract(pg: tuple[Any, str]) -> None:
    conn, schema = pg
    db = _pg_db(conn, schema)
    assert not status(db, PG_STEPS, fail=StoreError).exists
    assert migrate(db, PG_STEPS, fail=StoreError, clock=ticking()) == ["m001", "m002"]
    assert migrate(db, PG_STEPS, fail=StoreError) == []
    state = status(db, PG_STEPS, fail=StoreError)
    assert [(m.name, m.position, m.applied_at) for m in state.applied] == [
        ("m001", 1, at(T0 + 1)),
        ("m002", 2, at(T0 + 2)),
    ]
    with pytest.raises(NewerSchemaError, match="newer ctxwise"):
        migrate(db, PG_STEPS[:1], fail=StoreError)
    broken = [*PG_STEPS, Migration("m003", ("CREATE TABLE {schema}.b (y int)", "NOT SQL"))]
    with pytest.raises(Exception, match="syntax"):
        migrate(db, broken, fail=StoreError)
    assert status(db, broken, fail=StoreError).pending == ("m003",)


def test_postgres_tables_of_the_old_runners_are_upgraded(pg: tuple[Any, str]) -> None:
    """The memory store's old (name, applied_at) table and the session store's old
    (name) table both read and gain the columns they lacked."""
    from psycopg import sql

    from ctxwise.sessions.postgres import PostgresSessionStore

    conn, schema = pg
    ident = sql.Identifier(schema)
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(ident))
    conn.execute(
        sql.SQL(
            "CREATE TABLE {}.migrations (name text PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        ).format(ident)
    )
    conn.execute(sql.SQL("CREATE TABLE {}.a (x integer)").format(ident))
    conn.execute(sql.SQL("INSERT INTO {}.migrations (name) VALUES ('m001')").format(ident))
    db = _pg_db(conn, schema)
    assert [m.name for m in status(db, PG_STEPS, fail=StoreError).applied] == ["m001"]
    assert migrate(db, PG_STEPS, fail=StoreError, clock=lambda: T0) == ["m002"]
    applied = status(db, PG_STEPS, fail=StoreError).applied
    assert [(m.position, m.applied_at is not None) for m in applied] == [(1, True), (2, True)]
    assert applied[1].applied_at == at(T0)

    # the session store's old runner: a (name) table at version 1
    conn.execute(
        sql.SQL("CREATE TABLE {}.session_migrations (name text PRIMARY KEY)").format(ident)
    )
    conn.execute(
        sql.SQL(
            "CREATE TABLE {s}.sessions (session_id text PRIMARY KEY, version bigint NOT NULL,"
            " state text NOT NULL, log_length bigint NOT NULL);"
            "CREATE TABLE {s}.session_history (session_id text NOT NULL, pos bigint NOT NULL,"
            " message text NOT NULL, tokens bigint NOT NULL, origin bigint,"
            " PRIMARY KEY (session_id, pos));"
            "CREATE TABLE {s}.session_log (session_id text NOT NULL, seq bigint NOT NULL,"
            " message text NOT NULL, PRIMARY KEY (session_id, seq));"
            "CREATE TABLE {s}.session_turns (session_id text NOT NULL, turn bigint NOT NULL,"
            " trace text NOT NULL, PRIMARY KEY (session_id, turn));"
            "INSERT INTO {s}.session_migrations VALUES ('001_sessions');"
            "INSERT INTO {s}.sessions VALUES ('s1', 3, '{{}}', 0)"
        ).format(s=ident)
    )
    store = PostgresSessionStore(postgres_dsn(), schema=schema, clock=lambda: T0 + 5)
    try:
        assert [(m.name, m.applied_at) for m in store.migrations()] == [
            ("001_sessions", None),
            ("002_session_tool_ids", at(T0 + 5)),
        ]
        assert store.version("s1") == 3
        store.commit("s1", 3, SessionCommit({}, 0, (), (), tool_ids=("t1",)))
        assert store.load("s1").tool_ids == frozenset({"t1"})
    finally:
        store.close()
    conn.execute(
        sql.SQL("INSERT INTO {}.session_migrations (name) VALUES ('003_future')").format(ident)
    )
    with pytest.raises(NewerSchemaError) as caught:
        PostgresSessionStore(postgres_dsn(), schema=schema)
    assert (caught.value.found, caught.value.known, caught.value.unknown) == (3, 2, ("003_future",))
