"""The route step: the latest user message is routed (once per message: a
tool-result turn reuses its route) and the sources its label needs are chosen.
A refusal, or a label the routes table does not know, falls back to the broader
set: it never guesses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ctxwise._session_state import RouteMemo
from ctxwise.errors import UsageError
from ctxwise.messages import Message
from ctxwise.trace import RouteTrace
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import TurnState

__all__ = ["check_sendable", "choose", "route"]


def route(state: TurnState, ctx: TurnContext) -> TurnState:
    session = state.session
    check_sendable(session.history)
    query = index = None
    for i in range(len(session.history) - 1, -1, -1):
        m = session.history[i]
        if m.role == "user" and m.kind == "message" and m.text.strip():
            query, index = m.text, session.origins[i]
            break
    if ctx.router is None or query is None:
        reason = "no router" if ctx.router is None else "no user message"
        trace = RouteTrace(query=query, label=None, reason=reason)
        return state.but(route=trace, chosen=ctx.fallback, fallback=None)
    memo = session.route
    if memo is not None and memo.origin == index and index is not None:
        trace = RouteTrace.model_validate({**memo.trace, "reused": True})
    else:
        decision = ctx.router.route(query)
        top = sorted(decision.scores.items(), key=lambda kv: -kv[1])[:5]
        trace = RouteTrace(
            query=query,
            label=decision.label,
            reason=decision.reason.value,
            score=float(decision.score),
            scores={k: round(float(v), 6) for k, v in top},
        )
        memo = RouteMemo(origin=index, trace=trace.model_dump(mode="json"))
        session = session.but(route=memo)
    chosen, fallback = choose(ctx.routes, ctx.fallback, trace.label, trace.reason)
    return state.but(
        session=session,
        route=trace.model_copy(update={"fallback": fallback}),
        chosen=chosen,
        fallback=fallback,
    )


def check_sendable(history: Sequence[Message]) -> None:
    """A history a request can be built from: not empty, not waiting on tool results."""
    if not history:
        raise UsageError("there is nothing to send: the session has no messages yet")
    if history[-1].role == "assistant" and history[-1].tool_uses:
        raise UsageError(
            "the history ends with tool calls awaiting their results; pass the "
            "tool results with the next turn (or record them with Engine.record)"
        )


def choose(
    routes: Mapping[str, tuple[str, ...]],
    fallback: tuple[str, ...],
    label: str | None,
    reason: str,
) -> tuple[tuple[str, ...], str | None]:
    """The sources a label needs, and why the fallback set was taken (None: it was
    not): a refusal, or a label the routes table does not know, takes the fallback."""
    if label is None:
        return fallback, f"router refused ({reason})"
    if label not in routes:
        return fallback, f"no route for label {label!r}"
    return routes[label], None
