"""Claude Code hooks as Claude Code runs them: a subprocess, a payload on stdin of the
documented shape, a real transcript (copied into tmp_path), JSON back, exit 0.

The issue's limit for a hook run is 2 s; tests never assert a wall-clock time, so
each run gets a generous ``timeout=`` and ``benchmarks/bench_hooks.py`` measures.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ctxwise.errors import FormatError
from ctxwise.formats import read_transcript
from ctxwise.integrations.claude_code_hooks import (
    ADDITIONAL_CONTEXT_CAP,
    SUBAGENT_TRANSCRIPT_BYTES,
    archive_transcript,
    hook_settings,
    install_settings,
    merge_settings,
    pre_compact,
    run_hook,
    session_start,
    subagent_context,
    subagent_start,
)
from ctxwise.messages import ToolUseBlock
from tests.conftest import claude_code_files

FILES = claude_code_files()
TIMEOUT = 20  # seconds: far above the 2 s, so a hang fails instead of hanging
DEFAULT_TASK = "Find where the hook output is parsed and fix the failing test"


def _hook(
    args: list[str], stdin: str, home: Path, *, log: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "CTXWISE_HOOK_LOG": str(log if log is not None else home / "hooks.log"),
    }
    return subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", "hook", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        cwd=home,
    )


def _agent_input(transcript: Path) -> dict[str, Any]:
    """The input of the transcript's latest subagent call, else a made-up one of the
    same shape (every field the Agent tool takes)."""
    for msg in reversed(read_transcript(transcript).messages):
        for b in msg.content:
            if isinstance(b, ToolUseBlock) and b.name in ("Agent", "Task"):
                return {"model": "haiku", **dict(b.input)}
    return {
        "description": "Fix the failing test",
        "prompt": DEFAULT_TASK,
        "subagent_type": "general-purpose",
        "model": "sonnet",
        "run_in_background": False,
    }


def _base(path: Path, event: str) -> dict[str, Any]:
    return {
        "session_id": "7f1c2a9e-0000-4000-8000-000000000001",
        "transcript_path": str(path),
        "cwd": str(path.parent),
        "permission_mode": "default",
        "hook_event_name": event,
    }


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copyfile(src, dst)
    return dst


@pytest.mark.parametrize("src", FILES, ids=lambda p: p.name)
def test_every_hook_on_a_real_transcript(src: Path, tmp_path: Path, home: Path) -> None:
    path = _copy(src, tmp_path)
    before = path.read_bytes()

    # PreToolUse on Agent: updatedInput keeps every original field, prompt = the render
    tool_input = _agent_input(path)
    payload = {
        **_base(path, "PreToolUse"),
        "tool_name": "Agent",
        "tool_input": tool_input,
        "tool_use_id": "toolu_01ABC",
    }
    out = _hook(["subagent-context"], json.dumps(payload), home)
    assert out.returncode == 0, out.stderr
    spec = json.loads(out.stdout)["hookSpecificOutput"]
    assert spec["hookEventName"] == "PreToolUse" and spec["permissionDecision"] == "allow"
    updated = spec["updatedInput"]
    assert set(updated) == set(tool_input)
    assert {k: v for k, v in updated.items() if k != "prompt"} == {
        k: v for k, v in tool_input.items() if k != "prompt"
    }
    assert updated["prompt"].startswith(tool_input["prompt"].strip())
    assert "<context note=" in updated["prompt"]

    # SubagentStart: the selection as additionalContext within the cap
    payload = {**_base(path, "SubagentStart"), "agent_id": "a1", "agent_type": "general-purpose"}
    payload["prompt"] = tool_input["prompt"]
    out = _hook(["subagent-start"], json.dumps(payload), home)
    assert out.returncode == 0, out.stderr
    spec = json.loads(out.stdout)["hookSpecificOutput"]
    assert spec["hookEventName"] == "SubagentStart"
    assert 0 < len(spec["additionalContext"]) <= ADDITIONAL_CONTEXT_CAP

    # PreCompact: archived under the session id; stdout is plain text (may be empty)
    payload = {**_base(path, "PreCompact"), "trigger": "auto", "custom_instructions": ""}
    out = _hook(["pre-compact", "--archive", str(tmp_path / "arch")], json.dumps(payload), home)
    assert out.returncode == 0, out.stderr
    (copy,) = (tmp_path / "arch" / payload["session_id"]).glob("*.jsonl")
    assert copy.read_bytes() == before

    # SessionStart after compaction: JSON with additionalContext, or nothing to add
    payload = {**_base(path, "SessionStart"), "source": "compact", "model": "claude-sonnet-4-5"}
    out = _hook(["session-start"], json.dumps(payload), home)
    assert out.returncode == 0, out.stderr
    if out.stdout.strip():
        spec = json.loads(out.stdout)["hookSpecificOutput"]
        assert spec["hookEventName"] == "SessionStart"
        assert len(spec["additionalContext"]) <= ADDITIONAL_CONTEXT_CAP
        assert out.stdout.count("Rules:") + out.stdout.count("Case facts:") >= 1

    assert path.read_bytes() == before  # the transcript is only read
    assert not (home / "hooks.log").exists(), (home / "hooks.log").read_text()


@pytest.fixture
def session(tmp_path: Path) -> Path:
    """The shared subagent transcript: it states rules the user gave."""
    src = next(p for p in FILES if p.name == "subagent.jsonl")
    return _copy(src, tmp_path)


BROKEN = [
    "",
    "not json",
    "[1, 2]",
    '{"tool_name": "Agent"}',
    '{"transcript_path": "/nonexistent/x.jsonl", "tool_name": "Agent",'
    ' "tool_input": {"prompt": "do it"}}',
    '{"transcript_path": "x", "tool_name": "Agent", "tool_input": "prompt"}',
]


@pytest.mark.parametrize("event", ["subagent-context", "subagent-start", "pre-compact"])
@pytest.mark.parametrize("stdin", BROKEN, ids=range(len(BROKEN)))
def test_a_broken_payload_lets_the_call_through(
    event: str, stdin: str, tmp_path: Path, home: Path
) -> None:
    log = tmp_path / "logs" / "hooks.log"
    out = _hook(
        [event, "--archive", str(tmp_path)] if event == "pre-compact" else [event],
        stdin,
        home,
        log=log,
    )
    assert out.returncode == 0 and out.stdout == "" and out.stderr == ""
    (line,) = log.read_text().splitlines()
    assert f" {event}: " in line and line.endswith("left unchanged")


def test_a_broken_transcript_lets_the_call_through(tmp_path: Path, home: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    line = '{"type": "user", "message": {"role": "user", "content": "hi"}}\n'
    bad.write_text(line + "{trunc\n" + line)  # a broken line inside, not one being written
    payload = {**_base(bad, "PreToolUse"), "tool_name": "Task", "tool_input": {"prompt": "x"}}
    out = _hook(["subagent-context"], json.dumps(payload), home)
    assert (out.returncode, out.stdout) == (0, "")
    assert "FormatError" in (home / "hooks.log").read_text()


def test_a_bad_option_still_exits_0(home: Path) -> None:
    out = _hook(["subagent-context", "--budget", "many"], "{}", home)
    assert (out.returncode, out.stdout) == (0, "")
    assert "bad command line" in (home / "hooks.log").read_text()


def test_other_tools_and_prompts_pass_unchanged(session: Path) -> None:
    base = _base(session, "PreToolUse")
    bash = {**base, "tool_name": "Bash", "tool_input": {"command": "ls"}}
    assert subagent_context(bash) is None
    empty = {**base, "tool_name": "Agent", "tool_input": {"prompt": "  ", "description": "d"}}
    assert subagent_context(empty) is None
    task = {**base, "tool_name": "Task", "tool_input": {"prompt": "Show gqc.7", "x": [1]}}
    first = subagent_context(task)
    assert first is not None
    again = {**task, "tool_input": first["hookSpecificOutput"]["updatedInput"]}
    assert subagent_context(again) is None  # the context is never added twice


def test_subagent_start_finds_the_task_in_the_transcript(session: Path) -> None:
    payload = {**_base(session, "SubagentStart"), "agent_id": "a1"}
    out = subagent_start(payload, cap=3_000)
    assert out is not None
    text = out["hookSpecificOutput"]["additionalContext"]
    assert 0 < len(text) <= 3_000 and "<context note=" in text
    assert subagent_start({**payload, "agent_type": "no-such-agent"}) is None


def _long_session(path: Path, turns: int) -> list[str]:
    """A Claude Code transcript of ``turns`` user/assistant exchanges, each naming its
    own ticket (``T-1`` …), written to ``path``; returns its lines."""
    lines = []
    for n in range(1, turns + 1):
        for role, text in (("user", f"Look at ticket T-{n}."), ("assistant", f"T-{n}: done.")):
            lines.append(json.dumps({"type": role, "message": {"role": role, "content": text}}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines


def test_from_a_long_transcript_the_subagent_hooks_read_only_its_end(tmp_path: Path) -> None:
    """Selection takes time in proportion to the transcript: past
    SUBAGENT_TRANSCRIPT_BYTES the subagent hooks select from the whole lines of its
    end, and say so, instead of passing their deadline and handing over nothing."""
    path = tmp_path / "long.jsonl"
    lines = _long_session(path, 400)
    tail = sum(len(line) + 1 for line in lines[-100:]) + 5  # the last 50 exchanges, and a bit
    assert 0 < tail < path.stat().st_size <= SUBAGENT_TRANSCRIPT_BYTES
    base = _base(path, "PreToolUse")
    for ticket, seen in (("T-399", True), ("T-3", False)):
        call = {**base, "tool_name": "Agent", "tool_input": {"prompt": f"Close {ticket}."}}
        out = subagent_context(call, tail=tail)
        assert out is not None
        prompt = out["hookSpecificOutput"]["updatedInput"]["prompt"]
        assert (f"Look at ticket {ticket}." in prompt) is seen
        assert "Look at ticket T-350." not in prompt  # the cut line and all before it
        assert "from the last" in out["hookSpecificOutput"]["permissionDecisionReason"]
    whole = subagent_context({**base, "tool_name": "Agent", "tool_input": {"prompt": "Close T-3."}})
    assert (
        whole is not None
        and "Look at ticket T-3." in (whole["hookSpecificOutput"]["updatedInput"]["prompt"])
    )
    assert "from the last" not in whole["hookSpecificOutput"]["permissionDecisionReason"]
    start = subagent_start(
        {**_base(path, "SubagentStart"), "agent_id": "a1", "prompt": "Close T-399."}, tail=tail
    )
    assert start is not None
    context = start["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("ctxwise: the parts of the parent conversation this task needs (")
    assert "Look at ticket T-399." in context


def test_the_end_of_a_long_transcript_being_written_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    lines = _long_session(path, 100)
    with path.open("a", encoding="utf-8") as f:
        f.write('{"type": "user", "message": {"role": "us')  # Claude Code mid-write
    tail = sum(len(line) + 1 for line in lines[-20:])
    call = {**_base(path, "PreToolUse"), "tool_name": "Agent"}
    out = subagent_context({**call, "tool_input": {"prompt": "Close T-99."}}, tail=tail)
    assert out is not None
    assert "Look at ticket T-99." in out["hookSpecificOutput"]["updatedInput"]["prompt"]


FIXED = datetime(2026, 3, 1, 12, 30, 5, 123456, tzinfo=UTC)


def test_archive_never_replaces_a_file(session: Path, tmp_path: Path) -> None:
    arch = tmp_path / "arch"
    first = archive_transcript(session, arch, "s/../1", clock=lambda: FIXED)
    assert first == arch / "s_.._1" / "20260301T123005.123456Z.jsonl"
    second = archive_transcript(session, arch, "s/../1", clock=lambda: FIXED)
    assert second.name == "20260301T123005.123456Z-1.jsonl"
    assert first.read_bytes() == second.read_bytes() == session.read_bytes()
    assert {p.name for p in first.parent.iterdir()} == {first.name, second.name}  # no temp
    with pytest.raises(FormatError):
        archive_transcript(tmp_path / "missing.jsonl", arch, "s", clock=lambda: FIXED)


def test_pre_compact_then_session_start_keeps_the_rules(session: Path, tmp_path: Path) -> None:
    arch = tmp_path / "arch"
    base = _base(session, "PreCompact")
    result = pre_compact({**base, "trigger": "manual"}, archive_dir=arch, clock=lambda: FIXED)
    assert result.archive.parent == arch / base["session_id"] and result.trigger == "manual"
    assert "Rules:\n- " in result.instructions
    assert "DO NOT create any beads until the user explicitly approves the plan." in (
        result.instructions
    )
    start = {**_base(session, "SessionStart"), "source": "compact"}
    assert session_start({**start, "source": "startup"}) is None
    ctx = session_start(start)
    assert ctx is not None
    rules = result.instructions.split("\n\n", 1)[1].strip()
    assert rules in ctx["hookSpecificOutput"]["additionalContext"]
    # the transcript gone: the session's latest archive is read instead
    session.unlink()
    assert session_start(start, archive_dir=arch) == ctx
    small = session_start(start, archive_dir=arch, cap=120)
    assert small is not None
    assert len(small["hookSpecificOutput"]["additionalContext"]) <= 120


def test_a_payload_naming_no_session_never_reads_another_s_archive(
    session: Path, tmp_path: Path
) -> None:
    arch = tmp_path / "arch"
    copy = tmp_path / "other.jsonl"
    copy.write_bytes(session.read_bytes())
    base = {**_base(copy, "PreCompact"), "session_id": ""}
    assert pre_compact(base, archive_dir=arch, clock=lambda: FIXED).archive is not None
    copy.unlink()  # gone: only the shared unknown-session archive is left
    start = {**base, "hook_event_name": "SessionStart", "source": "compact"}
    with pytest.raises(FormatError, match="no archive"):
        session_start(start, archive_dir=arch)


def test_an_archive_that_cannot_be_written_still_keeps_the_rules(
    session: Path, tmp_path: Path
) -> None:
    blocked = tmp_path / "arch"
    blocked.write_text("a file where the archive folder goes")
    payload = {**_base(session, "PreCompact"), "trigger": "auto"}
    result = pre_compact(payload, archive_dir=blocked, clock=lambda: FIXED)
    assert result.archive is None and result.archive_error is not None
    assert "DO NOT create any beads" in result.instructions
    # the hook prints them all the same, and logs the archive's failure
    log = tmp_path / "hooks.log"
    out = _hook(["pre-compact", "--archive", str(blocked)], json.dumps(payload), tmp_path, log=log)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == result.instructions.strip()
    assert "pre-compact: archive not written" in log.read_text()
    assert blocked.read_text() == "a file where the archive folder goes"


def test_deadline_leaves_everything_unchanged(tmp_path: Path) -> None:
    release = threading.Event()
    log = tmp_path / "hooks.log"

    def slow(_: str) -> str:
        release.wait(TIMEOUT)
        return "late"

    try:
        assert run_hook("subagent-context", slow, lambda: "{}", deadline=0.05, log=log) == ""
    finally:
        release.set()
    assert "deadline of 0.05s passed" in log.read_text()
    assert run_hook("x", lambda s: s.upper(), lambda: "ok", log=log) == "OK"


def _settings(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_install_merges_and_keeps_other_keys(tmp_path: Path, home: Path) -> None:
    project = home / ".claude" / "settings.json"
    mine = {"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}
    _settings(project, {"model": "opus", "env": {"A": "1"}, "hooks": {"PreToolUse": [mine]}})
    out = _hook(["install", "--dry-run"], "", home)
    assert out.returncode == 0, out.stderr
    assert json.loads(project.read_text())["hooks"] == {"PreToolUse": [mine]}  # untouched
    printed = json.loads(out.stdout)
    out = _hook(["install", "--project"], "", home)
    assert out.returncode == 0, out.stderr
    written = json.loads(project.read_text())
    assert written == printed
    assert written["model"] == "opus" and written["env"] == {"A": "1"}
    pre = written["hooks"]["PreToolUse"]
    assert pre[0] == mine and pre[1]["matcher"] == "Agent|Task"
    assert pre[1]["hooks"][0] == {
        "type": "command",
        "command": "ctxwise hook subagent-context",
        "timeout": 30,
    }
    assert written["hooks"]["SessionStart"][0]["matcher"] == "compact"
    assert written["hooks"]["PreCompact"][0]["hooks"][0]["command"] == "ctxwise hook pre-compact"
    assert [p.name for p in project.parent.iterdir()] == ["settings.json"]  # no temp left
    again = _hook(["install"], "", home)
    assert again.returncode == 0 and "nothing changed" in again.stderr
    assert json.loads(project.read_text()) == written


def test_install_user_and_subagent_start(tmp_path: Path) -> None:
    snippet = hook_settings("/opt/bin/ctxwise", subagent="subagent-start", timeout=10)
    assert "PreToolUse" not in snippet["hooks"]
    result = install_settings(tmp_path / ".claude" / "settings.json", snippet)
    assert result.written and result.added == ("SubagentStart", "PreCompact", "SessionStart")
    cmd = json.loads(result.path.read_text())["hooks"]["SubagentStart"][0]["hooks"][0]
    assert cmd == {
        "type": "command",
        "command": "/opt/bin/ctxwise hook subagent-start",
        "timeout": 10,
    }
    merged, added = merge_settings(json.loads(result.path.read_text()), snippet)
    assert added == [] and merged == json.loads(result.path.read_text())


def test_install_user_writes_home(home: Path) -> None:
    cwd = home / "proj"
    cwd.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", "hook", "install", "--user"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
        cwd=cwd,
    )
    assert out.returncode == 0, out.stderr
    assert "PreToolUse" in json.loads((home / ".claude" / "settings.json").read_text())["hooks"]
    assert not (cwd / ".claude").exists()


@pytest.mark.parametrize("text", ["{not json", "[1]", '{"hooks": []}'])
def test_install_refuses_a_bad_settings_file(text: str, home: Path) -> None:
    project = home / ".claude" / "settings.json"
    project.parent.mkdir()
    project.write_text(text)
    out = _hook(["install"], "", home)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("ctxwise: error: ") and len(out.stderr.splitlines()) == 1
    assert project.read_text() == text
    assert os.listdir(project.parent) == ["settings.json"]


def test_switching_the_subagent_hook_replaces_the_other(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    mine = {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-linter"}]}
    path.parent.mkdir()
    path.write_text(json.dumps({"hooks": {"PreToolUse": [mine]}}), encoding="utf-8")

    def commands() -> dict[str, list[str]]:
        hooks = json.loads(path.read_text())["hooks"]
        return {e: [h["command"] for g in gs for h in g["hooks"]] for e, gs in hooks.items()}

    install_settings(path, hook_settings())
    assert commands()["PreToolUse"] == ["my-linter", "ctxwise hook subagent-context"]
    result = install_settings(path, hook_settings(subagent="subagent-start"))
    assert result.written and set(result.added) == {"SubagentStart", "PreToolUse"}
    after = commands()
    assert after["PreToolUse"] == ["my-linter"]  # the user's own hook stays
    assert after["SubagentStart"] == ["ctxwise hook subagent-start"]
    install_settings(path, hook_settings())  # and back
    after = commands()
    assert "SubagentStart" not in after
    assert after["PreToolUse"] == ["my-linter", "ctxwise hook subagent-context"]
    assert after["PreCompact"] == ["ctxwise hook pre-compact"]


def test_installing_with_another_command_replaces_the_old_hooks(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    mine = {"matcher": "", "hooks": [{"type": "command", "command": "my-notes pre-compact"}]}
    path.parent.mkdir()
    path.write_text(json.dumps({"hooks": {"PreCompact": [mine]}}), encoding="utf-8")

    def commands() -> dict[str, list[str]]:
        hooks = json.loads(path.read_text())["hooks"]
        return {e: [h["command"] for g in gs for h in g["hooks"]] for e, gs in hooks.items()}

    install_settings(path, hook_settings("/old/bin/ctxwise"))
    result = install_settings(path, hook_settings("uvx ctxwise"))
    assert result.written and set(result.added) == {"PreToolUse", "PreCompact", "SessionStart"}
    assert commands() == {  # each hook once, with the new command; the user's own kept
        "PreCompact": ["my-notes pre-compact", "uvx ctxwise hook pre-compact"],
        "PreToolUse": ["uvx ctxwise hook subagent-context"],
        "SessionStart": ["uvx ctxwise hook session-start"],
    }
    again = install_settings(path, hook_settings("uvx ctxwise"))
    assert not again.written and again.added == ()


# -- temporary files and the archive's cap (issue 33) -------------------------------


class _CancelAfter(threading.Event):
    """A cancel event that turns set after ``checks`` looks at it: a deadline passing
    in the middle of a copy, at a place the test chooses."""

    def __init__(self, checks: int) -> None:
        super().__init__()
        self.checks = checks

    def is_set(self) -> bool:
        self.checks -= 1
        return self.checks < 0 or super().is_set()


@pytest.mark.parametrize("checks", [0, 1, 3], ids=["at-once", "after-a-chunk", "after-all"])
def test_a_copy_cancelled_by_the_deadline_leaves_no_file(tmp_path: Path, checks: int) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes(b'{"type": "user"}\n' * (3 * 2**20 // 17))  # three chunks
    arch = tmp_path / "arch"
    with pytest.raises(OSError, match="deadline passed") as caught:
        archive_transcript(big, arch, "s1", clock=lambda: FIXED, cancel=_CancelAfter(checks))
    assert caught.value.errno == errno.ECANCELED
    assert list((arch / "s1").iterdir()) == []
    # through pre_compact: the copy is abandoned and so is the work after it
    payload = {**_base(big, "PreCompact"), "session_id": "s1"}
    result = pre_compact(payload, archive_dir=arch, clock=lambda: FIXED, cancel=_CancelAfter(1))
    assert result.archive is None and "deadline passed" in (result.archive_error or "")
    assert list((arch / "s1").iterdir()) == []


def test_the_deadline_cancels_the_work_and_waits_for_it_to_clean_up(tmp_path: Path) -> None:
    log = tmp_path / "hooks.log"
    scratch = tmp_path / ".scratch.ctxwise-00000000.tmp"
    cancel = threading.Event()

    def writes(_: str) -> str:
        scratch.write_text("half")
        try:
            cancel.wait(TIMEOUT)
            return "late"
        finally:
            scratch.unlink()

    out = run_hook(
        "pre-compact", writes, lambda: "{}", deadline=0.05, log=log, cancel=cancel, grace=TIMEOUT
    )
    assert out == "" and cancel.is_set()
    assert not scratch.exists()
    assert "deadline of 0.05s passed" in log.read_text()


def test_the_pre_compact_hook_removes_its_copy_when_the_deadline_passes(
    session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `hook pre-compact` on a 2 GiB transcript left a 1.27 GB temporary file when its
    # deadline passed: the copy went on in a thread the exit then killed
    import ctxwise.integrations.claude_code_hooks as hooks
    from ctxwise.cli import app
    from tests._cli import runner

    arch = tmp_path / "arch"
    started: list[Path] = []
    release = threading.Event()  # ends a copy no deadline cancels, after the checks

    def slow_copy(transcript: Any, archive_dir: Any, session_id: str, **kw: Any) -> Path:
        cancel = kw.get("cancel") or release
        folder = Path(archive_dir) / session_id
        folder.mkdir(parents=True)
        tmp = folder / ".20260301T123005.123456Z.ctxwise-0123abcd.tmp"
        tmp.write_bytes(b"part of a long copy")
        started.append(tmp)
        try:
            while not cancel.wait(0.01):  # a chunk at a time, until the deadline
                pass
            raise OSError(errno.ECANCELED, "the hook's deadline passed")
        finally:
            tmp.unlink()

    monkeypatch.setattr(hooks, "archive_transcript", slow_copy)
    monkeypatch.setattr(hooks, "CLEANUP_GRACE", float(TIMEOUT), raising=False)
    log = tmp_path / "hooks.log"
    monkeypatch.setenv("CTXWISE_HOOK_LOG", str(log))
    payload = {**_base(session, "PreCompact"), "session_id": "s1", "trigger": "auto"}
    args = ["hook", "pre-compact", "--archive", str(arch), "--deadline", "0.05"]
    try:
        result = runner.invoke(app, args, input=json.dumps(payload))
        left = [p.name for p in (arch / "s1").iterdir()]  # when the hook has returned
    finally:
        release.set()
    assert result.exit_code == 0 and result.stdout == ""
    assert started and left == []
    assert "deadline of 0.05s passed" in log.read_text()


def _archive_copy(arch: Path, session_id: str, stamp: str, size: int) -> Path:
    folder = arch / session_id
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stamp}.jsonl"
    path.write_bytes(b"x" * size)
    return path


def test_the_archive_folder_keeps_within_its_cap_oldest_first(
    session: Path, tmp_path: Path
) -> None:
    arch = tmp_path / "arch"
    oldest = _archive_copy(arch, "other", "20250101T000000.000000Z", 1000)
    old = _archive_copy(
        arch, "7f1c2a9e-0000-4000-8000-000000000001", "20250601T000000.000000Z", 1000
    )
    recent = _archive_copy(arch, "other", "20260201T000000.000000Z", 1000)
    newer = _archive_copy(arch, "third", "20270101T000000.000000Z", 1000)  # after this copy
    notes = arch / "other" / "notes.txt"  # not an archive copy: never counted or removed
    notes.write_bytes(b"n" * 10_000)
    size = session.stat().st_size
    payload = {**_base(session, "PreCompact"), "trigger": "auto"}
    cap = size + 2000  # this copy, the newer one and one older copy
    result = pre_compact(payload, archive_dir=arch, clock=lambda: FIXED, archive_max_bytes=cap)
    assert result.archive is not None and result.archive.stat().st_size == size
    assert result.pruned == (oldest, old)  # by the time in their names, any session
    assert not oldest.exists() and not old.exists()
    assert recent.exists() and newer.exists() and notes.exists()
    # one copy over the cap alone is kept: the one just written is never removed
    again = pre_compact(payload, archive_dir=arch, clock=lambda: FIXED, archive_max_bytes=1)
    assert again.archive is not None and again.archive.exists()
    assert again.pruned == (recent, result.archive)
    assert newer.exists()
    # 0: no cap
    third = pre_compact(payload, archive_dir=arch, clock=lambda: FIXED, archive_max_bytes=0)
    assert third.pruned == () and again.archive.exists()


def test_the_cli_default_cap_is_the_librarys() -> None:
    import inspect

    from ctxwise.cli._util import parse_size
    from ctxwise.cli.hook import pre_compact_cmd
    from ctxwise.integrations.claude_code_hooks import DEFAULT_ARCHIVE_MAX_BYTES

    default = inspect.signature(pre_compact_cmd).parameters["archive_max_bytes"].default
    assert parse_size(default, "--archive-max-bytes") == DEFAULT_ARCHIVE_MAX_BYTES == 2**30


def test_the_hook_caps_the_archive_from_its_command_line(
    session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxwise.cli import app
    from tests._cli import runner

    arch = tmp_path / "arch"
    old = _archive_copy(arch, "other", "20250101T000000.000000Z", 5000)
    log = tmp_path / "hooks.log"
    monkeypatch.setenv("CTXWISE_HOOK_LOG", str(log))
    payload = json.dumps({**_base(session, "PreCompact"), "trigger": "auto"})
    args = ["hook", "pre-compact", "--archive", str(arch), "--deadline", str(TIMEOUT)]
    kept = runner.invoke(app, [*args, "--archive-max-bytes", "1GiB"], input=payload)
    assert kept.exit_code == 0 and "DO NOT create any beads" in kept.stdout
    assert old.exists()
    capped = runner.invoke(app, [*args, "--archive-max-bytes", "1KB"], input=payload)
    assert capped.exit_code == 0 and "DO NOT create any beads" in capped.stdout
    assert not old.exists()
    copies = sorted((arch / _base(session, "x")["session_id"]).glob("*.jsonl"))
    assert len(copies) == 1  # the earlier copy of this run went too; the new one stays
    bad = runner.invoke(app, [*args, "--archive-max-bytes", "lots"], input=payload)
    assert bad.exit_code == 0 and bad.stdout == ""  # a hook never blocks: logged
    assert "--archive-max-bytes takes a size" in log.read_text()


def test_a_copy_sweeps_the_temporaries_a_killed_hook_left(session: Path, tmp_path: Path) -> None:
    arch = tmp_path / "arch"
    folder = arch / "s1"
    folder.mkdir(parents=True)
    now = FIXED.timestamp()
    left = {
        ".20260301T000000.000000Z.ctxwise-0123abcd.tmp": now - 3601,  # stale: removed
        ".20260301T000000.000000Z.k3j_9x2a.tmp": now - 3601,  # an earlier version's
        ".20260301T123000.000000Z.ctxwise-89abcdef.tmp": now - 60,  # a live copy's
        ".hidden-note.tmp": now - 86_400,  # not ctxwise's
    }
    for name, mtime in left.items():
        (folder / name).write_bytes(b"part")
        os.utime(folder / name, (mtime, mtime))
    copy = archive_transcript(session, arch, "s1", clock=lambda: FIXED)
    assert {p.name for p in folder.iterdir()} == {
        copy.name,
        ".20260301T123000.000000Z.ctxwise-89abcdef.tmp",
        ".hidden-note.tmp",
    }
    # the hook sweeps every session's folder: a session that never compacts again
    # would keep its killed copy for good
    other = arch / "other"
    other.mkdir()
    killed = other / ".20260201T000000.000000Z.ctxwise-0123abcd.tmp"
    killed.write_bytes(b"part")
    os.utime(killed, (now - 3601, now - 3601))
    payload = {**_base(session, "PreCompact"), "session_id": "s1"}
    assert pre_compact(payload, archive_dir=arch, clock=lambda: FIXED).archive is not None
    assert list(other.iterdir()) == []
