"""A turn's effects: what it writes outside the session store, after the commit.

The turn's steps write nothing: the commit stores the session, its log and the
trace in one transaction. What goes elsewhere runs after it, once, and is safe to
run again: a version-conflict retry never repeats it (only the turn that commits
runs its effects), and an effect that did not run (the process stopped) is run by
a later turn (:mod:`ctxwise.turn.gather` puts compacted turns into memory before
it recalls).

:class:`~ctxwise.turn.state.Remember` puts the log span a compaction took out of
the live history into long-term memory, verbatim from the log, one item per turn
(an item's id is its position: remembering a span twice changes nothing).
"""

from __future__ import annotations

from ctxwise.formats import neutral
from ctxwise.memory.source import SessionMemory
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import Remember, SessionView

__all__ = ["Remember", "pending", "remember"]


def pending(ctx: TurnContext, session: SessionView) -> tuple[Remember, ...]:
    """The effects a committed session still needs: the turns compacted out of its
    live history that long-term memory does not hold yet."""
    first_live = session.first_live()
    if ctx.memory is None or session.remembered >= first_live:
        return ()
    return (Remember(session.session_id, session.remembered, first_live),)


def remember(ctx: TurnContext, effect: Remember) -> int:
    """Run a :class:`Remember`; returns how many items it wrote."""
    if ctx.memory is None or effect.upto <= effect.start or ctx.read_log is None:
        return 0
    raw = ctx.read_log(effect.session_id, effect.start, effect.upto)
    originals = neutral.decode_messages(list(raw), effect.start)
    memory = SessionMemory(ctx.memory, ctx.embedder, ctx.namespace, preset=ctx.config.memory.preset)
    return memory.remember(effect.session_id, originals, effect.start)
