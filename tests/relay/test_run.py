"""The relay loop: stop and resume equal a run never stopped, on every run store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ctxwise.errors import RelayError, RelayStateError
from ctxwise.memory import InMemoryStore
from ctxwise.relay import (
    DirectoryRuns,
    FaultyStep,
    HandoverParser,
    Relay,
    RelayResult,
    RunStore,
    Shares,
    StepRequest,
    StepResult,
    StoreRuns,
    Workload,
    generate,
)
from tests.relay.conftest import AllLines, NotingParser, assert_same_result, small_counting

CHUNKS = 10
CAP = 4000  # small enough that the store drops lines


def _workload() -> Workload:
    return small_counting(9, chunks=CHUNKS)


def _relay(runs: RunStore | Path, workload: Workload | None = None, **settings: object) -> Relay:
    step = FaultyStep(NotingParser(), rate=0.3, seed=2)
    options: dict[str, object] = {"carry_tokens": CAP, **settings}
    return Relay(workload or _workload(), step, runs=runs, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> RelayResult:
    """The run never interrupted."""
    return _relay(tmp_path_factory.mktemp("whole")).run("job")


def test_the_reference_run_has_everything_to_compare(whole: RelayResult) -> None:
    assert whole.done and whole.steps == CHUNKS
    assert whole.dropped and whole.rejections and whole.notes and whole.lines
    assert len(whole.records) == CHUNKS


@pytest.mark.parametrize("stop", [1, 4, CHUNKS - 1])
def test_stop_then_resume_equals_an_uninterrupted_run(
    make_runs: Callable[[], RunStore], whole: RelayResult, stop: int
) -> None:
    part = _relay(make_runs()).run("job", stop_after=stop)
    assert part.steps == stop and not part.done
    assert part.records == whole.records[:stop]
    assert part.rejections == tuple(r for r in whole.rejections if r.step < stop)
    resumed = _relay(make_runs()).resume("job")  # a fresh relay and store: a new process
    assert_same_result(resumed, whole)


def test_many_short_resumes_equal_an_uninterrupted_run(
    make_runs: Callable[[], RunStore], whole: RelayResult
) -> None:
    seen: list[int] = []
    result = _relay(make_runs()).run("job", stop_after=0, on_commit=seen.append)
    assert result.steps == 0 and seen == []
    while not result.done:
        result = _relay(make_runs()).resume("job", stop_after=3, on_commit=seen.append)
    assert seen == list(range(CHUNKS))
    assert_same_result(result, whole)


def test_resuming_a_finished_run_returns_its_result(
    make_runs: Callable[[], RunStore], whole: RelayResult
) -> None:
    runs = make_runs()
    first = _relay(runs).run("job")
    manifest = runs.manifest("job")
    again = _relay(make_runs()).resume("job", on_commit=lambda i: pytest.fail("no step runs"))
    assert_same_result(again, first)
    assert_same_result(again, whole)
    assert make_runs().manifest("job") == manifest


def test_the_manifest_says_where_the_run_is(make_runs: Callable[[], RunStore]) -> None:
    runs = make_runs()
    _relay(runs).run("job", stop_after=3)
    m = runs.manifest("job")
    assert (m.run_id, m.phase, m.step, m.steps) == ("job", "running", 2, CHUNKS)
    assert m.job == _relay(runs).fingerprint()
    assert m.state is not None and m.state.name == "state-000003.json"
    assert m.agents["scorer"].last_step == m.agents["step"].last_step == 2
    loaded, data = runs.load("job")
    assert loaded == m and data is not None and len(data) == m.state.bytes
    _relay(runs).resume("job")
    done = runs.manifest("job")
    assert (done.phase, done.step) == ("done", CHUNKS - 1)
    assert {a.status for a in done.agents.values()} == {"done"}


def test_a_run_id_that_exists_is_refused(make_runs: Callable[[], RunStore]) -> None:
    runs = make_runs()
    _relay(runs).run("job", stop_after=2)
    before = runs.load("job")
    with pytest.raises(RelayError) as err:
        _relay(make_runs()).run("job")
    assert err.value.reason == "run"
    assert make_runs().load("job") == before


def test_resume_of_an_unknown_run_is_a_run_error(make_runs: Callable[[], RunStore]) -> None:
    with pytest.raises(RelayError) as err:
        _relay(make_runs()).resume("nope")
    assert err.value.reason == "run"


OTHER_JOBS: dict[str, Callable[[RunStore], Relay]] = {
    "other chunks": lambda runs: _relay(runs, small_counting(10, chunks=CHUNKS)),
    "one chunk more": lambda runs: _relay(runs, small_counting(9, chunks=CHUNKS + 1)),
    "other cap": lambda runs: _relay(runs, carry_tokens=CAP + 1),
    "other policy": lambda runs: _relay(runs, drop_policy="oldest"),
    "other shares": lambda runs: _relay(runs, shares=Shares(0.6, 0.3)),
    "other retries": lambda runs: _relay(runs, retries=2),
    "other step": lambda runs: Relay(_workload(), HandoverParser(), runs=runs, carry_tokens=CAP),
}


@pytest.mark.parametrize("job", list(OTHER_JOBS))
def test_resume_with_another_job_is_a_run_error(tmp_path: Path, job: str) -> None:
    runs = DirectoryRuns(tmp_path)
    _relay(runs).run("job", stop_after=2)
    before = runs.load("job")
    with pytest.raises(RelayError) as err:
        OTHER_JOBS[job](runs).resume("job")
    assert err.value.reason == "run"
    assert "another job" in str(err.value)
    assert runs.load("job") == before


@pytest.mark.parametrize("bad", ["a/b", "..", "../up", "a..b", "", ".hidden", "x" * 129, "a b"])
def test_unsafe_run_ids_are_refused(tmp_path: Path, bad: str) -> None:
    relay = _relay(tmp_path / "runs")
    with pytest.raises(RelayError) as err:
        relay.run(bad)
    assert err.value.reason == "run"
    with pytest.raises(RelayError):
        relay.resume(bad)
    assert list(tmp_path.iterdir()) == []  # nothing written, inside or outside runs/


def test_retries_must_be_a_whole_number(tmp_path: Path) -> None:
    for retries in (-1, True, 1.5):
        with pytest.raises(RelayError) as err:
            _relay(tmp_path, retries=retries)
        assert err.value.reason == "spec"


def test_no_retry_keeps_the_previous_table_at_once(tmp_path: Path) -> None:
    result = _relay(tmp_path, retries=0).run("job")
    assert result.rejections
    assert all(r.attempt == 0 and r.final for r in result.rejections)
    assert {r.step for r in result.rejections} == {r.step for r in result.records if not r.accepted}


class Bloating:
    """The parser's table, plus ``extra`` made-up rows from step ``at`` on."""

    def __init__(self, at: int, extra: int) -> None:
        self.at, self.extra = at, extra
        self.parser = HandoverParser()

    def __call__(self, request: StepRequest) -> StepResult:
        rows = list(self.parser(request).table or ())
        if request.index >= self.at:
            rows += [
                {"asset": f"mixer MX-{9000 + i}", "holder": "Nobody Known", "handovers": 0}
                for i in range(self.extra)
            ]
        return StepResult(table=tuple(rows))


def test_a_table_that_grows_over_its_share_is_rejected(tmp_path: Path) -> None:
    workload = _workload()
    cap = 3000  # the state share (~880 tokens) holds the 40 rows (~600), not 60 more
    result = Relay(workload, Bloating(at=4, extra=60), runs=tmp_path, carry_tokens=cap).run("b")
    over = [r for r in result.rejections if r.reason == "over_share"]
    assert {(r.step, r.attempt) for r in over} == {(s, a) for s in range(4, CHUNKS) for a in (0, 1)}
    assert over == list(result.rejections)
    assert all("share" in r.violations[0] for r in over)
    assert [r.accepted for r in result.records] == [True] * 4 + [False] * (CHUNKS - 4)
    assert len(result.table) == 40
    assert result.carry_tokens_max <= cap
    honest = Relay(workload, HandoverParser(), runs=tmp_path, carry_tokens=cap).run(
        "h", stop_after=4
    )
    assert result.table == honest.table  # the last good table stayed


def test_the_carry_never_exceeds_its_cap_even_with_a_large_starting_table(
    tmp_path: Path,
) -> None:
    # 40 rows take about 600 tokens; a 1,000-token carry leaves the table ~290
    try:
        result = Relay(_workload(), HandoverParser(), runs=tmp_path, carry_tokens=1000).run("t")
    except RelayError as exc:  # refusing the job up front is right too
        assert exc.reason in {"spec", "table"}
        return
    assert result.carry_tokens_max <= 1000


def test_a_state_larger_than_a_store_item_resumes_whole(
    make_runs: Callable[[], RunStore], tmp_path: Path
) -> None:
    # every line kept: the state grows past 500,000 characters (a store item's limit)
    workload = generate(14, chunks=8, chunk_tokens=24_000, needles=40)

    def relay(runs: RunStore | Path) -> Relay:
        return Relay(
            workload, HandoverParser(), runs=runs, scorer=AllLines(), carry_tokens=1_000_000
        )

    whole = relay(tmp_path / "whole").run("big")
    assert sum(len(k.text) for k in whole.lines) > 600_000
    relay(make_runs()).run("big", stop_after=5)
    runs = make_runs()
    _, state = runs.load("big")
    assert state is not None and len(state) > 500_000
    resumed = relay(make_runs()).resume("big")
    assert_same_result(resumed, whole)
    if isinstance(runs, StoreRuns):
        ns = (*runs.prefix, "big")
        ids = sorted(i.id for i in runs.store.recent(ns, runs.store.count(ns)))
        assert ids[0] == "manifest"
        assert len(ids) > 2 and {i.split(".")[0] for i in ids[1:]} == {"state-000008"}


def test_a_missing_part_of_a_large_state_is_refused() -> None:
    store = InMemoryStore()
    workload = generate(14, chunks=3, chunk_tokens=60_000, needles=6)
    relay = Relay(
        workload, HandoverParser(), runs=StoreRuns(store), scorer=AllLines(), carry_tokens=1_000_000
    )
    relay.run("big", stop_after=2)
    ns = ("relay", "big")
    parts = sorted(i.id for i in store.recent(ns, 100) if i.id.startswith("state-000002."))
    assert parts
    store.delete(ns, [parts[-1]])
    with pytest.raises(RelayStateError) as err:
        relay.resume("big")
    assert "missing" in str(err.value)
