"""The OpenAI Responses proxy (issue 31, item 2): ``POST /v1/responses`` through the
Engine, streaming and not, against a fake Responses API answering with the documented
``response`` object and its typed events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ctxwise.formats import responses
from ctxwise.pairing import problems
from tests._stores import postgres_dsn
from tests.server.test_proxy_anthropic import PROVIDER_KEY, UPSTREAM, Proxy, make_proxy

PATH = "/v1/responses"
MODEL = "gpt-4.1"


def response(output: list[dict[str, Any]], input_tokens: int = 80) -> dict[str, Any]:
    """A Responses API response body, as the API documents it."""
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": MODEL,
        "output": output,
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + 5,
        },
    }


def said(text: str, ident: str = "msg_1") -> dict[str, Any]:
    return {
        "type": "message",
        "id": ident,
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def answer_text(request: httpx.Request, data: dict[str, Any]) -> httpx.Response:
    return httpx.Response(200, json=response([said("It shipped.")]))


@pytest.fixture(params=["sqlite", "postgres"])
def proxy(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Proxy]:
    store = f"sqlite:///{tmp_path}/svc.db" if request.param == "sqlite" else postgres_dsn()
    made, close = make_proxy(store, tmp_path)
    made.upstream.answer = answer_text
    try:
        yield made
    finally:
        close()


def post(proxy: Proxy, sent: Any, session: str | None = None) -> httpx.Response:
    return proxy.post(sent, session, path=PATH, authorization=f"Bearer {PROVIDER_KEY}")


def user_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_a_response_round_trip_keeps_one_session_and_learns_usage(proxy: Proxy) -> None:
    sent = {"model": MODEL, "instructions": "You are a shop assistant.", "input": "Where is 4417?"}
    r = post(proxy, sent)
    assert r.status_code == 200, r.text
    assert r.content == proxy.upstream.answers[0]
    session = r.headers["x-ctxwise-session"]
    assert session.startswith("responses-")
    (got,) = proxy.upstream.received
    assert str(got.url) == f"{UPSTREAM}{PATH}"
    forwarded = proxy.upstream.sent()
    assert forwarded["instructions"] == "You are a shop assistant."
    assert forwarded["model"] == MODEL
    assert [i.get("role") for i in forwarded["input"]] == ["user"]
    # the client's next request: its history as items, the answer as it came back
    history = [user_item("Where is 4417?"), said("It shipped."), user_item("Thanks.")]
    sent = {"model": MODEL, "instructions": "You are a shop assistant.", "input": history}
    r = post(proxy, sent)
    assert r.headers["x-ctxwise-session"] == session
    assert len(proxy.messages(session)) == 4
    assert proxy.traces(session)[1]["calibration"]["observed"] == 80
    forwarded = proxy.upstream.sent()
    assert forwarded["input"][1]["id"] == "msg_1"  # the item as the client sent it


def test_a_streamed_function_call_is_recorded(proxy: Proxy) -> None:
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "lookup_order",
        "arguments": '{"order_id": "4417"}',
        "status": "completed",
    }
    final = response([call], input_tokens=140)
    events = [
        {"type": "response.created", "response": {**final, "status": "in_progress", "output": []}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**call, "arguments": ""},
        },
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "delta": call["arguments"],
        },
        {"type": "response.output_item.done", "output_index": 0, "item": call},
        {"type": "response.completed", "response": final},
    ]
    stream = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    proxy.upstream.answer = lambda request, data: httpx.Response(
        200, content=stream, headers={"content-type": "text/event-stream"}
    )
    tools = [{"type": "function", "name": "lookup_order", "parameters": {"type": "object"}}]
    question = [user_item("Where is 4417?")]
    r = post(proxy, {"model": MODEL, "input": question, "tools": tools, "stream": True}, "r1")
    assert r.status_code == 200 and r.content == stream
    assert proxy.upstream.sent()["tools"] == tools
    recorded = proxy.messages("r1")[-1]
    assert recorded["content"][0]["type"] == "tool_use"
    proxy.upstream.answer = answer_text
    result = {"type": "function_call_output", "call_id": "call_1", "output": "Delivered."}
    r = post(proxy, {"model": MODEL, "input": [*question, call, result], "tools": tools}, "r1")
    assert r.status_code == 200, r.text
    assert len(proxy.messages("r1")) == 4
    assert proxy.traces("r1")[1]["calibration"]["observed"] == 140
    for raw in proxy.upstream.bodies:
        decoded = responses.to_messages(json.loads(raw)["input"])
        assert problems(decoded) == []


def test_a_conversation_kept_by_the_provider_passes_through(proxy: Proxy) -> None:
    raw = json.dumps({"model": MODEL, "input": "And 4418?", "previous_response_id": "resp_1"})
    headers = {**proxy.headers("kept"), "content-type": "application/json"}
    r = proxy.client.post(PATH, content=raw.encode(), headers=headers)
    assert r.status_code == 200
    assert proxy.upstream.bodies == [raw.encode()]
    assert "previous_response_id" in r.headers["x-ctxwise-passthrough"]
    assert proxy.sessions() == []


@pytest.mark.parametrize(
    "bad",
    [
        {"model": MODEL},
        {"model": MODEL, "input": []},
        {"model": MODEL, "input": ""},
        {"model": MODEL, "input": 5},
        {"input": "hi"},
        {"model": MODEL, "input": [{"type": "function_call_output", "output": "x"}]},
    ],
)
def test_a_malformed_request_is_the_apis_400_and_stores_nothing(proxy: Proxy, bad: Any) -> None:
    r = post(proxy, bad, session="m")
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert proxy.upstream.received == [] and proxy.sessions() == []
