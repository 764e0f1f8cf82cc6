"""The trace step: what the turn did, as a :class:`~ctxwise.trace.Trace` (stored
with the commit): the route and the sources chosen and skipped, each section's
fate, clearing and compaction, what the session learned, the tokens by part, the
tool definitions and tool events, and each step's time."""

from __future__ import annotations

from ctxwise.assembly import SectionStatus
from ctxwise.trace import SectionTrace, TokensTrace, Trace
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import TurnState

__all__ = ["trace"]


def trace(state: TurnState, ctx: TurnContext) -> TurnState:
    done, plan, route = state.assembled, state.budget, state.route
    assert done is not None and plan is not None and route is not None, "trace runs last"
    session = state.session
    window = done.window
    reports = done.assembly.reports
    system_tokens = sum(ctx.counter.count(s) for s in window.system)
    stable_tokens = sum(ctx.counter.count(s) for s in window.system[: window.stable])
    timings = {**state.timings, "total": (ctx.clock() - state.started) * 1000}
    turn = session.turns + 1
    result = Trace(
        session_id=session.session_id,
        turn=turn,
        version=state.base.version + 1,
        new_messages=len(state.new),
        route=route,
        chosen=list(state.chosen),
        skipped=list(state.skipped),
        sections=[
            SectionTrace(
                name=r.name,
                source=done.owners[r.name],
                placement="system" if done.placements.get(r.name) == "system" else "context",
                status=r.status.value,
                tokens=r.tokens,
                original_tokens=r.original_tokens,
                reason=r.reason,
                pinned=r.section.pinned,
                stable=r.section.stable,
                refs=list(r.section.refs),
            )
            for r in reports
        ],
        cleared=state.cleared,
        edit_gate=state.edit_gate,
        compacted=state.compacted,
        facts_changed=list(state.facts_changed),
        rules_added=list(state.rules_added),
        gates_added=list(state.gates_added),
        tokens=TokensTrace(
            budget=ctx.config.budget,
            available=plan.available,
            system=system_tokens,
            context=sum(
                r.tokens
                for r in reports
                if done.placements.get(r.name) == "context"
                and r.status is not SectionStatus.DROPPED
            ),
            history=done.history_tokens,
            total=done.total_tokens + state.tools.tokens,
            stable_prefix=stable_tokens,
            history_room=plan.history_room,
            tools=state.tools.tokens,
        ),
        tools=state.tools.trace,
        cache=state.cache,
        tool_events=list(session.tool_events),
        fail_open=list(session.fail_open),
        ledger=state.ledger,
        timings_ms={k: round(v, 3) for k, v in timings.items()},
        attempts=state.attempt,
    )
    return state.but(session=session.but(turns=turn, tool_events=(), fail_open=()), trace=result)
