"""The PostgreSQL session store (extra ``postgres``; see :mod:`ctxwise.sessions`).

Five tables in the store's schema (``ctxwise`` by default), beside the memory
store's: ``sessions`` (one row per session: version, state, log length),
``session_history``, ``session_log``, ``session_turns`` and ``session_tool_ids``,
plus ``session_migrations``. A commit runs in one transaction that first locks the
session's row (``SELECT … FOR UPDATE``; a new session is inserted with ``ON
CONFLICT DO NOTHING`` and re-read), so two writers of one session serialize and
the version check cannot be raced. Texts are stored as ``text`` (JSON with NUL
escaped by the encoder, so any message fits).

A session's write lock (:meth:`PostgresSessionStore.lock`), which the Engine holds
for a whole turn, is a session advisory lock keyed by the schema and the session
id: it locks no row (readers and the other sessions' writers go on), outlives the
transactions a turn runs, and the server drops it when the connection ends, so a
writer killed in a turn never blocks the next one. It is waited for on the server
(``pg_advisory_lock`` under a ``lock_timeout``): waiters queue there and the next
one gets the lock the moment it is let go, which polling would sleep through. The
wait and the hold take a connection of their own (kept for the next lock), not the
store's, which every session the store serves shares.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
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
    SessionBusyError,
    SessionConflictError,
    SessionStoreError,
    UsageError,
)
from ctxwise.sessions.store import (
    DEFAULT_LOCK_TIMEOUT,
    HistoryRow,
    SessionCommit,
    SessionSnapshot,
    SessionStore,
    check_keep,
    check_session_id,
    check_span,
    check_timeout,
    check_tool_ids,
    dumps,
    loads,
    local_session_lock,
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


_IDLE_LOCK_CONNS = 4
"""Lock connections a store keeps idle for the next locks; more are closed."""


def _advisory_lock(conn: psycopg.Connection[Any], key: int, left: float) -> bool:
    """Take the session advisory lock ``key`` on ``conn``, waiting up to ``left``
    seconds on the server (``lock_timeout``; one try when no time is left)."""
    try:
        if left < 0.001:  # a lock_timeout of 0 would wait for ever
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", [key]).fetchone()
            return bool(row and row[0])
        conn.execute("SELECT set_config('lock_timeout', %s, false)", [f"{int(left * 1000)}ms"])
        try:
            conn.execute("SELECT pg_advisory_lock(%s)", [key])
        except psycopg.errors.LockNotAvailable:
            return False
        return True
    except psycopg.Error as e:
        raise SessionStoreError(f"PostgreSQL: cannot lock a session: {_one_line(e)}") from e


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
        self._connect = partial(
            psycopg.connect, conninfo, autocommit=True, connect_timeout=connect_timeout
        )
        # idle connections for session locks (see lock), and whether the store closed
        self._lock_conns: list[psycopg.Connection[Any]] = []
        self._closed = False
        try:
            self._conn: psycopg.Connection[Any] = self._connect()
        except psycopg.Error as e:
            raise SessionStoreError(f"cannot connect to PostgreSQL: {_one_line(e)}") from None
        info = self._conn.info
        # the database this store reaches, for the in-process part of a session's lock
        self._database_id = (info.host, info.port, info.dbname)
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

    def _lock_key(self, session_id: str) -> int:
        """The advisory lock key of a session: the first 8 bytes (signed) of the
        SHA-256 of the schema and the session id, so two schemas never share a
        session's lock, and no id is read as another."""
        seed = b"\x00".join([b"ctxwise-session", self.schema.encode(), session_id.encode("utf-8")])
        return int.from_bytes(hashlib.sha256(seed).digest()[:8], "big", signed=True)

    def lock(
        self, session_id: str, *, timeout: float = DEFAULT_LOCK_TIMEOUT
    ) -> contextlib.AbstractContextManager[None]:
        """Hold the session's write lock (see :meth:`SessionStore.lock` and the
        module docstring): the in-process lock of the database, schema and session,
        then a session advisory lock that every connection to the database sees,
        waited for on the server until ``timeout``, on a lock connection of this
        store's (made when none is idle, kept for the next lock, closed with the
        store).

        Raises:
            SessionBusyError: another holder kept the lock for ``timeout`` seconds.
            SessionStoreError: the database failed (it cannot be reached, say).
        """
        check_session_id(session_id)
        return self._session_lock(session_id, check_timeout(timeout))

    @contextmanager
    def _session_lock(self, session_id: str, timeout: float) -> Iterator[None]:
        deadline = time.monotonic() + timeout
        key = self._lock_key(session_id)
        held = ("postgres", *self._database_id, self.schema, session_id)
        with local_session_lock(held, session_id, timeout) as outermost:
            if not outermost:
                yield
                return
            conn = self._lock_conn()
            try:
                got = _advisory_lock(conn, key, deadline - time.monotonic())
            except BaseException:
                conn.close()  # in an unknown state: whatever it holds goes with it
                raise
            if not got:
                self._idle(conn)
                raise SessionBusyError(session_id, timeout)
            holder = os.getpid()
            try:
                yield
            finally:
                # only the holder unlocks: a child forked inside the block shares the
                # connection's socket, and its unlock there would let the lock go
                # while the holder still runs (and garble the holder's connection)
                if os.getpid() == holder:
                    try:
                        conn.execute("SELECT pg_advisory_unlock(%s)", [key])
                    except psycopg.Error:
                        conn.close()  # the server lets the lock go with it
                    self._idle(conn)

    def _lock_conn(self) -> psycopg.Connection[Any]:
        """An idle lock connection, or a new one."""
        with self._lock:
            if self._closed:
                raise SessionStoreError(f"PostgreSQL schema {self.schema!r}: the store is closed")
            if self._lock_conns:
                return self._lock_conns.pop()
        try:
            return self._connect()
        except psycopg.Error as e:
            raise SessionStoreError(f"cannot connect to PostgreSQL: {_one_line(e)}") from None

    def _idle(self, conn: psycopg.Connection[Any]) -> None:
        """Keep a lock connection for the next lock (one that is broken, or any once
        the store is closed, is closed instead)."""
        with self._lock:
            if not self._closed and not conn.closed and len(self._lock_conns) < _IDLE_LOCK_CONNS:
                self._lock_conns.append(conn)
                return
        conn.close()

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
        with self._lock:
            self._closed = True
            idle, self._lock_conns = self._lock_conns, []
        for conn in idle:
            conn.close()
        self._conn.close()
