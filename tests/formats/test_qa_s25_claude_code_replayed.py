"""Claude Code appends a session's entries again when the IDE reopens it: each
copy has the same ``uuid`` and content, only ambient fields (``cwd``) may differ
(anthropics/claude-code#56196), and Claude Code itself loads entries by uuid, so
it reads each once. ctxwise read every copy: the tool calls were issued twice
(two duplicate_id pairing problems), so ``ctxwise clear`` and ``compact`` refused
the session unless repaired, and the window counted the replay."""

from __future__ import annotations

import json
from pathlib import Path

from ctxwise.compaction import write_back_compaction
from ctxwise.compaction.core import compact
from ctxwise.editing import DEFAULT_PLACEHOLDER, clear_tool_uses
from ctxwise.formats import read_transcript_file, write_back
from ctxwise.formats.claude_code import read_claude_code_lines
from tests.formats._clear import clear_file
from tests.formats.test_qa_s25_claude_code_microcompact import Chain


def session() -> Chain:
    c = Chain()
    c.add("user", message={"role": "user", "content": "Read a and b. " + "Some context. " * 60})
    c.turn(1, "a\n" * 300)
    c.turn(2, "b\n" * 300)
    c.events.extend(dict(e, cwd="/w/sub") for e in c.events[1:5])  # replayed
    c.add("user", message={"role": "user", "content": "And now?"})
    c.add("assistant", message={"id": "msg_9", "type": "message", "role": "assistant",
                                "model": "claude-sonnet-4-5",
                                "content": [{"type": "text", "text": "Both read."}]})  # fmt: skip
    return c


def test_a_replayed_event_is_read_once() -> None:
    t, report = read_claude_code_lines(session().text().split("\n"))
    assert [m.role for m in t.messages] == ["user", "assistant", "user", "assistant", "user",
                                            "user", "assistant"]  # fmt: skip
    assert t.problems("anthropic") == []
    assert report.skipped["duplicate"] == 4


def test_clear_edits_every_copy_alike(tmp_path: Path) -> None:
    text = session().text()
    _, edit, data, _ = clear_file(tmp_path / "s.jsonl", text, keep_last=1)
    assert [c.tool_use_id for c in edit.cleared] == ["toolu_1"]
    old, new = text.split("\n"), data.decode("utf-8").split("\n")
    assert [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b] == [2, 6]
    for i in (2, 6):
        assert json.loads(new[i])["message"]["content"][0]["content"] == DEFAULT_PLACEHOLDER
    assert json.loads(new[6])["cwd"] == "/w/sub"  # the copy's own fields stay


def test_a_copy_that_differs_keeps_what_was_not_edited(tmp_path: Path) -> None:
    c = session()
    c.events[8]["message"]["content"][0]["content"] = "b (replayed)\n" * 300
    p = tmp_path / "s.jsonl"
    p.write_text(c.text(), encoding="utf-8")
    f = read_transcript_file(p)
    edit = clear_tool_uses(f.transcripts[0], trigger_tokens=0, keep_last=1)
    data, _ = write_back(f, {0: edit.transcript})
    new = data.decode("utf-8").split("\n")
    assert new[8] == c.text().split("\n")[8]


def test_compact_copies_the_tail_once(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    text = session().text()
    p.write_text(text, encoding="utf-8")
    f = read_transcript_file(p)
    result = compact(f.transcripts[0], keep_tail_tokens=340)
    assert result.compacted
    assert result.transcript.messages[1].role == "assistant"  # the tail holds both calls
    data, _ = write_back_compaction(f, result)
    out = tmp_path / "out.jsonl"
    out.write_bytes(data)
    live = read_transcript_file(out).transcripts[0].live_window()
    assert live.messages[0].kind == "compact_summary"
    assert [(m.role, m.content) for m in live.messages[1:]] == [
        (m.role, m.content) for m in result.transcript.messages[1:]
    ]
    # the tail is the original events copied (toolUseResult and all), each once
    appended = [json.loads(line) for line in data.decode("utf-8")[len(text) :].splitlines()]
    tail = appended[2:]
    assert len(tail) == len(session().events) - 1 - 4
    assert sum("toolUseResult" in e for e in tail) == 2
