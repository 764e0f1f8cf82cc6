"""The session store contract, on every backend: memory, SQLite, PostgreSQL (the
suite ctxwise ships as :mod:`ctxwise.testing`), and what only a backend has."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctxwise.errors import SessionStoreError
from ctxwise.sessions import (
    InMemorySessionStore,
    SessionStore,
    SQLiteSessionStore,
    open_session_store,
)
from ctxwise.testing.suite import SessionStoreConformance

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


class TestSessionStoreContract(SessionStoreConformance):
    """Every check of :data:`ctxwise.testing.SESSION_CHECKS`, on every backend."""


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
