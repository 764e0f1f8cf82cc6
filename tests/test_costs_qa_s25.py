"""The cost simulator on inputs its first tests did not try."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from ctxwise.costs import clearing_break_even, simulate_compaction
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


@pytest.mark.parametrize(
    ("changes", "parameter"),
    [
        # an int past the largest float: math.isfinite raised OverflowError on it
        ({"cache_read_factor": 10**400}, "cache_read_factor"),
        ({"cache_read_factor": 0.1, "cache_write_factor": 10**400}, "cache_write_factor"),
        # more digits than int -> str converts: Fraction(str(value)) raised ValueError
        ({"cache_read_factor": 0.1, "cache_write_factor": 10**5000}, "cache_write_factor"),
        # a finite write factor whose costs do not fit a float: float() raised OverflowError
        ({"cache_read_factor": 0.1, "cache_write_factor": 1e306}, "cache_write_factor"),
        # token counts past any context: the cache costs overflowed a float
        ({"start_tokens": 10**400, "trigger": 10**401, "cache_read_factor": 0.1}, "start_tokens"),
    ],
)
def test_a_huge_input_is_a_simulation_error(changes: dict[str, Any], parameter: str) -> None:
    with pytest.raises(SimulationError) as info:
        simulate_compaction(**{**ISSUE, **changes})
    assert info.value.parameter == parameter


@pytest.mark.parametrize(
    ("changes", "parameter"),
    [
        ({"cache_read_factor": 10**400}, "cache_read_factor"),
        ({"cache_write_factor": 10**400}, "cache_write_factor"),
        ({"cache_write_factor": 1e308}, "cache_write_factor"),
        ({"context_tokens": 10**400}, "context_tokens"),
    ],
)
def test_a_huge_clearing_input_is_a_simulation_error(
    changes: dict[str, Any], parameter: str
) -> None:
    kw = {"context_tokens": 1_000_000, "cleared_tokens": 30_000, "edit_point_tokens": 20_000}
    with pytest.raises(SimulationError) as info:
        clearing_break_even(**{**kw, **changes})
    assert info.value.parameter == parameter


def test_large_but_valid_inputs_still_compute() -> None:
    big = clearing_break_even(
        context_tokens=10**18,
        cleared_tokens=10**17,
        edit_point_tokens=10**16,
        cache_write_factor=10**200,
    )
    assert big.cost_with == pytest.approx(float((10**18 - 10**17 - 10**16) * 10**200))
    sim = simulate_compaction(**ISSUE, cache_read_factor=0.1, cache_write_factor=2)
    assert sim.cache_write_factor == 2.0 and sim.cache_with is not None


@pytest.mark.parametrize("parameter", ["start_tokens", "growth", "calls"])
@pytest.mark.parametrize("sign", [1, -1])
def test_an_int_too_long_to_print_is_a_simulation_error(parameter: str, sign: int) -> None:
    # the error shows the value's repr, which raises ValueError past 4,300 digits
    with pytest.raises(SimulationError, match=r"an integer of about 500\d digits") as info:
        simulate_compaction(**{**ISSUE, parameter: sign * 10**5000})
    assert info.value.parameter == parameter


def test_numpy_counts_and_exact_fractions_are_taken() -> None:
    np = pytest.importorskip("numpy")
    # a count summed by NumPy or pandas is an np.int64: it was refused as
    # "must be a whole number of tokens"; Fraction(1, 10) as "must be a finite number"
    counts = {k: np.int64(v) for k, v in ISSUE.items()}
    sim = simulate_compaction(**counts, cache_read_factor=Fraction(1, 10))
    assert sim == simulate_compaction(**ISSUE, cache_read_factor=0.1)
    assert type(sim.calls) is int and type(sim.with_compaction) is int
    assert sim.cache_read_factor == 0.1
    f32 = simulate_compaction(**ISSUE, cache_read_factor=np.float32(0.1))
    assert f32.cache_with == sim.cache_with and f32.cache_read_factor == 0.1
    clearing = clearing_break_even(
        context_tokens=np.int32(100_000),
        cleared_tokens=np.uint16(30_000),
        edit_point_tokens=20_000,
        cache_read_factor=np.float64(0.1),
        cache_write_factor=Fraction(5, 4),
    )
    assert clearing.calls_to_break_even == 19  # the docstring's example
    assert clearing.cache_write_factor == 1.25


@pytest.mark.parametrize("value", ["0.1", b"1", 1j, None, Fraction(3, 2), True])
def test_what_is_not_a_real_factor_is_still_refused(value: Any) -> None:
    with pytest.raises(SimulationError) as info:
        clearing_break_even(
            context_tokens=100, cleared_tokens=10, edit_point_tokens=0, cache_read_factor=value
        )
    assert info.value.parameter == "cache_read_factor"


def test_a_fraction_too_long_to_print_is_described() -> None:
    with pytest.raises(SimulationError, match="a fraction of about 500"):
        clearing_break_even(
            context_tokens=100,
            cleared_tokens=10,
            edit_point_tokens=0,
            cache_write_factor=Fraction(10**5000, 3),
        )
