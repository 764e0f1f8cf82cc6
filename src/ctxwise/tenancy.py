"""Tenants: a hard partition of everything ctxwise stores, chosen before any query.

A tenant's sessions (state, live history, log, traces, tool ids) and its memory
(items, facts, rules, the lexical index and its statistics, vectors) live in a
store of their own, beside the other tenants' and never inside them:

- ``sqlite:///DIR/NAME.db``: one SQLite file per tenant,
  ``DIR/NAME.tenants/TENANT.db`` (the folder is created owner-only);
- ``postgresql://…``: one schema per tenant on that server, ``ctxwise_t_TENANT``;
- ``memory`` (and a private in-memory SQLite, ``sqlite://``): a fresh store per
  tenant, which the caller keeps for as long as the tenant's data should live.

So there is no tenant column for a query to forget: the tenant picks the database
(a file, a schema) the store connects to, every table, index and statistic of it
belongs to that tenant alone, and a term's document frequency in one tenant's
lexical index says nothing about another's. The service (:mod:`ctxwise.server`)
maps an API key to its tenant and opens only that tenant's partition; the MCP
server serves the one partition it was started on.

A tenant name is lowercase ASCII letters, digits and ``_``, starting with a letter
or digit, at most 32 characters: it is used as a file name and inside a PostgreSQL
identifier as it is, so nothing in it needs quoting or escaping.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ctxwise.errors import UsageError
from ctxwise.memory.store import Store
from ctxwise.memory.urls import open_store, store_kind
from ctxwise.sessions import SessionStore, open_session_store

__all__ = ["Partition", "check_tenant", "open_partition", "partition"]

TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9_]{0,31}")
SCHEMA_PREFIX = "ctxwise_t_"


def check_tenant(name: object) -> str:
    """``name`` when it is a valid tenant name (see the module docstring), else a
    :class:`~ctxwise.errors.UsageError` saying what one is."""
    if not isinstance(name, str) or not TENANT_NAME.fullmatch(name):
        raise UsageError(
            f"bad tenant name {str(name)[:40]!r}: lowercase letters, digits and _, "
            "starting with a letter or digit, at most 32 characters"
        )
    return name


@dataclass(frozen=True, slots=True)
class Partition:
    """Where one tenant's data lives: the store ``url`` to open and, on PostgreSQL,
    the ``schema`` (unused by the other backends)."""

    tenant: str
    url: str
    schema: str


def partition(store_url: str, tenant: str) -> Partition:
    """The partition of ``tenant`` in the deployment whose store is ``store_url``
    (see the module docstring). Nothing is opened or created.

    Raises:
        UsageError: a bad tenant name, or a SQLite ``file:`` URI (its options would
            have to be carried into every tenant's file; name a plain path).
        StoreURLError: a URL no store accepts.
    """
    tenant = check_tenant(tenant)
    kind = store_kind(store_url)
    schema = SCHEMA_PREFIX + tenant
    if kind != "sqlite":
        return Partition(tenant, store_url, schema)
    path = store_url.partition("://")[2][1:]
    if not path or path == ":memory:":
        return Partition(tenant, "sqlite://", schema)
    if path.startswith("file:"):
        raise UsageError(
            f"tenants need a plain SQLite path, not the URI {store_url!r}: "
            "name the file as sqlite:///PATH"
        )
    return Partition(tenant, f"sqlite:///{tenant_file(Path(path), tenant)}", schema)


def tenant_folder(path: Path) -> Path:
    """The folder that holds the tenants' SQLite files of the store at ``path``."""
    return path.with_name(path.stem + ".tenants")


def tenant_file(path: Path, tenant: str) -> Path:
    """The SQLite file of ``tenant`` for the store at ``path``."""
    return tenant_folder(path) / f"{tenant}.db"


def open_partition(part: Partition, *, dim: int) -> tuple[SessionStore, Store]:
    """Open the session store and the memory store of ``part`` (created when new;
    a SQLite tenant's folder is created owner-only). ``dim`` is the embedding
    dimension of the memory store (needed on PostgreSQL). The caller closes both.

    Raises:
        SessionStoreError, StoreError: a store cannot be opened (nothing is left open).
    """
    if part.url.startswith("sqlite:///"):
        folder = Path(part.url[len("sqlite:///") :]).parent
        if folder.is_symlink():  # another user's link would put a tenant's data elsewhere
            raise UsageError(f"the tenants folder {str(folder)!r} is a symlink; refusing it")
        folder.mkdir(mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)
    sessions = open_session_store(part.url, schema=part.schema)
    try:
        memory = open_store(part.url, dim=dim, schema=part.schema)
    except BaseException:
        sessions.close()
        raise
    return sessions, memory
