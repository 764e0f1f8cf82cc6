"""A compaction in a turn keeps the latest exchange verbatim when the history's room
holds it: the model must see the tool result it is about to act on."""

from __future__ import annotations

import json
from pathlib import Path

from ctxwise import Engine, EngineConfig, Message
from ctxwise.formats import anthropic
from ctxwise.messages import TextBlock, ToolResultBlock, ToolUseBlock

T = Message.text_message


def _engine(budget: int) -> Engine:
    # the room these turns are sized for: the default counter, no safety margin
    engine = Engine(EngineConfig(store="memory", budget=budget, safety_margin=0))
    for i in range(4):
        engine.turn("s", [T("user", f"question {i} " + "blah " * 60)])
        engine.record("s", [T("assistant", "answer " * 20)])
    engine.turn("s", [T("user", "look up my order 4417")])
    return engine


def _call(tool_id: str, result: str) -> list[Message]:
    return [
        Message("assistant", (TextBlock("checking"), ToolUseBlock(tool_id, "lookup", {"o": 1}))),
        Message("user", (ToolResultBlock(tool_id, result),)),
    ]


def test_the_latest_tool_result_stays_verbatim_when_there_is_room() -> None:
    with _engine(1000) as engine:
        r = engine.turn("s", _call("h1", "status: SHIPPED-XYZ " + "data " * 200))
        assert r.trace.compacted is not None
        assert r.trace.tokens.total <= 1000
        body = r.request
        assert anthropic.decode_request(body).problems("anthropic") == []
        last = body["messages"][-1]["content"]
        assert last[0]["type"] == "tool_result" and "SHIPPED-XYZ" in json.dumps(last[0])
        call = body["messages"][-2]["content"]
        assert any(b["type"] == "tool_use" and b["id"] == "h1" for b in call)


def test_parallel_results_keep_their_calls() -> None:
    with _engine(1200) as engine:
        calls = Message(
            "assistant",
            (ToolUseBlock("p1", "lookup", {"o": 1}), ToolUseBlock("p2", "lookup", {"o": 2})),
        )
        results = [
            Message("user", (ToolResultBlock("p1", "FIRST " + "x " * 120),)),
            Message("user", (ToolResultBlock("p2", "SECOND " + "y " * 120),)),
        ]
        r = engine.turn("s", [calls, *results])
        text = json.dumps(r.request)
        assert r.trace.tokens.total <= 1200
        assert "FIRST" in text and "SECOND" in text
        assert anthropic.decode_request(r.request).problems("anthropic") == []


def test_an_exchange_larger_than_any_room_is_still_a_valid_request() -> None:
    with _engine(600) as engine:
        r = engine.turn("s", _call("big", "HUGE " + "z " * 2000))
        assert r.trace.tokens.total <= 600
        assert anthropic.decode_request(r.request).problems("anthropic") == []


def test_a_broken_emoji_survives_compaction_into_memory(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'e.db'}"
    with Engine(EngineConfig(store=db, budget=600)) as engine:
        for i in range(12):
            engine.turn("s", [T("user", f"q{i} pasted \ud83d broken " + "w " * 40)])
            engine.record("s", [T("assistant", "a \udc00 " * 20)])
        assert any(t.compacted is not None for t in engine.traces("s"))
        assert engine.session_messages("s")[-1].content[0].text.startswith("a \udc00")
        assert engine.memory is not None and engine.memory.namespaces()
