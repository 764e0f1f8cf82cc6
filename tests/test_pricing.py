"""Prices by model name, and the money of a token split."""

from __future__ import annotations

import pytest

from ctxwise.pricing import DEFAULT_PRICES, Price, TokenSplit, cost_usd, price_for


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("claude-opus-4-6", "claude-opus-4-6"),
        ("claude-opus-4-6[1m]", "claude-opus-4-6"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4.1-mini", "gpt-4.1-mini"),
    ],
)
def test_a_model_is_priced_by_its_own_entry(model: str, key: str) -> None:
    assert price_for(model) == DEFAULT_PRICES[key]


@pytest.mark.parametrize("model", ["o3-mini", "gpt-5.4", "claude-sonnet-9", "my-model", "", None])
def test_a_model_the_table_does_not_know_has_no_price(model: str | None) -> None:
    # another model's price would be a wrong number: unknown is said as unknown
    assert price_for(model) is None
    assert cost_usd(TokenSplit(uncached=1000), price_for(model)) is None


def test_overrides_come_first() -> None:
    mine = Price(input=1, output=2, cache_write_5m=3, cache_write_1h=4, cache_read=0.5)
    assert price_for("claude-opus-4-6-20260101", {"claude-opus-4-6": mine}) == mine
    assert price_for("my-model", {"my-model": mine}) == mine
    assert price_for("claude-opus-4-6", {"my-model": mine}) == DEFAULT_PRICES["claude-opus-4-6"]


def test_the_money_of_a_split_at_each_rate() -> None:
    price = Price(input=3, output=15, cache_write_5m=3.75, cache_write_1h=6, cache_read=0.3)
    split = TokenSplit(
        uncached=1_000, cache_read=100_000, cache_write_5m=2_000, cache_write_1h=4_000, output=500
    )
    expected = (1_000 * 3 + 100_000 * 0.3 + 2_000 * 3.75 + 4_000 * 6 + 500 * 15) / 1e6
    assert cost_usd(split, price) == pytest.approx(expected)
    assert split.input == 107_000
    assert (split + split).cache_read == 200_000


def test_anthropic_cache_rates_follow_the_documented_multipliers() -> None:
    for key, price in DEFAULT_PRICES.items():
        if key.startswith("claude") and key != "claude-3-haiku":
            assert price.cache_write_5m == pytest.approx(1.25 * price.input), key
            assert price.cache_write_1h == pytest.approx(2 * price.input), key
            assert price.cache_read <= 0.1 * price.input + 1e-12, key
        if key.startswith(("gpt", "o")):
            assert price.cache_write_5m == price.input, key  # no write premium


def test_a_long_prompt_pays_the_higher_rates_on_every_token() -> None:
    price = Price(
        input=1,
        output=5,
        cache_write_5m=1.25,
        cache_write_1h=2,
        cache_read=0.1,
        long_prompt_tokens=100,
        long_prompt_factor=5,
    )
    short = TokenSplit(uncached=100, output=10)
    long = TokenSplit(uncached=101, output=10)
    assert cost_usd(short, price) == pytest.approx((100 * 1 + 10 * 5) / 1e6)
    assert cost_usd(long, price) == pytest.approx(5 * (101 * 1 + 10 * 5) / 1e6)


def test_a_negative_price_is_refused() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Price(input=-1, output=1, cache_write_5m=1, cache_write_1h=1, cache_read=1)
