"""The scripted Northwind session: data the demo can rely on."""

from __future__ import annotations

import json

from ctxwise._northwind import (
    CODE,
    KB,
    REFUND,
    RULE,
    SCRIPT,
    STANDING_RULE,
    STYLE,
    TOOL_DOCS,
    Call,
)


def _said(turn: int) -> str:
    """Everything the script and the sources hold up to and including ``turn``."""
    parts = [CODE, KB, STYLE, TOOL_DOCS]
    for step in SCRIPT[:turn]:
        parts.extend(a.output if isinstance(a, Call) else a for a in step.model)
        parts.extend(json.dumps(a.input) for a in step.model if isinstance(a, Call))
        parts.append(step.user or "")
    return "\n".join(parts)


def test_every_need_was_said_before_it_is_needed() -> None:
    for turn, step in enumerate(SCRIPT, start=1):
        assert step.needs, f"turn {turn} checks nothing"
        for need in step.needs:
            assert need in _said(turn) or need == "Blocked by policy", (turn, need)


def test_every_turn_sends_something_and_tools_are_documented() -> None:
    for step in SCRIPT:
        assert step.model or step.user
        for action in step.model:
            if isinstance(action, Call):
                assert f"- {action.tool}(" in TOOL_DOCS
                if action.output.lstrip()[:1] in "{[":
                    json.loads(action.output)


def test_the_rules_are_stated_by_the_user_and_the_refund_is_asked_after() -> None:
    users = [s.user or "" for s in SCRIPT]
    rule_at = next(i for i, u in enumerate(users) if RULE in u)
    standing_at = next(i for i, u in enumerate(users) if STANDING_RULE in u)
    refunds = [
        i
        for i, s in enumerate(SCRIPT)
        for a in s.model
        if isinstance(a, Call) and (a.tool, a.input) == REFUND
    ]
    verify = [
        i
        for i, s in enumerate(SCRIPT)
        for a in s.model
        if isinstance(a, Call) and a.tool == "verify_address"
    ]
    assert standing_at < rule_at < refunds[0] < verify[0] < refunds[1]


def test_the_recalled_detail_exists_only_in_a_tool_result() -> None:
    # so the model can only see it again through recall once compaction summarizes it
    recall = next(s for s in SCRIPT if s.note == "memory recall")
    assert "Okafor" in recall.needs
    first = next(i for i, s in enumerate(SCRIPT) if "Okafor" in _said(i + 1))
    step = SCRIPT[first]
    assert not any("Okafor" in a for a in step.model if isinstance(a, str))
    assert "Okafor" not in (step.user or "")
