"""``ctxwise clear`` as a user runs it: a real subprocess, real files, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxwise.editing import DEFAULT_PLACEHOLDER
from ctxwise.formats import anthropic, openai
from ctxwise.formats.claude_code import read_claude_code
from tests.conftest import TAU, claude_code_files, long_sessions

REPORT_KEYS = {
    "source",
    "out",
    "input_format",
    "output_format",
    "shape",
    "transcripts",
    "edited",
    "applied",
    "tokens_before",
    "tokens_after",
    "tokens_freed",
    "cleared_tool_uses",
}


def ctxwise(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "120", "NO_COLOR": "1"},
    )


def clear_json(*args: str | Path) -> dict[str, Any]:
    out = ctxwise("clear", *args, "--json")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    report: dict[str, Any] = json.loads(out.stdout)
    assert set(report) >= REPORT_KEYS
    return report


def anthropic_request(n: int = 5) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the failing test"}]
    for i in range(n):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"step {i}"},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i}",
                        "name": "Bash" if i % 2 else "Read",
                        "input": {"command": f"cat f{i}.py"},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{i}",
                        "content": f"output line {i}\n" * 200,
                    }
                ],
            }
        )
    messages.append({"role": "assistant", "content": "fixed"})
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 2048,
        "system": "You are a careful engineer.",
        "messages": messages,
    }


def openai_messages(n: int = 4) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "support agent"},
        {"role": "user", "content": "where is my order?"},
    ]
    for i in range(n):
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "get_order", "arguments": '{"order_id": "4417"}'},
                    }
                ],
            }
        )
        out.append({"role": "tool", "tool_call_id": f"call_{i}", "content": "{...} " * 300})
    out.append({"role": "assistant", "content": "It ships tomorrow."})
    return out


def write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc))
    return path


# --------------------------------------------------------------------------- success


def test_anthropic_request_keeps_its_shape_and_params(tmp_path: Path) -> None:
    src = write(tmp_path / "req.json", anthropic_request())
    dst = tmp_path / "out.json"
    report = clear_json(src, "--out", dst, "--keep-last", "2", "--clear-at-least", "100")
    assert report["input_format"] == report["output_format"] == "anthropic"
    assert report["shape"] == "request" and report["transcripts"] == 1
    assert report["cleared_tool_uses"] == 3 and report["applied"] == 1
    assert report["tokens_freed"] == report["tokens_before"] - report["tokens_after"] > 0
    [edit] = report["edited"]
    assert edit["index"] == 0 and edit["applied"] and edit["counter"] == "char"
    assert [c["tool_use_id"] for c in edit["cleared"]] == ["toolu_0", "toolu_1", "toolu_2"]
    assert {"kind", "message_index", "tool_use_id", "tool_name", "tokens"} == set(
        edit["cleared"][0]
    )
    body = json.loads(dst.read_text())
    assert body["model"] == "claude-sonnet-4-5" and body["max_tokens"] == 2048
    assert body["system"] == "You are a careful engineer."
    contents = [
        b["content"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert contents[:3] == [DEFAULT_PLACEHOLDER] * 3
    assert contents[3] == "output line 3\n" * 200
    assert anthropic.decode_request(body).problems("anthropic") == []


def test_exclude_clear_inputs_and_human_output(tmp_path: Path) -> None:
    src = write(tmp_path / "req.json", anthropic_request())
    dst = tmp_path / "out.json"
    report = clear_json(
        src,
        "--out",
        dst,
        "--keep-last",
        "1",
        "--exclude",
        "Bash",
        "--exclude",
        "Grep",
        "--clear-inputs",
    )
    cleared = report["edited"][0]["cleared"]
    assert {c["tool_name"] for c in cleared} == {"Read"}
    assert {c["kind"] for c in cleared} == {"tool_result", "tool_input"}
    body = json.loads(dst.read_text())
    uses = [
        b
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert [u["input"] == {} for u in uses] == [True, False, True, False, False]
    human = ctxwise("clear", src, "--out", dst, "--keep-last", "1")
    assert human.returncode == 0, human.stderr
    assert "cleared 4 tool result(s)" in human.stdout and f"wrote {dst}" in human.stdout


def test_bare_messages_lists_keep_their_shape(tmp_path: Path) -> None:
    a = write(tmp_path / "a.json", anthropic_request()["messages"])
    o = write(tmp_path / "o.json", openai_messages())
    for src, fmt in ((a, "anthropic"), (o, "openai")):
        dst = tmp_path / f"{src.stem}-out.json"
        report = clear_json(src, "--out", dst)
        assert report["shape"] == "messages" and report["output_format"] == fmt
        body = json.loads(dst.read_text())
        assert isinstance(body, list)
    back = openai.decode_messages(json.loads((tmp_path / "o-out.json").read_text()))
    assert back.problems("openai") == []
    assert [m.tool_results[0].content for m in back if m.tool_results] == [DEFAULT_PLACEHOLDER] + [
        "{...} " * 300
    ] * 3


def test_trigger_and_clear_at_least_leave_the_file_as_it_was(tmp_path: Path) -> None:
    doc = anthropic_request()
    src = write(tmp_path / "req.json", doc)
    for args in (["--trigger", "10000000"], ["--clear-at-least", "10000000"]):
        dst = tmp_path / "out.json"
        report = clear_json(src, "--out", dst, *args)
        assert report["applied"] == 0 and report["tokens_freed"] == 0
        assert report["edited"][0]["reason"] in ("below_trigger", "below_clear_at_least")
        assert json.loads(dst.read_text()) == doc


def test_trajectory_files_keep_their_shape_and_index_edits_one(tmp_path: Path) -> None:
    trajs = [{"task_id": i, "reward": 1.0, "traj": openai_messages(2 + i)} for i in range(3)]
    src = write(tmp_path / "trajs.json", trajs)
    dst = tmp_path / "out.json"
    report = clear_json(src, "--out", dst, "--keep-last", "1", "--index", "1")
    assert report["shape"] == "trajectories" and report["transcripts"] == 3
    assert [e["index"] for e in report["edited"]] == [1]
    body = json.loads(dst.read_text())
    assert body[0] == trajs[0] and body[2] == trajs[2]
    assert {k: v for k, v in body[1].items() if k != "traj"} == {"task_id": 1, "reward": 1.0}
    assert sum(m.get("content") == DEFAULT_PLACEHOLDER for m in body[1]["traj"]) == 2
    every = clear_json(src, "--out", dst, "--keep-last", "1")
    assert [e["index"] for e in every["edited"]] == [0, 1, 2]
    assert every["cleared_tool_uses"] == 1 + 2 + 3


def test_repair_flag(tmp_path: Path) -> None:
    msgs = openai_messages(3)
    msgs[4]["tool_calls"][0]["id"] = "call_0"  # reused id, answered in place
    msgs[5]["tool_call_id"] = "call_0"
    src = write(tmp_path / "dup.json", msgs)
    dst = tmp_path / "out.json"
    refused = ctxwise("clear", src, "--out", dst)
    assert refused.returncode == 2 and "duplicate_id" in refused.stderr
    assert "--repair" in refused.stderr and not dst.exists()
    report = clear_json(src, "--out", dst, "--repair", "--keep-last", "0")
    assert [p["kind"] for p in report["edited"][0]["repaired"]] == ["duplicate_id"]
    body = json.loads(dst.read_text())
    assert body[4]["tool_calls"][0]["id"] == body[5]["tool_call_id"] == "call_0_2"
    assert openai.decode_messages(body).problems("openai") == []


# --------------------------------------------------------------------------- real data


@pytest.mark.data
def test_claude_code_session_stays_jsonl(tmp_path: Path, data_dir: Path) -> None:
    path = long_sessions()[0]
    original = path.read_text(encoding="utf-8")
    dst = tmp_path / "session.jsonl"
    report = clear_json(path, "--out", dst, "--keep-last", "3", "--clear-at-least", "1000")
    assert report["input_format"] == report["output_format"] == "claude-code"
    assert report["shape"] == "session" and "note" not in report
    assert report["tokens_freed"] >= 0.5 * report["tokens_before"]
    written = dst.read_text(encoding="utf-8")
    back = read_claude_code(written)
    assert back.problems() == [] and len(back.compactions) == len(
        read_claude_code(original).compactions
    )
    cleared = {c["tool_use_id"] for c in report["edited"][0]["cleared"]}
    changed = [
        (a, b) for a, b in zip(original.split("\n"), written.split("\n"), strict=True) if a != b
    ]
    assert len(changed) == report["cleared_tool_uses"] == len(cleared)
    for _, line in changed:
        event = json.loads(line)
        [block] = event["message"]["content"]
        assert block["tool_use_id"] in cleared and block["content"] == DEFAULT_PLACEHOLDER
        assert event.get("toolUseResult", DEFAULT_PLACEHOLDER) == DEFAULT_PLACEHOLDER
    live_dst = tmp_path / "live.jsonl"
    live = clear_json(path, "--out", live_dst, "--live")
    assert live["tokens_before"] < report["tokens_before"]
    assert live["output_format"] == "claude-code" and "whole" in live["note"]
    live_back = read_claude_code(live_dst.read_text(encoding="utf-8"))
    assert len(live_back.messages) == len(back.messages) and live_back.problems() == []
    help_text = ctxwise("clear", "--help").stdout
    assert "JSONL" in help_text and "Anthropic Messages request" not in help_text


@pytest.mark.data
def test_tau_bench_file_with_repair(tmp_path: Path, data_dir: Path) -> None:
    raw = json.loads(TAU.read_text())
    dst = tmp_path / "tau.json"
    report = clear_json(TAU, "--out", dst, "--repair")
    assert report["shape"] == "trajectories" and len(report["edited"]) == 200
    assert sum(bool(e["repaired"]) for e in report["edited"]) == 49
    body = json.loads(dst.read_text())
    assert len(body) == 200
    for before, after in zip(raw, body, strict=True):
        assert {k: v for k, v in before.items() if k != "traj"} == {
            k: v for k, v in after.items() if k != "traj"
        }
        assert openai.decode_messages(after["traj"]).problems("openai") == []
    # a trajectory without reused ids and below the trigger: the file comes back equal
    ids = [[c["id"] for m in x["traj"] for c in m.get("tool_calls") or []] for x in raw]
    clean = next(i for i, x in enumerate(ids) if x and len(x) == len(set(x)))
    same = tmp_path / "same.json"
    report = clear_json(TAU, "--out", same, "--index", str(clean), "--trigger", "100000000")
    assert report["edited"][0]["reason"] == "below_trigger"
    assert json.loads(same.read_text()) == raw


@pytest.mark.data
def test_small_claude_code_files(tmp_path: Path, data_dir: Path) -> None:
    for path in claude_code_files():
        if path.stat().st_size > 300_000:
            continue
        dst = tmp_path / f"{path.stem}.jsonl"
        report = clear_json(path, "--out", dst, "--keep-last", "1", "--clear-inputs")
        assert report["output_format"] == "claude-code", path
        back = read_claude_code(dst.read_text(encoding="utf-8"))
        assert back.problems() == [], path
        assert report["tokens_after"] <= report["tokens_before"]
        if not report["applied"]:
            assert dst.read_bytes() == path.read_bytes(), path


# --------------------------------------------------------------------------- bad input


def test_bad_input_is_one_line_exit_2_and_out_untouched(tmp_path: Path) -> None:
    good = write(tmp_path / "req.json", anthropic_request())
    orphan_doc = anthropic_request(2)
    orphan_doc["messages"].insert(
        1, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "ghost"}]}
    )
    orphan = write(tmp_path / "orphan.json", orphan_doc)
    binary = tmp_path / "blob.json"
    binary.write_bytes(bytes(range(256)))
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text('{"type": "user", "message": {"role": "user", "content": "hi"}}\n')
    out = tmp_path / "out.json"
    out.write_text("precious")
    cases: list[tuple[str, list[str | Path]]] = [
        ("negative keep-last", [good, "--keep-last", "-1"]),
        ("negative clear-at-least", [good, "--clear-at-least", "-5"]),
        ("negative trigger", [good, "--trigger", "-1"]),
        ("orphan result", [orphan]),
        ("unknown format", [good, "--format", "gemini"]),
        ("unknown counter", [good, "--counter", "bpe"]),
        ("missing file", [tmp_path / "nope.json"]),
        ("binary transcript", [binary]),
        ("index out of range", [good, "--index", "3"]),
        ("live on JSON", [good, "--live"]),
        ("not a number", [good, "--keep-last", "many"]),
        ("unknown option", [good, "--keep", "3"]),
    ]
    before = sorted(p.name for p in tmp_path.iterdir())
    for label, args in cases:
        res = ctxwise("clear", *args, "--out", out)
        assert res.returncode == 2, (label, res.returncode, res.stderr)
        assert res.stdout == "", label
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ctxwise: error: "), (label, res.stderr)
        assert out.read_text() == "precious", label
    # out itself unusable: a directory, a missing folder, the Claude Code session itself
    for label, dst in (
        ("out is a directory", tmp_path),
        ("out folder missing", tmp_path / "no" / "out.json"),
        ("out is the session", jsonl),
    ):
        src = jsonl if label == "out is the session" else good
        res = ctxwise("clear", src, "--out", dst)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, label
    # a session that needs --repair cannot be written back as JSONL
    broken = tmp_path / "broken.jsonl"
    orphan_event = {
        "type": "user",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "ghost", "content": "?"}],
        },
    }
    broken.write_text(jsonl.read_text() + json.dumps(orphan_event) + "\n")
    res = ctxwise("clear", broken, "--out", out, "--repair")
    assert res.returncode == 2 and "cannot be written back" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and out.read_text() == "precious"
    broken.unlink()
    res = ctxwise("clear", good)  # --out is required
    assert res.returncode == 2 and "--out" in res.stderr
    # no temporary file left behind, nothing new written
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert jsonl.read_text().startswith('{"type": "user"')
    assert "orphan_result" in ctxwise("clear", orphan, "--out", out).stderr
