"""The ledger step: where each message of the session's log is on this request, in a
form small enough to record on every turn (:class:`~ctxwise.trace.LedgerTrace`).

The live history knows the log position each of its messages came from (``None``
for a summary). Runs of consecutive positions become ``[start, stop)`` ranges; each
summary is placed between the positions around it, which are the messages it stands
for; the messages whose tool results this turn cleared (the edit step names them)
are ranges too. Nothing is counted or read from the store here: one pass over the
history's positions. :mod:`ctxwise.ledger` reads these records back with the log
and the rest of the trace into the per-message ledger.
"""

from __future__ import annotations

from collections.abc import Iterable

from ctxwise.trace import LedgerTrace, SummaryTrace
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import TurnState

__all__ = ["ledger", "ranges"]


def ranges(positions: Iterable[int]) -> list[tuple[int, int]]:
    """Increasing ``positions`` as ``[start, stop)`` runs of consecutive ones."""
    out: list[tuple[int, int]] = []
    for p in positions:
        if out and out[-1][1] == p:
            out[-1] = (out[-1][0], p + 1)
        else:
            out.append((p, p + 1))
    return out


def ledger(state: TurnState, ctx: TurnContext) -> TurnState:
    """Record the ledger of this turn's request (see the module docstring)."""
    session = state.session
    origins = session.origins
    window: list[tuple[int, int]] = []
    summaries: list[SummaryTrace] = []
    last = -1  # the log position of the latest message seen
    pending: list[int] = []  # summaries waiting for the next message's position
    for i, origin in enumerate(origins):
        if origin is None:
            pending.append(i)
            continue
        if window and window[-1][1] == origin:
            window[-1] = (window[-1][0], origin + 1)
        else:
            window.append((origin, origin + 1))
        for at in pending:
            summaries.append(_summary(state, at, last + 1, origin))
        pending.clear()
        last = origin
    for at in pending:
        summaries.append(_summary(state, at, last + 1, session.log_length))
    record = LedgerTrace(
        log_length=session.log_length,
        window=window,
        summaries=summaries,
        cleared=ranges(sorted(set(state.cleared_positions))),
        cleared_ids=list(dict.fromkeys(state.cleared_ids)),
        first_change=state.changed_from,
    )
    return state.but(ledger=record)


def _summary(state: TurnState, index: int, first: int, stop: int) -> SummaryTrace:
    tokens = state.session.tokens
    return SummaryTrace(
        index=index, first=first, stop=stop, tokens=tokens[index] if index < len(tokens) else 0
    )
