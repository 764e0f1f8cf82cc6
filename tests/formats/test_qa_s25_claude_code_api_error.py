"""Claude Code records a failed API call (overload, usage limit, lost credentials)
as an assistant event of its own: ``isApiErrorMessage: true``, ``message.model:
"<synthetic>"``, a text block with the notice. Claude Code shows it and never
sends it to the model (``normalizeMessagesForAPI`` drops it), so it is not part of
the conversation: it was read as an assistant turn the model never gave, counted,
summarized and rendered into the next request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxwise.editing import DEFAULT_PLACEHOLDER
from ctxwise.formats import save_transcript_file
from ctxwise.formats.claude_code import read_claude_code_lines
from tests.formats._clear import clear_file

BASE = {"isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": "s1"}


def event(kind: str, n: int, message: dict[str, Any], **kw: Any) -> dict[str, Any]:
    parent = f"u{n - 1}" if n > 1 else None
    stamp = f"2026-04-17T08:10:{n:02d}.000Z"
    return {**BASE, "parentUuid": parent, "type": kind, "uuid": f"u{n}", "timestamp": stamp,
            "message": message, **kw}  # fmt: skip


def assistant(mid: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": mid, "type": "message", "role": "assistant", "model": "claude-opus-4-1",
            "content": content, "stop_reason": "end_turn", "usage": {}}  # fmt: skip


def api_error(text: str) -> dict[str, Any]:
    return {
        "id": "9b0c7a3e-0000-4000-8000-000000000000",
        "type": "message",
        "role": "assistant",
        "model": "<synthetic>",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "stop_sequence",
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


OUTPUT = "total 0\n" * 100


def session() -> list[dict[str, Any]]:
    return [
        event("user", 1, {"role": "user", "content": "List the files."}),
        event("assistant", 2, assistant("msg_1", [
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}])),
        event("user", 3, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": OUTPUT}]},
            toolUseResult={"stdout": OUTPUT, "stderr": ""}),
        event("assistant", 4, api_error("API Error: 529 Overloaded. Try again in a moment."),
              isApiErrorMessage=True, error="unknown"),
        event("user", 5, {"role": "user", "content": "continue"}),
        event("assistant", 6, api_error("You've hit your limit · resets 11:30am"),
              isApiErrorMessage=True, error="rate_limit"),
        event("user", 7, {"role": "user", "content": "continue"}),
        event("assistant", 8, assistant("msg_2", [{"type": "text", "text": "One file."}])),
    ]  # fmt: skip


def test_api_errors_are_not_messages() -> None:
    lines = [json.dumps(e) for e in session()]
    t, report = read_claude_code_lines(lines)
    assert [(m.role, m.text) for m in t.messages] == [
        ("user", "List the files."),
        ("assistant", ""),
        ("user", ""),
        ("user", "continue"),
        ("user", "continue"),
        ("assistant", "One file."),
    ]
    assert report.skipped["api_error"] == 2
    assert t.problems("anthropic") == []


def test_a_quoted_notice_from_the_model_stays() -> None:
    # the model may quote a notice: only Claude Code's own events are skipped
    events = session()
    events[7]["message"]["content"][0]["text"] = "API Error: 529 Overloaded"
    events[3]["isApiErrorMessage"] = False
    t, report = read_claude_code_lines([json.dumps(e) for e in events])
    assert [m.text for m in t.messages if m.role == "assistant"][1:] == [
        "API Error: 529 Overloaded. Try again in a moment.",
        "API Error: 529 Overloaded",
    ]
    assert report.skipped["api_error"] == 1


def test_clear_keeps_the_error_lines(tmp_path: Path) -> None:
    text = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in session())
    f, edit, data, shape = clear_file(tmp_path / "s.jsonl", text, keep_last=0)
    assert edit.applied
    assert shape == "session"
    out = tmp_path / "out.jsonl"
    save_transcript_file(f, data, out)
    old, new = text.split("\n"), out.read_text(encoding="utf-8").split("\n")
    assert [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b] == [2]
    assert json.loads(new[2])["message"]["content"][0]["content"] == DEFAULT_PLACEHOLDER
