"""The Engine: one turn end to end on real SQLite files and real transcripts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxwise.config import EngineConfig, RouterConfig, SourceConfig
from ctxwise.engine import Engine
from ctxwise.errors import (
    PairingError,
    PinnedOverflowError,
    SessionConflictError,
    UnknownSessionError,
    UnsupportedInputError,
    UsageError,
)
from ctxwise.formats import anthropic, openai, read_transcript
from ctxwise.formats.request import CONTEXT_OPEN
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from ctxwise.policy import PolicyGate, RequireFact
from ctxwise.tokens import get_counter

USER = Message.text_message


def _config(tmp_path: Path, **overrides: object) -> EngineConfig:
    data: dict[str, object] = {
        "store": f"sqlite:///{tmp_path / 'ctxwise.db'}",
        "budget": 4000,
        "system": "You are the support agent of Northwind.",
        **overrides,
    }
    return EngineConfig.model_validate(data)


def _call(id_: str, name: str, **inputs: object) -> Message:
    return Message("assistant", (ToolUseBlock(id_, name, dict(inputs)),))


def _result(id_: str, text: str) -> Message:
    return Message("user", (ToolResultBlock(id_, text),))


def test_a_turn_renders_system_history_and_the_question(tmp_path: Path) -> None:
    with Engine(_config(tmp_path)) as engine:
        result = engine.turn("s1", [USER("user", "Where is order 4417?")])
        counted = engine.counter.count_messages(result.window.messages)
    req = result.request
    assert req["system"][0]["text"].startswith("You are the support agent")
    assert req["system"][0]["cache_control"] == {"type": "ephemeral"}
    # no context block this turn: the breakpoint closes the whole history
    assert req["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "Where is order 4417?",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        }
    ]
    assert result.trace.turn == 1 and result.trace.version == 1
    assert result.trace.tokens.total == counted
    assert result.trace.route.reason == "no router"


def test_history_is_real_turns_and_tool_pairs_render(tmp_path: Path) -> None:
    with Engine(_config(tmp_path)) as engine:
        engine.turn("s", [USER("user", "Check order 4417 please.")])
        r = engine.turn(
            "s",
            [_call("t1", "lookup_order", order_id="4417"), _result("t1", '{"status": "shipped"}')],
        )
    roles = [m["role"] for m in r.request["messages"]]
    assert roles == ["user", "assistant", "user"]
    assert r.request["messages"][1]["content"][0]["type"] == "tool_use"
    assert r.request["messages"][2]["content"][0]["type"] == "tool_result"
    assert anthropic.decode_request(r.request).problems("anthropic") == []
    # no context block: the second breakpoint closes the whole history
    assert r.request["messages"][2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in r.request["messages"][1]["content"][-1]


def test_routed_context_rides_in_the_latest_user_turn(tmp_path: Path) -> None:
    cfg = _config(
        tmp_path,
        router=RouterConfig(keywords={"billing": ["refund", "invoice"]}),
        routes={"billing": ["refund_policy"]},
        fallback=[],
        sources={"refund_policy": SourceConfig(text="Refunds take 5 business days.")},
    )
    with Engine(cfg) as engine:
        chat = engine.turn("s", [USER("user", "hi there")])
        assert chat.trace.route.fallback is not None and chat.trace.chosen == []
        assert "Refunds take" not in str(chat.request)
        billing = engine.turn(
            "s", [USER("assistant", "Hello!"), USER("user", "I want a refund for 4417")]
        )
    assert billing.trace.route.label == "billing"
    assert billing.trace.chosen == ["refund_policy"]
    last = billing.request["messages"][-1]
    assert last["content"][0]["text"].startswith(CONTEXT_OPEN)
    assert "Refunds take 5 business days." in last["content"][0]["text"]
    assert last["content"][-1]["text"] == "I want a refund for 4417"
    # the earlier turns render as they were sent: the context is not stored in them
    assert billing.request["messages"][0] == {"role": "user", "content": "hi there"}
    assert billing.request["messages"][1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    statuses = {s.name: (s.source, s.placement, s.status) for s in billing.trace.sections}
    assert statuses["refund_policy"] == ("refund_policy", "context", "included")


def test_openai_render(tmp_path: Path) -> None:
    with Engine(_config(tmp_path, render="openai")) as engine:
        engine.turn("s", [USER("user", "Check order 4417.")])
        r = engine.turn("s", [_call("c1", "lookup", id="4417"), _result("c1", "shipped")])
    msgs = r.request["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool"]
    assert r.request["max_completion_tokens"] == 1024
    assert openai.decode_request(r.request).problems("openai") == []


def test_facts_and_rules_are_pinned_in_the_system_part(tmp_path: Path) -> None:
    with Engine(_config(tmp_path, budget=1500)) as engine:
        engine.turn(
            "s",
            [USER("user", "Never call me before 9am. My email is ana@example.com, order 4417.")],
        )
        for i in range(30):
            r = engine.turn(
                "s",
                [
                    USER("assistant", f"Noted, working on step {i}. " + "detail " * 30),
                    USER("user", f"Next step {i} please " + "words " * 20),
                ],
            )
        traces = engine.traces("s")
    system = "\n".join(b["text"] for b in r.request["system"])
    assert "- Never call me before 9am." in system
    assert "ana@example.com" in system
    assert r.trace.tokens.total <= 1500
    assert any(t.compacted is not None for t in traces)


def test_the_gate_blocks_until_the_check_has_run(tmp_path: Path) -> None:
    gate = PolicyGate(
        [
            RequireFact(
                "address-first",
                "Verify the address before a refund.",
                ("issue_refund",),
                "address_check:{order_id}",
                satisfied_by="verify_address",
            )
        ]
    )
    with Engine(_config(tmp_path), gate=gate) as engine:
        engine.turn("s", [USER("user", "Refund order 4417")])
        blocked = engine.check_tool("s", "issue_refund", {"order_id": "4417"})
        assert not blocked and "Verify the address" in blocked.reason  # type: ignore[union-attr]
        engine.turn(
            "s",
            [_call("v1", "verify_address", order_id="4417"), _result("v1", "address verified")],
        )
        assert engine.check_tool("s", "issue_refund", {"order_id": "4417"})
        with pytest.raises(UnknownSessionError):
            engine.check_tool("nobody", "issue_refund", {"order_id": "4417"})


def test_bad_input_leaves_the_session_unchanged(tmp_path: Path) -> None:
    with Engine(_config(tmp_path)) as engine:
        engine.turn("s", [USER("user", "hello")])
        before = (engine.sessions.version("s"), engine.sessions.log("s"))
        with pytest.raises(PairingError, match="orphan"):
            engine.turn("s", [_result("nope", "a result for no call")])
        with pytest.raises(PairingError):
            engine.turn("s", [_call("x1", "a"), USER("user", "the call was never answered")])
        with pytest.raises(UsageError, match="awaiting"):
            engine.turn("s", [_call("x2", "a")])
        with pytest.raises(UnsupportedInputError, match=r"new_messages is a int; a turn takes"):
            engine.turn("s", 42)
        assert (engine.sessions.version("s"), engine.sessions.log("s")) == before
    huge = "policy " * 3000
    with Engine(_config(tmp_path, system=huge)) as engine, pytest.raises(PinnedOverflowError):
        engine.turn("s", [USER("user", "hello again")])
    with Engine(_config(tmp_path)) as engine:
        assert (engine.sessions.version("s"), engine.sessions.log("s")) == before


def test_a_reused_tool_id_is_refused(tmp_path: Path) -> None:
    with Engine(_config(tmp_path)) as engine:
        engine.turn("s", [USER("user", "go")])
        engine.turn("s", [_call("t1", "a"), _result("t1", "ok")])
        with pytest.raises(PairingError, match="duplicate_id"):
            engine.turn("s", [_call("t1", "a"), _result("t1", "again")])


def test_expected_version_and_stale_engines(tmp_path: Path) -> None:
    a, b = Engine(_config(tmp_path)), Engine(_config(tmp_path))
    try:
        a.turn("s", [USER("user", "one")], expected_version=0)
        with pytest.raises(SessionConflictError):
            b.turn("s", [USER("assistant", "x"), USER("user", "two")], expected_version=0)
        # without expected_version, a stale engine re-reads and applies on top
        b.turn("s", [USER("assistant", "reply one"), USER("user", "two")])
        r = a.turn("s", [USER("assistant", "reply two"), USER("user", "three")])
        texts = [m.text for m in r.window.messages if m.role != "system"]
        assert texts == ["one", "reply one", "two", "reply two", "three"]
        assert [t.turn for t in a.traces("s")] == [1, 2, 3]
    finally:
        a.close()
        b.close()


def test_a_session_reads_back_in_a_new_engine(tmp_path: Path) -> None:
    with Engine(_config(tmp_path)) as engine:
        first = engine.turn("s", [USER("user", "Order 4417 arrived broken.")])
    with Engine(_config(tmp_path)) as engine:
        again = engine.turn("s", [USER("assistant", "Sorry!"), USER("user", "Refund it.")])
    assert again.request["messages"][0] == {"role": "user", "content": "Order 4417 arrived broken."}
    assert first.trace.version == 1
    assert again.trace.version == 2


@pytest.mark.parametrize("path", ["tool_heavy.jsonl", "subagent.jsonl"])
def test_real_sessions_stay_within_budget(data_dir: Path, tmp_path: Path, path: str) -> None:
    # the default counter (the calibrated Anthropic one for the default Claude
    # model) and its safety margin: every request fits the counted limit
    t = read_transcript(data_dir / "transcripts" / "claude_code" / path)
    defaults = EngineConfig()
    default_counter = get_counter(defaults.counter, model=defaults.model)
    # a third of the session as the budget sees it: counted, and with the margin
    budget = int(
        default_counter.count_messages(t.messages) * (1 + defaults.margin_for(default_counter)) / 3
    )
    msgs = list(t.messages)
    with Engine(_config(tmp_path, budget=budget, system="")) as engine:
        counter = engine.counter
        assert counter.name.startswith("anthropic:")
        last = 0
        for i, m in enumerate(msgs):
            if m.role != "assistant" or i == 0:
                continue
            r = engine.turn("s", msgs[last:i])
            last = i
            calibration = r.trace.calibration
            assert calibration is not None and calibration.margin > 0
            assert calibration.limit == int(budget / (1 + calibration.margin))
            assert r.trace.tokens.total <= calibration.limit < budget
            assert r.trace.tokens.total == counter.count_messages(r.window.messages)
            assert anthropic.decode_request(r.request).problems("anthropic") == []
        assert any(tr.compacted is not None for tr in engine.traces("s"))
        # compacted turns went to long-term memory, verbatim from the log
        assert engine.memory is not None and engine.memory.namespaces()


def test_context_is_a_text_block_after_tool_results() -> None:
    from ctxwise.formats.request import Window

    msgs = (
        USER("user", "go"),
        _call("t", "a"),
        _result("t", "done"),
    )
    placed = Window(("sys",), 1, msgs, "ctx", 2).with_context()
    assert isinstance(placed[2].content[0], ToolResultBlock)
    assert isinstance(placed[2].content[1], TextBlock) and "ctx" in placed[2].content[1].text


def test_server_side_clearing_sends_the_edit_instead(tmp_path: Path) -> None:
    from ctxwise.config import ClearingConfig
    from ctxwise.editing import CONTEXT_MANAGEMENT_BETA

    cfg = _config(tmp_path, clearing=ClearingConfig(mode="server", keep_last=2))
    with Engine(cfg) as engine:
        engine.turn("s", [USER("user", "go")])
        r = engine.turn("s", [_call("t1", "read", path="a"), _result("t1", "x " * 3000)])
    assert r.trace.cleared is None  # nothing cleared here
    edit = r.request["context_management"]["edits"][-1]
    assert edit["type"] == "clear_tool_uses_20250919"
    assert edit["keep"] == {"type": "tool_uses", "value": 2}
    assert r.headers == {"anthropic-beta": CONTEXT_MANAGEMENT_BETA}
    with pytest.raises(Exception, match="needs render = 'anthropic'"):
        _config(tmp_path, render="openai", clearing=ClearingConfig(mode="server"))


def test_a_corrupted_stored_state_is_refused(tmp_path: Path) -> None:
    from ctxwise.errors import FormatError
    from ctxwise.sessions import SessionCommit

    with Engine(_config(tmp_path)) as engine:
        engine.turn("s", [USER("user", "hello")])
        v = engine.sessions.version("s")
        bad = {"format": 1, "turns": "many"}
        engine.sessions.commit("s", v, SessionCommit(bad, 1, [], []))
    with Engine(_config(tmp_path)) as engine, pytest.raises(FormatError, match="turns"):
        engine.turn("s", [USER("assistant", "x"), USER("user", "again")])


def test_a_rule_stated_in_the_session_becomes_a_gate_rule(tmp_path: Path) -> None:
    from ctxwise.config import GatesConfig

    gates = GatesConfig(vocabulary={"refund": "issue_refund", "address check": "verify_address"})
    with Engine(_config(tmp_path, gates=gates)) as engine:
        r = engine.turn(
            "s",
            [USER("user", "Do not refund order 4417 until the address check is done. Thanks.")],
        )
        assert r.trace.gates_added == ["stated-1"]
        blocked = engine.check_tool("s", "issue_refund", {"order_id": "4417"})
        assert not blocked and "address check" in blocked.reason  # type: ignore[union-attr]
        assert engine.check_tool("s", "issue_refund", {"order_id": "9999"})
        engine.turn(
            "s",
            [_call("v1", "verify_address", order_id="4417"), _result("v1", "address verified")],
        )
        assert engine.check_tool("s", "issue_refund", {"order_id": "4417"})
    with Engine(_config(tmp_path)) as engine:  # the session's gate rules persist
        assert engine.check_tool("s", "issue_refund", {"order_id": "4417"})
        assert [r["name"] for r in engine.sessions.load("s").state["gate_rules"]] == ["stated-1"]


def test_a_custom_rule_and_a_stated_one_are_both_checked(tmp_path: Path) -> None:
    # the session's gate was rebuilt from the configured rules' dicts, so once a rule
    # was stated, a rule written as code raised FormatError: unknown kind 'custom'
    from ctxwise.config import GatesConfig

    class NoWeekendRefunds:
        name = "no-weekend-refunds"
        text = "No refunds dated on a weekend."

        def check(self, tool_name: str, tool_input: Any, facts: Any) -> str | None:
            weekend = tool_input.get("date") in ("2026-11-28", "2026-11-29")
            return self.text if tool_name == "issue_refund" and weekend else None

        def to_dict(self) -> dict[str, Any]:
            return {"kind": "custom", "name": self.name}

    gates = GatesConfig(vocabulary={"refund": "issue_refund", "address check": "verify_address"})
    gate = PolicyGate([NoWeekendRefunds()])
    with Engine(_config(tmp_path, gates=gates), gate=gate) as engine:
        engine.turn(
            "s", [USER("user", "Do not refund order 4417 until the address check is done.")]
        )
        stated = engine.check_tool("s", "issue_refund", {"order_id": "4417"})
        assert not stated and "address check" in stated.reason  # type: ignore[union-attr]
        custom = engine.check_tool("s", "issue_refund", {"order_id": "1", "date": "2026-11-28"})
        assert not custom and "weekend" in custom.reason  # type: ignore[union-attr]
        assert engine.check_tool("s", "issue_refund", {"order_id": "1", "date": "2026-11-30"})


def test_aturn_runs_a_turn_for_async_callers(tmp_path: Path) -> None:
    import asyncio

    with Engine(_config(tmp_path)) as engine:
        result = asyncio.run(engine.aturn("s", [USER("user", "Where is order 4417?")]))
        assert result.trace.turn == 1 and engine.sessions.version("s") == 1
