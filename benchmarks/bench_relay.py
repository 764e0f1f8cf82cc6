"""Relay: the verbatim line store and the checked state table on the synthetic log.

Workloads: ``ctxwise.relay.generate`` — 96 chunks of about 4,000 tokens; the
``needles`` variant has 497 handover lines (2–8 per chunk), the ``counting``
variant 1,536 handovers over 40 assets. Seeds 0–5; the scorer was built looking
at seeds 0–3 (``fit``), seeds 4–5 were not looked at before this run (``test``).

**Needles** (carry 24,000 tokens, shares 0.7 / 0.3, drop lowest score): needle
lines in the final store, byte-exact, filler lines in it, and the largest carry.
Scorers, each given the workload's examples (one per handover and filler
template, drawn apart from the log) and its threshold fit on them the same way
(the midpoint that best separates keep from skip examples):

- ``examples`` — the default :class:`ExampleScorer` (line shapes: names, ids and
  numbers masked; nearest keep example vs nearest skip example, threshold 0);
- ``examples-words`` — the same nearest-example rule on plain analyzer words (no
  masking), threshold fit;
- ``tfidf-instruction`` — cosine of the line with the job's instruction (IDF
  from the examples), threshold fit on the examples.

``examples, half the templates`` gives the default scorer examples of every
other template only (12 of 24 handover, 17 of 34 filler phrasings): how it does
on phrasings it has never seen.

**Counting**: the table with a deterministic parser, with a seeded faulty step
(first attempts broken at ``rate``: a row dropped, counts reset, a count lowered)
under the relay's checks, and the same faulty step with no checks (each proposal
taken as is, as a loop without code checks would).

**Speed**: wall time per step (scoring, store, step, commit to a folder) and the
state file size; ``resume`` is loading a committed run and checking its hashes.
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import print_table, write_results
from ctxwise.memory import InMemoryStore
from ctxwise.relay import (
    DirectoryRuns,
    ExampleScorer,
    FaultyStep,
    HandoverParser,
    LineScorer,
    Relay,
    StepRequest,
    StoreRuns,
    Workload,
    generate,
    score_run,
)
from ctxwise.text import DEFAULT_ANALYZER

SEEDS = range(6)
FIT = {0, 1, 2, 3}
RATES = (0.1, 0.3, 0.5)


class _TfidfInstruction:
    """Cosine of a line with the instruction, IDF over the examples."""

    def __init__(self, workload: Workload) -> None:
        self.inner = ExampleScorer(
            [workload.instruction],
            (),
            threshold=0.0,
            terms=DEFAULT_ANALYZER.words,
            ngram=1,
        )
        self.threshold = 0.0

    def score(self, lines: Sequence[str]) -> list[float]:
        return self.inner.score(lines)


def _fit_threshold(scorer: Any, keep: Sequence[str], skip: Sequence[str]) -> float:
    """The threshold that best separates the keep from the skip examples (most
    examples on the right side; ties: the midpoint of the widest gap)."""
    pos = list(scorer.score(keep))
    neg = list(scorer.score(skip))
    values = sorted({*pos, *neg})
    best = (-1, 0.0, values[0] - 1.0)
    cuts = [values[0] - 1.0] + [(a + b) / 2 for a, b in itertools.pairwise(values)]
    for i, cut in enumerate(cuts):
        right = sum(p > cut for p in pos) + sum(n <= cut for n in neg)
        gap = (values[i] - values[i - 1]) if 0 < i < len(values) else 0.0
        if (right, gap) > best[:2]:
            best = (right, gap, cut)
    return best[2]


def _scorers(workload: Workload) -> dict[str, LineScorer]:
    keep, skip = workload.examples.keep, workload.examples.skip
    words = ExampleScorer(keep, skip, terms=DEFAULT_ANALYZER.words)
    words.threshold = _fit_threshold(words, keep, skip)
    tfidf = _TfidfInstruction(workload)
    tfidf.threshold = _fit_threshold(tfidf, keep, skip)
    return {
        "examples": ExampleScorer(keep, skip),
        "examples-words": words,
        "tfidf-instruction": tfidf,
        "examples, half the templates": ExampleScorer(keep[0::2], skip[0::2]),
    }


def _run(workload: Workload, step: Any, scorer: LineScorer | None = None) -> Any:
    relay = Relay(workload, step, runs=StoreRuns(InMemoryStore()), scorer=scorer)
    return relay.run("bench")


def needles() -> list[dict[str, Any]]:
    rows = []
    for seed in SEEDS:
        workload = generate(seed)
        for name, scorer in _scorers(workload).items():
            s = score_run(_run(workload, HandoverParser(), scorer), workload)
            rows.append(
                {
                    "seed": seed,
                    "split": "fit" if seed in FIT else "test",
                    "scorer": name,
                    "threshold": round(float(scorer.threshold), 4),
                    "needles_total": s.needles_total,
                    "needles_kept": s.needles_kept,
                    "needles_exact": s.needles_exact,
                    "filler_kept": s.filler_kept,
                    "carry_tokens_max": s.carry_tokens_max,
                }
            )
    return rows


def _unchecked(workload: Workload, step: FaultyStep) -> tuple[int, int, int]:
    """The faulty step's proposals taken as they come, with no checks."""
    assert workload.table is not None and workload.answers is not None
    table = tuple(dict(r) for r in workload.table.rows)
    for i, chunk in enumerate(workload.chunks):
        req = StepRequest(i, chunk, "", table, "", (), workload.instruction)
        proposal = step(req).table
        if proposal is not None:
            table = tuple(dict(r) for r in proposal)
    got = {r["asset"]: r for r in table}
    holders = sum(
        1 for a in workload.answers.table if got.get(a["asset"], {}).get("holder") == a["holder"]
    )
    counts = sum(
        1
        for a in workload.answers.table
        if got.get(a["asset"], {}).get("handovers") == a["handovers"]
    )
    return holders, counts, len(table)


def counting() -> list[dict[str, Any]]:
    rows = []
    for seed in SEEDS:
        workload = generate(seed, variant="counting")
        s = score_run(_run(workload, HandoverParser()), workload)
        rows.append(
            _count_row(seed, "parser", None, "checked", s.holders_correct, s.counts_exact, 40, 0, 0)
        )
        for rate in RATES:
            step = FaultyStep(HandoverParser(), rate=rate, seed=seed)
            broken = sum(step.breaks(i) for i in range(len(workload.chunks)))
            s = score_run(_run(workload, step), workload)
            rows.append(
                _count_row(
                    seed,
                    "faulty",
                    rate,
                    "checked",
                    s.holders_correct,
                    s.counts_exact,
                    40,
                    broken,
                    s.rejected_updates,
                )
            )
            h, c, n = _unchecked(workload, step)
            rows.append(_count_row(seed, "faulty", rate, "unchecked", h, c, n, broken, 0))
    return rows


def _count_row(
    seed: int,
    step: str,
    rate: float | None,
    loop: str,
    holders: int,
    counts: int,
    rows: int,
    broken: int,
    rejected: int,
) -> dict[str, Any]:
    return {
        "seed": seed,
        "step": step,
        "rate": rate,
        "loop": loop,
        "holders_correct": holders,
        "counts_exact": counts,
        "rows_left": rows,
        "broken_updates": broken,
        "rejected_updates": rejected,
    }


def speed() -> dict[str, Any]:
    workload = generate(0, variant="counting")
    with tempfile.TemporaryDirectory() as tmp:
        stamps: list[float] = []
        relay = Relay(workload, HandoverParser(), runs=DirectoryRuns(tmp))
        start = time.perf_counter()
        relay.run("speed", on_commit=lambda _: stamps.append(time.perf_counter()))
        per_step = [b - a for a, b in zip([start, *stamps], stamps, strict=False)]
        state = next(Path(tmp, "speed").glob("state-*.json")).stat().st_size
        t0 = time.perf_counter()
        relay.resume("speed")
        resume = time.perf_counter() - t0
    return {
        "steps": len(per_step),
        "step_ms_p50": statistics.median(per_step) * 1000,
        "step_ms_max": max(per_step) * 1000,
        "state_bytes": state,
        "resume_ms": resume * 1000,
    }


def main() -> None:
    n_rows = needles()
    c_rows = counting()
    sp = speed()
    print_table(
        "Needles: lines in the final store (carry 24,000 tokens)",
        ["seed", "split", "scorer", "kept", "exact", "filler", "carry max"],
        [
            [
                r["seed"],
                r["split"],
                r["scorer"],
                f"{r['needles_kept']}/{r['needles_total']}",
                r["needles_exact"],
                r["filler_kept"],
                f"{r['carry_tokens_max']:,}",
            ]
            for r in n_rows
        ],
    )
    print_table(
        "Counting: 40 assets, 1,536 handovers",
        ["seed", "step", "rate", "loop", "holders", "counts", "rows", "broken", "rejected"],
        [
            [
                r["seed"],
                r["step"],
                "-" if r["rate"] is None else r["rate"],
                r["loop"],
                f"{r['holders_correct']}/40",
                f"{r['counts_exact']}/40",
                r["rows_left"],
                r["broken_updates"],
                r["rejected_updates"],
            ]
            for r in c_rows
        ],
    )
    print_table(
        "Speed (counting log, parser, folder commits)",
        ["steps", "step p50 ms", "step max ms", "state bytes", "resume ms"],
        [
            [
                sp["steps"],
                f"{sp['step_ms_p50']:.1f}",
                f"{sp['step_ms_max']:.1f}",
                f"{sp['state_bytes']:,}",
                f"{sp['resume_ms']:.1f}",
            ]
        ],
    )
    write_results("bench_relay", {"needles": n_rows, "counting": c_rows, "speed": sp})


if __name__ == "__main__":
    main()
