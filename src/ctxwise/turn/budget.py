"""The budget step: how the window's tokens split.

The window holds ``budget - reserve`` tokens, less this turn's tool definitions.
The pinned parts (the system texts, the standing rules, the case facts) and the
request's own framing come first; of the room they leave, ``context_share`` is
kept for routed and recalled context and the rest is the history's room. Pinned
parts (or tool definitions) that leave no room are a
:class:`~ctxwise.errors.PinnedOverflowError` naming them.
"""

from __future__ import annotations

from ctxwise.assembly import Budget, Section
from ctxwise.errors import PinnedOverflowError
from ctxwise.messages import Message
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import BudgetPlan, SessionView, TurnState

__all__ = ["budget", "pinned_sections"]


def pinned_sections(
    ctx: TurnContext, session: SessionView, prompt: str | None = None
) -> list[tuple[Section, str]]:
    """The pinned sections and their sources: the system texts (this call's
    ``prompt`` first, see :meth:`Engine.turn <ctxwise.engine.Engine.turn>`), the
    standing rules, the case facts."""
    out: list[tuple[Section, str]] = []
    texts = [s for s in (ctx.config.system, ctx.system_file(), *session.system) if s]
    if prompt is not None:
        same = prompt.strip()
        texts = [prompt, *(s for s in texts if s.strip() != same)]
    system = "\n\n".join(texts)
    if system:
        out.append((Section("system", system, 1000, pinned=True, stable=True), "(system)"))
    if len(session.rules):
        out.append((session.rules.section(), "(rules)"))
    if len(session.facts):
        out.append((session.facts.section(), "(facts)"))
    return out


def budget(state: TurnState, ctx: TurnContext) -> TurnState:
    cfg = ctx.config
    available = Budget(cfg.budget, cfg.reserve).available
    tool_tokens = state.tools.tokens
    if tool_tokens >= available:
        raise PinnedOverflowError(available, tool_tokens, ["tool definitions"])
    window = available - tool_tokens
    framing = ctx.count(Message.text_message("system", ""))
    pinned = pinned_sections(ctx, state.session, state.prompt)
    pinned_tokens = sum(ctx.counter.count(s.content) for s, _ in pinned)
    room = window - framing - pinned_tokens
    if room <= 0:
        # the request's own framing is what must stay too (all of it, when
        # nothing is pinned)
        raise PinnedOverflowError(
            window, pinned_tokens + framing, [*(s.name for s, _ in pinned), "request framing"]
        )
    history_room = room - int(cfg.context_share * room)
    plan = BudgetPlan(available, window, framing, tuple(pinned), pinned_tokens, room, history_room)
    return state.but(budget=plan)
