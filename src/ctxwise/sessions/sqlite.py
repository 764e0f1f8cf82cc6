"""The SQLite session store: the embedded default (see :mod:`ctxwise.sessions`).

A session's write lock (:meth:`SQLiteSessionStore.lock`) is an exclusive ``flock``
on a lock file of its own in a folder beside the database (``DB.session-locks/``),
held inside the in-process lock every store shares. A lock file, not SQLite
itself: a write transaction (``BEGIN IMMEDIATE``) would lock the whole file, every
session of it and the memory store beside them, for as long as a turn runs, where a
file per session leaves other sessions' turns free; and ``flock`` ends with its
holder, so a writer killed in a turn never blocks the next one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import Any

from ctxwise._migrations import (
    AppliedMigration,
    Clock,
    Migration,
    SQLiteDatabase,
    migrate,
    status,
)
from ctxwise._sqlite import use_wal
from ctxwise.errors import (
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
    import fcntl
except ImportError:  # Windows: a session's lock holds against this process only
    fcntl = None  # type: ignore[assignment]

__all__ = ["SQLiteSessionStore"]

LOCKS_SUFFIX = ".session-locks"
"""The folder beside the database file that holds its sessions' lock files."""

INT64_MAX = 2**63 - 1

# Ordered and named, append only: never edit or reorder one that has shipped.
_SQLITE_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "001_sessions",
        (
            """CREATE TABLE IF NOT EXISTS ctxwise_sessions (
            session_id TEXT PRIMARY KEY, version INTEGER NOT NULL, state TEXT NOT NULL,
            log_length INTEGER NOT NULL)""",
            """CREATE TABLE IF NOT EXISTS ctxwise_session_history (
            session_id TEXT NOT NULL, pos INTEGER NOT NULL, message TEXT NOT NULL,
            tokens INTEGER NOT NULL, origin INTEGER, PRIMARY KEY (session_id, pos))""",
            """CREATE TABLE IF NOT EXISTS ctxwise_session_log (
            session_id TEXT NOT NULL, seq INTEGER NOT NULL, message TEXT NOT NULL,
            PRIMARY KEY (session_id, seq))""",
            """CREATE TABLE IF NOT EXISTS ctxwise_session_turns (
            session_id TEXT NOT NULL, turn INTEGER NOT NULL, trace TEXT NOT NULL,
            PRIMARY KEY (session_id, turn))""",
        ),
    ),
    Migration(
        # the tool call ids a session used, one row each (the id as JSON text), so a
        # turn adds its own instead of rewriting every id in the state row
        "002_session_tool_ids",
        (
            """CREATE TABLE IF NOT EXISTS ctxwise_session_tool_ids (
            session_id TEXT NOT NULL, tool_id TEXT NOT NULL,
            PRIMARY KEY (session_id, tool_id)) WITHOUT ROWID""",
        ),
    ),
)
MIGRATIONS_TABLE = "ctxwise_session_migrations"


def _open_lock_file(path: str) -> int:
    """A descriptor of the lock file ``path``, made (with its folder) when missing."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    try:
        try:
            return os.open(path, flags, 0o666)
        except FileNotFoundError:  # no folder yet
            os.makedirs(os.path.dirname(path), exist_ok=True)
            return os.open(path, flags, 0o666)
    except OSError as exc:
        raise SessionStoreError(
            f"{path}: cannot open the session lock file ({exc.strerror or exc})"
        ) from None


def _flock(fd: int, *, wait: bool) -> bool:
    """Take the exclusive ``flock`` on ``fd``: at once or not at all, or (``wait``)
    when its holder lets go."""
    assert fcntl is not None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


@contextmanager
def _file_lock(path: str, session_id: str, timeout: float, deadline: float) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``: at once when it is free, else waited for
    until ``deadline`` (:class:`SessionBusyError` then). The file stays (one empty
    file per session): a holder that removed it as it let go would leave its waiters
    a lock on a file no longer there, to be taken again behind any newcomer."""
    fd = _open_lock_file(path)
    try:
        if not _flock(fd, wait=False) and not _wait_flock(fd, deadline - time.monotonic()):
            raise SessionBusyError(session_id, timeout)
    except BaseException:
        os.close(fd)
        raise
    try:
        yield
    finally:
        # lets the lock go once no copy is open (a child forked inside the block holds
        # it until the child closes its copy or ends)
        os.close(fd)


def _wait_flock(fd: int, left: float) -> bool:
    """Wait up to ``left`` seconds for the ``flock`` on ``fd``. A blocking ``flock``
    (woken by the system as soon as the holder lets go, where polling would sleep
    through it) cannot be given a timeout, so it runs on a thread of its own; a
    wait given up on leaves the thread to let the lock go the moment it gets it,
    on a descriptor of its own."""
    if left <= 0:
        return False
    mine = os.dup(fd)
    guard, done = threading.Lock(), threading.Event()
    state: dict[str, object] = {}

    def wait() -> None:
        try:
            _flock(mine, wait=True)
        except OSError as e:
            state["error"] = e
        with guard:
            if state.get("abandoned"):
                os.close(mine)  # lets go of what it got
                return
            state["done"] = True
        done.set()

    threading.Thread(target=wait, name="ctxwise-session-lock", daemon=True).start()
    try:
        done.wait(left)
    finally:
        with guard:
            got = bool(state.get("done"))
            if not got:
                state["abandoned"] = True
    if got:
        os.close(mine)  # the lock stays with fd: the same open file
        if "error" in state:
            raise SessionStoreError(f"cannot lock a session: {state['error']}")
    return got


class SQLiteSessionStore(SessionStore):
    """Sessions in a SQLite file (WAL mode; every commit is ``BEGIN IMMEDIATE``, so
    two processes on one file serialize their commits and the version check holds)."""

    def __init__(
        self, path: str | Path, *, timeout: float = 30.0, clock: Clock = time.time
    ) -> None:
        if not isinstance(path, str | PathLike):  # 5 opened a file named '5'
            raise UsageError(f"a session store path is a str or a Path, got {path!r}")
        self.path = str(path)
        if "\x00" in self.path:  # sqlite3 raised ValueError ('embedded null byte')
            raise UsageError(f"bad session store path {self.path!r}: it holds a NUL character")
        try:
            self.path.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # no file name holds a lone surrogate
            raise UsageError(
                f"bad session store path {self.path!r}: it holds a lone surrogate, not a name"
            ) from None
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=timeout, check_same_thread=False, isolation_level=None
            )
            use_wal(self._conn, timeout)
            # as the memory store: in WAL mode a commit survives a crash of the process;
            # only a power loss can take back the last commits (no fsync per commit)
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._migrate(clock)
        except BaseException as e:
            if hasattr(self, "_conn"):
                self._conn.close()  # a store that cannot open holds no connection
            if isinstance(e, sqlite3.Error):
                raise SessionStoreError(f"cannot open session store {self.path!r}: {e}") from e
            raise
        self._lock = threading.Lock()
        self._file = self._database_file()

    def _migrate(self, clock: Clock) -> None:
        db = SQLiteDatabase(self._conn, MIGRATIONS_TABLE, repr(self.path))
        migrate(db, _SQLITE_MIGRATIONS, fail=SessionStoreError, clock=clock)

    @property
    def migrations(self) -> list[AppliedMigration]:
        """The migrations applied to the file, in order, with when."""
        with self._db() as c:
            db = SQLiteDatabase(c, MIGRATIONS_TABLE, repr(self.path))
            return list(status(db, _SQLITE_MIGRATIONS, fail=SessionStoreError).applied)

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._conn
            except sqlite3.Error as e:
                raise SessionStoreError(f"session store {self.path!r}: {e}") from e

    def _database_file(self) -> str:
        """The database file, wherever the path leads (``""``: a private database,
        ``":memory:"`` or SQLite's temporary one). Read from the path, not from
        SQLite, which cannot give back a name that is not UTF-8."""
        return "" if self.path in ("", ":memory:") else os.path.realpath(self.path)

    def lock(
        self, session_id: str, *, timeout: float = DEFAULT_LOCK_TIMEOUT
    ) -> contextlib.AbstractContextManager[None]:
        """Hold the session's write lock (see :meth:`SessionStore.lock`): the
        in-process lock of the database file and session, then an exclusive
        ``flock`` on ``DB.session-locks/HASH.lock`` (HASH: the first 32 hex digits
        of the session id's SHA-256; an empty file, kept for the session's next
        turns), which every process opening the file sees and the system drops when
        its holder dies. Another process's hold is waited for until ``timeout``. A
        database with no file (``":memory:"``), or a system without ``flock``
        (Windows), is held against this process only.

        Raises:
            SessionBusyError: another holder kept the lock for ``timeout`` seconds.
            SessionStoreError: the lock folder or file cannot be made.
        """
        check_session_id(session_id)
        return self._session_lock(session_id, check_timeout(timeout))

    @contextmanager
    def _session_lock(self, session_id: str, timeout: float) -> Iterator[None]:
        deadline = time.monotonic() + timeout
        key = ("sqlite", self._file, session_id) if self._file else ("object", id(self), session_id)
        with local_session_lock(key, session_id, timeout) as outermost:
            if not outermost or not self._file or fcntl is None:
                yield
                return
            digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:32]
            path = os.path.join(self._file + LOCKS_SUFFIX, f"{digest}.lock")
            with _file_lock(path, session_id, timeout, deadline):
                yield

    def version(self, session_id: str) -> int:
        check_session_id(session_id)
        with self._db() as c:
            row = c.execute(
                "SELECT version FROM ctxwise_sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
        return int(row[0]) if row else 0

    def load(self, session_id: str) -> SessionSnapshot:
        check_session_id(session_id)
        with self._db() as c:
            c.execute("BEGIN")
            try:
                row = c.execute(
                    "SELECT version, state, log_length FROM ctxwise_sessions WHERE session_id = ?",
                    (session_id,),
                ).fetchone()
                rows = c.execute(
                    "SELECT message, tokens, origin FROM ctxwise_session_history "
                    "WHERE session_id = ? ORDER BY pos",
                    (session_id,),
                ).fetchall()
                ids = c.execute(
                    "SELECT tool_id FROM ctxwise_session_tool_ids WHERE session_id = ?",
                    (session_id,),
                ).fetchall()
            finally:
                c.execute("COMMIT")
        if row is None:
            return SessionSnapshot(session_id, 0, {}, (), 0)
        where = f"session {session_id!r}"
        try:
            history = tuple(
                HistoryRow(self._json(m, f"{where}: history row {i}"), int(t), o)
                for i, (m, t, o) in enumerate(rows)
            )
            version, log_length = int(row[0]), int(row[2])
        except (TypeError, ValueError) as e:  # a count that is not a number
            raise SessionStoreError(f"session store {self.path!r}: {where}: damaged: {e}") from e
        return SessionSnapshot(
            session_id,
            version,
            self._json(row[1], f"{where}: state"),
            history,
            log_length,
            self._tool_ids([r[0] for r in ids], where),
        )

    def _tool_ids(self, texts: list[str], where: str) -> frozenset[str]:
        ids = [self._json(t, f"{where}: tool id") for t in texts]
        if not all(isinstance(i, str) for i in ids):
            raise SessionStoreError(
                f"session store {self.path!r}: {where}: damaged: a tool id is not a string"
            )
        return frozenset(ids)

    def _json(self, text: str, what: str) -> Any:
        return loads(text, what, f"session store {self.path!r}")

    def commit(self, session_id: str, expected_version: int, change: SessionCommit) -> int:
        check_session_id(session_id)
        state = dumps(dict(change.state))
        history = [(dumps(dict(r.message)), r.tokens, r.origin) for r in change.history]
        log = [dumps(dict(m)) for m in change.log]
        trace = dumps(dict(change.trace)) if change.trace is not None else None
        ids = [(session_id, dumps(i)) for i in check_tool_ids(change.tool_ids)]
        with self._db() as c:
            c.execute("BEGIN IMMEDIATE")
            try:
                row = c.execute(
                    "SELECT version, log_length FROM ctxwise_sessions WHERE session_id = ?",
                    (session_id,),
                ).fetchone()
                found, log_length = (int(row[0]), int(row[1])) if row else (0, 0)
                if found != expected_version:
                    raise SessionConflictError(session_id, expected=expected_version, found=found)
                (length,) = c.execute(
                    "SELECT COUNT(*) FROM ctxwise_session_history WHERE session_id = ?",
                    (session_id,),
                ).fetchone()
                check_keep(change.keep, int(length), session_id)
                new = found + 1
                c.execute(
                    "INSERT INTO ctxwise_sessions (session_id, version, state, log_length) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
                    "version = excluded.version, state = excluded.state, "
                    "log_length = excluded.log_length",
                    (session_id, new, state, log_length + len(log)),
                )
                c.execute(
                    "DELETE FROM ctxwise_session_history WHERE session_id = ? AND pos >= ?",
                    (session_id, change.keep),
                )
                c.executemany(
                    "INSERT INTO ctxwise_session_history VALUES (?, ?, ?, ?, ?)",
                    [(session_id, change.keep + i, *r) for i, r in enumerate(history)],
                )
                c.executemany(
                    "INSERT INTO ctxwise_session_log VALUES (?, ?, ?)",
                    [(session_id, log_length + i, m) for i, m in enumerate(log)],
                )
                if trace is not None:
                    c.execute(
                        "INSERT INTO ctxwise_session_turns VALUES (?, ?, ?)",
                        (session_id, change.turn if change.turn is not None else new, trace),
                    )
                c.executemany("INSERT OR IGNORE INTO ctxwise_session_tool_ids VALUES (?, ?)", ids)
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
        return new

    def traces(self, session_id: str) -> list[dict[str, Any]]:
        check_session_id(session_id)
        with self._db() as c:
            rows = c.execute(
                "SELECT turn, trace FROM ctxwise_session_turns WHERE session_id = ? ORDER BY turn",
                (session_id,),
            ).fetchall()
        return [self._json(r[1], f"session {session_id!r}: trace of turn {r[0]}") for r in rows]

    def log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        check_session_id(session_id)
        start, stop = check_span(start, stop)
        with self._db() as c:
            rows = c.execute(
                "SELECT seq, message FROM ctxwise_session_log WHERE session_id = ? "
                "AND seq >= ? AND seq < ? ORDER BY seq",
                (
                    session_id,
                    min(start, INT64_MAX),
                    INT64_MAX if stop is None else min(stop, INT64_MAX),
                ),
            ).fetchall()
        return [self._json(r[1], f"session {session_id!r}: log message {r[0]}") for r in rows]

    def sessions(self) -> list[str]:
        with self._db() as c:
            rows = c.execute("SELECT session_id FROM ctxwise_sessions ORDER BY session_id")
            return [r[0] for r in rows]

    def close(self) -> None:
        self._conn.close()
