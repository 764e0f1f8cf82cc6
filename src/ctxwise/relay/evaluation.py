"""Scoring a relay run against a workload's answers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ctxwise.errors import RelayError
from ctxwise.relay.run import RelayResult
from ctxwise.relay.workload import Workload

__all__ = ["RelayScore", "score_run"]


@dataclass(frozen=True, slots=True)
class RelayScore:
    """How a run did.

    ``needles_kept``: needle lines in the final store (by chunk and line);
    ``needles_exact``: those whose stored text equals the input byte for byte;
    ``filler_kept``: stored lines that are not needles; ``carry_tokens_max``: the
    largest carry of any step; ``holders_correct`` / ``counts_exact``: final table
    rows whose non-key columns match the answer (the first non-counter column, and
    every counter column); ``rejected_updates``: proposals code refused;
    ``steps``: steps completed; ``unrecognised_chunks``: chunks in which the step
    recognised nothing (:attr:`~ctxwise.relay.RelayResult.unrecognised_chunks`).
    """

    needles_total: int
    needles_kept: int
    needles_exact: int
    filler_kept: int
    carry_tokens_max: int
    holders_correct: int
    counts_exact: int
    rows_total: int
    rejected_updates: int
    steps: int
    unrecognised_chunks: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The figures as a plain dict (the ``eval relay --json`` keys)."""
        return asdict(self)


def score_run(result: RelayResult, workload: Workload) -> RelayScore:
    """Score ``result`` against ``workload.answers``.

    Raises:
        RelayError: (``"workload"``) the workload has no answers.
    """
    answers = workload.answers
    if answers is None:
        raise RelayError("workload", "the workload has no answers.json to score against")
    wanted = {(n.chunk, n.line): n.text for n in answers.needles}
    kept = 0
    exact = 0
    filler = 0
    for line in result.lines:
        text = wanted.get((line.chunk, line.line))
        if text is None:
            filler += 1
            continue
        kept += 1
        if line.text.encode("utf-8") == text.encode("utf-8"):
            exact += 1
    holders = counts = 0
    table = workload.table
    if table is not None and answers.table:
        key = table.key
        counters = [c for c, spec in table.columns.items() if spec.counter]
        plain = [c for c, spec in table.columns.items() if not spec.counter and c != key]
        got: dict[str, Mapping[str, Any]] = {str(r.get(key)): r for r in result.table}
        for row in answers.table:
            mine = got.get(str(row[key]))
            if mine is None:
                continue
            if plain and mine.get(plain[0]) == row.get(plain[0]):
                holders += 1
            if counters and all(mine.get(c) == row.get(c) for c in counters):
                counts += 1
    return RelayScore(
        needles_total=len(wanted),
        needles_kept=kept,
        needles_exact=exact,
        filler_kept=filler,
        carry_tokens_max=result.carry_tokens_max,
        holders_correct=holders,
        counts_exact=counts,
        rows_total=len(answers.table),
        rejected_updates=len(result.rejections),
        steps=result.steps,
        unrecognised_chunks=result.unrecognised_chunks,
    )
