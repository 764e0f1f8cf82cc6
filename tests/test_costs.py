"""The cost simulators: the issue's figures, invariants of the model, validation."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ctxwise import (
    SimulationError,
    UsageError,
    clearing_break_even,
    simulate_compaction,
)

ISSUE: dict[str, Any] = {
    "start_tokens": 12_000,
    "growth": 6_000,
    "calls": 60,
    "summary_tokens": 8_000,
    "trigger": 150_000,
}


def _reference(
    start: int, growth: int, calls: int, summary: int, trigger: int, prefix: int, prompt: int
) -> tuple[list[int], list[int]]:
    """The documented model, written as a list of what each call sends."""
    ordinary: list[int] = []
    summaries: list[int] = []
    context = start
    for _ in range(calls):
        if context > trigger:
            summaries.append(context + prompt)
            context = prefix + summary
        ordinary.append(context)
        context += growth
    return ordinary, summaries


def test_issue_figures() -> None:
    sim = simulate_compaction(**ISSUE)
    n, start, growth = ISSUE["calls"], ISSUE["start_tokens"], ISSUE["growth"]
    closed_form = n * start + growth * n * (n - 1) // 2
    assert sim.without_compaction == closed_form == 11_340_000
    assert abs(sim.with_compaction - 4_850_000) / 4_850_000 <= 0.02
    ordinary, summaries = _reference(start, growth, n, 8_000, 150_000, start, 0)
    assert sim.with_compaction == sum(ordinary) + sum(summaries)
    assert sim.call_input_tokens == sum(ordinary)
    assert sim.summary_input_tokens == sum(summaries)
    assert sim.compactions == len(summaries) == 2
    assert [s.before_call for s in sim.summary_calls] == [24, 46]
    assert all(s.context_after == start + 8_000 for s in sim.summary_calls)
    d = sim.to_dict()
    assert {"with_compaction", "without_compaction", "compactions", "summary_calls"} <= set(d)
    assert d["summary_input_tokens"] == sum(s["input_tokens"] for s in d["summary_calls"])
    assert d["cache"] is None


def test_compaction_on_the_last_call_costs_more_than_it_saves() -> None:
    # The summary call reads what the call would have sent, and the call still happens.
    sim = simulate_compaction(**{**ISSUE, "calls": 25})
    assert sim.compactions == 1 and sim.summary_calls[0].before_call == 24
    assert sim.with_compaction - sim.without_compaction == ISSUE["start_tokens"] + 8_000


params = st.fixed_dictionaries(
    {
        "start_tokens": st.integers(1, 50_000),
        "growth": st.integers(1, 40_000),
        "calls": st.integers(1, 120),
        "summary_tokens": st.integers(1, 30_000),
        "trigger": st.integers(2, 300_000),
        "summary_prompt_tokens": st.integers(0, 2_000),
    }
)


def _valid(p: dict[str, Any], prefix: int) -> bool:
    return prefix <= p["start_tokens"] and prefix + p["summary_tokens"] < p["trigger"]


@given(params, st.integers(0, 50_000))
def test_matches_the_documented_model(p: dict[str, Any], prefix: int) -> None:
    assume(_valid(p, prefix))
    sim = simulate_compaction(**p, prefix_tokens=prefix)
    ordinary, summaries = _reference(
        p["start_tokens"],
        p["growth"],
        p["calls"],
        p["summary_tokens"],
        p["trigger"],
        prefix,
        p["summary_prompt_tokens"],
    )
    assert sim.call_input_tokens == sum(ordinary)
    assert sim.with_compaction == sum(ordinary) + sum(summaries)
    assert sim.peak_with == max(ordinary + summaries)


@given(params, st.integers(0, 50_000))
def test_invariants(p: dict[str, Any], prefix: int) -> None:
    assume(_valid(p, prefix))
    sim = simulate_compaction(**p, prefix_tokens=prefix)
    start, growth, n, trigger = p["start_tokens"], p["growth"], p["calls"], p["trigger"]
    kept = prefix + p["summary_tokens"]
    assert sim.without_compaction == n * start + growth * n * (n - 1) // 2
    # ordinary calls never send more with compaction, and never more than the trigger
    assert sim.call_input_tokens <= sim.without_compaction
    # a compaction happens exactly when the uncompacted context would pass the trigger
    assert (sim.compactions > 0) == (sim.peak_without > trigger)
    if sim.compactions == 0:
        assert sim.with_compaction == sim.without_compaction
    # each compaction costs at most the kept context plus the instruction over the plain session
    assert sim.with_compaction - sim.without_compaction <= sim.compactions * (
        kept + p["summary_prompt_tokens"]
    )
    assert sim.peak_with <= max(trigger + growth, start) + p["summary_prompt_tokens"]


@st.composite
def _paying(draw: st.DrawFn) -> dict[str, Any]:
    """Sessions where a compaction saves more per later call than it can cost."""
    trigger = draw(st.integers(1_000, 300_000))
    start = draw(st.integers(1, trigger // 5))
    summary = draw(st.integers(1, trigger // 5))
    return {
        "start_tokens": start,
        "summary_tokens": summary,
        "trigger": trigger,
        "summary_prompt_tokens": draw(st.integers(0, trigger // 10)),
        "growth": draw(st.integers(max(1, trigger // 50), trigger - start - summary)),
        "calls": draw(st.integers(1, 300)),
    }


@given(_paying())
def test_compaction_pays_when_every_compaction_is_followed_by_a_cheaper_call(
    p: dict[str, Any],
) -> None:
    # With kept = prefix + summary: every ordinary call after a compaction sends at
    # least trigger + 1 - kept tokens less; the compaction costs at most kept +
    # instruction more. 2 * kept + instruction < trigger, and kept + growth <=
    # trigger leaves an ordinary call between two compactions.
    sim = simulate_compaction(**p)
    assume(sim.compactions > 0 and sim.summary_calls[-1].before_call < p["calls"] - 1)
    assert sim.with_compaction < sim.without_compaction


@given(params, st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]), st.sampled_from([1.0, 1.25, 2.0]))
def test_cache_mode(p: dict[str, Any], read: float, write: float) -> None:
    assume(_valid(p, p["start_tokens"]))
    sim = simulate_compaction(**p, cache_read_factor=read, cache_write_factor=write)
    assert sim.cache_with is not None and sim.cache_without is not None
    assert sim.cache_with.input_tokens == sim.with_compaction
    assert sim.cache_without.input_tokens == sim.without_compaction
    # without compaction every token of the final context is written exactly once
    assert sim.cache_without.write_tokens == sim.peak_without
    assert sim.cache_without.uncached_tokens == 0
    # only the summary calls send uncached tokens
    assert (sim.cache_with.uncached_tokens > 0) == (sim.compactions > 0)
    for cost in (sim.cache_with, sim.cache_without):
        exact = cost.read_tokens * read + cost.write_tokens * write + cost.uncached_tokens
        assert math.isclose(cost.cost, exact, rel_tol=1e-12)
    if read == 1.0 and write == 1.0:
        assert sim.cache_with.cost == sim.with_compaction
        assert sim.cache_without.cost == sim.without_compaction
    d = sim.to_dict()["cache"]
    assert d["read_factor"] == read and d["with_compaction"]["cost"] == sim.cache_with.cost


def test_cache_mode_issue_inputs() -> None:
    sim = simulate_compaction(**ISSUE, cache_read_factor=0.1)
    assert sim.cache_with is not None and sim.cache_without is not None
    assert sim.cache_write_factor == 1.25
    # caching makes both much cheaper; compaction still saves on top of it
    assert sim.cache_without.cost < 0.2 * sim.without_compaction
    assert sim.cache_with.cost < sim.cache_without.cost
    # each summary call pays full price only for the growth after the cached prefix
    assert sim.cache_with.uncached_tokens == sim.compactions * ISSUE["growth"]


def test_clearing_break_even_example() -> None:
    be = clearing_break_even(
        context_tokens=100_000, cleared_tokens=30_000, edit_point_tokens=20_000
    )
    assert (be.cache_read_factor, be.cache_write_factor) == (0.1, 1.25)
    assert be.cost_without == 100_000 * 0.1
    assert be.cost_with == 20_000 * 0.1 + 50_000 * 1.25
    assert be.miss_cost == be.cost_with - be.cost_without
    assert be.saving_per_call == 30_000 * 0.1
    assert be.calls_to_break_even == math.ceil(be.miss_cost / be.saving_per_call) == 19
    assert be.to_dict()["calls_to_break_even"] == 19


def test_clearing_without_a_cache_pays_at_once_and_free_reads_never_pay() -> None:
    kw: dict[str, int] = {"context_tokens": 100_000, "cleared_tokens": 30_000}
    nocache = clearing_break_even(
        **kw, edit_point_tokens=20_000, cache_read_factor=1.0, cache_write_factor=1.0
    )
    assert nocache.calls_to_break_even == 0 and nocache.miss_cost == -30_000
    free = clearing_break_even(**kw, edit_point_tokens=20_000, cache_read_factor=0.0)
    assert free.calls_to_break_even is None and free.saving_per_call == 0
    # clearing the whole tail: nothing is re-written, the first call is already cheaper
    tail = clearing_break_even(**kw, edit_point_tokens=70_000)
    assert tail.calls_to_break_even == 0


@given(
    st.integers(1, 500_000),
    st.data(),
    st.sampled_from([0.05, 0.1, 0.5, 1.0]),
    st.sampled_from([1.0, 1.25, 2.0]),
)
def test_break_even_is_the_first_call_count_that_pays(
    context: int, data: st.DataObject, read: float, write: float
) -> None:
    edit = data.draw(st.integers(0, context - 1))
    cleared = data.draw(st.integers(1, context - edit))
    be = clearing_break_even(
        context_tokens=context,
        cleared_tokens=cleared,
        edit_point_tokens=edit,
        cache_read_factor=read,
        cache_write_factor=write,
    )
    assert be.calls_to_break_even is not None
    k = be.calls_to_break_even
    slack = 1e-6 * max(1.0, abs(be.miss_cost))
    assert k * be.saving_per_call >= be.miss_cost - slack
    if k > 0:
        assert (k - 1) * be.saving_per_call < be.miss_cost + slack
    # a later edit point keeps more of the prefix cached: never a later break-even
    if edit + cleared < context:
        later = clearing_break_even(
            context_tokens=context,
            cleared_tokens=cleared,
            edit_point_tokens=edit + 1,
            cache_read_factor=read,
            cache_write_factor=write,
        )
        assert later.calls_to_break_even is not None and later.calls_to_break_even <= k


@pytest.mark.parametrize(
    ("changes", "parameter"),
    [
        ({"start_tokens": 0}, "start_tokens"),
        ({"growth": -1}, "growth"),
        ({"growth": 0}, "growth"),
        ({"calls": 0}, "calls"),
        ({"summary_tokens": 0}, "summary_tokens"),
        ({"trigger": 0}, "trigger"),
        ({"summary_tokens": 150_000}, "summary_tokens"),
        ({"summary_tokens": 140_000}, "summary_tokens"),  # plus the 12,000 prefix
        ({"prefix_tokens": 12_001}, "prefix_tokens"),
        ({"prefix_tokens": -1}, "prefix_tokens"),
        ({"summary_prompt_tokens": -5}, "summary_prompt_tokens"),
        ({"summary_output_tokens": -5}, "summary_output_tokens"),
        ({"calls": 2.5}, "calls"),
        ({"calls": True}, "calls"),
        ({"cache_read_factor": 1.5}, "cache_read_factor"),
        ({"cache_read_factor": -0.1}, "cache_read_factor"),
        ({"cache_read_factor": math.nan}, "cache_read_factor"),
        ({"cache_read_factor": 0.1, "cache_write_factor": 0.5}, "cache_write_factor"),
    ],
)
def test_bad_simulation_inputs(changes: dict[str, Any], parameter: str) -> None:
    with pytest.raises(SimulationError) as info:
        simulate_compaction(**{**ISSUE, **changes})
    assert isinstance(info.value, UsageError)
    assert info.value.parameter == parameter
    assert str(info.value).startswith(f"{parameter}=")


@pytest.mark.parametrize(
    ("kw", "parameter"),
    [
        ({"context_tokens": 0, "cleared_tokens": 1, "edit_point_tokens": 0}, "context_tokens"),
        ({"context_tokens": 10, "cleared_tokens": 0, "edit_point_tokens": 0}, "cleared_tokens"),
        ({"context_tokens": 10, "cleared_tokens": 6, "edit_point_tokens": 5}, "cleared_tokens"),
        ({"context_tokens": 10, "cleared_tokens": 1, "edit_point_tokens": 10}, "edit_point_tokens"),
        ({"context_tokens": 10, "cleared_tokens": 1, "edit_point_tokens": -1}, "edit_point_tokens"),
        (
            {
                "context_tokens": 10,
                "cleared_tokens": 1,
                "edit_point_tokens": 0,
                "cache_read_factor": 2.0,
            },
            "cache_read_factor",
        ),
    ],
)
def test_bad_clearing_inputs(kw: dict[str, Any], parameter: str) -> None:
    with pytest.raises(SimulationError) as info:
        clearing_break_even(**kw)
    assert info.value.parameter == parameter


def _loop(p: dict[str, Any], read: float | None) -> dict[str, Any]:
    """The simulator as it was before the closed form: one step per call."""
    start, grow, n = p["start_tokens"], p["growth"], p["calls"]
    summary, trig = p["summary_tokens"], p["trigger"]
    prompt = p.get("summary_prompt_tokens", 0)
    prefix = p.get("prefix_tokens", start)
    ledger = {"pr": 0, "pw": 0, "cr": 0, "cw": 0, "cu": 0}
    without = with_ = calls_in = peak_with = 0
    summaries: list[tuple[int, int, int]] = []
    context = context_plain = start
    cached = cached_plain = 0
    for k in range(n):
        without += context_plain
        ledger["pr"] += cached_plain
        ledger["pw"] += context_plain - cached_plain
        cached_plain = context_plain
        context_plain += grow
        if context > trig:
            sent = context + prompt
            summaries.append((k, context, sent))
            with_ += sent
            peak_with = max(peak_with, sent)
            ledger["cr"] += cached
            ledger["cu"] += sent - cached
            context = prefix + summary
            cached = min(cached, prefix)
        with_ += context
        calls_in += context
        peak_with = max(peak_with, context)
        ledger["cr"] += cached
        ledger["cw"] += context - cached
        cached = context
        context += grow
    out = {
        "without": without,
        "with": with_,
        "calls_in": calls_in,
        "peak_with": peak_with,
        "summaries": summaries,
    }
    if read is not None:
        out["ledger"] = ledger
    return out


def _closed(p: dict[str, Any], read: float | None) -> dict[str, Any]:
    sim = simulate_compaction(**p, cache_read_factor=read)
    out = {
        "without": sim.without_compaction,
        "with": sim.with_compaction,
        "calls_in": sim.call_input_tokens,
        "peak_with": sim.peak_with,
        "summaries": [(s.before_call, s.context_tokens, s.input_tokens) for s in sim.summary_calls],
    }
    if read is not None:
        assert sim.cache_with is not None and sim.cache_without is not None
        out["ledger"] = {
            "pr": sim.cache_without.read_tokens,
            "pw": sim.cache_without.write_tokens,
            "cr": sim.cache_with.read_tokens,
            "cw": sim.cache_with.write_tokens,
            "cu": sim.cache_with.uncached_tokens,
        }
    return out


@st.composite
def _any_session(draw: st.DrawFn) -> dict[str, Any]:
    trigger = draw(st.integers(2, 5_000))
    start = draw(st.integers(1, 2 * trigger))
    prefix = draw(st.integers(0, min(start, trigger - 2)))
    return {
        "start_tokens": start,
        "growth": draw(st.integers(1, trigger)),
        "calls": draw(st.integers(1, 400)),
        "summary_tokens": draw(st.integers(1, trigger - prefix - 1)),
        "trigger": trigger,
        "prefix_tokens": prefix,
        "summary_prompt_tokens": draw(st.integers(0, 100)),
    }


@given(_any_session(), st.sampled_from([None, 0.1]))
def test_closed_form_equals_the_call_by_call_loop(p: dict[str, Any], read: float | None) -> None:
    assert _closed(p, read) == _loop(p, read)


def test_a_long_session_is_computed_per_compaction_and_too_many_calls_are_refused() -> None:
    p = {"start_tokens": 1000, "growth": 100, "summary_tokens": 200, "trigger": 150_000}
    sim = simulate_compaction(**p, calls=10_000_000)  # the loop took seconds for this
    assert sim.compactions == len(sim.summary_calls) > 6_000
    short = {**p, "calls": 20_000}
    assert _closed(short, 0.1) == _loop(short, 0.1)
    with pytest.raises(SimulationError) as info:
        simulate_compaction(**p, calls=10_000_001)
    assert info.value.parameter == "calls" and "at most 10,000,000" in str(info.value)
