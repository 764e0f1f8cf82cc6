"""The cost simulator on inputs its first tests did not try."""

from __future__ import annotations

from typing import Any

import pytest

from ctxwise.costs import simulate_compaction
from ctxwise.errors import SimulationError

ISSUE: dict[str, Any] = {
    "start_tokens": 12_000,
    "growth": 6_000,
    "calls": 60,
    "summary_tokens": 8_000,
    "trigger": 150_000,
}


@pytest.mark.parametrize("write", [0.5, -1.0, float("nan"), float("inf"), "2", None, True])
def test_a_bad_write_factor_is_refused_without_a_read_factor(write: Any) -> None:
    # it was ignored when no read factor was given, so a typo went unreported
    with pytest.raises(SimulationError) as info:
        simulate_compaction(**ISSUE, cache_write_factor=write)
    assert info.value.parameter == "cache_write_factor"


def test_a_good_write_factor_without_a_read_factor_changes_nothing() -> None:
    plain = simulate_compaction(**ISSUE)
    hour = simulate_compaction(**ISSUE, cache_write_factor=2.0)
    assert hour == plain
    assert hour.cache_with is None and hour.cache_write_factor is None
