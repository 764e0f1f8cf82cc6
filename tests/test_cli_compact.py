"""``ctxwise compact`` as a user runs it: real files, exit codes, nothing half-written."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxwise import CharCounter, read_transcript, read_transcripts
from ctxwise.compaction import DEFAULT_SUMMARY_TOKENS, PINNED_HEADER, SUMMARY_HEADER
from ctxwise.formats import anthropic, openai
from tests._http import mock_client, response
from tests.conftest import TAU, claude_code_files, long_sessions


def ctxwise(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "120", "NO_COLOR": "1"},
    )


RULE = "Do not refund order 4417 until the address check is done."


def anthropic_request() -> dict[str, Any]:
    def tool(i: int, text: str) -> list[dict[str, Any]]:
        text = text[:-1] + ', "history": "' + "scan ok; " * 60 + '"}'  # a sizeable result
        return [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "lookup", "input": {"q": i}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": text}],
            },
        ]

    return {
        "model": "claude-sonnet-5-5",
        "max_tokens": 512,
        "system": "You are the Northwind support agent.",
        "messages": [
            {"role": "user", "content": "My order W2378156 arrived damaged."},
            *tool(1, '{"order_id": "W2378156", "status": "delivered"}'),
            {"role": "assistant", "content": "Sorry: order W2378156 was delivered May 2."},
            {"role": "user", "content": RULE},
            *tool(2, '{"order_id": "4417", "status": "pending"}'),
            {"role": "assistant", "content": "Order 4417 is pending."},
            {"role": "user", "content": "Is the address check done?"},
        ],
    }


def assert_one_error_line(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctxwise: error: "), out.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_cli_default_summary_budget_is_the_librarys() -> None:
    from ctxwise.cli.compact import compact_cmd

    default = inspect.signature(compact_cmd).parameters["summary_tokens"].default
    assert default == DEFAULT_SUMMARY_TOKENS


def test_anthropic_request_in_request_out(tmp_path: Path) -> None:
    src = tmp_path / "req.json"
    src.write_text(json.dumps(anthropic_request()))
    dst = tmp_path / "out.json"
    out = ctxwise("compact", src, "--keep-tail-turns", "1", "--out", dst, "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["written_as"] == "anthropic:request" and report["format"] == "anthropic"
    assert report["compacted"] and report["cut_index"] == 9 and report["summarized_messages"] == 8
    assert report["tokens_after"] < report["tokens_before"]
    assert report["rules"] == [{"text": RULE, "source": "message 5"}]
    body = json.loads(dst.read_text())
    assert body["model"] == "claude-sonnet-5-5" and body["max_tokens"] == 512
    assert body["system"][0]["text"] == "You are the Northwind support agent."
    assert body["system"][1]["text"].startswith(PINNED_HEADER) and RULE in body["system"][1]["text"]
    assert body["messages"][0]["content"].startswith(SUMMARY_HEADER)
    assert body["messages"][-1] == {"role": "user", "content": "Is the address check done?"}
    back = anthropic.decode_request(body)
    assert back.problems("anthropic") == []
    assert anthropic.encode_request(back) == body


@pytest.mark.parametrize("command", ["compact", "clear"])
@pytest.mark.parametrize("as_json", [False, True])
def test_out_naming_standard_output_sends_the_report_to_stderr(
    tmp_path: Path, command: str, as_json: bool
) -> None:
    # /dev/stdout is standard output as much as '-' is: before, the report was
    # printed after the transcript on the same stream, so stdout was not JSON
    src = tmp_path / "req.json"
    src.write_text(json.dumps(anthropic_request()))
    extra = ["--keep-tail-turns", "1"] if command == "compact" else ["--keep-last", "0"]
    flags = ["--json"] if as_json else []
    out = ctxwise(command, src, *extra, "--out", "/dev/stdout", *flags)
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)  # only the transcript
    assert anthropic.decode_request(body).problems("anthropic") == []
    assert out.stderr.strip()
    if as_json:
        assert json.loads(out.stderr)["tokens_after"] <= json.loads(out.stderr)["tokens_before"]


def test_human_output(tmp_path: Path) -> None:
    src = tmp_path / "req.json"
    src.write_text(json.dumps(anthropic_request()))
    dst = tmp_path / "out.json"
    out = ctxwise("compact", src, "--keep-tail-turns", "1", "--out", dst)
    assert out.returncode == 0, out.stderr
    assert "summarized 8 message(s) before message 9" in out.stdout
    assert f"wrote {dst} (anthropic request)" in out.stdout
    same = ctxwise("compact", src, "--keep-tail-turns", "9", "--out", dst)
    assert same.returncode == 0 and "nothing compacted" in same.stdout


def openai_messages() -> list[dict[str, Any]]:
    def tool(i: int, text: str) -> list[dict[str, Any]]:
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "get_order", "arguments": json.dumps({"order_id": "4417"})},
        }
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": text * 20},
        ]

    return [
        {"role": "system", "content": "You are the Northwind support agent."},
        {"role": "user", "content": "Where is my order 4417? My email is ana@example.com."},
        *tool(1, '{"order_id": "4417", "status": "pending"} '),
        {"role": "assistant", "content": "Order 4417 is pending."},
        {"role": "user", "content": RULE},
        *tool(2, '{"order_id": "4417", "address_check": "running"} '),
        {"role": "assistant", "content": "The address check is running."},
        {"role": "user", "content": "Tell me when it is done."},
    ]


def test_openai_messages_list_stays_a_list(tmp_path: Path) -> None:
    raw = openai_messages()
    src = tmp_path / "msgs.json"
    src.write_text(json.dumps(raw))
    dst = tmp_path / "out.json"
    out = ctxwise("compact", src, "--keep-tail-turns", "1", "--out", dst, "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["written_as"] == "openai:messages" and report["format"] == "openai"
    assert report["tokens_after"] < report["tokens_before"]
    wire = json.loads(dst.read_text())
    assert isinstance(wire, list) and wire[0] == raw[0]
    assert wire[1]["role"] == "system" and wire[1]["content"].startswith(PINNED_HEADER)
    assert RULE in wire[1]["content"] and "ana@example.com" in wire[1]["content"]
    assert wire[2]["role"] == "user" and wire[2]["content"].startswith(SUMMARY_HEADER)
    assert wire[3:] == raw[-1:]
    t = openai.decode_messages(wire)
    assert t.problems("openai") == [] and openai.encode_messages(t) == wire


def test_openai_request_keeps_its_params(tmp_path: Path) -> None:
    src = tmp_path / "req.json"
    src.write_text(json.dumps({"model": "gpt-4o", "temperature": 0, "messages": openai_messages()}))
    dst = tmp_path / "out.json"
    out = ctxwise("compact", src, "--keep-tail-turns", "1", "--out", dst, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["written_as"] == "openai:request"
    body = json.loads(dst.read_text())
    assert body["model"] == "gpt-4o" and body["temperature"] == 0
    assert openai.decode_request(body).problems("openai") == []


@pytest.mark.data
def test_claude_code_session_is_written_as_claude_code_jsonl(
    tmp_path: Path, data_dir: Path
) -> None:
    path = long_sessions()[0]
    dst = tmp_path / "out.jsonl"
    out = ctxwise("compact", path, "--keep-tail-tokens", "16000", "--out", dst, "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["format"] == "claude-code" and report["written_as"] == "claude-code"
    # a Claude Code session is compacted as the model sees it: its live window
    live_before = read_transcript(path).live_window()
    assert report["tokens_before"] == CharCounter().count_messages(live_before.messages)
    assert report["tokens_after"] < report["tokens_before"]
    assert report["compacted"] and report["summarized_messages"] == report["cut_index"]
    original = path.read_text(encoding="utf-8")
    written = dst.read_text(encoding="utf-8")
    assert written.startswith(original)  # the history stays, byte for byte
    t = read_transcript(dst)  # reads back as a Claude Code session
    assert t.format == "claude-code"
    assert t.compactions[-1].trigger == "manual"
    assert t.compactions[-1].pre_tokens == report["tokens_before"]
    live = t.live_window()
    assert live.problems("anthropic") == []
    assert live.messages[0].kind == "compact_summary"
    assert report["summary"] in live.messages[0].text
    assert live.messages[-1].content == read_transcript(path).messages[-1].content
    human = ctxwise("compact", path, "--keep-tail-tokens", "16000", "--out", dst)
    assert human.returncode == 0 and "(claude-code)" in human.stdout
    assert dst.read_text(encoding="utf-8") == written  # deterministic
    # and the output compacts again: the new live window starts at ctxwise's summary
    again = tmp_path / "again.jsonl"
    second = ctxwise("compact", dst, "--keep-tail-turns", "1", "--out", again, "--json")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["compacted"]
    t2 = read_transcript(again)
    assert len(t2.compactions) == len(t.compactions) + 1
    live2 = t2.live_window()
    assert live2.problems("anthropic") == []
    assert live2.messages[-1].content == live.messages[-1].content


def test_out_may_not_be_the_input(tmp_path: Path) -> None:
    src = tmp_path / "req.json"
    body = json.dumps(anthropic_request())
    src.write_text(body)
    for dst in (src, tmp_path / "." / "req.json"):
        out = ctxwise("compact", src, "--keep-tail-turns", "1", "--out", dst)
        assert_one_error_line(out, "is the input file")
        assert src.read_text() == body
    (tmp_path / "link.json").symlink_to(src)
    out = ctxwise("compact", tmp_path / "link.json", "--keep-tail-turns", "1", "--out", src)
    assert_one_error_line(out, "is the input file")
    assert src.read_text() == body


@pytest.mark.data
def test_tau_bench_trajectory_keeps_its_shape(tmp_path: Path, data_dir: Path) -> None:
    dst = tmp_path / "out.json"
    out = ctxwise(
        "compact", TAU, "--index", "7", "--keep-tail-turns", "1", "--repair", "--out", dst, "--json"
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["written_as"] == "openai:trajectories" and report["format"] == "openai"
    # the whole list comes back, the other trajectories unchanged
    body, original = json.loads(dst.read_text()), json.loads(TAU.read_text())
    assert len(body) == len(original)
    assert body[:7] == original[:7] and body[8:] == original[8:]
    doc, item = body[7], original[7]
    assert set(doc) == set(item)
    assert {k: v for k, v in doc.items() if k != "traj"} == {
        k: v for k, v in item.items() if k != "traj"
    }
    t = read_transcripts(dst)[7]
    assert t.problems("openai") == [] and t.problems("anthropic") == []
    assert doc["traj"][-1] == item["traj"][-1]


def test_errors_are_one_line_exit_2_and_write_nothing(tmp_path: Path) -> None:
    src = tmp_path / "req.json"
    src.write_text(json.dumps(anthropic_request()))
    dst = tmp_path / "out.json"
    dst.write_text("previous contents")
    cases: list[tuple[list[str | Path], tuple[str, ...]]] = [
        (["--budget", "5"], ("budget 5 tokens is too small", "system")),
        (["--budget", "0"], ("positive integer",)),
        (["--keep-tail-tokens", "5", "--keep-tail-turns", "1"], ("at most one",)),
        ([], ("--budget N",)),
        (["--budget", "100", "--facts", "all"], ("unknown --facts",)),
        (["--keep-tail-turns", "0"], ("positive integer",)),
        (["--keep-tail-turns", "1", "--summarizer", "gpt"], ("unknown summarizer",)),
        (["--keep-tail-turns", "1", "--summarizer", "anthropic"], ("needs --model",)),
        (["--keep-tail-turns", "1", "--model", "m"], ("--model applies",)),
        (["--keep-tail-turns", "1", "--format", "xml"], ("unknown format",)),
        (["--keep-tail-turns", "1", "--index", "3"], ("out of range",)),
        (["--keep-tail-turns", "1", "--summary-tokens", "0"], ("positive integer",)),
    ]
    for extra, words in cases:
        out = ctxwise("compact", src, *extra, "--out", dst)
        assert_one_error_line(out, *words)
        assert dst.read_text() == "previous contents"
    missing = ctxwise("compact", tmp_path / "nope.json", "--keep-tail-turns", "1", "--out", dst)
    assert_one_error_line(missing, "no such file")
    bad_dir = tmp_path / "no" / "such" / "dir" / "out.json"
    out = ctxwise("compact", src, "--keep-tail-turns", "1", "--out", bad_dir)
    assert_one_error_line(out, "cannot write")
    assert not bad_dir.parent.exists()
    assert {p.name for p in tmp_path.iterdir()} == {"req.json", "out.json"}  # no temp files


def test_pairing_problems_are_refused_or_repaired(tmp_path: Path) -> None:
    req = anthropic_request()
    req["messages"].insert(
        1,
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "ghost", "content": "stray"}],
        },
    )
    src = tmp_path / "req.json"
    src.write_text(json.dumps(req))
    dst = tmp_path / "out.json"
    out = ctxwise("compact", src, "--keep-tail-turns", "1", "--out", dst)
    assert_one_error_line(out, "orphan_result", "ghost", "repair")
    assert not dst.exists()
    fixed = ctxwise("compact", src, "--keep-tail-turns", "1", "--repair", "--out", dst, "--json")
    assert fixed.returncode == 0, fixed.stderr
    assert any("ghost" in x for x in json.loads(fixed.stdout)["repaired"])
    assert anthropic.decode_request(json.loads(dst.read_text())).problems("anthropic") == []


# --------------------------------------------------------------------------- LLM summarizer


def _run_in_process(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from ctxwise.cli import main

    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _anthropic_model(handler: Any) -> Any:
    sdk = pytest.importorskip("anthropic")
    from ctxwise.providers import AnthropicChat

    def make(provider: str, model: str) -> Any:
        assert provider == "anthropic"
        client = sdk.Anthropic(
            api_key="k", max_retries=0, http_client=mock_client("anthropic", handler)
        )
        return AnthropicChat(client, model)

    return make


def test_llm_summarizer_through_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sent: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        sent.append(json.loads(request.content))
        return response(
            "anthropic",
            200,
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-5-5",
                "content": [{"type": "text", "text": "Order W2378156 was damaged; 4417 pending."}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 100, "output_tokens": 12},
            },
        )

    import ctxwise.cli.compact as cli_compact

    monkeypatch.setattr(cli_compact, "_chat_model", _anthropic_model(handler))
    src = tmp_path / "req.json"
    src.write_text(json.dumps(anthropic_request()))
    dst = tmp_path / "out.json"
    args = ["compact", str(src), "--keep-tail-turns", "1", "--out", str(dst)]
    llm = ["--summarizer", "anthropic", "--model", "claude-sonnet-5-5", "--json"]
    code, out, err = _run_in_process([*args, *llm, "--summary-tokens", "300"], capsys)
    assert code == 0, err
    assert json.loads(out)["summary"].endswith("\nOrder W2378156 was damaged; 4417 pending.")
    assert sent[0]["model"] == "claude-sonnet-5-5" and 0 < sent[0]["max_tokens"] < 300
    assert "W2378156" in sent[0]["messages"][0]["content"]
    body = json.loads(dst.read_text())
    assert "Order W2378156 was damaged; 4417 pending." in body["messages"][0]["content"]


def test_llm_summarizer_failure_is_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def handler(request: Any) -> Any:
        return response(
            "anthropic",
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        )

    import ctxwise.cli.compact as cli_compact

    monkeypatch.setattr(cli_compact, "_chat_model", _anthropic_model(handler))
    src = tmp_path / "req.json"
    src.write_text(json.dumps(anthropic_request()))
    dst = tmp_path / "out.json"
    code, out, err = _run_in_process(
        [
            "compact",
            str(src),
            "--keep-tail-turns",
            "1",
            "--out",
            str(dst),
            "--summarizer",
            "anthropic",
            "--model",
            "claude-sonnet-5-5",
        ],
        capsys,
    )
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "summarizer LLMSummarizer failed" in err
    assert "Overloaded" in err and "unchanged" in err
    assert not dst.exists()


# --------------------------------------------------------------------------- budgets and chains


def _in_process(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, Any, str]:
    code, out, err = _run_in_process([str(a) for a in args], capsys)
    return code, (json.loads(out) if code == 0 and out.strip() else None), err


@pytest.mark.data
@pytest.mark.parametrize("path", claude_code_files(), ids=lambda p: p.name)
def test_claude_code_files_compact_clear_compact_clear(
    path: Path, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """compact → clear → compact → clear on every shared Claude Code file, each
    step within its budget and every segment of every file written valid."""
    code, live, err = _in_process(capsys, "inspect", path, "--live", "--json")
    assert code == 0, err
    budget = live["total_tokens"] // 2
    files = [tmp_path / f"step{k}.jsonl" for k in range(4)]
    code, first, err = _in_process(
        capsys, "compact", path, "--budget", budget, "--out", files[0], "--json"
    )
    if code:  # only the compaction subagents: their one prompt is over half the file
        assert "too small" in err and path.name.startswith("agent-acompact")
        return
    assert first["compacted"] and first["tokens_after"] <= first["budget"] == budget
    assert all(s["problems"] == 0 for s in first["segments"])
    assert len(first["segments"]) == len(read_transcript(path).compactions) + 1 + 1
    code, cleared, err = _in_process(
        capsys, "clear", files[0], "--keep-last", "1", "--out", files[1], "--json"
    )
    assert code == 0, err
    again_budget = max(1, cleared["tokens_after"] // 2)
    code, again, err = _in_process(
        capsys, "compact", files[1], "--budget", again_budget, "--out", files[2], "--json"
    )
    if code:
        assert "too small" in err
    else:
        assert again["tokens_after"] <= again_budget
        assert all(s["problems"] == 0 for s in again["segments"])
        code, _, err = _in_process(capsys, "clear", files[2], "--out", files[3], "--json")
        assert code == 0, err
        code, report, err = _in_process(capsys, "inspect", files[3], "--json")
        assert code == 0 and report["problems"] == [], err


def test_budget_error_names_the_parts(tmp_path: Path) -> None:
    src = tmp_path / "req.json"
    src.write_text(json.dumps(anthropic_request()))
    out = ctxwise("compact", src, "--budget", "3", "--out", tmp_path / "o.json")
    assert_one_error_line(out, "budget 3 tokens is too small", "system", "latest user message")
    assert not (tmp_path / "o.json").exists()


def test_out_sweeps_what_a_killed_run_left(tmp_path: Path) -> None:
    # a killed `compact --out` (SIGKILL runs no cleanup) left a hidden partial
    # temporary file; the next write in that folder removes it once it is an hour
    # old, and nothing that is not ctxwise's. Ages here are far from any clock: a
    # year-2001 file is stale and a year-2100 one fresh whenever the test runs.
    src = tmp_path / "req.json"
    src.write_text(json.dumps(anthropic_request()))
    dst = tmp_path / "out.json"
    left = {
        ".out.json.ctxwise-0123abcd.tmp": (1_000_000_000, False),  # a killed run's
        ".out.json.0123abcd.tmp": (1_000_000_000, False),  # an earlier version's run's
        ".out.json.ctxwise-89abcdef.tmp": (4_102_444_800, True),  # a run going on
        ".other.json.0123abcd.tmp": (1_000_000_000, True),  # not for this file
        "notes.tmp": (1_000_000_000, True),
    }
    for name, (mtime, _) in left.items():
        (tmp_path / name).write_text('{"partial": ')
        os.utime(tmp_path / name, (mtime, mtime))
    out = ctxwise("compact", src, "--keep-tail-turns", "1", "--out", dst, "--json")
    assert out.returncode == 0, out.stderr
    kept = {name for name, (_, stays) in left.items() if stays}
    assert {p.name for p in tmp_path.iterdir()} == kept | {"req.json", "out.json"}
    assert json.loads(dst.read_text())["model"] == "claude-sonnet-5-5"
