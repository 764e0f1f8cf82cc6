"""Responses the adapters were not built on, shaped as the providers document them.

Every adapter runs on the official SDK over ``httpx.MockTransport``; every bad
answer must be a :class:`~ctxwise.errors.ProviderError` that says what came back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from ctxwise.errors import ProviderError
from tests._http import http_module, mock_client

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")


def _reply(sdk: str, status: int, body: Any, headers: dict[str, str] | None = None) -> Any:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = {"content-type": "application/json", **(headers or {})}
    return http_module(sdk).Response(status, headers=head, content=content)


def _client(sdk: str, reply: Any) -> Any:
    cls = anthropic.Anthropic if sdk == "anthropic" else openai.OpenAI
    return cls(api_key="test", max_retries=0, http_client=mock_client(sdk, lambda _: reply))


def _anthropic_chat(reply: Any) -> str:
    from ctxwise.providers import AnthropicChat

    chat = AnthropicChat(_client("anthropic", reply), "claude-sonnet-5-5")
    return chat.complete("system", "user", 100)


def _anthropic_count(reply: Any) -> int:
    from ctxwise.providers import AnthropicCounter

    return AnthropicCounter(_client("anthropic", reply), "claude-sonnet-5-5").count("hi")


def _openai_chat(reply: Any) -> str:
    from ctxwise.providers import OpenAIChat

    return OpenAIChat(_client("openai", reply), "gpt-4o-mini").complete("system", "user", 100)


def _openai_yes(reply: Any) -> float:
    from ctxwise.providers import OpenAIYesNo

    return OpenAIYesNo(_client("openai", reply), "gpt-4o-mini").yes_probability("system", "user")


ADAPTERS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "AnthropicChat": ("anthropic", _anthropic_chat),
    "AnthropicCounter": ("anthropic", _anthropic_count),
    "OpenAIChat": ("openai", _openai_chat),
    "OpenAIYesNo": ("openai", _openai_yes),
}


@pytest.mark.parametrize("adapter", list(ADAPTERS))
@pytest.mark.parametrize("where", ["top", "inside"])
def test_a_body_nested_past_the_json_decoder_is_a_provider_error(adapter: str, where: str) -> None:
    sdk, call = ADAPTERS[adapter]
    deep = b"[" * 100_000 + b"]" * 100_000
    body = deep if where == "top" else b'{"content": [{"type": "text", "x": ' + deep + b"}]}"
    with pytest.raises(ProviderError, match="nests too deeply") as info:
        call(_reply(sdk, 200, body))
    assert info.value.provider == sdk


def _message(content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 3},
    }


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ([{"type": "text", "text": "Hello.."}], "7 characters of text before it: 'Hello..'"),
        ([], "no text before it"),
        ([{"type": "text", "text": "x" * 500}], "500 characters of text before it: '" + "x" * 200),
    ],
)
def test_anthropic_refusal_is_a_provider_error_not_an_answer(
    content: list[dict[str, Any]], said: str
) -> None:
    # the documented shape: HTTP 200, the text so far, stop_reason "refusal"
    with pytest.raises(ProviderError, match=r"refused \(stop_reason 'refusal'\)") as info:
        _anthropic_chat(_reply("anthropic", 200, _message(content, "refusal")))
    assert said in info.value.detail
    assert info.value.status is None


@pytest.mark.parametrize("stop", ["end_turn", "max_tokens", "stop_sequence"])
def test_anthropic_other_stop_reasons_still_answer(stop: str) -> None:
    content = [
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        {"type": "text", "text": "The answer"},
    ]
    assert _anthropic_chat(_reply("anthropic", 200, _message(content, stop))) == "The answer"


def _completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini",
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45},
    }


def test_openai_refusal_text_is_in_the_error() -> None:
    said = "I'm sorry, I cannot assist with that request."
    message = {"role": "assistant", "content": None, "refusal": said, "annotations": []}
    with pytest.raises(ProviderError, match="the model refused") as info:
        _openai_chat(_reply("openai", 200, _completion(message, "stop")))
    assert said in info.value.detail


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("The first half", "14 characters of text before it: 'The first half'"),
        (None, "no text before it"),
        ("", "no text before it"),
    ],
)
def test_openai_content_filter_is_a_provider_error_not_an_answer(
    content: str | None, said: str
) -> None:
    message = {"role": "assistant", "content": content, "refusal": None}
    with pytest.raises(ProviderError, match=r"finish_reason 'content_filter'") as info:
        _openai_chat(_reply("openai", 200, _completion(message, "content_filter")))
    assert said in info.value.detail


@pytest.mark.parametrize("finish", ["stop", "length"])
def test_openai_other_finish_reasons_still_answer(finish: str) -> None:
    message = {"role": "assistant", "content": "The answer", "refusal": None, "annotations": []}
    assert _openai_chat(_reply("openai", 200, _completion(message, finish))) == "The answer"
