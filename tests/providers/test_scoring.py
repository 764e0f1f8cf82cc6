"""OpenAIYesNo through the official SDK on a mock transport, with Chat Completions
payloads shaped as OpenAI documents them (``logprobs.content[].top_logprobs``), and
the LLMScorer of handoffs on top of it."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from ctxwise.errors import ProviderError, UsageError
from ctxwise.handoff import LLMScorer, select_context
from ctxwise.messages import Message
from tests._http import mock_client, response

openai = pytest.importorskip("openai")


def _completion(top: list[tuple[str, float]]) -> dict[str, Any]:
    first = top[0]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": first[0], "refusal": None},
                "logprobs": {
                    "content": [
                        {
                            "token": first[0],
                            "logprob": first[1],
                            "bytes": list(first[0].encode()),
                            "top_logprobs": [
                                {"token": t, "logprob": lp, "bytes": list(t.encode())}
                                for t, lp in top
                            ],
                        }
                    ],
                    "refusal": None,
                },
                "finish_reason": "length",
            }
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 1, "total_tokens": 41},
    }


def _model(replies: list[Any], seen: list[dict[str, Any]]) -> Any:
    from ctxwise.providers.scoring import OpenAIYesNo

    def handler(request: Any) -> Any:
        seen.append(json.loads(request.content))
        reply = replies.pop(0)
        return (
            response("openai", reply[0], reply[1])
            if isinstance(reply, tuple)
            else (response("openai", 200, reply))
        )

    client = openai.OpenAI(
        api_key="test", max_retries=0, http_client=mock_client("openai", handler)
    )
    return OpenAIYesNo(client, "gpt-4o-mini")


def test_yes_probability_from_top_logprobs() -> None:
    seen: list[dict[str, Any]] = []
    model = _model(
        [_completion([("Yes", math.log(0.6)), (" no", math.log(0.2)), ("maybe", -3)])], seen
    )
    assert model.yes_probability("sys", "q") == pytest.approx(0.75)
    body = seen[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert body["max_completion_tokens"] == 1
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_neither_word_is_even_odds_and_errors_are_provider_errors() -> None:
    seen: list[dict[str, Any]] = []
    model = _model([_completion([("perhaps", -0.1)])], seen)
    assert model.yes_probability("s", "q") == 0.5
    broken = _model([(429, {"error": {"message": "rate limited", "type": "rate_limit"}})], seen)
    with pytest.raises(ProviderError) as e:
        broken.yes_probability("s", "q")
    assert e.value.status == 429
    no_logprobs = _completion([("yes", -0.1)])
    no_logprobs["choices"][0]["logprobs"] = None
    with pytest.raises(ProviderError, match="log probabilities"):
        _model([no_logprobs], seen).yes_probability("s", "q")


def test_llm_scorer_asks_about_the_shortlist_only() -> None:
    messages = [
        Message.text_message("user", f"fact {i}: the server db{i} runs postgres") for i in range(6)
    ]
    seen: list[dict[str, Any]] = []
    answers = [_completion([("yes", math.log(0.9)), ("no", math.log(0.1))])] + [
        _completion([("no", math.log(0.9)), ("yes", math.log(0.1))]) for _ in range(2)
    ]
    scorer = LLMScorer(_model(answers, seen), shortlist=3)
    handoff = select_context(messages, "which server runs postgres: db3?", 10_000, scorer=scorer)
    assert len(seen) == 3
    assert handoff.scorer == "llm:openai-yes:gpt-4o-mini"
    asked = [b["messages"][1]["content"] for b in seen]
    assert all(q.startswith("Task:\nwhich server runs postgres: db3?") for q in asked)
    with pytest.raises(UsageError):
        LLMScorer(object())  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        LLMScorer(_model([], seen), shortlist=0)
