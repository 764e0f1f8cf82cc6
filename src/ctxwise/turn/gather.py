"""The gather step: sections from the chosen sources only.

Each chosen source gets the routed query and a
:class:`~ctxwise.sources.SourceContext`; a source that was not chosen is never
called. The built-in ``memory`` source
(:class:`~ctxwise.memory.source.MemorySource`) recalls the turns compaction took
out of the live history. Those turns are put into memory after the turn that
compacted them is committed; when that did not happen (the process stopped
between the two), they are put in here first, so the recall is complete.
"""

from __future__ import annotations

from ctxwise.assembly import Section
from ctxwise.config import BUILTIN_SOURCES
from ctxwise.sources import SourceContext
from ctxwise.turn.context import TurnContext
from ctxwise.turn.effects import pending, remember
from ctxwise.turn.state import TurnState

__all__ = ["gather"]


def gather(state: TurnState, ctx: TurnContext) -> TurnState:
    session = state.session
    # a compaction committed before this turn whose turns memory does not hold yet
    # (this turn's own compaction is remembered after its commit)
    base = state.base
    if "memory" in state.chosen and ctx.memory is not None:
        done = pending(ctx, base)
        for effect in done:
            remember(ctx, effect)
        if done:
            session = session.but(remembered=max(e.upto for e in done))
    first_live = session.first_live()
    context = SourceContext(
        session_id=session.session_id,
        turn=session.turns + 1,
        first_live=first_live,
        remembered=session.remembered,
    )
    gathered: list[tuple[Section, str]] = []
    for name in state.chosen:
        source = ctx.sources.get(name)
        if source is not None:
            gathered.extend((s, name) for s in source.sections(state.query or "", context))
    names = (*(n for n in ctx.sources if n not in BUILTIN_SOURCES), *BUILTIN_SOURCES)
    return state.but(
        session=session,
        gathered=tuple(gathered),
        skipped=tuple(n for n in names if n not in state.chosen),
    )
