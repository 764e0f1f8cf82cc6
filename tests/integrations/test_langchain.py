"""CtxwiseMiddleware on LangChain's own agent loop (create_agent, a compiled LangGraph
graph) with LangChain's fake chat model, a real Engine on SQLite files in tmp_path."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain", reason="needs the langchain extra: pip install -e '.[langchain]'")

from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse, SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    FakeMessagesListChatModel,
)
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from ctxwise.config import EngineConfig
from ctxwise.engine import Engine
from ctxwise.errors import IntegrationError, PairingError
from ctxwise.integrations._framework import require_framework
from ctxwise.integrations.langchain import (
    SUPPORTED,
    CtxwiseMiddleware,
    from_langchain,
    to_langchain,
)
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from ctxwise.pairing import problems
from ctxwise.policy import Forbid, PolicyGate, RequireFact


class ScriptedModel(FakeMessagesListChatModel):
    """LangChain's fake chat model, recording every input it is given."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def _engine(tmp_path: Path, gate: PolicyGate | None = None, **cfg: Any) -> Engine:
    config = EngineConfig.model_validate(
        {"store": f"sqlite:///{tmp_path / 'ctxwise.db'}", "budget": 4000, **cfg}
    )
    return Engine(config, gate=gate)


def _call(id_: str, name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": id_, "type": "tool_call"}


CALLS: list[tuple[str, str]] = []


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    CALLS.append(("lookup", order_id))
    return f"Order {order_id}: shipped. " + "Tracking event logged. " * 60


@tool
def issue_refund(order_id: str) -> str:
    """Refund an order."""
    CALLS.append(("issue_refund", order_id))
    return f"refunded {order_id}"


@pytest.fixture(autouse=True)
def _clear_calls() -> None:
    CALLS.clear()


def _strict(messages: list[BaseMessage]) -> list[Message]:
    """Each LangChain message on its own (so a split pair shows)."""
    out: list[Message] = []
    for m in messages:
        if isinstance(m, ToolMessage):
            out.append(Message("user", (ToolResultBlock(m.tool_call_id, str(m.content)),)))
        elif isinstance(m, AIMessage):
            calls = tuple(ToolUseBlock(str(c["id"]), c["name"], c["args"]) for c in m.tool_calls)
            out.append(Message("assistant", calls or (TextBlock(str(m.content)),)))
        elif not isinstance(m, SystemMessage):
            out.append(Message.text_message("user", str(m.content)))
    return out


# ---------------------------------------------------------------- the window


def test_the_edited_window_reaches_the_model(tmp_path: Path) -> None:
    model = ScriptedModel(
        responses=[
            AIMessage("", tool_calls=[_call("c1", "lookup", order_id="1")]),
            AIMessage("", tool_calls=[_call("c2", "lookup", order_id="2")]),
            AIMessage("", tool_calls=[_call("c3", "lookup", order_id="3")]),
            AIMessage("", tool_calls=[_call("c4", "lookup", order_id="4")]),
            AIMessage("All four orders have shipped."),
        ]
    )
    with _engine(tmp_path, budget=1200, clearing={"keep_last": 1}) as engine:
        mw = CtxwiseMiddleware(engine, session_id="s1")
        agent = create_agent(model, [lookup], system_prompt="You track orders.", middleware=[mw])
        out = agent.invoke(
            {"messages": [HumanMessage("Never call me before 9am. Where are orders 1 to 4?")]}
        )
        traces = engine.traces("s1")
    assert out["messages"][-1].content == "All four orders have shipped."
    assert len(model.seen) == 5
    last = model.seen[-1]
    system = last[0]
    assert isinstance(system, SystemMessage)
    assert "You track orders." in system.text and "Never call me before 9am." in system.text
    # the state holds every full result; the model got fewer tokens than that
    full = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(full) == 4 and all("Tracking event" in str(m.content) for m in full)
    sent = [m for m in last if isinstance(m, ToolMessage)]
    assert sum(len(str(m.content)) for m in sent) < sum(len(str(m.content)) for m in full)
    assert any(t.cleared or t.compacted for t in traces)
    assert all(t.tokens.total <= 1200 for t in traces)
    assert not problems(_strict(last))
    assert mw.last is not None and mw.last.trace.turn == 5
    # the agent's tool definitions, which LangChain sends itself, are in the budget
    assert all(t.tools is not None and t.tools.given == ["lookup"] for t in traces)
    assert all(t.tokens.tools > 0 for t in traces)


def test_each_message_reaches_the_engine_once(tmp_path: Path) -> None:
    model = ScriptedModel(
        responses=[
            AIMessage("", tool_calls=[_call("c1", "lookup", order_id="1")]),
            AIMessage("Shipped."),
        ]
    )
    with _engine(tmp_path) as engine:
        agent = create_agent(
            model, [lookup], middleware=[CtxwiseMiddleware(engine, session_id="s")]
        )
        agent.invoke({"messages": [HumanMessage("Where is order 1?")]})
        log = engine.sessions.log("s")
    # human, AI(call), tool result: the final reply is not an input yet
    assert [m["role"] for m in log] == ["user", "assistant", "user"]


def test_a_checkpointed_graph_keeps_one_session_per_thread(tmp_path: Path) -> None:
    model = ScriptedModel(
        responses=[
            AIMessage("", tool_calls=[_call("c1", "lookup", order_id="1")]),
            AIMessage("Order 1 has shipped."),
            AIMessage("", tool_calls=[_call("c2", "lookup", order_id="2")]),
            AIMessage("Order 2 has shipped."),
        ]
    )
    # a budget the second run's history cannot fit even with the context's share, so
    # it is compacted (keeping the latest call and its result verbatim)
    with _engine(tmp_path, budget=750) as engine:
        mw = CtxwiseMiddleware(engine, persist=True)
        agent = create_agent(model, [lookup], middleware=[mw], checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "thread-7"}}
        agent.invoke({"messages": [HumanMessage("Where is order 1?")]}, config)
        out = agent.invoke({"messages": [HumanMessage("And order 2?")]}, config)
        log = engine.sessions.log("thread-7")
        traces = engine.traces("thread-7")
    assert out["messages"][-1].content == "Order 2 has shipped."
    # every message of both runs was recorded once, under the thread id
    roles = [m["role"] for m in log]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert len(traces) == 4
    # persisted: the compacted history replaced the graph state
    assert any(t.compacted for t in traces)
    state = out["messages"]
    assert any(m.additional_kwargs.get("lc_source") == "ctxwise" for m in state)
    assert not problems(_strict(state))
    assert sum(isinstance(m, ToolMessage) for m in state) < 2


def test_async_agent(tmp_path: Path) -> None:
    model = ScriptedModel(
        responses=[
            AIMessage("", tool_calls=[_call("c1", "issue_refund", order_id="4417")]),
            AIMessage("I cannot refund that."),
        ]
    )
    gate = PolicyGate([Forbid("no-refunds", "Never issue refunds.", ("issue_refund",))])
    with _engine(tmp_path, gate=gate) as engine:
        agent = create_agent(
            model, [issue_refund], middleware=[CtxwiseMiddleware(engine, session_id="a")]
        )
        out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("Refund order 4417")]}))
    assert CALLS == []
    result = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert result.status == "error" and "no-refunds" in str(result.content)


# ---------------------------------------------------------------- gates


def test_a_gated_tool_never_runs(tmp_path: Path) -> None:
    model = ScriptedModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[
                    _call("c1", "lookup", order_id="4417"),
                    _call("c2", "issue_refund", order_id="4417"),
                ],
            ),
            AIMessage("The refund is not allowed."),
        ]
    )
    gate = PolicyGate([Forbid("no-refunds", "Never issue refunds.", ("issue_refund",))])
    with _engine(tmp_path, gate=gate) as engine:
        agent = create_agent(
            model, [lookup, issue_refund], middleware=[CtxwiseMiddleware(engine, session_id="g")]
        )
        out = agent.invoke({"messages": [HumanMessage("Refund order 4417")]})
    assert CALLS == [("lookup", "4417")]
    results = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert results["c1"].status == "success"
    blocked = results["c2"]
    assert blocked.status == "error"
    assert "no-refunds" in str(blocked.content) and "Never issue refunds." in str(blocked.content)
    # the model saw the refusal, paired with its call
    assert any(isinstance(m, ToolMessage) and m.tool_call_id == "c2" for m in model.seen[-1])


def test_a_gate_that_cannot_be_evaluated_fails_closed(tmp_path: Path) -> None:
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
    model = ScriptedModel(
        responses=[
            AIMessage("", tool_calls=[_call("c1", "issue_refund", order="4417")]),
            AIMessage("Not possible."),
        ]
    )
    with _engine(tmp_path, gate=gate) as engine:
        agent = create_agent(
            model, [issue_refund], middleware=[CtxwiseMiddleware(engine, session_id="f")]
        )
        out = agent.invoke({"messages": [HumanMessage("Refund it")]})
        # no session yet: the gate cannot be read, so the call is refused
        fresh = CtxwiseMiddleware(engine, session_id="nobody")

        class Request:
            tool_call: Any = _call("x1", "issue_refund", order_id="1")
            runtime: Any = None

        refused = fresh.blocked(Request())  # type: ignore[arg-type]
    assert CALLS == []
    result = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert result.status == "error" and "address-first" in str(result.content)
    assert refused is not None and refused.status == "error" and refused.tool_call_id == "x1"
    assert "fails closed" in str(refused.content)


# ---------------------------------------------------------------- langchain#38352


def _issue_38352() -> list[BaseMessage]:
    return [
        HumanMessage("Weather and news for Paris, please.", id="h1"),
        AIMessage("", tool_calls=[_call("A", "weather", city="Paris")], id="ai-a"),
        AIMessage("", tool_calls=[_call("B", "news", city="Paris")], id="ai-b"),
        ToolMessage("Sunny, 21C. " * 30, tool_call_id="A", id="t-a"),
        ToolMessage("Parliament in session. " * 30, tool_call_id="B", id="t-b"),
    ]


def test_issue_38352_summarization_orphans_a_result_ctxwise_does_not(tmp_path: Path) -> None:
    messages = _issue_38352()
    summarizer = FakeListChatModel(responses=["The user wants weather and news."])
    lc = SummarizationMiddleware(summarizer, trigger=("messages", 3), keep=("messages", 1))
    update = lc.before_model({"messages": list(messages)}, None)  # type: ignore[arg-type]
    assert update is not None
    kept = update["messages"][1:]  # after RemoveMessage(REMOVE_ALL_MESSAGES)
    orphans = [p for p in problems(_strict(kept)) if p.kind == "orphan_result"]
    assert [p.tool_use_id for p in orphans] == ["A"]

    captured: list[ModelRequest] = []

    def handler(request: ModelRequest) -> ModelResponse:
        captured.append(request)
        return ModelResponse(result=[AIMessage("Sunny; parliament in session.")])

    with _engine(tmp_path, budget=400) as engine:
        mw = CtxwiseMiddleware(engine, session_id="issue-38352")
        request = ModelRequest(
            model=summarizer, messages=list(messages), state={"messages": list(messages)}
        )
        mw.wrap_model_call(request, handler)
    sent = list(captured[0].messages)
    assert not problems(_strict(sent))
    calls = {c["id"] for m in sent if isinstance(m, AIMessage) for c in m.tool_calls}
    results = {m.tool_call_id for m in sent if isinstance(m, ToolMessage)}
    assert calls == results  # each pair whole (or both gone)


# ---------------------------------------------------------------- bad input


def test_an_unmappable_message_is_named_and_nothing_is_recorded(tmp_path: Path) -> None:
    calls: list[ModelRequest] = []
    with _engine(tmp_path) as engine:
        mw = CtxwiseMiddleware(engine, session_id="u")
        ok = [HumanMessage("hello", id="1")]
        mw.wrap_model_call(
            ModelRequest(model=FakeListChatModel(responses=["x"]), messages=ok),
            lambda r: calls.append(r) or ModelResponse(result=[AIMessage("hi")]),  # type: ignore[func-returns-value]
        )
        before = (engine.sessions.version("u"), engine.sessions.log("u"))
        bad = [*ok, AIMessage("hi", id="2"), ChatMessage(content="hm", role="critic", id="3")]
        with pytest.raises(IntegrationError, match="ChatMessage") as info:
            mw.wrap_model_call(
                ModelRequest(model=FakeListChatModel(responses=["x"]), messages=bad),
                lambda r: calls.append(r) or ModelResponse(result=[]),  # type: ignore[func-returns-value]
            )
        assert info.value.reason == "message"
        assert (engine.sessions.version("u"), engine.sessions.log("u")) == before
    assert len(calls) == 1


def test_an_orphan_in_the_input_never_reaches_the_model(tmp_path: Path) -> None:
    calls: list[ModelRequest] = []
    with _engine(tmp_path) as engine:
        mw = CtxwiseMiddleware(engine, session_id="o")
        messages = [HumanMessage("hi", id="1"), ToolMessage("late", tool_call_id="zz", id="2")]
        with pytest.raises(PairingError, match="orphan"):
            mw.wrap_model_call(
                ModelRequest(model=FakeListChatModel(responses=["x"]), messages=messages),
                lambda r: calls.append(r) or ModelResponse(result=[]),  # type: ignore[func-returns-value]
            )
        assert engine.sessions.version("o") == 0
    assert calls == []


def test_no_session_is_a_config_error(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        mw = CtxwiseMiddleware(engine)
        request = ModelRequest(
            model=FakeListChatModel(responses=["x"]), messages=[HumanMessage("x")]
        )
        with pytest.raises(IntegrationError, match="thread_id") as info:
            mw.wrap_model_call(request, lambda r: ModelResponse(result=[]))
        assert info.value.reason == "config"
        with pytest.raises(IntegrationError, match="Engine"):
            CtxwiseMiddleware("not an engine")  # type: ignore[arg-type]


def test_a_version_outside_the_range_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.0.1")
    with pytest.raises(IntegrationError, match=r"langchain>=1.5,<2") as info:
        require_framework("langchain", SUPPORTED, "langchain", "the LangChain middleware")
    assert info.value.reason == "version"


def test_mapping_round_trips() -> None:
    messages = [
        HumanMessage("hi", id="1"),
        AIMessage("let me look", tool_calls=[_call("c1", "lookup", order_id="1")], id="2"),
        ToolMessage("shipped", tool_call_id="c1", id="3"),
        AIMessage("Shipped.", id="4"),
    ]
    neutral = from_langchain(messages)
    assert [m.role for m in neutral] == ["user", "assistant", "user", "assistant"]
    back = to_langchain(neutral)
    assert [type(m) for m in back] == [type(m) for m in messages]
    assert [m.id for m in back] == ["1", "2", "3", "4"]
    assert back[1].tool_calls == messages[1].tool_calls  # type: ignore[attr-defined]
    assert back[2].content == "shipped" and back[2].tool_call_id == "c1"  # type: ignore[attr-defined]


# ---------------------------------------------------------------- several workers


def test_two_workers_on_one_store_give_each_message_to_the_engine_once(tmp_path: Path) -> None:
    """Two middlewares (two workers of one deployment) on Engines over the same SQLite
    file take turns on a thread: each gives the Engine only what the session does not
    hold yet, whoever recorded the rest."""

    def handler(request: ModelRequest) -> ModelResponse:
        return ModelResponse(result=[AIMessage("ok")])

    with _engine(tmp_path) as one, _engine(tmp_path) as two:
        workers = [CtxwiseMiddleware(one, session_id="t"), CtxwiseMiddleware(two, session_id="t")]
        messages: list[BaseMessage] = [HumanMessage("Look up orders 0 to 3.", id="h")]
        for step, mw in enumerate([workers[0], workers[0], workers[1], workers[0], workers[1]]):
            mw.wrap_model_call(
                ModelRequest(model=FakeListChatModel(responses=["x"]), messages=list(messages)),
                handler,
            )
            messages += [
                AIMessage(
                    "", tool_calls=[_call(f"c{step}", "lookup", order_id=str(step))], id=f"a{step}"
                ),
                ToolMessage(f"order {step} shipped", tool_call_id=f"c{step}", id=f"t{step}"),
            ]
        history = one.session_messages("t")
    assert len(history) == 1 + 2 * 4  # the question, then four calls with their results
    assert [b.id for m in history for b in m.tool_uses] == ["c0", "c1", "c2", "c3"]
    assert not problems(history)


def test_a_run_forked_from_an_earlier_checkpoint_is_refused_not_sent_the_old_branch(
    tmp_path: Path,
) -> None:
    """LangGraph time travel: a run from the checkpoint after the first question. The
    session still holds the second question and its tool call; sending them would give
    the model the branch the thread left behind."""
    model = ScriptedModel(
        responses=[
            AIMessage("", tool_calls=[_call("c1", "lookup", order_id="1")]),
            AIMessage("Order 1 has shipped."),
            AIMessage("", tool_calls=[_call("c2", "lookup", order_id="2")]),
            AIMessage("Order 2 has shipped."),
            AIMessage("Cancelled."),
            AIMessage("Cancelled."),
        ]
    )
    with _engine(tmp_path) as engine:
        agent = create_agent(
            model, [lookup], middleware=[CtxwiseMiddleware(engine)], checkpointer=InMemorySaver()
        )
        config: Any = {"configurable": {"thread_id": "main"}}
        agent.invoke({"messages": [HumanMessage("Where is order 1?")]}, config)
        agent.invoke({"messages": [HumanMessage("And order 2?")]}, config)
        after_first = next(
            s for s in agent.get_state_history(config) if len(s.values["messages"]) == 4
        )
        before = engine.sessions.version("main")
        with pytest.raises(IntegrationError, match="rewound") as info:
            agent.invoke({"messages": [HumanMessage("Cancel order 1.")]}, after_first.config)
        assert info.value.reason == "message"
        assert engine.sessions.version("main") == before
        assert len(model.seen) == 4  # the model was not called with the old branch
        # the fork under a session of its own
        forked = create_agent(
            model,
            [lookup],
            middleware=[CtxwiseMiddleware(engine, session_id="main-fork")],
            checkpointer=InMemorySaver(),
        )
        messages = [*after_first.values["messages"], HumanMessage("Cancel order 1.")]
        forked.invoke({"messages": messages}, {"configurable": {"thread_id": "f"}})
    sent = [str(m.content) for m in model.seen[-1]]
    assert "And order 2?" not in sent and sent[-1] == "Cancel order 1."


def test_messages_removed_from_the_end_of_the_state_are_refused(tmp_path: Path) -> None:
    def handler(request: ModelRequest) -> ModelResponse:
        return ModelResponse(result=[AIMessage("ok")])

    def request(messages: list[BaseMessage]) -> ModelRequest:
        return ModelRequest(model=FakeListChatModel(responses=["x"]), messages=messages)

    history: list[BaseMessage] = [
        HumanMessage("My card number is 4111 1111 1111 1111.", id="h1"),
        AIMessage("Noted.", id="a1"),
        HumanMessage("Forget that, what is my balance?", id="h2"),
    ]
    with _engine(tmp_path) as engine:
        mw = CtxwiseMiddleware(engine, session_id="s")
        mw.wrap_model_call(request(history[:1]), handler)
        mw.wrap_model_call(request(history), handler)
        # the app takes the card message's answer and the next question out (RemoveMessage)
        with pytest.raises(IntegrationError, match="rewound"):
            mw.wrap_model_call(request([history[0], HumanMessage("Hi", id="h3")]), handler)
        # trimmed from the front (another middleware's trimming) is fine
        mw.wrap_model_call(request([history[2], AIMessage("ok", id="a2")]), handler)


# ---------------------------------------------------------------- what to_langchain keeps


def test_thinking_signatures_images_and_tool_names_survive_to_langchain() -> None:
    from ctxwise.formats import read_transcript
    from ctxwise.messages import MediaBlock, ThinkingBlock
    from tests.conftest import TRANSCRIPTS

    transcript = read_transcript(TRANSCRIPTS / "claude_code" / "short.jsonl", "claude-code")
    signed = [
        b.signature for m in transcript.messages for b in m.content if isinstance(b, ThinkingBlock)
    ]
    assert signed and all(signed)
    lc = to_langchain(list(transcript.messages))
    parts = [p for m in lc if isinstance(m.content, list) for p in m.content]
    thinking = [p for p in parts if isinstance(p, dict) and p.get("type") == "thinking"]
    # Anthropic refuses a thinking block sent back without its signature
    assert [p.get("signature") for p in thinking] == signed
    calls = {c["id"]: c["name"] for m in lc if isinstance(m, AIMessage) for c in m.tool_calls}
    results = [m for m in lc if isinstance(m, ToolMessage)]
    assert results and all(m.name == calls[m.tool_call_id] for m in results)

    png = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    screenshot = Message(
        "user", (TextBlock("What does this error mean?"), MediaBlock("image", png))
    )
    (human,) = to_langchain([screenshot])
    assert human.content == [  # the image was dropped before
        {"type": "text", "text": "What does this error mean?"},
        {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
    ]
    assert human.content_blocks[1]["type"] == "image"


def test_a_cleared_tool_message_keeps_its_name_and_artifact(tmp_path: Path) -> None:
    """Clearing rebuilds a ToolMessage with the placeholder; with persist=True that
    message replaces the original in the graph state, so what it carried besides its
    content must stay (the artifact was lost from the checkpoint before)."""

    def handler(request: ModelRequest) -> ModelResponse:
        return ModelResponse(result=[AIMessage("ok")])

    messages: list[BaseMessage] = [HumanMessage("Look up orders 1 to 3.", id="h")]
    for i in range(1, 4):
        messages += [
            AIMessage("", tool_calls=[_call(f"c{i}", "lookup", order_id=str(i))], id=f"a{i}"),
            ToolMessage(
                f"Order {i}: shipped. " + "Tracking event logged. " * 60,
                tool_call_id=f"c{i}",
                name="lookup",
                artifact={"order": i, "rows": [i, i + 1]},
                id=f"t{i}",
            ),
        ]
    with _engine(tmp_path, budget=1200, clearing={"keep_last": 1}) as engine:
        mw = CtxwiseMiddleware(engine, session_id="s")
        captured: list[ModelRequest] = []
        mw.wrap_model_call(
            ModelRequest(model=FakeListChatModel(responses=["x"]), messages=list(messages)),
            lambda r: captured.append(r) or handler(r),  # type: ignore[func-returns-value]
        )
        assert mw.last is not None and mw.last.trace.cleared
    sent = [m for m in captured[0].messages if isinstance(m, ToolMessage)]
    cleared = [m for m in sent if "Tracking event" not in str(m.content)]
    assert cleared  # some results were cleared
    for m in sent:
        i = int(m.tool_call_id[1:])
        assert m.name == "lookup" and m.artifact == {"order": i, "rows": [i, i + 1]}


# ---------------------------------------------------------------- the system prompt


def test_a_dynamic_prompt_reaches_the_model_as_it_is_now(tmp_path: Path) -> None:
    """A @dynamic_prompt changes the system prompt on every call. Each one was kept in
    the session's system part before: the model got every prompt ever given, and the
    pinned part grew until the turn failed with PinnedOverflowError."""
    from langchain.agents.middleware import dynamic_prompt

    calls = iter(range(100))
    policy = "You track orders for Northwind. " + "Quote the order id in every answer. " * 30

    @dynamic_prompt
    def now(request: ModelRequest) -> str:
        return f"{policy}\nThe time is 10:{next(calls):02d}."

    model = ScriptedModel(responses=[AIMessage(f"Answer {i}.") for i in range(12)])
    with _engine(tmp_path, budget=2500) as engine:
        agent = create_agent(
            model,
            [lookup],
            middleware=[now, CtxwiseMiddleware(engine)],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": "t"}}
        agent.invoke({"messages": [HumanMessage("Never call me before 9am.")]}, config)
        for i in range(11):
            agent.invoke({"messages": [HumanMessage(f"Question {i}?")]}, config)
    systems = [m[0] for m in model.seen]
    assert all(isinstance(s, SystemMessage) for s in systems)
    for i, s in enumerate(systems):
        assert s.text.startswith(f"{policy}\nThe time is 10:{i:02d}.")
        assert s.text.count("The time is") == 1
        assert "Never call me before 9am." in s.text  # the pinned rule follows the prompt


def test_the_system_message_keeps_its_content_blocks(tmp_path: Path) -> None:
    """An Anthropic prompt-cache mark on the system prompt reaches the model."""
    prompt = SystemMessage(
        [{"type": "text", "text": "You track orders.", "cache_control": {"type": "ephemeral"}}]
    )
    captured: list[ModelRequest] = []
    with _engine(tmp_path) as engine:
        mw = CtxwiseMiddleware(engine, session_id="s")
        mw.wrap_model_call(
            ModelRequest(
                model=FakeListChatModel(responses=["x"]),
                messages=[HumanMessage("Never call me before 9am.", id="h")],
                system_message=prompt,
            ),
            lambda r: captured.append(r) or ModelResponse(result=[AIMessage("ok")]),  # type: ignore[func-returns-value]
        )
    sent = captured[0].system_message
    assert sent is not None and isinstance(sent.content, list)
    assert sent.content[0] == prompt.content[0]
    assert "Never call me before 9am." in sent.text


def test_the_system_prompt_counts_against_the_budget(tmp_path: Path) -> None:
    prompt = "You track orders for Northwind. " + "Quote the order id in every answer. " * 30
    captured: list[ModelRequest] = []
    with _engine(tmp_path, budget=1500) as engine:
        mw = CtxwiseMiddleware(engine, session_id="s")
        messages: list[BaseMessage] = [HumanMessage("Where are my orders?", id="h")]
        for i in range(4):
            mw.wrap_model_call(
                ModelRequest(
                    model=FakeListChatModel(responses=["x"]),
                    messages=list(messages),
                    system_message=SystemMessage(prompt),
                ),
                lambda r: captured.append(r) or ModelResponse(result=[AIMessage("ok")]),  # type: ignore[func-returns-value]
            )
            assert mw.last is not None
            assert mw.last.trace.tokens.system >= engine.counter.count(prompt)
            assert mw.last.trace.tokens.total <= 1500
            messages += [
                AIMessage("", tool_calls=[_call(f"c{i}", "lookup", order_id=str(i))], id=f"a{i}"),
                ToolMessage("Tracking event logged. " * 40, tool_call_id=f"c{i}", id=f"t{i}"),
            ]
    for request in captured:
        assert request.system_message is not None
        assert request.system_message.text.count("You track orders") == 1


def test_a_call_without_a_system_prompt_gets_none_of_the_earlier_one(tmp_path: Path) -> None:
    captured: list[ModelRequest] = []
    with _engine(tmp_path) as engine:
        mw = CtxwiseMiddleware(engine, session_id="s")
        messages: list[BaseMessage] = [HumanMessage("Hi.", id="h1")]
        for prompt in (SystemMessage("You triage."), None):
            mw.wrap_model_call(
                ModelRequest(
                    model=FakeListChatModel(responses=["x"]),
                    messages=list(messages),
                    system_message=prompt,
                ),
                lambda r: captured.append(r) or ModelResponse(result=[AIMessage("ok")]),  # type: ignore[func-returns-value]
            )
            messages += [AIMessage("Hello.", id="a1"), HumanMessage("Refund?", id="h2")]
    assert captured[0].system_message is not None
    assert captured[0].system_message.text == "You triage."
    assert captured[1].system_message is None


def _sent_tokens(engine: Engine, messages: list[BaseMessage]) -> int:
    """The tokens of a request the model got, counted with the Engine's counter."""
    return engine.counter.count_messages(from_langchain(messages))


@pytest.mark.parametrize(
    ("first", "later", "budget"),
    [(1, 40, 1500), (5, 120, 2500), (0, 60, 1500), (30, 31, 1800), (60, 2, 1500)],
)
def test_a_dynamic_prompt_longer_than_the_first_stays_within_the_budget(
    tmp_path: Path, first: int, later: int, budget: int
) -> None:
    """The first prompt was recorded and counted, a later one sent in its place: a
    longer later prompt put the request over the budget by the difference."""
    from langchain.agents.middleware import dynamic_prompt

    calls = iter(range(100))
    line = "Quote the order id in every answer. "

    @dynamic_prompt
    def grows(request: ModelRequest) -> str:
        n = next(calls)
        return f"You track orders (call {n}). " + line * (first if n == 0 else later)

    steps = 6
    responses: list[BaseMessage] = [
        AIMessage("", tool_calls=[_call(f"c{i}", "lookup", order_id=str(i))]) for i in range(steps)
    ]
    model = ScriptedModel(responses=[*responses, AIMessage("Done.")])
    with _engine(tmp_path, budget=budget) as engine:
        agent = create_agent(
            model,
            [lookup],
            middleware=[grows, CtxwiseMiddleware(engine)],
            checkpointer=InMemorySaver(),
        )
        agent.invoke(
            {"messages": [HumanMessage("Where are my orders?")]},
            {"configurable": {"thread_id": "t"}},
        )
        assert len(model.seen) == steps + 1
        for i, seen in enumerate(model.seen):
            assert isinstance(seen[0], SystemMessage)
            assert seen[0].text.startswith(f"You track orders (call {i}).")
            assert seen[0].text.count("You track orders") == 1
            assert _sent_tokens(engine, seen) <= budget
        assert any(t.cleared or t.compacted is not None for t in engine.traces("t"))


@pytest.mark.parametrize("now", ["You track orders.", "You refund orders now."])
def test_a_session_an_older_ctxwise_recorded_sends_its_prompt_once(
    tmp_path: Path, now: str
) -> None:
    """An older ctxwise recorded the first system prompt in the session (it stays among
    the session's system texts): the prompt of this call is sent and counted once, the
    recorded one is never sent next to it (and, when it differs, still counted)."""
    first = "You track orders."
    history: list[BaseMessage] = [HumanMessage("Where is order 4417?", id="h1")]
    captured: list[ModelRequest] = []
    with _engine(tmp_path) as engine:
        recorded = Message.text_message("system", first)
        recorded = Message("system", recorded.content, extra={"langchain_system_prompt": True})
        engine.turn("s", [recorded, *from_langchain(history)])  # as the older middleware did
        history += [AIMessage("It shipped.", id="a1"), HumanMessage("Thanks. And 4418?", id="h2")]
        mw = CtxwiseMiddleware(engine, session_id="s")
        mw.wrap_model_call(
            ModelRequest(
                model=FakeListChatModel(responses=["x"]),
                messages=list(history),
                system_message=SystemMessage(now),
            ),
            lambda r: captured.append(r) or ModelResponse(result=[AIMessage("ok")]),  # type: ignore[func-returns-value]
        )
        assert mw.last is not None
        trace = mw.last.trace
    sent = captured[0]
    assert sent.system_message is not None and sent.system_message.text == now
    assert [m.id for m in sent.messages] == ["h1", "a1", "h2"]
    if now == first:  # counted once, as sent
        assert trace.tokens.system == engine.counter.count(now)
    else:  # the recorded one still counts: the request is that much under the budget
        assert trace.tokens.system == engine.counter.count(f"{now}\n\n{first}")
