"""``ctxwise relay run`` / ``relay resume``, ``eval relay`` and ``data relay``, in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxwise.relay import (
    build_relay,
    generate,
    load_spec,
    load_workload,
    write_workload,
)
from tests._cli import assert_usage_error, ok_json, run
from tests.relay.conftest import rephrased

SMALL = ("--chunks", "8", "--needles", "30")


@pytest.fixture
def workload_dir(tmp_path: Path) -> Path:
    return write_workload(generate(3, chunks=8, needles=30), tmp_path / "log")


def _spec(tmp_path: Path, workload: Path, extra: str = "", name: str = "job") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(
        f'workload = "{workload.name}"\nruns = "runs"\n{extra}\n[step]\nkind = "faulty-parser"\n',
        encoding="utf-8",
    )
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# -- data relay -----------------------------------------------------------------


def test_data_relay_writes_a_workload_load_workload_reads(tmp_path: Path) -> None:
    out = tmp_path / "wl"
    report = ok_json("data", "relay", "--seed", "5", "--out", out, *SMALL)
    assert report["chunks"] == 8
    assert report["needles"] == 30
    assert report["assets"] == 40
    job = load_workload(out)
    assert job.chunks == generate(5, chunks=8, needles=30).chunks
    assert job.answers is not None
    assert len(job.answers.needles) == 30


def test_data_relay_prints_where_it_wrote(tmp_path: Path) -> None:
    out = tmp_path / "wl"
    result = run("data", "relay", "--seed", "0", "--out", out, *SMALL)
    assert result.exit_code == 0, result.stderr
    assert "8 chunks, 30 needles, 40 assets" in result.stdout
    assert str(out) in result.stdout


def test_data_relay_default_needles_scale_with_chunks(tmp_path: Path) -> None:
    # the default needle count was 497 whatever --chunks, so 3 chunks failed
    report = ok_json("data", "relay", "--seed", "1", "--out", tmp_path / "n", "--chunks", "3")
    assert report["chunks"] == 3 and report["needles"] == 16  # 497 * 3 / 96, rounded
    counting = ok_json(
        "data", "relay", "--seed", "1", "--out", tmp_path / "c", "--chunks", "3",
        "--variant", "counting",
    )  # fmt: skip
    assert counting["needles"] == 48
    assert ok_json("eval", "relay", "--chunks", "3")["needles_total"] == 16


def test_data_relay_refuses_handovers_that_do_not_fit_the_chunks(tmp_path: Path) -> None:
    # this wrote chunks of about 52,000 characters for --chunk-tokens 100
    out = tmp_path / "y"
    args = ("--variant", "counting", "--chunks", "2", "--chunk-tokens", "100")
    result = run(
        "data", "relay", "--seed", "2", "--out", out, *args, "--needles", "1000", "--assets", "1"
    )
    assert_usage_error(result, "1000 handovers do not fit 2 chunks of about 100 tokens")
    assert not out.exists()


def test_data_relay_chunks_stay_near_chunk_tokens(tmp_path: Path) -> None:
    out = tmp_path / "z"
    args = ("--chunks", "4", "--chunk-tokens", "200", "--needles", "8")
    ok_json("data", "relay", "--seed", "2", "--out", out, "--variant", "counting", *args)
    job = load_workload(out)
    assert job.answers is not None and len(job.answers.needles) == 8
    longest_line = max(len(line) for chunk in job.chunks for line in chunk.split("\n"))
    assert all(len(chunk) / 4 <= 200 + longest_line / 4 + 1 for chunk in job.chunks)


def test_data_relay_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    out = tmp_path / "wl"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    before = _files(out)
    assert_usage_error(
        run("data", "relay", "--seed", "0", "--out", out, *SMALL), "not an empty folder"
    )
    assert _files(out) == before


# -- eval relay -----------------------------------------------------------------


def test_eval_relay_with_the_parser_keeps_every_needle_and_no_filler() -> None:
    score = ok_json("eval", "relay", *SMALL)
    assert score["needles_total"] == 30
    assert score["needles_kept"] == score["needles_total"]
    assert score["needles_exact"] == score["needles_total"]
    assert score["filler_kept"] == 0
    assert score["counts_exact"] == score["rows_total"] == 40
    assert score["steps"] == 8
    assert set(score) == {
        "needles_total",
        "needles_kept",
        "needles_exact",
        "filler_kept",
        "carry_tokens_max",
        "holders_correct",
        "counts_exact",
        "rows_total",
        "rejected_updates",
        "steps",
        "unrecognised_chunks",
        "workload",
        "chunks",
        "step",
        "carry_cap_tokens",
        "drop_policy",
        "warnings",
    }
    assert score["unrecognised_chunks"] == 0 and score["warnings"] == []
    # what ran, not what was asked: --step auto resolved to the parser
    assert (score["step"], score["chunks"], score["drop_policy"]) == ("parser", 8, "lowest-score")


def test_eval_relay_rejects_the_faulty_parsers_breaks(workload_dir: Path) -> None:
    score = ok_json("eval", "relay", "--workload", workload_dir, "--step", "faulty-parser")
    assert score["step"] == "faulty-parser" and score["workload"] == str(workload_dir)
    assert score["rejected_updates"] > 0
    assert score["counts_exact"] == score["rows_total"] == 40
    assert score["holders_correct"] == score["rows_total"]


@pytest.fixture
def rephrased_dir(tmp_path: Path) -> Path:
    """The workload of ``workload_dir`` with its handovers worded as another log would."""
    return write_workload(rephrased(generate(3, chunks=8, needles=30)), tmp_path / "other")


def test_eval_relay_warns_when_the_parser_recognises_no_chunk(rephrased_dir: Path) -> None:
    """The default step on a log of other phrasings kept every needle, parsed no
    handover and said nothing; now one warning line names the count and the step to
    use instead (in the JSON, not on stderr, with --json)."""
    text = run("eval", "relay", "--workload", rephrased_dir)
    assert text.exit_code == 0, text.stderr
    (line,) = text.stderr.splitlines()
    assert line.startswith("ctxwise: warning: the parser recognised nothing in 8 of 8 chunks")
    assert "--step none" in line and 'kind = "anthropic"' in line
    assert "chunks unrecognised" in text.stdout
    result = run("eval", "relay", "--workload", rephrased_dir, "--json")
    assert result.exit_code == 0 and result.stderr == ""
    score = json.loads(result.stdout)
    assert score["unrecognised_chunks"] == score["steps"] == 8
    assert score["warnings"] == [line.removeprefix("ctxwise: warning: ")]
    assert score["needles_kept"] == score["needles_total"]  # the line store is fine
    # the step that only keeps lines recognises nothing by design, and says nothing
    quiet = run("eval", "relay", "--workload", rephrased_dir, "--step", "none")
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert ok_json("eval", "relay", "--workload", rephrased_dir, "--step", "none")["warnings"] == []


def test_eval_relay_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run("eval", "relay", *SMALL, "--step", "none")
    assert result.exit_code == 0, result.stderr
    assert "needles kept" in result.stdout
    assert list(tmp_path.iterdir()) == []


def test_eval_relay_needs_answers(workload_dir: Path) -> None:
    (workload_dir / "answers.json").unlink()
    assert_usage_error(run("eval", "relay", "--workload", workload_dir), "answers.json")


def test_eval_relay_refuses_workload_with_generator_options(workload_dir: Path) -> None:
    assert_usage_error(
        run("eval", "relay", "--workload", workload_dir, "--seed", "0"), "--workload", "--seed"
    )
    assert_usage_error(
        run("eval", "relay", "--workload", workload_dir, "--chunks", "8", "--variant", "needles"),
        "--chunks",
        "--variant",
    )


# -- relay run / resume ------------------------------------------------------------


def test_relay_run_then_resume_gives_the_same_output(tmp_path: Path, workload_dir: Path) -> None:
    spec = _spec(tmp_path, workload_dir)
    first = ok_json("relay", "run", spec)
    assert first["run_id"] == "job"
    assert first["steps"] == first["total_steps"] == 8
    assert first["done"] is True
    assert first["rejected_updates"] > 0
    assert first["score"]["counts_exact"] == first["score"]["rows_total"]
    assert first["lines_kept"] == first["score"]["needles_kept"] == 30
    assert (tmp_path / "runs" / "job" / "spec.json").is_file()
    again = ok_json("relay", "resume", "job", "--runs", tmp_path / "runs")
    assert again == first
    text_run = run("relay", "resume", "job", "--runs", tmp_path / "runs")
    assert text_run.exit_code == 0, text_run.stderr
    assert "rejected updates" in text_run.stdout


def test_relay_run_and_resume_warn_when_the_parser_recognises_nothing(
    tmp_path: Path, rephrased_dir: Path
) -> None:
    spec = _spec(tmp_path, rephrased_dir)
    report = ok_json("relay", "run", spec)
    assert report["unrecognised_chunks"] == 8 and report["score"]["unrecognised_chunks"] == 8
    (warning,) = report["warnings"]
    assert warning.startswith("the parser recognised nothing in 8 of 8 chunks")
    assert '[step] kind = "none"' in warning
    text = run("relay", "resume", "job", "--runs", tmp_path / "runs")
    assert text.exit_code == 0, text.stderr
    assert text.stderr.splitlines() == [f"ctxwise: warning: {warning}"]
    assert "chunks unrecognised" in text.stdout


def test_relay_resume_continues_a_stopped_run(tmp_path: Path, workload_dir: Path) -> None:
    spec = _spec(tmp_path, workload_dir)
    whole = ok_json("relay", "run", spec, "--run-id", "whole")
    job = load_spec(spec).model_copy(update={"run_id": "part"})
    relay = build_relay(job)
    relay.runs.attach("part", "spec.json", job.model_dump_json().encode())
    assert relay.run("part", stop_after=3).steps == 3
    resumed = ok_json("relay", "resume", "part", "--runs", tmp_path / "runs")
    assert resumed["steps"] == 8
    for key in ("lines_kept", "dropped", "rejected_updates", "carry_tokens_max", "score"):
        assert resumed[key] == whole[key], key
    assert resumed["table"] == whole["table"]


def test_relay_run_with_runs_and_run_id_options(tmp_path: Path, workload_dir: Path) -> None:
    spec = _spec(tmp_path, workload_dir)
    report = ok_json("relay", "run", spec, "--run-id", "other", "--runs", tmp_path / "elsewhere")
    assert report["run_id"] == "other"
    assert (tmp_path / "elsewhere" / "other" / "manifest.json").is_file()
    assert not (tmp_path / "runs").exists()


def test_relay_run_twice_is_refused(tmp_path: Path, workload_dir: Path) -> None:
    spec = _spec(tmp_path, workload_dir)
    ok_json("relay", "run", spec)
    folder = tmp_path / "runs" / "job"
    before = _files(folder)
    assert_usage_error(run("relay", "run", spec), "'job' exists", "resume")
    assert _files(folder) == before


def test_relay_run_refuses_an_unknown_spec_key(tmp_path: Path, workload_dir: Path) -> None:
    spec = _spec(tmp_path, workload_dir, extra="carry_tokenz = 100")
    assert_usage_error(run("relay", "run", spec), "carry_tokenz")
    assert not (tmp_path / "runs").exists()


def test_relay_run_refuses_a_bool_for_a_number(tmp_path: Path, workload_dir: Path) -> None:
    spec = _spec(tmp_path, workload_dir, extra="carry_tokens = true")  # was taken as 1
    assert_usage_error(run("relay", "run", spec), "carry_tokens", "not true")


def test_relay_run_refuses_a_missing_chunk(tmp_path: Path, workload_dir: Path) -> None:
    (workload_dir / "chunks" / "0003.txt").unlink()
    assert_usage_error(run("relay", "run", _spec(tmp_path, workload_dir)), "0003.txt")
    assert not (tmp_path / "runs").exists()


def test_relay_run_refuses_a_bad_workload_json(tmp_path: Path, workload_dir: Path) -> None:
    meta = workload_dir / "workload.json"
    data = json.loads(meta.read_text(encoding="utf-8"))
    data["chunks"] = "many"
    meta.write_text(json.dumps(data), encoding="utf-8")
    assert_usage_error(run("relay", "run", _spec(tmp_path, workload_dir)), "workload.json")
    meta.write_text("{not json", encoding="utf-8")
    assert_usage_error(run("relay", "run", _spec(tmp_path, workload_dir)), "workload.json")
    assert_usage_error(run("eval", "relay", "--workload", workload_dir), "workload.json")


def test_relay_resume_of_an_unknown_run(tmp_path: Path) -> None:
    assert_usage_error(run("relay", "resume", "nope", "--runs", tmp_path), "no run 'nope'")
    assert_usage_error(run("relay", "resume", "../x", "--runs", tmp_path), "run id")


def test_relay_resume_of_a_run_whose_state_was_edited(tmp_path: Path, workload_dir: Path) -> None:
    ok_json("relay", "run", _spec(tmp_path, workload_dir))
    folder = tmp_path / "runs" / "job"
    (state,) = folder.glob("state-*.json")
    data = json.loads(state.read_bytes())
    data["table"][0]["handovers"] += 1
    state.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
    assert_usage_error(
        run("relay", "resume", "job", "--runs", tmp_path / "runs"),
        "relay state",
        "does not match the hash",
    )


def test_relay_resume_of_a_damaged_manifest(tmp_path: Path, workload_dir: Path) -> None:
    ok_json("relay", "run", _spec(tmp_path, workload_dir))
    manifest = tmp_path / "runs" / "job" / "manifest.json"
    data = json.loads(manifest.read_bytes())
    data["step"] = "seven"
    manifest.write_text(json.dumps(data), encoding="utf-8")
    assert_usage_error(
        run("relay", "resume", "job", "--runs", tmp_path / "runs"), "relay state", "manifest"
    )


def test_relay_resume_of_a_run_without_its_spec(tmp_path: Path, workload_dir: Path) -> None:
    ok_json("relay", "run", _spec(tmp_path, workload_dir))
    (tmp_path / "runs" / "job" / "spec.json").unlink()
    assert_usage_error(
        run("relay", "resume", "job", "--runs", tmp_path / "runs"), "has no spec.json"
    )


def _foreign_workload(tmp_path: Path) -> Path:
    """A job of another shape: keep the ERROR lines; a table of tickets with no counter."""
    from ctxwise.relay import Answers, Examples, NeedleLine, TableSpec, Workload, write_workload
    from ctxwise.relay.workload import ColumnSpec

    chunks = (
        "INFO boot ok\nERROR disk /dev/sda1 full\nINFO user login\n",
        "INFO cron ran\nINFO backup done\nERROR fan 2 stopped\n",
    )
    job = Workload(
        instruction="Keep every error line.",
        chunks=chunks,
        examples=Examples(keep=("ERROR power supply 1 lost",), skip=("INFO service started",)),
        table=TableSpec(
            key="ticket",
            columns={"ticket": ColumnSpec(), "status": ColumnSpec()},
            rows=({"ticket": "T-1", "status": "open"},),
        ),
        answers=Answers(
            needles=(
                NeedleLine(chunk=0, line=1, text="ERROR disk /dev/sda1 full"),
                NeedleLine(chunk=1, line=2, text="ERROR fan 2 stopped"),
            ),
            table=({"ticket": "T-1", "status": "open"},),
        ),
    )
    return write_workload(job, tmp_path / "foreign")


def test_eval_relay_on_a_workload_of_another_shape_scores_the_line_store(tmp_path: Path) -> None:
    folder = _foreign_workload(tmp_path)
    score = ok_json("eval", "relay", "--workload", folder)
    assert score["needles_kept"] == score["needles_exact"] == 2
    assert score["filler_kept"] == 0
    assert score["rejected_updates"] == 0 and score["steps"] == 2
    assert_usage_error(
        run("eval", "relay", "--workload", folder, "--step", "parser"), "parser", "counter"
    )
