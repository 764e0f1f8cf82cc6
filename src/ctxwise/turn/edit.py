"""The edit step: clear, then compact, when the history is over its thresholds.

When the history passes ``clearing.trigger`` of its room, old tool results are
cleared (the last ``keep_last`` stay). When it still does not fit its room, it is
compacted to ``compaction.target`` of it, keeping a verbatim tail and never
splitting a tool pair; a compaction that would summarize the latest exchange (what
the model answers next) is tried again with more room while there is more. The
originals are never lost: every message is in the session's log before an edit
is stored, and long-term memory holds each turn of the log (the turn's effects
put what it has not yet in; see :mod:`ctxwise.turn.effects`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxwise.compaction import Compaction, CompactionSettings, compact
from ctxwise.compaction.errors import CompactionBudgetError
from ctxwise.editing import clear_tool_uses
from ctxwise.messages import Message, ToolResultBlock, Transcript
from ctxwise.trace import ClearTrace, CompactionTrace
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import BudgetPlan, TurnState

__all__ = ["clear", "compact_history", "count_turns", "edit", "latest_exchange"]


def latest_exchange(history: Sequence[Message]) -> int:
    """Where the latest exchange starts: the last message, or, when it (and the
    messages just before it) hold only tool results, the assistant message whose
    calls they answer. A compaction must keep it verbatim."""
    i = len(history) - 1
    while (
        i > 0
        and history[i].role == "user"
        and history[i].content
        and all(isinstance(b, ToolResultBlock) for b in history[i].content)
    ):
        i -= 1
    if i < len(history) - 1 and history[i].role == "assistant" and history[i].tool_uses:
        return i
    return len(history) - 1


def count_turns(messages: Sequence[Message]) -> int:
    """How many long-term memory items ``messages`` make: one per message, a call
    and the results that answer it being one (as :func:`ctxwise.memory.tiered.turn_items`
    groups them)."""
    n = i = 0
    while i < len(messages):
        if messages[i].role == "system":
            i += 1
            continue
        pending = {b.id for b in messages[i].tool_uses}
        i += 1
        while pending and i < len(messages):
            answered = {b.tool_use_id for b in messages[i].tool_results}
            if not answered & pending:
                break
            pending -= answered
            i += 1
        n += 1
    return n


def edit(state: TurnState, ctx: TurnContext) -> TurnState:
    """Clear, then compact (see the module docstring)."""
    assert state.budget is not None, "the edit step runs after the budget step"
    return compact_history(clear(state, ctx), ctx)


def clear(state: TurnState, ctx: TurnContext) -> TurnState:
    """Old tool results cleared when the history passes ``clearing.trigger`` of its room."""
    cfg = ctx.config
    plan = state.budget
    assert plan is not None
    session = state.session
    total = ctx.joined(session.tokens)
    trigger = int(cfg.clearing.trigger * plan.history_room)
    if not (cfg.clearing.enabled and cfg.clearing.mode == "local" and total > trigger):
        return state
    result = clear_tool_uses(
        Transcript(session.history),
        trigger_tokens=0,
        keep_last=cfg.clearing.keep_last,
        exclude_tools=cfg.clearing.exclude_tools,
        counter=ctx.sent,
    )
    if not (result.applied and result.cleared):
        return state
    new = result.transcript.messages
    first = next(
        (i for i, (a, b) in enumerate(zip(session.history, new, strict=True)) if a != b),
        len(new),
    )
    tokens = (*session.tokens[:first], *(ctx.count(m) for m in new[first:]))
    encoded = session.encoded
    if encoded is not None:
        encoded = (*encoded[:first], *(ctx.encode(m) for m in new[first:]))
    cleared = ClearTrace(
        tool_uses=result.cleared_tool_uses,
        tokens_freed=total - ctx.joined(tokens),
        trigger_tokens=trigger,
    )
    return state.but(
        session=session.but(history=new, tokens=tokens, encoded=encoded, clears=session.clears + 1),
        cleared=cleared,
        changed_from=first if state.changed_from is None else min(first, state.changed_from),
    )


def compact_history(state: TurnState, ctx: TurnContext) -> TurnState:
    """The history compacted when it does not fit its room."""
    cfg = ctx.config
    plan = state.budget
    assert plan is not None
    session = state.session
    total = ctx.joined(session.tokens)
    if not (cfg.compaction.enabled and total > plan.history_room):
        return state
    target = max(1, int(cfg.compaction.target * plan.history_room))
    done = _compaction(ctx, session.history, plan, target)
    if not done.compacted:
        return state
    cut = done.cut_index
    kept_origins = session.origins[cut:]
    summarized = [
        m
        for m, o in zip(session.history[:cut], session.origins[:cut], strict=True)
        if o is not None
    ]
    new = done.transcript.messages
    tokens = tuple(ctx.count(m) for m in new)
    compacted = CompactionTrace(
        summarized_messages=done.summarized_messages,
        tokens_before=total,
        tokens_after=ctx.joined(tokens),
        target_tokens=target,
        remembered_items=count_turns(summarized) if ctx.memory is not None else 0,
    )
    return state.but(
        session=session.but(
            history=new,
            origins=(*([None] * (len(new) - len(kept_origins))), *kept_origins),
            tokens=tokens,
            encoded=None,
            compactions=session.compactions + 1,
        ),
        compacted=compacted,
        changed_from=0,
    )


def _compaction(
    ctx: TurnContext, history: tuple[Message, ...], plan: BudgetPlan, target: int
) -> Compaction:
    """The target first; then the history's whole room; then the room the context
    share would have taken too (the context gets what is left). A compaction that
    summarizes the latest exchange (the message the model answers next, with the
    calls its results answer) is passed over for the next room while one is left:
    the model would not see it otherwise."""
    settings = CompactionSettings(
        extract=False, summary_tokens=ctx.config.compaction.summary_tokens
    )
    transcript = Transcript(history)
    latest = latest_exchange(history)
    done: Compaction | None = None
    smallest: Compaction | None = None
    for budget in (target, plan.history_room, plan.room):
        try:
            done = compact(
                transcript, ctx.summarizer, budget=budget, settings=settings, counter=ctx.sent
            )
        except CompactionBudgetError:
            if budget == plan.room and smallest is None:
                raise
            continue
        smallest = smallest if smallest is not None else done
        if not done.compacted or done.cut_index <= latest:
            return done
    # the latest exchange alone is larger than any room: summarized
    assert smallest is not None
    return smallest
