"""Weighted reciprocal rank fusion."""

from __future__ import annotations

import pytest

from ctxwise.errors import UsageError
from ctxwise.search import reciprocal_rank_fusion


def test_each_ranking_adds_weight_over_k_plus_rank() -> None:
    fused, (lex, vec) = reciprocal_rank_fusion([["a", "b"], ["b", "c"]], [1.0, 0.5], 10)
    assert lex == {"a": 1, "b": 2} and vec == {"b": 1, "c": 2}
    assert fused == {"a": 1 / 11, "b": 1 / 12 + 0.5 / 11, "c": 0.5 / 12}


def test_depth_cuts_each_ranking() -> None:
    fused, ranks = reciprocal_rank_fusion([[3, 1, 2], [2]], [1.0, 1.0], 1, depth=2)
    assert set(fused) == {3, 1, 2} and ranks[0] == {3: 1, 1: 2}
    assert fused[2] == 1 / 2


def test_a_weight_per_ranking() -> None:
    with pytest.raises(UsageError):
        reciprocal_rank_fusion([["a"]], [1.0, 1.0], 10)
