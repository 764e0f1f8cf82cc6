"""The store contract: a small ABC every memory backend implements.

A store keeps :class:`MemoryItem` rows in namespaces (tenant / user / session, a
tuple of non-empty strings). Every method takes the namespace, and no call returns
another namespace's rows. Backends implement the abstract methods; search fusion,
recency and neighbour expansion live above the store, in
:class:`ctxwise.memory.LongTermMemory`, so every backend behaves the same.

Backends: :class:`InMemoryStore` (the reference, shipped), ``SQLiteStore`` (the
embedded default, one file), ``PostgresStore`` (extra ``postgres``).

Besides items, a store lends named exclusive locks (:meth:`Store.exclusive`) that
every process reaching the same data sees, so that a program sharing a store can
keep a second worker off one job (the relay's ``StoreRuns`` holds its runs so).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
import math
import operator
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from ctxwise.errors import NamespaceNotFoundError, StoreError, UsageError
from ctxwise.search.bm25 import (
    BM25_B,
    BM25_K1,
    SCORE_DIGITS,
    BM25Index,
    bm25_idf,
    bm25_term,
    rank_candidates,
    rank_key,
)
from ctxwise.text import DEFAULT_ANALYZER, Analyzer

__all__ = [
    "BM25_B",
    "BM25_K1",
    "MAX_TEXT_CHARS",
    "SCORE_DIGITS",
    "InMemoryStore",
    "MemoryItem",
    "Namespace",
    "NamespaceNotFoundError",
    "NewItem",
    "Store",
    "StoreError",
    "bm25_idf",
    "bm25_term",
    "check_k",
    "check_namespace",
    "exact_dots",
    "fts_tokens",
    "namespace_part",
    "rank_key",
]

Namespace: TypeAlias = tuple[str, ...]
Vector: TypeAlias = npt.NDArray[np.float32]
MAX_TEXT_CHARS = 1_000_000
MAX_KEY_BYTES = 1_200
"""The most UTF-8 bytes of an item id, and of a namespace joined by ``/``: a
PostgreSQL btree index keeps a (namespace, id) key of at most 2,704 bytes, and
every store takes the same ids."""


@dataclass(frozen=True, slots=True)
class NewItem:
    """An item to store. ``id`` is optional (the store assigns one); ``vector`` is
    the embedding of the indexed text (unit length), or ``None`` for lexical-only items."""

    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    vector: Vector | None = None
    created_at: float | None = None
    index_text: str | None = None
    """What lexical search indexes, when it differs from ``text`` (e.g. the text
    with the turn before it); recall returns ``text``."""


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """A stored item. ``seq`` is its insertion order within the namespace."""

    id: str
    namespace: Namespace
    text: str
    metadata: Mapping[str, Any]
    seq: int
    created_at: float | None = None


def check_namespace(namespace: Sequence[str]) -> Namespace:
    """A valid namespace tuple, or a :class:`UsageError`."""
    if isinstance(namespace, str) or not namespace:
        raise UsageError("a namespace is a non-empty tuple of strings, e.g. ('acme', 'user-7')")
    ns = tuple(namespace)
    for part in ns:
        if not isinstance(part, str) or not part or "\x00" in part or "/" in part:
            raise UsageError(f"bad namespace part {part!r}: non-empty strings without '/' only")
        if not _valid_unicode(part):
            raise UsageError(f"bad namespace part {part!r}: not valid Unicode (lone surrogates)")
    size = len("/".join(ns).encode("utf-8"))
    if size > MAX_KEY_BYTES:
        raise UsageError(
            f"a namespace of {size:,} bytes (UTF-8, parts joined by '/') exceeds {MAX_KEY_BYTES:,}"
        )
    return ns


def namespace_part(value: str) -> str:
    """``value`` (a session id, a user's name) as one namespace part: ``%`` escaped as
    ``%25``, then ``/`` as ``%2F``, so any string fits a part and two strings never
    share one (``a/b`` is ``a%2Fb``, ``a%2Fb`` is ``a%252Fb``). Every store keyed by a
    session escapes the id this one way; :func:`check_namespace` still refuses an empty
    part, a NUL and lone surrogates."""
    return value.replace("%", "%25").replace("/", "%2F")


def _valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_text(text: str) -> str:
    if not isinstance(text, str):
        raise UsageError(f"memory text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise UsageError("empty text: there is nothing to remember")
    if len(text) > MAX_TEXT_CHARS:
        raise UsageError(
            f"text of {len(text):,} characters exceeds {MAX_TEXT_CHARS:,}; split it into turns"
        )
    if not _valid_unicode(text):
        raise UsageError("text is not valid Unicode (lone surrogates)")
    return text


INT64_MAX = 2**63 - 1
"""The largest ``k``, ``n`` or ``seq`` a database binds; bigger ones are clamped
(``k``, ``n``) or match nothing (``seq``)."""


def _json_data(value: Any, what: str) -> Any:
    """``value`` as the plain JSON data it comes back as from any store (tuples as
    lists, keys as strings), or a :class:`UsageError`: not JSON, NaN or infinity,
    lone surrogates."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise UsageError(f"{what} must be JSON-serializable (no NaN or infinity): {e}") from None
    except RecursionError:
        raise UsageError(f"{what} is nested too deeply to store") from None
    if not _valid_unicode(text):
        raise UsageError(f"{what} is not valid Unicode (lone surrogates)")
    return json.loads(text)


def check_metadata(metadata: Any) -> dict[str, Any]:
    """``metadata`` as plain JSON data (see :func:`check_item`)."""
    if not isinstance(metadata, Mapping):
        raise UsageError(f"metadata is a mapping, got {type(metadata).__name__}")
    data: dict[str, Any] = _json_data(dict(metadata), "metadata")
    return data


def check_vector(vector: Any, what: str) -> Vector:
    """``vector`` as a one-dimensional, non-empty float32 array of finite numbers,
    or a :class:`UsageError`."""
    try:
        v = np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise UsageError(f"{what} is not a vector of numbers: {e}") from None
    if v.ndim != 1 or not v.size:
        raise UsageError(f"{what} has shape {v.shape}: a vector is one non-empty dimension")
    if not np.isfinite(v).all():
        raise UsageError(f"{what} holds NaN or infinite values")
    return v


UNIT_TOLERANCE = 1e-5
"""A vector whose length is within this of 1 is taken as unit length (float32
rounding: embedders' output) and kept bit for bit by :func:`unit`."""


def unit(vector: Vector) -> Vector:
    """``vector`` scaled to length 1 (a zero vector as it is), so that a dot
    product is the cosine similarity every store ranks by, as PostgreSQL's
    ``<=>`` computes it for vectors of any length."""
    norm = float(np.linalg.norm(vector.astype(np.float64)))
    if norm == 0.0 or abs(norm - 1.0) <= UNIT_TOLERANCE:
        return vector
    return np.asarray(vector / norm, dtype=np.float32)


def check_item(item: NewItem) -> NewItem:
    """``item`` as every store keeps it, or a :class:`UsageError`; every backend
    checks its items here, so they accept and refuse the same ones.

    The text as :func:`check_text` wants it; ``id`` a string without NUL of at most
    :data:`MAX_KEY_BYTES` (``""`` or ``None``: the store assigns one); ``metadata`` a
    mapping of JSON data (no NaN or infinity), kept as it reads back (tuples as
    lists, keys as strings); ``created_at`` a finite number (epoch seconds), kept as
    a float; ``vector`` as :func:`check_vector` wants it; ``index_text`` a string.
    """
    if not isinstance(item, NewItem):
        raise UsageError(f"an item is a NewItem, got {type(item).__name__}")
    check_text(item.text)
    item_id = item.id
    if item_id is not None and not isinstance(item_id, str):
        raise UsageError(f"an item id is a string, got {type(item_id).__name__}")
    if item_id is not None and ("\x00" in item_id or not _valid_unicode(item_id)):
        raise UsageError(f"bad item id {item_id!r}: no NUL characters or lone surrogates")
    if item_id is not None and len(item_id.encode("utf-8")) > MAX_KEY_BYTES:
        raise UsageError(
            f"an item id of {len(item_id.encode('utf-8')):,} bytes (UTF-8) exceeds "
            f"{MAX_KEY_BYTES:,}"
        )
    created = item.created_at
    if created is not None:
        if isinstance(created, bool) or not isinstance(created, int | float):
            raise UsageError(f"created_at is a number (epoch seconds), got {created!r}")
        if not math.isfinite(created):
            raise UsageError(f"created_at is a finite number (epoch seconds), got {created!r}")
        created = float(created)
    indexed = item.index_text
    if indexed is not None:
        if not isinstance(indexed, str):
            raise UsageError(f"index_text is a string, got {type(indexed).__name__}")
        if not _valid_unicode(indexed):
            raise UsageError("index_text is not valid Unicode (lone surrogates)")
    return NewItem(
        item.text,
        check_metadata(item.metadata),
        item_id or None,
        None if item.vector is None else check_vector(item.vector, "an item's vector"),
        created,
        indexed,
    )


def check_dims(dims: set[int], stored: int | None) -> int | None:
    """The store's vector dimension once a batch with vectors of ``dims`` is
    written, or a :class:`UsageError` if they disagree with each other or with
    the ``stored`` one."""
    if stored is not None and dims - {stored}:
        raise UsageError(
            f"vector dimension mismatch: this store holds {stored}-dimensional vectors, "
            f"got {sorted(dims)}"
        )
    if len(dims) > 1:
        raise UsageError(f"vector dimension mismatch: one batch holds vectors of {sorted(dims)}")
    return stored if stored is not None or not dims else next(iter(dims))


def check_ids(ids: Iterable[Any]) -> list[str]:
    """The ids asked for, in order, as a list (any iterable is read once); what no
    item's id can be (not a string, NUL, lone surrogates) is left out, as a missing
    id is."""
    return [i for i in ids if isinstance(i, str) and "\x00" not in i and _valid_unicode(i)]


def check_query(query: Any) -> str:
    """A lexical query: a string of valid Unicode, or a :class:`UsageError`."""
    if not isinstance(query, str):
        raise UsageError(f"a query is a string, got {type(query).__name__}")
    if not _valid_unicode(query):
        raise UsageError("the query is not valid Unicode (lone surrogates)")
    return query


def check_filters(filters: Any) -> dict[str, Any] | None:
    """Metadata filters as plain JSON data (``None`` for none), or a
    :class:`UsageError`: a mapping of string keys to JSON values. See :func:`matches`."""
    if filters is None:
        return None
    if not isinstance(filters, Mapping):
        raise UsageError(f"filters are a mapping, got {type(filters).__name__}")
    for key in filters:
        if not isinstance(key, str):
            raise UsageError(f"filter keys are strings, got {key!r}")
    data: dict[str, Any] = _json_data(dict(filters), "a filter value")
    return data or None


def check_seqs(seqs: Iterable[Any]) -> list[int]:
    """The distinct seqs asked for, sorted (integers; those no store can hold,
    below 0 or above :data:`INT64_MAX`, are left out), or a :class:`UsageError`."""
    wanted = set()
    for s in seqs:
        n = _integer(s, "a seq")
        if 0 <= n <= INT64_MAX:
            wanted.add(n)
    return sorted(wanted)


def check_n(n: Any) -> int:
    """How many recent items: an integer (at most :data:`INT64_MAX`; 0 or less
    asks for none), or a :class:`UsageError`."""
    return min(_integer(n, "n"), INT64_MAX)


def _integer(value: Any, what: str) -> int:
    """``value`` as an int (an int or anything with ``__index__``, not a bool)."""
    if isinstance(value, bool):
        raise UsageError(f"{what} is an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise UsageError(f"{what} is an integer, got {value!r}") from None


def fts_tokens(text: str) -> list[str]:
    """The default analyzer's terms of ``text`` (:func:`ctxwise.text.words`)."""
    return DEFAULT_ANALYZER.words(text)


def exact_dots(matrix: npt.NDArray[Any], q: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """``matrix @ q`` in float64 (the rows and the query are float32): the cosines
    every store ranks by, alike on each, whatever order its float32 arithmetic
    would have summed them in. Stores search in float32 and rescore the best this
    way."""
    out: npt.NDArray[np.float64] = np.asarray(matrix, dtype=np.float64) @ np.asarray(
        q, dtype=np.float64
    )
    return out


DOT_SLACK = 1e-5
"""How far a float32 cosine of unit vectors may be from its float64 value, with room
to spare: the rows within this of the k-th best float32 score are rescored."""


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values, as PostgreSQL's ``jsonb`` compares them: numbers by
    value (``1 == 1.0``), but ``true`` is not ``1``; objects by their keys and
    values, lists element by element."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return a is None and b is None


LockBusy: TypeAlias = Callable[[], BaseException]
"""What :meth:`Store.exclusive` raises when another holder has the lock: a
function of no arguments that returns the exception (called once, at the refusal)."""


def check_lock_name(name: Any) -> str:
    """A lock name for :meth:`Store.exclusive`: a non-empty string of valid Unicode
    without NUL (of any length: backends key their locks by its hash); else a
    :class:`UsageError`."""
    if not isinstance(name, str) or not name:
        raise UsageError(f"a lock name is a non-empty string, got {name!r}")
    if "\x00" in name or not _valid_unicode(name):
        raise UsageError(f"bad lock name {name!r}: no NUL characters or lone surrogates")
    return name


def lock_held(name: str) -> LockBusy:
    """The default refusal of :meth:`Store.exclusive`: a :class:`StoreError` naming
    the lock."""
    return lambda: StoreError(f"the lock {name!r} is held by another holder")


# (id of the owner, lock name) of every lock a holder of this process has: the
# owner is alive while its lock is held (the holder refers to it), so its id is
# not reused meanwhile
_LOCAL_HELD: set[tuple[int, str]] = set()
_LOCAL_GUARD = threading.Lock()


@contextlib.contextmanager
def local_lock(owner: object, name: str, busy: LockBusy) -> Iterator[None]:
    """Hold ``name`` on ``owner`` against the other holders of this process (every
    thread): a second holder is refused at once with ``busy()``. The part of
    :meth:`Store.exclusive` every backend shares; a backend that other processes
    reach holds a lock of its own inside this one."""
    key = (id(owner), name)
    with _LOCAL_GUARD:
        if key in _LOCAL_HELD:
            raise busy()
        _LOCAL_HELD.add(key)
    try:
        yield
    finally:
        with _LOCAL_GUARD:
            _LOCAL_HELD.discard(key)


def matches(metadata: Mapping[str, Any], filters: Mapping[str, Any] | None) -> bool:
    """Whether ``metadata`` holds every filter's value (:func:`json_equal`); a
    ``None`` value matches a missing key too."""
    return not filters or all(json_equal(metadata.get(k), v) for k, v in filters.items())


class Store(ABC):
    """The contract: six abstract methods; the rest is built on them.

    A backend writes the **core**: :meth:`put_many`, :meth:`delete` (writes),
    :meth:`recent` (the newest items of a namespace: also how the derived reads
    enumerate it), :meth:`namespaces`, :meth:`lexical_search` and
    :meth:`vector_search`. The **derived** reads, :meth:`get_many`,
    :meth:`by_seq` and :meth:`count`, work from :meth:`recent` over the whole
    namespace, correct on any backend but a scan each; a backend that can answer
    them directly overrides them (every shipped backend does). :meth:`put`,
    :meth:`get` and :meth:`require` build on those.

    Every public method has an **async twin** (``aput_many``, ``aget_many``,
    ``adelete``, ``alexical_search``, ``avector_search``, ``aby_seq``,
    ``arecent``, ``anamespaces``, ``acount``, ``aput``, ``aget``, ``arequire``):
    by default the sync method in a worker thread (:func:`asyncio.to_thread`), so
    an event loop is never blocked, and so a store's methods may be called from
    several threads at once (every shipped backend takes turns on a lock). A
    natively async backend overrides the twins; ``aput`` and ``aget`` go through
    ``aput_many`` and ``aget_many``, as ``put`` and ``get`` do.

    Lexical search indexes and queries the terms of :attr:`analyzer` (by default
    :data:`ctxwise.text.DEFAULT_ANALYZER`) and scores them by BM25 (:func:`bm25_idf`,
    :func:`bm25_term`) with the statistics (item count, average length, document
    frequencies) of the searched namespace only, so every backend ranks alike and
    no namespace's items change another's scores. Vector search ranks by cosine
    similarity, for vectors of any length.

    Every backend checks what it is given with the same functions
    (:func:`check_item`, :func:`check_filters`, :func:`check_query`, ...), so they
    accept and refuse the same calls, with a :class:`UsageError`; metadata
    filters compare JSON values (:func:`matches`). A closed store, or a database
    that fails, raises :class:`StoreError`. :mod:`ctxwise.testing` checks a backend
    against all of this.
    """

    analyzer: Analyzer = DEFAULT_ANALYZER

    # the core ---------------------------------------------------------------------

    @abstractmethod
    def put_many(self, namespace: Sequence[str], items: Sequence[NewItem]) -> list[str]:
        """Store items atomically (all or none); return their ids in order.
        An existing id in the namespace is replaced."""

    @abstractmethod
    def delete(self, namespace: Sequence[str], ids: Sequence[str]) -> int:
        """Delete items; return how many existed."""

    @abstractmethod
    def recent(self, namespace: Sequence[str], n: int) -> list[MemoryItem]:
        """The ``n`` items stored last in the namespace (highest ``seq``), oldest
        first; every item for an ``n`` of at least their count."""

    @abstractmethod
    def namespaces(self) -> list[Namespace]:
        """Every namespace holding at least one item."""

    @abstractmethod
    def lexical_search(
        self, namespace: Sequence[str], query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[tuple[MemoryItem, float]]:
        """Best ``k`` items by a BM25-style lexical score, best first."""

    @abstractmethod
    def vector_search(
        self,
        namespace: Sequence[str],
        vector: Vector,
        k: int,
        filters: Mapping[str, Any] | None = None,
    ) -> list[tuple[MemoryItem, float]]:
        """Best ``k`` items by cosine similarity, best first."""

    # derived reads: a scan of recent(); backends override them for speed ----------

    def _every_item(self, namespace: Sequence[str]) -> list[MemoryItem]:
        return self.recent(namespace, INT64_MAX)

    def get_many(self, namespace: Sequence[str], ids: Sequence[str]) -> list[MemoryItem]:
        """Items by id (missing ids are left out), in the order asked."""
        ns = check_namespace(namespace)
        wanted = check_ids(ids)
        if not wanted:
            return []
        by_id = {it.id: it for it in self._every_item(ns)}
        return [by_id[i] for i in wanted if i in by_id]

    def by_seq(self, namespace: Sequence[str], seqs: Sequence[int]) -> list[MemoryItem]:
        """Items by insertion order (for neighbour expansion), by ``seq``; seqs no
        item has are left out."""
        ns = check_namespace(namespace)
        wanted = set(check_seqs(seqs))
        if not wanted:
            return []
        return [it for it in self._every_item(ns) if it.seq in wanted]

    def count(self, namespace: Sequence[str]) -> int:
        """Items in a namespace (0 if unknown)."""
        return len(self._every_item(check_namespace(namespace)))

    def close(self) -> None:  # noqa: B027 - optional for backends without resources
        """Release resources; the store is unusable afterwards."""

    def exclusive(
        self, name: str, *, busy: LockBusy | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """Hold the lock ``name`` until the block ends: ``with store.exclusive("job-7"):``.

        While it is held, every other holder of ``name`` on this store's data is
        refused at once (never kept waiting): another ``with`` on this store object
        (any thread), on another store object over the same data, or in another
        process. Locks of other names, and the same name in another SQLite file,
        PostgreSQL schema or in-memory store, are independent. The lock is one that
        ends with its holder: when the block ends (by an error too), and when the
        process dies (SIGKILL included), so a crashed holder never blocks the next.

        This base holds ``name`` against this process only (:func:`local_lock`),
        which is all an in-memory store needs (no other process can reach it) and
        what a third-party backend gets until it overrides this method. The
        backends shipped:

        - :class:`InMemoryStore`: this process only;
        - ``SQLiteStore`` over a file: an exclusive ``flock`` on a lock file beside
          the database (``DB.HASH.lock``, removed when let go); over ``:memory:``,
          or where there is no ``flock`` (Windows), this process only;
        - ``PostgresStore``: a session advisory lock (``pg_try_advisory_lock``) on
          the store's connection, keyed by the schema and ``name``, which the
          server drops when that connection ends (a crash, or :meth:`close`, too).

        Raises:
            what ``busy()`` returns (default: a :class:`StoreError` naming the lock)
                when another holder has it, before the block runs;
            UsageError: ``name`` is not a lock name (:func:`check_lock_name`);
            StoreError: the store is closed, or the lock cannot be taken (a lock
                file that cannot be made, a database that fails).
        """
        name = check_lock_name(name)
        return local_lock(self, name, busy or lock_held(name))

    # convenience, built on the contract -----------------------------------------

    def put(self, namespace: Sequence[str], item: NewItem) -> str:
        return self.put_many(namespace, [item])[0]

    def get(self, namespace: Sequence[str], id: str) -> MemoryItem | None:
        found = self.get_many(namespace, [id])
        return found[0] if found else None

    def require(self, namespace: Sequence[str]) -> Namespace:
        """The checked namespace; :class:`NamespaceNotFoundError` if it is empty."""
        ns = check_namespace(namespace)
        if self.count(ns) == 0:
            raise NamespaceNotFoundError(ns)
        return ns

    # async twins: the sync method in a worker thread unless a backend overrides them

    async def aput_many(self, namespace: Sequence[str], items: Sequence[NewItem]) -> list[str]:
        """:meth:`put_many`, awaited."""
        return await asyncio.to_thread(self.put_many, namespace, items)

    async def adelete(self, namespace: Sequence[str], ids: Sequence[str]) -> int:
        """:meth:`delete`, awaited."""
        return await asyncio.to_thread(self.delete, namespace, ids)

    async def arecent(self, namespace: Sequence[str], n: int) -> list[MemoryItem]:
        """:meth:`recent`, awaited."""
        return await asyncio.to_thread(self.recent, namespace, n)

    async def anamespaces(self) -> list[Namespace]:
        """:meth:`namespaces`, awaited."""
        return await asyncio.to_thread(self.namespaces)

    async def alexical_search(
        self, namespace: Sequence[str], query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[tuple[MemoryItem, float]]:
        """:meth:`lexical_search`, awaited."""
        return await asyncio.to_thread(self.lexical_search, namespace, query, k, filters)

    async def avector_search(
        self,
        namespace: Sequence[str],
        vector: Vector,
        k: int,
        filters: Mapping[str, Any] | None = None,
    ) -> list[tuple[MemoryItem, float]]:
        """:meth:`vector_search`, awaited."""
        return await asyncio.to_thread(self.vector_search, namespace, vector, k, filters)

    async def aget_many(self, namespace: Sequence[str], ids: Sequence[str]) -> list[MemoryItem]:
        """:meth:`get_many`, awaited."""
        return await asyncio.to_thread(self.get_many, namespace, ids)

    async def aby_seq(self, namespace: Sequence[str], seqs: Sequence[int]) -> list[MemoryItem]:
        """:meth:`by_seq`, awaited."""
        return await asyncio.to_thread(self.by_seq, namespace, seqs)

    async def acount(self, namespace: Sequence[str]) -> int:
        """:meth:`count`, awaited."""
        return await asyncio.to_thread(self.count, namespace)

    async def aput(self, namespace: Sequence[str], item: NewItem) -> str:
        """:meth:`put`, awaited (through :meth:`aput_many`)."""
        return (await self.aput_many(namespace, [item]))[0]

    async def aget(self, namespace: Sequence[str], id: str) -> MemoryItem | None:
        """:meth:`get`, awaited (through :meth:`aget_many`)."""
        found = await self.aget_many(namespace, [id])
        return found[0] if found else None

    async def arequire(self, namespace: Sequence[str]) -> Namespace:
        """:meth:`require`, awaited (through :meth:`acount`)."""
        ns = check_namespace(namespace)
        if await self.acount(ns) == 0:
            raise NamespaceNotFoundError(ns)
        return ns

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_k(k: int) -> int:
    """``k`` if it is a positive integer, else a :class:`UsageError`."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UsageError(f"k must be a positive integer, got {k!r}")
    return k


class _Vectors:
    """A namespace's vectors as rows of one float32 matrix that grows by doubling
    (a write appends its rows; it never copies the namespace), each row's item
    beside it. A deleted item's row is freed (``None``); the matrix is rebuilt
    without the freed rows once they are half of it."""

    def __init__(self, dim: int) -> None:
        self.matrix = np.zeros((0, dim), dtype=np.float32)
        self.items: list[MemoryItem | None] = []
        self.live = 0

    def add(self, item: MemoryItem, vector: Vector) -> int:
        """Keep ``vector`` (unit length) for ``item``; its row."""
        row = len(self.items)
        if row == len(self.matrix):
            grown = np.zeros((max(16, 2 * row), self.matrix.shape[1]), dtype=np.float32)
            grown[:row] = self.matrix
            self.matrix = grown
        self.matrix[row] = vector
        self.items.append(item)
        self.live += 1
        return row

    def remove(self, row: int) -> None:
        self.items[row] = None
        self.live -= 1

    def compacted(self) -> dict[int, int] | None:
        """Drop the freed rows when they are at least half of the matrix: each kept
        row's new number by its old one (None when nothing moved)."""
        if len(self.items) < 64 or 2 * self.live > len(self.items):
            return None
        kept = [i for i, item in enumerate(self.items) if item is not None]
        self.matrix = self.matrix[kept].copy()
        self.items = [self.items[i] for i in kept]
        return {old: new for new, old in enumerate(kept)}

    def search(
        self, q: Vector, k: int, filters: Mapping[str, Any] | None
    ) -> list[tuple[MemoryItem, float]]:
        """The best ``k`` items by cosine, best first by :func:`rank_key`.

        Every row is scored in float32 in one pass; the rows within
        :data:`DOT_SLACK` of the k-th best are rescored in float64, each as
        ``vector @ q`` (the score every store gives), and ranked."""
        n = len(self.items)
        if not n:
            return []
        sims = np.einsum("ij,j->i", self.matrix[:n], q)  # one thread: memory-bound
        if filters:
            rows = np.flatnonzero(
                np.fromiter(
                    (it is not None and matches(it.metadata, filters) for it in self.items),
                    dtype=bool,
                    count=n,
                )
            )
        elif self.live == n:
            rows = np.arange(n)
        else:
            rows = np.flatnonzero(np.fromiter((it is not None for it in self.items), bool, n))
        if not len(rows):
            return []
        found = sims[rows]
        take = min(k, len(rows))
        kth = float(np.partition(found, len(found) - take)[len(found) - take])
        q64 = q.astype(np.float64)
        scored: list[tuple[MemoryItem, float]] = []
        for row in rows[found >= kth - DOT_SLACK].tolist():
            item = self.items[row]
            assert item is not None
            scored.append((item, float(self.matrix[row].astype(np.float64) @ q64)))
        scored.sort(key=lambda p: rank_key(p[1], p[0].seq))
        return scored[:k]


class InMemoryStore(Store):
    """The reference store: plain Python and numpy, nothing persisted.

    Lexical scoring is BM25 over the analyzer's terms, from one
    :class:`~ctxwise.search.BM25Index` per namespace (postings: term → item → count),
    so a search reads only the items holding a query term; the sums run in the same
    order as a scan of every item, so the scores are the same to the bit. Vector
    search scores a namespace's vectors in one matrix pass and rescores the best
    in float64. A search ranks only the hits that can reach its top ``k``
    (:func:`~ctxwise.search.rank_candidates`), not every hit. Calls from several
    threads take turns.
    """

    def __init__(self, *, analyzer: Analyzer | None = None) -> None:
        if analyzer is not None:
            self.analyzer = analyzer
        # item id → (item, its row in the namespace's vectors or -1, its document in the index)
        self._rows: dict[Namespace, dict[str, tuple[MemoryItem, int, int]]] = {}
        self._indexes: dict[Namespace, BM25Index] = {}
        self._vectors: dict[Namespace, _Vectors] = {}
        self._docs: dict[Namespace, dict[int, MemoryItem]] = {}  # the index's documents
        self._seq: dict[Namespace, int] = {}
        self._dim: int | None = None  # of the first vector stored; every other must match
        self._closed = False
        self._lock = threading.RLock()

    def _open(self, namespace: Sequence[str]) -> Namespace:
        """The checked namespace of a call on an open store (closed: a :class:`StoreError`)."""
        if self._closed:
            raise StoreError("the in-memory store is closed")
        return check_namespace(namespace)

    def exclusive(
        self, name: str, *, busy: LockBusy | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """Hold ``name`` against this process's other holders (see
        :meth:`Store.exclusive`): no other process can reach this store."""
        if self._closed:
            raise StoreError("the in-memory store is closed")
        return super().exclusive(name, busy=busy)

    def close(self) -> None:
        """Forget every item; the store is unusable afterwards, as other stores are."""
        with self._lock:
            self._closed = True
            for table in (self._rows, self._indexes, self._vectors, self._docs, self._seq):
                table.clear()

    def _unindex(self, ns: Namespace, item_id: str) -> bool:
        row = self._rows.get(ns, {}).pop(item_id, None)
        if row is None:
            return False
        self._indexes[ns].remove(row[2])
        del self._docs[ns][row[2]]
        if row[1] >= 0:
            self._vectors[ns].remove(row[1])
        return True

    def _compact(self, ns: Namespace) -> None:
        vectors = self._vectors.get(ns)
        moved = None if vectors is None else vectors.compacted()
        if moved:
            rows = self._rows[ns]
            for item_id, (item, row, doc) in rows.items():
                if row >= 0:
                    rows[item_id] = (item, moved[row], doc)

    def put_many(self, namespace: Sequence[str], items: Sequence[NewItem]) -> list[str]:
        with self._lock:
            ns = self._open(namespace)
            prepared = [check_item(item) for item in items]
            self._dim = check_dims(
                {len(it.vector) for it in prepared if it.vector is not None}, self._dim
            )
            if not prepared:
                return []
            rows = self._rows.setdefault(ns, {})
            ids = []
            for item in prepared:
                seq = self._seq.get(ns, 0)
                self._seq[ns] = seq + 1
                item_id = item.id or f"m{seq}"
                stored = MemoryItem(item_id, ns, item.text, item.metadata, seq, item.created_at)
                indexed = item.index_text if item.index_text is not None else item.text
                self._unindex(ns, item_id)
                index = self._indexes.get(ns)
                if index is None:
                    index = self._indexes[ns] = BM25Index(self.analyzer)
                doc = index.add(indexed)
                slot = -1
                if item.vector is not None:
                    vectors = self._vectors.get(ns)
                    if vectors is None:
                        vectors = self._vectors[ns] = _Vectors(len(item.vector))
                    slot = vectors.add(stored, unit(item.vector))
                rows[item_id] = (stored, slot, doc)
                self._docs.setdefault(ns, {})[doc] = stored
                ids.append(item_id)
            self._compact(ns)
            return ids

    def get_many(self, namespace: Sequence[str], ids: Sequence[str]) -> list[MemoryItem]:
        with self._lock:
            rows = self._rows.get(self._open(namespace), {})
            return [rows[i][0] for i in check_ids(ids) if i in rows]

    def delete(self, namespace: Sequence[str], ids: Sequence[str]) -> int:
        with self._lock:
            ns = self._open(namespace)
            deleted = sum(1 for i in dict.fromkeys(check_ids(ids)) if self._unindex(ns, i))
            self._compact(ns)
            return deleted

    def lexical_search(
        self, namespace: Sequence[str], query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[tuple[MemoryItem, float]]:
        with self._lock:
            ns = self._open(namespace)
            rows = self._rows.get(ns, {})
            check_k(k)
            terms = sorted(set(self.analyzer.words(check_query(query))))
            filters = check_filters(filters)
            if not rows or not terms:
                return []
            docs = self._docs[ns]
            hits, scores = self._indexes[ns].score_arrays(terms)
            keep = scores > 0
            if filters:
                keep &= np.fromiter(
                    (matches(docs[doc].metadata, filters) for doc in hits.tolist()),
                    dtype=bool,
                    count=len(hits),
                )
            if not keep.all():
                hits, scores = hits[keep], scores[keep]
            best = rank_candidates(scores, k).tolist()
            scored = [(docs[int(hits[i])], float(scores[i])) for i in best]
        scored.sort(key=lambda p: rank_key(p[1], p[0].seq))
        return scored[:k]

    def vector_search(
        self,
        namespace: Sequence[str],
        vector: Vector,
        k: int,
        filters: Mapping[str, Any] | None = None,
    ) -> list[tuple[MemoryItem, float]]:
        with self._lock:
            ns = self._open(namespace)
            check_k(k)
            q = unit(check_vector(vector, "the query vector"))
            if self._dim is not None and len(q) != self._dim:
                raise UsageError(
                    f"the query vector has shape {q.shape}; this store holds "
                    f"{self._dim}-dimensional vectors"
                )
            filters = check_filters(filters)
            vectors = self._vectors.get(ns)
            return [] if vectors is None else vectors.search(q, k, filters)

    def by_seq(self, namespace: Sequence[str], seqs: Sequence[int]) -> list[MemoryItem]:
        with self._lock:
            rows = self._rows.get(self._open(namespace), {})
            wanted = set(check_seqs(seqs))
            found = [it for it, _, _ in rows.values() if it.seq in wanted]
        return sorted(found, key=lambda it: it.seq)

    def recent(self, namespace: Sequence[str], n: int) -> list[MemoryItem]:
        with self._lock:
            rows = self._rows.get(self._open(namespace), {})
            n = check_n(n)
            if n <= 0:
                return []
            newest = heapq.nlargest(n, (it for it, _, _ in rows.values()), key=lambda it: it.seq)
        return sorted(newest, key=lambda it: it.seq)

    def namespaces(self) -> list[Namespace]:
        with self._lock:
            if self._closed:
                raise StoreError("the in-memory store is closed")
            return sorted(ns for ns, rows in self._rows.items() if rows)

    def count(self, namespace: Sequence[str]) -> int:
        with self._lock:
            return len(self._rows.get(self._open(namespace), {}))


def batched(items: Iterable[NewItem], size: int) -> Iterable[list[NewItem]]:
    batch: list[NewItem] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
