"""The LLM summarizer through the official SDKs, with the providers mocked at the
HTTP layer (payloads shaped like their documented responses)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxwise import CharCounter, Message, ProviderError, UsageError
from ctxwise.summarize import DEFAULT_INSTRUCTIONS, LLMSummarizer
from tests._http import mock_client, response

TURNS = [
    Message.text_message("user", "I was charged twice for order W2378156 on May 2."),
    Message.text_message("assistant", "I see two charges of $49.00; I will refund one."),
]
SUMMARY = "The user was charged twice ($49.00) for order W2378156 on May 2; one refund is due."


def anthropic_chat(handler: Any) -> Any:
    anthropic = pytest.importorskip("anthropic")
    from ctxwise.providers import AnthropicChat

    client = anthropic.Anthropic(
        api_key="k", max_retries=0, http_client=mock_client("anthropic", handler)
    )
    return AnthropicChat(client, "claude-sonnet-5-5")


def openai_chat(handler: Any) -> Any:
    openai = pytest.importorskip("openai")
    from ctxwise.providers import OpenAIChat

    client = openai.OpenAI(api_key="k", max_retries=0, http_client=mock_client("openai", handler))
    return OpenAIChat(client, "gpt-4o")


def test_anthropic_request_and_answer() -> None:
    sent: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        assert request.url.path == "/v1/messages"
        sent.append(json.loads(request.content))
        return response(
            "anthropic",
            200,
            {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-5-5",
                "content": [{"type": "text", "text": SUMMARY}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 180, "output_tokens": 30},
            },
        )

    summary = LLMSummarizer(anthropic_chat(handler)).summarize("", TURNS, 200)
    assert summary == SUMMARY
    body = sent[0]
    assert "tools" not in body and body["max_tokens"] == 200
    assert "Do not call tools" in body["system"] and "within 200 tokens" in body["system"]
    assert "W2378156" in body["messages"][0]["content"]


def test_openai_request_and_answer() -> None:
    sent: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        assert request.url.path.endswith("/chat/completions")
        sent.append(json.loads(request.content))
        return response(
            "openai",
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1741570283,
                "model": "gpt-4o",
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": SUMMARY,
                            "refusal": None,
                            "annotations": [],
                        },
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 150, "completion_tokens": 30, "total_tokens": 180},
            },
        )

    summary = LLMSummarizer(
        openai_chat(handler), instructions="Summarize in {budget} tokens."
    ).summarize("earlier: nothing", TURNS, 80)
    assert summary == SUMMARY[: len(summary)]
    body = sent[0]
    assert "tools" not in body
    assert body["messages"][0] == {"role": "system", "content": "Summarize in 80 tokens."}
    assert "earlier: nothing" in body["messages"][1]["content"]


def test_long_answers_are_cut_to_the_budget() -> None:
    def handler(request: Any) -> Any:
        return response(
            "anthropic",
            200,
            {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "x",
                "content": [{"type": "text", "text": "word " * 400}],
                "stop_reason": "max_tokens",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 400},
            },
        )

    out = LLMSummarizer(anthropic_chat(handler), counter=CharCounter()).summarize("", TURNS, 50)
    assert CharCounter().count(out) <= 50 and out.endswith("[…]")


def test_provider_errors_and_bad_input() -> None:
    def overloaded(request: Any) -> Any:
        return response(
            "anthropic",
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        )

    with pytest.raises(ProviderError) as info:
        LLMSummarizer(anthropic_chat(overloaded)).summarize("", TURNS, 100)
    assert info.value.status == 529

    def empty(request: Any) -> Any:
        return response(
            "openai",
            200,
            {
                "id": "c",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": ""},
                        "finish_reason": "length",
                    }
                ],
            },
        )

    with pytest.raises(ProviderError, match="empty answer"):
        LLMSummarizer(openai_chat(empty)).summarize("", TURNS, 100)
    with pytest.raises(UsageError):
        LLMSummarizer(openai_chat(empty), instructions="  ")
    assert "{budget}" in DEFAULT_INSTRUCTIONS
