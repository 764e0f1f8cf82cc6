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

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxwise.assembly import Section
from ctxwise.config import BUILTIN_SOURCES
from ctxwise.errors import UsageError
from ctxwise.sources import Source, SourceContext
from ctxwise.turn.context import TurnContext
from ctxwise.turn.effects import pending, remember
from ctxwise.turn.state import TurnState

__all__ = ["gather", "gather_sections"]


def gather_sections(
    sources: Mapping[str, Source], chosen: Sequence[str], query: str, context: Mapping[str, Any]
) -> list[tuple[Section, str]]:
    """The sections of each ``chosen`` source (only those), with the source's name; a
    source that returns anything but a list of Sections is a :class:`UsageError`."""
    out: list[tuple[Section, str]] = []
    for name in chosen:
        found = sources[name].sections(query, context)
        if isinstance(found, Section | str) or not isinstance(found, Iterable):
            raise UsageError(
                f"source {name!r} returned {found!r} from sections(), not a list of Sections"
            )
        for section in found:
            if not isinstance(section, Section):
                raise UsageError(
                    f"source {name!r} returned {section!r} among its sections, not a Section"
                )
            out.append((section, name))
    return out


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
    chosen = [n for n in state.chosen if n in ctx.sources]
    gathered = gather_sections(ctx.sources, chosen, state.query or "", context)
    names = (*(n for n in ctx.sources if n not in BUILTIN_SOURCES), *BUILTIN_SOURCES)
    return state.but(
        session=session,
        gathered=tuple(gathered),
        skipped=tuple(n for n in names if n not in state.chosen),
    )
