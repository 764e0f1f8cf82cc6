"""A 200 response whose body is malformed is a ProviderError from every adapter.

The SDKs build response objects without validating them, so the adapters validate
the fields they read. Payloads are shaped as Anthropic's Messages API and OpenAI's
Chat Completions document them, on the official SDKs over a mock transport.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from ctxwise.errors import ProviderError
from tests._http import anthropic_message, http_module, mock_client, openai_completion

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")


def _raw(sdk: str, body: bytes, content_type: str = "application/json") -> Any:
    return http_module(sdk).Response(200, headers={"content-type": content_type}, content=body)


def _json(sdk: str, payload: Any) -> Any:
    return _raw(sdk, json.dumps(payload).encode())


def _client(sdk: str, replies: list[Any], seen: list[Any] | None = None) -> Any:
    def handler(request: Any) -> Any:
        if seen is not None:
            seen.append(json.loads(request.content))
        return replies.pop(0)

    cls = anthropic.Anthropic if sdk == "anthropic" else openai.OpenAI
    return cls(api_key="test", max_retries=0, http_client=mock_client(sdk, handler))


def _message(content: Any) -> dict[str, Any]:
    return anthropic_message(content)


def _completion(choices: Any) -> dict[str, Any]:
    return openai_completion(choices)


def _choice(message: Any, logprobs: Any = None) -> dict[str, Any]:
    return {"index": 0, "message": message, "logprobs": logprobs, "finish_reason": "stop"}


def _scored(top: list[tuple[Any, Any]]) -> dict[str, Any]:
    tops = [{"token": t, "logprob": lp, "bytes": None} for t, lp in top]
    logprobs = {
        "content": [{"token": "Yes", "logprob": -0.1, "bytes": None, "top_logprobs": tops}],
        "refusal": None,
    }
    return _completion([_choice({"role": "assistant", "content": "Yes"}, logprobs)])


def _anthropic_chat(reply: Any) -> Any:
    from ctxwise.providers import AnthropicChat

    return AnthropicChat(_client("anthropic", [reply]), "claude-sonnet-5-5").complete("s", "u", 10)


def _anthropic_count(reply: Any) -> Any:
    from ctxwise.providers import AnthropicCounter

    return AnthropicCounter(_client("anthropic", [reply]), "claude-sonnet-5-5").count("hi")


def _openai_chat(reply: Any) -> Any:
    from ctxwise.providers import OpenAIChat

    return OpenAIChat(_client("openai", [reply]), "gpt-4o-mini").complete("s", "u", 10)


def _openai_yes(reply: Any) -> Any:
    from ctxwise.providers import OpenAIYesNo

    return OpenAIYesNo(_client("openai", [reply]), "gpt-4o-mini").yes_probability("s", "u")


ADAPTERS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "AnthropicChat": ("anthropic", _anthropic_chat),
    "AnthropicCounter": ("anthropic", _anthropic_count),
    "OpenAIChat": ("openai", _openai_chat),
    "OpenAIYesNo": ("openai", _openai_yes),
}

BODIES: dict[str, tuple[bytes, str, str]] = {
    "truncated": (b'{"id":"msg_1","type":"message","content":[{"type":"te', "json", "not JSON"),
    "empty": (b"", "json", "empty"),
    "null": (b"null", "json", "is null"),
    "array": (b"[1, 2]", "json", "an array"),
    "wrong shape": (b'{"foo": 1}', "json", "Field required"),
    "html": (b"<html><body>502 Bad Gateway</body></html>", "html", "not JSON"),
}


@pytest.mark.parametrize("adapter", list(ADAPTERS))
@pytest.mark.parametrize("body", list(BODIES))
def test_a_malformed_body_is_a_provider_error(adapter: str, body: str) -> None:
    sdk, call = ADAPTERS[adapter]
    content, kind, reason = BODIES[body]
    ctype = "application/json" if kind == "json" else "text/html; charset=utf-8"
    with pytest.raises(ProviderError, match="malformed response") as info:
        call(_raw(sdk, content, ctype))
    assert info.value.provider == sdk
    assert reason in info.value.detail
    assert info.value.status is None


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ([{"type": "text"}], "content[0].text is missing"),
        ([{"type": "text", "text": None}], "content[0].text is a NoneType"),
        ([{"type": "thinking", "thinking": "."}, {"type": "text", "text": 3}], "content[1].text"),
        (None, "content: Input should be a valid list"),
        ("hello", "content: Input should be a valid list"),
        ([None], "content[0]: Input should be a valid dictionary"),
    ],
)
def test_anthropic_chat_refuses_odd_content(content: Any, field: str) -> None:
    with pytest.raises(ProviderError, match="malformed response") as info:
        _anthropic_chat(_json("anthropic", _message(content)))
    assert field in info.value.detail


def test_anthropic_chat_still_reads_valid_answers() -> None:
    blocks = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "text", "text": "Hello, "},
        {"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}},
        {"type": "text", "text": "world"},
    ]
    assert _anthropic_chat(_json("anthropic", _message(blocks))) == "Hello, world"
    with pytest.raises(ProviderError, match="empty answer"):
        _anthropic_chat(_json("anthropic", _message([])))


@pytest.mark.parametrize(
    ("choices", "field"),
    [
        ([], "choices: List should have at least 1 item"),
        (None, "choices: Input should be a valid list"),
        ([_choice(None)], "choices[0].message: Input should be a valid dictionary"),
        ([{"index": 0, "finish_reason": "stop"}], "choices[0].message: Field required"),
        ([_choice({"role": "assistant", "content": ["a"]})], "choices[0].message.content"),
        ([_choice({"role": "assistant", "content": 7})], "choices[0].message.content"),
    ],
)
def test_openai_chat_refuses_odd_choices(choices: Any, field: str) -> None:
    with pytest.raises(ProviderError, match="malformed response") as info:
        _openai_chat(_json("openai", _completion(choices)))
    assert field in info.value.detail


def test_openai_chat_still_reads_valid_answers() -> None:
    message = {"role": "assistant", "content": "fine", "refusal": None}
    assert _openai_chat(_json("openai", _completion([_choice(message)]))) == "fine"
    refused = {"role": "assistant", "content": None, "refusal": "no"}
    with pytest.raises(ProviderError, match="the model refused: no"):
        _openai_chat(_json("openai", _completion([_choice(refused)])))
    empty = {"role": "assistant", "content": None, "refusal": None}
    with pytest.raises(ProviderError, match="empty answer"):
        _openai_chat(_json("openai", _completion([_choice(empty)])))


@pytest.mark.parametrize("tokens", [None, "abc", "12", -5, 3.5, True, [3]])
def test_counter_refuses_an_odd_count_and_caches_nothing(tokens: Any) -> None:
    from ctxwise.providers import AnthropicCounter

    seen: list[Any] = []
    replies = [
        _json("anthropic", {"input_tokens": tokens}),
        _json("anthropic", {"input_tokens": 9}),
    ]
    counter = AnthropicCounter(_client("anthropic", replies, seen), "claude-sonnet-5-5")
    with pytest.raises(ProviderError, match="malformed response: input_tokens") as info:
        counter.count("hi")
    assert info.value.provider == "anthropic"
    assert counter.count("hi") == 9  # the bad answer was not cached: asked again
    assert counter.count("hi") == 9
    assert len(seen) == 2


def test_counter_still_counts_zero() -> None:
    assert _anthropic_count(_json("anthropic", {"input_tokens": 0})) == 0


@pytest.mark.parametrize(
    ("logprob", "field"),
    [
        (None, "logprob: Input should be a valid number"),
        ("x", "logprob: Input should be a valid number"),
        ("-0.5", "logprob: Input should be a valid number"),
        (1000, "logprob: Input should be less than or equal to"),
        (0.01, "logprob: Input should be less than or equal to"),
    ],
)
def test_yes_no_refuses_an_odd_logprob(logprob: Any, field: str) -> None:
    with pytest.raises(ProviderError, match="malformed response") as info:
        _openai_yes(_json("openai", _scored([("Yes", logprob), ("no", -1.0)])))
    assert "choices[0].logprobs.content[0].top_logprobs[0]." + field in info.value.detail


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_yes_no_refuses_a_non_finite_logprob(literal: bytes) -> None:
    body = json.dumps(_scored([("yes", 0.123456), ("no", -1.0)])).encode()
    body = body.replace(b"0.123456", literal)
    with pytest.raises(ProviderError, match="finite number"):
        _openai_yes(_raw("openai", body))


def test_yes_no_refuses_odd_tokens_and_choices() -> None:
    with pytest.raises(ProviderError, match=r"top_logprobs\[0\]\.token"):
        _openai_yes(_json("openai", _scored([(None, -0.1)])))
    with pytest.raises(ProviderError, match="choices: List should have at least 1 item"):
        _openai_yes(_json("openai", _completion([])))


def test_yes_no_clamps_rounding_above_zero_and_ignores_message() -> None:
    # a logprob a hair above 0 is rounding of ln(1): counted as probability 1
    assert _openai_yes(_json("openai", _scored([("Yes", 1e-9), ("no", -50.0)]))) == (
        pytest.approx(1.0)
    )
    body = _scored([("yes", math.log(0.25)), ("No", math.log(0.75))])
    body["choices"][0]["message"] = None  # the scorer reads only the log probabilities
    assert _openai_yes(_json("openai", body)) == pytest.approx(0.25)
    assert _openai_yes(_json("openai", _scored([("yes", -1e308), ("no", -1e308)]))) == 0.5
