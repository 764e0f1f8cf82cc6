"""Escalation briefs: every line extracted or quoted, never made up — on a scripted
case and on every tau-bench trajectory."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

from ctxwise import Engine, EngineConfig, Message
from ctxwise.formats import read_transcripts
from ctxwise.handoff import escalation_brief
from ctxwise.messages import TextBlock, ToolResultBlock, ToolUseBlock, Transcript
from tests.conftest import TAU


def _case() -> list[Message]:
    return [
        Message.text_message("system", "You are Northwind's support agent."),
        Message.text_message(
            "user", "Order 4417 arrived broken. My user id is mia_li_3668. I paid $129.00 for it."
        ),
        Message("assistant", (ToolUseBlock("t1", "lookup_order", {"order_id": "4417"}),)),
        Message(
            "user",
            (ToolResultBlock("t1", '{"order_id": "4417", "status": "delivered", "total": 129}'),),
        ),
        Message("assistant", (ToolUseBlock("t2", "issue_refund", {"order_id": "4417"}),)),
        Message("user", (ToolResultBlock("t2", "Error: refund limit reached", is_error=True),)),
        Message(
            "assistant",
            (
                TextBlock(
                    "The refund failed because the account reached its monthly refund limit. "
                    "I recommend a supervisor approves a manual refund of $129.00.\n"
                    "- Option A: store credit $140\n"
                ),
            ),
        ),
        Message.text_message("user", "How long will that take?"),
    ]


def test_an_amount_spelled_several_ways_is_listed_once() -> None:
    case = _case()
    case[-2] = Message.text_message(
        "assistant",
        "I recommend a supervisor approves a manual refund of $129 (USD 129.00 was charged). "
        "The fee was 5 dollars, or $5.00, and the credit is $1,290.",
    )
    amounts = escalation_brief(case).amounts
    spelled = [
        ("$129.00", "$129", "USD 129.00"),
        ("5 dollars", "$5.00", "USD 5.00"),
        ("$1,290", "USD 1290.00"),
    ]
    for forms in spelled:
        assert sum(a in forms for a in amounts) == 1, amounts
    assert len(amounts) == 3, amounts


def test_a_support_case() -> None:
    brief = escalation_brief(_case())
    assert ("user_id", "mia_li_3668") in brief.customer
    assert ("order_id", "4417") in brief.case
    assert "$129.00" in brief.amounts or "USD 129.00" in brief.amounts
    assert "$140" not in brief.amounts  # an option in a list is not an amount of the case
    assert brief.problem is not None and brief.problem.text.startswith("Order 4417 arrived broken")
    assert [q.text for q in brief.cause] == [
        "The refund failed because the account reached its monthly refund limit."
    ]
    assert [(a.tool, a.outcome) for a in brief.tried] == [
        ("lookup_order", "ok"),
        ("issue_refund", "error"),
    ]
    assert brief.recommended[0].text.startswith("I recommend a supervisor approves")
    assert (
        brief.open_question is not None and brief.open_question.text == "How long will that take?"
    )
    text = brief.render()
    for heading in ("Customer", "Case", "Amounts", "Problem", "Cause", "What was tried"):
        assert f"## {heading}" in text
    assert "issue_refund" in text and "refund limit reached" in text


def test_an_empty_case_says_what_is_missing() -> None:
    brief = escalation_brief([Message.text_message("assistant", "Hello.")])
    text = brief.render()
    assert "(no customer message)" in text and "(no tool was called)" in text
    assert "(none proposed)" in text


@functools.cache
def _trajectories() -> list[Transcript]:
    return read_transcripts(TAU)


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("index", range(200), ids=lambda i: f"traj{i}")
def test_every_tau_bench_trajectory(index: int, data_dir: Path) -> None:
    transcript = _trajectories()[index]
    messages = transcript.messages
    brief = escalation_brief(transcript)
    quotes = [brief.problem, *brief.cause, *brief.recommended, brief.open_question]
    for q in quotes:
        if q is None:
            continue
        source = _flat(messages[q.position].text or "")
        source += " " + _flat(
            " ".join(json.dumps(r.content) for r in messages[q.position].tool_results)
        )
        said = q.text.removesuffix("…")
        assert said in source or _flat(said) in source, f"{q.text!r} is not in message {q.position}"
    calls = [b for m in messages for b in m.tool_uses]
    assert [a.tool for a in brief.tried] == [c.name for c in calls]
    every_text = _flat(" ".join(m.text for m in messages))
    for amount in brief.amounts:
        if not amount.startswith(("USD", "EUR", "GBP")):
            assert amount in every_text
    for key, value in brief.customer:
        assert key in ("user_id", "email") and value
    assert brief.render().startswith("# Escalation brief")


def test_engine_brief_uses_the_session(tmp_path: Path) -> None:
    config = EngineConfig(store=f"sqlite:///{tmp_path / 'e.db'}", facts={"extractor": "support"})
    with Engine(config) as engine:
        case = _case()
        engine.record("s", case[:-1])
        engine.turn("s", case[-1:])
        brief = engine.escalation_brief("s")
        assert ("user_id", "mia_li_3668") in brief.customer
        assert re.search("refund limit", brief.render())
