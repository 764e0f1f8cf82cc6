"""The append step: this turn's messages join the working session.

Tool pairing is checked against the history first (a result that answers no
call, a call left unanswered before the next assistant message, a reused id: a
:class:`~ctxwise.errors.PairingError`, nothing appended). System messages join
the session's system texts instead of the history. Each message is counted as the
render sends it and gets its log position; nothing is stored until the commit.
A history counted by another counter or render is counted again first.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxwise.errors import PairingError
from ctxwise.formats import neutral
from ctxwise.messages import Message, PairingProblem, ProblemKind, Transcript
from ctxwise.pairing import problems as pairing_problems
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import SessionView, TurnState

__all__ = ["append", "check_pairing"]


def check_pairing(session: SessionView, messages: Sequence[Message]) -> None:
    """Refuse messages whose tool results answer no call, calls that are never
    answered before the next assistant message, and reused ids."""
    history = session.history
    start = len(history)
    while start > 0 and history[start - 1].role != "assistant":
        start -= 1
    if start > 0:
        start -= 1  # from the last assistant message on
    probe = [*history[start:], *(m for m in messages if m.role != "system")]
    found = []
    for p in pairing_problems(Transcript(tuple(probe)), "loose"):
        pending_at_end = p.kind is ProblemKind.UNANSWERED_USE and p.message_index == len(probe) - 1
        if not pending_at_end:
            found.append(p)
    found.extend(
        PairingProblem(ProblemKind.DUPLICATE_ID, b.id, len(history), "id used before")
        for m in messages
        for b in m.tool_uses
        if b.id in session.tool_ids
    )
    if found:
        raise PairingError(found, "loose", f"session {session.session_id!r}", repairable=False)


def append(state: TurnState, ctx: TurnContext) -> TurnState:
    """Append ``state.new`` to the working session (see the module docstring)."""
    session = state.session
    counted_by = f"{ctx.counter.name}/{ctx.config.render}"
    recounted = session.counted_by != counted_by and bool(session.history)
    tokens = [ctx.count(m) for m in session.history] if recounted else list(session.tokens)
    check_pairing(session, state.new)
    history = list(session.history)
    origins = list(session.origins)
    encoded = None if session.encoded is None else list(session.encoded)
    system = list(session.system)
    tool_ids = session.tool_ids.copy()
    for i, m in enumerate(state.new):
        if m.role == "system":
            text = m.text.strip()
            if text and text not in system:
                system.append(text)
            continue
        history.append(m)
        tokens.append(ctx.count(m))
        origins.append(session.log_length + i)
        if encoded is not None:
            encoded.append(ctx.encode(m))
        for b in m.tool_uses:
            tool_ids.add(b.id)
    return state.but(
        session=session.but(
            history=tuple(history),
            tokens=tuple(tokens),
            origins=tuple(origins),
            encoded=None if encoded is None else tuple(encoded),
            system=tuple(system),
            tool_ids=tool_ids,
            log_length=session.log_length + len(state.new),
            counted_by=counted_by,
        ),
        log=tuple(neutral.encode_message(m) for m in state.new),
        recounted=recounted,
    )
