"""What tokens cost: a price table per model, and the money of a request's token split.

A :class:`Price` is a model's list prices in US dollars per million tokens: base
input, output, a cache write with the 5-minute and with the 1-hour lifetime, and a
cache read (a hit or a refresh). :data:`DEFAULT_PRICES` holds current Anthropic and
OpenAI models as their pricing pages list them (:data:`PRICES_CHECKED`, sources
below); :func:`price_for` finds a model's price by the longest table key its name
equals, less a date, version or variant suffix (``claude-sonnet-4-5-20250929`` is
``claude-sonnet-4-5``), overrides first. A model the table does not know has no
price: its cost is unknown (``None``), never zero.

:class:`TokenSplit` is how a request's input divides for billing — uncached,
read from the cache, written to the cache (with the ``5m`` or the ``1h``
lifetime) — plus its output; :func:`cost_usd` is its money at a price.

Sources: Anthropic's "Pricing" page (platform.claude.com/docs/en/about-claude/pricing,
"Model pricing": a 5-minute cache write is 1.25x base input, a 1-hour write 2x, a
read 0.1x, or the listed rate); OpenAI's "Pricing" page (platform.openai.com/docs/pricing:
input, cached input, output; OpenAI's automatic caching has no write premium, so a
write costs base input). A model priced by prompt length (Claude Haiku 5.5: a prompt
over 100,000 tokens pays the higher rates on every token of the request) carries
its long-prompt price. Prices change: override them in ``ctxwise.toml``
(``[prices."model-name"]``) or pass a table; batch rates and the older models'
long-context surcharges are not modelled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DEFAULT_PRICES",
    "PRICES_CHECKED",
    "Price",
    "TokenSplit",
    "cost_usd",
    "price_for",
]

PRICES_CHECKED = "2026-12-07"
"""When :data:`DEFAULT_PRICES` was checked against the providers' pricing pages."""


class Price(BaseModel):
    """A model's list prices, US dollars per million tokens. A model priced by prompt
    length has ``long_prompt_tokens``: a request whose input is over it pays every
    rate times ``long_prompt_factor``, on every token, output included (0: none)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write_5m: float = Field(ge=0)
    cache_write_1h: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    long_prompt_tokens: int = Field(default=0, ge=0)
    long_prompt_factor: float = Field(default=1.0, ge=0)


def _anthropic(input_: float, output: float, cache_read: float | None = None) -> Price:
    """Anthropic's rates: writes 1.25x (``5m``) and 2x (``1h``) base input, reads 0.1x
    unless the page lists another rate."""
    return Price(
        input=input_,
        output=output,
        cache_write_5m=input_ * 1.25,
        cache_write_1h=input_ * 2,
        cache_read=input_ / 10 if cache_read is None else cache_read,
    )


def _openai(input_: float, cached: float, output: float) -> Price:
    """OpenAI's rates: no write premium (a write is base input), reads at ``cached``."""
    return Price(
        input=input_, output=output, cache_write_5m=input_, cache_write_1h=input_, cache_read=cached
    )


DEFAULT_PRICES: Mapping[str, Price] = {
    # Anthropic
    "claude-fable-5-2": _anthropic(8, 40, cache_read=0.20),
    "claude-mythos-5-2": _anthropic(8, 40, cache_read=0.20),
    "claude-fable-5-1": _anthropic(10, 50, cache_read=0.25),
    "claude-mythos-5-1": _anthropic(10, 50, cache_read=0.25),
    "claude-fable-5": _anthropic(10, 50),
    "claude-mythos-5": _anthropic(10, 50),
    "claude-opus-5-5": _anthropic(4, 20, cache_read=0.20),
    "claude-opus-5": _anthropic(5, 25),
    "claude-opus-4-8": _anthropic(5, 25),
    "claude-opus-4-7": _anthropic(5, 25),
    "claude-opus-4-6": _anthropic(5, 25),
    "claude-opus-4-5": _anthropic(5, 25),
    "claude-opus-4-1": _anthropic(15, 75),
    "claude-opus-4-0": _anthropic(15, 75),
    "claude-opus-4": _anthropic(15, 75),
    "claude-sonnet-5-5": _anthropic(2, 10, cache_read=0.10),
    "claude-sonnet-5": _anthropic(2, 10),
    "claude-sonnet-4-6": _anthropic(3, 15),
    "claude-sonnet-4-5": _anthropic(3, 15),
    "claude-sonnet-4-0": _anthropic(3, 15),
    "claude-sonnet-4": _anthropic(3, 15),
    "claude-3-7-sonnet": _anthropic(3, 15),
    "claude-haiku-5-5": _anthropic(0.10, 0.50).model_copy(
        update={"long_prompt_tokens": 100_000, "long_prompt_factor": 5.0}
    ),
    "claude-haiku-4-5": _anthropic(1, 5),
    "claude-3-5-haiku": _anthropic(0.8, 4),
    "claude-3-haiku": Price(
        input=0.25, output=1.25, cache_write_5m=0.30, cache_write_1h=0.50, cache_read=0.03
    ),
    # OpenAI
    "gpt-5": _openai(1.25, 0.125, 10),
    "gpt-5-mini": _openai(0.25, 0.025, 2),
    "gpt-5-nano": _openai(0.05, 0.005, 0.4),
    "gpt-4.1": _openai(2, 0.5, 8),
    "gpt-4.1-mini": _openai(0.4, 0.1, 1.6),
    "gpt-4.1-nano": _openai(0.1, 0.025, 0.4),
    "gpt-4o": _openai(2.5, 1.25, 10),
    "gpt-4o-mini": _openai(0.15, 0.075, 0.6),
    "o3": _openai(2, 0.5, 8),
    "o4-mini": _openai(1.1, 0.275, 4.4),
}
"""List prices of current models (see the module docstring for sources)."""

_SUFFIX = re.compile(r"(-\d{8}|-\d{4}-\d{2}-\d{2}|-latest|-v\d+(:\d+)?|[@:\[].*)", re.DOTALL)
"""What may follow a table key in a model name: a date, ``-latest``, a version, or
a variant after ``@``, ``:`` or ``[`` (``claude-sonnet-4-5@20250929``,
``claude-opus-4-6[1m]``). Anything else is another model (``o3-mini`` is not
``o3``)."""


def price_for(model: str | None, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """``model``'s price: the entry of ``overrides``, then of :data:`DEFAULT_PRICES`,
    whose key is the model name, or the name less a date, version or variant
    suffix (:data:`_SUFFIX`); ``None`` when no key matches (the cost is unknown)."""
    if not model:
        return None
    for table in (overrides or {}, DEFAULT_PRICES):
        keys = [
            k
            for k in table
            if model == k or (model.startswith(k) and _SUFFIX.fullmatch(model[len(k) :]))
        ]
        if keys:
            return table[max(keys, key=len)]
    return None


@dataclass(frozen=True, slots=True)
class TokenSplit:
    """How a request's tokens divide for billing: input not read from the cache
    (``uncached``), read from it (``cache_read``), written to it with a 5-minute or
    a 1-hour lifetime, and ``output``."""

    uncached: int = 0
    cache_read: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    output: int = 0

    @property
    def input(self) -> int:
        """Every input token, whatever its rate."""
        return self.uncached + self.cache_read + self.cache_write_5m + self.cache_write_1h

    def __add__(self, other: TokenSplit) -> TokenSplit:
        return TokenSplit(
            self.uncached + other.uncached,
            self.cache_read + other.cache_read,
            self.cache_write_5m + other.cache_write_5m,
            self.cache_write_1h + other.cache_write_1h,
            self.output + other.output,
        )


def cost_usd(split: TokenSplit, price: Price | None) -> float | None:
    """The money of ``split`` at ``price`` (US dollars); ``None`` without a price."""
    if price is None:
        return None
    factor = 1.0
    if price.long_prompt_tokens and split.input > price.long_prompt_tokens:
        factor = price.long_prompt_factor
    return (
        factor
        * (
            split.uncached * price.input
            + split.cache_read * price.cache_read
            + split.cache_write_5m * price.cache_write_5m
            + split.cache_write_1h * price.cache_write_1h
            + split.output * price.output
        )
        / 1_000_000
    )
