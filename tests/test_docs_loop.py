"""The agent loops the docs show, run as written against the official SDKs over a mock
transport: SDK objects go straight into ``engine.turn`` / ``engine.record``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ctxwise import Engine, EngineConfig
from ctxwise.messages import TextBlock, ToolResultBlock, ToolUseBlock
from tests._http import anthropic_message, http_module, mock_client, openai_completion

DOCS = Path(__file__).resolve().parents[1] / "docs"
_BLOCK = re.compile(r"<!-- docs-loop: (\w+) -->\n```python\n(.*?)```", re.S)


def _loops() -> list[tuple[str, str, str]]:
    """``(page, sdk, code)`` of every marked loop in the docs."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        for sdk, code in _BLOCK.findall(page.read_text(encoding="utf-8")):
            found.append((str(page.relative_to(DOCS)), sdk, code))
    return found


def _module(code: str, name: str) -> ModuleType:
    module = ModuleType(name)
    exec(compile(code, name, "exec"), module.__dict__)  # __name__ is not "__main__"
    return module


def test_the_home_page_and_the_loop_page_show_the_loops() -> None:
    loops = _loops()
    pages = {(page, sdk) for page, sdk, _ in loops}
    assert {("index.md", "anthropic"), ("agent-loop.md", "anthropic")} <= pages
    assert ("agent-loop.md", "openai") in pages
    anthropic_codes = {code for _, sdk, code in loops if sdk == "anthropic"}
    assert len(anthropic_codes) == 1, "the home page's loop is the loop page's"


def _anthropic_client(replies: list[dict[str, Any]], sent: list[dict[str, Any]]) -> Any:
    import anthropic

    http = http_module("anthropic")

    def handler(request: Any) -> Any:
        sent.append(json.loads(request.content))
        return http.Response(200, json=replies[len(sent) - 1])

    return anthropic.Anthropic(api_key="test", http_client=mock_client("anthropic", handler))


def _openai_client(replies: list[dict[str, Any]], sent: list[dict[str, Any]]) -> Any:
    import openai

    http = http_module("openai")

    def handler(request: Any) -> Any:
        sent.append(json.loads(request.content))
        return http.Response(200, json=replies[len(sent) - 1])

    return openai.OpenAI(api_key="test", http_client=mock_client("openai", handler))


@pytest.mark.parametrize("page", ["index.md", "agent-loop.md"])
def test_the_anthropic_loop_runs_as_written(tmp_path: Path, page: str) -> None:
    pytest.importorskip("anthropic")
    (code,) = [c for p, sdk, c in _loops() if p == page and sdk == "anthropic"]
    loop = _module(code, "docs_loop_anthropic")
    call = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "lookup_order",
        "input": {"order_id": "4417"},
    }
    replies = [
        anthropic_message([{"type": "text", "text": "Let me look."}, call], "tool_use"),
        anthropic_message([{"type": "text", "text": "It was delivered on 2 May."}]),
        anthropic_message([{"type": "text", "text": "You are welcome."}]),
    ]
    sent: list[dict[str, Any]] = []
    client = _anthropic_client(replies, sent)
    config = EngineConfig(budget=30_000, store=f"sqlite:///{tmp_path / 'ctxwise.db'}")
    with Engine(config) as engine:
        assert loop.answer(client, engine, "alice", "Where is order 4417?") == (
            "It was delivered on 2 May."
        )
        # the second request carries the call and its result, and no null the API refuses
        second = sent[1]
        # the tools went through the turn: sent with a cache breakpoint on the last
        assert second["tools"] == [
            *loop.TOOLS[:-1],
            {**loop.TOOLS[-1], "cache_control": {"type": "ephemeral"}},
        ]
        assert second["messages"][1]["content"][1] == call
        result = second["messages"][2]["content"][0]
        assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
        assert "delivered on 2 May" in json.dumps(result["content"])
        # the final answer joined the session: the next question's request has it
        assert loop.answer(client, engine, "alice", "Thanks!") == "You are welcome."
        third = json.dumps(sent[2]["messages"])
        assert "It was delivered on 2 May." in third
        history = engine.session_messages("alice")
        assert [m.role for m in history] == ["user", "assistant"] * 3
        assert isinstance(history[1].content[1], ToolUseBlock)
        assert isinstance(history[2].content[0], ToolResultBlock)
        assert history[-1].content == (TextBlock("You are welcome."),)


def test_the_openai_loop_runs_as_written(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    (code,) = [c for p, sdk, c in _loops() if p == "agent-loop.md" and sdk == "openai"]
    loop = _module(code, "docs_loop_openai")
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": '{"order_id": "4417"}'},
    }
    asks = {"role": "assistant", "content": None, "tool_calls": [call]}
    says = {"role": "assistant", "content": "It was delivered on 2 May."}
    replies = [
        openai_completion([{"index": 0, "message": asks, "finish_reason": "tool_calls"}]),
        openai_completion([{"index": 0, "message": says, "finish_reason": "stop"}]),
    ]
    sent: list[dict[str, Any]] = []
    client = _openai_client(replies, sent)
    config = EngineConfig(
        render="openai", model="gpt-4.1", budget=30_000, store=f"sqlite:///{tmp_path / 'c.db'}"
    )
    with Engine(config) as engine:
        assert loop.answer(client, engine, "alice", "Where is order 4417?") == says["content"]
        second = sent[1]
        assert second["tools"] == loop.TOOLS  # through the turn, in Chat Completions' shape
        roles = [m["role"] for m in second["messages"]]
        assert roles == ["user", "assistant", "tool"]
        assert second["messages"][1]["tool_calls"][0]["id"] == "call_1"
        assert second["messages"][2]["tool_call_id"] == "call_1"
        assert "delivered on 2 May" in second["messages"][2]["content"]
        history = engine.session_messages("alice")
        assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
        assert history[-1].content == (TextBlock(says["content"]),)
