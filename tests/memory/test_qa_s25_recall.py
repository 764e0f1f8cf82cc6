"""LongTermMemory.recall with arguments the project was not built on."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxwise.errors import UsageError
from ctxwise.memory import LongTermMemory, SQLiteStore


@pytest.fixture
def memory(tmp_path: Path) -> LongTermMemory:
    store = SQLiteStore(tmp_path / "recall.db")
    ltm = LongTermMemory(store, ("t",), clock=lambda: 100.0)
    for i in range(6):
        ltm.remember(f"note {i} about apples", created_at=float(i))
    return ltm


@pytest.mark.parametrize("neighbours", ["2", 1.5, -1, True, None])
def test_neighbours_that_are_not_a_count_are_a_usage_error(
    memory: LongTermMemory, neighbours: object
) -> None:
    """'2' and None raised TypeError, 1.5 'float object cannot be interpreted as an
    integer', -1 and True passed as 0 and 1."""
    with pytest.raises(UsageError, match="neighbours must be an integer"):
        memory.recall("apples", k=1, neighbours=neighbours)  # type: ignore[arg-type]


def test_more_neighbours_than_items_gives_every_item(memory: LongTermMemory) -> None:
    """neighbours=10**12 built a set of 2*10**12 positions (the call never returned)."""
    hits = memory.recall("note 3 apples", k=1, neighbours=10**12)
    assert sorted(h.item.text for h in hits) == [f"note {i} about apples" for i in range(6)]
    assert [h.via for h in hits].count("neighbour") == 5
    near = memory.recall("note 3 apples", k=1, neighbours=1)
    assert [h.item.text for h in near] == [f"note {i} about apples" for i in (3, 2, 4)]


@pytest.mark.parametrize("half_life", [float("nan"), "60", 0, -1.0, True])
def test_a_half_life_that_is_not_a_positive_number_is_a_usage_error(
    memory: LongTermMemory, half_life: object
) -> None:
    """NaN made every score NaN (the order was then arbitrary) and '60' a TypeError."""
    with pytest.raises(UsageError, match="recency_half_life must be positive"):
        memory.recall("apples", k=3, recency_half_life=half_life)  # type: ignore[arg-type]
    assert [h.item.text for h in memory.recall("apples", k=1, recency_half_life=1.0)] == [
        "note 5 about apples"
    ]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"store": None}, "takes a Store, got NoneType"),
        ({"store": "sqlite:///memory.db"}, "open a URL with ctxwise.memory.open_store"),
        ({"embedder": "hashing"}, "embedder is an Embedder"),
        ({"clock": "now"}, "clock is a function"),
    ],
    ids=["no-store", "a-url", "embedder-name", "clock-string"],
)
def test_what_is_not_a_store_embedder_or_clock_is_refused_when_built(
    tmp_path: Path, kwargs: dict[str, object], words: str
) -> None:
    """It was taken, and the first remember or recall raised AttributeError ('str'
    object has no attribute 'recent') or TypeError ('str' object is not callable)."""
    args: dict[str, object] = {"store": SQLiteStore(tmp_path / "m.db"), **kwargs}
    with pytest.raises(UsageError, match=words):
        LongTermMemory(namespace=("t",), **args)  # type: ignore[arg-type]
