"""Shared pieces of the relay tests: small workloads, scorers, and run stores of
every backend (a folder, and a namespace in each memory store)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from ctxwise.relay import (
    Answers,
    DirectoryRuns,
    Examples,
    HandoverParser,
    NeedleLine,
    RelayResult,
    RunStore,
    StepRequest,
    StepResult,
    StoreRuns,
    Workload,
    generate,
)
from tests._stores import store_factory

RESULT_FIELDS = (
    "run_id",
    "steps",
    "total_steps",
    "lines",
    "table",
    "notes",
    "dropped",
    "rejections",
    "records",
    "carry",
    "unrecognised_chunks",
)


def small_needles(seed: int = 0, chunks: int = 12) -> Workload:
    """The needles log, ``chunks`` chunks of about 4,000 tokens, 5 needles a chunk on average."""
    return generate(seed, chunks=chunks, needles=5 * chunks)


def small_counting(seed: int = 0, chunks: int = 12) -> Workload:
    """The counting log (40 assets, 16 handovers a chunk) over ``chunks`` chunks."""
    return generate(seed, variant="counting", chunks=chunks, needles=16 * chunks)


OTHER_PHRASINGS = (
    "{a}: keeper now {r}, formerly {g}.",
    "Log: {r} assumes charge of {a} (from {g}).",
    "{a} went from {g}'s watch to {r}'s.",
    "Sign-over of {a} recorded, {g} to {r}.",
)
"""Handover phrasings :func:`generate` never writes (so the parser knows none)."""
_ENTRY = re.compile(r"^day \d+ \d\d:\d\d \[[A-Z0-9]{6}\] hall [A-F], bay \d\d: ")


def rephrased(workload: Workload) -> Workload:
    """A log :func:`generate` wrote, with every handover line (and every example of
    one) written in :data:`OTHER_PHRASINGS` instead: the same events at the same
    places, as another team's log would word them; the answers follow the text."""
    parser = HandoverParser()
    assert workload.answers is not None

    def reword(line: str, n: int) -> str:
        ((asset, giver, receiver),) = parser.parse(line)
        entry = _ENTRY.match(line)
        assert entry is not None
        said = OTHER_PHRASINGS[n % len(OTHER_PHRASINGS)].format(a=asset, g=giver, r=receiver)
        return entry.group() + said

    where = [(n.chunk, n.line) for n in workload.answers.needles]
    chunks = [c.split("\n") for c in workload.chunks]
    for n, (c, i) in enumerate(where):
        chunks[c][i] = reword(chunks[c][i], n)
    needles = tuple(NeedleLine(chunk=c, line=i, text=chunks[c][i]) for c, i in where)
    keep = tuple(reword(x, n) for n, x in enumerate(workload.examples.keep))
    return dataclasses.replace(
        workload,
        chunks=tuple("\n".join(c) for c in chunks),
        examples=Examples(keep=keep, skip=workload.examples.skip),
        answers=Answers(needles=needles, table=workload.answers.table),
        name=f"{workload.name}-rephrased",
    )


def assert_same_result(a: RelayResult, b: RelayResult) -> None:
    """Every field of two results is equal (a field at a time, to say which differs)."""
    for name in RESULT_FIELDS:
        assert getattr(a, name) == getattr(b, name), name


class NoLines:
    """A scorer that keeps no line: for tests about the table only."""

    threshold = 0.0

    def score(self, lines: Sequence[str]) -> list[float]:
        return [-1.0] * len(lines)


class AllLines:
    """A scorer that keeps every line, scoring it by its position (later is higher)."""

    threshold = 0.0

    def score(self, lines: Sequence[str]) -> list[float]:
        return [1.0 + i for i in range(len(lines))]


class NotingParser:
    """The handover parser, plus a note per chunk (so runs carry notes too)."""

    def __init__(self) -> None:
        self.parser = HandoverParser()

    def __call__(self, request: StepRequest) -> StepResult:
        result = self.parser(request)
        found = len(self.parser.parse(request.chunk))
        notes = f"{request.notes}chunk {request.index}: {found} handovers. "
        return StepResult(table=result.table, notes=notes)


RUN_BACKENDS = ["directory", "memory", "sqlite", "postgres"]


@pytest.fixture(params=RUN_BACKENDS)
def make_runs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], RunStore]]:
    """A factory of run stores over one backing folder or database for the test
    (a new :class:`RunStore` each call, as a process that restarts would open)."""
    if request.param == "directory":
        yield lambda: DirectoryRuns(tmp_path / "runs")
        return
    with store_factory(request.param, tmp_path) as stores:
        yield lambda: StoreRuns(stores())
