"""Chat Completions' deprecated function calling, which older agents and recorded
datasets still hold: an assistant message with ``function_call: {name, arguments}``
(content null) answered by ``{"role": "function", "name": ..., "content": ...}``
(OpenAI reference, ``ChatCompletionFunctionMessageParam``). Such a request was
refused as a whole ("unknown role 'function'")."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ctxwise.editing import DEFAULT_PLACEHOLDER
from ctxwise.errors import FormatError
from ctxwise.formats import openai
from ctxwise.messages import ToolResultBlock, ToolUseBlock
from ctxwise.pairing import problems
from tests.formats._clear import clear_file


def request() -> dict[str, Any]:
    return {
        "model": "gpt-3.5-turbo-0613",
        "functions": [{"name": "get_weather", "parameters": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "Weather in Paris and in Rome?"},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            },
            {"role": "function", "name": "get_weather", "content": "Paris: sunny, " * 30},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
            },
            {"role": "function", "name": "get_weather", "content": None},
            {"role": "assistant", "content": "Sunny in Paris; Rome did not say."},
        ],
    }


def test_function_calls_pair_with_their_function_messages() -> None:
    doc = request()
    t = openai.decode_request(doc)
    calls = [b for m in t.messages for b in m.content if isinstance(b, ToolUseBlock)]
    results = [b for m in t.messages for b in m.content if isinstance(b, ToolResultBlock)]
    assert [(c.name, dict(c.input)) for c in calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Rome"}),
    ]
    assert [r.tool_use_id for r in results] == [c.id for c in calls]
    assert len({c.id for c in calls}) == 2
    assert problems(t, "openai") == []
    assert openai.encode_request(t) == doc


def test_cleared_function_result_is_written_as_a_function_message(tmp_path: Path) -> None:
    text = json.dumps(request(), indent=1) + "\n"
    f, edit, data, _ = clear_file(tmp_path / "req.json", text, keep_last=1, clear_inputs=True)
    assert f.format == "openai"
    assert edit.applied
    back = json.loads(data)
    assert back["messages"][1]["function_call"] == {"name": "get_weather", "arguments": "{}"}
    assert "tool_calls" not in back["messages"][1]
    assert back["messages"][2] == {
        "role": "function",
        "name": "get_weather",
        "content": DEFAULT_PLACEHOLDER,
    }
    assert back["messages"][4] == {"role": "function", "name": "get_weather", "content": None}


def test_function_message_without_a_call_is_an_orphan() -> None:
    t = openai.decode_messages(
        [{"role": "user", "content": "x"}, {"role": "function", "name": "f", "content": "1"}]
    )
    assert [p.kind.value for p in problems(t, "openai")] == ["orphan_result"]


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "function", "content": "1"}],
        [{"role": "function", "name": "f", "content": [{"type": "text", "text": "1"}]}],
        [{"role": "assistant", "content": None, "function_call": {"arguments": "{}"}}],
        [{"role": "assistant", "content": None, "function_call": "get_weather"}],
    ],
    ids=["no-name", "list-content", "call-no-name", "call-not-object"],
)
def test_malformed_legacy_messages_are_format_errors(messages: list[Any]) -> None:
    with pytest.raises(FormatError, match="message 0: "):
        openai.decode_messages(messages)


def test_an_edited_function_call_of_a_response_is_written_back() -> None:
    # the response kept its function_call as a response field too, which
    # encode_response wrote over the edited call: a cleared input came back whole
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-3.5-turbo-0613",
        "choices": [
            {
                "index": 0,
                "finish_reason": "function_call",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
            }
        ],
    }
    message = openai.decode_response(body)
    assert openai.encode_response(message) == body
    use = message.content[0]
    assert isinstance(use, ToolUseBlock)
    edited = replace(message, content=(replace(use, input={"city": "Rome"}),))
    out = openai.encode_response(edited)["choices"][0]["message"]
    assert out["function_call"] == {"name": "get_weather", "arguments": '{"city": "Rome"}'}
