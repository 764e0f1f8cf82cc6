"""The session store contract and the in-memory reference backend (see :mod:`ctxwise.sessions`)."""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ctxwise.errors import (
    SessionBusyError,
    SessionConflictError,
    SessionStoreError,
    UnknownSessionError,
    UsageError,
)

__all__ = [
    "HistoryRow",
    "InMemorySessionStore",
    "SessionCommit",
    "SessionSnapshot",
    "SessionStore",
    "check_session_id",
    "dumps",
]

MAX_SESSION_ID = 200

DEFAULT_LOCK_TIMEOUT = 30.0
"""How long, in seconds, :meth:`SessionStore.lock` waits by default (as long as a
SQLite store waits for a busy file)."""


def check_session_id(session_id: object) -> str:
    """A valid session id (a non-empty string of at most 200 characters, no NUL, and
    text every store can hold: no lone surrogate)."""
    if not isinstance(session_id, str) or not session_id.strip():
        raise UsageError("a session id is a non-empty string")
    if len(session_id) > MAX_SESSION_ID or "\x00" in session_id:
        raise UsageError(f"bad session id {session_id[:40]!r}: at most 200 characters, no NUL")
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(
            f"bad session id {session_id[:40]!r}: it holds a lone surrogate, not text"
        ) from None
    return session_id


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """One message of the live history: neutral JSON, its tokens, and the log
    position it came from (``None`` for a message ctxwise wrote, like a summary)."""

    message: Mapping[str, Any]
    tokens: int
    origin: int | None


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """A session as stored at ``version`` (0: never written), with every tool call
    id its commits recorded (``tool_ids``)."""

    session_id: str
    version: int
    state: Mapping[str, Any]
    history: tuple[HistoryRow, ...]
    log_length: int
    tool_ids: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class SessionCommit:
    """What one turn writes: the new state, the live history from position ``keep``
    on (rows before ``keep`` are unchanged), messages appended to the log, the
    turn's trace (``None``: a commit that only records messages), and the tool call
    ids the session uses from now on (added to the stored ones, each kept once).

    Everything a commit writes is what changed: the log, the traces and the tool
    ids only grow, so a turn's write does not grow with the session's length."""

    state: Mapping[str, Any]
    keep: int
    history: Sequence[HistoryRow]
    log: Sequence[Mapping[str, Any]]
    trace: Mapping[str, Any] | None = None
    turn: int | None = None
    tool_ids: Sequence[str] = ()


def dumps(value: Any) -> str:
    """``value`` as compact JSON text every backend can store: UTF-8 as it is, or,
    when it holds a lone surrogate (a broken emoji pasted into a message), with
    non-ASCII characters escaped, which ``json.loads`` reads back the same. A value
    JSON cannot hold (a set, bytes, a date, a cycle) is a UsageError, on every backend."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError, RecursionError) as e:
        raise UsageError(f"a session commit holds a value JSON cannot hold: {e}") from None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), sort_keys=True)
    return text


def loads(text: str, what: str, store: str) -> Any:
    """A JSON value as a backend stored it; one cut short or overwritten is a
    :class:`~ctxwise.errors.SessionStoreError` naming ``what`` (``session 's1':
    state``) in ``store``, not a ``JSONDecodeError`` out of a turn."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError) as e:
        raise SessionStoreError(
            f"{store}: {what} is not valid JSON ({e}); the store is damaged"
        ) from e


def check_span(start: object, stop: object) -> tuple[int, int | None]:
    """A log span's bounds: ``start`` a non-negative int, ``stop`` one or ``None``
    (to the end)."""

    def bound(name: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UsageError(f"log {name} is a non-negative integer, got {value!r}")
        return value

    return bound("start", start), None if stop is None else bound("stop", stop)


def check_tool_ids(ids: Sequence[str]) -> list[str]:
    """A commit's tool ids: strings (each stored once, as JSON text)."""
    if isinstance(ids, str) or any(not isinstance(i, str) for i in ids):
        raise UsageError(f"a commit's tool_ids are a list of strings, got {ids!r}")
    return list(dict.fromkeys(ids))


def check_keep(keep: object, length: int, session_id: str) -> None:
    """A commit's ``keep`` must be a position in the stored history (``0`` to its
    length): past it the backends left a gap (SQLite) or kept less (memory), and a
    negative one dropped rows from the end or wrote negative positions."""
    if isinstance(keep, bool) or not isinstance(keep, int) or not 0 <= keep <= length:
        raise UsageError(
            f"session {session_id!r}: commit keep={keep!r} is not a position in its "
            f"history of {length} message(s) (0 to {length}); nothing was written"
        )


def check_timeout(timeout: object) -> float:
    """A lock timeout: a finite number of seconds, 0 or more (0: try once)."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout < 0
    ):
        raise UsageError(f"a lock timeout is a finite number of seconds >= 0, got {timeout!r}")
    return float(timeout)


@dataclass(slots=True)
class _Holder:
    """Who holds one session's in-process lock (a thread, how many times) and who
    waits for it, first come first served."""

    cond: threading.Condition
    owner: int | None = None
    depth: int = 0
    queue: deque[object] = field(default_factory=deque)


_GUARD = threading.Lock()
_HOLDERS: dict[Hashable, _Holder] = {}


@contextmanager
def local_session_lock(
    key: Hashable, session_id: str, timeout: float, *, clock: Callable[[], float] = time.monotonic
) -> Iterator[bool]:
    """Hold the in-process lock ``key`` (what names a session's data: a file and the
    session id, say) against every other thread of this process, waiting for it up to
    ``timeout`` seconds (:class:`SessionBusyError` then). Waiters get it in the order
    they came. A thread that holds it already holds it again at once (a step of a
    turn that records into its own session must not wait for itself); the value is
    whether this hold is the outermost one, the one that also takes the lock other
    processes see."""
    me, ticket = threading.get_ident(), object()
    with _GUARD:
        holder = _HOLDERS.get(key)
        if holder is None:
            holder = _HOLDERS[key] = _Holder(threading.Condition(_GUARD))
        if holder.owner == me:
            holder.depth += 1
            outermost = False
        else:
            _wait_turn(holder, ticket, key, session_id, timeout, clock)
            holder.owner, holder.depth, outermost = me, 1, True
    try:
        yield outermost
    finally:
        with _GUARD:
            holder.depth -= 1
            if holder.depth == 0:
                holder.owner = None
                if holder.queue:
                    holder.cond.notify_all()
                else:
                    del _HOLDERS[key]


def _wait_turn(
    holder: _Holder,
    ticket: object,
    key: Hashable,
    session_id: str,
    timeout: float,
    clock: Callable[[], float],
) -> None:
    """Wait (``_GUARD`` held) until ``holder`` is free and ``ticket`` is first in
    line; a waiter that gives up (the timeout, an interrupt) leaves the line."""
    holder.queue.append(ticket)
    deadline = clock() + timeout
    try:
        while holder.owner is not None or holder.queue[0] is not ticket:
            left = deadline - clock()
            if left <= 0:
                raise SessionBusyError(session_id, timeout)
            holder.cond.wait(left)
    except BaseException:
        holder.queue.remove(ticket)
        if holder.owner is None and holder.queue:
            holder.cond.notify_all()  # the next in line may go now
        elif holder.owner is None:
            del _HOLDERS[key]
        raise
    holder.queue.popleft()


class SessionStore(ABC):
    """The contract every session backend implements (see the module docstring)."""

    @abstractmethod
    def version(self, session_id: str) -> int:
        """The stored version (0 when the session does not exist)."""

    @abstractmethod
    def load(self, session_id: str) -> SessionSnapshot:
        """The session as stored (version 0 and empty when it does not exist)."""

    @abstractmethod
    def commit(self, session_id: str, expected_version: int, change: SessionCommit) -> int:
        """Apply ``change`` atomically if the stored version is ``expected_version``;
        return the new version. :class:`SessionConflictError` (nothing written) when
        another writer got there first."""

    @abstractmethod
    def traces(self, session_id: str) -> list[dict[str, Any]]:
        """Every turn's trace, in turn order."""

    @abstractmethod
    def log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        """The messages the session was given, in order (neutral JSON): every one, or
        those at log positions ``start`` up to ``stop`` (excluded; ``None``: to the end),
        read without the rest."""

    @abstractmethod
    def sessions(self) -> list[str]:
        """The ids of every stored session, sorted by code point (Python's ``sorted``,
        SQLite's BINARY, PostgreSQL's ``COLLATE "C"``): the same order on every
        backend, whatever a database's collation."""

    def close(self) -> None:  # noqa: B027 - optional for backends without resources
        """Release the backend's resources."""

    def lock(
        self, session_id: str, *, timeout: float = DEFAULT_LOCK_TIMEOUT
    ) -> contextlib.AbstractContextManager[None]:
        """Hold the session's write lock until the block ends: ``with
        store.lock("s1"):``. The Engine holds it from a turn's load to its commit, so
        writers of one session wait for each other instead of committing over each
        other and failing (the version check of :meth:`commit` still guards every
        write, for writers that do not lock).

        Another holder of the same session waits, first come first served within a
        process, for up to ``timeout`` seconds (0: one try), then gets
        :class:`~ctxwise.errors.SessionBusyError` and the block does not run. The
        thread that holds the lock may take it again (through any store object over
        the same data): a step that records into its own session does not wait for
        itself. Other sessions are independent. The lock ends with its holder: when
        the block ends (by an error too) and when the process dies, so a crashed
        writer never blocks the next.

        This base holds the session against the other threads of this process
        (:func:`local_session_lock`), which is all an in-memory store needs and what
        a third-party backend gets until it overrides this method (writers in other
        processes then still never lose a turn: the Engine re-applies a turn whose
        commit found the session moved on). The backends shipped add a lock other
        processes see: an exclusive ``flock`` on a lock file beside a SQLite file,
        a session advisory lock on PostgreSQL.

        Raises:
            SessionBusyError: another holder kept the lock for ``timeout`` seconds.
            UsageError: a bad session id or timeout.
        """
        check_session_id(session_id)
        return self._local_lock(("object", id(self), session_id), session_id, timeout)

    @contextmanager
    def _local_lock(self, key: Hashable, session_id: str, timeout: float) -> Iterator[None]:
        with local_session_lock(key, session_id, check_timeout(timeout)):
            yield

    def require(self, session_id: str) -> int:
        """The stored version, or :class:`UnknownSessionError` when there is none."""
        v = self.version(check_session_id(session_id))
        if v == 0:
            raise UnknownSessionError(session_id)
        return v

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _copy(value: Any) -> Any:
    return json.loads(dumps(value))


@dataclass
class _MemSession:
    version: int = 0
    state: Mapping[str, Any] = field(default_factory=dict)
    history: list[HistoryRow] = field(default_factory=list)
    log: list[Mapping[str, Any]] = field(default_factory=list)
    traces: list[Mapping[str, Any]] = field(default_factory=list)
    tool_ids: set[str] = field(default_factory=set)


class InMemorySessionStore(SessionStore):
    """Sessions in process memory: the reference backend (thread-safe).

    A commit changes its session in place under the lock, once every check has
    passed: the log, the traces and the tool ids grow by what the commit adds (they
    are not copied whole), and every read copies what it returns under the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, _MemSession] = {}

    def version(self, session_id: str) -> int:
        check_session_id(session_id)
        s = self._sessions.get(session_id)
        return s.version if s is not None else 0

    def load(self, session_id: str) -> SessionSnapshot:
        check_session_id(session_id)
        with self._lock:
            s = self._sessions.get(session_id, _MemSession())
            return SessionSnapshot(
                session_id,
                s.version,
                json.loads(dumps(s.state)),
                tuple(s.history),
                len(s.log),
                frozenset(s.tool_ids),
            )

    def commit(self, session_id: str, expected_version: int, change: SessionCommit) -> int:
        check_session_id(session_id)
        # stored as JSON copies, as the other backends store them: what JSON cannot
        # hold is refused here too, and a caller's later edit of a dict changes nothing
        payload = _copy(dict(change.state))
        rows = [HistoryRow(_copy(dict(r.message)), r.tokens, r.origin) for r in change.history]
        log = [_copy(dict(m)) for m in change.log]
        trace = [_copy(dict(change.trace))] if change.trace is not None else []
        ids = check_tool_ids(change.tool_ids)
        with self._lock:
            s = self._sessions.get(session_id)
            found = s.version if s is not None else 0
            if found != expected_version:
                raise SessionConflictError(session_id, expected=expected_version, found=found)
            check_keep(change.keep, len(s.history) if s is not None else 0, session_id)
            if s is None:
                s = self._sessions[session_id] = _MemSession()
            # nothing below can fail: the session changes whole or not at all
            s.version += 1
            s.state = payload
            del s.history[change.keep :]
            s.history.extend(rows)
            s.log.extend(log)
            s.traces.extend(trace)
            s.tool_ids.update(ids)
            return s.version

    def traces(self, session_id: str) -> list[dict[str, Any]]:
        check_session_id(session_id)
        with self._lock:
            s = self._sessions.get(session_id)
            held = [] if s is None else list(s.traces)
        return [json.loads(dumps(t)) for t in held]

    def log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        check_session_id(session_id)
        start, stop = check_span(start, stop)
        with self._lock:
            s = self._sessions.get(session_id)
            held = [] if s is None else s.log[start:stop]
        return [json.loads(dumps(m)) for m in held]

    def sessions(self) -> list[str]:
        with self._lock:  # a commit adding a session mid-iteration raised RuntimeError
            return sorted(k for k, s in self._sessions.items() if s.version)
