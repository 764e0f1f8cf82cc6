"""The cost step: what the rendered request costs with the provider's prompt cache.

The request's blocks (:func:`ctxwise.prompt_cache.request_blocks`: each tool
definition, system block and message, found again by identity when the previous
request of the session had them) are charged against the session's cache as its
requests left it (the prefixes written, kept in the session state; where the
previous request's blocks were, kept in memory only), each block counted as the
budget counts it. The trace gets the split (read from the
cache, written, uncached), its money at the model's price, and where the request
first differs from the previous one and why.
"""

from __future__ import annotations

from ctxwise._session_state import CacheMemo
from ctxwise.pricing import TokenSplit, cost_usd, price_for
from ctxwise.prompt_cache import PromptCache, request_blocks
from ctxwise.trace import CacheTrace
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import TurnState

__all__ = ["change_reason", "cost"]


def change_reason(state: TurnState, where: str | None) -> str | None:
    """Why the request differs from the previous one at ``where``."""
    if where is None:
        return None
    if where.startswith("tools"):
        return "tool definitions changed (a tool loaded, found or given)"
    if where.startswith("system"):
        what = []
        if state.facts_changed:
            what.append(f"facts changed ({', '.join(state.facts_changed)})")
        if state.rules_added:
            what.append("rules added")
        return "; ".join(what) or "system part changed (prompt, pinned or context sections)"
    if state.compacted is not None:
        return "compaction this turn"
    if state.cleared is not None:
        return "tool results cleared this turn"
    return "history changed (context sections moved or an earlier edit)"


def cost(state: TurnState, ctx: TurnContext) -> TurnState:
    cfg = ctx.config
    done, request = state.assembled, state.request
    assert done is not None and request is not None, "the cost step runs after render"
    if not cfg.costs.track:
        return state
    session = state.session
    kept = session.prompt_cache
    memo = ctx.block_memo(session.session_id)
    cache = PromptCache.restore(
        cfg.render,
        kept.written if kept is not None else (),
        memo.previous,
        min_tokens=cfg.costs.min_cache_tokens,
    )
    blocks = request_blocks(request, ctx.counter, memo, render=cfg.render)
    charge = cache.charge(blocks)
    split = charge.split
    price = price_for(cfg.model, cfg.costs.prices)
    trace = CacheTrace(
        model=cfg.model,
        read=split.cache_read,
        write_5m=split.cache_write_5m,
        write_1h=split.cache_write_1h,
        uncached=split.uncached,
        input_usd=_usd(cost_usd(split, price)),
        uncached_usd=_usd(cost_usd(TokenSplit(uncached=split.input), price)),
        first_change=charge.first_change,
        reason=change_reason(state, charge.first_change),
    )
    memo.previous = cache.previous  # the commit may still fail: then the memo is dropped
    written = CacheMemo(written=cache.state())
    return state.but(session=session.but(prompt_cache=written), cache=trace)


def _usd(value: float | None) -> float | None:
    return None if value is None else round(value, 8)
