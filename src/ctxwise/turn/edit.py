"""The edit step: clear, then compact, when the history is over its thresholds.

When the history passes ``clearing.trigger`` of its room, old tool results are
cleared (the last ``keep_last`` stay) — if the edit pays for itself (``costs.gate``):
clearing changes the prompt from the first cleared result on, so the provider
writes everything after it to its cache again; the tokens it saves are read from
the cache on every later turn. It runs when the saving over the expected horizon
(``costs.horizon``, or as many turns as the session has had) is worth more than
that re-write at the model's prices (:func:`clear_pays`), or when the history no
longer fits its room: the hard budget always wins. The trace records the decision
with its numbers (``edit_gate``). When it still does not fit its room, it is
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
from ctxwise.costs import ANTHROPIC_CACHE_READ_FACTOR, ANTHROPIC_CACHE_WRITE_FACTOR
from ctxwise.editing import clear_tool_uses
from ctxwise.messages import Message, ToolResultBlock, Transcript
from ctxwise.pricing import price_for
from ctxwise.tokens import CharCounter
from ctxwise.trace import ClearTrace, CompactionTrace, EditGateTrace
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import BudgetPlan, TurnState

__all__ = [
    "OPENAI_CACHE_READ_FACTOR",
    "cache_factors",
    "clear",
    "clear_pays",
    "compact_history",
    "count_turns",
    "edit",
    "latest_exchange",
]

_SELECT = CharCounter()
"""Chooses the results a clear replaces (only which, not how many tokens it frees)."""

OPENAI_CACHE_READ_FACTOR = 0.5
"""OpenAI's cached-input price over its input price on its older models (GPT-4o):
the smallest discount it documents, so an unpriced model's edits are not
under-valued."""


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
    forced = total > plan.history_room
    horizon = cfg.costs.horizon or max(1, session.turns)
    # what to clear is chosen with the free character counter (clear_tool_uses counts
    # the whole history before and after, and each result against the placeholder);
    # the tokens the turn keeps and traces are counted below with the Engine's counter,
    # for the changed messages only. A gate that refuses a clear evaluates one on
    # every turn over the trigger, so this choice is on the per-turn path
    result = clear_tool_uses(
        Transcript(session.history),
        trigger_tokens=0,
        keep_last=cfg.clearing.keep_last,
        exclude_tools=cfg.clearing.exclude_tools,
        counter=_SELECT,
    )
    if not (result.applied and result.cleared):
        return state
    new = result.transcript.messages
    # only the cleared messages changed (the others are the same objects): only they
    # are counted and encoded again
    changed = {
        i
        for i, (a, b) in enumerate(zip(session.history, new, strict=True))
        if a is not b and a != b
    }
    first = min(changed, default=len(new))
    tokens = tuple(ctx.count(m) if i in changed else session.tokens[i] for i, m in enumerate(new))
    gate = None
    if cfg.costs.gate:
        gate = clear_pays(
            ctx,
            saved=total - ctx.joined(tokens),
            rewrite=ctx.joined(tokens[first:]),
            horizon=horizon,
            forced=forced,
        )
        if not gate.ran:
            return state.but(edit_gate=gate)
    encoded = session.encoded
    if encoded is not None:
        encoded = tuple(ctx.encode(m) if i in changed else encoded[i] for i, m in enumerate(new))
    cleared = ClearTrace(
        tool_uses=result.cleared_tool_uses,
        tokens_freed=total - ctx.joined(tokens),
        trigger_tokens=trigger,
    )
    positions = tuple(sorted(p for i in changed if (p := session.origins[i]) is not None))
    ids = tuple(
        b.tool_use_id
        for i in sorted(changed)
        for a, b in zip(session.history[i].content, new[i].content, strict=False)
        if isinstance(b, ToolResultBlock) and a != b
    )
    return state.but(
        session=session.but(history=new, tokens=tokens, encoded=encoded, clears=session.clears + 1),
        cleared=cleared,
        edit_gate=gate,
        changed_from=first if state.changed_from is None else min(first, state.changed_from),
        cleared_positions=(*state.cleared_positions, *positions),
        cleared_ids=(*state.cleared_ids, *ids),
    )


def cache_factors(ctx: TurnContext) -> tuple[float, float]:
    """A cache read's and a 5-minute cache write's price over the base input price,
    for the configured model (its price, else the render's provider's documented
    factors: Anthropic's, or OpenAI's no write premium and its older models' read
    discount, the smaller one)."""
    cfg = ctx.config
    price = price_for(cfg.model, cfg.costs.prices)
    if price is not None and price.input > 0:
        return price.cache_read / price.input, price.cache_write_5m / price.input
    if cfg.render == "anthropic":
        return ANTHROPIC_CACHE_READ_FACTOR, ANTHROPIC_CACHE_WRITE_FACTOR
    return OPENAI_CACHE_READ_FACTOR, 1.0


def clear_pays(
    ctx: TurnContext, *, saved: int, rewrite: int, horizon: int, forced: bool
) -> EditGateTrace:
    """Whether clearing ``saved`` tokens, which re-writes ``rewrite`` tokens to the
    cache, pays over ``horizon`` turns: the saved tokens are a cache read each turn
    (``saved * read * horizon``), the re-write costs its write premium over a read
    once (``rewrite * (write - read)``), both over the base input price."""
    read, write = cache_factors(ctx)
    saving = saved * read * horizon
    cost = rewrite * max(0.0, write - read)
    return EditGateTrace(
        edit="clear",
        ran=forced or saving > cost,
        forced=forced,
        saved_tokens=saved,
        rewrite_tokens=rewrite,
        horizon=horizon,
        saving=round(saving, 3),
        cost=round(cost, 3),
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
    written = new[: len(new) - len(kept_origins)]
    compacted = CompactionTrace(
        summarized_messages=done.summarized_messages,
        tokens_before=total,
        tokens_after=ctx.joined(tokens),
        target_tokens=target,
        remembered_items=count_turns(summarized) if ctx.memory is not None else 0,
        summary="\n\n".join(m.text for m in written),
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
