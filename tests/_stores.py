"""Stores for the tests, one way: memory, SQLite in ``tmp_path``, or PostgreSQL.

PostgreSQL is the server named by ``CTXWISE_PG_DSN`` (which ``.ci/run`` starts on
a local unix socket), in a schema of its own that is dropped afterwards; without
it the test skips, saying so (under ``CI=true`` that skip fails the run).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ctxwise.memory import InMemoryStore, SQLiteStore, Store


def postgres_dsn() -> str:
    """The test server's DSN, or skip (no server, or the postgres extra missing)."""
    dsn = os.environ.get("CTXWISE_PG_DSN")
    if not dsn:
        pytest.skip("no PostgreSQL: set CTXWISE_PG_DSN (scripts/pg_server.py start DIR prints one)")
    pytest.importorskip("psycopg", reason="needs the postgres extra")
    pytest.importorskip("pgvector", reason="needs the postgres extra")
    return dsn


def fresh_schema() -> str:
    """A schema name no other test uses."""
    return f"t_{uuid.uuid4().hex[:12]}"


@contextmanager
def store_factory(kind: str, tmp_path: Path, *, dim: int = 64) -> Iterator[Callable[[], Store]]:
    """A factory of ``kind`` stores (``memory``, ``sqlite``, ``postgres``) that share
    one backing database; every store it opened is closed at the end, and the
    PostgreSQL schema dropped."""
    made: list[Store] = []
    if kind == "memory":
        shared = InMemoryStore()

        def factory() -> Store:
            return shared

    elif kind == "sqlite":
        path = tmp_path / "memory.db"

        def factory() -> Store:
            store = SQLiteStore(path)
            made.append(store)
            return store

    elif kind == "postgres":
        dsn = postgres_dsn()
        from ctxwise.memory import postgres

        schema = fresh_schema()

        def factory() -> Store:
            store = postgres.PostgresStore(dsn, dim=dim, schema=schema)
            made.append(store)
            return store

    else:
        raise ValueError(f"unknown store kind {kind!r}")
    try:
        yield factory
    finally:
        for store in made:
            if kind == "postgres" and store is made[0]:
                store.drop()  # type: ignore[attr-defined]
            store.close()
