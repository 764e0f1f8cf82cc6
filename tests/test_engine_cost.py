"""Each turn's cost with the provider's prompt cache (issue 30 item 3): the trace
says what the request reads from the cache, writes and sends uncached, the money at
the model's price, and where and why the prefix first differs from the previous
request. The cache survives a new Engine on the same store."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxwise import Engine, EngineConfig
from ctxwise.pricing import TokenSplit, cost_usd, price_for
from ctxwise.trace import CacheTrace
from tests.test_engine_long_session import agent_loop


def engine(tmp_path: Path, **kw: object) -> Engine:
    config = EngineConfig.model_validate(
        {
            "store": f"sqlite:///{tmp_path / 'c.db'}",
            "budget": 200_000,
            "system": "You are the support agent. " * 300,
            "model": "claude-sonnet-4-5-20250929",
            **kw,
        }
    )
    return Engine(config)


def cache_of(result: object) -> CacheTrace:
    trace = result.trace  # type: ignore[attr-defined]
    assert trace.cache is not None
    return trace.cache


def test_an_appending_session_reads_its_prefix_and_writes_only_what_is_new(
    tmp_path: Path,
) -> None:
    eng = engine(tmp_path)
    seen = []
    for new in agent_loop(6):
        seen.append(cache_of(eng.turn("s", new, warn_unanswered=False)))
    first, *rest = seen
    assert first.read == 0 and first.write_5m > 0
    for prev, c in zip(seen, rest, strict=False):
        assert c.first_change is None and c.reason is None  # nothing but appends
        assert c.read >= prev.read + prev.write_5m - 5  # last request's prefix (rounding)
        assert c.write_5m < prev.read + prev.write_5m  # far less written than read
    # the money is the split at the model's price, and less than sending it uncached
    last = seen[-1]
    split = TokenSplit(last.uncached, last.read, last.write_5m, last.write_1h)
    assert last.input_usd == pytest.approx(cost_usd(split, price_for(last.model)))
    assert last.uncached_usd is not None and last.input_usd < last.uncached_usd


def test_an_edit_says_where_the_prefix_broke_and_why(tmp_path: Path) -> None:
    eng = engine(tmp_path, budget=9_000, clearing={"keep_last": 1, "trigger": 0.3})
    cleared = None
    for new in agent_loop(8):
        result = eng.turn("s", new, warn_unanswered=False)
        if result.trace.cleared is not None:
            cleared = cache_of(result)
            break
    assert cleared is not None, "the small budget clears tool results"
    assert cleared.first_change is not None and cleared.first_change.startswith("messages[")
    assert cleared.reason == "tool results cleared this turn"
    assert cleared.write_5m > 0


def test_the_cache_is_kept_with_the_session_across_engines(tmp_path: Path) -> None:
    turns = list(agent_loop(3))
    with engine(tmp_path) as one:
        for new in turns[:-1]:
            one.turn("s", new, warn_unanswered=False)
    with engine(tmp_path) as two:  # a new process: only the store is shared
        c = cache_of(two.turn("s", turns[-1], warn_unanswered=False))
    assert c.read > 0
    assert c.first_change is None  # the previous request's blocks are not kept: unknown


def test_a_model_without_a_price_costs_unknown_not_zero(tmp_path: Path) -> None:
    c = cache_of(engine(tmp_path, model="my-private-model").turn("s", "hello"))
    assert c.input_usd is None and c.uncached_usd is None
    assert c.write_5m + c.uncached > 0  # the tokens are still counted


def test_prices_in_the_config_override_the_table(tmp_path: Path) -> None:
    price = {"input": 1, "output": 1, "cache_write_5m": 10, "cache_write_1h": 10, "cache_read": 1}
    eng = engine(tmp_path, model="my-private-model", costs={"prices": {"my-private-model": price}})
    c = cache_of(eng.turn("s", "hello"))
    expected = (c.uncached * 1 + c.write_5m * 10 + c.read * 1) / 1e6
    assert c.input_usd == pytest.approx(expected)


def test_tracking_off_leaves_the_trace_without_a_cost(tmp_path: Path) -> None:
    result = engine(tmp_path, costs={"track": False}).turn("s", "hello")
    assert result.trace.cache is None
