"""Weighted reciprocal rank fusion: several rankings of the same items into one."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

from ctxwise.errors import UsageError

__all__ = ["reciprocal_rank_fusion"]

H = TypeVar("H", bound=Hashable)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[H]],
    weights: Sequence[float],
    k: int,
    depth: int | None = None,
) -> tuple[dict[H, float], list[dict[H, int]]]:
    """Each item's fused score, and each ranking's rank (from 1) of the items it holds.

    The first ``depth`` items of each ranking (every item when ``None``), best first,
    add ``weight / (k + rank)`` to an item's score, ranking by ranking in the order
    given (so the sums are the same to the bit wherever this runs). An item in no
    ranking has no score."""
    if len(rankings) != len(weights):
        raise UsageError(f"{len(rankings)} rankings but {len(weights)} weights")
    fused: dict[H, float] = {}
    ranks: list[dict[H, int]] = []
    for ranking, weight in zip(rankings, weights, strict=True):
        ranked: dict[H, int] = {}
        for r, item in enumerate(ranking[:depth] if depth is not None else ranking, start=1):
            ranked[item] = r
            fused[item] = fused.get(item, 0.0) + weight / (k + r)
        ranks.append(ranked)
    return fused, ranks
