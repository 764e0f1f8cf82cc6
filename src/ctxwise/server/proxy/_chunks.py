"""A Chat Completions stream, read as it passes through: the final completion rebuilt.

With ``"stream": true`` the API sends ``data:`` lines, each a
``chat.completion.chunk`` (``id``, ``created``, ``model``, ``choices`` of
``{"index", "delta", "finish_reason"}``), and ends with ``data: [DONE]``. A delta
grows its choice: ``role``, ``content`` and ``refusal`` text, and ``tool_calls`` by
their ``index`` (the first piece carries the call's ``id``, ``type`` and function
``name``; every piece adds to the function's ``arguments``). With
``stream_options.include_usage`` a last chunk carries ``usage`` and no choices. A
chunk holding ``error`` fails the stream.

:attr:`CompletionStream.message` is the ``chat.completion`` the non-streaming
endpoint would have returned, once ``[DONE]`` arrived, for a stream of one choice
(with ``n`` above one the client chooses which answer the conversation keeps, so
none is recorded).
"""

from __future__ import annotations

import json
from typing import Any

from ctxwise.server.proxy._frames import EventStream

__all__ = ["CompletionStream"]


class _Choice:
    def __init__(self) -> None:
        self.role = "assistant"
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None

    def grow(self, delta: dict[str, Any]) -> None:
        if isinstance(delta.get("role"), str):
            self.role = delta["role"]
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        if isinstance(delta.get("refusal"), str):
            self.refusal.append(delta["refusal"])
        for piece in delta.get("tool_calls") or []:
            call = self.calls.setdefault(
                int(piece["index"]), {"id": "", "type": "function", "name": "", "arguments": ""}
            )
            for key in ("id", "type"):
                if isinstance(piece.get(key), str):
                    call[key] = piece[key]
            function = piece.get("function") or {}
            if isinstance(function.get("name"), str):
                call["name"] += function["name"]
            if isinstance(function.get("arguments"), str):
                call["arguments"] += function["arguments"]

    def message(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "role": self.role,
            "content": "".join(self.content) if self.content else None,
        }
        if self.refusal:
            out["refusal"] = "".join(self.refusal)
        if self.calls:
            out["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": c["type"],
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for _, c in sorted(self.calls.items())
            ]
        return out


class CompletionStream(EventStream):
    """Rebuilds a ``chat.completion`` from its chunks (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._head: dict[str, Any] = {}
        self._choices: dict[int, _Choice] = {}
        self._usage: dict[str, Any] | None = None
        self.complete = False

    @property
    def message(self) -> dict[str, Any] | None:
        """The rebuilt completion once complete (one choice), else ``None``."""
        if not self.complete or self.failed is not None or set(self._choices) != {0}:
            return None
        choice = self._choices[0]
        out: dict[str, Any] = {
            "id": self._head.get("id"),
            "object": "chat.completion",
            "created": self._head.get("created"),
            "model": self._head.get("model"),
            "choices": [
                {"index": 0, "message": choice.message(), "finish_reason": choice.finish_reason}
            ],
        }
        if self._head.get("system_fingerprint") is not None:
            out["system_fingerprint"] = self._head["system_fingerprint"]
        if self._usage is not None:
            out["usage"] = self._usage
        return out

    def on_data(self, data: bytes) -> None:
        if data.strip() == b"[DONE]":
            self.complete = True
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            self.failed = "a chunk is not JSON"
            return
        if not isinstance(chunk, dict):
            self.failed = "a chunk is not a JSON object"
            return
        if chunk.get("error") is not None:
            self.failed = f"upstream error: {json.dumps(chunk['error'])[:200]}"
            return
        try:
            self._apply(chunk)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self.failed = f"an unreadable chunk ({type(exc).__name__})"

    def _apply(self, chunk: dict[str, Any]) -> None:
        for key in ("id", "created", "model", "system_fingerprint"):
            if chunk.get(key) is not None:
                self._head.setdefault(key, chunk[key])
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        for part in chunk.get("choices") or []:
            choice = self._choices.setdefault(int(part["index"]), _Choice())
            choice.grow(part.get("delta") or {})
            if part.get("finish_reason") is not None:
                choice.finish_reason = part["finish_reason"]
