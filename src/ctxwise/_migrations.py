"""One schema migration runner for every SQL store (SQLite and PostgreSQL).

A store lists its :class:`Migration`\\ s in order, append only. Each is applied
once, in its own transaction, and recorded in the store's migrations table with
its position and ``applied_at`` (from an injected clock, wall time by default). A
database whose table records a migration this code does not know was written by a
newer ctxwise: it is refused, untouched, with
:class:`~ctxwise.errors.NewerSchemaError`.

The table is ``(name PRIMARY KEY, position, applied_at)``. Tables written by the
runners this one replaced are read as they are and upgraded on the first open
that may write: the memory stores' SQLite table was ``(position, name)``, the
memory store's PostgreSQL table ``(name, applied_at)`` and the session stores'
tables ``(name)``. When a migration is due, a missing column is added, the
position of a known name filled in, and a legacy row's ``applied_at`` left empty
(its time was never recorded). A database that is up to date is never written
to, so a read-only one opens.

Concurrent openers take turns: SQLite by ``BEGIN IMMEDIATE``, PostgreSQL by a
transaction-scoped advisory lock; each pending migration is checked again under
the lock, so two processes never apply one twice.
"""

from __future__ import annotations

import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, NamedTuple, TypeAlias, TypeVar

from ctxwise.errors import CtxwiseError, NewerSchemaError

__all__ = [
    "AppliedMigration",
    "Clock",
    "Database",
    "Migration",
    "MigrationStatus",
    "PostgresDatabase",
    "SQLiteDatabase",
    "migrate",
    "status",
]

C = TypeVar("C")

Clock: TypeAlias = Callable[[], float]
"""Seconds since the epoch (``time.time`` by default), stamped as ``applied_at``."""

Fail: TypeAlias = Callable[[str], CtxwiseError]
"""The store's own error for a damaged migrations table (StoreError, SessionStoreError)."""


class Migration(NamedTuple):
    """One named step of a schema: SQL statements, or functions of the connection,
    run in order inside one transaction. Unpacks as ``(name, steps)``."""

    name: str
    steps: tuple[str | Callable[[Any], None], ...]


@dataclass(frozen=True, slots=True)
class AppliedMigration:
    """A recorded migration: its name, its position (1-based) and when it was
    applied (``None``: recorded by an older ctxwise, which kept no time)."""

    name: str
    position: int | None
    applied_at: datetime | None


@dataclass(frozen=True, slots=True)
class MigrationStatus:
    """What a database holds against the code: ``applied`` in order, the names
    still ``pending``, and whether the migrations table exists at all."""

    exists: bool
    applied: tuple[AppliedMigration, ...]
    pending: tuple[str, ...]

    @property
    def version(self) -> int:
        """How many migrations the schema records."""
        return len(self.applied)


class Database(ABC, Generic[C]):
    """What the runner needs of one backend: a transaction that holds off every
    other migrator, statements, and the migrations table's columns."""

    store: str
    """How errors name the store (a path, a PostgreSQL schema)."""
    mark: str
    """The driver's parameter placeholder."""

    @abstractmethod
    def transaction(self) -> Any:
        """A context manager: one transaction, other migrators kept waiting, yielding
        the connection a migration's step functions receive."""

    @abstractmethod
    def execute(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (``{table}`` is the migrations table); its rows, if any."""

    @abstractmethod
    def columns(self) -> set[str] | None:
        """The migrations table's columns, or ``None`` when it does not exist."""

    @abstractmethod
    def create_table(self) -> None:
        """Create the migrations table (and whatever holds it) if missing."""

    @abstractmethod
    def add_column(self, column: str) -> None:
        """Add ``position`` or ``applied_at`` to a table an older ctxwise made."""

    @abstractmethod
    def stamp(self, when: float) -> Any:
        """``applied_at`` as the backend stores it."""

    @abstractmethod
    def read_time(self, value: Any) -> datetime | None:
        """A stored ``applied_at`` back as a UTC datetime."""

    @abstractmethod
    def run_step(self, conn: C, step: str | Callable[[C], None]) -> None:
        """One step of a migration, on the transaction's connection."""


class SQLiteDatabase(Database[sqlite3.Connection]):
    """A ``sqlite3`` connection opened with ``isolation_level=None`` (the runner
    begins and ends its own transactions). ``applied_at`` is ISO-8601 text, UTC."""

    def __init__(self, conn: sqlite3.Connection, table: str, store: str) -> None:
        self.conn = conn
        self.table = table
        self.store = store
        self.mark = "?"

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def execute(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self.conn.execute(statement.format(table=self.table), tuple(params)))

    def columns(self) -> set[str] | None:
        rows = self.conn.execute(f'PRAGMA table_info("{self.table}")').fetchall()
        return {r[1] for r in rows} or None

    def create_table(self) -> None:
        self.execute(
            "CREATE TABLE IF NOT EXISTS {table}"
            " (name TEXT PRIMARY KEY, position INTEGER, applied_at TEXT)"
        )

    def add_column(self, column: str) -> None:
        kind = "INTEGER" if column == "position" else "TEXT"
        self.execute(f"ALTER TABLE {{table}} ADD COLUMN {column} {kind}")

    def stamp(self, when: float) -> Any:
        return datetime.fromtimestamp(when, UTC).isoformat()

    def read_time(self, value: Any) -> datetime | None:
        return None if value is None else datetime.fromisoformat(str(value))

    def run_step(
        self, conn: sqlite3.Connection, step: str | Callable[[sqlite3.Connection], None]
    ) -> None:
        if isinstance(step, str):
            conn.execute(step)
        else:
            step(conn)


class PostgresDatabase(Database[Any]):
    """A psycopg 3 connection in autocommit mode. ``render`` turns a template into
    SQL (it fills ``{schema}`` and whatever a store's statements name); the table
    lives in the store's schema, created with it. ``lock`` names the advisory lock
    migrators of this schema take. ``applied_at`` is a ``timestamptz``."""

    def __init__(
        self,
        conn: Any,
        table: str,
        store: str,
        *,
        render: Callable[[str], Any],
        lock: str,
        create_schema: bool = True,
    ) -> None:
        self.conn = conn
        self.table = table
        self.store = store
        self.mark = "%s"
        self.render = render
        self.lock = lock
        self.create_schema = create_schema

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [self.lock])
            yield self.conn

    def _sql(self, statement: str) -> Any:
        return self.render(statement.replace("{table}", "{schema}." + self.table))

    def execute(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self.conn.execute(self._sql(statement), list(params))
        return list(cursor.fetchall()) if cursor.description else []

    def columns(self) -> set[str] | None:
        (found,) = self.execute("SELECT to_regclass(%s) IS NOT NULL", [self._qualified()])
        if not found[0]:
            return None
        rows = self.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s)"
            " AND attnum > 0 AND NOT attisdropped",
            [self._qualified()],
        )
        return {r[0] for r in rows}

    def _qualified(self) -> str:
        schema = self.render("{schema}").as_string(self.conn)
        return f"{schema}.{self.table}"

    def create_table(self) -> None:
        if self.create_schema:
            self.execute("CREATE SCHEMA IF NOT EXISTS {schema}")
        self.execute(
            "CREATE TABLE IF NOT EXISTS {table}"
            " (name text PRIMARY KEY, position integer, applied_at timestamptz)"
        )

    def add_column(self, column: str) -> None:
        kind = "integer" if column == "position" else "timestamptz"
        self.execute(f"ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS {column} {kind}")

    def stamp(self, when: float) -> Any:
        return datetime.fromtimestamp(when, UTC)

    def read_time(self, value: Any) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.astimezone(UTC)

    def run_step(self, conn: Any, step: str | Callable[[Any], None]) -> None:
        if isinstance(step, str):
            conn.execute(self.render(step))
        else:
            step(conn)


def _read(db: Database[Any], columns: set[str]) -> list[tuple[str, int | None, Any]]:
    """(name, position, applied_at) of every recorded row, whatever the table's shape."""
    position = "position" if "position" in columns else "NULL"
    applied_at = "applied_at" if "applied_at" in columns else "NULL"
    rows = db.execute(f"SELECT name, {position}, {applied_at} FROM {{table}}")
    return [(str(n), None if p is None else int(p), a) for n, p, a in rows]


def _check(
    db: Database[Any],
    rows: list[tuple[str, int | None, Any]],
    migrations: Sequence[Migration],
    fail: Fail,
) -> MigrationStatus:
    known = {m.name: i for i, m in enumerate(migrations, start=1)}
    unknown = sorted(name for name, _, _ in rows if name not in known)
    found = max([len(rows), *(p for _, p, _ in rows if p is not None)])
    if unknown:
        if found > len(migrations):
            raise NewerSchemaError(db.store, found, len(migrations), unknown)
        raise fail(
            f"{db.store}: the schema records migrations this ctxwise does not know "
            f"({', '.join(unknown)}) at version {found}, not newer than its own "
            f"({len(migrations)}): it was written by another build"
        )
    for name, position, _ in rows:
        if position is not None and position != known[name]:
            expected = migrations[position - 1].name if position <= len(migrations) else None
            raise fail(f"{db.store}: migration {position} is {name!r}, expected {expected!r}")
    done = {name for name, _, _ in rows}
    applied = sorted(
        (AppliedMigration(name, known[name], db.read_time(at)) for name, _, at in rows),
        key=lambda a: a.position or 0,
    )
    pending = tuple(m.name for m in migrations if m.name not in done)
    return MigrationStatus(True, tuple(applied), pending)


def status(db: Database[Any], migrations: Sequence[Migration], *, fail: Fail) -> MigrationStatus:
    """What the database holds against ``migrations``, without writing anything.

    Raises:
        NewerSchemaError: the schema records migrations this code does not know,
            more than it has.
        the store's error (``fail``): the table records another build's migrations.
    """
    columns = db.columns()
    if columns is None:
        return MigrationStatus(False, (), tuple(m.name for m in migrations))
    return _check(db, _read(db, columns), migrations, fail)


def migrate(
    db: Database[C],
    migrations: Sequence[Migration],
    *,
    fail: Fail,
    clock: Clock = time.time,
) -> list[str]:
    """Apply every pending migration, each in its own transaction and recorded with
    ``applied_at = clock()``; return the names applied now (none: up to date).

    A newer schema is refused before anything is written
    (:class:`~ctxwise.errors.NewerSchemaError`); a table an older ctxwise made is
    upgraded to the current shape in the first transaction.
    """
    names = [m.name for m in migrations]
    if len(set(names)) != len(names):  # a programming error in the store, caught early
        raise ValueError(f"migration names repeat: {names}")
    if not status(db, migrations, fail=fail).pending:
        return []  # up to date: nothing is written, so a read-only database opens
    with db.transaction():
        columns = db.columns()
        if columns is not None:
            _check(db, _read(db, columns), migrations, fail)
        db.create_table()
        columns = db.columns() or set()
        for column in ("position", "applied_at"):
            if column not in columns:
                db.add_column(column)
        m = db.mark
        for position, name in enumerate(names, start=1):
            db.execute(
                f"UPDATE {{table}} SET position = {m} WHERE name = {m} AND position IS NULL",
                [position, name],
            )
    applied: list[str] = []
    for position, migration in enumerate(migrations, start=1):
        with db.transaction() as conn:
            state = _check(db, _read(db, db.columns() or set()), migrations, fail)
            if migration.name not in state.pending:
                continue  # applied before, or by another process meanwhile
            for step in migration.steps:
                db.run_step(conn, step)
            db.execute(
                f"INSERT INTO {{table}} (name, position, applied_at) VALUES ({m}, {m}, {m})",
                [migration.name, position, db.stamp(clock())],
            )
        applied.append(migration.name)
    return applied
