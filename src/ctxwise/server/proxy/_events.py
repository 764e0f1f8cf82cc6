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

from ctxwise.server.proxy._frames import EventStream

__all__ = ["ResponseEvents"]

_FAILED = frozenset({"error", "response.failed", "response.incomplete"})


class ResponseEvents(EventStream):
    """Keeps the response of a Responses API stream's ``response.completed`` event."""

    def __init__(self) -> None:
        super().__init__()
        self._response: dict[str, Any] | None = None

    @property
    def message(self) -> dict[str, Any] | None:
        """The completed response, ``None`` before it (or after a failure)."""
        return self._response if self.failed is None else None

    def on_data(self, data: bytes) -> None:
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
