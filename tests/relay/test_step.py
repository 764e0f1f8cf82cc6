"""Steps: the faulty step and the rejections it causes, reply parsing, a fake model,
and a step that returns garbage."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ctxwise.errors import RelayError
from ctxwise.relay import (
    DirectoryRuns,
    FaultyStep,
    HandoverParser,
    LLMStep,
    Relay,
    StepFailed,
    StepRequest,
    StepResult,
    Workload,
    generate,
    keep_state,
    score_run,
)
from ctxwise.relay.step import parse_reply
from tests.relay.conftest import (
    NoLines,
    assert_same_result,
    rephrased,
    small_counting,
    small_needles,
)

# -- FaultyStep ----------------------------------------------------------------


def test_breaks_is_deterministic_and_near_its_rate() -> None:
    a = FaultyStep(HandoverParser(), rate=0.3, seed=11)
    b = FaultyStep(HandoverParser(), rate=0.3, seed=11)
    other = FaultyStep(HandoverParser(), rate=0.3, seed=12)
    first = [a.breaks(i) for i in range(1000)]
    assert first == [b.breaks(i) for i in range(1000)] == [a.breaks(i) for i in range(1000)]
    assert first != [other.breaks(i) for i in range(1000)]
    assert 250 <= sum(first) <= 350
    assert not any(a.breaks(i, 1) for i in range(1000))  # the retry is left intact
    persistent = FaultyStep(HandoverParser(), rate=0.3, seed=11, persistent=True)
    assert any(persistent.breaks(i, 1) for i in range(1000))
    assert not any(FaultyStep(HandoverParser(), rate=0.0).breaks(i) for i in range(200))
    assert all(FaultyStep(HandoverParser(), rate=1.0).breaks(i) for i in range(200))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_broken_update_is_rejected_and_the_count_ends_40_of_40(
    tmp_path: Path, seed: int
) -> None:
    workload = generate(seed, variant="counting")
    step = FaultyStep(HandoverParser(), rate=0.3, seed=seed)
    result = Relay(workload, step, runs=tmp_path, scorer=NoLines()).run(f"faulty-{seed}")
    broken = {(i, a) for i in range(96) for a in (0, 1) if step.breaks(i, a)}
    assert len(broken) >= 15  # the test means something
    assert {(r.step, r.attempt) for r in result.rejections} == broken
    assert len(result.rejections) == len(broken)
    assert all(r.reason == "invariant" and not r.final for r in result.rejections)
    assert all(r.violations and r.changes for r in result.rejections)
    assert all(
        v.split(":")[0] in {"row_dropped", "counter_decreased"}
        for r in result.rejections
        for v in r.violations
    )
    score = score_run(result, workload)
    assert (score.holders_correct, score.counts_exact, score.rows_total) == (40, 40, 40)
    assert score.rejected_updates == len(broken)
    assert all(r.accepted for r in result.records)
    assert [r.attempts for r in result.records] == [1 + step.breaks(i) for i in range(96)]
    assert workload.answers is not None
    assert list(result.table) == list(workload.answers.table)


def _broken_twice(step: FaultyStep, steps: int) -> list[int]:
    return [i for i in range(1, steps) if step.breaks(i, 0) and step.breaks(i, 1)]


def test_a_step_broken_twice_keeps_the_previous_table_and_records_why(tmp_path: Path) -> None:
    workload = small_counting(4, chunks=12)
    step = FaultyStep(HandoverParser(), rate=0.5, seed=5, persistent=True)
    twice = _broken_twice(step, 12)
    assert twice, "pick a seed with a step broken on both attempts"
    k = twice[0]
    relay = Relay(workload, step, runs=tmp_path, scorer=NoLines())
    before = relay.run("p", stop_after=k)
    after = relay.resume("p", stop_after=1)
    assert after.steps == k + 1
    assert after.table == before.table
    # the parser alone would have moved the table on at this step
    honest = Relay(workload, HandoverParser(), runs=tmp_path, scorer=NoLines())
    honest.run("h", stop_after=k)
    assert honest.resume("h", stop_after=1).table != before.table
    final = [r for r in after.rejections if r.step == k]
    assert [(r.attempt, r.final) for r in final] == [(0, False), (1, True)]
    assert not after.records[-1].accepted and after.records[-1].attempts == 2
    old = {r["asset"]: r for r in before.table}
    for rejection in final:
        assert rejection.reason == "invariant"
        offending = [
            c
            for c in rejection.changes
            if (c.kind == "removed" and c.key in old)
            or (
                c.kind == "changed"
                and c.column == "handovers"
                and isinstance(c.old, int)
                and isinstance(c.new, int)
                and c.new < c.old
            )
        ]
        assert offending, rejection.changes
        for c in offending:
            named = f"{c.key!r}"
            assert any(named in v for v in rejection.violations)
    manifest = DirectoryRuns(tmp_path).manifest("p")
    assert manifest.agents["step"].status == "rejected"
    assert manifest.agents["step"].failures == sum(1 for r in after.rejections if r.step <= k)


# -- parse_reply -----------------------------------------------------------------


def test_parse_reply_accepts_an_object_bare_or_fenced() -> None:
    rows = [{"asset": "pump P-1", "holder": "Ana Ruiz", "handovers": 1}]
    body = json.dumps({"table": rows, "notes": "n"})
    assert parse_reply(body) == StepResult(table=tuple(rows), notes="n")
    assert parse_reply(f"```json\n{body}\n```") == StepResult(table=tuple(rows), notes="n")
    assert parse_reply(f"  ```\n{body}\n```  \n") == StepResult(table=tuple(rows), notes="n")
    assert parse_reply('{"notes": "only notes"}') == StepResult(notes="only notes")
    assert parse_reply("{}") == StepResult()


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ("I updated the table.", "not JSON"),
        ("```json\n{oops}\n```", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('"table"', "not a JSON object"),
        ('{"table": [], "summary": "x"}', "unknown key 'summary'"),
        ('{"table": {"asset": "pump P-1"}}', "'table'"),
        ('{"table": [1, 2]}', "'table'"),
        ('{"table": "rows"}', "'table'"),
        ('{"notes": 3}', "'notes'"),
        ('{"notes": ["a"]}', "'notes'"),
    ],
)
def test_parse_reply_refuses_garbage(reply: str, says: str) -> None:
    with pytest.raises(StepFailed) as err:
        parse_reply(reply)
    assert says in err.value.reason


# -- LLMStep with a fake model ----------------------------------------------------


@dataclass
class FakeChat:
    """A ChatModel that answers garbage first, then the table it was given, unchanged."""

    rows: list[dict[str, Any]]
    name: str = "fake-model"
    calls: list[tuple[str, str, int]] = field(default_factory=list)

    def complete(self, system: str, user: str, max_tokens: int) -> str:
        self.calls.append((system, user, max_tokens))
        if len(self.calls) % 2 == 1:
            return "Sure! Here is the updated table: (no JSON, sorry)"
        return "```json\n" + json.dumps({"table": self.rows, "notes": "all good"}) + "\n```"


def test_an_llm_step_that_replies_garbage_is_retried_and_then_accepted(tmp_path: Path) -> None:
    workload = small_counting(6, chunks=3)
    assert workload.table is not None
    model = FakeChat([dict(r) for r in workload.table.rows])
    result = Relay(workload, LLMStep(model, max_tokens=321), runs=tmp_path).run("llm")
    assert len(model.calls) == 6
    assert [(r.step, r.attempt, r.reason, r.final) for r in result.rejections] == [
        (0, 0, "step_failed", False),
        (1, 0, "step_failed", False),
        (2, 0, "step_failed", False),
    ]
    assert all("not JSON" in r.violations[0] for r in result.rejections)
    assert [(r.accepted, r.attempts) for r in result.records] == [(True, 2)] * 3
    assert result.notes == "all good"
    assert list(result.table) == list(workload.table.rows)
    system, first_user, max_tokens = model.calls[0]
    assert workload.instruction in system and "JSON" in system
    assert max_tokens == 321
    assert workload.chunks[0] in first_user and "== state table ==" in first_user
    assert "rejected" not in first_user
    _, retry_user, _ = model.calls[1]
    assert "Your previous update was rejected" in retry_user and "not JSON" in retry_user


def test_an_llm_step_whose_retry_fails_too_keeps_the_previous_state(tmp_path: Path) -> None:
    class Hopeless:
        name = "hopeless"

        def complete(self, system: str, user: str, max_tokens: int) -> str:
            return '{"table": "no"}'

    workload = small_counting(6, chunks=2)
    assert workload.table is not None
    result = Relay(workload, LLMStep(Hopeless()), runs=tmp_path).run("hopeless")
    assert [(r.step, r.attempt, r.final) for r in result.rejections] == [
        (0, 0, False),
        (0, 1, True),
        (1, 0, False),
        (1, 1, True),
    ]
    assert list(result.table) == list(workload.table.rows)
    assert [r.accepted for r in result.records] == [False, False]


# -- a step that returns garbage ---------------------------------------------------


@dataclass
class Garbling:
    """The parser, except at step ``at`` where it returns a dict instead of a StepResult."""

    at: int | None = None
    parser: HandoverParser = field(default_factory=HandoverParser)

    def __call__(self, request: StepRequest) -> Any:
        if request.index == self.at:
            return {"table": list(request.table)}
        return self.parser(request)


def test_a_step_that_returns_garbage_is_a_step_error_and_the_run_resumes_when_fixed(
    tmp_path: Path,
) -> None:
    workload = small_counting(7, chunks=8)
    runs = tmp_path / "runs"
    with pytest.raises(RelayError) as err:
        Relay(workload, Garbling(at=5), runs=runs).run("g")
    assert err.value.reason == "step"
    assert "dict" in str(err.value)
    manifest = DirectoryRuns(runs).manifest("g")
    assert manifest.step == 4 and manifest.phase == "running"
    assert manifest.agents["step"].last_step == 4
    resumed = Relay(workload, Garbling(at=None), runs=runs).resume("g")
    whole = Relay(workload, Garbling(at=None), runs=tmp_path / "other").run("g")
    assert resumed.done
    assert_same_result(resumed, whole)
    assert workload.answers is not None
    assert list(resumed.table) == list(workload.answers.table)


def test_keep_state_changes_nothing(tmp_path: Path) -> None:
    workload = small_counting(8, chunks=3)
    assert workload.table is not None
    result = Relay(workload, keep_state, runs=tmp_path).run("k")
    assert list(result.table) == list(workload.table.rows)
    assert result.rejections == ()
    assert result.notes == ""


def test_a_step_that_proposes_a_table_for_a_job_without_one_is_rejected(
    tmp_path: Path,
) -> None:
    from ctxwise.relay import Workload

    workload = Workload(instruction="keep lines", chunks=("a\n", "b\n"))
    result = Relay(workload, lambda r: StepResult(table=({"x": 1},)), runs=tmp_path).run("t")
    assert [(r.step, r.attempt) for r in result.rejections] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert result.table == ()


@dataclass
class Crashing:
    """The parser, except at step ``at`` where it raises a plain exception."""

    at: int | None = None
    parser: HandoverParser = field(default_factory=HandoverParser)

    def __call__(self, request: StepRequest) -> StepResult:
        if request.index == self.at:
            raise KeyError("holder")
        result: StepResult = self.parser(request)
        return result


def test_a_step_that_raises_is_a_step_error_and_keeps_the_last_good_state(
    tmp_path: Path,
) -> None:
    workload = small_counting(7, chunks=6)
    runs = tmp_path / "runs"
    with pytest.raises(RelayError) as err:
        Relay(workload, Crashing(at=3), runs=runs).run("c")
    assert err.value.reason == "step"
    assert "KeyError" in str(err.value)
    assert isinstance(err.value.__cause__, KeyError)
    assert DirectoryRuns(runs).manifest("c").step == 2
    resumed = Relay(workload, Crashing(at=None), runs=runs).resume("c")
    assert resumed.done and [r.step for r in resumed.records] == list(range(6))
    assert workload.answers is not None
    assert list(resumed.table) == list(workload.answers.table)


# -- steps that recognise nothing ----------------------------------------------------


def _per_chunk(workload: Workload) -> list[int]:
    assert workload.answers is not None
    counts = [0] * len(workload.chunks)
    for needle in workload.answers.needles:
        counts[needle.chunk] += 1
    return counts


def test_the_parser_says_how_many_handovers_each_chunk_held(tmp_path: Path) -> None:
    workload = small_needles(2, chunks=6)
    result = Relay(workload, HandoverParser(), runs=tmp_path).run("p")
    assert [r.recognised for r in result.records] == _per_chunk(workload)
    assert result.unrecognised_chunks == 0 == score_run(result, workload).unrecognised_chunks
    # the faulty parser passes the count on; steps that do not count say None
    faulty = FaultyStep(HandoverParser(), rate=1.0, seed=3)
    broken = Relay(workload, faulty, runs=tmp_path, scorer=NoLines()).run("f")
    assert [r.recognised for r in broken.records] == _per_chunk(workload)
    kept = Relay(workload, keep_state, runs=tmp_path).run("k")
    assert {r.recognised for r in kept.records} == {None} and kept.unrecognised_chunks == 0


def test_a_log_of_other_phrasings_is_reported_as_unrecognised_not_left_silent(
    tmp_path: Path,
) -> None:
    """The parser knows the generator's phrasing only: on the same events worded
    otherwise it parses nothing, the table never changes, and the run said nothing
    of it. Now every such chunk counts in the result and in the score."""
    original = small_needles(2, chunks=6)
    other = rephrased(original)
    assert all(n > 0 for n in _per_chunk(other))  # every chunk holds handovers
    result = Relay(other, HandoverParser(), runs=tmp_path).run("r")
    assert [r.recognised for r in result.records] == [0] * len(other.chunks)
    assert result.unrecognised_chunks == len(other.chunks)
    assert other.table is not None and list(result.table) == list(other.table.rows)
    score = score_run(result, other)
    assert score.unrecognised_chunks == len(other.chunks) == score.steps
    assert score.as_dict()["unrecognised_chunks"] == len(other.chunks)
    # the line store is the scorer's and is not affected: the needles are still kept
    assert score.needles_kept == score.needles_total
    # a run that mixes both logs counts the chunks of the other phrasing only
    mixed = dataclasses.replace(original, chunks=(*original.chunks[:3], *other.chunks[3:]))
    both = Relay(mixed, HandoverParser(), runs=tmp_path).run("m")
    assert both.unrecognised_chunks == len(other.chunks) - 3


def test_the_count_survives_a_resume_and_a_state_written_before_it(tmp_path: Path) -> None:
    other = rephrased(small_needles(2, chunks=6))
    runs = DirectoryRuns(tmp_path / "runs")
    Relay(other, HandoverParser(), runs=runs).run("old", stop_after=2)
    manifest, data = runs.load("old")
    assert data is not None
    state = json.loads(data)
    for record in state["records"]:  # as a run started before the field was written
        del record["recognised"]
    runs.commit(manifest, json.dumps(state).encode())
    resumed = Relay(other, HandoverParser(), runs=runs).resume("old")
    assert [r.recognised for r in resumed.records] == [None, None, 0, 0, 0, 0]
    assert resumed.unrecognised_chunks == 4


@pytest.mark.parametrize("said", [-1, True, 1.5, "3"])
def test_a_step_whose_count_is_not_a_count_is_a_step_error(tmp_path: Path, said: Any) -> None:
    workload = small_needles(2, chunks=2)
    with pytest.raises(RelayError) as err:
        Relay(workload, lambda r: StepResult(recognised=said), runs=tmp_path).run("bad")
    assert err.value.reason == "step" and "recognised=" in str(err.value)
