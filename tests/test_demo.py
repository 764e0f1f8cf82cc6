"""``ctxwise demo`` end to end: the CLI entry point on a real SQLite file."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxwise import Engine
from ctxwise._demo import BUDGET, HEAVY, demo_config
from ctxwise._northwind import RULE, SCRIPT, SESSION_ID
from ctxwise.cli import app, main
from tests._cli import runner


def run_cli(*args: str) -> int:
    try:
        main(list(args))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stdout", out)
        code = run_cli("demo", "--store", str(db), "--json")
    assert code == 0
    return db, json.loads(out.getvalue())


def test_saves_half_the_tokens_of_the_kitchen_sink(report: tuple[Path, dict[str, Any]]) -> None:
    _, data = report
    ours = sum(t["tokens"]["total"] for t in data["turns"])
    sink = sum(t["tokens"]["total"] for t in data["kitchen_sink"])
    assert (
        ours == data["totals"]["ctxwise_tokens"] and sink == data["totals"]["kitchen_sink_tokens"]
    )
    assert 1 - ours / sink >= 0.5
    assert all(t["tokens"]["total"] <= BUDGET for t in data["turns"])
    # the kitchen sink really is everything: no edits, every source, every turn
    for t in data["kitchen_sink"]:
        assert t["cleared"] is None and t["compacted"] is None
        assert {"kb", "code", "tool_docs", "style"} <= set(t["chosen"])


def test_every_needed_string_is_in_its_turns_request(report: tuple[Path, dict[str, Any]]) -> None:
    _, data = report
    assert data["checks"]["ok"] is True
    needs = [n for t in data["turns"] for n in t["needs"]]
    assert needs and all(n["present"] for n in needs)
    assert data["checks"]["needs_present"] == data["checks"]["needs_total"] == len(needs)
    # the standing rule is pinned in the system part on every turn after it was said
    said = next(t["turn"] for t in data["turns"] if t["rules_added"])
    for t in data["turns"][said - 1 :]:
        rule = [n for n in t["needs"] if n["text"].startswith("Please never call Dana")]
        assert all("system" in n["found_in"] for n in rule)


def test_gate_blocks_the_refund_until_the_address_check(
    report: tuple[Path, dict[str, Any]],
) -> None:
    _, data = report
    calls = [(t["turn"], g) for t in data["turns"] for g in t["gate"]]
    refunds = [(turn, g) for turn, g in calls if g["tool"] == "issue_refund"]
    verify = next(turn for turn, g in calls if g["tool"] == "verify_address" and g["allowed"])
    (blocked_at, blocked), (allowed_at, allowed) = refunds
    assert blocked["input"] == allowed["input"] == {"order_id": "4417"}
    assert blocked["allowed"] is False and RULE in blocked["reason"]
    assert blocked_at < verify < allowed_at and allowed["allowed"] is True


def test_clearing_compaction_and_recall(report: tuple[Path, dict[str, Any]]) -> None:
    _, data = report
    assert data["totals"]["clears"] >= 1 and data["totals"]["compactions"] >= 1
    compacted_at = next(t["turn"] for t in data["turns"] if t["compacted"])
    recall = next(t for t in data["turns"] if t["label"] == "recall")
    assert recall["turn"] > compacted_at and recall["chosen"] == ["memory"]
    # the recalled detail reached the model only through the recalled section
    (okafor,) = [n for n in recall["needs"] if n["text"] == "Okafor"]
    assert okafor["found_in"] == ["context"]
    assert any(s["source"] == "memory" and s["status"] != "dropped" for s in recall["sections"])


def test_chitchat_skips_the_heavy_sources(report: tuple[Path, dict[str, Any]]) -> None:
    _, data = report
    chitchat = [t for t in data["turns"] if t["label"] == "chitchat"]
    code = [t for t in data["turns"] if t["label"] == "code"]
    assert chitchat and code
    for t in chitchat:
        assert set(HEAVY) <= set(t["skipped"]) and not set(HEAVY) & set(t["chosen"])
    assert all({"code", "tool_docs"} <= set(t["chosen"]) for t in code)


def test_the_db_is_kept_with_every_trace(report: tuple[Path, dict[str, Any]]) -> None:
    db, data = report
    with Engine(demo_config(f"sqlite:///{db}")) as engine:
        traces = engine.traces(SESSION_ID)
        assert [t.turn for t in traces] == [t["turn"] for t in data["turns"]]
        assert engine.facts(SESSION_ID).get("order_id").value == "4417"  # type: ignore[union-attr]
    # a second run on the same file refuses instead of appending to the session
    # (--db is the old name of --store)
    assert run_cli("demo", "--db", str(db)) == 2


def test_table_and_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("demo", "--store", str(tmp_path / "a.db")) == 0
    out = capsys.readouterr().out
    assert "✓" in out and "✗" not in out and "fewer" in out
    assert "Blocked: " + RULE in " ".join(out.split())
    # a budget too small for the code question's sources: a need is missing, exit 1
    assert run_cli("demo", "--store", str(tmp_path / "b.db"), "--budget", "500") == 1
    out = capsys.readouterr().out
    assert "✗" in out and "SOME MISSING" in out


def _cells(table: str, column: int) -> list[str]:
    """The text of ``column`` (0-based) of each row of a rendered rich table with
    lines between its rows, its wrapped lines joined."""
    rows: list[list[str]] = []
    current: list[str] = []
    for line in table.splitlines():
        if line.startswith("│"):
            current.append(line.split("│")[column + 1].strip())
        elif line.startswith(("├", "└")) and current:
            rows.append(current)
            current = []
    return [" ".join(r) for r in rows]


def _squeezed(text: str) -> str:
    return "".join(text.split())  # a long word may be folded across lines


def test_at_80_columns_the_demo_shows_what_the_user_said_and_what_to_try_next(
    tmp_path: Path,
) -> None:
    shown = runner.invoke(app, ["demo"], env={"COLUMNS": "80"})
    assert shown.exit_code == 0, shown.stderr
    out = shown.stdout
    assert all(len(line) <= 80 for line in out.splitlines())
    said = _cells(out, 1)
    assert len(said) == len(SCRIPT)
    for step, cell in zip(SCRIPT, said, strict=True):
        if step.user is None:
            assert "no user message" in cell
        else:
            assert _squeezed(f"user: {step.user}") in _squeezed(cell)
    # the tokens of every request, whole: the column was cut to '618/2…'
    sent = _cells(out, 2)
    assert "…" not in out and all(" of 2,400 tokens" in cell for cell in sent)
    # it ends with the commands to try next, one a line
    lines = out.rstrip("\n").splitlines()
    assert lines[-3:] == [
        "  ctxwise demo --store demo.db",
        f"  ctxwise trace {SESSION_ID} --store demo.db",
        f"  ctxwise explain {SESSION_ID} --store demo.db",
    ]
    assert lines[-4].startswith("next: ")
    # with --store, the next command reads the sessions it kept
    db = tmp_path / "kept.db"
    kept = runner.invoke(app, ["demo", "--store", str(db)], env={"COLUMNS": "80"})
    assert kept.exit_code == 0, kept.stderr
    assert kept.stdout.rstrip("\n").splitlines()[-2:] == [
        f"  ctxwise trace {SESSION_ID} --store {db}",
        f"  ctxwise explain {SESSION_ID} --store {db}",
    ]
    follow = runner.invoke(app, ["trace", SESSION_ID, "--store", str(db), "--json"])
    assert follow.exit_code == 0 and len(json.loads(follow.stdout)) == len(SCRIPT)
    explained = runner.invoke(app, ["explain", SESSION_ID, "--store", str(db), "--json"])
    assert explained.exit_code == 0 and json.loads(explained.stdout)["turn"] == len(SCRIPT)


def test_the_json_report_holds_what_the_user_said(report: tuple[Path, dict[str, Any]]) -> None:
    _, data = report
    assert [t["user"] for t in data["turns"]] == [s.user for s in SCRIPT]


def test_a_same_budget_newest_first_baseline_is_scored_on_the_same_needs(
    report: tuple[Path, dict[str, Any]],
) -> None:
    _, data = report
    newest = data["newest_first"]
    assert newest["budget"] == BUDGET
    assert newest["needs_total"] == data["checks"]["needs_total"]
    for turn in newest["turns"]:  # the same budget as every ctxwise request
        assert turn["tokens"] <= BUDGET
    # it keeps only what fits newest first: what was said early and not pinned (a
    # standing rule, a recalled name) is gone once the history outgrows the budget,
    # where ctxwise's request held it
    lost = {(t["turn"], n["text"]) for t in newest["turns"] for n in t["needs"] if not n["present"]}
    held = {(t["turn"], n["text"]) for t in data["turns"] for n in t["needs"] if n["present"]}
    assert lost and lost <= held
    assert newest["needs_present"] == newest["needs_total"] - len(lost)


def test_newest_first_keeps_a_call_with_its_results() -> None:
    from ctxwise._demo import newest_first

    call = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x"}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}
    request = {
        "system": [{"type": "text", "text": "pinned rule"}],
        "messages": [
            {"role": "user", "content": "a" * 40},
            call,
            result,
            {"role": "user", "content": "q"},
        ],
    }
    cut, tokens, dropped = newest_first(request, 20, len, "prompt")
    assert cut["system"] == [{"type": "text", "text": "prompt"}]
    # the call and its result are one unit: both kept, or both dropped with the oldest
    assert cut["messages"] in ([call, result, request["messages"][-1]], [request["messages"][-1]])
    assert tokens <= 20 and dropped == 4 - len(cut["messages"])
    assert cut["messages"] == [request["messages"][-1]]  # the pair does not fit whole
