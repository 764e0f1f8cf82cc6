"""StaticSource given arguments the project was not built on."""

from __future__ import annotations

from typing import Any

import pytest

from ctxwise.errors import UsageError
from ctxwise.sources import StaticSource
from ctxwise.tokens import get_counter


@pytest.mark.parametrize("counter", ["char", b"word", 3])
def test_a_counter_that_is_no_token_counter_is_refused(counter: Any) -> None:
    # counter="char" was taken: 'char'.count(text) made every cost estimate 0
    with pytest.raises(UsageError, match=r"source 'faq': counter must be a TokenCounter"):
        StaticSource("faq", "Refunds take five days.", counter=counter)


def test_a_counter_counts_the_cost() -> None:
    source = StaticSource("faq", "Refunds take five days.", counter=get_counter("word"))
    assert source.cost_estimate("", {}) == get_counter("word").count("Refunds take five days.")


@pytest.mark.parametrize("name", [3, None, ""])
def test_a_name_that_is_no_string_is_refused_naming_the_source(name: Any) -> None:
    with pytest.raises(UsageError, match="a source needs a name"):
        StaticSource(name, "x")
