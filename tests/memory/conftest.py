"""One contract suite for every store backend: memory, sqlite, postgres.

The PostgreSQL backend runs against the server named by ``CTXWISE_PG_DSN`` (which
``.ci/run`` starts on a local unix socket); without it those cases skip, saying so.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctxwise.memory import InMemoryStore, SQLiteStore, Store

DIM = 64
BACKENDS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """A factory of stores that share one backing database for the test."""
    made: list[Store] = []
    if request.param == "memory":
        shared = InMemoryStore()

        def factory() -> Store:
            return shared

    elif request.param == "sqlite":
        path = tmp_path / "memory.db"

        def factory() -> Store:
            store = SQLiteStore(path)
            made.append(store)
            return store

    else:
        dsn = os.environ.get("CTXWISE_PG_DSN")
        if not dsn:
            pytest.skip(
                "no PostgreSQL: set CTXWISE_PG_DSN (scripts/pg_server.py start DIR prints one)"
            )
        pytest.importorskip("psycopg", reason="needs the postgres extra")
        pytest.importorskip("pgvector", reason="needs the postgres extra")
        from ctxwise.memory import postgres

        schema = f"t_{uuid.uuid4().hex[:12]}"

        def factory() -> Store:
            store = postgres.PostgresStore(dsn, dim=DIM, schema=schema)
            made.append(store)
            return store

    yield factory
    for store in made:
        if request.param == "postgres" and store is made[0]:
            store.drop()  # type: ignore[attr-defined]
        store.close()
