"""The PostgreSQL session store (extra ``postgres``; see :mod:`ctxwise.sessions`).

Five tables in the store's schema (``ctxwise`` by default), beside the memory
store's: ``sessions`` (one row per session: version, state, log length),
``session_history``, ``session_log``, ``session_turns`` and ``session_tool_ids``,
plus ``session_migrations``. A commit runs in one transaction that first locks the
session's row (``SELECT … FOR UPDATE``; a new session is inserted with ``ON
CONFLICT DO NOTHING`` and re-read), so two writers of one session serialize and
the version check cannot be raced. Texts are stored as ``text`` (JSON with NUL
escaped by the encoder, so any message fits).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ctxwise._migrations import (
    AppliedMigration,
    Clock,
    Migration,
    PostgresDatabase,
    migrate,
    status,
)
from ctxwise.errors import (
    MissingDependencyError,
    SessionConflictError,
    SessionStoreError,
    UsageError,
)
from ctxwise.sessions.store import (
    HistoryRow,
    SessionCommit,
    SessionSnapshot,
    SessionStore,
    check_keep,
    check_session_id,
    check_span,
    check_tool_ids,
    dumps,
    loads,
)

try:
    import psycopg
    from psycopg import sql
except ImportError as e:  # pragma: no cover - exercised without the extra
    raise MissingDependencyError("psycopg", "postgres", "the PostgreSQL session store") from e

__all__ = ["PostgresSessionStore"]

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

# Ordered and named, append only: never edit or reorder one that has shipped.
_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "001_sessions",
        (
            """CREATE TABLE IF NOT EXISTS {schema}.sessions (
            session_id text PRIMARY KEY, version bigint NOT NULL, state text NOT NULL,
            log_length bigint NOT NULL)""",
            """CREATE TABLE IF NOT EXISTS {schema}.session_history (
            session_id text NOT NULL, pos bigint NOT NULL, message text NOT NULL,
            tokens bigint NOT NULL, origin bigint, PRIMARY KEY (session_id, pos))""",
            """CREATE TABLE IF NOT EXISTS {schema}.session_log (
            session_id text NOT NULL, seq bigint NOT NULL, message text NOT NULL,
            PRIMARY KEY (session_id, seq))""",
            """CREATE TABLE IF NOT EXISTS {schema}.session_turns (
            session_id text NOT NULL, turn bigint NOT NULL, trace text NOT NULL,
            PRIMARY KEY (session_id, turn))""",
        ),
    ),
    Migration(
        # the tool call ids a session used, one row each (the id as JSON text), so a
        # turn adds its own instead of rewriting every id in the state row
        "002_session_tool_ids",
        (
            """CREATE TABLE IF NOT EXISTS {schema}.session_tool_ids (
            session_id text NOT NULL, tool_id text NOT NULL,
            PRIMARY KEY (session_id, tool_id))""",
        ),
    ),
)
MIGRATIONS_TABLE = "session_migrations"

INT64_MAX = 2**63 - 1


def _one_line(e: BaseException) -> str:
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__


class PostgresSessionStore(SessionStore):
    """Sessions in PostgreSQL (see the module docstring)."""

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "ctxwise",
        connect_timeout: int = 10,
        clock: Clock = time.time,
    ):
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise UsageError(f"bad schema name {schema!r}: lowercase letters, digits and _")
        self.schema = schema
        self._lock = threading.RLock()
        try:
            self._conn: psycopg.Connection[Any] = psycopg.connect(
                conninfo, autocommit=True, connect_timeout=connect_timeout
            )
        except psycopg.Error as e:
            raise SessionStoreError(f"cannot connect to PostgreSQL: {_one_line(e)}") from None
        try:
            self._migrate(clock)
        except BaseException:
            self._conn.close()
            raise

    def _sql(self, template: str) -> sql.Composed:
        return sql.SQL(template).format(schema=sql.Identifier(self.schema))

    @contextmanager
    def _db(self) -> Iterator[psycopg.Connection[Any]]:
        with self._lock:
            try:
                yield self._conn
            except psycopg.Error as e:
                raise SessionStoreError(f"PostgreSQL: {_one_line(e)}") from e

    def _database(self, conn: psycopg.Connection[Any]) -> PostgresDatabase:
        # one migrator of this schema at a time, however many processes open it
        return PostgresDatabase(
            conn,
            MIGRATIONS_TABLE,
            f"PostgreSQL schema {self.schema!r}",
            render=self._sql,
            lock=f"ctxwise:sessions:{self.schema}",
        )

    def _migrate(self, clock: Clock) -> None:
        with self._db() as c:
            migrate(self._database(c), _MIGRATIONS, fail=SessionStoreError, clock=clock)

    def migrations(self) -> list[AppliedMigration]:
        """The migrations applied to the schema, in order, with when."""
        with self._db() as c:
            return list(status(self._database(c), _MIGRATIONS, fail=SessionStoreError).applied)

    def version(self, session_id: str) -> int:
        check_session_id(session_id)
        with self._db() as c:
            row = c.execute(
                self._sql("SELECT version FROM {schema}.sessions WHERE session_id = %s"),
                (session_id,),
            ).fetchone()
        return int(row[0]) if row else 0

    def load(self, session_id: str) -> SessionSnapshot:
        check_session_id(session_id)
        with self._db() as c, c.transaction():
            c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = c.execute(
                self._sql(
                    "SELECT version, state, log_length FROM {schema}.sessions WHERE session_id = %s"
                ),
                (session_id,),
            ).fetchone()
            rows = c.execute(
                self._sql(
                    "SELECT message, tokens, origin FROM {schema}.session_history "
                    "WHERE session_id = %s ORDER BY pos"
                ),
                (session_id,),
            ).fetchall()
            ids = c.execute(
                self._sql("SELECT tool_id FROM {schema}.session_tool_ids WHERE session_id = %s"),
                (session_id,),
            ).fetchall()
        if row is None:
            return SessionSnapshot(session_id, 0, {}, (), 0)
        where = f"session {session_id!r}"
        history = tuple(
            HistoryRow(
                self._json(m, f"{where}: history row {i}"), int(t), None if o is None else int(o)
            )
            for i, (m, t, o) in enumerate(rows)
        )
        state = self._json(row[1], f"{where}: state")
        tool_ids = [self._json(r[0], f"{where}: tool id") for r in ids]
        if not all(isinstance(i, str) for i in tool_ids):
            raise SessionStoreError(
                f"PostgreSQL schema {self.schema!r}: {where}: damaged: a tool id is not a string"
            )
        return SessionSnapshot(
            session_id, int(row[0]), state, history, int(row[2]), frozenset(tool_ids)
        )

    def _json(self, text: str, what: str) -> Any:
        return loads(text, what, f"PostgreSQL schema {self.schema!r}")

    def commit(self, session_id: str, expected_version: int, change: SessionCommit) -> int:
        check_session_id(session_id)
        state = dumps(dict(change.state))
        history = [(dumps(dict(r.message)), r.tokens, r.origin) for r in change.history]
        log = [dumps(dict(m)) for m in change.log]
        trace = dumps(dict(change.trace)) if change.trace is not None else None
        ids = [(session_id, dumps(i)) for i in check_tool_ids(change.tool_ids)]
        with self._db() as c, c.transaction():
            c.execute(
                self._sql(
                    "INSERT INTO {schema}.sessions (session_id, version, state, log_length) "
                    "VALUES (%s, 0, '{{}}', 0) ON CONFLICT (session_id) DO NOTHING"
                ),
                (session_id,),
            )
            row = c.execute(
                self._sql(
                    "SELECT version, log_length FROM {schema}.sessions "
                    "WHERE session_id = %s FOR UPDATE"
                ),
                (session_id,),
            ).fetchone()
            assert row is not None  # inserted above when it was missing
            found, log_length = int(row[0]), int(row[1])
            if found != expected_version:
                raise SessionConflictError(session_id, expected=expected_version, found=found)
            counted = c.execute(
                self._sql("SELECT COUNT(*) FROM {schema}.session_history WHERE session_id = %s"),
                (session_id,),
            ).fetchone()
            check_keep(change.keep, int(counted[0]) if counted else 0, session_id)
            new = found + 1
            c.execute(
                self._sql(
                    "UPDATE {schema}.sessions SET version = %s, state = %s, log_length = %s "
                    "WHERE session_id = %s"
                ),
                (new, state, log_length + len(log), session_id),
            )
            c.execute(
                self._sql(
                    "DELETE FROM {schema}.session_history WHERE session_id = %s AND pos >= %s"
                ),
                (session_id, change.keep),
            )
            with c.cursor() as cur:
                cur.executemany(
                    self._sql("INSERT INTO {schema}.session_history VALUES (%s, %s, %s, %s, %s)"),
                    [(session_id, change.keep + i, *r) for i, r in enumerate(history)],
                )
                cur.executemany(
                    self._sql("INSERT INTO {schema}.session_log VALUES (%s, %s, %s)"),
                    [(session_id, log_length + i, m) for i, m in enumerate(log)],
                )
                cur.executemany(
                    self._sql(
                        "INSERT INTO {schema}.session_tool_ids VALUES (%s, %s) "
                        "ON CONFLICT DO NOTHING"
                    ),
                    ids,
                )
            if trace is not None:
                c.execute(
                    self._sql("INSERT INTO {schema}.session_turns VALUES (%s, %s, %s)"),
                    (session_id, change.turn if change.turn is not None else new, trace),
                )
        return new

    def traces(self, session_id: str) -> list[dict[str, Any]]:
        check_session_id(session_id)
        with self._db() as c:
            rows = c.execute(
                self._sql(
                    "SELECT turn, trace FROM {schema}.session_turns WHERE session_id = %s "
                    "ORDER BY turn"
                ),
                (session_id,),
            ).fetchall()
        return [self._json(r[1], f"session {session_id!r}: trace of turn {r[0]}") for r in rows]

    def log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        check_session_id(session_id)
        start, stop = check_span(start, stop)
        with self._db() as c:
            rows = c.execute(
                self._sql(
                    "SELECT seq, message FROM {schema}.session_log WHERE session_id = %s "
                    "AND seq >= %s AND seq < %s ORDER BY seq"
                ),
                (
                    session_id,
                    min(start, INT64_MAX),
                    INT64_MAX if stop is None else min(stop, INT64_MAX),
                ),
            ).fetchall()
        return [self._json(r[1], f"session {session_id!r}: log message {r[0]}") for r in rows]

    def sessions(self) -> list[str]:
        # COLLATE "C": by code point, as SQLite (BINARY) and the in-memory store sort,
        # whatever the database's collation (en_US puts "a_b" before "a-b" and
        # "B" before "b"; that order would differ from one server to the next)
        with self._db() as c:
            rows = c.execute(
                self._sql(
                    "SELECT session_id FROM {schema}.sessions WHERE version > 0"
                    ' ORDER BY session_id COLLATE "C"'
                )
            ).fetchall()
        return [r[0] for r in rows]

    def close(self) -> None:
        self._conn.close()
