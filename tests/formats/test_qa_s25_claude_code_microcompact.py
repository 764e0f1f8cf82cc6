"""Claude Code's microcompaction clears old tool results in what it sends and
records it as a ``system`` event, keeping the results in the file:

    {"type": "system", "subtype": "microcompact_boundary",
     "content": "Context microcompacted",
     "microcompactMetadata": {"trigger": "auto", "preTokens": 58819,
        "tokensSaved": 20697, "compactedToolIds": ["toolu_1", ...],
        "clearedAttachmentUUIDs": []}}

(shape as Claude Code 2.1.49 writes it). The model sees those results as
``[Old tool result content cleared]``. They were read in full: the window was
counted, cleared and compacted as if the model still had them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxwise.compaction import write_back_compaction
from ctxwise.compaction.core import compact
from ctxwise.editing import DEFAULT_PLACEHOLDER
from ctxwise.formats import read_transcript_file
from ctxwise.formats.claude_code import read_claude_code_lines
from ctxwise.messages import ToolResultBlock, Transcript
from ctxwise.tokens import CharCounter
from tests.formats._clear import clear_file

CLEARED = "[Old tool result content cleared]"
BASE = {"isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": "s1"}


class Chain:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, kind: str, **kw: Any) -> None:
        n = len(self.events) + 1
        parent = self.events[-1]["uuid"] if self.events else None
        stamp = f"2026-02-25T08:47:{n:02d}.000Z"
        self.events.append(
            {**BASE, "parentUuid": parent, "type": kind, "uuid": f"u{n}", "timestamp": stamp, **kw}
        )

    def turn(self, i: int, output: str) -> None:
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": "Read", "input": {"n": i}}
        self.add("assistant", message={"id": f"msg_{i}", "type": "message", "role": "assistant",
                                       "model": "claude-sonnet-4-5", "content": [use]})  # fmt: skip
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": output}
        self.add("user", message={"role": "user", "content": [result]},
                 toolUseResult={"type": "text", "file": {"content": output}})  # fmt: skip

    def microcompact(self, ids: list[str]) -> None:
        meta = {"trigger": "auto", "preTokens": 58819, "tokensSaved": 20697,
                "compactedToolIds": ids, "clearedAttachmentUUIDs": []}  # fmt: skip
        self.add("system", subtype="microcompact_boundary", content="Context microcompacted",
                 isMeta=False, level="info", microcompactMetadata=meta)  # fmt: skip

    def text(self) -> str:
        return "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in self.events)


def outputs(t: Transcript) -> list[str | tuple[Any, ...]]:
    return [b.content for m in t.messages for b in m.content if isinstance(b, ToolResultBlock)]


def session() -> Chain:
    c = Chain()
    c.add("user", message={"role": "user", "content": "Read the three files."})
    for i in (1, 2, 3):
        c.turn(i, f"file {i}\n" * 300)
    c.microcompact(["toolu_1", "toolu_2"])
    c.turn(4, "file 4\n" * 300)
    c.add("assistant", message={"id": "msg_9", "type": "message", "role": "assistant",
                                "model": "claude-sonnet-4-5",
                                "content": [{"type": "text", "text": "Read them."}]})  # fmt: skip
    return c


def test_microcompacted_results_read_as_claude_code_sends_them() -> None:
    t, report = read_claude_code_lines(session().text().split("\n"))
    assert outputs(t) == [CLEARED, CLEARED, "file 3\n" * 300, "file 4\n" * 300]
    assert report.microcompacted == 2
    assert report.skipped["system:microcompact_boundary"] == 1
    full, _ = read_claude_code_lines(session().text().split("\n")[:7])  # before the boundary
    assert CharCounter().count_messages(t.messages) < CharCounter().count_messages(full.messages)


def test_clear_rewrites_only_what_it_cleared(tmp_path: Path) -> None:
    text = session().text()
    _, edit, data, _ = clear_file(tmp_path / "s.jsonl", text, keep_last=1)
    assert [i.tool_use_id for i in edit.cleared] == ["toolu_3"]
    old, new = text.split("\n"), data.decode("utf-8").split("\n")
    # the microcompacted results' lines (3 and 5) stay as they were
    assert [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b] == [6]
    assert json.loads(new[6])["message"]["content"][0]["content"] == DEFAULT_PLACEHOLDER


def test_a_full_compaction_ends_the_microcompaction(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text(session().text(), encoding="utf-8")
    f = read_transcript_file(p)
    result = compact(f.transcripts[0], keep_tail_tokens=50)
    assert result.compacted
    data, _ = write_back_compaction(f, result)
    c = Chain()
    c.events = [json.loads(line) for line in data.decode("utf-8").splitlines()]
    c.turn(1, "file 1 again\n" * 3)  # the same id after the boundary is another call
    back = read_transcript_file_text(tmp_path, c.text())
    assert back.compactions
    assert outputs(back)[:4] == [CLEARED, CLEARED, "file 3\n" * 300, "file 4\n" * 300]
    assert outputs(back.live_window())[-1] == "file 1 again\n" * 3


def read_transcript_file_text(tmp_path: Path, text: str) -> Transcript:
    p = tmp_path / "again.jsonl"
    p.write_text(text, encoding="utf-8")
    return read_transcript_file(p).transcripts[0]
