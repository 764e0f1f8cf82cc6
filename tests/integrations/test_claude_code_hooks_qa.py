"""Claude Code hooks under inputs a real install or an odd environment produces:
transcripts that are FIFOs or still being written, settings files that are
symbolic links or do not decode, numbers JSON cannot print."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxwise.errors import FormatError
from ctxwise.integrations.claude_code_hooks import (
    hook_settings,
    install_settings,
    pre_compact,
    session_start,
    subagent_context,
    subagent_start,
)
from tests.conftest import claude_code_files
from tests.integrations.test_claude_code_hooks import TIMEOUT, _base, _hook

SESSION = next((p for p in claude_code_files() if p.name == "subagent.jsonl"), None)
needs_session = pytest.mark.skipif(SESSION is None, reason="shared transcripts not found")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("event", ["subagent-context", "subagent-start"])
def test_a_fifo_transcript_does_not_hang(event: str, tmp_path: Path, home: Path) -> None:
    # opening a FIFO for reading blocks until a writer comes: the hook must not
    # sit there until its deadline, it must refuse the path at once
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    payload = {
        **_base(fifo, "PreToolUse" if event == "subagent-context" else "SubagentStart"),
        "tool_name": "Agent",
        "tool_input": {"prompt": "fix the test"},
        "prompt": "fix the test",
    }
    out = _hook([event, "--deadline", "15"], json.dumps(payload), home)
    assert (out.returncode, out.stdout) == (0, "")
    log = (home / "hooks.log").read_text()
    assert "deadline" not in log and "FormatError" in log and "not a regular file" in log


def _torn(tmp_path: Path) -> Path:
    """The session as Claude Code is still appending to it: the last line is cut off
    half-way (inside a multi-byte character) and has no newline yet."""
    assert SESSION is not None
    data = SESSION.read_bytes()
    line = json.dumps(
        {"type": "user", "message": {"role": "user", "content": "naïve café ✓ " * 20}},
        ensure_ascii=False,
    ).encode("utf-8")
    cut = line.index("✓".encode()) + 1
    path = tmp_path / "live.jsonl"
    path.write_bytes(data + line[:cut])
    return path


@needs_session
def test_a_transcript_still_being_written_is_read(tmp_path: Path) -> None:
    path = _torn(tmp_path)
    task = {**_base(path, "PreToolUse"), "tool_name": "Agent", "tool_input": {"prompt": "gqc.7"}}
    assert subagent_context(task) is not None
    start = {**_base(path, "SubagentStart"), "prompt": "Show gqc.7"}
    assert subagent_start(start) is not None
    compact = pre_compact({**_base(path, "PreCompact")}, archive_dir=tmp_path / "a")
    assert "Rules:" in compact.instructions
    assert compact.archive.read_bytes() == path.read_bytes()  # the archive is the file as is
    assert session_start({**_base(path, "SessionStart"), "source": "compact"}) is not None


@needs_session
def test_a_broken_line_before_the_end_still_fails(tmp_path: Path) -> None:
    assert SESSION is not None
    path = tmp_path / "bad.jsonl"
    path.write_bytes(SESSION.read_bytes() + b'{"type": "user", "mess\n')  # complete, broken
    task = {**_base(path, "PreToolUse"), "tool_name": "Agent", "tool_input": {"prompt": "gqc.7"}}
    with pytest.raises(FormatError):
        subagent_context(task)


def test_install_writes_through_a_symlinked_settings_file(tmp_path: Path) -> None:
    # dotfile managers (stow, chezmoi, home-manager) link ~/.claude/settings.json
    # to a file they keep elsewhere: the link must stay, the file it names changes
    real = tmp_path / "dotfiles" / "claude-settings.json"
    real.parent.mkdir()
    real.write_text('{"model": "opus"}', encoding="utf-8")
    link = tmp_path / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(os.path.relpath(real, link.parent))
    result = install_settings(link, hook_settings())
    assert result.written
    assert link.is_symlink() and link.resolve() == real.resolve()
    data = json.loads(real.read_text(encoding="utf-8"))
    assert data["model"] == "opus" and "PreToolUse" in data["hooks"]
    assert sorted(p.name for p in link.parent.iterdir()) == ["settings.json"]
    assert sorted(p.name for p in real.parent.iterdir()) == ["claude-settings.json"]


def _settings_not_utf8(claude: Path) -> None:
    claude.mkdir()
    (claude / "settings.json").write_bytes(b'{"model": "caf\xe9"}')


def _settings_a_folder(claude: Path) -> None:
    (claude / "settings.json").mkdir(parents=True)


def _claude_a_file(claude: Path) -> None:
    claude.write_text("not a folder")


@pytest.mark.parametrize("make", [_settings_not_utf8, _settings_a_folder, _claude_a_file])
def test_install_refuses_an_unreadable_settings_path_in_one_line(make: Any, home: Path) -> None:
    claude = home / ".claude"
    make(claude)
    before = {p: p.read_bytes() for p in [claude, *claude.rglob("*")] if p.is_file()}
    out = _hook(["install"], "", home)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("ctxwise: error: ") and len(out.stderr.splitlines()) == 1
    assert {p: p.read_bytes() for p in [claude, *claude.rglob("*")] if p.is_file()} == before


def _strict(text: str) -> Any:
    """JSON as Claude Code's JSON.parse reads it: no NaN, no Infinity."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


@needs_session
@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN"])
def test_a_number_json_cannot_print_lets_the_call_through(
    number: str, tmp_path: Path, home: Path
) -> None:
    assert SESSION is not None
    head = json.dumps(_base(SESSION, "PreToolUse"))[:-1]
    stdin = f'{head}, "tool_name": "Agent", "tool_input": {{"prompt": "gqc.7", "n": {number}}}}}'
    out = _hook(["subagent-context"], stdin, home)
    assert out.returncode == 0
    if out.stdout:  # whatever is printed must be JSON, else Claude Code cannot read it
        _strict(out.stdout)
    assert out.stdout == "" and "ValueError" in (home / "hooks.log").read_text()


def test_install_never_writes_a_number_json_cannot_hold(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"env": {"N": 1e400}}', encoding="utf-8")
    with pytest.raises(FormatError):
        install_settings(path, hook_settings())
    assert path.read_text(encoding="utf-8") == '{"env": {"N": 1e400}}'


@needs_session
def test_one_huge_message_does_not_lose_the_other_rules(tmp_path: Path) -> None:
    # a user who pastes a long log: that one message is over what the rule and fact
    # finders take (MAX_TEXT_CHARS), the rules stated elsewhere must still be kept
    from ctxwise.memory.facts import MAX_TEXT_CHARS

    assert SESSION is not None
    paste = {
        "type": "user",
        "uuid": "paste-1",
        "sessionId": "s",
        "message": {"role": "user", "content": "log line\n" * (MAX_TEXT_CHARS // 9 + 10)},
    }
    path = tmp_path / "pasted.jsonl"
    path.write_bytes(SESSION.read_bytes() + (json.dumps(paste) + "\n").encode())
    plain = pre_compact(_base(SESSION, "PreCompact"), archive_dir=tmp_path / "a").instructions
    assert "Rules:" in plain
    pasted = pre_compact(_base(path, "PreCompact"), archive_dir=tmp_path / "a").instructions
    assert pasted == plain
    start = session_start({**_base(path, "SessionStart"), "source": "compact"})
    assert start == session_start({**_base(SESSION, "SessionStart"), "source": "compact"})


@needs_session
@pytest.mark.parametrize(
    ("command", "wrong"),
    [
        ("subagent-context", "PostToolUse"),
        ("subagent-start", "SubagentStop"),
        ("pre-compact", "PreToolUse"),
        ("session-start", "UserPromptSubmit"),
    ],
)
def test_a_hook_run_on_another_event_answers_nothing(
    command: str, wrong: str, tmp_path: Path, home: Path
) -> None:
    # a hook registered under the wrong event: an answer naming another
    # hookEventName is an error in Claude Code, and pre-compact must not archive
    # the session on every tool call
    assert SESSION is not None
    payload = {
        **_base(SESSION, wrong),
        "tool_name": "Agent",
        "tool_input": {"prompt": "Show gqc.7"},
        "tool_response": {"content": []},
        "prompt": "Show gqc.7",
        "source": "compact",
        "trigger": "auto",
    }
    arch = tmp_path / "arch"
    extra = ["--archive", str(arch)] if command in ("pre-compact", "session-start") else []
    out = _hook([command, *extra], json.dumps(payload), home)
    assert (out.returncode, out.stdout) == (0, "")
    assert "hook_event_name" in (home / "hooks.log").read_text()
    assert not arch.exists()


def _hook_in(encoding: str, args: list[str], stdin: bytes, home: Path) -> bytes:
    """A hook run whose standard streams default to ``encoding`` (a Latin-1 locale);
    Claude Code still writes and reads UTF-8."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "CTXWISE_HOOK_LOG": str(home / "hooks.log"),
        "PYTHONIOENCODING": encoding,
    }
    out = subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", "hook", *args],
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT,
        env=env,
        cwd=home,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@needs_session
@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["plain", "bom"])
def test_the_payload_is_utf8_whatever_the_locale(bom: bytes, home: Path) -> None:
    assert SESSION is not None
    tool_input = {"prompt": "Show gqc.7 — naïve", "description": "Café ✓", "x": ["ü"]}
    payload = {**_base(SESSION, "PreToolUse"), "tool_name": "Agent", "tool_input": tool_input}
    stdin = bom + json.dumps(payload, ensure_ascii=False).encode("utf-8")
    out = _hook_in("latin-1", ["subagent-context"], stdin, home)
    updated = _strict(out.decode("utf-8"))["hookSpecificOutput"]["updatedInput"]
    assert updated["description"] == "Café ✓" and updated["x"] == ["ü"]
    assert updated["prompt"].startswith("Show gqc.7 — naïve")


def test_pre_compact_prints_utf8_whatever_the_locale(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "s.jsonl"
    rule = "Always answer in Français — never use “smart quotes”."
    event = {"type": "user", "uuid": "u1", "message": {"role": "user", "content": rule}}
    path.write_text(json.dumps(event, ensure_ascii=False) + "\n", encoding="utf-8")
    stdin = json.dumps(_base(path, "PreCompact")).encode()
    out = _hook_in("latin-1", ["pre-compact", "--archive", str(tmp_path / "a")], stdin, home)
    assert "Français — never use “smart quotes”" in out.decode("utf-8")


@pytest.mark.parametrize("event", ["subagent-context", "pre-compact"])
def test_a_payload_that_never_ends_still_exits_0(event: str, home: Path) -> None:
    # stdin left open: the deadline passes with the read still blocked, and the
    # interpreter must still exit cleanly (a read on sys.stdin.buffer aborts it)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "CTXWISE_HOOK_LOG": str(home / "hooks.log")}
    with subprocess.Popen(
        [sys.executable, "-m", "ctxwise.cli", "hook", event, "--deadline", "0.5"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=home,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(b'{"session_id": "s", ')
        proc.stdin.flush()
        try:
            rc = proc.wait(timeout=TIMEOUT)
            out, err = proc.stdout.read(), proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
    assert (rc, out, err) == (0, b"", b"")
    assert "deadline of 0.5s passed" in (home / "hooks.log").read_text()
