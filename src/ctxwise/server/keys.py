"""API keys: each one belongs to one tenant; only a hash of its secret is stored.

A key reads ``cwk_<id>_<secret>``: ``id`` (12 hex digits) names the key in lists and
logs and finds its row; ``secret`` is 32 random bytes from :mod:`secrets`
(URL-safe base64), of which the store keeps the SHA-256 digest alone. A digest of
256 random bits cannot be reversed or guessed, so a slow password hash (bcrypt,
argon2) would add a dependency and a per-request cost for nothing; the digest is
compared in constant time. The plain key is shown once, when it is created.

Keys live in the deployment's control store, apart from every tenant's data
(:mod:`ctxwise.tenancy`): the store URL's own SQLite file (table
``ctxwise_api_keys``), the ``ctxwise_control`` schema on PostgreSQL, or process
memory for ``memory``. A revoked key stays listed (with when it was revoked) and
never authenticates again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ctxwise._migrations import Migration, PostgresDatabase, SQLiteDatabase, migrate
from ctxwise._sqlite import use_wal
from ctxwise.errors import StoreError, UsageError
from ctxwise.memory.urls import store_kind
from ctxwise.tenancy import check_tenant

__all__ = ["ApiKey", "KeyStore"]

KEY_FORMAT = re.compile(r"cwk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
CONTROL_SCHEMA = "ctxwise_control"
MAX_LABEL = 200

_SQLITE_MIGRATIONS = (
    Migration(
        "001_api_keys",
        (
            """CREATE TABLE IF NOT EXISTS ctxwise_api_keys (
            key_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, digest TEXT NOT NULL,
            label TEXT NOT NULL, created_at REAL NOT NULL, revoked_at REAL)""",
        ),
    ),
)
_PG_MIGRATIONS = (
    Migration(
        "001_api_keys",
        (
            """CREATE TABLE IF NOT EXISTS {schema}.api_keys (
            key_id text PRIMARY KEY, tenant text NOT NULL, digest text NOT NULL,
            label text NOT NULL, created_at double precision NOT NULL,
            revoked_at double precision)""",
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One key as listed: never its secret."""

    key_id: str
    tenant: str
    label: str
    created_at: float
    revoked_at: float | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def _row(r: tuple[Any, ...]) -> ApiKey:
    return ApiKey(
        str(r[0]), str(r[1]), str(r[2]), float(r[3]), None if r[4] is None else float(r[4])
    )


class KeyStore:
    """The API keys of one deployment (see the module docstring). ``token_bytes``
    and ``clock`` are injectable for tests; the defaults are :func:`secrets.token_bytes`
    and :func:`time.time`."""

    def __init__(
        self,
        url: str,
        *,
        token_bytes: Callable[[int], bytes] = secrets.token_bytes,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self.kind = store_kind(url)
        self._token_bytes = token_bytes
        self._clock = clock
        self._lock = threading.Lock()
        self._rows: dict[str, tuple[str, str, str, float, float | None]] = {}
        self._conn: Any = None
        try:
            if self.kind == "sqlite":
                path = url.partition("://")[2][1:] or ":memory:"
                self._conn = sqlite3.connect(
                    path, timeout=30.0, check_same_thread=False, isolation_level=None
                )
                use_wal(self._conn, 30.0)
                db = SQLiteDatabase(self._conn, "ctxwise_key_migrations", repr(path))
                migrate(db, _SQLITE_MIGRATIONS, fail=StoreError, clock=clock)
            elif self.kind == "postgresql":
                import psycopg
                from psycopg import sql

                self._conn = psycopg.connect(url, autocommit=True, connect_timeout=10)

                def render(template: str) -> Any:
                    return sql.SQL(template).format(schema=sql.Identifier(CONTROL_SCHEMA))

                self._render: Callable[[str], Any] = render
                pg = PostgresDatabase(
                    self._conn,
                    "key_migrations",
                    f"PostgreSQL schema {CONTROL_SCHEMA!r}",
                    render=render,
                    lock=f"ctxwise:keys:{CONTROL_SCHEMA}",
                )
                migrate(pg, _PG_MIGRATIONS, fail=StoreError, clock=clock)
        except StoreError:
            self.close()
            raise
        except Exception as e:  # sqlite3.Error, psycopg.Error: the store cannot be opened
            self.close()
            raise StoreError(f"cannot open the key store {url!r}: {e}") from e

    # ------------------------------------------------------------------ access

    @contextmanager
    def _db(self) -> Iterator[Any]:
        with self._lock:
            try:
                yield self._conn
            except StoreError:
                raise
            except Exception as e:
                raise StoreError(f"key store: {e}") from e

    def _sql(self, sqlite_text: str) -> Any:
        if self.kind == "sqlite":
            return sqlite_text
        return self._render(
            sqlite_text.replace("ctxwise_api_keys", "{schema}.api_keys").replace("?", "%s")
        )

    def _fetch(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.kind == "memory":
            raise AssertionError("memory keys are read without SQL")  # pragma: no cover
        with self._db() as c:
            return list(c.execute(self._sql(query), params).fetchall())

    def _write(self, query: str, params: tuple[Any, ...]) -> int:
        with self._db() as c:
            return int(c.execute(self._sql(query), params).rowcount)

    # ------------------------------------------------------------------ the API

    def create(self, tenant: str, label: str = "") -> tuple[ApiKey, str]:
        """A new key for ``tenant``: its listing and the plain key (shown once)."""
        tenant = check_tenant(tenant)
        if not isinstance(label, str) or len(label) > MAX_LABEL or "\x00" in label:
            raise UsageError(f"a key label is text of at most {MAX_LABEL} characters")
        key_id = self._token_bytes(6).hex()
        secret = base64.urlsafe_b64encode(self._token_bytes(32)).decode().rstrip("=")
        row = (key_id, tenant, _digest(secret), label, self._clock(), None)
        if self.kind == "memory":
            with self._lock:
                self._rows[key_id] = (tenant, row[2], label, row[4], None)
        else:
            self._write(
                "INSERT INTO ctxwise_api_keys (key_id, tenant, digest, label, created_at, "
                "revoked_at) VALUES (?, ?, ?, ?, ?, ?)",
                row,
            )
        return ApiKey(key_id, tenant, label, row[4], None), f"cwk_{key_id}_{secret}"

    def list(self, tenant: str | None = None) -> list[ApiKey]:
        """Every key (of ``tenant`` when given), oldest first."""
        if tenant is not None:
            check_tenant(tenant)
        if self.kind == "memory":
            with self._lock:
                rows = [(k, t, lab, c, r) for k, (t, _, lab, c, r) in self._rows.items()]
        else:
            rows = self._fetch(
                "SELECT key_id, tenant, label, created_at, revoked_at FROM ctxwise_api_keys"
            )
        keys = [_row(r) for r in rows]
        return sorted(
            (k for k in keys if tenant is None or k.tenant == tenant),
            key=lambda k: (k.created_at, k.key_id),
        )

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke the key ``key_id`` (its 12 hex digits; a whole key is taken too).
        Revoking a revoked key changes nothing. :class:`UsageError` for no such key."""
        match = KEY_FORMAT.fullmatch(key_id) if isinstance(key_id, str) else None
        kid = match.group(1) if match else key_id
        if not isinstance(kid, str) or not re.fullmatch(r"[0-9a-f]{12}", kid):
            raise UsageError(f"bad key id {str(key_id)[:20]!r}: 12 hex digits (as keys list shows)")
        now = self._clock()
        if self.kind == "memory":
            with self._lock:
                found = self._rows.get(kid)
                if found is not None and found[4] is None:
                    self._rows[kid] = (*found[:4], now)
        else:
            self._write(
                "UPDATE ctxwise_api_keys SET revoked_at = ? "
                "WHERE key_id = ? AND revoked_at IS NULL",
                (now, kid),
            )
        for key in self.list():
            if key.key_id == kid:
                return key
        raise UsageError(f"no key {kid!r} in this store")

    def authenticate(self, presented: str | None) -> str | None:
        """The tenant of the active key ``presented``, else ``None`` (malformed,
        unknown, revoked: the caller cannot tell which, by design)."""
        match = KEY_FORMAT.fullmatch(presented) if isinstance(presented, str) else None
        if match is None:
            return None
        kid, secret = match.groups()
        if self.kind == "memory":
            with self._lock:
                found = self._rows.get(kid)
            row = None if found is None else (found[0], found[1], found[4])
        else:
            rows = self._fetch(
                "SELECT tenant, digest, revoked_at FROM ctxwise_api_keys WHERE key_id = ?", (kid,)
            )
            row = rows[0] if rows else None
        if row is None or row[2] is not None:  # a key id is no secret: it is listed
            return None
        return str(row[0]) if hmac.compare_digest(_digest(secret), str(row[1])) else None

    def ping(self) -> None:
        """Answer when the store does (:class:`StoreError` when it does not)."""
        if self.kind != "memory":
            self._fetch("SELECT COUNT(*) FROM ctxwise_api_keys")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> KeyStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
