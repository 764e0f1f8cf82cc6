"""SQLite connection helpers shared by the SQLite stores."""

from __future__ import annotations

import sqlite3
import time

__all__ = ["use_wal"]


def use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch ``conn``'s database to WAL mode.

    Changing the journal mode takes a lock that SQLite's busy handler does not wait
    for: two processes opening a new file at once can see "database is locked" at
    once. The switch is tried again, a moment apart, until ``timeout`` seconds have
    passed, as the connection's own busy timeout would for any other statement.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e):
                raise
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.02)
