"""Load on demand: a large tool result is stored, the model sees one page and a cursor.

:func:`paginate` cuts a sequence into pages in process (its cursor is the next offset
as a decimal string, unsigned: for code, not for a model). :class:`ResultStore` keeps
whole results and hands out cursors a model can pass back through the
:func:`fetch_more_tool` tool:

- a cursor is ``base64url(payload) "." base64url(HMAC-SHA256(key, payload))``; the
  payload holds the result id, the session id, the offset, the page size and the
  time it expires. It is opaque to the model and cannot be made up or edited
  without the store's key. A key can be rotated: the old one, passed as one of
  ``previous_keys``, still opens the cursors it signed.
- ``fetch(cursor, session_id)`` checks, in this order, the signature (``forged``),
  the session (``wrong_session``), the expiry (``expired``) and the stored result
  (``unknown_result``), and raises :class:`~ctxwise.errors.CursorError` with that
  ``reason``.
- nothing is random or read from the wall clock behind the caller's back: the key is
  given (or drawn once from a random source the caller passes,
  :meth:`ResultStore.with_random_key`), the clock is injected, and result ids are
  content hashes with a per-store sequence number.

Results live in a memory :class:`~ctxwise.memory.store.Store` (an
:class:`~ctxwise.memory.store.InMemoryStore` unless one is given), one item per
result in the namespace ``(*namespace, namespace_part(session_id))`` (the session id
escaped as every store escapes it, so an id holding ``/`` is one part).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxwise.errors import BudgetError, CursorError, UsageError
from ctxwise.memory.store import InMemoryStore, NewItem, Store, check_namespace, namespace_part
from ctxwise.messages import ToolResultBlock

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_TTL",
    "FETCH_MORE",
    "CursorError",
    "Page",
    "ResultStore",
    "fetch_more_result",
    "fetch_more_tool",
    "page_text",
    "paginate",
]

DEFAULT_PAGE_SIZE = 20
"""Items per page when neither the store nor the call says."""

DEFAULT_TTL = 3600.0
"""How long a cursor stays valid after it is issued, in the clock's units (seconds)."""

FETCH_MORE = "fetch_more"
"""The default name of the tool a model calls with a cursor."""

_MIN_KEY_BYTES = 16
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a result: its items, the cursor for the next page (``None`` on the
    last page), how many items the whole result holds and where this page starts."""

    items: tuple[Any, ...]
    next_cursor: str | None
    total: int
    offset: int = 0


def _check_page_size(page_size: int) -> int:
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise BudgetError(page_size if isinstance(page_size, int) else 0, "page_size must be >= 1")
    return page_size


def paginate(items: Sequence[Any], page_size: int, cursor: str | None = None) -> Page:
    """The page of ``items`` that starts at ``cursor`` (the first page when ``None``).

    ``next_cursor`` is the next offset as a decimal string. It is not signed: use
    :class:`ResultStore` for cursors that leave the process.

    Raises:
        BudgetError: ``page_size`` is below one.
        UsageError: ``cursor`` is not an offset within ``items``.
    """
    _check_page_size(page_size)
    offset = 0
    if cursor is not None:
        if (
            not isinstance(cursor, str)
            or not (cursor.isascii() and cursor.isdigit())
            or int(cursor) > len(items)
        ):
            raise UsageError(f"cursor {cursor!r} is not an offset within {len(items)} items")
        offset = int(cursor)
    end = offset + page_size
    return Page(
        tuple(items[offset:end]), str(end) if end < len(items) else None, len(items), offset
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ResultStore:
    """Stores large tool results and pages them out behind signed, expiring cursors.

    ``key`` signs every cursor (at least 16 bytes; keep it secret and the same across
    processes that share the store). ``previous_keys`` are keys it replaced: a cursor
    one of them signed is still accepted (the page it opens carries a cursor signed
    with ``key``), so rotating the key does not break the cursors a model holds; drop
    a previous key once its cursors have expired (``ttl``). ``clock`` gives the current
    time in seconds (``time.time`` in production, a fake in tests); a cursor expires
    ``ttl`` after it was issued. ``store`` and ``namespace`` say where results live.
    """

    def __init__(
        self,
        key: bytes,
        *,
        clock: Callable[[], float],
        previous_keys: Sequence[bytes] = (),
        ttl: float = DEFAULT_TTL,
        page_size: int = DEFAULT_PAGE_SIZE,
        store: Store | None = None,
        namespace: Sequence[str] = ("ctxwise", "tool_results"),
    ) -> None:
        if not isinstance(key, bytes) or len(key) < _MIN_KEY_BYTES:
            raise UsageError(f"key must be at least {_MIN_KEY_BYTES} bytes")
        # a bare key (bytes) or a str iterates as ints or characters: refused here too
        if not all(isinstance(k, bytes) and len(k) >= _MIN_KEY_BYTES for k in previous_keys):
            raise UsageError(f"previous_keys are keys of at least {_MIN_KEY_BYTES} bytes each")
        if (
            isinstance(ttl, bool)
            or not isinstance(ttl, int | float)
            or not 0 < ttl < math.inf  # an infinite expiry is written as Infinity: not JSON
        ):
            raise UsageError(f"ttl must be a positive, finite number, got {ttl!r}")
        self._key = key
        self._previous = tuple(previous_keys)
        self.clock = clock
        self.ttl = float(ttl)
        self.page_size = _check_page_size(page_size)
        self.store: Store = store if store is not None else InMemoryStore()
        self.namespace = check_namespace(namespace)
        self._seq = 0

    @classmethod
    def with_random_key(
        cls, random_bytes: Callable[[int], bytes], *, clock: Callable[[], float], **kwargs: Any
    ) -> ResultStore:
        """A store whose key is drawn once from ``random_bytes`` (``os.urandom``, or a
        seeded source in tests)."""
        return cls(random_bytes(32), clock=clock, **kwargs)

    # -- cursors ---------------------------------------------------------------------

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()

    def _cursor(self, result_id: str, session_id: str, offset: int, page_size: int) -> str:
        fields = {
            "r": result_id,
            "s": session_id,
            "o": offset,
            "n": page_size,
            "e": self.clock() + self.ttl,
        }
        payload = json.dumps(fields, separators=(",", ":"), sort_keys=True).encode("utf-8")
        return f"{_b64(payload)}.{_b64(self._sign(payload))}"

    def _open(self, cursor: str) -> dict[str, Any]:
        """The payload of a cursor this store signed, or ``CursorError("forged")``."""
        if not isinstance(cursor, str) or cursor.count(".") != 1:
            raise CursorError("forged", detail="not a cursor")
        body, _, signature = cursor.partition(".")
        try:
            payload, given = _unb64(body), _unb64(signature)
        except (binascii.Error, ValueError):
            raise CursorError("forged", detail="not a cursor") from None
        keys = (self._key, *self._previous)
        if not any(
            hmac.compare_digest(given, hmac.new(k, payload, hashlib.sha256).digest()) for k in keys
        ):
            raise CursorError("forged", detail="bad signature")
        fields: dict[str, Any] = json.loads(payload)
        return fields

    # -- results ---------------------------------------------------------------------

    def _ns(self, session_id: str) -> tuple[str, ...]:
        return check_namespace((*self.namespace, namespace_part(session_id)))

    def put(
        self, items: Sequence[Any], *, session_id: str, page_size: int | None = None
    ) -> tuple[str, Page]:
        """Store ``items`` (JSON values) for ``session_id``; the result id and its first page.

        Raises:
            UsageError: ``items`` is not a list (a string, a dict) or holds something
                JSON cannot write (a date, a cycle).
        """
        size = self.page_size if page_size is None else _check_page_size(page_size)
        if isinstance(items, str | bytes | bytearray | Mapping) or not isinstance(items, Sequence):
            raise UsageError(
                f"items must be a list of JSON values, got {type(items).__name__} (a "
                "string would be paged by character, a dict by key)"
            )
        values = list(items)
        try:
            text = json.dumps(values, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError) as e:
            raise UsageError(f"items must be JSON values: {e}") from None
        digest = hashlib.sha256(f"{session_id}\n{self._seq}\n{text}".encode()).hexdigest()
        result_id = f"r{self._seq}-{digest[:16]}"
        self._seq += 1
        self.store.put(
            self._ns(session_id),
            NewItem(
                text,
                {"kind": "tool_result", "total": len(values)},
                id=result_id,
                created_at=self.clock(),
            ),
        )
        return result_id, self._page(values, result_id, session_id, 0, size)

    def _page(
        self, values: list[Any], result_id: str, session_id: str, offset: int, size: int
    ) -> Page:
        end = offset + size
        cursor = self._cursor(result_id, session_id, end, size) if end < len(values) else None
        return Page(tuple(values[offset:end]), cursor, len(values), offset)

    def fetch(self, cursor: str, session_id: str) -> Page:
        """The page ``cursor`` points to, with the cursor for the page after it.

        Raises:
            CursorError: the cursor is forged or tampered with, belongs to another
                session, has expired, or its result is no longer stored (``reason``).
        """
        fields = self._open(cursor)
        try:
            result_id, owner = str(fields["r"]), str(fields["s"])
            offset, size, expires = int(fields["o"]), int(fields["n"]), float(fields["e"])
        except (KeyError, TypeError, ValueError):  # pragma: no cover - we signed it
            raise CursorError("forged", detail="malformed payload") from None
        if owner != session_id:
            raise CursorError("wrong_session", detail=f"result {result_id}")
        if self.clock() >= expires:
            raise CursorError("expired", detail=f"result {result_id}")
        item = self.store.get(self._ns(session_id), result_id)
        if item is None:
            raise CursorError("unknown_result", detail=f"result {result_id}")
        return self._page(json.loads(item.text), result_id, session_id, offset, size)

    def discard(self, result_id: str, *, session_id: str) -> bool:
        """Forget a stored result; its cursors then fail with ``unknown_result``."""
        return self.store.delete(self._ns(session_id), [result_id]) > 0


# -- the tool a model calls ------------------------------------------------------------------


def fetch_more_tool(name: str = FETCH_MORE) -> dict[str, Any]:
    """The Anthropic tool definition for fetching the next page of a stored result.

    Raises:
        UsageError: ``name`` is not a tool name the providers accept
            (``^[A-Za-z0-9_-]{1,64}$``).
    """
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        raise UsageError(f"a tool name matches ^[A-Za-z0-9_-]{{1,64}}$, got {name!r}")
    return {
        "name": name,
        "description": (
            "Fetch the next page of a tool result that was too large to show at once. "
            "Pass the next_cursor value from the previous page exactly as given. "
            "A cursor works only in this conversation and expires after a while; "
            "if it is refused, run the original tool again."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "cursor": {
                    "type": "string",
                    "description": "The next_cursor value of the page before, unchanged.",
                }
            },
            "required": ["cursor"],
        },
    }


def page_text(page: Page, *, tool_name: str = FETCH_MORE) -> str:
    """A page as the JSON text a model reads: items, where they sit, and what to do next."""
    end = page.offset + len(page.items)
    body: dict[str, Any] = {
        "items": list(page.items),
        "showing": f"items {page.offset + 1}-{end} of {page.total}"
        if page.items
        else f"no items (of {page.total})",
        "next_cursor": page.next_cursor,
    }
    if page.next_cursor is not None:
        body["hint"] = f"call {tool_name} with next_cursor for the next page"
    return json.dumps(body, ensure_ascii=False)


def fetch_more_result(
    results: ResultStore,
    tool_input: Any,
    *,
    session_id: str,
    tool_use_id: str,
    tool_name: str = FETCH_MORE,
) -> ToolResultBlock:
    """Run a ``fetch_more`` call: the next page as a tool result, or an ``is_error``
    result that says why the cursor was refused and what to do instead."""
    cursor = tool_input.get("cursor") if isinstance(tool_input, dict) else None
    if not isinstance(cursor, str):
        text = f"{tool_name} needs a 'cursor' string: the next_cursor of the page before."
        return ToolResultBlock(tool_use_id, text, is_error=True)
    try:
        page = results.fetch(cursor, session_id)
    except CursorError as e:
        return ToolResultBlock(tool_use_id, str(e), is_error=True)
    return ToolResultBlock(tool_use_id, page_text(page, tool_name=tool_name), is_error=False)
