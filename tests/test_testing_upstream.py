"""The loopback fake upstream (ctxwise.testing.upstream) speaks the providers' shapes
well enough for their own SDKs: the official anthropic and openai clients, pointed at
it, parse every answer, streamed or not."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import pytest

from ctxwise.testing.upstream import FakeUpstream, Reply

anthropic = pytest.importorskip("anthropic", reason="needs the anthropic extra")
openai = pytest.importorskip("openai", reason="needs the openai extra")


def tool_then_text(body: Mapping[str, Any]) -> Reply:
    if len(body.get("messages", body.get("input", [None]))) == 1 or isinstance(
        body.get("input"), str
    ):
        return [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"order": "4411"}},
        ]
    return [{"type": "text", "text": "Order 4411 shipped."}]


def test_the_anthropic_sdk_reads_its_messages_and_streams() -> None:
    with FakeUpstream(tool_then_text) as fake:
        client = anthropic.Anthropic(base_url=fake.url, api_key="sk-test", max_retries=0)
        asked = [{"role": "user", "content": "Where is order 4411?"}]
        plain = client.messages.create(model="claude-x", max_tokens=100, messages=asked)
        assert [b.type for b in plain.content] == ["text", "tool_use"]
        assert plain.content[1].input == {"order": "4411"} and plain.stop_reason == "tool_use"
        assert plain.usage.input_tokens > 0
        with client.messages.stream(model="claude-x", max_tokens=100, messages=asked) as stream:
            final = stream.get_final_message()
        assert final.content[1].input == {"order": "4411"}
        assert final.usage.output_tokens == 5 and final.stop_reason == "tool_use"
        assert len(fake.requests) == 2
        sent = fake.headers[0]  # the key as this SDK release sends it: either header
        assert "sk-test" in sent.get("x-api-key", "") + sent.get("authorization", "")
        counted = client.messages.count_tokens(model="claude-x", messages=asked)
        assert counted.input_tokens > 0


def test_the_openai_sdk_reads_its_completions_and_chunks() -> None:
    with FakeUpstream(tool_then_text) as fake:
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test", max_retries=0)
        asked = [{"role": "user", "content": "Where is order 4411?"}]
        done = client.chat.completions.create(model="gpt-x", messages=asked)  # type: ignore[arg-type]
        assert done.choices[0].message.tool_calls[0].function.name == "lookup"  # type: ignore[index,union-attr]
        stream = client.chat.completions.create(
            model="gpt-x",
            messages=asked,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5
        assert fake.headers[1]["authorization"] == "Bearer sk-test"
        answered = client.responses.create(model="gpt-x", input="Where is order 4411?")
        assert answered.output[0].type == "function_call" or answered.output_text
        assert answered.usage is not None and answered.usage.output_tokens == 5


def test_errors_checks_and_holds() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    with FakeUpstream(status=529, error=error) as fake:
        r = httpx.post(f"{fake.url}/v1/messages", json={"messages": []})
        assert r.status_code == 529 and r.json() == error
    with FakeUpstream(check=lambda body: [] if body.get("model") else ["no model"]) as fake:
        httpx.post(f"{fake.url}/v1/messages", json={"messages": []})
        httpx.post(f"{fake.url}/v1/messages", json={"model": "m", "messages": []})
        assert fake.problems == [(0, "no model")]
        with fake.hold(), pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{fake.url}/v1/messages", json={"model": "m"}, timeout=0.2)
