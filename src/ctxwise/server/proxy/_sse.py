"""A Messages API event stream, read as it passes through: the final message rebuilt.

The proxy hands every byte of an upstream ``text/event-stream`` to the client as it
arrives and feeds the same bytes to :class:`MessageStream`, which splits them into
server-sent events (``event:`` and ``data:`` lines, a blank line ending each) and
rebuilds the message the non-streaming endpoint would have returned:

- ``message_start`` gives the message (id, model, role, empty content, usage);
- ``content_block_start`` opens block ``index`` (text, tool_use, thinking, or any
  other type, kept as sent); ``content_block_delta`` grows it: ``text_delta``
  (text), ``input_json_delta`` (a tool call's input, as JSON text read whole at the
  block's stop), ``thinking_delta`` and ``signature_delta``, ``citations_delta``;
- ``message_delta`` sets ``stop_reason`` and ``stop_sequence`` and updates usage
  (its counts are the running totals: each replaces ``message_start``'s);
- ``message_stop`` completes the message; ``ping`` is ignored; an ``error`` event
  marks the stream failed (the message is never complete).

:attr:`MessageStream.message` is the rebuilt message once :attr:`complete`, ``None``
before; an event it cannot read fails the stream (``failed``), never the passthrough.
"""

from __future__ import annotations

import json
from typing import Any

from ctxwise.server.proxy._frames import EventStream

__all__ = ["MessageStream"]


class MessageStream(EventStream):
    """Rebuilds a Messages API response from its event stream (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._message: dict[str, Any] | None = None
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, str] = {}
        self.complete = False

    @property
    def message(self) -> dict[str, Any] | None:
        """The rebuilt message (a Messages API response body) once complete."""
        if not self.complete or self.failed is not None or self._message is None:
            return None
        return {**self._message, "content": [self._blocks[i] for i in sorted(self._blocks)]}

    def on_data(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            self.failed = "an event's data is not JSON"
            return
        if not isinstance(event, dict):
            self.failed = "an event's data is not a JSON object"
            return
        try:
            self._apply(event)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self.failed = f"unreadable {event.get('type')!r} event ({type(exc).__name__})"

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self._message = dict(event["message"])
            self._message["usage"] = dict(self._message.get("usage") or {})
        elif kind == "error":
            error = event.get("error")
            self.failed = f"upstream error event: {json.dumps(error)[:200]}"
        elif kind in ("ping", None):
            return
        elif self._message is None:
            self.failed = f"a {kind!r} event before message_start"
        elif kind == "content_block_start":
            self._blocks[int(event["index"])] = dict(event["content_block"])
        elif kind == "content_block_delta":
            self._delta(int(event["index"]), event["delta"])
        elif kind == "content_block_stop":
            self._stop(int(event["index"]))
        elif kind == "message_delta":
            self._message.update(event.get("delta") or {})
            self._message["usage"].update(event.get("usage") or {})
        elif kind == "message_stop":
            self.complete = True

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self._blocks[index]
        kind = delta["type"]
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
        elif kind == "input_json_delta":
            self._json[index] = self._json.get(index, "") + delta["partial_json"]
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta["signature"]
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta["citation"])
        else:
            raise ValueError(f"unknown delta type {kind!r}")

    def _stop(self, index: int) -> None:
        block = self._blocks[index]
        if index in self._json:
            text = self._json.pop(index)
            block["input"] = json.loads(text) if text.strip() else {}
