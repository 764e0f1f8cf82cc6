"""The carry: what one relay step passes to the next, capped, with fixed shares.

The carry is rendered as three blocks — the kept lines (verbatim), the state table
(one JSON row per line) and the notes — and never counts more than its cap. Each
part has its own share of the cap (:class:`Shares`): the line store gets
``lines`` of it, the table and the notes together get ``state``. A part that grows
is cut within its own share only, so notes that grow without bound cannot push
the line store below its share, and the store cannot crowd out the table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxwise.errors import RelayError
from ctxwise.tokens import TokenCounter, truncate_to_tokens

__all__ = ["CarryBudget", "Shares", "render_carry", "render_table"]

LINES_HEADER = "== kept lines (verbatim) =="
TABLE_HEADER = "== state table =="
NOTES_HEADER = "== notes =="


@dataclass(frozen=True, slots=True)
class Shares:
    """Fixed shares of the carry's cap: ``lines`` for the verbatim store, ``state``
    for the table and the notes. Each is in (0, 1) and they sum to at most 1."""

    lines: float = 0.7
    state: float = 0.3

    def __post_init__(self) -> None:
        for name in ("lines", "state"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
                raise RelayError("spec", f"shares.{name} must be a number in (0, 1), not {value!r}")
        if self.lines + self.state > 1 + 1e-9:
            raise RelayError(
                "spec", f"shares sum to {self.lines + self.state:g}; they must sum to at most 1"
            )


def render_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """The table as one JSON object per line, columns in ``columns`` order."""
    out = []
    for row in rows:
        ordered = {c: row[c] for c in columns if c in row}
        ordered.update({k: v for k, v in row.items() if k not in ordered})
        out.append(json.dumps(ordered, ensure_ascii=False))
    return "\n".join(out)


def render_carry(lines: str, table: str, notes: str) -> str:
    """The carry text from its three rendered parts."""
    return f"{LINES_HEADER}\n{lines}\n{TABLE_HEADER}\n{table}\n{NOTES_HEADER}\n{notes}"


@dataclass(frozen=True, slots=True)
class CarryBudget:
    """The token budgets of a carry of ``cap`` tokens split by ``shares``: what the
    line store may hold (:attr:`lines`) and what the table and notes may hold
    (:attr:`state`), each after its block's header and line breaks."""

    cap: int
    shares: Shares
    counter: TokenCounter

    def __post_init__(self) -> None:
        if isinstance(self.cap, bool) or not isinstance(self.cap, int) or self.cap < 1:
            raise RelayError("spec", f"the carry cap must be a whole number ≥ 1, not {self.cap!r}")
        if self.lines < 1 or self.state < 1:
            raise RelayError(
                "spec", f"a carry of {self.cap} tokens leaves no room after the block headers"
            )

    def _overhead(self, *headers: str) -> int:
        # each header with its line break, one more break between parts, and one
        # token of slack per part for counters that round up
        return sum(self.counter.count(h + "\n") + 2 for h in headers)

    @property
    def lines(self) -> int:
        """Tokens the kept lines may take."""
        return int(self.cap * self.shares.lines) - self._overhead(LINES_HEADER)

    @property
    def state(self) -> int:
        """Tokens the table and the notes may take together."""
        return int(self.cap * self.shares.state) - self._overhead(TABLE_HEADER, NOTES_HEADER)

    def fit_notes(self, notes: str, table_tokens: int) -> str:
        """``notes`` cut on a word boundary, with an elision marker, to what the
        state share leaves after the table."""
        room = max(0, self.state - table_tokens)
        return truncate_to_tokens(notes, room, self.counter)
