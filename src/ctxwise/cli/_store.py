"""``--store URL|PATH``: how every command names a store.

A value with ``://`` in it, or ``memory``, is a store URL as ``EngineConfig.store``
takes it (``sqlite:///PATH``, ``postgresql://…``, ``memory``); anything else is the
path of a SQLite file. A relative SQLite path is the shell's, never a config
file's folder, whichever way it is spelled. ``--db`` is the option's old name,
kept hidden where it existed (``demo``, ``replay``, ``trace``, ``mcp``).

Commands that write (``demo``, ``replay``, ``mcp``, ``eval memory``) create a
SQLite file that does not exist yet, in a folder that must; a read-only command
(``trace``) refuses a file that does not exist or holds no ctxwise sessions, and
never creates or migrates one. A read-only command that resolves memory pointers
(``explain``, ``inspect-ui``) opens the memory store in the same file or database
only when it can be read without writing to it (:func:`read_only_memory`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ctxwise.errors import CtxwiseError, OutputError, UsageError
from ctxwise.memory.urls import store_kind

if TYPE_CHECKING:
    from ctxwise.config import EngineConfig
    from ctxwise.memory.store import Store

__all__ = [
    "STORE_HELP",
    "DbAlias",
    "existing_session_store",
    "given_store",
    "read_only_memory",
    "sqlite_path",
    "store_url",
    "writable_store",
]

STORE_HELP = "a SQLite file path, or a URL: sqlite:///PATH, postgresql://…, memory"

DbAlias = Annotated[str | None, typer.Option("--db", hidden=True, help="The old name of --store.")]
"""``--db``: the hidden alias of ``--store`` on the commands that had it."""


def given_store(store: str | None, db: str | None) -> str | None:
    """The store named by ``--store`` or its old name ``--db`` (not both)."""
    if store is not None and db is not None:
        raise UsageError("give --store or --db (its old name), not both")
    return store if store is not None else db


def store_url(value: str) -> str:
    """``value`` as a store URL: a plain path becomes ``sqlite:///`` its absolute
    path, and a relative ``sqlite:///`` path is made absolute (against the current
    folder). Other URLs are kept as given; :func:`store_kind` checks them."""
    if not value.strip():
        raise UsageError(f"--store is empty: give {STORE_HELP}")
    if value in ("memory", "memory://"):
        return value
    if "://" not in value:
        return f"sqlite:///{Path(value).resolve()}"
    path = sqlite_path(value)
    return value if path is None else f"sqlite:///{path.resolve()}"


def sqlite_path(url: str) -> Path | None:
    """The file a ``sqlite:///`` URL names, or ``None`` for any other URL, a
    private in-memory database (``sqlite://``, ``sqlite:///:memory:``) or a SQLite
    ``file:`` URI."""
    scheme, sep, rest = url.partition("://")
    if scheme != "sqlite" or not sep or not rest.startswith("/"):
        return None
    path = rest[1:]
    if path in ("", ":memory:") or path.startswith("file:"):
        return None
    return Path(path)


def writable_store(value: str) -> str:
    """The URL of the store ``value`` names, for a command that writes to it: a
    SQLite file that does not exist is created by the store, so its folder must
    exist and the path must not be a folder (:class:`OutputError` otherwise)."""
    url = store_url(value)
    store_kind(url)  # a bad URL fails before anything is read or written
    path = sqlite_path(url)
    if path is not None:
        if path.is_dir():
            raise OutputError(value, "it is a folder; give a SQLite file path")
        if not path.exists() and not path.parent.is_dir():
            raise OutputError(
                value, f"folder {path.parent} does not exist (a new SQLite store goes in one)"
            )
    return url


def existing_session_store(value: str) -> str:
    """The URL of the store ``value`` names, for a command that only reads
    sessions: a SQLite file must exist and hold ctxwise's session tables. It is
    looked at read-only first, so nothing is created, and no table is added to a
    file that is not a ctxwise store (opening a store migrates it)."""
    url = store_url(value)
    kind = store_kind(url)
    if kind == "memory" or (kind == "sqlite" and sqlite_path(url) is None):
        raise UsageError(
            f"--store {value!r} is a new, empty in-memory store: give the SQLite file "
            "or the URL the sessions were kept in"
        )
    path = sqlite_path(url)
    if path is None:
        return url
    if path.is_dir():
        raise UsageError(f"no store at {value!r}: it is a folder, not a SQLite file")
    if not path.is_file():
        raise UsageError(
            f"no store at {value!r}: the file does not exist (this command only reads a store)"
        )
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table'"
                " AND name = 'ctxwise_session_migrations'"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise UsageError(f"{value!r} is not a ctxwise store: {e}") from None
    if found is None:
        raise UsageError(f"{value!r} is not a ctxwise store: it holds no sessions")
    return url


def _sqlite_memory(path: Path) -> str | None:
    """Why the SQLite file at ``path`` cannot be read as an up-to-date memory store
    without writing to it, or ``None`` when it can. Looked at read-only."""
    from ctxwise.memory.sqlite import SCHEMA_VERSION
    from ctxwise.text import DEFAULT_ANALYZER

    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {
                str(r[0])
                for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if not {"migrations", "items", "meta"} <= tables:
                return "no memory store in this file"
            applied = int(conn.execute("SELECT COUNT(*) FROM migrations").fetchone()[0])
            found = conn.execute("SELECT value FROM meta WHERE key = 'analyzer'").fetchone()
            journal = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        finally:
            conn.close()
    except sqlite3.Error as e:
        return f"the memory store cannot be read ({e})"
    if applied > SCHEMA_VERSION:
        return (
            f"the memory store was written by a newer ctxwise (schema version {applied}, "
            f"this ctxwise knows {SCHEMA_VERSION})"
        )
    if applied < SCHEMA_VERSION:
        return "the memory store needs migrating by a writing command first"
    if journal != "wal":  # opening would switch the file to WAL: a write
        return "the memory store was not written by an Engine (not in WAL mode)"
    if found is not None and found[0] != DEFAULT_ANALYZER.name:  # opening would re-index
        return f"the memory store was indexed by another analyzer ({found[0]})"
    return None


def read_only_memory(url: str, cfg: EngineConfig) -> tuple[Store | None, str]:
    """The Engine's memory store in ``url`` (its embedder's dimension from ``cfg``),
    opened for a command that only reads: never created, migrated or re-indexed (a
    SQLite file is looked at read-only first). ``None`` and why not, otherwise."""
    from ctxwise.memory.urls import open_store

    kind = store_kind(url)
    try:
        if kind == "sqlite":
            path = sqlite_path(url)
            if path is None:
                return None, "no memory store in an in-memory database"
            why = _sqlite_memory(path)
            if why is not None:
                return None, why
            # up to date, in WAL mode, and the Engine's analyzer (the default one):
            # opening it writes nothing
            store = open_store(url)
            return store, ""
        if kind == "postgresql":
            from ctxwise.embeddings import build_embedder
            from ctxwise.memory.postgres import PostgresStore

            dim = build_embedder(cfg.embedder).dim
            return PostgresStore(url, dim=dim, create=False), ""
    except CtxwiseError as e:
        return None, f"the memory store cannot be opened ({e})"
    return None, "no memory store"
