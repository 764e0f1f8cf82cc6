"""Where the Engine keeps sessions: a versioned row per session, written in one transaction.

A session is stored as five things:

- a **state** row (JSON: case facts, rules, counters, the last route) with a
  ``version`` that every commit raises by one;
- the **live history**: the messages the next request renders, one row per
  position, in ctxwise's neutral JSON (:mod:`ctxwise.formats.neutral`), each with
  its token count and its origin (the log position it came from; none for a
  compaction summary). A turn that only appends writes only the new rows; a turn
  that cleared or compacted rewrites the rows from the first one that changed;
- the **log**: every message the session was ever given, verbatim and
  append-only. It is the archive: clearing and compaction edit the live history,
  never the log, and the log is written in the same transaction as the edit;
- one **trace** per turn (:class:`ctxwise.trace.Trace` as JSON);
- the **tool ids**: every tool call id the session used, one row each, so a
  reused id can be refused (append-only too).

A commit writes what changed and nothing more: the state row, the history rows
from the first one that changed, and the new log, trace and tool id rows. What a
turn writes does not grow with the session's length; a session's whole log is
read only when asked for (:meth:`SessionStore.log`, which can read a span of it).

:meth:`SessionStore.commit` applies all of it atomically, and only if the stored
version is still the one the caller read (optimistic concurrency). Otherwise it
raises :class:`~ctxwise.errors.SessionConflictError` and writes nothing, so two
writers of one session can never lose each other's turns; the Engine re-reads
and re-applies (see :meth:`ctxwise.Engine.turn`). Engine turns first take the
session's write lock (:meth:`SessionStore.lock`), so writers of one session wait for
each other instead of failing.

Backends: :class:`InMemorySessionStore` (the reference), :class:`SQLiteSessionStore`
(the embedded default; its own tables in the same file as the memory store is
fine, WAL mode, ``BEGIN IMMEDIATE`` commits) and ``PostgresSessionStore`` (extra
``postgres``; the row is locked with ``SELECT … FOR UPDATE``). Open one by URL with
:func:`open_session_store`.
"""

from __future__ import annotations

from ctxwise.memory.urls import store_kind
from ctxwise.sessions.sqlite import SQLiteSessionStore
from ctxwise.sessions.store import (
    HistoryRow,
    InMemorySessionStore,
    SessionCommit,
    SessionSnapshot,
    SessionStore,
    check_session_id,
)

__all__ = [
    "HistoryRow",
    "InMemorySessionStore",
    "SQLiteSessionStore",
    "SessionCommit",
    "SessionSnapshot",
    "SessionStore",
    "check_session_id",
    "open_session_store",
]


def open_session_store(url: str, *, schema: str = "ctxwise") -> SessionStore:
    """The session store ``url`` names: ``memory``, ``sqlite:///PATH`` or
    ``postgresql://…`` (extra ``postgres``; tables in ``schema``), as
    :func:`ctxwise.memory.open_store` spells them.

    Raises:
        StoreURLError: an unknown scheme or a malformed URL (nothing is opened).
        SessionStoreError: the store cannot be opened.
    """
    kind = store_kind(url)
    if kind == "memory":
        return InMemorySessionStore()
    if kind == "sqlite":
        return SQLiteSessionStore(url.partition("://")[2][1:] or ":memory:")
    from ctxwise.sessions.postgres import PostgresSessionStore

    return PostgresSessionStore(url, schema=schema)
