"""QA regressions for the relay: bad input and damaged runs give typed errors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ctxwise.errors import RelayError
from ctxwise.relay import HandoverParser, Relay, Workload
from tests.relay.conftest import small_counting

CHUNKS = 4


def _workload() -> Workload:
    return small_counting(3, chunks=CHUNKS)


class _RaisingScorer:
    threshold = 0.0

    def score(self, lines: Sequence[str]) -> list[float]:
        raise ValueError("the scorer broke")


class _TextScorer:
    threshold = 0.0

    def score(self, lines: Sequence[str]) -> list[str]:
        return ["high"] * len(lines)


@pytest.mark.parametrize("scorer", [_RaisingScorer(), _TextScorer()])
def test_a_scorer_that_raises_or_returns_no_numbers_is_a_relay_error(
    tmp_path: Path, scorer: object
) -> None:
    relay = Relay(_workload(), HandoverParser(), runs=tmp_path / "runs", scorer=scorer)  # type: ignore[arg-type]
    with pytest.raises(RelayError, match="scorer"):
        relay.run("job")
    # the start was committed: the run resumes once the scorer is fixed
    assert relay.runs.manifest("job").step == -1
