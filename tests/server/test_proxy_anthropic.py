"""The Anthropic proxy (issue 31, item 2): ``POST /v1/messages`` through the Engine,
streaming and not, against a fake Messages API answering with the documented JSON
and event-stream shapes, on a real store (a SQLite file, or PostgreSQL when
CTXWISE_PG_DSN is set)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
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
from ctxwise.server.settings import ServeSettings

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

    def post(
        self, body: Any, session: str | None = None, path: str = "/v1/messages", **extra: str
    ) -> httpx.Response:
        return self.client.post(path, json=body, headers=self.headers(session, **extra))

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
        openai_upstream=UPSTREAM,
        max_body_bytes=settings.pop("max_body_bytes", 4 * 1024 * 1024),
        **settings,
    )
    app = create_app(cfg, keys=keys, transport=httpx.MockTransport(fake.handler))
    client = TestClient(app)
    client.__enter__()

    def close() -> None:
        client.__exit__(None, None, None)
        keys.close()
        if store.startswith("postgresql"):
            _drop_schema(tenant)

    return Proxy(client, fake, keys, tenant, key, root), close


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


def test_the_query_string_goes_upstream(sqlite_proxy: Proxy) -> None:
    r = sqlite_proxy.client.post(
        "/v1/messages?beta=true", json=body([user("hi")]), headers=sqlite_proxy.headers("q")
    )
    assert r.status_code == 200, r.text
    assert str(sqlite_proxy.upstream.received[0].url) == f"{UPSTREAM}/v1/messages?beta=true"


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


# ---------------------------------------------------------------------- sessions


def test_a_conversation_without_a_session_header_keeps_one_derived_session(proxy: Proxy) -> None:
    first = [user("Where is order 4417?")]
    r1 = proxy.post(body(first))
    assert r1.status_code == 200, r1.text
    session = r1.headers["x-ctxwise-session"]
    assert session.startswith("anthropic-")
    answer = {"role": "assistant", "content": [{"type": "text", "text": "answer 1"}]}
    r2 = proxy.post(body([*first, answer, user("Thanks. And 4418?")]))
    assert r2.headers["x-ctxwise-session"] == session
    assert len(proxy.messages(session)) == 4
    # another conversation (another first message, or another system text): another session
    r3 = proxy.post(body([user("Do you ship to Norway?")]))
    r4 = proxy.post({**body(first), "system": "You are a billing assistant."})
    names = {session, r3.headers["x-ctxwise-session"], r4.headers["x-ctxwise-session"]}
    assert len(names) == 3
    assert sorted(proxy.sessions()) == sorted(names)


def test_a_forked_conversation_goes_to_a_fork_session_not_merged(proxy: Proxy) -> None:
    # every answer is the same short text, as both branches of a fork may hold
    done = {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}
    proxy.upstream.answer = lambda request, data: httpx.Response(
        200, json=message_json(done["content"])
    )
    first = [user("Where is order 4417?")]
    assert proxy.post(body(first), session="main").status_code == 200
    assert proxy.post(body([*first, done, user("Cancel it.")]), session="main").status_code == 200
    before = proxy.messages("main")
    assert len(before) == 4
    # the user edits their second message: the history no longer holds "Cancel it."
    edited = [*first, done, user("Change its address instead.")]
    r = proxy.post(body(edited), session="main")
    assert r.status_code == 200, r.text
    fork = r.headers["x-ctxwise-session"]
    assert fork != "main" and fork.startswith("main~")
    assert proxy.messages("main") == before  # nothing merged into the session it left
    texts = [m["content"][0]["text"] for m in proxy.messages(fork)]
    assert texts == ["Where is order 4417?", "Done.", "Change its address instead.", "Done."]
    # the fork's next request continues the fork, though its last answer is one that
    # the session it left holds too
    r = proxy.post(body([*edited, done, user("Thanks.")]), session="main")
    assert r.headers["x-ctxwise-session"] == fork
    assert len(proxy.messages(fork)) == 6
    assert proxy.messages("main") == before
    # a conversation derived from its start forks the same way
    r = proxy.post(body(first))
    derived = r.headers["x-ctxwise-session"]
    assert proxy.post(body([*first, done, user("Cancel it.")])).status_code == 200
    r = proxy.post(body(edited))
    assert r.headers["x-ctxwise-session"].startswith(derived + "~")


def test_a_history_that_starts_again_under_the_same_name_is_a_fork(proxy: Proxy) -> None:
    """Claude Code's own compaction: the next request holds its summary alone, under
    the same x-ctxwise-session; it must neither be refused nor appended after the
    session's unanswered tool call."""
    call = {"type": "tool_use", "id": "toolu_r1", "name": "Read", "input": {"file_path": "a"}}
    proxy.upstream.answer = lambda request, data: httpx.Response(
        200, json=message_json([call], stop="tool_use")
    )
    assert proxy.post(body([user("Read a.")]), session="cc").status_code == 200
    before = proxy.messages("cc")
    summary = [user("This session is being continued from a previous conversation: …")]
    r = proxy.post(body(summary), session="cc")
    assert r.status_code == 200, r.text
    fork = r.headers["x-ctxwise-session"]
    assert fork.startswith("cc~") and proxy.messages("cc") == before
    assert [m["role"] for m in proxy.messages(fork)] == ["user", "assistant"]
    answered = [*summary, {"role": "assistant", "content": [call]}]
    result = {"type": "tool_result", "tool_use_id": "toolu_r1", "content": "a's text"}
    r = proxy.post(body([*answered, {"role": "user", "content": [result]}]), session="cc")
    assert r.status_code == 200 and r.headers["x-ctxwise-session"] == fork  # found again


def test_a_retry_after_an_upstream_error_sends_the_same_turn_again(sqlite_proxy: Proxy) -> None:
    proxy = sqlite_proxy
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    proxy.upstream.answer = lambda request, data: httpx.Response(529, json=overloaded)
    question = body([user("Where is order 4417?")])
    r = proxy.post(question, session="s")
    assert r.status_code == 529 and r.json() == overloaded
    assert [m["role"] for m in proxy.messages("s")] == ["user"]
    proxy.upstream.answer = None
    r = proxy.post(question, session="s")
    assert r.status_code == 200 and r.headers["x-ctxwise-session"] == "s"
    assert [m["role"] for m in proxy.messages("s")] == ["user", "assistant"]
    assert proxy.upstream.sent(0)["messages"] == proxy.upstream.sent(1)["messages"]


def test_a_bad_session_header_is_400_and_stores_nothing(sqlite_proxy: Proxy) -> None:
    r = sqlite_proxy.post(body([user("hi")]), session="s" * 201)
    assert r.status_code == 400
    assert r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert sqlite_proxy.upstream.received == [] and sqlite_proxy.sessions() == []


# ---------------------------------------------------------------------- usage


def test_the_answers_usage_calibrates_the_next_turn(proxy: Proxy) -> None:
    usage = {
        "input_tokens": 50,
        "cache_creation_input_tokens": 400,
        "cache_read_input_tokens": 0,
        "output_tokens": 9,
    }
    reply = message_json([{"type": "text", "text": "answer 1"}], usage=usage)
    proxy.upstream.answer = lambda request, data: httpx.Response(200, json=reply)
    first = [user("Where is order 4417?")]
    assert proxy.post(body(first), session="c").status_code == 200
    answer = {"role": "assistant", "content": [{"type": "text", "text": "answer 1"}]}
    assert proxy.post(body([*first, answer, user("And 4418?")]), session="c").status_code == 200
    first_trace, second = proxy.traces("c")
    calibration = second["calibration"]
    assert calibration["observed"] == 450  # input + cache writes + cache reads
    assert calibration["estimate"] == first_trace["tokens"]["total"]
    assert calibration["calls"] == 1


def test_a_streamed_answers_usage_calibrates_the_next_turn(sqlite_proxy: Proxy) -> None:
    proxy = sqlite_proxy
    stream = sse(*stream_events([{"type": "text", "text": "It shipped."}], usage_in=321))
    proxy.upstream.answer = lambda request, data: httpx.Response(
        200, content=stream, headers={"content-type": "text/event-stream"}
    )
    first = [user("Where is order 4417?")]
    r = proxy.post(body(first, stream=True), session="c")
    assert r.status_code == 200 and r.content == stream
    answer = {"role": "assistant", "content": [{"type": "text", "text": "It shipped."}]}
    proxy.upstream.answer = None
    assert proxy.post(body([*first, answer, user("Thanks.")]), session="c").status_code == 200
    assert proxy.traces("c")[1]["calibration"]["observed"] == 321
    assert len(proxy.messages("c")) == 4


# ---------------------------------------------------------------------- errors


def test_an_upstream_error_passes_through_byte_for_byte(proxy: Proxy) -> None:
    error = (
        b'{"type":"error","error":{"type":"invalid_request_error",'
        b'"message":"max_tokens: 999999 > 64000, the maximum"},"request_id":"req_x"}'
    )
    proxy.upstream.answer = lambda request, data: httpx.Response(
        400, content=error, headers={"content-type": "application/json", "request-id": "req_x"}
    )
    r = proxy.post(body([user("hi")], max_tokens=999999), session="e")
    assert r.status_code == 400
    assert r.content == error
    assert r.headers["request-id"] == "req_x"
    assert r.headers["x-ctxwise-session"] == "e"
    assert [m["role"] for m in proxy.messages("e")] == ["user"]  # no answer recorded


def test_an_upstream_error_on_a_stream_passes_through(sqlite_proxy: Proxy) -> None:
    error = b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}'
    sqlite_proxy.upstream.answer = lambda request, data: httpx.Response(
        429, content=error, headers={"content-type": "application/json", "retry-after": "7"}
    )
    r = sqlite_proxy.post(body([user("hi")], stream=True), session="e")
    assert r.status_code == 429 and r.content == error and r.headers["retry-after"] == "7"


@pytest.mark.parametrize(
    ("failure", "status", "kind"),
    [
        (httpx.ReadTimeout("timed out"), 504, "timeout_error"),
        (httpx.ConnectTimeout("timed out"), 504, "timeout_error"),
        (httpx.ConnectError("refused"), 502, "api_error"),
    ],
)
def test_an_upstream_that_fails_is_the_apis_error_shape(
    sqlite_proxy: Proxy, failure: Exception, status: int, kind: str
) -> None:
    def fail(request: httpx.Request, data: dict[str, Any]) -> httpx.Response:
        raise failure

    sqlite_proxy.upstream.answer = fail
    r = sqlite_proxy.post(body([user("hi")]), session="t")
    assert r.status_code == status
    assert r.json()["type"] == "error"
    assert r.json()["error"]["type"] == kind
    assert r.headers["x-ctxwise-session"] == "t"


def test_a_stream_cut_by_an_upstream_timeout_ends_with_an_error_event(
    sqlite_proxy: Proxy,
) -> None:
    proxy = sqlite_proxy
    events = stream_events([{"type": "text", "text": "It shipped."}])
    head = sse(*events[:3])

    async def cut() -> Any:
        yield head
        raise httpx.ReadTimeout("no more bytes")

    proxy.upstream.answer = lambda request, data: httpx.Response(
        200, content=cut(), headers={"content-type": "text/event-stream"}
    )
    r = proxy.post(body([user("hi")], stream=True), session="cut")
    assert r.status_code == 200
    assert r.content.startswith(head)
    tail = r.content[len(head) :].decode()
    assert tail.startswith("event: error\ndata: ")
    error = json.loads(tail.split("data: ", 1)[1])
    assert error == {
        "type": "error",
        "error": {"type": "timeout_error", "message": "the upstream stopped streaming (timeout)"},
    }
    assert [m["role"] for m in proxy.messages("cut")] == ["user"]  # not recorded


def test_an_error_event_in_the_stream_records_nothing(sqlite_proxy: Proxy) -> None:
    events = stream_events([{"type": "text", "text": "It shipped."}])
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    stream = sse(*events[:3], overloaded)
    sqlite_proxy.upstream.answer = lambda request, data: httpx.Response(
        200, content=stream, headers={"content-type": "text/event-stream"}
    )
    r = sqlite_proxy.post(body([user("hi")], stream=True), session="x")
    assert r.content == stream
    assert [m["role"] for m in sqlite_proxy.messages("x")] == ["user"]


def test_ctxwise_failing_forwards_the_original_request_unchanged(
    proxy: Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxwise.engine import Engine

    def broken(self: Engine, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the store went away\nhalfway")

    monkeypatch.setattr(Engine, "turn", broken)
    first = [user("Where is order 4417?")]
    raw = json.dumps(body(first, temperature=0.5)).encode()
    headers = {**proxy.headers("f"), "content-type": "application/json"}
    r = proxy.client.post("/v1/messages", content=raw, headers=headers)
    assert r.status_code == 200, r.text
    assert r.content == proxy.upstream.answers[0]
    assert proxy.upstream.bodies == [raw]  # byte for byte what the client sent
    assert proxy.upstream.received[0].headers["x-api-key"] == PROVIDER_KEY
    assert r.headers["x-ctxwise-fail-open"] == "RuntimeError: the store went away halfway"
    assert r.headers["x-ctxwise-session"] == "f"
    assert proxy.messages("f") == []  # no message recorded: only the note of the failure
    # ctxwise back: the next request brings the session up to date
    monkeypatch.undo()
    answer = {"role": "assistant", "content": [{"type": "text", "text": "answer 1"}]}
    r = proxy.post(body([*first, answer, user("And 4418?")]), session="f")
    assert "x-ctxwise-fail-open" not in r.headers
    texts = [m["content"][0]["text"] for m in proxy.messages("f")]
    assert texts == ["Where is order 4417?", "answer 1", "And 4418?", "answer 2"]
    # and its turn's trace says the request before it failed open, and why
    traces = proxy.client.get("/v1/sessions/f/traces", headers=proxy.headers("f")).json()
    noted = [t["fail_open"] for t in traces["traces"]]
    assert noted == [
        [{"route": "/v1/messages", "reason": "RuntimeError: the store went away halfway"}]
    ]


@pytest.mark.parametrize(
    "bad",
    [
        {"model": MODEL, "max_tokens": 10},  # no messages
        {"model": MODEL, "max_tokens": 10, "messages": "hi"},
        {"model": MODEL, "max_tokens": 10, "messages": []},
        {"max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]},
        {"model": MODEL, "max_tokens": 0, "messages": [{"role": "user", "content": "hi"}]},
        {"model": MODEL, "max_tokens": 10, "messages": [{"role": "system", "content": "hi"}]},
        {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": 5}]},
        {
            "model": MODEL,
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}],
            "system": 3,
        },
        {
            "model": MODEL,
            "max_tokens": 10,
            "messages": [{"role": "user", "content": [{"type": "tool_result"}]}],
        },
        [1, 2],
    ],
)
def test_a_malformed_request_is_the_apis_400_and_stores_nothing(proxy: Proxy, bad: Any) -> None:
    r = proxy.post(bad, session="m")
    assert r.status_code == 400, r.text
    assert r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert proxy.upstream.received == []
    assert proxy.sessions() == []


def test_unpaired_tool_calls_are_the_apis_400_and_store_nothing(sqlite_proxy: Proxy) -> None:
    result = {"type": "tool_result", "tool_use_id": "toolu_nowhere", "content": "done"}
    r = sqlite_proxy.post(body([user("hi"), {"role": "user", "content": [result]}]), session="p")
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert sqlite_proxy.upstream.received == [] and sqlite_proxy.sessions() == []


def test_invalid_json_is_the_apis_400(sqlite_proxy: Proxy) -> None:
    headers = {**sqlite_proxy.headers("j"), "content-type": "application/json"}
    r = sqlite_proxy.client.post("/v1/messages", content=b"{not json", headers=headers)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


def test_a_missing_or_revoked_key_is_401_in_the_apis_shape(proxy: Proxy) -> None:
    question = body([user("hi")])
    r = proxy.client.post("/v1/messages", json=question, headers={"x-api-key": PROVIDER_KEY})
    assert r.status_code == 401
    assert r.json() == {
        "type": "error",
        "error": {
            "type": "authentication_error",
            "message": "no ctxwise API key: send it as the x-ctxwise-key header",
        },
    }
    (info,) = [k for k in proxy.keys.list(proxy.tenant)]
    proxy.keys.revoke(info.key_id)
    r = proxy.post(question)
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    r = proxy.client.post(
        "/v1/messages/count_tokens", json=question, headers={"x-ctxwise-key": proxy.key}
    )
    assert r.status_code == 401
    assert proxy.upstream.received == []


def test_a_body_over_the_limit_is_413_in_the_apis_shape(tmp_path: Path) -> None:
    made, close = make_proxy(f"sqlite:///{tmp_path}/svc.db", tmp_path, max_body_bytes=4096)
    try:
        r = made.post(body([user("x" * 5000)]), session="big")
        assert r.status_code == 413
        assert r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "request_too_large"
        assert made.upstream.received == [] and made.sessions() == []
    finally:
        close()


# ---------------------------------------------------------------------- secrets


def test_the_provider_key_is_never_stored(proxy: Proxy) -> None:
    first = [user("Where is order 4417?")]
    assert proxy.post(body(first), session="k").status_code == 200
    stream = sse(*stream_events([{"type": "text", "text": "It shipped."}]))
    proxy.upstream.answer = lambda request, data: httpx.Response(
        200, content=stream, headers={"content-type": "text/event-stream"}
    )
    answer = {"role": "assistant", "content": [{"type": "text", "text": "answer 1"}]}
    bearer = {"authorization": f"Bearer {PROVIDER_KEY}"}
    r = proxy.post(body([*first, answer, user("And 4418?")], stream=True), session="k", **bearer)
    assert r.status_code == 200
    assert proxy.upstream.received[1].headers["authorization"] == f"Bearer {PROVIDER_KEY}"
    secret = PROVIDER_KEY.encode()
    assert secret not in json.dumps(proxy.traces("k")).encode()
    assert secret not in json.dumps(proxy.messages("k")).encode()
    files = [p for p in proxy.root.rglob("*") if p.is_file()]
    if proxy.keys.url.startswith("sqlite"):
        assert files, "the SQLite store's files"
    for path in files:
        assert secret not in path.read_bytes(), path
    if not proxy.keys.url.startswith("sqlite"):
        import psycopg

        with psycopg.connect(os.environ["CTXWISE_PG_DSN"]) as conn:
            rows = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (f"ctxwise_t_{proxy.tenant}",),
            ).fetchall()
            for (table,) in rows:
                schema = f"ctxwise_t_{proxy.tenant}"
                dump = conn.execute(
                    f"SELECT coalesce(string_agg(t::text, chr(10)), '') FROM {schema}.\"{table}\" t"
                ).fetchone()
                assert dump is not None and PROVIDER_KEY not in dump[0], table


# ---------------------------------------------------------------------- count_tokens


def test_count_tokens_passes_through_unchanged(proxy: Proxy) -> None:
    counted = b'{"input_tokens":2095}'
    proxy.upstream.answer = lambda request, data: httpx.Response(
        200, content=counted, headers={"content-type": "application/json"}
    )
    raw = json.dumps(body([user("How many tokens is this?")])).encode()
    headers = {**proxy.headers("ct"), "content-type": "application/json"}
    r = proxy.client.post("/v1/messages/count_tokens", content=raw, headers=headers)
    assert r.status_code == 200 and r.content == counted
    (got,) = proxy.upstream.received
    assert got.url == f"{UPSTREAM}/v1/messages/count_tokens"
    assert got.content == raw and got.headers["x-api-key"] == PROVIDER_KEY
    assert "x-ctxwise-key" not in got.headers
    assert proxy.sessions() == []  # a count is no turn


# ---------------------------------------------------------------------- client drops


def test_a_client_that_drops_a_stream_halfway_records_nothing(sqlite_proxy: Proxy) -> None:
    """The client goes after the first event: the upstream's stream is closed and the
    turn's answer is not recorded (the session ends with the question)."""
    import anyio

    proxy = sqlite_proxy
    events = stream_events([{"type": "text", "text": "It shipped on 2 May."}])
    first_event = sse(events[0])
    closed: list[bool] = []
    never = anyio.Event()

    async def slow() -> Any:
        try:
            yield first_event
            await never.wait()  # the rest never comes before the client goes
            yield sse(*events[1:])
        finally:
            closed.append(True)

    proxy.upstream.answer = lambda request, data: httpx.Response(
        200, content=slow(), headers={"content-type": "text/event-stream"}
    )
    raw = json.dumps(body([user("Where is order 4417?")], stream=True)).encode()
    headers = [
        (k.encode(), v.encode())
        for k, v in {**proxy.headers("drop"), "content-type": "application/json"}.items()
    ]
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/messages",
        "raw_path": b"/v1/messages",
        "query_string": b"",
        "root_path": "",
        "headers": [*headers, (b"content-length", str(len(raw)).encode())],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }
    sent: list[dict[str, Any]] = []
    got_body = anyio.Event()
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await got_body.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and message.get("body"):
            got_body.set()

    async def run() -> None:
        await proxy.client.app(scope, receive, send)  # type: ignore[arg-type]

    proxy.client.portal.call(run)  # type: ignore[union-attr]
    assert sent[0]["status"] == 200
    bodies = [m["body"] for m in sent if m["type"] == "http.response.body" and m.get("body")]
    assert bodies == [first_event]
    assert closed == [True]  # the upstream's stream was closed
    assert [m["role"] for m in proxy.messages("drop")] == ["user"]


# ---------------------------------------------------------------------- a real session


DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SUBAGENT = DATA / "transcripts" / "claude_code" / "subagent.jsonl"


@pytest.mark.skipif(
    not SUBAGENT.exists(), reason="needs ../shared/data (the Claude Code transcripts)"
)
def test_a_claude_code_session_replayed_through_the_proxy_is_edited_under_budget(
    tmp_path: Path,
) -> None:
    """A real Claude Code session (a subagent's, 27 messages with thinking, tool calls
    and results), each model call replayed through the proxy as Claude Code sends it
    (the whole history so far), the upstream answering with the call's recorded reply:
    one session serves every call, what is forwarded stays under the budget with its
    tool pairs whole, and the Engine edits the history once it no longer fits."""
    from ctxwise.formats.claude_code import read_claude_code

    transcript = read_claude_code(SUBAGENT.read_text(encoding="utf-8"))
    system, encoded = anthropic.encode_messages(transcript)
    assert system is None
    toml = tmp_path / "ctxwise.toml"
    toml.write_text('budget = 6000\ncounter = "char"\n', encoding="utf-8")
    made, close = make_proxy(f"sqlite:///{tmp_path}/svc.db", tmp_path, config=toml)
    replies = iter([m for m in encoded if m["role"] == "assistant"])

    def recorded(request: httpx.Request, data: dict[str, Any]) -> httpx.Response:
        reply = next(replies)
        usage = {"input_tokens": len(request.content) // 4, "output_tokens": 50}
        return httpx.Response(200, json=message_json(reply["content"], usage=usage))

    made.upstream.answer = recorded
    try:
        served = set()
        sizes: list[tuple[int, int]] = []
        calls = 0
        for i, message in enumerate(encoded):
            if message["role"] != "assistant":
                continue
            sent = body(encoded[:i], system="You are a Claude Code subagent.")
            r = made.post(sent)
            assert r.status_code == 200, r.text
            assert "x-ctxwise-fail-open" not in r.headers
            served.add(r.headers["x-ctxwise-session"])
            sizes.append((len(json.dumps(sent)), len(made.upstream.bodies[-1])))
            calls += 1
        assert calls == 12
        (session,) = served
        traces = made.traces(session)
        assert len(traces) == calls
        for trace in traces:
            assert trace["tokens"]["total"] <= trace["tokens"]["available"], trace["tokens"]
        edited = [t["turn"] for t in traces if t["compacted"] or t["cleared"]]
        assert edited, "the history never crossed the budget"
        client_size, forwarded_size = sizes[-1]
        assert forwarded_size < client_size
        assert_pairs_valid(made.upstream)
        assert sum(1 for t in traces if t["calibration"]["observed"] is not None) == calls - 1
    finally:
        close()


# ---------------------------------------------------------------------- recording races


def test_an_answer_the_next_request_brought_first_is_not_recorded_twice(tmp_path: Path) -> None:
    """An agent that runs its tools at once can send its next request before the
    proxy recorded the answer to the last one: that turn appends the answer as the
    client sent it back, and the late record adds nothing."""
    from ctxwise import Engine, EngineConfig
    from ctxwise.server.proxy._anthropic import decode_history
    from ctxwise.server.proxy._turns import prepare, record

    engine = Engine(EngineConfig(store=f"sqlite:///{tmp_path}/race.db"))
    try:
        first = decode_history([user("Where is order 4417?")])
        prepare(engine, "r", first, system=None, tools=None)
        reply = message_json([{"type": "text", "text": "It shipped."}])
        sent_back = {"role": "assistant", "content": reply["content"]}
        later = decode_history([user("Where is order 4417?"), sent_back, user("Thanks.")])
        prepare(engine, "r", later, system=None, tools=None)  # the next request, first
        assert record(engine, "r", first, reply) is None  # the late record
        texts = [m.text for m in engine.session_messages("r")]
        assert texts == ["Where is order 4417?", "It shipped.", "Thanks."]
        # and in order, the answer is recorded once, with its usage
        prepare(engine, "r2", first, system=None, tools=None)
        assert record(engine, "r2", first, reply) is not None
        assert record(engine, "r2", first, reply) is None  # sent twice: once
        assert [m.role for m in engine.session_messages("r2")] == ["user", "assistant"]
    finally:
        engine.close()


def _marks(value: Any) -> int:
    """How many cache_control breakpoints a request body holds."""
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(_marks(v) for v in value.values())
    if isinstance(value, list):
        return sum(_marks(v) for v in value)
    return 0


def test_breakpoints_a_client_moves_from_request_to_request_change_nothing(
    sqlite_proxy: Proxy,
) -> None:
    """As Claude Code sends them: system blocks and the last tool marked, and the
    mark on the latest message moving on with each request. The conversation stays
    one session, and what goes upstream holds the Engine's breakpoints and the
    tools' (never more than the API's four)."""
    proxy = sqlite_proxy
    mark = {"type": "ephemeral"}
    system = [
        {"type": "text", "text": "You are Claude Code.", "cache_control": mark},
        {"type": "text", "text": "Work in /repo.", "cache_control": mark},
    ]
    tools = [
        {"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}},
        {
            "name": "Bash",
            "description": "Run a command.",
            "input_schema": {"type": "object"},
            "cache_control": mark,
        },
    ]

    def marked(text: str) -> dict[str, Any]:
        return {"role": "user", "content": [{"type": "text", "text": text, "cache_control": mark}]}

    def sent(messages: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "model": MODEL,
            "max_tokens": 512,
            "system": system,
            "tools": tools,
            "messages": messages,
        }

    r = proxy.post(sent([marked("Fix the failing test.")]), **{"anthropic-beta": "x"})
    session = r.headers["x-ctxwise-session"]
    plain = {"role": "user", "content": [{"type": "text", "text": "Fix the failing test."}]}
    answer = {
        "role": "assistant",
        "content": [{"type": "text", "text": "answer 1", "cache_control": mark}],
    }
    r = proxy.post(sent([plain, answer, marked("Run it again.")]))
    assert r.headers["x-ctxwise-session"] == session
    assert len(proxy.messages(session)) == 4
    for i in range(2):
        forwarded = proxy.upstream.sent(i)
        assert 1 <= _marks(forwarded) <= 4
        assert forwarded["tools"] == tools
        assert forwarded["system"][0]["text"] == "You are Claude Code.\n\nWork in /repo."
