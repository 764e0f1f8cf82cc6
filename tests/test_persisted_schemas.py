"""The persisted schemas (router file, policy gates, case facts, rules, session
state) are read through pydantic models: a bad file is a FormatError whose
detail names the field path, and what the writers write reads back unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxwise import CaseFacts, FormatError, PolicyGate
from ctxwise._schema import field_path
from ctxwise._session_state import parse_state
from ctxwise.memory.facts import Rule, Rules
from ctxwise.policy import Forbid, RequireFact
from ctxwise.routing.router import IntentRouter

FORBID = {"kind": "forbid", "name": "f", "text": "Never refund 9", "tools": ["refund"]}
REQUIRE = {
    "kind": "require_fact",
    "name": "r",
    "text": "Check first",
    "tools": ["refund"],
    "fact": "check:{order_id}",
}


def _gate_error(data: Any) -> str:
    with pytest.raises(FormatError) as info:
        PolicyGate.from_dict(data)
    assert info.value.source == "policy gate"
    return info.value.detail


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        ({"version": 2, "rules": []}, "version: unsupported version 2 (this ctxwise reads 1)"),
        ({"version": True, "rules": []}, "version: unsupported version True"),
        ({"version": "1", "rules": []}, "version: unsupported version '1'"),
        ({"version": 1}, "rules: missing"),
        ({"version": 1, "rules": [], "owner": "x"}, "owner: unknown key"),
        ({"version": 1, "rules": "x"}, "rules: Input should be a valid list"),
        (
            {"version": 1, "rules": [FORBID, {**FORBID, "kind": "magic"}]},
            "rules[1].kind: unknown kind 'magic' (known: forbid, require_fact)",
        ),
        ({"version": 1, "rules": [{"name": "m"}]}, "rules[0].kind: missing"),
        (
            {"version": 1, "rules": [FORBID, FORBID, {**REQUIRE, "tools": "refund"}]},
            "rules[2].tools: Input should be a valid list",
        ),
        ({"version": 1, "rules": [{**FORBID, "colour": 1}]}, "rules[0].colour: unknown key"),
        ({"version": 1, "rules": [{**REQUIRE, "fact": None}]}, "rules[0].fact: Input should be"),
        (
            {"version": 1, "rules": [{**FORBID, "when": {"order_id": True}}]},
            "rules[0].when.order_id: Input should be a valid string",
        ),
        ({"version": 1, "rules": [{**FORBID, "tools": []}]}, "rules[0]: rule 'f': a rule needs"),
        (
            {"version": 1, "rules": [FORBID, FORBID]},
            "rules[1]: a rule named 'f' is already in the gate",
        ),
    ],
)
def test_gate_errors_name_the_field(data: Any, detail: str) -> None:
    assert _gate_error(data).startswith(detail)


def test_gate_error_for_a_non_mapping() -> None:
    assert _gate_error(["version", 1]) == "expected a mapping, got list"


@pytest.mark.parametrize(
    "rule",
    [
        Forbid("f", "Never refund order 9", ("issue_refund",)),
        Forbid("f2", "Never refund order 9", ("issue_refund", "void"), {"order_id": "9"}),
        RequireFact("r", "Check first", ("issue_refund",), "check:{order_id}"),
        RequireFact(
            "r2",
            "Check first",
            ("issue_refund",),
            "check:{order_id}",
            ("ok", "waived"),
            {"order_id": "4417"},
            "address_check",
        ),
    ],
)
def test_every_rule_kind_round_trips(rule: Forbid | RequireFact) -> None:
    gate = PolicyGate([rule])
    text = json.dumps(gate.to_dict())
    back = PolicyGate.from_dict(json.loads(text))
    assert list(back) == [rule]
    assert json.dumps(back.to_dict()) == text


def test_hand_written_gates_still_read() -> None:
    """Optional fields absent or null, ids written as numbers: as before."""
    gate = PolicyGate.from_dict(
        {
            "version": 1,
            "rules": [
                {**FORBID, "when": {"order_id": 4417}},
                {**REQUIRE, "accept": None, "when": None},
            ],
        }
    )
    forbid, require = list(gate)
    assert isinstance(forbid, Forbid) and forbid.when == {"order_id": "4417"}
    assert isinstance(require, RequireFact)
    assert require.accept == ("ok",) and require.when == {} and require.satisfied_by is None


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        ({"version": 2, "facts": []}, "version: unsupported version 2 (this ctxwise reads 1)"),
        ({"version": 1.0, "facts": []}, "version: unsupported version 1.0"),
        ({"version": 1, "facts": [], "extra": 1}, "extra: unknown key"),
        (
            {"version": 1, "facts": [{"key": "a", "value": "1"}, {"key": "b", "value": 2}]},
            "facts[1].value: Input should be a valid string",
        ),
        ({"version": 1, "facts": [{"key": "a"}]}, "facts[0].value: missing"),
        ({"version": 1, "facts": [{"key": "a", "value": "1", "when": "x"}]}, "facts[0].when:"),
        (
            {"version": 1, "facts": [{"key": "a", "value": "1"}, {"key": "a", "value": "2"}]},
            "facts[1].key: 'a' appears twice",
        ),
        ({"version": 1, "facts": [{"key": "", "value": "1"}]}, "facts[0]: a fact needs"),
        (["version", 1], "expected a mapping, got list"),
    ],
)
def test_case_facts_errors_name_the_field(data: Any, detail: str) -> None:
    with pytest.raises(FormatError) as info:
        CaseFacts.from_dict(data)
    assert info.value.source == "case facts"
    assert info.value.detail.startswith(detail)


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        ({"version": 3, "rules": []}, "version: unsupported version 3"),
        ({"version": 1, "rules": [{"text": "x"}, {"text": "y", "src": "z"}]}, "rules[1].src:"),
        ({"version": 1, "rules": [{"text": 5}]}, "rules[0].text: Input should be a valid string"),
        ({"version": 1, "rules": [{"text": " "}]}, "rules[0]: a rule needs non-empty text"),
    ],
)
def test_rules_errors_name_the_field(data: Any, detail: str) -> None:
    with pytest.raises(FormatError) as info:
        Rules.from_dict(data)
    assert info.value.source == "rules"
    assert info.value.detail.startswith(detail)


def test_facts_and_rules_round_trip_byte_for_byte() -> None:
    facts = CaseFacts()
    facts.set("order_id", "W1", source="message 2", at="2026-01-01")
    facts.set("email", "a@b.c")
    rules = Rules(["Never call before 9am.", Rule("Always CC my wife.", "message 4")])
    for obj, cls in ((facts, CaseFacts), (rules, Rules)):
        text = json.dumps(obj.to_dict())
        assert json.dumps(cls.from_dict(json.loads(text)).to_dict()) == text


ROUTER = {
    "format": "ctxwise-router",
    "version": 2,
    "scorer": {"name": "bow", "params": {}},
    "state": None,
    "calibration": {"threshold": 0.3, "margin": 0.05, "per_intent": {}},
    "max_query_chars": 20000,
    "intents": [{"name": "a", "utterances": ["refund me"], "keywords": []}],
    "negatives": [],
}


@pytest.mark.parametrize(
    ("edit", "detail"),
    [
        ({"version": 3}, "router file version 3; this ctxwise reads versions 1, 2"),
        ({"format": "other"}, "not a ctxwise router file"),
        ({"owner": "x"}, "malformed router file: owner: unknown key"),
        (
            {"calibration": {"threshold": 0.3, "margin": "0.1"}},
            "malformed router file: calibration.margin: Input should be a valid number",
        ),
        (
            {"intents": [{"name": "a", "utterances": ["x"]}, {"name": "b", "utterance": ["y"]}]},
            "malformed router file: intents[1].utterance: unknown key",
        ),
        (
            {"intents": [{"name": "a", "utterances": ["x"]}, {"name": "a", "utterances": ["y"]}]},
            "malformed router file: intents[1]: duplicate intent name 'a'",
        ),
        ({"scorer": {"name": "nope"}}, "malformed router file: scorer: unknown scorer 'nope'"),
        ({"max_query_chars": "9"}, "malformed router file: max_query_chars: Input should be"),
        (
            {"state": {"file": "../x.npz", "sha256": "0", "labels": [], "meta": {}}},
            "malformed router file: state.file: bad arrays file '../x.npz'",
        ),
        ({"state": {"file": "x.npz"}}, "malformed router file: state.sha256: missing"),
    ],
)
def test_router_errors_name_the_field(tmp_path: Path, edit: dict[str, Any], detail: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**ROUTER, **edit}))
    with pytest.raises(FormatError) as info:
        IntentRouter.load(path)
    assert info.value.source == str(path)
    assert info.value.detail.startswith(detail)
    with pytest.raises(FormatError, match=r"^router: "):
        IntentRouter.from_dict({**ROUTER, **edit})


def test_version_1_router_without_the_newer_keys_loads(tmp_path: Path) -> None:
    doc = {
        "format": "ctxwise-router",
        "version": 1,
        "scorer": {"name": "bow"},
        "calibration": {"threshold": 0.3, "margin": 0.05},
        "intents": [{"name": "billing", "utterances": ["refund my invoice"]}],
    }
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(doc))
    router = IntentRouter.load(path)
    assert router.max_query_chars == 20000
    assert router.route("refund my invoice please").label == "billing"


def test_router_json_round_trips_unchanged(tmp_path: Path) -> None:
    router = IntentRouter.from_dict(ROUTER)
    assert router.to_dict() == ROUTER
    router.save(tmp_path / "r.json")
    first = (tmp_path / "r.json").read_bytes()
    IntentRouter.load(tmp_path / "r.json").save(tmp_path / "r.json")
    assert (tmp_path / "r.json").read_bytes() == first


def test_field_path_leaves_out_union_tags_only_after_an_index() -> None:
    assert field_path(("rules", 2, "forbid", "tools"), {"forbid"}) == "rules[2].tools"
    assert field_path(("forbid", "tools"), {"forbid"}) == "forbid.tools"
    assert field_path(()) == ""


# ----------------------------------------------------------------------------- session state

STATE = {
    "format": 1,
    "facts": {
        "version": 1,
        "facts": [{"key": "order_id", "value": "W1", "source": "message 1", "at": None}],
    },
    "rules": {"version": 1, "rules": [{"text": "Never call before 9am.", "source": None}]},
    "system": ["You are helpful."],
    "turns": 3,
    "compactions": 1,
    "clears": 0,
    "remembered": 2,
    "tool_ids": ["t1", "t2"],
    "route": {"origin": 4, "trace": {"query": "q", "label": None, "reason": "low_confidence"}},
}


def test_session_state_reads_what_the_engine_writes() -> None:
    state = parse_state(STATE, "s1")
    assert state.facts.to_dict() == STATE["facts"]
    assert state.rules.to_dict() == STATE["rules"]
    assert (state.turns, state.compactions, state.clears, state.remembered) == (3, 1, 0, 2)
    assert state.system == ["You are helpful."] and state.tool_ids == ["t1", "t2"]
    assert state.route is not None and state.route.model_dump() == STATE["route"]


def test_session_state_defaults() -> None:
    for data in ({}, {"format": 1}):
        state = parse_state(data, "s1")
        assert len(state.facts) == 0 and len(state.rules) == 0
        assert state.turns == 0 and state.route is None and state.tool_ids == []


@pytest.mark.parametrize(
    ("edit", "detail"),
    [
        ({"format": 2}, "format: unsupported state format 2 (this ctxwise reads 1)"),
        ({"format": True}, "format: unsupported state format True"),
        ({"turnz": 1}, "turnz: unknown key"),
        ({"turns": -1}, "turns: Input should be greater than or equal to 0"),
        ({"turns": "3"}, "turns: Input should be a valid integer"),
        ({"tool_ids": "t1"}, "tool_ids: Input should be a valid list"),
        ({"route": {"origin": "x", "trace": {}}}, "route.origin: Input should be a valid integer"),
        (
            {"facts": {"version": 1, "facts": [{"key": "a", "value": 1}]}},
            "facts: facts[0].value: Input should be a valid string",
        ),
        ({"rules": {"version": 2, "rules": []}}, "rules: version: unsupported version 2"),
    ],
)
def test_session_state_errors_name_the_field(edit: dict[str, Any], detail: str) -> None:
    with pytest.raises(FormatError) as info:
        parse_state({**STATE, **edit}, "s1")
    assert info.value.source == "session 's1'"
    assert info.value.detail.startswith(detail)
