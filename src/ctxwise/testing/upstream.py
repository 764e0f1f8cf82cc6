"""A loopback fake of the providers' APIs, for testing what talks to them.

:class:`FakeUpstream` serves, on ``127.0.0.1`` and a free port, the documented
shapes of

- Anthropic's ``POST /v1/messages`` (a ``message`` JSON, or with ``"stream": true``
  the SSE events ``message_start``, ``content_block_start`` / ``_delta`` / ``_stop``,
  ``message_delta``, ``message_stop``) and ``POST /v1/messages/count_tokens``;
- OpenAI's ``POST /v1/chat/completions`` (a ``chat.completion``, or ``data:`` chunks
  ending in ``data: [DONE]``, with a usage chunk when ``stream_options.include_usage``)
  and ``POST /v1/responses`` (a completed ``response``; not streamed).

What the assistant says is ``respond(body)``: Anthropic content blocks (``text`` and
``tool_use``; a Chat Completions answer carries them as ``content`` and
``tool_calls``). ``input_tokens(body)`` is the usage it reports (by default the
request's JSON length over four: a stand-in, not a tokenizer). Every request body is
kept in :attr:`FakeUpstream.requests`, with the headers in :attr:`FakeUpstream.headers`,
and ``check(body)`` may name problems, kept in :attr:`FakeUpstream.problems`: a test
of a proxy asserts on what actually arrived upstream. ``status`` and ``error`` make
every answer an error; :meth:`FakeUpstream.hold` makes answers wait until released
(an upstream that hangs).

Only the standard library is used (a threading HTTP server), so it runs wherever
ctxwise does; it is for tests and benchmarks, never for production traffic.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "FakeUpstream",
    "Reply",
    "anthropic_sse",
    "chat_chunks",
    "responses_body",
    "text_reply",
]

Reply = list[dict[str, Any]]
"""The assistant's content blocks (Anthropic shape: ``text``, ``tool_use``)."""


def text_reply(body: Mapping[str, Any]) -> Reply:
    """The default answer: one text block naming how many messages arrived."""
    return [{"type": "text", "text": f"ok ({len(body.get('messages', []))} messages)"}]


def _json_tokens(body: Mapping[str, Any]) -> int:
    return max(1, len(json.dumps(body, ensure_ascii=False)) // 4)


def _stop(content: Reply) -> str:
    return "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"


def anthropic_message(
    content: Reply, *, input_tokens: int, output_tokens: int, model: str, n: int
) -> dict[str, Any]:
    """A Messages API response body."""
    return {
        "id": f"msg_fake_{n:06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _stop(content) if content else None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def anthropic_sse(message: Mapping[str, Any]) -> bytes:
    """``message`` as the Messages API streams it (SSE events, in order)."""
    content: Reply = list(message["content"])
    usage = dict(message["usage"])
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for i, block in enumerate(content):
        if block["type"] == "text":
            first: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"]}]
        elif block["type"] == "tool_use":
            first = {**block, "input": {}}
            raw = json.dumps(block["input"])
            half = len(raw) // 2
            deltas = [
                {"type": "input_json_delta", "partial_json": raw[:half]},
                {"type": "input_json_delta", "partial_json": raw[half:]},
            ]
        else:
            raise ValueError(f"the fake streams text and tool_use blocks, not {block['type']!r}")
        events.append({"type": "content_block_start", "index": i, "content_block": first})
        events.extend({"type": "content_block_delta", "index": i, "delta": d} for d in deltas)
        events.append({"type": "content_block_stop", "index": i})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _chat_message(content: Reply) -> dict[str, Any]:
    text = "".join(b["text"] for b in content if b.get("type") == "text")
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": json.dumps(b["input"])},
        }
        for b in content
        if b.get("type") == "tool_use"
    ]
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        out["tool_calls"] = calls
    return out


def chat_completion(
    content: Reply, *, prompt_tokens: int, completion_tokens: int, model: str, n: int
) -> dict[str, Any]:
    """A Chat Completions response body."""
    message = _chat_message(content)
    return {
        "id": f"chatcmpl-fake{n:06d}",
        "object": "chat.completion",
        "created": 1_700_000_000 + n,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def responses_body(
    content: Reply, *, input_tokens: int, output_tokens: int, model: str, n: int
) -> dict[str, Any]:
    """A Responses API response body (a completed response)."""
    output: list[dict[str, Any]] = []
    text = "".join(b["text"] for b in content if b.get("type") == "text")
    if text:
        output.append(
            {
                "type": "message",
                "id": f"msg_fake_{n:06d}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    output.extend(
        {
            "type": "function_call",
            "id": f"fc_fake_{n:06d}_{i}",
            "call_id": b["id"],
            "name": b["name"],
            "arguments": json.dumps(b["input"]),
            "status": "completed",
        }
        for i, b in enumerate(content)
        if b.get("type") == "tool_use"
    )
    return {
        "id": f"resp_fake_{n:06d}",
        "object": "response",
        "created_at": 1_700_000_000 + n,
        "status": "completed",
        "model": model,
        "output": output,
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }


def chat_chunks(completion: Mapping[str, Any], *, include_usage: bool) -> bytes:
    """``completion`` as Chat Completions streams it (``data:`` lines, ``[DONE]``)."""
    base = {k: completion[k] for k in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    choice = completion["choices"][0]
    message = choice["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if message.get("content"):
        deltas.append({"content": message["content"]})
    for i, call in enumerate(message.get("tool_calls", [])):
        deltas.append({"tool_calls": [{"index": i, **call}]})
    chunks = [
        {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    chunks.append(
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}
    )
    if include_usage:
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks]
    return ("".join(lines) + "data: [DONE]\n\n").encode()


class FakeUpstream:
    """The loopback fake (see the module docstring). Use as a context manager, or
    :meth:`start` and :meth:`stop`; :attr:`url` is its base URL."""

    def __init__(
        self,
        respond: Callable[[Mapping[str, Any]], Reply] = text_reply,
        *,
        input_tokens: Callable[[Mapping[str, Any]], int] = _json_tokens,
        output_tokens: int = 5,
        check: Callable[[Mapping[str, Any]], list[str]] | None = None,
        status: int = 200,
        error: Mapping[str, Any] | None = None,
    ) -> None:
        self.respond = respond
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.check = check
        self.status = status
        self.error = error
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.problems: list[tuple[int, str]] = []
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._released.set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ control

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the fake upstream is not started")
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> FakeUpstream:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Answers wait (the connection open, nothing sent) until the block ends."""
        self._released.clear()
        try:
            yield
        finally:
            self._released.set()

    # ------------------------------------------------------------------ answers

    def _answer(
        self, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, str, bytes]:
        with self._lock:
            n = len(self.requests)
            self.requests.append(body)
            self.headers.append(headers)
            self.paths.append(path)
            if self.check is not None:
                self.problems.extend((n, p) for p in self.check(body))
        self._released.wait()
        if self.status != 200:
            return self.status, "application/json", json.dumps(self.error or {}).encode()
        model = str(body.get("model", "fake-model"))
        if path == "/v1/messages/count_tokens":
            return (
                200,
                "application/json",
                json.dumps({"input_tokens": self.input_tokens(body)}).encode(),
            )
        content = self.respond(body)
        tokens = self.input_tokens(body)
        if path == "/v1/messages":
            message = anthropic_message(
                content, input_tokens=tokens, output_tokens=self.output_tokens, model=model, n=n
            )
            if body.get("stream"):
                return 200, "text/event-stream", anthropic_sse(message)
            return 200, "application/json", json.dumps(message).encode()
        if path == "/v1/chat/completions":
            completion = chat_completion(
                content,
                prompt_tokens=tokens,
                completion_tokens=self.output_tokens,
                model=model,
                n=n,
            )
            if body.get("stream"):
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                return 200, "text/event-stream", chat_chunks(completion, include_usage=usage)
            return 200, "application/json", json.dumps(completion).encode()
        if path == "/v1/responses" and not body.get("stream"):
            done = responses_body(
                content, input_tokens=tokens, output_tokens=self.output_tokens, model=model, n=n
            )
            return 200, "application/json", json.dumps(done).encode()
        return 404, "application/json", json.dumps({"error": {"message": "no such route"}}).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # headers and body leave in separate writes: without this, delayed
                # ACKs hold each answer back by tens of milliseconds on loopback
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(size)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    status, kind, data = fake._answer(self.path.split("?")[0], body, headers)
                except Exception as exc:  # a test's respond() that raised: say so, keep serving
                    status, kind = 500, "application/json"
                    data = json.dumps({"error": {"message": f"fake upstream: {exc!r}"}}).encode()
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                # a stream goes event by event, each flushed, as a provider sends it
                pieces = data.split(b"\n\n") if kind == "text/event-stream" else [data]
                with suppress(BrokenPipeError, ConnectionResetError):
                    for i, piece in enumerate(pieces):
                        self.wfile.write(piece + (b"\n\n" if i < len(pieces) - 1 else b""))
                        self.wfile.flush()

        return Handler
