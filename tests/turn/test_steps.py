"""Each step of a turn alone, on a hand-built state and a context with no store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from ctxwise.assembly import Section
from ctxwise.errors import PairingError, PinnedOverflowError, UsageError
from ctxwise.messages import Message
from ctxwise.routing import KeywordClassifier
from ctxwise.sources import SourceContext, StaticSource
from ctxwise.turn import SessionView, TurnState
from ctxwise.turn.append import append
from ctxwise.turn.assemble import assemble_window
from ctxwise.turn.budget import budget
from ctxwise.turn.edit import count_turns, edit, latest_exchange
from ctxwise.turn.gather import gather
from ctxwise.turn.observe import observe
from ctxwise.turn.render import render
from ctxwise.turn.route import route
from ctxwise.turn.tools import tools
from ctxwise.turn.trace import trace

from ._build import assistant, call, context, result, session_of, state, user


def _through(s: TurnState, ctx: Any, *steps: Any) -> TurnState:
    for step in steps:
        s = step(s, ctx)
    return s


# ---------------------------------------------------------------- append


def test_append_counts_positions_and_system_texts() -> None:
    ctx = context()
    hi = user("hi")
    s = append(state(hi), ctx)
    assert s.session.history == (hi,)
    assert s.session.origins == (0,)
    assert s.session.tokens == (ctx.count(hi),)
    assert s.session.log_length == 1 and len(s.log) == 1
    assert s.base.history == ()  # the loaded session is untouched
    s2 = append(
        state(Message.text_message("system", "Be brief."), user("x"), session=s.session), ctx
    )
    assert s2.session.system == ("Be brief.",)
    assert [m.role for m in s2.session.history] == ["user", "user"]
    assert s2.session.origins == (0, 2)  # the system message has a log position too


def test_append_refuses_an_orphan_result_and_a_reused_id() -> None:
    ctx = context()
    with pytest.raises(PairingError):
        append(state(user("hi"), result("t9", "orphan")), ctx)
    held = session_of(ctx, user("go"), call("t1"), result("t1", "ok"))
    with pytest.raises(PairingError, match="id used before"):
        append(state(call("t1"), result("t1", "again"), session=held), ctx)


def test_append_recounts_a_history_counted_by_another_counter() -> None:
    ctx = context()
    held = session_of(ctx, user("hello there"))
    stale = held.but(tokens=(999,), counted_by="word/anthropic")
    s = append(state(user("next"), session=stale), ctx)
    assert s.recounted and s.session.tokens[0] == ctx.count(user("hello there"))


# ---------------------------------------------------------------- observe


def test_observe_captures_a_standing_rule_on_copies() -> None:
    ctx = context()
    s = append(state(user("Always answer in French from now on.")), ctx)
    done = observe(s, ctx)
    assert done.rules_added and "French" in done.rules_added[0]
    assert len(done.session.rules) == 1
    assert len(s.session.rules) == 0  # the state it was given is unchanged


def test_observe_without_new_messages_is_a_no_op() -> None:
    ctx = context()
    s = state()
    assert observe(s, ctx) is s


# ---------------------------------------------------------------- route


def _routed_ctx() -> Any:
    faq = StaticSource("faq", "Refunds take 5 days.")
    docs = StaticSource("docs", "The API has three endpoints.")
    ctx = context((faq, docs), routes={"billing": ["faq"], "api": ["docs"]})
    router = KeywordClassifier([("billing", ["refund"]), ("api", ["endpoint"])])
    return ctx.but(router=router)


def test_route_chooses_the_label_sources_and_falls_back_on_a_refusal() -> None:
    ctx = _routed_ctx()
    s = route(append(state(user("where is my refund?")), ctx), ctx)
    assert s.route is not None and s.route.label == "billing"
    assert s.chosen == ("faq",) and s.fallback is None
    refused = route(append(state(user("hello")), ctx), ctx)
    assert refused.chosen == ctx.fallback and refused.fallback is not None


def test_route_reuses_the_decision_for_the_same_message() -> None:
    ctx = _routed_ctx()
    first = route(append(state(user("refund please")), ctx), ctx)
    assert first.route is not None and not first.route.reused
    # the tool result's turn routes the same user message: the memo is reused
    later = first.session.but(version=1)
    again = route(append(state(call("t1"), result("t1", "ok"), session=later), ctx), ctx)
    assert again.route is not None and again.route.reused


def test_route_refuses_a_history_waiting_on_tool_results() -> None:
    ctx = context()
    with pytest.raises(UsageError, match="awaiting their results"):
        route(append(state(user("go"), call("t1")), ctx), ctx)
    with pytest.raises(UsageError, match="nothing to send"):
        route(state(), ctx)


# ---------------------------------------------------------------- tools, budget


def test_tools_without_a_catalog_sends_none() -> None:
    ctx = context()
    s = tools(route(append(state(user("hi")), ctx), ctx), ctx)
    assert s.tools.definitions is None and s.tools.tokens == 0


def test_budget_splits_the_room() -> None:
    ctx = context(budget=10_000, reserve=1_000, system="You help.", context_share=0.25)
    s = _through(state(user("hi")), ctx, append, route, tools, budget)
    plan = s.budget
    assert plan is not None
    assert plan.available == 9_000 and plan.window == 9_000
    assert plan.room == plan.window - plan.framing - plan.pinned_tokens
    assert plan.history_room == plan.room - int(0.25 * plan.room)
    assert [src for _, src in plan.pinned] == ["(system)"]


def test_budget_refuses_pinned_text_larger_than_the_window() -> None:
    ctx = context(budget=50, system="x" * 400)
    with pytest.raises(PinnedOverflowError):
        _through(state(user("hi")), ctx, append, route, tools, budget)


def test_budget_puts_this_calls_prompt_first() -> None:
    ctx = context(system="Configured.")
    s = _through(state(user("hi"), prompt="Framework prompt."), ctx, append, route, tools, budget)
    assert s.budget is not None
    system = s.budget.pinned[0][0].content
    assert system.startswith("Framework prompt.") and "Configured." in system


# ---------------------------------------------------------------- edit


def _long(n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n):
        out += [user(f"question {i} " + "word " * 40), call(f"t{i}", q=i)]
        out += [result(f"t{i}", "output " * 80), assistant(f"answer {i}")]
    return out


def test_edit_clears_then_compacts_and_keeps_the_loaded_session() -> None:
    ctx = context(budget=4_000, costs={"gate": False})  # every clear runs (the gate: below)
    held = session_of(ctx, *_long(12))
    s = _through(state(user("and now?"), session=held), ctx, append, route, tools, budget)
    done = edit(s, ctx)
    assert done.compacted is not None or done.cleared is not None
    assert ctx.joined(done.session.tokens) <= done.budget.history_room  # type: ignore[union-attr]
    assert done.session.history[-1] == user("and now?")  # the latest exchange stays
    assert done.changed_from is not None
    assert s.session.history == (*held.history, user("and now?"))


def test_edit_under_the_threshold_changes_nothing() -> None:
    ctx = context(budget=100_000)
    s = _through(state(user("hi")), ctx, append, route, tools, budget)
    assert edit(s, ctx) is s


def test_latest_exchange_and_turn_count() -> None:
    history = [user("a"), call("t1"), result("t1", "r")]
    assert latest_exchange(history) == 1
    assert latest_exchange([user("a"), assistant("b")]) == 1
    assert count_turns(history) == 2  # the call and its result are one item


# ---------------------------------------------------------------- gather


class _Spy:
    name = "spy"

    def __init__(self) -> None:
        self.seen: list[tuple[str, Mapping[str, Any]]] = []

    def sections(self, query: str, state: Mapping[str, Any]) -> Sequence[Section]:
        self.seen.append((query, state))
        return (Section("spied", f"about {query}", 10),)

    def cost_estimate(self, query: str, state: Mapping[str, Any]) -> int:
        return 3


def test_gather_calls_only_the_chosen_sources_with_a_typed_context() -> None:
    spy, other = _Spy(), StaticSource("other", "never")
    ctx = context((spy, other), routes={}, fallback=["spy"])
    s = _through(state(user("refunds")), ctx, append, route, tools, budget, gather)
    assert [src for _, src in s.gathered] == ["spy"]
    assert "other" in s.skipped
    query, got = spy.seen[0]
    assert query == "refunds"
    assert isinstance(got, SourceContext) and got.session_id == "s" and got["turn"] == 1


# ---------------------------------------------------------------- assemble, render, trace


def test_assemble_render_and_trace_build_the_request() -> None:
    faq = StaticSource("faq", "Refunds take 5 days.")
    ctx = context((faq,), system="You help.")
    s = _through(state(user("refund?")), ctx, append, route, tools, budget, gather, assemble_window)
    assert s.assembled is not None and s.assembled.total_tokens <= s.budget.window  # type: ignore[union-attr]
    assert s.session.encoded is not None
    r = render(s, ctx)
    assert r.request is not None and r.request["system"] and r.request["messages"]
    t = trace(r, ctx)
    assert t.trace is not None and t.trace.turn == 1 and t.session.turns == 1
    assert {sec.name for sec in t.trace.sections} == {"system", "faq"}
    assert t.trace.tokens.total == s.assembled.total_tokens


def test_render_openai() -> None:
    ctx = context(render="openai", system="You help.")
    s = _through(
        state(user("hi")), ctx, append, route, tools, budget, gather, assemble_window, render
    )
    assert s.request is not None and s.request["messages"][0]["role"] == "system"


def test_assemble_refuses_a_history_that_leaves_no_room() -> None:
    ctx = context(budget=400, compaction={"enabled": False}, clearing={"enabled": False})
    s = _through(state(user("x" * 2_000)), ctx, append, route, tools, budget)
    with pytest.raises(PinnedOverflowError):
        assemble_window(s, ctx)


# ---------------------------------------------------------------- tools given, cost, gate


def test_tools_counts_the_definitions_given_on_the_turn() -> None:
    from ctxwise.tools.given import read_tools

    ctx = context()
    given = read_tools([{"name": "lookup", "input_schema": {"type": "object"}}])
    s = TurnState.start(SessionView("s", 0), (user("hi"),), tools=given)
    done = tools(_through(s, ctx, append, route), ctx)
    assert done.tools.definitions is not None and done.tools.definitions[0]["name"] == "lookup"
    assert done.tools.tokens > 0 and done.tools.trace is not None
    assert done.tools.trace.given == ["lookup"]


def test_cost_charges_the_request_against_the_session_s_cache() -> None:
    from ctxwise.turn.cost import cost

    ctx = context(system="You help. " * 500, model="claude-sonnet-4-5")
    steps = (append, route, tools, budget, gather, assemble_window, render)
    first = cost(_through(state(user("refund?")), ctx, *steps), ctx)
    assert first.cache is not None and first.cache.read == 0 and first.cache.write_5m > 0
    assert first.session.prompt_cache is not None and first.session.prompt_cache.written
    held = first.session.but(version=1)
    second = cost(_through(state(assistant("ok"), user("and?"), session=held), ctx, *steps), ctx)
    assert second.cache is not None and second.cache.read > 0  # the system part, cached
    assert second.cache.input_usd is not None and second.cache.uncached_usd is not None
    assert second.cache.input_usd < second.cache.uncached_usd


def test_cost_is_off_when_costs_track_is_off() -> None:
    from ctxwise.turn.cost import cost

    ctx = context(costs={"track": False})
    s = _through(
        state(user("hi")), ctx, append, route, tools, budget, gather, assemble_window, render
    )
    assert cost(s, ctx) is s


def test_the_edit_gate_refuses_a_clear_that_does_not_pay() -> None:
    from ctxwise.turn.edit import clear_pays

    ctx = context(model="claude-sonnet-4-5")
    no = clear_pays(ctx, saved=100, rewrite=50_000, horizon=5, forced=False)
    assert not no.ran and no.saving < no.cost
    forced = clear_pays(ctx, saved=100, rewrite=50_000, horizon=5, forced=True)
    assert forced.ran and forced.forced  # the hard budget always wins
    yes = clear_pays(ctx, saved=20_000, rewrite=10_000, horizon=20, forced=False)
    assert yes.ran and yes.saving > yes.cost
