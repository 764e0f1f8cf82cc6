"""The pydantic-ai capability on real pydantic-ai agents driven by ``FunctionModel``
(the function sees exactly the messages that reach the model) over a real Engine
with its SQLite store in tmp_path."""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import itertools
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

pytest.importorskip(
    "pydantic_ai", reason="needs the pydantic-ai extra: pip install -e '.[pydantic-ai]'"
)

from pydantic import BaseModel
from pydantic_ai import Agent, PromptedOutput
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import ctxwise.integrations.pydantic_ai as integration
from ctxwise import Engine, EngineConfig
from ctxwise.editing import DEFAULT_PLACEHOLDER
from ctxwise.errors import IntegrationError, UnknownSessionError
from ctxwise.integrations._framework import require_framework
from ctxwise.integrations.pydantic_ai import (
    MARK,
    SUPPORTED,
    CtxwiseCapability,
    from_pydantic_ai,
    to_pydantic_ai,
)
from ctxwise.messages import Message, Transcript

NO_DELETE = {
    "kind": "forbid",
    "name": "no-delete",
    "text": "Never delete a customer account",
    "tools": ["delete_account"],
}
T = TypeVar("T")
RULE = "Never issue a refund without asking me first."
FIRST = f"My email is ana@example.com. {RULE} Look up my orders."


def make_engine(tmp_path: Path, **settings: Any) -> Engine:
    base: dict[str, Any] = {
        "store": f"sqlite:///{tmp_path / 'ctxwise.db'}",
        "system": "You are a support agent.",
        "memory": {"recall": False},
        "gates": {"rules": [NO_DELETE]},
    }
    base.update(settings)
    return Engine(EngineConfig.model_validate(base))


def scripted(
    calls: list[tuple[str, dict[str, Any]]], seen: list[list[ModelMessage]]
) -> FunctionModel:
    """A model that makes ``calls`` one per request, then answers "done"; every
    request's messages are appended to ``seen``."""
    ids = itertools.count()

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        step = len(seen) - 1
        if step < len(calls):
            name, args = calls[step]
            return ModelResponse(parts=[ToolCallPart(name, args, f"call-{next(ids)}")])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(model)


def agent_with(
    model: FunctionModel, capability: CtxwiseCapability | list[Any], ran: list[str]
) -> Agent[None, str]:
    """An agent over ``model`` with ``capability`` (or a list of them) and three
    tools that record each call in ``ran``."""
    capabilities = capability if isinstance(capability, list) else [capability]
    agent: Agent[None, str] = Agent(model, capabilities=capabilities)

    @agent.tool_plain
    def lookup(order: str) -> str:
        ran.append(f"lookup {order}")
        return f"order {order}: shipped to the warehouse, " + "tracking line. " * 60

    @agent.tool_plain
    def delete_account(email: str) -> str:
        ran.append(f"delete {email}")
        return "deleted"

    @agent.tool_plain
    def refund(order: str) -> str:
        ran.append(f"refund {order}")
        return "refunded"

    return agent


def parts(messages: list[ModelMessage]) -> list[Any]:
    return [p for m in messages for p in m.parts]


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for p in parts(messages) if isinstance(p, ToolReturnPart)]


def system_text(messages: list[ModelMessage]) -> str:
    return "\n".join(p.content for p in parts(messages) if isinstance(p, SystemPromptPart))


def pairing_problems(messages: list[ModelMessage]) -> list[Any]:
    return Transcript(tuple(from_pydantic_ai(messages))).problems("anthropic")


def shape(messages: Any) -> list[tuple[str, str]]:
    """What a model reads: each non-system block as (role, text or id)."""
    out = []
    for m in messages:
        if m.role == "system":
            continue
        for b in m.content:
            text = getattr(b, "text", None)
            if text is None:
                ident = getattr(b, "id", None) or getattr(b, "tool_use_id", "")
                text = f"{ident} {getattr(b, 'content', getattr(b, 'input', ''))}"
            out.append((m.role, text))
    return out


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a loop of its own, closed after (pydantic-ai's ``run_sync``
    leaves its loop open, which the warnings-as-errors run reports)."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


# ---------------------------------------------------------------- the window


def test_small_budget_clears_old_tool_returns_and_pins_rules_and_facts(tmp_path: Path) -> None:
    engine = make_engine(tmp_path, budget=1500, clearing={"keep_last": 1})
    capability = CtxwiseCapability(engine, "case-1")
    seen: list[list[ModelMessage]] = []
    ran: list[str] = []
    calls = [("lookup", {"order": str(n)}) for n in range(4)]
    result = run(agent_with(scripted(calls, seen), capability, ran).run(FIRST))

    assert result.output == "done"
    assert len(ran) == 4
    last = seen[-1]
    returns = tool_returns(last)
    assert [r.tool_call_id for r in returns] == [f"call-{n}" for n in range(4)]
    # the oldest results were cleared by the Engine; the newest reached the model whole
    assert returns[0].content == DEFAULT_PLACEHOLDER
    assert str(returns[-1].content).startswith("order 3: shipped")
    trace = capability.last_turn.trace if capability.last_turn else None
    assert trace is not None and any(t.cleared for t in engine.traces("case-1"))
    # the pinned rule and fact are in the one system part, at the start
    first = last[0]
    assert isinstance(first, ModelRequest) and isinstance(first.parts[0], SystemPromptPart)
    assert RULE in first.parts[0].content
    assert "ana@example.com" in first.parts[0].content
    assert "You are a support agent." in first.parts[0].content
    assert sum(isinstance(p, SystemPromptPart) for p in parts(last)) == 1
    # exactly the Engine's window reached the model, with no pairing problem
    assert capability.last_turn is not None
    assert shape(from_pydantic_ai(last)) == shape(capability.last_turn.window.messages)
    assert pairing_problems(last) == []
    # the run's history is the edited one too
    assert tool_returns(result.all_messages())[0].content == DEFAULT_PLACEHOLDER


def test_history_over_the_budget_is_compacted_and_the_rule_survives(tmp_path: Path) -> None:
    engine = make_engine(tmp_path, budget=900, clearing={"enabled": False})
    capability = CtxwiseCapability(engine, "case-2")
    seen: list[list[ModelMessage]] = []
    ran: list[str] = []
    agent = agent_with(scripted([], seen), capability, ran)
    history = run(agent.run(FIRST)).all_messages()
    for n in range(6):
        text = f"Question {n}: where is parcel {n}? " + "More detail about it. " * 30
        history = run(agent.run(text, message_history=history)).all_messages()

    assert any(t.compacted for t in engine.traces("case-2"))
    last = seen[-1]
    user_texts = [p.content for p in parts(last) if isinstance(p, UserPromptPart)]
    summary = str(user_texts[0])
    assert summary.startswith("[Earlier conversation, compacted")
    assert not any(str(t).startswith("Question 0:") for t in user_texts)  # summarized
    assert "Question 5:" in "\n".join(map(str, user_texts))  # the latest turn is there
    assert len(parts(last)) < len(parts(history))
    assert RULE in system_text(last)
    assert pairing_problems(last) == []


@pytest.mark.parametrize("placement", ["user", "system"])
def test_routed_sources_reach_the_model(tmp_path: Path, placement: str) -> None:
    faq = "Refunds reach the card within 5 working days."
    engine = make_engine(tmp_path, sources={"faq": {"text": faq}}, context=placement)
    seen: list[list[ModelMessage]] = []
    run(agent_with(scripted([], seen), CtxwiseCapability(engine, "case-12"), []).run(FIRST))
    (request,) = seen[0]
    assert isinstance(request, ModelRequest)
    system, *rest = request.parts
    assert isinstance(system, SystemPromptPart)
    prompts = [str(p.content) for p in rest if isinstance(p, UserPromptPart)]
    if placement == "system":
        assert faq in system.content and prompts == [FIRST]
    else:
        assert faq not in system.content
        assert prompts[-1] == FIRST and faq in prompts[0] and prompts[0].startswith("<context>")


def test_processing_its_own_output_changes_nothing(tmp_path: Path) -> None:
    engine = make_engine(tmp_path, budget=1500, clearing={"keep_last": 1})
    capability = CtxwiseCapability(engine, "case-3")
    seen: list[list[ModelMessage]] = []
    ran: list[str] = []
    calls = [("lookup", {"order": str(n)}) for n in range(3)]
    history = run(agent_with(scripted(calls, seen), capability, ran).run(FIRST)).all_messages()
    history = [*history, ModelRequest(parts=[UserPromptPart("And order 9?")])]

    once = run(capability.process(history))
    version = engine.sessions.version("case-3")
    assert once != history
    assert all((m.metadata or {}).get(MARK, {}).get("session") == "case-3" for m in once)
    assert run(capability.process(once)) == once
    # a new capability on the same Engine and session agrees, and no turn was taken
    assert run(CtxwiseCapability(engine, "case-3").process(once)) == once
    assert engine.sessions.version("case-3") == version
    # the mapping itself is a fixpoint on the output
    assert to_pydantic_ai(from_pydantic_ai(once)) == once


def test_a_saved_history_resumes_in_a_new_capability(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    seen: list[list[ModelMessage]] = []
    agent = agent_with(scripted([("lookup", {"order": "1"})], seen), [], [])
    first = run(agent.run(FIRST, capabilities=[CtxwiseCapability(engine, "case-10")]))
    saved = ModelMessagesTypeAdapter.dump_json(first.all_messages())  # e.g. into a database

    history = ModelMessagesTypeAdapter.validate_json(saved)
    again = run(
        agent.run(
            "And order 2?",
            message_history=history,
            capabilities=[CtxwiseCapability(engine, "case-10")],
        )
    )
    assert again.output == "done"
    # the session holds each message once: nothing saved was taken for new
    texts = [m.text for m in engine.session_messages("case-10") if m.role == "user" and m.text]
    assert texts == [FIRST, "And order 2?"]
    assert RULE in system_text(seen[-1])


def test_a_request_scoped_system_prompt_stays_in_its_request(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    capability = CtxwiseCapability(engine, "case-11")
    nudge = SystemPromptPart("3 requests left.", scope="request")
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(FIRST), nudge])]
    out = run(capability.process(history))
    assert out[-1].parts[-1] is nudge
    assert "3 requests left" not in "\n".join(
        p.content for p in parts(out) if isinstance(p, SystemPromptPart) and p is not nudge
    )
    # counted in this request's budget as the turn's system prompt, never recorded
    turn = capability.last_turn
    assert turn is not None
    assert turn.trace.tokens.system >= engine.counter.count("3 requests left.")
    assert "3 requests left" not in str(engine.sessions.log("case-11"))
    history = [*out, ModelResponse(parts=[TextPart("Looking.")])]
    history.append(ModelRequest(parts=[UserPromptPart("And order 2?")]))
    later = run(capability.process(history))
    assert "3 requests left" not in system_text(later)
    assert capability.last_turn is not None
    assert "3 requests left" not in str(capability.last_turn.request)


def test_unchanged_parts_come_back_as_the_same_parts() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart("Be brief."), UserPromptPart("hi")]),
        ModelResponse(
            parts=[
                ThinkingPart("let me look", signature="sig"),
                TextPart("Looking."),
                ToolCallPart("lookup", {"order": "1"}, "c1"),
            ],
            model_name="m",
        ),
        ModelRequest(parts=[ToolReturnPart("lookup", {"status": "shipped"}, "c1")]),
        ModelResponse(parts=[TextPart("It shipped.")], model_name="m"),
    ]
    back = to_pydantic_ai(from_pydantic_ai(messages))
    assert back == messages  # timestamps, model names, structured content: all kept


# ---------------------------------------------------------------- orphans


def test_a_tool_return_whose_call_was_cut_reaches_the_model_as_text(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    capability = CtxwiseCapability(engine, "case-4")
    # a hand-trimmed history: the response that called lookup (id cut-1) is gone
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("Where is order 4417?")]),
        ModelResponse(parts=[TextPart("Let me check.")]),
        ModelRequest(
            parts=[
                ToolReturnPart("lookup", "order 4417: held at customs", "cut-1"),
                UserPromptPart("So?"),
            ]
        ),
    ]
    out = run(capability.process(history))
    assert pairing_problems(out) == []
    assert not any(r.tool_call_id == "cut-1" for r in tool_returns(out))
    texts = [str(p.content) for p in parts(out) if isinstance(p, UserPromptPart)]
    assert any("order 4417: held at customs" in t and "lookup" in t for t in texts)
    assert capability.last_orphans == ("cut-1",)


def test_a_trimming_processor_before_ctxwise_cannot_orphan_a_result(tmp_path: Path) -> None:
    def cut_first_call(messages: list[ModelMessage]) -> list[ModelMessage]:
        """A careless trimmer: drops the response that made call-0, keeps its result."""
        return [
            m
            for m in messages
            if not (
                isinstance(m, ModelResponse)
                and any(getattr(p, "tool_call_id", None) == "call-0" for p in m.parts)
            )
        ]

    def ask(capabilities: list[Any]) -> list[list[ModelMessage]]:
        seen: list[list[ModelMessage]] = []
        agent = agent_with(scripted([("lookup", {"order": "1"})], seen), capabilities, [])
        run(agent.run("Where is order 1?"))
        return seen

    alone = ask([ProcessHistory(cut_first_call)])
    # pydantic-ai on its own drops the orphan: the model never learns the result
    assert "order 1: shipped" not in repr(alone[1])

    capability = CtxwiseCapability(make_engine(tmp_path), "case-5")
    seen = ask([ProcessHistory(cut_first_call), capability])
    assert pairing_problems(seen[1]) == [] and not tool_returns(seen[1])
    texts = [str(p.content) for p in parts(seen[1]) if isinstance(p, UserPromptPart)]
    assert any("order 1: shipped" in t for t in texts)
    assert capability.last_orphans == ("call-0",)


def test_a_tool_return_answering_an_earlier_turn_is_not_sent_as_a_result(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    capability = CtxwiseCapability(engine, "case-6")
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("Check order 1.")]),
        ModelResponse(parts=[ToolCallPart("lookup", {"order": "1"}, "a")]),
        ModelRequest(parts=[ToolReturnPart("lookup", "order 1: shipped", "a")]),
        ModelResponse(parts=[TextPart("Shipped.")]),
        ModelRequest(parts=[ToolReturnPart("lookup", "order 1: shipped again", "a")]),
    ]
    out = run(capability.process(history))
    assert pairing_problems(out) == []
    assert [r.content for r in tool_returns(out)] == ["order 1: shipped"]
    assert capability.last_orphans == ("a",)


# ---------------------------------------------------------------- the tool veto


def test_a_gated_tool_never_runs_and_the_model_is_told_the_rule(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    seen: list[list[ModelMessage]] = []
    ran: list[str] = []
    calls = [("delete_account", {"email": "ana@example.com"}), ("lookup", {"order": "7"})]
    agent = agent_with(scripted(calls, seen), CtxwiseCapability(engine, "case-7"), ran)
    assert run(agent.run(FIRST)).output == "done"

    assert ran == ["lookup 7"]  # the blocked call never ran; the next one did
    blocked = next(r for r in tool_returns(seen[1]) if r.tool_name == "delete_account")
    assert blocked.outcome == "failed"
    assert "no-delete" in str(blocked.content) and str(NO_DELETE["text"]) in str(blocked.content)
    # the refusal is in the session as an error result
    results = [b for m in engine.session_messages("case-7") for b in m.tool_results]
    assert results[0].is_error and str(NO_DELETE["text"]) in str(results[0].content)


def test_a_rule_that_cannot_be_evaluated_blocks(tmp_path: Path) -> None:
    rule = {
        "kind": "require_fact",
        "name": "refund-after-check",
        "text": "Do not refund an order until its address check is done",
        "tools": ["refund"],
        "fact": "address_check:{order_id}",  # the refund tool takes `order`, not `order_id`
    }
    engine = make_engine(tmp_path, gates={"rules": [rule]})
    seen: list[list[ModelMessage]] = []
    ran: list[str] = []
    agent = agent_with(
        scripted([("refund", {"order": "4417"})], seen), CtxwiseCapability(engine, "case-8"), ran
    )
    run(agent.run(FIRST))
    assert ran == []
    (blocked,) = tool_returns(seen[1])
    assert blocked.outcome == "failed" and "refund-after-check" in str(blocked.content)


def test_a_gate_without_a_session_fails_closed(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    seen: list[list[ModelMessage]] = []
    ran: list[str] = []
    gate_only = CtxwiseCapability(engine, "never-started", history=False)
    agent = agent_with(scripted([("lookup", {"order": "1"})], seen), gate_only, ran)
    run(agent.run("Look up order 1."))
    assert ran == []
    (blocked,) = tool_returns(seen[1])
    assert blocked.outcome == "failed"
    assert "could not be evaluated" in str(blocked.content)
    assert "UnknownSessionError" in str(blocked.content)


# ---------------------------------------------------------------- bad input


def test_a_part_ctxwise_cannot_map_is_named_and_nothing_changes(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    capability = CtxwiseCapability(engine, "case-9")
    image = ImageUrl("https://example.com/receipt.png")
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(["What is on this receipt?", image])])
    ]
    before = list(history)
    with pytest.raises(IntegrationError) as err:
        run(capability.process(history))
    assert err.value.reason == "message" and "ImageUrl" in err.value.detail
    assert history == before
    with pytest.raises(UnknownSessionError):
        engine.session_messages("case-9")  # nothing was written

    seen: list[list[ModelMessage]] = []
    agent = agent_with(scripted([], seen), capability, [])
    with pytest.raises(IntegrationError, match="ImageUrl"):
        run(agent.run(["What is on this receipt?", image]))
    assert seen == []  # the model was never called


def test_an_earlier_runs_history_given_again_is_refused(tmp_path: Path) -> None:
    """ "Edit and resend": the second run is thrown away and the first run's history
    given again. The session holds the second run's prompt; the model got it before."""
    engine = make_engine(tmp_path)
    seen: list[list[ModelMessage]] = []
    agent = agent_with(scripted([], seen), CtxwiseCapability(engine, "case-11"), [])
    first = run(agent.run("What is 2+2?"))
    # turns recorded another way (an MCP rules call, Engine.record) are not a rewind
    engine.record("case-11", [Message.text_message("user", "Never call me before 9am.")])
    second = run(agent.run("My card is 4111 1111 1111 1111.", message_history=first.all_messages()))
    assert "4111" in str(seen[-1])
    version = engine.sessions.version("case-11")
    with pytest.raises(IntegrationError, match="stops before session") as err:
        run(agent.run("What is 3+3?", message_history=first.all_messages()))
    assert err.value.reason == "message"
    assert engine.sessions.version("case-11") == version  # nothing recorded
    assert len(seen) == 2  # the model never got the card number again
    # going on from the latest history is fine
    run(agent.run("What is 3+3?", message_history=second.all_messages()))
    assert len(seen) == 3


@pytest.mark.parametrize("bad", [None, "hi", [ModelRequest(parts=[UserPromptPart("hi")]), "hi"]])
def test_a_history_that_is_not_messages_is_named(tmp_path: Path, bad: Any) -> None:
    engine = make_engine(tmp_path)
    with pytest.raises(IntegrationError) as err:
        run(CtxwiseCapability(engine, "case-10").process(bad))
    assert err.value.reason == "message" and "history was left unchanged" in err.value.detail
    with pytest.raises(UnknownSessionError):
        engine.session_messages("case-10")  # nothing was written


def test_bad_setup_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(IntegrationError) as err:
        CtxwiseCapability("not an engine", "s")  # type: ignore[arg-type]
    assert err.value.reason == "config"
    engine = make_engine(tmp_path)
    with pytest.raises(IntegrationError) as err:
        CtxwiseCapability(engine, "")
    assert err.value.reason == "config"
    with pytest.raises(IntegrationError, match="does nothing"):
        CtxwiseCapability(engine, "s", history=False, gate=False)


def test_a_version_outside_the_range_names_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(IntegrationError) as err:
        require_framework(
            "pydantic-ai-slim", ">=3,<4", "pydantic-ai", "the pydantic-ai integration"
        )
    assert err.value.reason == "version" and err.value.supported == ">=3,<4"
    assert ">=3,<4" in str(err.value)

    real: Callable[[str], str] = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda name: "2.10.0" if name == "pydantic-ai-slim" else real(name),
    )
    path = integration.__file__
    assert path is not None
    spec = importlib.util.spec_from_file_location("_ctxwise_pydantic_ai_copy", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(IntegrationError) as err:
        spec.loader.exec_module(module)
    assert err.value.reason == "version"
    assert SUPPORTED in str(err.value) and "2.10.0" in str(err.value)


def test_a_dynamic_system_prompt_is_refreshed_as_without_ctxwise(tmp_path: Path) -> None:
    """@agent.system_prompt(dynamic=True) across runs: the model got the first value
    for ever before (the prompt was merged into ctxwise's system part)."""
    clock = iter(f"10:{i:02d}" for i in range(0, 60, 5))
    engine = make_engine(tmp_path)
    seen: list[list[ModelMessage]] = []
    agent = agent_with(scripted([], seen), CtxwiseCapability(engine, "case-12"), [])

    @agent.system_prompt(dynamic=True)
    def now() -> str:
        return f"The time is {next(clock)}."

    history: list[ModelMessage] = []
    for prompt in ("Hi.", "Where is order 1?", "Thanks."):
        history = run(agent.run(prompt, message_history=history)).all_messages()
    told = [[t for t in system_text(m).splitlines() if t.startswith("The time")] for m in seen]
    assert told == [["The time is 10:00."], ["The time is 10:05."], ["The time is 10:10."]]
    assert all("You are a support agent." in system_text(m) for m in seen)
    # each statement is the turn's system prompt: counted when sent, never recorded
    recorded = "".join(
        str(m["content"]) for m in engine.sessions.log("case-12") if m["role"] == "system"
    )
    assert "The time is" not in recorded
    traces = engine.traces("case-12")
    assert len(traces) == len(seen)
    assert all(t.tokens.system >= engine.counter.count(told[i][0]) for i, t in enumerate(traces))


def _sent_tokens(engine: Engine, messages: list[ModelMessage]) -> int:
    """The tokens of the messages a model got, counted with the Engine's counter: its
    system prompts as one system message (as the providers' APIs take them)."""
    mapped = from_pydantic_ai(messages)
    system = "\n\n".join(m.text for m in mapped if m.role == "system")
    rest = [m for m in mapped if m.role != "system"]
    head = [Message.text_message("system", system)] if system else []
    return engine.counter.count_messages([*head, *rest])


@pytest.mark.parametrize(
    ("first", "later", "budget"),
    [(1, 40, 1500), (5, 120, 2500), (0, 60, 1500), (30, 31, 1800), (60, 2, 1500)],
)
def test_a_dynamic_prompt_longer_than_the_first_stays_within_the_budget(
    tmp_path: Path, first: int, later: int, budget: int
) -> None:
    """The first statement of a dynamic prompt was recorded and counted, a later one
    sent in its place: a longer later one put the request over the budget by the
    difference."""
    calls = itertools.count()
    line = "Quote the order id in every answer. "
    # no room kept for routed context: the history fills what the pinned parts leave
    engine = make_engine(tmp_path, budget=budget, context_share=0.0)
    seen: list[list[ModelMessage]] = []
    lookups = [("lookup", {"order": str(i)}) for i in range(3)]
    agent = agent_with(scripted(lookups * 3, seen), CtxwiseCapability(engine, "s"), [])

    @agent.system_prompt(dynamic=True)
    def grows() -> str:
        n = next(calls)
        return f"You track orders (run {n}). " + line * (first if n == 0 else later)

    history: list[ModelMessage] = []
    for prompt in ("Where are my orders?", "And the others?", "Thanks."):
        history = run(agent.run(prompt, message_history=history)).all_messages()
    assert len(seen) >= 6
    for messages in seen:
        assert system_text(messages).count("You track orders") == 1
        assert pairing_problems(messages) == []
        assert _sent_tokens(engine, messages) <= budget
    assert "You track orders (run 0)" in system_text(seen[0])
    assert "You track orders (run 0)" not in system_text(seen[-1])
    assert any(t.cleared or t.compacted is not None for t in engine.traces("s"))


@pytest.mark.parametrize("now", ["The time is 10:00.", "The time is 10:05."])
def test_a_session_an_older_ctxwise_recorded_sends_its_dynamic_prompt_once(
    tmp_path: Path, now: str
) -> None:
    """An older ctxwise recorded a dynamic prompt's first statement in the session (it
    stays among its system texts): the latest statement is sent and counted once, the
    recorded one never sent next to it (and, when it differs, still counted)."""
    recorded = "The time is 10:00."
    engine = make_engine(tmp_path, system="")
    capability = CtxwiseCapability(engine, "s")
    old = [
        ModelRequest(parts=[SystemPromptPart(recorded, dynamic_ref="now"), UserPromptPart("Hi.")])
    ]
    engine.turn("s", from_pydantic_ai(old))  # as the older capability recorded it
    later = SystemPromptPart(now, dynamic_ref="now")
    out = run(capability.process([ModelRequest(parts=[later, UserPromptPart("Order 1?")])]))
    turn = capability.last_turn
    assert turn is not None
    assert system_text(out).count("The time is") == 1 and now in system_text(out)
    if now == recorded:  # counted once, as sent
        assert turn.trace.tokens.system == engine.counter.count(now)
    else:  # the recorded one still counts: the request is that much under the budget
        assert turn.trace.tokens.system == engine.counter.count(f"{now}\n\n{recorded}")


def _sent_with_instructions(engine: Engine, messages: list[ModelMessage], told: str | None) -> int:
    """:func:`_sent_tokens` with the request's instructions (``told``), which
    pydantic-ai sends after its system prompts, in the one system message."""
    head = [ModelRequest(parts=[SystemPromptPart(told)])] if told else []
    system = [m for m in messages if isinstance(m, ModelRequest)][:1]
    rest = messages[len(system) :]
    return _sent_tokens(engine, [*system, *head, *rest])


@pytest.mark.parametrize(
    ("static", "grown", "budget"), [(20, 40, 1500), (60, 1, 1500), (0, 80, 1500)]
)
def test_instructions_are_counted_in_the_budget(
    tmp_path: Path, static: int, grown: int, budget: int
) -> None:
    """Static and dynamic instructions (``Agent(instructions=...)``,
    ``@agent.instructions``) were not given to the Engine: the budget left them out, and
    a request went over it by their size."""
    calls = itertools.count()
    line = "Quote the order id in every answer. "
    engine = make_engine(tmp_path, budget=budget, context_share=0.0)
    seen: list[tuple[list[ModelMessage], str | None]] = []
    ids = itertools.count()

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append((list(messages), info.instructions))
        if len(seen) % 4:
            order = {"order": str(len(seen))}
            return ModelResponse(parts=[ToolCallPart("lookup", order, f"call-{next(ids)}")])
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[None, str] = Agent(
        FunctionModel(model),
        instructions=("You are careful. " + line * static) if static else None,
        capabilities=[CtxwiseCapability(engine, "s")],
    )

    @agent.instructions
    def grows() -> str:
        return f"Request {next(calls)}. " + line * grown

    @agent.tool_plain
    def lookup(order: str) -> str:
        return f"order {order}: shipped to the warehouse, " + "tracking line. " * 60

    history: list[ModelMessage] = []
    for prompt in ("Where are my orders?", "And the others?", "Thanks."):
        history = run(agent.run(prompt, message_history=history)).all_messages()
    assert len(seen) >= 12
    traces = engine.traces("s")
    assert len(traces) == len(seen)
    for (messages, told), trace in zip(seen, traces, strict=True):
        assert told is not None and told.startswith("You are careful" if static else "Request")
        # counted as sent, and sent once: in the instructions, not in a system prompt
        assert trace.tokens.system >= engine.counter.count(told)
        assert "Request" not in system_text(messages)
        assert pairing_problems(messages) == []
        assert _sent_with_instructions(engine, messages, told) <= budget
    assert any(t.cleared or t.compacted is not None for t in traces)
    # not kept among the session's system texts: each request counts its own
    logged = [m["content"] for m in engine.sessions.log("s") if m["role"] == "system"]
    assert "Request" not in str(logged)


def test_prompted_output_instructions_are_counted(tmp_path: Path) -> None:
    """A prompted output's schema instructions, which the model adds to the
    instructions when it prepares the request, are counted as sent."""

    class Order(BaseModel):
        order_id: str
        status: str

    engine = make_engine(tmp_path, system="")
    capability = CtxwiseCapability(engine, "s")
    told: list[str | None] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        told.append(info.instructions)
        return ModelResponse(parts=[TextPart('{"order_id": "1", "status": "shipped"}')])

    agent = Agent(
        FunctionModel(model),
        instructions="Answer with the order.",
        output_type=PromptedOutput(Order),
        capabilities=[capability],
    )
    assert run(agent.run("Order 1?")).output.status == "shipped"
    (sent,) = told
    assert sent is not None and "Answer with the order." in sent and "schema" in sent
    turn = capability.last_turn
    assert turn is not None
    assert turn.trace.tokens.system == engine.counter.count(sent)


def test_the_agents_tool_definitions_are_counted_in_the_budget(tmp_path: Path) -> None:
    # pydantic-ai sends its tools beside the messages: the Engine counts them (issue 30)
    engine = make_engine(tmp_path)
    capability = CtxwiseCapability(engine, "case-tools")
    seen: list[list[ModelMessage]] = []
    result = run(agent_with(scripted([], seen), capability, []).run(FIRST))
    assert result.output == "done"
    trace = engine.traces("case-tools")[-1]
    assert trace.tools is not None
    assert set(trace.tools.given) >= {"lookup", "delete_account", "refund"}
    assert trace.tokens.tools == trace.tools.tokens > 0
    assert trace.tokens.total <= trace.tokens.available
