"""Relay spec files: every key checked, paths resolved, each offline step kind built."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from ctxwise.errors import RelayError
from ctxwise.relay import (
    DirectoryRuns,
    ExampleScorer,
    FaultyStep,
    HandoverParser,
    RelaySpec,
    StepRequest,
    StepResult,
    Workload,
    build_relay,
    keep_state,
    load_spec,
    score_run,
    write_workload,
)
from tests.relay.conftest import small_counting


def tidy_step(request: StepRequest) -> StepResult:
    """A Python step for ``kind = "python"``: leaves the table, writes a note."""
    return StepResult(notes=f"saw chunk {request.index}")


class ClassStep:
    """A step class: the spec calls it with no arguments."""

    def __call__(self, request: StepRequest) -> StepResult:
        return StepResult(notes="from a class")


class EveryOtherLine:
    """A Python line scorer: keeps the even lines."""

    threshold = 0.5

    def score(self, lines: Sequence[str]) -> list[float]:
        return [float(i % 2 == 0) for i in range(len(lines))]


NOT_CALLABLE = 42


@pytest.fixture
def job(tmp_path: Path) -> tuple[Path, Workload]:
    """A spec folder holding a workload folder ``log``."""
    folder = tmp_path / "jobs"
    folder.mkdir()
    workload = small_counting(12, chunks=4)
    write_workload(workload, folder / "log")
    return folder, workload


def _toml(folder: Path, text: str, name: str = "job.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_toml_spec_is_read_with_paths_made_absolute(job: tuple[Path, Workload]) -> None:
    folder, _ = job
    path = _toml(
        folder,
        """
workload = "log"
runs = "out/runs"
carry_tokens = 12000
drop_policy = "oldest"
retries = 2
counter = "word"

[shares]
lines = 0.6
state = 0.4

[scorer]
threshold = 0.1
ngram = 3

[step]
kind = "faulty-parser"
rate = 0.5
seed = 7
persistent = true
""",
    )
    spec = load_spec(path)
    assert spec.workload == str((folder / "log").resolve())
    assert spec.runs == str((folder / "out" / "runs").resolve())
    assert spec.run_id == "job"
    assert (spec.carry_tokens, spec.drop_policy, spec.retries) == (12000, "oldest", 2)
    assert (spec.shares.lines, spec.shares.state) == (0.6, 0.4)
    assert (spec.scorer.threshold, spec.scorer.ngram) == (0.1, 3)
    assert (spec.step.kind, spec.step.rate, spec.step.seed) == ("faulty-parser", 0.5, 7)
    relay = build_relay(spec)
    assert relay.budget.cap == 12000 and relay.drop_policy == "oldest" and relay.retries == 2
    assert (relay.shares.lines, relay.shares.state) == (0.6, 0.4)
    assert isinstance(relay.scorer, ExampleScorer)
    assert relay.scorer.threshold == 0.1 and relay.scorer.ngram == 3
    assert isinstance(relay.step, FaultyStep)
    assert (relay.step.rate, relay.step.seed, relay.step.persistent) == (0.5, 7, True)
    assert relay.step.key == "asset" and tuple(relay.step.counters) == ("handovers",)
    assert isinstance(relay.runs, DirectoryRuns)
    assert relay.runs.root == folder.resolve() / "out" / "runs"


def test_a_json_spec_and_the_defaults(
    job: tuple[Path, Workload], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, workload = job
    path = folder / "nightly.json"
    path.write_text(json.dumps({"workload": "log", "run_id": "n-1"}))
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # runs default to .ctxwise/relay in the current folder
    spec = load_spec(path)
    assert spec.workload == str((folder / "log").resolve())
    assert spec.runs == str((cwd / ".ctxwise" / "relay").resolve())
    assert spec.run_id == "n-1"
    assert spec.carry_tokens == 24000 and spec.step.kind == "parser"
    relay = build_relay(spec)
    assert isinstance(relay.step, HandoverParser)
    result = relay.run(spec.run_id or "")
    score = score_run(result, workload)
    assert (score.holders_correct, score.counts_exact) == (40, 40)
    assert (cwd / ".ctxwise" / "relay" / "n-1" / "manifest.json").is_file()
    assert not (folder / ".ctxwise").exists()


def test_a_workload_given_in_code_is_used_instead_of_the_folder(tmp_path: Path) -> None:
    spec = RelaySpec(workload=str(tmp_path / "missing"), runs=str(tmp_path / "runs"))
    workload = small_counting(13, chunks=2)
    relay = build_relay(spec, workload=workload)
    assert relay.workload is workload
    with pytest.raises(RelayError) as err:
        build_relay(spec)
    assert err.value.reason == "workload"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('workload = "log"\ncolour = "blue"\n', "colour"),
        ('workload = "log"\n[step]\nkind = "parser"\nspeed = 3\n', "step.speed"),
        ('workload = "log"\n[shares]\nverbatim = 0.5\n', "shares.verbatim"),
        ('workload = "log"\n[scorer]\nmodel = "x"\n', "scorer.model"),
    ],
)
def test_an_unknown_key_is_a_spec_error_naming_it(
    job: tuple[Path, Workload], text: str, named: str
) -> None:
    folder, _ = job
    with pytest.raises(RelayError) as err:
        load_spec(_toml(folder, text))
    assert err.value.reason == "spec"
    assert f"unknown key '{named}'" in str(err.value)
    assert err.value.path is not None and err.value.path.endswith("job.toml")
    assert not (folder / ".ctxwise").exists()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('workload = "log"\ncarry_tokens = 0\n', "carry_tokens"),
        ('workload = "log"\ndrop_policy = "newest"\n', "drop_policy"),
        ('workload = "log"\n[step]\nkind = "magic"\n', "step.kind"),
        ('workload = "log"\n[step]\nrate = 2\n', "step.rate"),
        ('workload = "log"\nretries = "once"\n', "retries"),
        # true/false is an int to Python: carry_tokens = true was taken as 1
        ('workload = "log"\ncarry_tokens = true\n', "carry_tokens: must be a number, not true"),
        ('workload = "log"\nretries = false\n', "retries: must be a number, not false"),
        ('workload = "log"\n[shares]\nlines = true\n', "shares.lines"),
        ('workload = "log"\n[scorer]\nthreshold = true\n', "scorer.threshold"),
        ('workload = "log"\n[scorer]\nngram = true\n', "scorer.ngram"),
        ('workload = "log"\n[step]\nseed = true\n', "step.seed"),
        ('workload = "log"\n[step]\nmax_tokens = true\n', "step.max_tokens"),
        ('runs = "runs"\n', "workload"),
        ("workload = \n", "does not parse"),
    ],
)
def test_a_bad_value_is_a_spec_error_naming_it(
    job: tuple[Path, Workload], text: str, named: str
) -> None:
    folder, _ = job
    with pytest.raises(RelayError) as err:
        load_spec(_toml(folder, text))
    assert err.value.reason == "spec"
    assert named in str(err.value)


def test_a_bool_key_still_takes_a_bool(job: tuple[Path, Workload]) -> None:
    folder, _ = job
    spec = load_spec(_toml(folder, 'workload = "log"\n[step]\npersistent = true\n'))
    assert spec.step.persistent is True


def test_unreadable_or_odd_files_are_spec_errors(tmp_path: Path) -> None:
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "bad.toml").write_bytes(b'workload = "\xff"\n')
    (tmp_path / "broken.json").write_text("{")
    for path in (
        tmp_path / "missing.toml",
        tmp_path / "list.json",
        tmp_path / "bad.toml",
        tmp_path / "broken.json",
    ):
        with pytest.raises(RelayError) as err:
            load_spec(path)
        assert err.value.reason == "spec", path


def _built(folder: Path, step: str, **extra: str) -> RelaySpec:
    lines = ['workload = "log"', 'runs = "runs"', "[step]", *step.splitlines()]
    for table, body in extra.items():
        lines += [f"[{table}]", *body.splitlines()]
    return load_spec(_toml(folder, "\n".join(lines) + "\n"))


def test_step_kind_none_keeps_the_table(job: tuple[Path, Workload]) -> None:
    folder, workload = job
    relay = build_relay(_built(folder, 'kind = "none"'))
    assert relay.step is keep_state
    assert workload.table is not None
    assert list(relay.run("job").table) == list(workload.table.rows)


def test_step_kind_python_with_a_function(job: tuple[Path, Workload]) -> None:
    folder, _ = job
    spec = _built(folder, 'kind = "python"\nobject = "tests.relay.test_spec:tidy_step"')
    relay = build_relay(spec)
    assert relay.step is tidy_step
    result = relay.run("job")
    assert result.notes == "saw chunk 3"


def test_step_kind_python_with_a_class_and_a_python_scorer(job: tuple[Path, Workload]) -> None:
    folder, _ = job
    spec = _built(
        folder,
        'kind = "python"\nobject = "tests.relay.test_spec:ClassStep"',
        scorer='kind = "python"\nobject = "tests.relay.test_spec:EveryOtherLine"',
    )
    relay = build_relay(spec)
    assert isinstance(relay.step, ClassStep)
    assert isinstance(relay.scorer, EveryOtherLine)
    result = relay.run("job", stop_after=1)
    assert result.notes == "from a class"
    assert result.lines and all(k.line % 2 == 0 for k in result.lines)


@pytest.mark.parametrize(
    ("step", "says"),
    [
        ('kind = "python"', "step.object"),
        ('kind = "python"\nobject = "tests.relay.test_spec"', "package.module:name"),
        ('kind = "python"\nobject = "tests.relay.no_such_module:step"', "cannot be imported"),
        ('kind = "python"\nobject = "tests.relay.test_spec:no_such_name"', "cannot be imported"),
        ('kind = "python"\nobject = "tests.relay.test_spec:NOT_CALLABLE"', "not callable"),
        ('kind = "anthropic"', "step.model"),
        ('kind = "openai"', "step.model"),
    ],
)
def test_a_step_that_cannot_be_built_is_a_spec_error(
    job: tuple[Path, Workload], step: str, says: str
) -> None:
    folder, _ = job
    spec = _built(folder, step)
    with pytest.raises(RelayError) as err:
        build_relay(spec)
    assert err.value.reason == "spec"
    assert says in str(err.value)
    assert not (folder / "runs").exists()


def test_a_scorer_object_without_score_is_a_spec_error(job: tuple[Path, Workload]) -> None:
    folder, _ = job
    spec = _built(
        folder,
        'kind = "parser"',
        scorer='kind = "python"\nobject = "tests.relay.test_spec:ClassStep"',
    )
    with pytest.raises(RelayError) as err:
        build_relay(spec)
    assert err.value.reason == "spec"


def test_an_unknown_counter_is_a_spec_error(job: tuple[Path, Workload]) -> None:
    folder, _ = job
    spec = load_spec(_toml(folder, 'workload = "log"\ncounter = "abacus"\n'))
    with pytest.raises(RelayError) as err:
        build_relay(spec)
    assert err.value.reason == "spec"
    assert "counter" in str(err.value)
