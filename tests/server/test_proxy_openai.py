"""The OpenAI proxy (issue 31, item 2): ``POST /v1/chat/completions`` through the
Engine, streaming and not, against a fake Chat Completions API answering with the
documented ``chat.completion`` and ``chat.completion.chunk`` shapes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ctxwise.formats import openai
from ctxwise.pairing import problems
from tests._stores import postgres_dsn
from tests.server.test_proxy_anthropic import PROVIDER_KEY, UPSTREAM, Proxy, make_proxy

PATH = "/v1/chat/completions"
MODEL = "gpt-4.1"


@pytest.fixture(params=["sqlite", "postgres"])
def proxy(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Proxy]:
    store = f"sqlite:///{tmp_path}/svc.db" if request.param == "sqlite" else postgres_dsn()
    made, close = make_proxy(store, tmp_path)
    made.upstream.answer = completion_answer
    try:
        yield made
    finally:
        close()


@pytest.fixture
def sqlite_proxy(tmp_path: Path) -> Iterator[Proxy]:
    made, close = make_proxy(f"sqlite:///{tmp_path}/svc.db", tmp_path)
    made.upstream.answer = completion_answer
    try:
        yield made
    finally:
        close()


def completion(
    message: dict[str, Any], *, prompt_tokens: int = 90, finish: str = "stop"
) -> dict[str, Any]:
    """A Chat Completions response body, as the API documents it."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": MODEL,
        "system_fingerprint": "fp_1",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 7,
            "total_tokens": prompt_tokens + 7,
        },
    }


def completion_answer(request: httpx.Request, data: dict[str, Any]) -> httpx.Response:
    text = f"answer {len(data['messages'])}"
    return httpx.Response(
        200,
        json=completion({"role": "assistant", "content": text, "refusal": None}),
        headers={"x-request-id": "req_o"},
    )


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-2",
        "object": "chat.completion.chunk",
        "created": 1_700_000_001,
        "model": MODEL,
        "system_fingerprint": "fp_1",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
    }


def data_lines(*chunks: dict[str, Any], done: bool = True) -> bytes:
    out = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return out + (b"data: [DONE]\n\n" if done else b"")


def tool_call_stream(prompt_tokens: int = 222) -> list[dict[str, Any]]:
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": ""},
    }
    usage_chunk = {
        **chunk({}),
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 9,
            "total_tokens": prompt_tokens + 9,
        },
    }
    return [
        chunk({"role": "assistant", "content": None, "refusal": None}),
        chunk({"tool_calls": [call]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"order_'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'id": "4417"}'}}]}),
        chunk({}, finish="tool_calls"),
        usage_chunk,
    ]


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "An order's status by its id.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]


def body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    system = {"role": "system", "content": "You are a shop assistant."}
    return {"model": MODEL, "max_tokens": 300, "messages": [system, *messages], **extra}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def post(proxy: Proxy, sent: Any, session: str | None = None) -> httpx.Response:
    return proxy.post(sent, session, path=PATH, authorization=f"Bearer {PROVIDER_KEY}")


def test_a_completion_goes_upstream_and_comes_back_byte_for_byte(proxy: Proxy) -> None:
    r = post(proxy, body([user("Where is order 4417?")], temperature=0.1))
    assert r.status_code == 200, r.text
    assert r.content == proxy.upstream.answers[0]
    assert r.headers["x-request-id"] == "req_o"
    session = r.headers["x-ctxwise-session"]
    assert session.startswith("openai-")
    (got,) = proxy.upstream.received
    assert str(got.url) == f"{UPSTREAM}{PATH}"
    assert got.headers["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert "x-ctxwise-key" not in got.headers
    sent = proxy.upstream.sent()
    assert sent["model"] == MODEL and sent["max_tokens"] == 300 and sent["temperature"] == 0.1
    assert "max_completion_tokens" not in sent
    assert sent["messages"][0] == {"role": "system", "content": "You are a shop assistant."}
    assert sent["messages"][-1] == user("Where is order 4417?")
    # the answer joined the session; the next request appends only what is new
    answer = {"role": "assistant", "content": "answer 2"}
    r = post(proxy, body([user("Where is order 4417?"), answer, user("Thanks.")]))
    assert r.headers["x-ctxwise-session"] == session
    traces = proxy.traces(session)
    assert len(traces) == 2 and traces[1]["calibration"]["observed"] == 90
    assert len(proxy.messages(session)) == 4


def test_a_streamed_tool_call_is_recorded_and_its_usage_learned(proxy: Proxy) -> None:
    stream = data_lines(*tool_call_stream())
    proxy.upstream.answer = lambda request, data: httpx.Response(
        200, content=stream, headers={"content-type": "text/event-stream"}
    )
    question = [user("Where is order 4417?")]
    sent = body(question, tools=TOOLS, stream=True, stream_options={"include_usage": True})
    r = post(proxy, sent, session="o1")
    assert r.status_code == 200 and r.content == stream
    assert proxy.upstream.sent()["stream_options"] == {"include_usage": True}
    assert proxy.upstream.sent()["tools"] == TOOLS
    recorded = proxy.messages("o1")[-1]
    assert recorded["role"] == "assistant"
    (call,) = [b for b in recorded["content"] if b["type"] == "tool_use"]
    assert call["id"] == "call_1" and call["input"] == {"order_id": "4417"}
    # the client sends the call back with its result: only those are new
    proxy.upstream.answer = completion_answer
    reply = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup_order", "arguments": '{"order_id": "4417"}'},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": "call_1", "content": "Delivered on 2 May."}
    r = post(proxy, body([*question, reply, result], tools=TOOLS), session="o1")
    assert r.status_code == 200, r.text
    assert r.headers["x-ctxwise-session"] == "o1"
    assert len(proxy.messages("o1")) == 4
    assert proxy.traces("o1")[1]["calibration"]["observed"] == 222
    for raw in proxy.upstream.bodies:
        decoded = openai.decode_messages(json.loads(raw)["messages"]).messages
        assert problems(decoded) == []


def test_a_stream_without_usage_is_recorded_without_it(sqlite_proxy: Proxy) -> None:
    stream = data_lines(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "It "}),
        chunk({"content": "shipped."}),
        chunk({}, finish="stop"),
    )
    sqlite_proxy.upstream.answer = lambda request, data: httpx.Response(
        200, content=stream, headers={"content-type": "text/event-stream"}
    )
    r = post(sqlite_proxy, body([user("hi")], stream=True), session="o2")
    assert r.content == stream
    last = sqlite_proxy.messages("o2")[-1]
    assert last["role"] == "assistant" and last["content"][0]["text"] == "It shipped."


def test_a_stream_the_upstream_breaks_off_ends_with_an_error_chunk(sqlite_proxy: Proxy) -> None:
    head = data_lines(chunk({"role": "assistant", "content": "It "}), done=False)

    async def cut() -> Any:
        yield head
        raise httpx.ReadTimeout("no more bytes")

    sqlite_proxy.upstream.answer = lambda request, data: httpx.Response(
        200, content=cut(), headers={"content-type": "text/event-stream"}
    )
    r = post(sqlite_proxy, body([user("hi")], stream=True), session="o3")
    assert r.content.startswith(head)
    tail = r.content[len(head) :]
    assert tail.startswith(b"data: ")
    assert json.loads(tail[6:])["error"]["type"] == "timeout"
    assert [m["role"] for m in sqlite_proxy.messages("o3")] == ["user"]


@pytest.mark.parametrize(
    "bad",
    [
        {"model": MODEL},
        {"model": MODEL, "messages": []},
        {"model": MODEL, "messages": [{"role": "robot", "content": "hi"}]},
        {"messages": [{"role": "user", "content": "hi"}]},
        {"model": MODEL, "messages": [{"role": "tool", "content": "orphan"}]},
        {"model": MODEL, "messages": [{"role": "system", "content": "only a system text"}]},
    ],
)
def test_a_malformed_request_is_the_apis_400_and_stores_nothing(proxy: Proxy, bad: Any) -> None:
    r = post(proxy, bad, session="m")
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and set(error) == {
        "message",
        "type",
        "param",
        "code",
    }
    assert proxy.upstream.received == [] and proxy.sessions() == []


def test_no_key_is_401_in_the_apis_shape(sqlite_proxy: Proxy) -> None:
    r = sqlite_proxy.client.post(
        PATH, json=body([user("hi")]), headers={"authorization": "Bearer sk-x"}
    )
    assert r.status_code == 401
    assert r.json()["error"]["message"].startswith("no ctxwise API key")
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}


def test_an_upstream_timeout_is_504_and_an_error_passes_through(sqlite_proxy: Proxy) -> None:
    def hang(request: httpx.Request, data: dict[str, Any]) -> httpx.Response:
        raise httpx.ReadTimeout("timed out")

    sqlite_proxy.upstream.answer = hang
    r = post(sqlite_proxy, body([user("hi")]), session="t")
    assert r.status_code == 504
    assert r.json()["error"]["type"] == "timeout"
    error = (
        b'{"error":{"message":"Incorrect API key provided","type":"invalid_request_error",'
        b'"param":null,"code":"invalid_api_key"}}'
    )
    sqlite_proxy.upstream.answer = lambda request, data: httpx.Response(
        401, content=error, headers={"content-type": "application/json"}
    )
    r = post(sqlite_proxy, body([user("hi")]), session="t")
    assert r.status_code == 401 and r.content == error


def test_ctxwise_failing_forwards_the_original_request(
    sqlite_proxy: Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxwise.engine import Engine

    def broken(self: Engine, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no store")

    monkeypatch.setattr(Engine, "turn", broken)
    raw = json.dumps(body([user("hi")])).encode()
    headers = {**sqlite_proxy.headers("f"), "content-type": "application/json"}
    r = sqlite_proxy.client.post(PATH, content=raw, headers=headers)
    assert r.status_code == 200
    assert sqlite_proxy.upstream.bodies == [raw]
    assert r.headers["x-ctxwise-fail-open"] == "RuntimeError: no store"
    assert sqlite_proxy.messages("f") == []  # no message recorded, only the failure noted


def test_the_openai_engines_are_made_once_and_closed_with_the_app(tmp_path: Path) -> None:
    made, close = make_proxy(f"sqlite:///{tmp_path}/svc.db", tmp_path)
    made.upstream.answer = completion_answer
    state = made.client.app.state  # type: ignore[attr-defined]
    try:
        assert post(made, body([user("hi")]), session="a").status_code == 200
        assert post(made, body([user("hi")]), session="b").status_code == 200
        (pool,) = state.proxy_pools.values()
        assert pool.config.render == "openai" and state.pool.config.render == "anthropic"
        assert pool._tenants  # the tenant's Engines, made on first use
    finally:
        close()
    assert state.proxy_pools == {}
    assert pool._closed
