"""The assemble step: one window that fits as sent.

The pinned and gathered sections are packed into the room the history leaves
(:func:`~ctxwise.assembly.assemble`); the stable and pinned ones (and, with
``context = "system"``, all of them) go in the system part, the stable prefix
first; the rest rides in the latest user turn as a context block. The window is
then counted as the render sends it: when it counts more than its sections did
one by one (the separators that join them, messages a render sends apart), the
sections get that much less room and are assembled again (:func:`fit_window`, on
:func:`~ctxwise.assembly.fit_as_sent`, which compaction fits its summary with too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxwise.assembly import Assembly, Budget, Section, SectionStatus, assemble, fit_as_sent
from ctxwise.errors import PinnedOverflowError, UsageError
from ctxwise.formats.request import Window
from ctxwise.messages import Message
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import Assembled, TurnState

__all__ = ["FIT_ATTEMPTS", "assemble_window", "fit_window"]

FIT_ATTEMPTS = 4
"""Assemblies a turn tries before the window fits as sent (one is the rule)."""


def _owners(sources: Sequence[tuple[Section, str]]) -> dict[str, str]:
    owner: dict[str, str] = {}
    for s, src in sources:
        if s.name in owner:
            raise UsageError(f"section name {s.name!r} from {src!r} is used by {owner[s.name]!r}")
        owner[s.name] = src
    return owner


def _window(
    ctx: TurnContext, assembly: Assembly, history: tuple[Message, ...]
) -> tuple[Window, dict[str, str]]:
    system_part: list[str] = []
    context_part: list[str] = []
    stable = 0
    placements: dict[str, str] = {}
    for s in assembly.sections:
        in_system = s.stable or s.pinned or ctx.config.context == "system"
        placements[s.name] = "system" if in_system else "context"
        if in_system:
            system_part.append(s.content)
            if s.stable and stable == len(system_part) - 1:
                stable += 1
        else:
            context_part.append(s.content)
    context_at = None
    if context_part:
        context_at = next(
            (i for i in range(len(history) - 1, -1, -1) if history[i].role == "user"), None
        )
        if context_at is None:  # no user turn: the context joins the system part
            system_part.extend(context_part)
            context_part = []
    window = Window(tuple(system_part), stable, history, "\n\n".join(context_part), context_at)
    return window, placements


@dataclass(frozen=True, slots=True)
class _Fit:
    room: int
    assembly: Assembly
    window: Window
    placements: dict[str, str]


def fit_window(
    ctx: TurnContext,
    sections: Sequence[Section],
    history: tuple[Message, ...],
    history_counts: Sequence[int],
    *,
    room: int,
    floor: int,
    available: int,
) -> tuple[Assembly, Window, dict[str, str], int]:
    """Assemble ``sections`` in ``room`` tokens beside ``history``, with
    :func:`~ctxwise.assembly.fit_as_sent`: while the window, counted as sent, is over
    ``available``, the sections get that much less room (down to ``floor``); returns
    the assembly, the window, each section's placement and the window's tokens."""

    def build(room: int) -> _Fit:
        assembly = assemble(sections, Budget(max(room, floor)), ctx.counter, order=ctx.config.order)
        return _Fit(room, assembly, *_window(ctx, assembly, history))

    def count(f: _Fit) -> int:
        counts = list(history_counts)
        if f.window.context_at is not None:
            counts[f.window.context_at] = ctx.count(f.window.with_context()[f.window.context_at])
        if f.window.system:
            counts.insert(0, ctx.sent.count_messages(f.window.transcript().messages[:1]))
        return ctx.joined(counts)

    excesses: list[int] = []

    def shrink(f: _Fit, excess: int) -> _Fit | None:
        if f.room <= floor:
            return None
        stuck = bool(excesses) and excess >= excesses[-1]
        excesses.append(excess)
        if not stuck:
            return build(f.room - excess)
        # the last cut did not lower the excess: the sections used less than their
        # room (a truncation that stops at a word boundary far back) or a counter with
        # fractional weights counts them no shorter once sent; cut from what they
        # used, by at least what the rounds before took
        used = sum(r.tokens for r in f.assembly.reports if r.status is not SectionStatus.DROPPED)
        return build(min(f.room, used) - max(excess, room - f.room))

    done, total, _ = fit_as_sent(build(room), count, available, shrink, FIT_ATTEMPTS - 1)
    return done.assembly, done.window, done.placements, total


def assemble_window(state: TurnState, ctx: TurnContext) -> TurnState:
    plan = state.budget
    assert plan is not None, "the assemble step runs after the budget step"
    session = state.session
    history_tokens = ctx.joined(session.tokens)
    owners = _owners((*plan.pinned, *state.gathered))
    sections = [s for s, _ in (*plan.pinned, *state.gathered)]
    context_budget = plan.window - plan.framing - history_tokens
    # what must stay: the pinned sections and the history (kept whole when
    # compaction is off, or when it could not shrink it further)
    must = [s.name for s, _ in plan.pinned] + (["history"] if history_tokens else [])
    if context_budget < plan.pinned_tokens + 1:
        # what they need is reported with the request's framing, as the check counts it
        need = plan.framing + plan.pinned_tokens + history_tokens + 1
        raise PinnedOverflowError(plan.window, need, must)
    # the context block's tags cost a few tokens: keep room for them
    tags = ctx.counter.count("<context>\n\n</context>") + 1
    assembly, window, placements, total = fit_window(
        ctx,
        sections,
        session.history,
        session.tokens,
        room=context_budget - tags,
        floor=plan.pinned_tokens + 1,
        available=plan.window,
    )
    if total > plan.window:
        raise PinnedOverflowError(plan.window, total, must)
    if session.encoded is None:
        session = session.but(encoded=tuple(ctx.encode(m) for m in session.history))
    assembled = Assembled(
        assembly, window, window.transcript(), owners, placements, total, history_tokens
    )
    return state.but(session=session, assembled=assembled)
