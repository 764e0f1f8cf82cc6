"""AnthropicCounter against a mocked Messages API (the provider cannot be reached from CI)."""

from __future__ import annotations

import json
import re

import pytest

from ctxwise import AnthropicCounter, Message, ProviderError, TokenCounter
from tests._http import mock_client, response


def _anthropic_client(handler):  # type: ignore[no-untyped-def]
    anthropic = pytest.importorskip("anthropic")
    return anthropic.Anthropic(
        api_key="test-key", max_retries=0, http_client=mock_client("anthropic", handler)
    )


class TestAnthropicCounter:
    def test_counts_and_caches_by_content(self) -> None:
        seen: list[dict] = []  # type: ignore[type-arg]

        def handler(request):  # type: ignore[no-untyped-def]
            assert request.url.path == "/v1/messages/count_tokens"
            body = json.loads(request.content)
            seen.append(body)
            words = sum(len(re.findall(r"\S+", json.dumps(m["content"]))) for m in body["messages"])
            return response("anthropic", 200, {"input_tokens": 7 + words})

        counter = AnthropicCounter(_anthropic_client(handler), "claude-sonnet-5-5")
        assert counter.count("hello there") == 9
        assert counter.count("hello there") == 9
        assert len(seen) == 1
        assert seen[0]["model"] == "claude-sonnet-5-5"
        msgs = [Message.text_message("system", "be brief"), Message.text_message("user", "hi")]
        counter.count_messages(msgs)
        assert seen[1]["system"] == "be brief"
        assert seen[1]["messages"] == [{"role": "user", "content": "hi"}]

    def test_api_error_is_provider_error(self) -> None:
        def handler(request):  # type: ignore[no-untyped-def]
            error = {"type": "overloaded_error", "message": "Overloaded"}
            return response("anthropic", 529, {"type": "error", "error": error})

        counter = AnthropicCounter(_anthropic_client(handler), "claude-sonnet-5-5")
        with pytest.raises(ProviderError) as info:
            counter.count("hi")
        assert info.value.status == 529


def test_is_a_token_counter() -> None:
    counter = AnthropicCounter(_anthropic_client(lambda request: None), "claude-sonnet-5-5")
    assert isinstance(counter, TokenCounter)
    assert counter.name == "anthropic:claude-sonnet-5-5"
