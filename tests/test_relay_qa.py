"""QA regressions for the relay: bad input and damaged runs give typed errors."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ctxwise.errors import RelayError, RelayStateError
from ctxwise.memory import InMemoryStore
from ctxwise.relay import (
    DirectoryRuns,
    HandoverParser,
    Relay,
    RunStore,
    StepRequest,
    StepResult,
    StoreRuns,
    Workload,
    load_spec,
    load_workload,
    write_workload,
)
from tests.relay.conftest import assert_same_result, small_counting

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


class _SurrogateStep:
    """The parser, but the first row's holder gets a lone surrogate, which no
    state file can hold as UTF-8."""

    def __init__(self) -> None:
        self.parser = HandoverParser()

    def __call__(self, request: StepRequest) -> StepResult:
        rows = [dict(r) for r in request.table]
        rows[0]["holder"] = "Ana \ud800"
        return StepResult(table=rows)


@pytest.mark.parametrize("backend", ["directory", "memory"])
def test_a_refused_value_with_a_lone_surrogate_is_committed_not_a_crash(
    tmp_path: Path, backend: str
) -> None:
    runs: RunStore = (
        DirectoryRuns(tmp_path / "runs") if backend == "directory" else StoreRuns(InMemoryStore())
    )
    job = _workload()
    assert job.table is not None and "holder" in job.table.columns
    result = Relay(job, _SurrogateStep(), runs=runs).run("job")
    assert result.done
    assert result.table == tuple(job.table.rows)  # every proposal refused
    assert all("'holder'" in r.violations[0] for r in result.rejections)
    assert len(result.rejections) == 2 * CHUNKS


def test_a_refused_value_with_a_lone_surrogate_is_recorded_and_resumes(tmp_path: Path) -> None:
    job = _workload()
    whole = Relay(job, _SurrogateStep(), runs=tmp_path / "a").run("job")
    assert whole.rejections[0].changes[0].new == "Ana \ud800"
    Relay(job, _SurrogateStep(), runs=tmp_path / "b").run("job", stop_after=2)
    resumed = Relay(job, _SurrogateStep(), runs=tmp_path / "b").resume("job")
    assert_same_result(resumed, whole)


def _started(tmp_path: Path) -> tuple[Relay, Path]:
    relay = Relay(_workload(), HandoverParser(), runs=tmp_path / "runs")
    relay.run("job", stop_after=2)
    return relay, tmp_path / "runs" / "job"


def _rewrite(folder: Path, manifest: dict[str, Any] | None = None, **state: Any) -> None:
    """Change the run's manifest and state file, the state's hash recomputed so
    only the checks of what they say can refuse them."""
    found = json.loads((folder / "manifest.json").read_bytes())
    name = found["state"]["name"]
    data = json.loads((folder / name).read_bytes())
    data.update(state)
    raw = json.dumps(data).encode()
    (folder / name).write_bytes(raw)
    found["state"].update(sha256=hashlib.sha256(raw).hexdigest(), bytes=len(raw))
    found.update(manifest or {})
    (folder / "manifest.json").write_text(json.dumps(found))


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize(
    ("manifest", "state"),
    [
        ({"step": 50}, {"step": 50}),  # beyond the last chunk
        ({"step": CHUNKS}, {"step": CHUNKS}),  # one past it
        ({"steps": 99}, {}),  # a manifest of a run over other chunks
    ],
)
def test_resume_refuses_a_step_the_workload_does_not_have(
    tmp_path: Path, manifest: dict[str, Any], state: dict[str, Any]
) -> None:
    relay, folder = _started(tmp_path)
    _rewrite(folder, manifest, **state)
    before = _snapshot(folder)
    with pytest.raises(RelayStateError, match="chunks"):
        relay.resume("job")
    assert _snapshot(folder) == before


_LINE = {"chunk": 0, "line": 1, "text": "a line", "score": 1.0}


@pytest.mark.parametrize(
    "state",
    [
        {"step": True},  # a bool for the step
        {"step": 1.0},  # a float for the step
        {"notes": 5},
        {"bogus": 1},  # a key no state file has
        {"lines": [{**_LINE, "chunk": "0"}]},
        {"lines": [{**_LINE, "text": 5}]},
        {"lines": [{**_LINE, "score": "high"}]},
        {"lines": [{**_LINE, "extra": 1}]},
        {"lines": {"0": _LINE}},
        {"dropped": [{**_LINE, "step": 0, "policy": "newest"}]},
        {
            "records": [
                {
                    "step": 0,
                    "kept": "1",
                    "dropped": 0,
                    "attempts": 1,
                    "accepted": True,
                    "notes_cut": False,
                    "carry_tokens": 1,
                }
            ]
        },
        {
            "rejections": [
                {
                    "step": 0,
                    "attempt": 0,
                    "reason": "invariant",
                    "violations": "v",
                    "changes": [],
                    "final": False,
                }
            ]
        },
        {"table": [["asset", "pump P-1"]]},  # a row that is not an object
        {"table": [{"asset": "pump P-1", "bogus": 1}]},  # rows the table spec refuses
        {"table": []},  # every starting row dropped
    ],
)
def test_resume_refuses_a_state_file_in_the_wrong_shape(
    tmp_path: Path, state: dict[str, Any]
) -> None:
    relay, folder = _started(tmp_path)
    _rewrite(folder, None, **state)
    before = _snapshot(folder)
    with pytest.raises(RelayStateError, match="state file"):
        relay.resume("job")
    assert _snapshot(folder) == before


def test_a_state_file_that_was_not_changed_still_resumes(tmp_path: Path) -> None:
    relay, folder = _started(tmp_path)
    _rewrite(folder, None)  # rewritten with the same values
    whole = Relay(_workload(), HandoverParser(), runs=tmp_path / "whole").run("job")
    assert_same_result(relay.resume("job"), whole)


@pytest.mark.parametrize("name", ["../../outside.json", "/tmp/outside.json", "spec.json"])
def test_resume_refuses_a_manifest_naming_a_state_file_outside_the_run(
    tmp_path: Path, name: str
) -> None:
    relay, folder = _started(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_bytes())
    state = (folder / manifest["state"]["name"]).read_bytes()
    # a file with the very bytes the hash names, where the manifest now points
    target = folder / name if not name.startswith("/") else tmp_path / "outside.json"
    target.write_bytes(state)
    manifest["state"]["name"] = str(target) if name.startswith("/") else name
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RelayStateError, match="manifest is damaged"):
        relay.resume("job")


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('carry_tokens = "3000"', "carry_tokens"),
        ('retries = "1"', "retries"),
        ("retries = 1.0", "retries"),
        ('[shares]\nlines = "0.5"', "shares.lines"),
        ('[scorer]\nngram = "2"', "scorer.ngram"),
        ('[step]\nkind = "faulty-parser"\nrate = "0.5"', "step.rate"),
        ('[step]\nkind = "faulty-parser"\npersistent = "yes"', "step.persistent"),
        ("[step]\nseed = 1.5", "step.seed"),
    ],
)
def test_a_spec_value_of_the_wrong_type_is_refused_not_converted(
    tmp_path: Path, text: str, key: str
) -> None:
    spec = tmp_path / "job.toml"
    spec.write_text(f'workload = "wl"\n{text}\n', encoding="utf-8")
    with pytest.raises(RelayError, match=key.replace(".", r"\.")):
        load_spec(spec)


def test_a_second_process_on_a_run_in_progress_is_refused(tmp_path: Path) -> None:
    """While a run advances, another Relay resuming it could commit an older step
    between this one's state write and manifest write, deleting the state file the
    manifest then names; a run is held by one Relay at a time instead."""
    first, folder = _started(tmp_path)
    seen: list[BaseException] = []

    def meanwhile(step: int) -> None:
        other = Relay(_workload(), HandoverParser(), runs=tmp_path / "runs")
        try:
            other.resume("job", stop_after=1)
        except RelayError as exc:
            seen.append(exc)

    result = first.resume("job", on_commit=meanwhile)
    assert len(seen) == CHUNKS - 2 and all("in use" in str(e) for e in seen)
    whole = Relay(_workload(), HandoverParser(), runs=tmp_path / "whole").run("job")
    assert_same_result(result, whole)
    assert_same_result(
        Relay(_workload(), HandoverParser(), runs=tmp_path / "runs").resume("job"), whole
    )
    # released: the finished run can be read again by anyone
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "state-000004.json"]


def test_two_runs_started_with_one_id_leave_one_run(tmp_path: Path) -> None:
    first = Relay(_workload(), HandoverParser(), runs=tmp_path / "runs")
    errors: list[BaseException] = []

    def meanwhile(step: int) -> None:
        try:
            Relay(_workload(), HandoverParser(), runs=tmp_path / "runs").run("job")
        except RelayError as exc:
            errors.append(exc)

    first.run("job", on_commit=meanwhile)
    assert len(errors) == CHUNKS


@pytest.mark.parametrize("existing", [False, True])
def test_write_workload_that_fails_midway_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: bool
) -> None:
    out = tmp_path / "wl"
    if existing:
        out.mkdir()
    real = Path.write_bytes
    calls = {"n": 0}

    def full_disk(self: Path, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_disk)
    with pytest.raises(OSError):
        write_workload(_workload(), out)
    monkeypatch.undo()
    if existing:
        assert list(out.iterdir()) == []
    else:
        assert not out.exists()
    assert list(tmp_path.iterdir()) == ([out] if existing else [])
    write_workload(_workload(), out)  # and the folder can be written once there is room
    assert load_workload(out).chunks == _workload().chunks


def test_write_workload_through_a_link_to_an_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    write_workload(_workload(), tmp_path / "link")
    assert (tmp_path / "link").is_symlink()
    assert load_workload(tmp_path / "real").chunks == _workload().chunks


class _WordThreshold:
    threshold = "high"

    def score(self, lines: Sequence[str]) -> list[float]:
        return [0.0] * len(lines)


def test_a_scorer_whose_threshold_is_not_a_number_is_refused_up_front(tmp_path: Path) -> None:
    with pytest.raises(RelayError, match="threshold"):
        Relay(_workload(), HandoverParser(), runs=tmp_path / "runs", scorer=_WordThreshold())  # type: ignore[arg-type]
    assert not (tmp_path / "runs").exists()
