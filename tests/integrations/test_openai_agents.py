"""The OpenAI Agents SDK integration on the real SDK with its own ScriptedModel
(``agents.testing``): the Engine's window reaches the model, gated tools never run,
and CtxwiseSession keeps the SDK's items exactly, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "agents", reason="needs the openai-agents extra: pip install -e '.[openai-agents]'"
)

from agents import Agent, RunConfig, Runner, ToolInputGuardrailData, function_tool
from agents.memory import Session, SessionSettings
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext

from ctxwise import Engine, EngineConfig
from ctxwise.errors import IntegrationError
from ctxwise.integrations.openai_agents import (
    EXTRA,
    CtxwiseSession,
    call_model_input_filter,
    policy_guardrail,
    to_items,
    to_messages,
)
from ctxwise.memory import InMemoryStore, Store
from ctxwise.memory.store import MAX_TEXT_CHARS
from ctxwise.messages import Message, TextBlock
from tests._stores import fresh_schema, postgres_dsn
from tests.conftest import TAU

# --------------------------------------------------------------------------- helpers


def _engine(tmp_path: Path, **overrides: Any) -> Engine:
    data: dict[str, Any] = {
        "store": f"sqlite:///{tmp_path / 'ctxwise.db'}",
        "budget": 4000,
        "render": "openai",
        **overrides,
    }
    return Engine(EngineConfig.model_validate(data))


def _run(agent: Agent[Any], text: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("run_config", RunConfig(tracing_disabled=True))
    return asyncio.run(Runner.run(agent, text, **kwargs))


def _pop_and_rerun_refused(agent: Any, engine: Engine, run_config: Any, session: Any) -> None:
    """Pop the last answer and question (the one with the card number), then run an
    earlier question again under the same session: refused as rewound, nothing
    recorded."""
    asyncio.run(session.pop_item())  # the answer
    asyncio.run(session.pop_item())  # the question with the card number
    version = engine.sessions.version("s")
    with pytest.raises(IntegrationError, match="rewound") as info:
        _run(agent, "And 3+3?", run_config=run_config, session=session)
    assert info.value.reason == "message"
    assert engine.sessions.version("s") == version  # nothing recorded


def _config(engine: Engine, session_id: Any) -> RunConfig:
    return RunConfig(
        call_model_input_filter=call_model_input_filter(engine, session_id),
        tracing_disabled=True,
    )


def _orphans(items: list[Any]) -> list[str]:
    """function_call_outputs without an earlier function_call, and calls never answered."""
    calls: list[str] = []
    bad = []
    for item in items:
        if item.get("type") == "function_call":
            calls.append(item["call_id"])
        elif item.get("type") == "function_call_output":
            if item["call_id"] not in calls:
                bad.append(f"orphan output {item['call_id']}")
            else:
                calls.remove(item["call_id"])
    return bad + [f"unanswered call {c}" for c in calls]


def _input_text(call: Any) -> str:
    return json.dumps(call.input, ensure_ascii=False)


class Recorder:
    """Function tools that record every call they actually run."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    def tools(self, guard: Any = None) -> list[Any]:
        guards = [guard] if guard is not None else None

        def lookup(order_id: str) -> str:
            """Look up an order."""
            self.ran.append(("lookup", {"order_id": order_id}))
            notes = " ".join(f"line {i} of the shipping log for {order_id}" for i in range(60))
            return json.dumps({"order_id": order_id, "status": "shipped", "log": notes})

        def issue_refund(order_id: str) -> str:
            """Refund an order."""
            self.ran.append(("issue_refund", {"order_id": order_id}))
            return f"refunded {order_id}"

        def verify_address(order_id: str) -> str:
            """Check the shipping address of an order."""
            self.ran.append(("verify_address", {"order_id": order_id}))
            return "address verified"

        return [
            function_tool(f, tool_input_guardrails=guards)
            for f in (lookup, issue_refund, verify_address)
        ]


RICH_ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Where is order 4417? ✓"},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "and this photo"},
            {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"},
        ],
    },
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "Checking.", "annotations": [], "logprobs": []},
            {"type": "refusal", "refusal": "not that part"},
        ],
    },
    {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_a",
        "name": "lookup",
        "arguments": '{"order_id": "4417"}',
        "status": "completed",
    },
    {
        "type": "function_call",
        "call_id": "call_b",
        "name": "lookup",
        "arguments": "not json",
    },
    {"type": "function_call_output", "call_id": "call_a", "output": "shipped"},
    {
        "type": "function_call_output",
        "call_id": "call_b",
        "output": [{"type": "input_text", "text": "bad arguments"}],
    },
    {"role": "assistant", "content": "It shipped."},
    {"type": "message", "role": "user", "content": []},
]


# --------------------------------------------------------------------------- mapping


def test_items_round_trip_through_ctxwise_messages_exactly() -> None:
    messages = to_messages(RICH_ITEMS)
    assert [m.role for m in messages] == ["user", "user", "assistant", "user", "assistant", "user"]
    assert [type(b).__name__ for b in messages[2].content] == [
        "ThinkingBlock",
        "TextBlock",
        "TextBlock",
        "ToolUseBlock",
        "ToolUseBlock",
    ]
    instructions, items = to_items(messages)
    assert instructions is None
    assert items == RICH_ITEMS


def test_images_and_documents_from_another_source_become_input_parts() -> None:
    """Messages that did not come from SDK items (an Anthropic transcript with a
    screenshot, say): their images and files were dropped before, silently."""
    from ctxwise.messages import MediaBlock, Message, TextBlock

    png = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    pdf = {"type": "url", "url": "https://example.com/invoice.pdf"}
    messages = [
        Message(
            "user",
            (
                TextBlock("What does this error mean?"),
                MediaBlock("image", png),
                TextBlock("And this invoice?"),
                MediaBlock("document", pdf),
            ),
        )
    ]
    _, items = to_items(messages)
    assert items == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What does this error mean?"},
                {
                    "type": "input_image",
                    "detail": "auto",
                    "image_url": "data:image/png;base64,iVBORw0KGgo=",
                },
                {"type": "input_text", "text": "And this invoice?"},
                {"type": "input_file", "file_url": "https://example.com/invoice.pdf"},
            ],
        }
    ]
    back = to_messages(items)  # items the SDK takes, and ctxwise reads back
    assert [type(b).__name__ for b in back[0].content] == [
        "TextBlock",
        "MediaBlock",
        "TextBlock",
        "MediaBlock",
    ]
    with pytest.raises(IntegrationError, match="cannot hold an image"):
        to_items([Message("assistant", (MediaBlock("image", png),))])


def test_system_and_developer_items_become_instructions() -> None:
    items = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    messages = to_messages(items)
    assert messages[0].role == "system"
    instructions, rest = to_items(messages)
    assert instructions == "Be brief."
    assert rest == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("item", "named"),
    [
        ({"type": "web_search_call", "id": "ws_1", "status": "completed"}, "web_search_call"),
        (
            {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]},
            "input_audio",
        ),
        ({"role": "tool", "content": "x"}, "'tool'"),
        ("just a string", "str"),
    ],
)
def test_an_item_ctxwise_cannot_map_is_named_and_nothing_changes(
    tmp_path: Path, item: Any, named: str
) -> None:
    with _engine(tmp_path) as engine:
        flt = call_model_input_filter(engine, "s")
        given = [{"role": "user", "content": "hi"}, item]
        before = copy.deepcopy(given)
        data = CallModelData(ModelInputData(given, "Be brief."), Agent(name="a"), None)
        with pytest.raises(IntegrationError) as info:
            asyncio.run(flt(data))
        assert info.value.reason == "message" and info.value.framework == "openai-agents"
        assert named in info.value.detail and "unchanged" in info.value.detail
        assert given == before
        assert engine.sessions.version("s") == 0  # nothing written


# --------------------------------------------------------------------------- the filter


def test_the_engines_window_reaches_the_model(tmp_path: Path) -> None:
    """Old tool results cleared, the stated rule pinned in the instructions: the model
    sees the Engine's window; the SDK session keeps the originals."""
    rec = Recorder()
    model = ScriptedModel(
        [
            [function_call("lookup", {"order_id": "1001"}, call_id="c1")],
            [function_call("lookup", {"order_id": "1002"}, call_id="c2")],
            [function_call("lookup", {"order_id": "1003"}, call_id="c3")],
            [assistant_message("All three shipped.")],
        ]
    )
    agent = Agent(name="support", instructions="Be brief.", model=model, tools=rec.tools())
    with (
        _engine(tmp_path, budget=2500, clearing={"keep_last": 1, "trigger": 0.3}) as engine,
        CtxwiseSession("s1", tmp_path / "agents.db") as session,
    ):
        question = "Never call me before 9am. Where are orders 1001, 1002 and 1003?"
        result = _run(agent, question, run_config=_config(engine, "s1"), session=session)
        assert result.final_output == "All three shipped."
        model.assert_complete()
        assert [r[1]["order_id"] for r in rec.ran] == ["1001", "1002", "1003"]
        last = model.calls[-1]
        assert last.system_instructions is not None
        assert last.system_instructions.startswith("Be brief.")
        assert "Never call me before 9am." in last.system_instructions  # pinned rule
        outputs = [i for i in last.input if i.get("type") == "function_call_output"]
        assert len(outputs) == 3
        assert "line 59" not in outputs[0]["output"]  # cleared
        assert "line 59" in outputs[2]["output"]  # the latest stays
        for call in model.calls:
            assert _orphans(list(call.input)) == []
        assert engine.traces("s1")[-1].cleared is not None
        # the agent's function tools, which the SDK sends itself, are in the budget
        tools = [t.tools for t in engine.traces("s1")]
        assert all(
            t is not None and t.given == ["lookup", "issue_refund", "verify_address"] for t in tools
        )
        # what the SDK stored is what the tools returned, not the edited window
        stored = asyncio.run(session.get_items())
        kept = [i for i in stored if i.get("type") == "function_call_output"]
        assert all("line 59" in i["output"] for i in kept)


def test_routed_sources_reach_the_latest_user_turn(tmp_path: Path) -> None:
    config = {
        "router": {"keywords": {"billing": ["refund"]}, "default": "other"},
        "routes": {"billing": ["billing_faq"], "other": ["hours"]},
        "sources": {
            "billing_faq": {"text": "Refunds take five business days."},
            "hours": {"text": "We are open from nine to five."},
        },
        "memory": {"recall": False},
    }
    model = ScriptedModel([[assistant_message("Five days.")], [assistant_message("Hello.")]])
    agent = Agent(name="a", instructions="Be brief.", model=model)
    with _engine(tmp_path, **config) as engine:
        run_config = _config(engine, "s")
        _run(agent, "How long does a refund take?", run_config=run_config)
        assert "Refunds take five business days." in _input_text(model.calls[0])
        assert model.calls[0].input[-1]["content"] == "How long does a refund take?"
        _run(agent, "Hi there", run_config=run_config)
        assert "Refunds take five business days." not in _input_text(model.calls[1])
        assert "We are open from nine to five." in _input_text(model.calls[1])


def test_compaction_keeps_every_tool_pair(tmp_path: Path) -> None:
    """A long run under a small budget: the history is compacted and no call loses
    its output (nor an output its call)."""
    rec = Recorder()
    steps: list[Any] = [
        [function_call("lookup", {"order_id": str(2000 + i)}, call_id=f"c{i}")] for i in range(8)
    ]
    model = ScriptedModel([*steps, [assistant_message("Done.")]])
    agent = Agent(name="a", model=model, tools=rec.tools())
    # the budget holds the agent's three tool definitions too (counted since issue 30)
    with _engine(tmp_path, budget=2600, clearing={"enabled": False}) as engine:
        run_config = _config(engine, "s")
        _run(agent, "Check orders 2000 to 2007.", run_config=run_config)
        assert engine.traces("s")[-1].tokens.total <= 2600
        assert any(t.compacted is not None for t in engine.traces("s"))
        for call in model.calls:
            assert _orphans(list(call.input)) == []
        assert len(rec.ran) == 8


def test_new_items_only_the_engine_keeps_the_history(tmp_path: Path) -> None:
    """Without an SDK session each run passes only the new message: the Engine's
    session still gives the model the earlier turns, once each."""
    model = ScriptedModel([[assistant_message("Noted.")], [assistant_message("Ana.")]])
    agent = Agent(name="a", model=model)
    with _engine(tmp_path) as engine:
        flt = call_model_input_filter(engine, "s")
        run_config = RunConfig(call_model_input_filter=flt, tracing_disabled=True)
        _run(agent, "My name is Ana.", run_config=run_config, hooks=flt.hooks)
        _run(agent, "What is my name?", run_config=run_config, hooks=flt.hooks)
        texts = [i.get("content") for i in model.calls[1].input]
        assert texts.count("My name is Ana.") == 1 and texts[-1] == "What is my name?"
        assert "Noted." in _input_text(model.calls[1])
        roles = [m.role for m in engine.session_messages("s")]
        assert roles == ["user", "assistant", "user", "assistant"]


def test_a_new_filter_resumes_from_the_engines_log(tmp_path: Path) -> None:
    """A fresh filter (a new process) over the same store and the SDK session's full
    history: nothing is recorded twice, the tool ids are not reused."""
    model = ScriptedModel(
        [
            [function_call("lookup", {"order_id": "1"}, call_id="c1")],
            [assistant_message("Shipped.", item_id="m1")],
            [assistant_message("You're welcome.", item_id="m2")],
        ]
    )
    rec = Recorder()
    agent = Agent(name="a", instructions="Be brief.", model=model, tools=rec.tools())
    with CtxwiseSession("s", tmp_path / "agents.db") as session:
        with _engine(tmp_path) as engine:
            _run(agent, "Order 1?", run_config=_config(engine, "s"), session=session)
        with _engine(tmp_path) as engine:
            _run(agent, "Thanks", run_config=_config(engine, "s"), session=session)
            roles = [m.role for m in engine.session_messages("s")]
            assert roles == ["user", "assistant", "user", "assistant", "user"]
            log = engine.sessions.log("s")
            assert not [m for m in log if m["role"] == "system"]  # instructions: system=
        assert _orphans(list(model.calls[-1].input)) == []
        assert [c.system_instructions for c in model.calls] == ["Be brief."] * 3
        assert len(asyncio.run(session.get_items())) == 6


def test_the_model_gets_the_current_instructions_only(tmp_path: Path) -> None:
    """Dynamic instructions (a function of the run) and a handoff change the
    instructions between calls. Each joined the session's system part before, so the
    model got every one ever given, and the pinned system part grew until the turn
    failed with PinnedOverflowError."""
    policy = "You are Northwind's support agent. " + "Follow the refund policy. " * 40
    calls = iter(range(100))

    def dynamic(context: Any, agent: Any) -> str:
        return f"{policy}\nThe time is 10:{next(calls):02d}."

    refunds = Agent(name="refunds", instructions="You handle refunds only.")
    script: list[Any] = [[assistant_message("Noted.")]] * 12
    script += [
        [function_call("transfer_to_refunds", {}, call_id="h1")],
        [assistant_message("Refund started.")],
    ]
    model = ScriptedModel(script)
    refunds.model = model
    triage = Agent(name="triage", instructions=dynamic, model=model, handoffs=[refunds])
    with (
        _engine(tmp_path, budget=4000) as engine,
        CtxwiseSession("s", tmp_path / "a.db") as session,
    ):
        run_config = _config(engine, "s")
        for i in range(12):
            _run(triage, f"Question {i}.", run_config=run_config, session=session)
        _run(triage, "I want a refund.", run_config=run_config, session=session)
        traces = engine.traces("s")
    told = [c.system_instructions for c in model.calls]
    # the instructions of each call are the turn's system prompt: the budget counts them
    assert len(traces) == len(told)
    assert all(
        t.tokens.system >= engine.counter.count(i) for t, i in zip(traces, told, strict=True)
    )
    assert told[:13] == [f"{policy}\nThe time is 10:{i:02d}." for i in range(13)]
    assert told[-1] == "You handle refunds only."  # after the handoff, only the new agent's


def test_an_agent_without_instructions_gets_none_of_the_earlier_ones(tmp_path: Path) -> None:
    model = ScriptedModel(
        [[function_call("transfer_to_plain", {}, call_id="h1")], [assistant_message("Hi.")]]
    )
    plain = Agent(name="plain", model=model)
    triage = Agent(name="triage", instructions="You triage.", model=model, handoffs=[plain])
    with _engine(tmp_path) as engine:
        _run(triage, "Hello.", run_config=_config(engine, "s"))
    assert [c.system_instructions for c in model.calls] == ["You triage.", None]


def test_session_id_from_the_run_context(tmp_path: Path) -> None:
    model = ScriptedModel([[assistant_message("a")], [assistant_message("b")]])
    agent = Agent(name="a", model=model)
    with _engine(tmp_path) as engine:
        run_config = _config(engine, lambda ctx: f"user-{ctx['user']}")
        _run(agent, "one", run_config=run_config, context={"user": 1})
        _run(agent, "two", run_config=run_config, context={"user": 2})
        assert engine.sessions.version("user-1") == 1 and engine.sessions.version("user-2") == 1


def _tau_items(traj: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A tau-bench trajectory (Chat Completions messages) as Responses API items."""
    items: list[dict[str, Any]] = []
    for m in traj:
        if m["role"] in ("system", "user"):
            items.append({"role": m["role"], "content": m["content"] or ""})
        elif m["role"] == "assistant":
            if m.get("content"):
                items.append({"role": "assistant", "content": m["content"]})
            for tc in m.get("tool_calls") or []:
                fn = tc["function"]
                items.append(
                    {
                        "type": "function_call",
                        "call_id": tc["id"],
                        "name": fn["name"],
                        "arguments": fn["arguments"],
                    }
                )
        elif m["role"] == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": m["tool_call_id"],
                    "output": m["content"],
                }
            )
    return items


def test_real_trajectories_never_send_an_orphan(tmp_path: Path, data_dir: Path) -> None:
    """Ten tau-bench trajectories replayed call by call, as the SDK would, at a budget
    that forces clearing and compaction: every window fits, every pair is whole.
    (Some upstream trajectories reuse a tool call id, which the Engine refuses by
    design; those are left out.)"""

    def unique_ids(traj: list[dict[str, Any]]) -> bool:
        ids = [
            tc["id"] for m in traj if m["role"] == "assistant" for tc in m.get("tool_calls") or []
        ]
        return bool(ids) and len(ids) == len(set(ids))

    trajectories = [t for t in json.loads(TAU.read_text()) if unique_ids(t["traj"])][:10]
    with _engine(tmp_path, budget=3000, counter="char") as engine:
        flt = call_model_input_filter(engine, "unused")
        agent: Agent[Any] = Agent(name="a")
        windows = 0
        for n, traj in enumerate(trajectories):
            items = _tau_items(traj["traj"])
            system = items[0]["content"] if items and items[0]["role"] == "system" else None
            body = items[1:] if system is not None else items
            flt.session_id = f"tau-{n}"
            points = [
                i
                for i in range(1, len(body) + 1)
                if i == len(body)
                or body[i].get("role") == "assistant"
                or body[i].get("type") == "function_call"
            ]
            points = [i for i in points if body[i - 1].get("type") != "function_call"]
            for i in points:
                data = CallModelData(ModelInputData(body[:i], system), agent, None)
                out = asyncio.run(flt(data))
                assert _orphans(list(out.input)) == [], (n, i)
                assert flt.last is not None and flt.last.trace.tokens.total <= 3000
                windows += 1
        assert windows > 100
        assert any(t.compacted is not None for n in range(10) for t in engine.traces(f"tau-{n}"))


# --------------------------------------------------------------------------- the gates


def test_a_gated_tool_never_runs_and_the_model_is_told_the_rule(tmp_path: Path) -> None:
    """A rule stated in the conversation becomes a gate: the refund is blocked (the
    model reads the rule's name), runs once the address check is done."""
    rec = Recorder()
    model = ScriptedModel(
        [
            [function_call("issue_refund", {"order_id": "4417"}, call_id="r1")],
            [function_call("verify_address", {"order_id": "4417"}, call_id="v1")],
            [function_call("issue_refund", {"order_id": "4417"}, call_id="r2")],
            [assistant_message("Refunded.")],
        ]
    )
    gates = {"vocabulary": {"refund": "issue_refund", "address check": "verify_address"}}
    with _engine(tmp_path, gates=gates) as engine:
        agent = Agent(name="a", model=model, tools=rec.tools(policy_guardrail(engine, "s")))
        text = "Do not refund order 4417 until the address check is done. Then refund it."
        result = _run(agent, text, run_config=_config(engine, "s"))
        assert result.final_output == "Refunded."
        assert rec.ran == [
            ("verify_address", {"order_id": "4417"}),
            ("issue_refund", {"order_id": "4417"}),
        ]
        told = [i for i in model.calls[1].input if i.get("type") == "function_call_output"]
        assert len(told) == 1 and "stated-1" in told[0]["output"]
        assert "address check" in told[0]["output"]
        guard = result.tool_input_guardrail_results[0]
        assert guard.output.behavior["type"] == "reject_content"
        assert guard.output.output_info["rule"] == "stated-1"


def test_a_configured_rule_blocks_without_a_filter(tmp_path: Path) -> None:
    """The guardrail alone, on a session the Engine has not seen: the configured rules."""
    rec = Recorder()
    rule = {
        "kind": "forbid",
        "name": "no-refunds-for-9999",
        "text": "Never refund order 9999.",
        "tools": ["issue_refund"],
        "when": {"order_id": "9999"},
    }
    model = ScriptedModel(
        [
            [function_call("issue_refund", {"order_id": "9999"}, call_id="r1")],
            [function_call("issue_refund", {"order_id": "1234"}, call_id="r2")],
            [assistant_message("One refund done.")],
        ]
    )
    with _engine(tmp_path, gates={"rules": [rule]}) as engine:
        agent = Agent(name="a", model=model, tools=rec.tools(policy_guardrail(engine, "new")))
        _run(agent, "Refund 9999 and 1234.")
        assert rec.ran == [("issue_refund", {"order_id": "1234"})]
        told = [i for i in model.calls[1].input if i.get("type") == "function_call_output"]
        assert "no-refunds-for-9999" in told[0]["output"]
        assert "Never refund order 9999." in told[0]["output"]


def _guard_data(arguments: str) -> ToolInputGuardrailData:
    ctx = ToolContext(
        context=None, tool_name="issue_refund", tool_call_id="r1", tool_arguments=arguments
    )
    return ToolInputGuardrailData(context=ctx, agent=Agent(name="a"))


@pytest.mark.parametrize(
    ("session_id", "arguments", "why"),
    [
        ("s", "[1, 2]", "not an object"),
        ("s", "{not json", "not JSON"),
        (lambda ctx: ctx["missing"], '{"order_id": "1"}', "not subscriptable"),
        (lambda ctx: "", '{"order_id": "1"}', "session id"),
    ],
)
def test_a_gate_that_cannot_be_evaluated_fails_closed(
    tmp_path: Path, session_id: Any, arguments: str, why: str
) -> None:
    with _engine(tmp_path) as engine:
        guard = policy_guardrail(engine, session_id)
        out = asyncio.run(guard.run(_guard_data(arguments)))
        assert out.behavior["type"] == "reject_content"
        assert why in out.behavior["message"] and "not run" in out.behavior["message"]
        assert out.output_info["allowed"] is False


def test_a_store_that_fails_blocks_the_call(tmp_path: Path) -> None:
    rec = Recorder()
    model = ScriptedModel(
        [
            [function_call("issue_refund", {"order_id": "1"}, call_id="r1")],
            [assistant_message("Could not.")],
        ]
    )
    engine = _engine(tmp_path)
    engine.close()  # its session store is closed: nothing can be checked
    agent = Agent(name="a", model=model, tools=rec.tools(policy_guardrail(engine, "s")))
    _run(agent, "Refund order 1.")
    assert rec.ran == []
    told = [i for i in model.calls[1].input if i.get("type") == "function_call_output"]
    assert "could not check" in told[0]["output"]


def test_an_allowed_call_runs(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        guard = policy_guardrail(engine, "s")
        out = asyncio.run(guard.run(_guard_data('{"order_id": "1"}')))
        assert out.behavior["type"] == "allow" and out.output_info["allowed"] is True


# --------------------------------------------------------------------------- the session


@pytest.fixture(params=["sqlite-path", "sqlite-url", "memory", "postgres"])
def make_session(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Sessions that share one backing store for the test."""
    made: list[CtxwiseSession] = []
    shared: Store | None = None
    kind = request.param
    if kind == "postgres":
        dsn = postgres_dsn()
        schema = fresh_schema()
    elif kind == "memory":
        shared = InMemoryStore()

    def factory(session_id: str, **kwargs: Any) -> CtxwiseSession:
        if kind == "sqlite-path":
            s = CtxwiseSession(session_id, tmp_path / "agents.db", **kwargs)
        elif kind == "sqlite-url":
            s = CtxwiseSession(session_id, f"sqlite:///{tmp_path / 'agents.db'}", **kwargs)
        elif kind == "memory":
            assert shared is not None
            s = CtxwiseSession(session_id, shared, **kwargs)
        else:
            s = CtxwiseSession(session_id, dsn, schema=schema, dim=8, **kwargs)
        made.append(s)
        return s

    yield factory
    if kind == "postgres" and made:
        made[0].store.drop()  # type: ignore[attr-defined]
    for s in made:
        s.close()


ODD_ITEMS: list[Any] = [
    *RICH_ITEMS,
    {"role": "user", "content": "lone \ud800 surrogate, emoji 🙂, NUL-free, \u2028 separator"},
    {"type": "function_call_output", "call_id": "x", "output": json.dumps({"n": 1.5e300})},
    {"role": "user", "content": "nested", "extra": {"a": [1, 2.5, None, True, {"b": []}]}},
]


def test_items_round_trip_exactly_in_order(make_session: Any) -> None:
    session = make_session("s1")
    assert isinstance(session, Session)
    asyncio.run(session.add_items(ODD_ITEMS[:5]))
    asyncio.run(session.add_items(ODD_ITEMS[5:]))
    assert asyncio.run(session.get_items()) == ODD_ITEMS
    assert asyncio.run(session.get_items(limit=3)) == ODD_ITEMS[-3:]
    assert asyncio.run(session.get_items(limit=0)) == []
    assert asyncio.run(session.get_items(limit=100)) == ODD_ITEMS
    again = make_session("s1")  # another process on the same store
    assert asyncio.run(again.get_items()) == ODD_ITEMS


def test_pop_item_pops_the_last(make_session: Any) -> None:
    session = make_session("s1")
    asyncio.run(session.add_items(ODD_ITEMS[:3]))
    assert asyncio.run(session.pop_item()) == ODD_ITEMS[2]
    assert asyncio.run(session.get_items()) == ODD_ITEMS[:2]
    assert asyncio.run(session.pop_item()) == ODD_ITEMS[1]
    assert asyncio.run(session.pop_item()) == ODD_ITEMS[0]
    assert asyncio.run(session.pop_item()) is None
    assert asyncio.run(session.get_items()) == []


def test_sessions_are_isolated_and_clear_clears_one(make_session: Any) -> None:
    a, b, c = make_session("user/1"), make_session("user%2F1"), make_session("user-1")
    asyncio.run(a.add_items([{"role": "user", "content": "a"}]))
    asyncio.run(b.add_items([{"role": "user", "content": "b"}]))
    asyncio.run(c.add_items([{"role": "user", "content": "c"}]))
    assert asyncio.run(a.get_items()) == [{"role": "user", "content": "a"}]
    assert asyncio.run(b.get_items()) == [{"role": "user", "content": "b"}]
    asyncio.run(a.clear_session())
    assert asyncio.run(a.get_items()) == []
    assert asyncio.run(a.pop_item()) is None
    assert asyncio.run(b.get_items()) == [{"role": "user", "content": "b"}]
    assert asyncio.run(c.get_items()) == [{"role": "user", "content": "c"}]
    asyncio.run(a.add_items([{"role": "user", "content": "a2"}]))
    assert asyncio.run(a.get_items()) == [{"role": "user", "content": "a2"}]


def test_an_item_larger_than_a_store_item_round_trips(make_session: Any) -> None:
    session = make_session("big")
    big = {"role": "user", "content": "x" * (2 * MAX_TEXT_CHARS + 10)}
    items = [{"role": "user", "content": "before"}, big, {"role": "user", "content": "after"}]
    asyncio.run(session.add_items(items))
    assert asyncio.run(session.get_items()) == items
    assert asyncio.run(session.get_items(limit=2)) == items[1:]
    assert asyncio.run(session.pop_item()) == items[2]
    assert asyncio.run(session.pop_item()) == big
    assert asyncio.run(session.get_items()) == items[:1]


def test_session_settings_limit(make_session: Any) -> None:
    session = make_session("s", session_settings=SessionSettings(limit=2))
    asyncio.run(session.add_items([{"role": "user", "content": str(i)} for i in range(5)]))
    assert [i["content"] for i in asyncio.run(session.get_items())] == ["3", "4"]
    assert len(asyncio.run(session.get_items(limit=4))) == 4


def test_an_item_that_is_not_json_is_refused_and_nothing_written(make_session: Any) -> None:
    session = make_session("s")
    with pytest.raises(IntegrationError, match="session item 1") as info:
        asyncio.run(session.add_items([{"role": "user", "content": "ok"}, {"x": object()}]))
    assert info.value.reason == "message"
    assert asyncio.run(session.get_items()) == []


def test_async_calls_as_the_sdk_makes_them(make_session: Any) -> None:
    """Coroutines; concurrent appends from one event loop each land whole."""
    session = make_session("s")
    for name in ("get_items", "add_items", "pop_item", "clear_session"):
        assert inspect.iscoroutinefunction(getattr(session, name))

    async def many() -> list[Any]:
        batches = [[{"role": "user", "content": f"{b}.{i}"} for i in range(3)] for b in range(8)]
        await asyncio.gather(*(session.add_items(batch) for batch in batches))
        return await session.get_items()

    got = [i["content"] for i in asyncio.run(many())]
    assert sorted(got) == sorted(f"{b}.{i}" for b in range(8) for i in range(3))
    for k in range(0, 24, 3):  # each batch is contiguous and in order
        b = got[k].split(".")[0]
        assert got[k : k + 3] == [f"{b}.0", f"{b}.1", f"{b}.2"]


def test_runner_runs_on_the_session(make_session: Any) -> None:
    model = ScriptedModel([[assistant_message("Hi Ana.")], [assistant_message("Ana.")]])
    agent = Agent(name="a", model=model)
    session = make_session("conv")
    _run(agent, "I am Ana.", session=session)
    _run(agent, "Who am I?", session=make_session("conv"))
    seen = [i.get("content") for i in model.calls[1].input]
    assert seen[0] == "I am Ana." and seen[-1] == "Who am I?"
    assert len(asyncio.run(session.get_items())) == 4


def test_for_engine_uses_the_engines_store(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine, CtxwiseSession.for_engine(engine, "s") as session:
        asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
        assert engine.memory is not None
        assert engine.memory.count(("ctxwise", EXTRA, "s")) == 1


def test_a_bad_store_is_a_config_error() -> None:
    with pytest.raises(IntegrationError) as info:
        CtxwiseSession("s", 42)  # type: ignore[arg-type]
    assert info.value.reason == "config"


@pytest.mark.parametrize("make", [call_model_input_filter, policy_guardrail])
def test_something_that_is_not_an_engine_is_a_config_error(make: Any) -> None:
    # it was a TypeError ("cannot create weak reference"), or one at the first model call
    for bad in ("ctxwise.toml", None):
        with pytest.raises(IntegrationError, match="must be a ctxwise Engine") as info:
            make(bad, "s")
        assert info.value.reason == "config"


def test_a_closed_session_says_so(tmp_path: Path) -> None:
    session = CtxwiseSession("s", tmp_path / "agents.db")
    asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
    session.close()
    calls: list[Callable[[], Any]] = [
        session.get_items,
        lambda: session.add_items([{"role": "user", "content": "again"}]),
        session.pop_item,
        session.clear_session,
    ]
    for call in calls:
        with pytest.raises(IntegrationError, match="closed") as info:
            asyncio.run(call())
        assert info.value.reason == "config"
    session.close()  # closing twice is fine
    with CtxwiseSession("s", tmp_path / "agents.db") as reopened:
        assert asyncio.run(reopened.get_items()) == [{"role": "user", "content": "hi"}]


def test_items_that_are_not_a_list_are_refused(make_session: Any) -> None:
    session = make_session("s")
    for bad in (None, "hi", {"role": "user", "content": "hi"}):
        with pytest.raises(IntegrationError, match="not a list") as info:
            asyncio.run(session.add_items(bad))
        assert info.value.reason == "message"
    assert asyncio.run(session.get_items()) == []


def test_a_version_outside_the_range_is_refused(tmp_path: Path) -> None:
    code = (
        "import importlib.metadata as m\n"
        "real = m.version\n"
        "m.version = lambda d: '0.30.0' if d == 'openai-agents' else real(d)\n"
        "from ctxwise.errors import IntegrationError\n"
        "try:\n"
        "    import ctxwise.integrations.openai_agents\n"
        "except IntegrationError as e:\n"
        "    print(e.reason, e.supported, e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.startswith("version >=0.24,<0.25") and "0.30.0" in out


def _reasoning_script() -> list[Any]:
    from openai.types.responses import ResponseReasoningItem
    from openai.types.responses.response_reasoning_item import Summary

    thought = ResponseReasoningItem(
        id="rs_1",
        type="reasoning",
        summary=[Summary(text="I need the order first.", type="summary_text")],
        encrypted_content="opaque-bytes",
    )
    return [
        [thought, function_call("lookup", {"order_id": "7"}, call_id="c1", item_id="fc_1")],
        [assistant_message("Order 7 shipped.", item_id="msg_2")],
        [assistant_message("Bye.", item_id="msg_3")],
    ]


@pytest.mark.parametrize("render", ["openai", "anthropic"])
def test_with_nothing_to_edit_the_model_gets_what_the_sdk_would_send(
    tmp_path: Path, render: str
) -> None:
    """Reasoning, calls, outputs and messages come back item for item, ids included."""
    plain, filtered = ScriptedModel(_reasoning_script()), ScriptedModel(_reasoning_script())
    config = {"budget": 100_000, "render": render, "facts": {"extractor": "none", "rules": False}}
    with _engine(tmp_path, **config) as engine:
        for model, run_config in ((plain, None), (filtered, _config(engine, "s"))):
            agent = Agent(name="a", instructions="Be brief.", model=model, tools=Recorder().tools())
            with CtxwiseSession("s", tmp_path / f"{id(model)}.db") as session:
                kwargs: dict[str, Any] = {"session": session}
                if run_config is not None:
                    kwargs["run_config"] = run_config
                _run(agent, "Where is order 7?", **kwargs)
                _run(agent, "Thanks", **kwargs)
    assert len(plain.calls) == len(filtered.calls) == 3
    for a, b in zip(plain.calls, filtered.calls, strict=True):
        assert b.input == a.input
        assert b.system_instructions == a.system_instructions == "Be brief."
    assert any(i.get("type") == "reasoning" for i in filtered.calls[-1].input)


def test_hooks_and_an_sdk_session_record_each_item_once(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            [function_call("lookup", {"order_id": "1"}, call_id="c1")],
            [assistant_message("Shipped.", item_id="m1")],
            [assistant_message("Bye.", item_id="m2")],
        ]
    )
    agent = Agent(name="a", model=model, tools=Recorder().tools())
    with _engine(tmp_path) as engine, CtxwiseSession("s", tmp_path / "agents.db") as session:
        flt = call_model_input_filter(engine, "s")
        run_config = RunConfig(call_model_input_filter=flt, tracing_disabled=True)
        _run(agent, "Order 1?", run_config=run_config, session=session, hooks=flt.hooks)
        _run(agent, "Thanks", run_config=run_config, session=session, hooks=flt.hooks)
        roles = [m.role for m in engine.session_messages("s")]
        assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
        assert _input_text(model.calls[-1]).count("Order 1?") == 1


def test_a_session_rewound_with_pop_item_is_refused_not_sent_the_popped_turns(
    tmp_path: Path,
) -> None:
    """The SDK's correction flow: pop the last answer and question from the session,
    ask again. The Engine's session still holds them; the model must not get them
    (it got them, and the conversation twice, before)."""
    model = ScriptedModel(
        [[assistant_message("4.")], [assistant_message("6.")], [assistant_message("6.")]]
    )
    agent = Agent(name="a", model=model)
    with _engine(tmp_path) as engine, CtxwiseSession("s", tmp_path / "agents.db") as session:
        run_config = _config(engine, "s")
        _run(agent, "What is 2+2?", run_config=run_config, session=session)
        _run(
            agent,
            "And 3+3? My card is 4111 1111 1111 1111.",
            run_config=run_config,
            session=session,
        )
        _pop_and_rerun_refused(agent, engine, run_config, session)
        assert len(model.calls) == 2  # the model never got the popped turns
        # under a session of its own the rewound conversation goes on
        _run(agent, "And 3+3?", run_config=_config(engine, "s-rewound"), session=session)
    sent = _input_text(model.calls[-1])
    assert "4111" not in sent and sent.count("What is 2+2?") == 1


def _sent_tokens(engine: Engine, call: Any) -> int:
    """The tokens of a model call's input (instructions, then items), counted with the
    Engine's counter, each turn as ctxwise reads the items (a run of outputs is one
    turn): the context block is an item of its own, a turn with its overhead."""
    messages: list[Message] = []
    if call.system_instructions:
        messages.append(Message.text_message("system", call.system_instructions))
    messages.extend(to_messages(list(call.input)))
    return engine.counter.count_messages(messages)


@pytest.mark.parametrize(
    ("first", "later", "budget"),
    [(1, 40, 1500), (5, 120, 2500), (0, 60, 1500), (30, 31, 1800), (60, 2, 1500)],
)
def test_dynamic_instructions_longer_than_the_first_stay_within_the_budget(
    tmp_path: Path, first: int, later: int, budget: int
) -> None:
    """The first instructions were recorded and counted, later ones sent in their
    place: longer later instructions put the request over the budget by the difference."""
    calls = iter(range(100))
    line = "Quote the order id in every answer. "

    def grows(context: Any, agent: Any) -> str:
        n = next(calls)
        return f"You track orders (call {n}). " + line * (first if n == 0 else later)

    steps = 6
    script: list[Any] = [
        [function_call("lookup", {"order_id": str(i)}, call_id=f"c{i}")] for i in range(steps)
    ]
    model = ScriptedModel([*script, [assistant_message("Done.")]])
    agent = Agent(name="a", instructions=grows, model=model, tools=Recorder().tools())
    with _engine(tmp_path, budget=budget) as engine:
        _run(agent, "Where are my orders?", run_config=_config(engine, "s"))
        assert len(model.calls) == steps + 1
        for i, call in enumerate(model.calls):
            assert call.system_instructions.startswith(f"You track orders (call {i}).")
            assert call.system_instructions.count("You track orders") == 1
            assert _orphans(list(call.input)) == []
            assert _sent_tokens(engine, call) <= budget
        assert any(t.cleared or t.compacted is not None for t in engine.traces("s"))


@pytest.mark.parametrize("now", ["You track orders.", "You refund orders now."])
def test_a_session_an_older_ctxwise_recorded_sends_its_instructions_once(
    tmp_path: Path, now: str
) -> None:
    """An older ctxwise recorded the first instructions in the session (they stay among
    its system texts): this call's instructions are sent and counted once, the recorded
    ones never sent next to them (and, when they differ, still counted)."""
    first = "You track orders."
    model = ScriptedModel([[assistant_message("Shipped.")]])
    agent = Agent(name="a", instructions=now, model=model)
    with _engine(tmp_path) as engine:
        mark = {EXTRA: {"instructions": True}}
        engine.turn(  # as the older filter recorded them
            "s",
            [Message("system", (TextBlock(first, mark),)), Message.text_message("user", "Hi.")],
        )
        _run(agent, "Where is order 4417?", run_config=_config(engine, "s"))
        trace = engine.traces("s")[-1]
    assert [c.system_instructions for c in model.calls] == [now]
    if now == first:  # counted once, as sent
        assert trace.tokens.system == engine.counter.count(now)
    else:  # the recorded ones still count: the request is that much under the budget
        assert trace.tokens.system == engine.counter.count(f"{now}\n\n{first}")


@pytest.mark.parametrize("budget", range(1400, 1408))
@pytest.mark.parametrize("turn", ["tools", "text"])
def test_the_context_items_overhead_is_within_the_budget(
    tmp_path: Path, budget: int, turn: str
) -> None:
    """The context block goes out as an input item of its own (after the tool outputs
    of a tool-result turn, before the text of a text turn), but the Engine counts it
    inside that turn: a window filled to the budget went over it by the item's
    overhead. (Counted by char with no safety margin, as it was found: the window
    fills to the budget to a token.)"""
    config = {
        "counter": "char",
        "safety_margin": 0,
        "sources": {"faq": {"text": "Orders ship from the north warehouse. " * 400}},
        "routes": {"default": ["faq"]},
        "router": {"keywords": {"default": ["order"]}, "default": "default"},
        "memory": {"recall": False},
        "clearing": {"enabled": False},
    }
    if turn == "tools":
        script: list[Any] = [[function_call("lookup", {"order_id": "1"}, call_id="c1")]]
    else:
        script = []
    model = ScriptedModel([*script, [assistant_message("Shipped.")]])
    agent = Agent(name="a", instructions="Be brief.", model=model, tools=Recorder().tools())
    with _engine(tmp_path, budget=budget, **config) as engine:
        _run(agent, "Where is order 1?", run_config=_config(engine, "s"))
        traces = engine.traces("s")
    assert len(model.calls) == len(script) + 1
    last = model.calls[-1]
    assert "<context>" in _input_text(last)  # routed context filled the room
    assert traces[-1].tokens.total >= budget - 4
    for call in model.calls:
        assert _orphans(list(call.input)) == []
        assert _sent_tokens(engine, call) <= budget


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5, 7])
@pytest.mark.parametrize("where", ["session", "run_config"])
def test_a_history_read_with_a_limit_is_not_a_rewind(
    tmp_path: Path, limit: int, where: str
) -> None:
    """With SessionSettings(limit=N) the SDK hands over the session's last N items (and
    leaves out the outputs whose calls the limit cut): that input starts inside the
    Engine's session. It was read as all new, recorded twice (a PairingError when a
    call id came again), instead of the history it is."""
    parallel = [
        function_call("lookup", {"order_id": "1"}, call_id="c1"),
        function_call("verify_address", {"order_id": "1"}, call_id="c2"),
    ]
    script: list[Any] = [
        parallel,
        [assistant_message("Order 1 shipped.")],
        [function_call("lookup", {"order_id": "2"}, call_id="c3")],
        [assistant_message("Order 2 shipped.")],
        [assistant_message("You are welcome.")],
        [function_call("issue_refund", {"order_id": "2"}, call_id="c4")],
        [assistant_message("Refunded.")],
    ]
    model = ScriptedModel(script)
    agent = Agent(name="a", model=model, tools=Recorder().tools())
    settings = SessionSettings(limit=limit)
    with (
        _engine(tmp_path, **{"clearing": {"enabled": False}}) as engine,
        CtxwiseSession(
            "s", tmp_path / "agents.db", session_settings=settings if where == "session" else None
        ) as session,
    ):
        run_config = _config(engine, "s")
        if where == "run_config":
            run_config.session_settings = settings
        prompts = ["Where is order 1?", "And order 2?", "Thanks.", "Refund order 2."]
        for prompt in prompts:
            _run(agent, prompt, run_config=run_config, session=session)
        assert len(model.calls) == len(script)
        held = [m.text for m in engine.session_messages("s") if m.role == "user" and m.text]
    assert held == prompts  # each recorded once
    # the model got the whole conversation once: what the Engine holds, not N items
    last = list(model.calls[-1].input)
    assert _orphans(last) == []
    calls = [i["call_id"] for i in last if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in last if i.get("type") == "function_call_output"]
    assert calls == outputs == ["c1", "c2", "c3", "c4"]
    assert [i["content"] for i in last if i.get("role") == "user"] == prompts


@pytest.mark.parametrize("limit", [1, 2, 3, 5])
def test_a_rewind_under_a_limit_is_refused(tmp_path: Path, limit: int) -> None:
    """Popping the last answer and question and asking again, with the session read
    with a limit: the input starts inside the Engine's session and stops before its
    end. That was read as new items, and the model got the popped turns and the
    history twice."""
    model = ScriptedModel([[assistant_message(f"{n}.")] for n in (4, 6, 8, 6)])
    agent = Agent(name="a", model=model)
    settings = SessionSettings(limit=limit)
    with (
        _engine(tmp_path) as engine,
        CtxwiseSession("s", tmp_path / "agents.db", session_settings=settings) as session,
    ):
        run_config = _config(engine, "s")
        _run(agent, "What is 2+2?", run_config=run_config, session=session)
        _run(agent, "And 3+3?", run_config=run_config, session=session)
        _run(
            agent,
            "And 4+4? My card is 4111 1111 1111 1111.",
            run_config=run_config,
            session=session,
        )
        _pop_and_rerun_refused(agent, engine, run_config, session)
        assert len(model.calls) == 3  # the model never got the popped turns twice
