"""The Anthropic proxy (issue 31, item 2): ``POST /v1/messages`` through the Engine,
streaming and not, against a fake Messages API answering with the documented JSON
and event-stream shapes, on a real store (a SQLite file, or PostgreSQL when
CTXWISE_PG_DSN is set)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from ctxwise.formats import anthropic
from ctxwise.pairing import problems
from ctxwise.server.app import create_app
from ctxwise.server.keys import KeyStore
from ctxwise.server.proxy import include_proxy
from ctxwise.server.settings import ServeSettings
from tests._stores import postgres_dsn

PROVIDER_KEY = "sk-ant-api03-" + "Zq7" * 20
VERSION = "2023-06-01"
MODEL = "claude-sonnet-4-5"
UPSTREAM = "https://upstream.test"

Handler = Callable[[httpx.Request, dict[str, Any]], httpx.Response]


def message_json(
    content: list[dict[str, Any]],
    *,
    stop: str = "end_turn",
    usage: dict[str, int] | None = None,
    ident: str = "msg_01",
) -> dict[str, Any]:
    """A Messages API response body, as the API documents it."""
    return {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage
        or {
            "input_tokens": 120,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 12,
        },
    }


def sse(*events: dict[str, Any]) -> bytes:
    """Server-sent events as the Messages API writes them."""
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def stream_events(content: list[dict[str, Any]], usage_in: int = 300) -> list[dict[str, Any]]:
    """The event stream of a message whose final content is ``content``."""
    start = message_json([], usage={"input_tokens": usage_in, "output_tokens": 1})
    start["stop_reason"] = None
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for i, block in enumerate(content):
        if block["type"] == "text":
            events.append(
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {"type": "text", "text": ""},
                }
            )
            events.append({"type": "ping"})
            text = block["text"]
            for part in (text[: len(text) // 2], text[len(text) // 2 :]):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "text_delta", "text": part},
                    }
                )
        elif block["type"] == "thinking":
            events.append(
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                }
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "thinking_delta", "thinking": block["thinking"]},
                }
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "signature_delta", "signature": block["signature"]},
                }
            )
        else:
            start_block = {
                "type": "tool_use",
                "id": block["id"],
                "name": block["name"],
                "input": {},
            }
            events.append({"type": "content_block_start", "index": i, "content_block": start_block})
            raw = json.dumps(block["input"])
            for part in (raw[:5], raw[5:]):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": part},
                    }
                )
        events.append({"type": "content_block_stop", "index": i})
    stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 40},
        }
    )
    events.append({"type": "message_stop"})
    return events


@dataclass
class FakeAnthropic:
    """The Messages API as a mock transport: answers with ``answer`` (a function of
    the request and its JSON body), keeps every request it got."""

    answer: Handler | None = None
    received: list[httpx.Request] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    answers: list[bytes] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.received.append(request)
        self.bodies.append(request.content)
        data = json.loads(request.content)
        if self.answer is not None:
            response = self.answer(request, data)
        else:
            text = f"answer {len(self.received)}"
            response = httpx.Response(
                200,
                json=message_json([{"type": "text", "text": text}]),
                headers={"request-id": f"req_{len(self.received)}"},
            )
        try:
            self.answers.append(response.content)
        except httpx.ResponseNotRead:  # a stream made as it is read
            self.answers.append(b"")
        return response

    def sent(self, i: int = -1) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.bodies[i])
        return body


@dataclass
class Proxy:
    client: TestClient
    upstream: FakeAnthropic
    keys: KeyStore
    tenant: str
    key: str
    root: Path

    def headers(self, session: str | None = None, **extra: str) -> dict[str, str]:
        out = {
            "x-ctxwise-key": self.key,
            "x-api-key": PROVIDER_KEY,
            "anthropic-version": VERSION,
            **extra,
        }
        if session is not None:
            out["x-ctxwise-session"] = session
        return out

    def post(self, body: Any, session: str | None = None, **extra: str) -> httpx.Response:
        return self.client.post("/v1/messages", json=body, headers=self.headers(session, **extra))

    def messages(self, session: str) -> list[dict[str, Any]]:
        r = self.client.get(f"/v1/sessions/{session}/messages", headers=self.headers())
        assert r.status_code == 200, r.text
        out: list[dict[str, Any]] = r.json()["messages"]
        return out

    def traces(self, session: str) -> list[dict[str, Any]]:
        r = self.client.get(f"/v1/sessions/{session}/traces", headers=self.headers())
        assert r.status_code == 200, r.text
        out: list[dict[str, Any]] = r.json()["traces"]
        return out

    def sessions(self) -> list[str]:
        r = self.client.get("/v1/sessions", headers=self.headers())
        assert r.status_code == 200, r.text
        out: list[str] = r.json()["sessions"]
        return out


def _drop_schema(tenant: str) -> None:
    import psycopg

    with psycopg.connect(os.environ["CTXWISE_PG_DSN"], autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS ctxwise_t_{tenant} CASCADE")


def make_proxy(
    store: str, root: Path, config: Path | None = None, **settings: Any
) -> tuple[Proxy, Callable[[], None]]:
    tenant = f"p{uuid.uuid4().hex[:10]}"
    keys = KeyStore(store)
    _, key = keys.create(tenant, "proxy test")
    fake = FakeAnthropic()
    cfg = ServeSettings(
        store=store,
        config=config,
        anthropic_upstream=UPSTREAM,
        max_body_bytes=settings.pop("max_body_bytes", 4 * 1024 * 1024),
        **settings,
    )
    app = create_app(cfg, keys=keys, transport=httpx.MockTransport(fake.handler))
    include_proxy(app)
    client = TestClient(app)
    client.__enter__()

    def close() -> None:
        client.__exit__(None, None, None)
        keys.close()
        if store.startswith("postgresql"):
            _drop_schema(tenant)

    return Proxy(client, fake, keys, tenant, key, root), close


@pytest.fixture(params=["sqlite", "postgres"])
def proxy(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Proxy]:
    store = f"sqlite:///{tmp_path}/svc.db" if request.param == "sqlite" else postgres_dsn()
    made, close = make_proxy(store, tmp_path)
    try:
        yield made
    finally:
        close()


@pytest.fixture
def sqlite_proxy(tmp_path: Path) -> Iterator[Proxy]:
    made, close = make_proxy(f"sqlite:///{tmp_path}/svc.db", tmp_path)
    try:
        yield made
    finally:
        close()


def body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 512,
        "system": "You are a shop assistant.",
        "messages": messages,
        **extra,
    }


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assert_pairs_valid(fake: FakeAnthropic) -> None:
    """Every request the upstream got has whole tool pairs."""
    for raw in fake.bodies:
        sent = json.loads(raw)
        decoded = anthropic.decode_messages(sent["messages"]).messages
        assert problems(decoded) == [], sent["messages"]


# ---------------------------------------------------------------------- round trips


def test_a_request_goes_upstream_and_its_answer_comes_back_byte_for_byte(proxy: Proxy) -> None:
    sent = body([user("Where is order 4417?")], temperature=0.2, metadata={"user_id": "u1"})
    r = proxy.post(sent, session="s1", **{"anthropic-beta": "interleaved-thinking-2025-05-14"})
    assert r.status_code == 200, r.text
    (got,) = proxy.upstream.received
    assert r.content == proxy.upstream.answers[0]
    assert r.headers["request-id"] == "req_1"
    assert r.headers["content-type"] == "application/json"
    assert r.headers["x-ctxwise-session"] == "s1"
    assert "x-ctxwise-fail-open" not in r.headers
    # the provider's headers pass, ctxwise's stay
    assert got.url == f"{UPSTREAM}/v1/messages"
    assert got.headers["x-api-key"] == PROVIDER_KEY
    assert got.headers["anthropic-version"] == VERSION
    assert got.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert "x-ctxwise-key" not in got.headers and "x-ctxwise-session" not in got.headers
    # the client's fields kept, the Engine's system and messages sent
    forwarded = proxy.upstream.sent()
    assert forwarded["model"] == MODEL and forwarded["max_tokens"] == 512
    assert forwarded["temperature"] == 0.2 and forwarded["metadata"] == {"user_id": "u1"}
    assert forwarded["system"][0]["text"] == "You are a shop assistant."
    assert forwarded["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert forwarded["messages"][-1]["content"][-1]["text"] == "Where is order 4417?"
    # the answer joined the session, after the question
    roles = [(m["role"], m["content"][0]["text"]) for m in proxy.messages("s1")]
    assert roles == [("user", "Where is order 4417?"), ("assistant", "answer 1")]


def test_a_second_request_appends_only_what_is_new(proxy: Proxy) -> None:
    first = [user("Where is order 4417?")]
    assert proxy.post(body(first), session="s1").status_code == 200
    answer = {"role": "assistant", "content": [{"type": "text", "text": "answer 1"}]}
    r = proxy.post(body([*first, answer, user("And order 4418?")]), session="s1")
    assert r.status_code == 200, r.text
    texts = [m["content"][0]["text"] for m in proxy.messages("s1")]
    assert texts == ["Where is order 4417?", "answer 1", "And order 4418?", "answer 2"]
    assert len(proxy.traces("s1")) == 2


def test_a_stream_passes_through_and_its_message_is_recorded(proxy: Proxy) -> None:
    content = [
        {"type": "thinking", "thinking": "The user wants the order.", "signature": "sig-abc"},
        {"type": "text", "text": "Let me look that up."},
        {
            "type": "tool_use",
            "id": "toolu_01",
            "name": "lookup_order",
            "input": {"order_id": "4417"},
        },
    ]
    stream = sse(*stream_events(content))

    def answer(request: httpx.Request, data: dict[str, Any]) -> httpx.Response:
        assert data["stream"] is True
        return httpx.Response(
            200,
            content=stream,
            headers={"content-type": "text/event-stream", "request-id": "req_s"},
        )

    proxy.upstream.answer = answer
    tools = [
        {
            "name": "lookup_order",
            "description": "An order's status by its id.",
            "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        }
    ]
    question = [user("Where is order 4417?")]
    with proxy.client.stream(
        "POST",
        "/v1/messages",
        json=body(question, stream=True, tools=tools),
        headers=proxy.headers("s2"),
    ) as r:
        assert r.status_code == 200
        got = b"".join(r.iter_bytes())
    assert got == stream
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["x-ctxwise-session"] == "s2"
    assert proxy.upstream.sent()["tools"][0]["name"] == "lookup_order"
    recorded = proxy.messages("s2")[-1]
    assert recorded["role"] == "assistant"
    kinds = [b["type"] for b in recorded["content"]]
    assert kinds == ["thinking", "text", "tool_use"]
    assert recorded["content"][2]["input"] == {"order_id": "4417"}
    # the client sends the answer back with the tool's result: only those are new
    proxy.upstream.answer = None
    reply = {"role": "assistant", "content": content}
    result = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "Delivered on 2 May."}
        ],
    }
    r = proxy.post(body([*question, reply, result], tools=tools), session="s2")
    assert r.status_code == 200, r.text
    assert len(proxy.messages("s2")) == 4
    forwarded = proxy.upstream.sent()["messages"]
    assert forwarded[1]["content"][0]["signature"] == "sig-abc"
    assert forwarded[2]["content"][0]["tool_use_id"] == "toolu_01"
    assert_pairs_valid(proxy.upstream)
