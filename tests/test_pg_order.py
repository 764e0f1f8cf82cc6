"""Stores list text keys in the same order on every backend: by code point, as
Python's ``sorted`` and SQLite's BINARY collation compare them, whatever the
PostgreSQL database's collation.

A linguistic collation (glibc's ``en_US.UTF-8``, ICU's root locale) sorts these
ids otherwise: case and accents are compared after the letters, ``_`` and ``-``
are ignored at first. The PostgreSQL tests give the store's key columns such a
collation (made in the test's own schema from a locale the server has) and check
that the order does not follow it; a server with no linguistic locale skips them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxwise.memory import InMemoryStore, NewItem, SQLiteStore, Store
from ctxwise.sessions import (
    HistoryRow,
    InMemorySessionStore,
    SessionCommit,
    SessionStore,
    SQLiteSessionStore,
)
from tests._stores import postgres_dsn

# mixed case, accents (composed), '_' against '-', digits against letters and
# against each other: a linguistic order differs from code points in each
IDS = ["b", "B", "a_b", "a-b", "a10", "a2", "A1", "é", "e", "f", "Zeta", "zeta", "ä", "a", "9"]

# (provider, locale) a server may have; the first that orders IDS otherwise is used
_LOCALES = [
    ("icu", "und"),
    ("icu", "en-US"),
    ("libc", "en_US.UTF-8"),
    ("libc", "en_US.utf8"),
    ("libc", "de_DE.UTF-8"),
    ("libc", "C.UTF-8@en_US"),
]


def _commit() -> SessionCommit:
    row = HistoryRow({"role": "user", "content": [{"type": "text", "text": "hi"}]}, 1, 0)
    return SessionCommit({"format": 1}, 0, [row], [row.message], None, None)


def _fill_sessions(store: SessionStore) -> None:
    for session_id in IDS:
        store.commit(session_id, 0, _commit())


def _fill_namespaces(store: Store) -> None:
    for part in IDS:
        store.put(("ns", part), NewItem("some text", {}))


def test_the_reference_backends_sort_by_code_point(tmp_path: Path) -> None:
    expected = sorted(IDS)
    assert expected != sorted(IDS, key=str.casefold)  # the ids do tell orders apart
    for sessions in (InMemorySessionStore(), SQLiteSessionStore(tmp_path / "s.db")):
        _fill_sessions(sessions)
        assert sessions.sessions() == expected
        sessions.close()
    for store in (InMemoryStore(), SQLiteStore(tmp_path / "m.db")):
        _fill_namespaces(store)
        assert store.namespaces() == [("ns", part) for part in expected]
        store.close()


# -- PostgreSQL ------------------------------------------------------------------------


@pytest.fixture
def linguistic(request: pytest.FixtureRequest) -> Iterator[tuple[str, str, str]]:
    """``(dsn, schema, collation)``: a fresh schema holding a collation that sorts
    IDS otherwise than by code point (or skip: the server has no such locale)."""
    dsn = postgres_dsn()
    import psycopg
    from psycopg import sql

    schema = f"o_{uuid.uuid4().hex[:12]}"
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    found = None
    tried = []
    for provider, locale in _LOCALES:
        name = sql.Identifier(schema, f"ling_{provider}")
        try:
            conn.execute(sql.SQL("DROP COLLATION IF EXISTS {}").format(name))
            conn.execute(
                sql.SQL("CREATE COLLATION {} (provider = {}, locale = {})").format(
                    name, sql.SQL(provider), sql.Literal(locale)
                )
            )
            rows = conn.execute(
                sql.SQL("SELECT x FROM unnest(%s::text[]) x ORDER BY x COLLATE {}").format(name),
                [IDS],
            ).fetchall()
        except psycopg.Error as e:
            tried.append(f"{provider} {locale}: {str(e).strip().splitlines()[0]}")
            continue
        if [r[0] for r in rows] != sorted(IDS):
            found = f'"{schema}"."ling_{provider}"'
            break
        tried.append(f"{provider} {locale}: sorts by code point")
    if found is None:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        conn.close()
        pytest.skip("the server has no linguistic collation: " + "; ".join(tried))
    try:
        yield dsn, schema, found
    finally:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        conn.close()


def _collate(dsn: str, schema: str, collation: str, columns: list[tuple[str, str]]) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        for table, column in columns:
            conn.execute(
                sql.SQL("ALTER TABLE {} ALTER COLUMN {} TYPE text COLLATE {}").format(
                    sql.Identifier(schema, table), sql.Identifier(column), sql.SQL(collation)
                )
            )


def test_postgres_sessions_sort_by_code_point(linguistic: tuple[str, str, str]) -> None:
    from ctxwise.sessions.postgres import PostgresSessionStore

    dsn, schema, collation = linguistic
    store = PostgresSessionStore(dsn, schema=schema)
    try:
        _collate(
            dsn,
            schema,
            collation,
            [(t, "session_id") for t in ("sessions", "session_history", "session_log")],
        )
        _fill_sessions(store)
        assert _column_order(dsn, schema, "sessions", "session_id") != sorted(IDS)
        assert store.sessions() == sorted(IDS)
    finally:
        store.close()


def test_postgres_namespaces_sort_by_code_point(linguistic: tuple[str, str, str]) -> None:
    from ctxwise.memory.postgres import PostgresStore

    dsn, schema, collation = linguistic
    store = PostgresStore(dsn, dim=8, schema=schema)
    try:
        _collate(dsn, schema, collation, [("counters", "ns"), ("items", "ns")])
        _fill_namespaces(store)
        assert _column_order(dsn, schema, "counters", "ns") != sorted(f"ns/{p}" for p in IDS)
        assert store.namespaces() == [("ns", part) for part in sorted(IDS)]
    finally:
        store.close()


def _column_order(dsn: str, schema: str, table: str, column: str) -> list[Any]:
    """The column's values as the database orders them by default (the collation
    the test gave it), to show the store's order is not that one."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            sql.SQL("SELECT {c} FROM {t} ORDER BY {c}").format(
                c=sql.Identifier(column), t=sql.Identifier(schema, table)
            )
        ).fetchall()
    return [r[0] for r in rows]
