"""Each turn's cost with the provider's prompt cache (issue 30 item 3): the trace
says what the request reads from the cache, writes and sends uncached, the money at
the model's price, and where and why the prefix first differs from the previous
request. The cache survives a new Engine on the same store."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxwise import Engine, EngineConfig, Message, TurnResult
from ctxwise.formats.claude_code import read_claude_code
from ctxwise.pairing import repair_pairing
from ctxwise.pricing import TokenSplit, cost_usd, price_for
from ctxwise.replay import _rename_reused_ids, _turns
from ctxwise.trace import CacheTrace
from tests.conftest import DATA, long_sessions
from tests.test_engine_long_session import agent_loop


def engine(tmp_path: Path, **kw: object) -> Engine:
    tmp_path.mkdir(parents=True, exist_ok=True)
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


def cache_of(result: TurnResult) -> CacheTrace:
    trace = result.trace
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


# ------------------------------------------------------------- the edit gate


def recorded_turns(limit: int = 60) -> list[list[Message]]:
    """The first turns of a real Claude Code session, as replay feeds them."""
    sessions = long_sessions()
    if not sessions:
        pytest.skip(f"shared data not found at {DATA} (set CTXWISE_DATA)")
    t, _ = repair_pairing(read_claude_code(sessions[-1].read_text(encoding="utf-8")))
    messages, _ = _rename_reused_ids(t)
    return [list(new) for _, _, new in _turns(messages)][:limit]


def gate_run(tmp_path: Path, **costs: object) -> list[TurnResult]:
    """A real tool-heavy session at a budget where clearing is triggered often."""
    eng = engine(tmp_path, budget=30_000, system="", costs=dict(costs))
    return [eng.turn("s", new, warn_unanswered=False) for new in recorded_turns()]


def test_a_clear_that_does_not_pay_for_its_rewrite_is_refused_and_says_why(
    tmp_path: Path,
) -> None:
    results = gate_run(tmp_path)
    gates = [r.trace.edit_gate for r in results if r.trace.edit_gate is not None]
    refused = [g for g in gates if not g.ran]
    assert refused, "some clears cost more than they save"
    price = price_for("claude-sonnet-4-5")
    assert price is not None
    read, write = price.cache_read / price.input, price.cache_write_5m / price.input
    for g in refused:
        assert not g.forced
        assert g.saving == pytest.approx(g.saved_tokens * read * g.horizon, abs=1e-3)
        assert g.cost == pytest.approx(g.rewrite_tokens * (write - read), abs=1e-3)
        assert g.saving <= g.cost
    for r in results:  # the hard budget always wins
        trace = r.trace
        assert trace.tokens.total <= trace.tokens.available
        if trace.edit_gate is not None and trace.edit_gate.forced:
            assert trace.edit_gate.ran and trace.cleared is not None


def test_the_gate_writes_less_to_the_cache_than_clearing_at_every_trigger(
    tmp_path: Path,
) -> None:
    gated = gate_run(tmp_path / "on")
    plain = gate_run(tmp_path / "off", gate=False)
    assert all(r.trace.edit_gate is None for r in plain)

    def writes(results: list[TurnResult]) -> int:
        return sum(cache_of(r).write_5m + cache_of(r).write_1h for r in results)

    def clears(results: list[TurnResult]) -> int:
        return sum(r.trace.cleared is not None for r in results)

    assert clears(gated) < clears(plain)
    assert writes(gated) < writes(plain)


def test_a_long_horizon_makes_a_clear_pay(tmp_path: Path) -> None:
    results = gate_run(tmp_path, horizon=10_000)
    gates = [r.trace.edit_gate for r in results if r.trace.edit_gate is not None]
    assert gates and all(g.ran for g in gates)
    assert all(g.horizon == 10_000 for g in gates)
