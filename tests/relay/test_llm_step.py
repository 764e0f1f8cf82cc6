"""A relay whose step is a model behind the official SDKs, over httpx.MockTransport.

The mock answers like the Messages API and Chat Completions: it reads the chunk
and the table out of the request the step sent, and replies with the update a
careful model would write (the first reply of one step is not JSON, so the
relay's retry is exercised end to end).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ctxwise.relay import HandoverParser, LLMStep, Relay, StepRequest, generate, score_run
from tests._http import mock_client, response

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

CHUNKS = 6


def _workload() -> Any:
    return generate(3, variant="counting", chunks=CHUNKS, needles=6 * CHUNKS, assets=8)


def _answer(user: str, instruction_seen: bool) -> str:
    """The update for the request's chunk and table, as JSON text."""
    assert instruction_seen
    chunk = user.split("<chunk>\n", 1)[1].rsplit("</chunk>", 1)[0]
    table_text = user.split("== state table ==\n", 1)[1].split("\n== notes ==", 1)[0]
    table = tuple(json.loads(line) for line in table_text.splitlines() if line.strip())
    request = StepRequest(0, chunk, "", table, "", (), "")
    result = HandoverParser()(request)
    return json.dumps({"table": list(result.table or ()), "notes": f"{len(chunk)} chars read"})


class _Model:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def reply(self, body: dict[str, Any], system: str, user: str) -> str:
        self.bodies.append(body)
        if len(self.bodies) == 3:
            return "Sure! Here is the updated table: asset A holds ..."
        return _answer(user, "handover" in system)


def _anthropic_step(model: _Model) -> LLMStep:
    from ctxwise.providers.chat import AnthropicChat

    def handler(request: Any) -> Any:
        assert request.url.path == "/v1/messages"
        body = json.loads(request.content)
        text = model.reply(body, body["system"], body["messages"][0]["content"])
        return response(
            "anthropic",
            200,
            {
                "id": f"msg_{len(model.bodies):02d}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 900, "output_tokens": 300},
            },
        )

    client = anthropic.Anthropic(
        api_key="k", max_retries=0, http_client=mock_client("anthropic", handler)
    )
    return LLMStep(AnthropicChat(client, "claude-sonnet-5-5"), max_tokens=2000)


def _openai_step(model: _Model) -> LLMStep:
    from ctxwise.providers.chat import OpenAIChat

    def handler(request: Any) -> Any:
        assert request.url.path.endswith("/chat/completions")
        body = json.loads(request.content)
        msgs = body["messages"]
        text = model.reply(body, msgs[0]["content"], msgs[1]["content"])
        return response(
            "openai",
            200,
            {
                "id": f"chatcmpl-{len(model.bodies)}",
                "object": "chat.completion",
                "created": 1764547200,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text, "refusal": None},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 900, "completion_tokens": 300, "total_tokens": 1200},
            },
        )

    client = openai.OpenAI(api_key="k", max_retries=0, http_client=mock_client("openai", handler))
    return LLMStep(OpenAIChat(client, "gpt-4o"), max_tokens=2000)


@pytest.mark.parametrize("make_step", [_anthropic_step, _openai_step], ids=["anthropic", "openai"])
def test_a_model_step_runs_the_relay_and_a_reply_that_is_not_json_is_retried(
    tmp_path: Path, make_step: Any
) -> None:
    workload = _workload()
    model = _Model()
    result = Relay(workload, make_step(model), runs=tmp_path).run("llm")
    score = score_run(result, workload)
    assert score.steps == CHUNKS
    assert score.holders_correct == score.counts_exact == score.rows_total == 8
    assert score.needles_kept == score.needles_exact == score.needles_total
    assert score.filler_kept == 0
    # one request per step, plus the retry of the step whose first reply was prose
    assert len(model.bodies) == CHUNKS + 1
    [rejection] = result.rejections
    assert (rejection.step, rejection.attempt, rejection.reason) == (2, 0, "step_failed")
    assert "not JSON" in rejection.violations[0] and not rejection.final
    retry = json.dumps(model.bodies[3])
    assert "Your previous update was rejected" in retry and "not JSON" in retry
    # every request carried only its chunk and the carry, capped
    for body in model.bodies:
        text = json.dumps(body)
        assert "<chunk>" in text and "== kept lines (verbatim) ==" in text
    assert re.search(r"\d+ chars read", result.notes)
