"""A Responses API event stream, read as it passes through: the final response kept.

With ``"stream": true`` the Responses API sends typed events (``response.created``,
``response.output_item.added``, ``response.output_text.delta``, …) and ends a
finished response with ``response.completed``, whose ``response`` is the whole
response object, output and usage included: :class:`ResponseEvents` keeps it.
``response.failed``, ``response.incomplete`` and ``error`` fail the stream (nothing
to record).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["ResponseEvents"]

_FAILED = frozenset({"error", "response.failed", "response.incomplete"})


class ResponseEvents:
    """Keeps the response of a Responses API stream's ``response.completed`` event."""

    def __init__(self) -> None:
        self._buffer = b""
        self._response: dict[str, Any] | None = None
        self.failed: str | None = None

    @property
    def message(self) -> dict[str, Any] | None:
        """The completed response, ``None`` before it (or after a failure)."""
        return self._response if self.failed is None else None

    def feed(self, chunk: bytes) -> None:
        """Read ``chunk``, the stream's next bytes (any split of them)."""
        self._buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n\n", 1)
            if self.failed is None:
                self._event(raw)

    def _event(self, raw: bytes) -> None:
        data = b"\n".join(
            line[5:].removeprefix(b" ") for line in raw.split(b"\n") if line.startswith(b"data:")
        )
        if not data:
            return
        try:
            event = json.loads(data)
        except ValueError:
            self.failed = "an event's data is not JSON"
            return
        kind = event.get("type") if isinstance(event, dict) else None
        if kind in _FAILED:
            self.failed = f"the stream ended with {kind!r}"
        elif kind == "response.completed":
            response = event.get("response")
            if isinstance(response, dict):
                self._response = response
            else:
                self.failed = "response.completed without a response"
