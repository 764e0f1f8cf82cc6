"""``replay --cost``: what a recording was billed, and the cost tables."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group

from ctxwise._io import read_text_file
from ctxwise.cli._util import _num_col, _table, _text_col
from ctxwise.errors import FormatError
from ctxwise.formats.usage import BilledCall, claude_code_billed
from ctxwise.pricing import TokenSplit
from ctxwise.replay import ReplayCost

__all__ = ["cost_tables", "recorded_calls"]


def recorded_calls(path: Path, max_bytes: int) -> list[BilledCall]:
    """The calls a Claude Code session file records, as billed (the file was read as
    one already, so it is a regular file within ``max_bytes``)."""
    text = read_text_file(path, "a transcript", FormatError, max_bytes=max_bytes)
    calls, _ = claude_code_billed(text)
    return calls


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.4f}"


def _split_rows(split: TokenSplit | None) -> list[str]:
    if split is None:
        return ["", "", "", "", "", ""]
    return [
        f"{split.uncached:,}",
        f"{split.cache_read:,}",
        f"{split.cache_write_5m:,}",
        f"{split.cache_write_1h:,}",
        f"{split.output:,}",
        f"{split.input:,}",
    ]


def cost_tables(cost: ReplayCost) -> Group:
    """Turn by turn, then the totals of ctxwise's policy beside the recording's."""
    turns = _table(f"cost by turn at {cost.model}'s prices (cache simulated)")
    for name in ("turn", "read", "written", "uncached", "output", "usd", "recorded usd"):
        _num_col(turns, name)
    _text_col(turns, "prefix broke at")
    for t in cost.turns:
        s = t.split
        turns.add_row(
            str(t.turn),
            f"{s.cache_read:,}",
            f"{s.cache_write_5m + s.cache_write_1h:,}",
            f"{s.uncached:,}",
            f"{s.output:,}",
            _usd(t.usd),
            "" if t.recorded is None else _usd(t.recorded_usd),
            "" if t.first_change is None else f"{t.first_change}: {t.reason}",
        )
    totals = _table("in total")
    _text_col(totals, "")
    for name in ("uncached", "cache read", "write 5m", "write 1h", "output", "input", "usd"):
        _num_col(totals, name)
    totals.add_row(
        f"ctxwise ({len(cost.turns)} turns, {cost.cache_breaks} cache breaks)",
        *_split_rows(cost.total),
        _usd(cost.usd),
    )
    if cost.recorded_total is not None:
        unpriced = f", {cost.recorded_unpriced} unpriced" if cost.recorded_unpriced else ""
        totals.add_row(
            f"recording ({cost.recorded_calls} calls{unpriced})",
            *_split_rows(cost.recorded_total),
            _usd(cost.recorded_usd),
        )
    return Group(turns, totals)
