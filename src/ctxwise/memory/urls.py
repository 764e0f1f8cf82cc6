"""Open a store by URL: ``memory``, ``sqlite:///PATH`` or ``postgresql://…``.

- ``memory`` (or ``memory://``): a fresh :class:`InMemoryStore`;
- ``sqlite:///PATH``: :class:`SQLiteStore` on ``PATH`` (relative to the working
  directory; ``sqlite:////abs/path.db`` for an absolute one, ``sqlite://`` or
  ``sqlite:///:memory:`` for a private in-memory database), as SQLAlchemy spells it;
- ``postgresql://…`` (or ``postgres://…``): ``PostgresStore`` (extra ``postgres``) on
  that libpq URI, with the embedding dimension and schema given here.

Anything else raises :class:`StoreURLError` before anything is opened or written,
and so does a SQLite URL with a query (``?mode=ro``: no options are taken, and the
query would otherwise become part of the file's name) unless its path is a SQLite
``file:`` URI.
"""

from __future__ import annotations

from ctxwise.errors import StoreURLError
from ctxwise.memory.sqlite import SQLiteStore
from ctxwise.memory.store import InMemoryStore, Store
from ctxwise.text import Analyzer

__all__ = ["StoreURLError", "open_store", "store_kind"]


def store_kind(url: str) -> str:
    """``memory``, ``sqlite`` or ``postgresql`` for a URL :func:`open_store` accepts,
    else :class:`StoreURLError` (nothing is opened)."""
    if not isinstance(url, str) or not url.strip():
        raise StoreURLError(str(url), reason="it is empty")
    if "\x00" in url:
        raise StoreURLError(url, reason="it holds a NUL character")
    try:
        url.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate: no file or server can be named by it
        raise StoreURLError(
            url, reason=f"it holds a lone surrogate (U+{ord(url[e.start]):04X}), not text"
        ) from None
    if url in ("memory", "memory://"):
        return "memory"
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise StoreURLError(url, reason="no scheme (SCHEME://…)")
    if scheme == "sqlite":
        if rest and not rest.startswith("/"):
            raise StoreURLError(url, reason="a SQLite URL is sqlite:///PATH (three slashes)")
        if "?" in rest and not rest[1:].startswith("file:"):  # else a file "x.db?mode=ro"
            raise StoreURLError(url, reason="a SQLite URL takes no query (?…), only a path")
        return "sqlite"
    if scheme in ("postgresql", "postgres"):
        return "postgresql"
    raise StoreURLError(url, reason=f"unknown scheme {scheme!r}")


def open_store(
    url: str,
    *,
    dim: int | None = None,
    schema: str = "ctxwise",
    analyzer: Analyzer | None = None,
) -> Store:
    """The store ``url`` names (see the module docstring). ``dim`` (the embedding
    dimension) is needed for PostgreSQL; ``schema`` is its schema.

    Raises:
        StoreURLError: an unknown scheme or a malformed URL (nothing is opened).
        StoreError: the store cannot be opened (a file that is not a store, a
            server that is down).
    """
    kind = store_kind(url)
    if kind == "memory":
        return InMemoryStore(analyzer=analyzer)
    if kind == "sqlite":
        path = url.partition("://")[2][1:] or ":memory:"
        return SQLiteStore(path, analyzer=analyzer)
    if dim is None:
        raise StoreURLError(url, reason="a PostgreSQL store needs the embedding dimension")
    from ctxwise.memory.postgres import PostgresStore

    return PostgresStore(url, dim=dim, schema=schema, analyzer=analyzer)
