"""The budget step: how the window's tokens split.

``budget`` and ``reserve`` are the provider's tokens; the request is counted by the
Engine's counter. So ``budget - reserve`` (``available``) becomes a number of counted
tokens, the request's ``limit``: ``available / (factor × (1 + margin))``, rounded
down, where ``factor`` is the session's correction factor (the provider's prompt
tokens per counted token, learned from responses' usage by
:mod:`ctxwise.turn.calibrate`; 1 until then) and ``margin`` the ``safety_margin``
(by default the counter's measured 95th-percentile error,
:meth:`EngineConfig.margin_for <ctxwise.config.EngineConfig.margin_for>`). A
request that fits the limit is expected to fit ``available`` on the provider's
count unless the counter errs by more than the margin on top of the factor.

The window holds ``limit`` counted tokens, less this turn's tool definitions.
The pinned parts (the system texts, the standing rules, the case facts) and the
request's own framing come first; of the room they leave, ``context_share`` is
kept for routed and recalled context and the rest is the history's room. Pinned
parts (or tool definitions) that leave no room are a
:class:`~ctxwise.errors.PinnedOverflowError` naming them.
"""

from __future__ import annotations

import math

from ctxwise.assembly import Budget, Section
from ctxwise.errors import PinnedOverflowError
from ctxwise.messages import Message, TextBlock
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
    memo = state.session.calibration
    factor = memo.factor if memo is not None else 1.0
    margin = cfg.margin_for(ctx.counter, calibrated=memo is not None and memo.calls > 0)
    limit = max(1, math.floor(available / (factor * (1.0 + margin)) + 1e-9))
    tool_tokens = state.tools.tokens
    if tool_tokens >= limit:
        raise PinnedOverflowError(limit, tool_tokens, ["tool definitions"])
    window = limit - tool_tokens
    framing = ctx.count(Message.text_message("system", ""))
    pinned = pinned_sections(ctx, state.session, state.prompt)
    pinned_tokens = sum(ctx.counter.count(s.content) for s, _ in pinned)
    if len(pinned) > 1:
        # as the window sends them, one block each in the system message: a counter
        # with a per-block overhead (the calibrated Anthropic one) or a render that
        # joins them counts more than their texts and one framing
        system = Message("system", tuple(TextBlock(s.content) for s, _ in pinned))
        pinned_tokens = max(pinned_tokens, ctx.count(system) - framing)
    room = window - framing - pinned_tokens
    if room <= 0:
        # the request's own framing is what must stay too (all of it, when
        # nothing is pinned)
        raise PinnedOverflowError(
            window, pinned_tokens + framing, [*(s.name for s, _ in pinned), "request framing"]
        )
    history_room = room - int(cfg.context_share * room)
    plan = BudgetPlan(
        available,
        window,
        framing,
        tuple(pinned),
        pinned_tokens,
        room,
        history_room,
        limit=limit,
        factor=factor,
        margin=margin,
    )
    return state.but(budget=plan)
