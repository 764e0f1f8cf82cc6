"""Responses the adapters were not built on, shaped as the providers document them.

Every adapter runs on the official SDK over ``httpx.MockTransport``; every bad
answer must be a :class:`~ctxwise.errors.ProviderError` that says what came back.
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


def _reply(sdk: str, status: int, body: Any, headers: dict[str, str] | None = None) -> Any:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = {"content-type": "application/json", **(headers or {})}
    return http_module(sdk).Response(status, headers=head, content=content)


def _client(sdk: str, reply: Any) -> Any:
    """A client whose every request gets ``reply`` (a response, or a function of the request)."""
    handler = reply if callable(reply) else (lambda _: reply)
    cls = anthropic.Anthropic if sdk == "anthropic" else openai.OpenAI
    return cls(api_key="test", max_retries=0, http_client=mock_client(sdk, handler))


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
    return anthropic_message(content, stop_reason)


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
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
    return openai_completion([choice], completion_tokens=5)


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


_OVERLOADED = {
    "type": "error",
    "error": {"type": "overloaded_error", "message": "Overloaded"},
    "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
}
_RATE_LIMITED = {
    "type": "error",
    "error": {"type": "rate_limit_error", "message": "This request would exceed your rate limit."},
}
_QUOTA = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}
_OPENAI_RATE = {
    "error": {
        "message": "Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 3.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
_GATEWAY = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad "
    b"Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n"
    + b" " * 4000
    + b"</body></html>"
)


@pytest.mark.parametrize(
    ("adapter", "status", "body", "headers", "detail"),
    [
        (
            "AnthropicChat",
            529,
            _OVERLOADED,
            {},
            "overloaded_error: Overloaded (request id req_011CSHoEeqs5C35K2UUqR7Fy)",
        ),
        (
            "AnthropicCounter",
            429,
            _RATE_LIMITED,
            {"retry-after": "12", "request-id": "req_018EeWyXxfu5pfWkrYcMdjWG"},
            "rate_limit_error: This request would exceed your rate limit. "
            "(request id req_018EeWyXxfu5pfWkrYcMdjWG; retry after 12 s)",
        ),
        (
            "AnthropicChat",
            502,
            _GATEWAY,
            {"content-type": "text/html"},
            "an HTML page: 502 Bad Gateway",
        ),
        (
            "OpenAIChat",
            429,
            _QUOTA,
            {"x-request-id": "req_abc123"},
            "insufficient_quota: You exceeded your current quota, please check your plan and "
            "billing details. (request id req_abc123)",
        ),
        (
            "OpenAIYesNo",
            429,
            _OPENAI_RATE,
            {"retry-after-ms": "1500"},
            "requests/rate_limit_exceeded: Rate limit reached for gpt-4o-mini on requests per min "
            "(RPM): Limit 3. (retry after 1500 ms)",
        ),
        (
            "OpenAIChat",
            500,
            _GATEWAY,
            {"content-type": "text/html"},
            "an HTML page: 502 Bad Gateway",
        ),
        ("OpenAIChat", 503, b"", {"content-type": "text/plain"}, "the response has no body"),
        (
            "AnthropicChat",
            301,
            b"<html><head><title>301 Moved Permanently</title></head></html>",
            {"content-type": "text/html", "location": "https://llm.example.com/v1/messages"},
            "an HTML page: 301 Moved Permanently (redirected to "
            "https://llm.example.com/v1/messages: point the client's base_url there)",
        ),
        (
            "OpenAIYesNo",
            307,
            b"",
            {"location": "https://llm.example.com/v1/chat/completions"},
            "the response has no body (redirected to "
            "https://llm.example.com/v1/chat/completions: point the client's base_url there)",
        ),
        ("AnthropicChat", 413, b"Request Entity Too Large", {"content-type": "text/plain"}, None),
    ],
)
def test_an_http_error_says_what_the_provider_sent(
    adapter: str, status: int, body: Any, headers: dict[str, str], detail: str | None
) -> None:
    sdk, call = ADAPTERS[adapter]
    with pytest.raises(ProviderError) as info:
        call(_reply(sdk, status, body, headers))
    assert info.value.status == status
    assert info.value.provider == sdk
    assert info.value.detail == (detail or body.decode())
    assert len(str(info.value)) < 400  # an HTML page is named by its title, not pasted whole


def test_a_connection_error_names_its_cause() -> None:
    # a gzip body that does not decompress: the SDK's own message may not say why (its
    # wording is the SDK's, and changes between releases); ours appends the cause's type
    def garbled(request: Any) -> Any:
        head = {"content-type": "application/json", "content-encoding": "gzip"}
        return http_module("anthropic").Response(200, headers=head, content=b"{}")

    with pytest.raises(ProviderError, match=r"\(DecodingError: ") as info:
        _anthropic_chat(garbled)
    assert info.value.status is None


@pytest.mark.parametrize("adapter", list(ADAPTERS))
def test_an_error_envelope_sent_with_status_200_is_reported_as_the_error(adapter: str) -> None:
    sdk, call = ADAPTERS[adapter]
    body = _OVERLOADED if sdk == "anthropic" else _OPENAI_RATE
    with pytest.raises(ProviderError, match="the response is an error: ") as info:
        call(_reply(sdk, 200, body))
    assert ("Overloaded" if sdk == "anthropic" else "Rate limit reached") in info.value.detail
    assert "Field required" not in info.value.detail


def test_a_max_tokens_the_sdk_refuses_without_streaming_is_a_usage_error() -> None:
    from ctxwise.errors import UsageError
    from ctxwise.providers import AnthropicChat

    sent: list[Any] = []

    def handler(request: Any) -> Any:
        sent.append(request)
        return _reply("anthropic", 200, _message([{"type": "text", "text": "ok"}], "end_turn"))

    # the SDK raised a bare ValueError ("Streaming is required ...") before sending
    chat = AnthropicChat(_client("anthropic", handler), "claude-sonnet-5-5")
    with pytest.raises(UsageError, match=r"max_tokens=64000: Streaming is required") as info:
        chat.complete("system", "user", 64_000)
    assert "explicit timeout" in str(info.value)
    assert sent == []
    # the hint works: a client with its own timeout sends the call
    timed = anthropic.Anthropic(
        api_key="test",
        max_retries=0,
        timeout=3600.0,
        http_client=mock_client("anthropic", handler),
    )
    assert AnthropicChat(timed, "claude-sonnet-5-5").complete("system", "user", 64_000) == "ok"
    assert len(sent) == 1


_CUT_EMOJI = "tool output ends in half an emoji \ud83d"
_PAIRED = "two halves \ud83d\ude00 make one"


def _recording(sdk: str, reply: dict[str, Any], sent: list[Any]) -> Any:
    def handler(request: Any) -> Any:
        sent.append(json.loads(request.content))
        return _reply(sdk, 200, reply)

    return handler


def test_a_lone_surrogate_is_sent_as_a_replacement_character() -> None:
    # UTF-8 cannot encode one: the SDKs raised UnicodeEncodeError writing the request
    from ctxwise.providers import AnthropicChat, AnthropicCounter, OpenAIChat, OpenAIYesNo

    sent: list[Any] = []
    answer = _message([{"type": "text", "text": "ok"}], "end_turn")
    chat = AnthropicChat(_client("anthropic", _recording("anthropic", answer, sent)), "claude-x")
    assert chat.complete(_PAIRED, _CUT_EMOJI, 10) == "ok"
    assert sent[-1]["system"] == "two halves \U0001f600 make one"
    assert sent[-1]["messages"][0]["content"] == "tool output ends in half an emoji \ufffd"

    completion = _completion({"role": "assistant", "content": "ok", "refusal": None}, "stop")
    openai_chat = OpenAIChat(_client("openai", _recording("openai", completion, sent)), "gpt-x")
    assert openai_chat.complete(_CUT_EMOJI, _CUT_EMOJI, 10) == "ok"
    assert [m["content"] for m in sent[-1]["messages"]] == [_CUT_EMOJI[:-1] + "\ufffd"] * 2

    top = [{"token": "yes", "logprob": -0.1, "bytes": None, "top_logprobs": []}]
    scored = _completion({"role": "assistant", "content": "yes"}, "length")
    scored["choices"][0]["logprobs"] = {"content": [{**top[0], "top_logprobs": top}]}
    yes = OpenAIYesNo(_client("openai", _recording("openai", scored, sent)), "gpt-x")
    assert yes.yes_probability("s", _CUT_EMOJI) == 1.0
    assert sent[-1]["messages"][1]["content"].endswith("\ufffd")

    counter = AnthropicCounter(
        _client("anthropic", _recording("anthropic", {"input_tokens": 11}, sent)), "claude-x"
    )
    assert counter.count(_CUT_EMOJI) == 11
    assert sent[-1]["messages"][0]["content"].endswith("\ufffd")
    from ctxwise.messages import Message, ToolResultBlock, ToolUseBlock

    call = Message(
        role="assistant", content=(ToolUseBlock("toolu_1", "grep", {"q\udc00": ["\ud83d"]}),)
    )
    result = Message(role="user", content=(ToolResultBlock("toolu_1", _CUT_EMOJI),))
    system = Message.text_message("system", _CUT_EMOJI)
    assert counter.count_messages([system, Message.text_message("user", "go"), call, result]) == 11
    body = json.dumps(sent[-1], ensure_ascii=False)
    assert "\ufffd" in body and body.encode("utf-8")  # every string went out as UTF-8
    assert sent[-1]["messages"][1]["content"][0]["input"] == {"q\ufffd": ["\ufffd"]}


def test_counting_a_tool_input_nested_past_the_json_encoder_is_a_usage_error() -> None:
    from ctxwise.errors import UsageError
    from ctxwise.messages import Message, ToolResultBlock, ToolUseBlock
    from ctxwise.providers import AnthropicCounter

    sent: list[Any] = []
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(5_000):
        inner["a"] = {}
        inner = inner["a"]
    messages = [
        Message.text_message("user", "go"),
        Message(role="assistant", content=(ToolUseBlock("toolu_1", "grep", deep),)),
        Message(role="user", content=(ToolResultBlock("toolu_1", "done"),)),
    ]
    handler = _recording("anthropic", {"input_tokens": 11}, sent)
    counter = AnthropicCounter(_client("anthropic", handler), "claude-x")
    # json.dumps raised RecursionError out of count_messages
    with pytest.raises(UsageError, match="nests too deeply"):
        counter.count_messages(messages)
    assert sent == []


def _async_client(sdk: str) -> Any:
    http = http_module(sdk)

    def handler(request: Any) -> Any:  # never reached: nothing awaits the call
        raise AssertionError("an async client was called")

    cls = anthropic.AsyncAnthropic if sdk == "anthropic" else openai.AsyncOpenAI
    transport = http.MockTransport(handler)
    return cls(api_key="test", max_retries=0, http_client=http.AsyncClient(transport=transport))


ASYNC_ADAPTERS = {
    "AnthropicChat": ("anthropic", lambda c: _adapter("AnthropicChat", c).complete("s", "u", 10)),
    "AnthropicCounter": ("anthropic", lambda c: _adapter("AnthropicCounter", c).count("hi")),
    "OpenAIChat": ("openai", lambda c: _adapter("OpenAIChat", c).complete("s", "u", 10)),
    "OpenAIYesNo": ("openai", lambda c: _adapter("OpenAIYesNo", c).yes_probability("s", "u")),
}


def _adapter(name: str, client: Any) -> Any:
    import ctxwise.providers as providers

    return getattr(providers, name)(client, "model-x")


class _Wrapped:
    """An async client behind a wrapper (as tracing libraries wrap clients)."""

    def __init__(self, inner: Any) -> None:
        self.messages = getattr(inner, "messages", None)
        self.chat = getattr(inner, "chat", None)


@pytest.mark.parametrize("adapter", list(ASYNC_ADAPTERS))
def test_an_async_client_is_a_usage_error(adapter: str) -> None:
    from ctxwise.errors import UsageError

    sdk, call = ASYNC_ADAPTERS[adapter]
    expected = "anthropic.Anthropic" if sdk == "anthropic" else "openai.OpenAI"
    # it raised AttributeError ('coroutine' object has no attribute 'http_response')
    with pytest.raises(UsageError, match=rf"{adapter} needs a synchronous client \({expected}\)"):
        _adapter(adapter, _async_client(sdk))
    with pytest.raises(UsageError, match=rf"needs a synchronous client \({expected}\)"):
        call(_Wrapped(_async_client(sdk)))  # closed: no "never awaited" warning (an error here)


@pytest.mark.parametrize("size", ["64k", None, 1.5, -1, True])
def test_a_bad_counter_cache_size_is_refused_before_any_call(size: Any) -> None:
    from ctxwise.errors import UsageError
    from ctxwise.providers import AnthropicCounter

    sent: list[Any] = []
    client = _client("anthropic", _recording("anthropic", {"input_tokens": 11}, sent))
    # it was first used after the paid call: TypeError, and the count was lost
    with pytest.raises(UsageError, match="cache_size"):
        AnthropicCounter(client, "claude-x", cache_size=size).count("hi")
    assert sent == []


def test_a_counter_without_a_cache_asks_every_time() -> None:
    from ctxwise.providers import AnthropicCounter

    sent: list[Any] = []
    client = _client("anthropic", _recording("anthropic", {"input_tokens": 11}, sent))
    counter = AnthropicCounter(client, "claude-x", cache_size=0)
    assert counter.count("hi") == counter.count("hi") == 11
    assert len(sent) == 2


def test_an_answer_eaten_by_reasoning_says_so() -> None:
    # the shape a reasoning model returns when max_completion_tokens ran out while thinking
    body = _completion({"role": "assistant", "content": "", "refusal": None}, "length")
    body["usage"] = {
        "prompt_tokens": 1111,
        "completion_tokens": 100,
        "total_tokens": 1211,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 100,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    with pytest.raises(ProviderError) as info:
        _openai_chat(_reply("openai", 200, body))
    assert info.value.detail == (
        "empty answer (finish_reason 'length'): the model spent 100 reasoning tokens of "
        "max_tokens=100 before writing any answer; raise max_tokens"
    )
    # no reasoning reported, or an odd usage: the plain message
    for usage in (None, {"completion_tokens_details": None}, {"completion_tokens_details": 5}):
        body["usage"] = usage
        with pytest.raises(ProviderError) as plain:
            _openai_chat(_reply("openai", 200, body))
        assert plain.value.detail == "empty answer (finish_reason 'length')"


def _scored(top: list[tuple[str, float]]) -> dict[str, Any]:
    tops = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top]
    body = _completion({"role": "assistant", "content": top[0][0], "refusal": None}, "length")
    body["choices"][0]["logprobs"] = {
        "content": [{**tops[0], "top_logprobs": tops}],
        "refusal": None,
    }
    return body


@pytest.mark.parametrize(
    ("top", "expected"),
    [
        # both past exp's range: exp() gave 0.0 for each, read as "neither" (0.5)
        ([("maybe", -0.001), ("Yes", -1000.0), ("no", -1001.0)], 1 / (1 + math.exp(-1))),
        ([("maybe", -0.001), ("yes", -2000.0), (" No", -1998.0)], 1 / (1 + math.exp(2))),
        ([("Yes", math.log(0.6)), (" no", math.log(0.2)), ("maybe", -3.0)], 0.75),
        ([("perhaps", -0.1)], 0.5),
    ],
)
def test_yes_probability_compares_tiny_log_probabilities(
    top: list[tuple[str, float]], expected: float
) -> None:
    assert _openai_yes(_reply("openai", 200, _scored(top))) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("adapter", "call", "name"),
    [
        ("AnthropicChat", lambda a: a.complete("s", b"user", 10), "user"),
        ("OpenAIChat", lambda a: a.complete(None, "u", 10), "system"),
        ("OpenAIYesNo", lambda a: a.yes_probability("s", 7), "user"),
        ("AnthropicCounter", lambda a: a.count(None), "text"),
        ("AnthropicCounter", lambda a: a.count(5), "text"),
    ],
)
def test_a_prompt_that_is_not_a_string_is_a_usage_error(
    adapter: str, call: Callable[[Any], Any], name: str
) -> None:
    from ctxwise.errors import UsageError

    sent: list[Any] = []
    sdk = ADAPTERS[adapter][0]
    client = _client(sdk, _recording(sdk, {"input_tokens": 1}, sent))
    # bytes raised TypeError in the SDK; None and numbers were sent as null and numbers
    with pytest.raises(UsageError, match=rf"^{name} must be a string, got "):
        call(_adapter(adapter, client))
    assert sent == []


@pytest.mark.parametrize("adapter", ["AnthropicChat", "AnthropicCounter"])
def test_an_anthropic_client_without_credentials_is_a_provider_error(
    adapter: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # anthropic.Anthropic() builds without a key; the SDK raised TypeError at the call
    for var in ("API_KEY", "AUTH_TOKEN", "PROFILE", "CONFIG_DIR", "FEDERATION_RULE_ID"):
        monkeypatch.delenv(f"ANTHROPIC_{var}", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no profile on disk either
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    sent: list[Any] = []
    client = anthropic.Anthropic(
        max_retries=0, http_client=mock_client("anthropic", lambda r: sent.append(r))
    )
    with pytest.raises(ProviderError, match="the SDK could not send the request: ") as info:
        call = ASYNC_ADAPTERS[adapter][1]
        call(client)
    assert info.value.provider == "anthropic"
    assert sent == []


def test_yes_no_refusal_text_is_in_the_error() -> None:
    said = "I'm sorry, I can't help with that."
    body = _completion({"role": "assistant", "content": None, "refusal": said}, "stop")
    token = {"token": "I'm", "logprob": -0.01, "bytes": None, "top_logprobs": []}
    body["choices"][0]["logprobs"] = {"content": None, "refusal": [token]}
    # it said only "the response has no log probabilities"
    with pytest.raises(ProviderError) as info:
        _openai_yes(_reply("openai", 200, body))
    assert info.value.detail == f"the model refused: {said}"


def test_another_value_error_of_the_sdk_is_a_usage_error_without_the_timeout_hint() -> None:
    from ctxwise.errors import UsageError
    from ctxwise.providers import AnthropicChat

    # a model name holding a lone surrogate: the SDK raises UnicodeEncodeError, a ValueError
    chat = AnthropicChat(_client("anthropic", lambda r: None), "claude-\ud800")
    with pytest.raises(UsageError, match=r"^the anthropic SDK refused the call: ") as info:
        chat.complete("s", "u", 10)
    assert "timeout" not in str(info.value)
