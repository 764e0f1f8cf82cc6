from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise import CaseFacts, FormatError, UsageError
from ctxwise.policy import (
    Allowed,
    Blocked,
    Forbid,
    PolicyGate,
    RequireFact,
    compile_rule,
    tool_outcome,
)

RULE = "Do not refund order 4417 until the address check is done"
VOCAB = {"refund": "issue_refund", "address check": "address_check"}


def refund_rule() -> RequireFact:
    return RequireFact(
        name="refund-4417",
        text=RULE,
        tools=("issue_refund",),
        fact="address_check:{order_id}",
        when={"order_id": "4417"},
        satisfied_by="address_check",
    )


def test_blocked_until_the_check_passes_then_allowed() -> None:
    gate, facts = PolicyGate([refund_rule()]), CaseFacts()
    first = gate.check("issue_refund", {"order_id": "4417"}, facts)
    assert isinstance(first, Blocked) and not first
    assert first.reason.startswith(RULE)
    assert "address_check:4417 is not recorded" in first.reason
    assert first.rule.name == "refund-4417"

    assert gate.observe("address_check", {"order_id": "4417"}, '{"status": "ok"}', facts) == [
        "address_check:4417"
    ]
    assert facts.get("address_check:4417") is not None
    after = gate.check("issue_refund", {"order_id": "4417"}, facts)
    assert isinstance(after, Allowed) and after
    assert after.checked == ("refund-4417",)


def test_rule_only_applies_to_its_tool_and_order() -> None:
    gate = PolicyGate([refund_rule()])
    assert gate.check("issue_refund", {"order_id": "5521"})
    assert gate.check("lookup_order", {"order_id": "4417"})
    # ids compare as text, ignoring a leading '#', spaces and case
    assert not gate.check("issue_refund", {"order_id": " #4417"})
    assert not gate.check("issue_refund", {"order_id": 4417})


def test_failed_check_keeps_blocking_and_a_later_failure_revokes() -> None:
    gate, facts = PolicyGate([refund_rule()]), CaseFacts()
    gate.observe("address_check", {"order_id": "4417"}, "address mismatch: failed", facts)
    blocked = gate.check("issue_refund", {"order_id": "4417"}, facts)
    assert isinstance(blocked, Blocked)
    assert "'failed'" in blocked.reason
    gate.observe("address_check", {"order_id": "4417"}, "verified ok", facts)
    assert gate.check("issue_refund", {"order_id": "4417"}, facts)
    gate.observe("address_check", {"order_id": "4417"}, "ok", facts, is_error=True)
    assert not gate.check("issue_refund", {"order_id": "4417"}, facts)


def test_observe_ignores_other_orders_and_tools() -> None:
    gate, facts = PolicyGate([refund_rule()]), CaseFacts()
    assert gate.observe("lookup_order", {"order_id": "4417"}, "ok", facts) == []
    assert gate.observe("address_check", {}, "ok", facts) == []
    assert len(facts) == 0


def test_template_field_missing_from_input_fails_closed() -> None:
    rule = RequireFact("r", "refunds need a check", ("issue_refund",), "check:{order_id}")
    decision = PolicyGate([rule]).check("issue_refund", {"amount": 5})
    assert isinstance(decision, Blocked)
    assert "no 'order_id'" in decision.reason


def test_a_rule_that_raises_blocks() -> None:
    class Broken:
        name = "broken"
        text = "never do odd things"

        def check(self, tool_name: str, tool_input: Mapping[str, Any], facts: CaseFacts) -> None:
            raise RuntimeError("boom")

        def to_dict(self) -> dict[str, Any]:
            return {}

    decision = PolicyGate([Broken()]).check("anything", {})
    assert isinstance(decision, Blocked)
    assert "could not be checked: boom" in decision.reason


def test_forbid_and_first_objection_wins() -> None:
    gate = PolicyGate(
        [
            Forbid("no-delete", "Never delete customer accounts", ("delete_account",)),
            refund_rule(),
        ]
    )
    d = gate.check("delete_account", {"user_id": "u1"})
    assert isinstance(d, Blocked) and d.reason == "Never delete customer accounts"
    assert gate.check("send_email", {}).checked == ("no-delete", "refund-4417")


def test_gate_round_trips_through_json_outside_the_transcript() -> None:
    gate = PolicyGate([Forbid("f", "Never email", ("send_email",)), refund_rule()])
    again = PolicyGate.from_dict(json.loads(json.dumps(gate.to_dict())))
    assert again.to_dict() == gate.to_dict()
    assert not again.check("issue_refund", {"order_id": "4417"})


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"version": 2, "rules": []},
        {"version": 1, "rules": "x"},
        {"version": 1, "rules": [{"kind": "magic", "name": "m", "text": "t"}]},
        {"version": 1, "rules": [{"kind": "forbid", "name": "m"}]},
        {"version": 1, "rules": [{"kind": "forbid", "name": "m", "text": "t", "tools": []}]},
    ],
)
def test_bad_gate_files_are_format_errors(data: dict[str, Any]) -> None:
    with pytest.raises(FormatError):
        PolicyGate.from_dict(data)


def test_bad_rules_and_calls_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="already in the gate"):
        PolicyGate([refund_rule(), refund_rule()])
    with pytest.raises(UsageError, match="at least one tool"):
        Forbid("x", "t", ())
    with pytest.raises(UsageError, match="sequence of tool names"):
        Forbid("x", "t", "issue_refund")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="plain names"):
        RequireFact("x", "t", ("a",), "k:{order.id}")
    with pytest.raises(UsageError, match="tool name"):
        PolicyGate().check("", {})
    with pytest.raises(UsageError, match="mapping"):
        PolicyGate().check("t", ["order_id"])  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        PolicyGate([object()])  # type: ignore[list-item]


def test_compile_the_supervisor_sentence() -> None:
    rule = compile_rule(RULE, VOCAB)
    assert isinstance(rule, RequireFact)
    assert rule.text == RULE
    assert rule.tools == ("issue_refund",)
    assert rule.when == {"order_id": "4417"}
    assert rule.fact == "address_check:{order_id}"
    assert rule.satisfied_by == "address_check"


@pytest.mark.parametrize(
    "text",
    [
        "Don't refund order #4417 until its address check has been completed.",
        "Please do not issue a refund on order 4417 before the address check is verified",
        "never refund order 4417 unless the address check is passed",
    ],
)
def test_compile_variants(text: str) -> None:
    gate, facts = PolicyGate([compile_rule(text, VOCAB)]), CaseFacts()
    assert not gate.check("issue_refund", {"order_id": "4417"}, facts)
    gate.observe("address_check", {"order_id": "4417"}, "Address verified: OK", facts)
    assert gate.check("issue_refund", {"order_id": "4417"}, facts)


def test_compile_without_condition_is_a_forbid() -> None:
    rule = compile_rule("Do not refund order W2378156.", VOCAB)
    assert isinstance(rule, Forbid)
    assert rule.when == {"order_id": "W2378156"}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("Refunds are fine", "expected 'do not"),
        ("Do not cancel order 4417", "names no tool"),
        ("Do not refund order 4417 until the manager check is done", "names no tool"),
    ],
)
def test_compile_refuses_what_it_cannot_read(text: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        compile_rule(text, VOCAB)


def test_compile_refuses_an_ambiguous_action() -> None:
    with pytest.raises(UsageError, match="several tools"):
        compile_rule(RULE, {**VOCAB, "refunds": "refund_v2"})


@pytest.mark.parametrize(
    ("result", "error", "expected"),
    [
        ('{"status": "ok"}', False, "ok"),
        ('{"status": "failed", "note": "ok"}', False, "failed"),
        ('{"result": true}', False, "ok"),
        ('{"result": false}', False, "failed"),
        ("Address verified.", False, "ok"),
        ("address not verified", False, "failed"),
        ("pending review", False, "failed"),
        ("", False, "failed"),
        ("the weather is nice", False, "failed"),
        ("ok", True, "failed"),
        ({"status": "passed"}, False, "ok"),
    ],
)
def test_tool_outcome(result: Any, error: bool, expected: str) -> None:
    assert tool_outcome(result, is_error=error) == expected


@given(
    order=st.from_regex(r"[0-9]{3,6}", fullmatch=True),
    tool=st.sampled_from(["issue_refund", "address_check", "lookup_order"]),
    results=st.lists(st.sampled_from(["ok", "failed", "pending"]), max_size=4),
)
def test_refund_runs_only_after_the_latest_check_passed(
    order: str, tool: str, results: list[str]
) -> None:
    rule = compile_rule(f"Do not refund order {order} until the address check is done", VOCAB)
    gate, facts = PolicyGate([rule]), CaseFacts()
    for r in results:
        gate.observe("address_check", {"order_id": order}, r, facts)
    decision = gate.check(tool, {"order_id": order}, facts)
    expect_allowed = tool != "issue_refund" or (bool(results) and results[-1] == "ok")
    assert bool(decision) is expect_allowed
