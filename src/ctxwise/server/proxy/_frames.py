"""Server-sent events read as they pass through, for the stream readers of each API.

An upstream ``text/event-stream`` reaches the client byte for byte; the proxy feeds
the same bytes to a reader (:class:`~ctxwise.server.proxy._sse.MessageStream`,
:class:`~ctxwise.server.proxy._chunks.CompletionStream`,
:class:`~ctxwise.server.proxy._events.ResponseEvents`) that rebuilds what the
non-streaming endpoint would have answered. :class:`EventStream` is their common
part: it splits the bytes, in whatever pieces they arrive, into events (a blank line
ends each; CRLF is read as LF) and hands each event's data (its ``data:`` lines,
joined by newlines) to :meth:`EventStream.on_data`. Once ``failed`` is set, later
events are not read; the passthrough goes on regardless.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

__all__ = ["EventStream"]


class EventStream(ABC):
    """Splits a stream into events and reads each one's data (module docstring)."""

    def __init__(self) -> None:
        self._buffer = b""
        self.failed: str | None = None
        """Why the stream cannot give a result; ``None`` while it can."""

    def feed(self, chunk: bytes) -> None:
        """Read ``chunk``, the stream's next bytes (any split of them)."""
        self._buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n\n", 1)
            if self.failed is not None:
                continue
            data = b"\n".join(
                line[5:].removeprefix(b" ")
                for line in raw.split(b"\n")
                if line.startswith(b"data:")
            )
            if data:  # a comment or an event without data is skipped
                self.on_data(data)

    @abstractmethod
    def on_data(self, data: bytes) -> None:
        """Read one event's data."""
