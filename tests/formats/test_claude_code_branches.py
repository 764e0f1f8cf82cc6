"""A Claude Code session file is a tree (every entry has a ``uuid`` and a
``parentUuid``): when the user rewinds (double Esc, ``/rewind``, editing an
earlier prompt) or a request is retried, the abandoned branch stays in the file
and the new one starts from an earlier parent. Claude Code resumes from the
newest entry and walks ``parentUuid`` back to the root; the reader read every
event in file order, so abandoned turns were read (counted, cleared, compacted,
summarized) as if the model had seen them.

Slash commands (``/model``, ``/cost``) are recorded as ``system`` events with
``subtype: "local_command"``; Claude Code sends them to the model as user text
(``normalizeMessagesForAPI``), and the reader skipped them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxwise.compaction import write_back_compaction
from ctxwise.compaction.core import compact
from ctxwise.editing import DEFAULT_PLACEHOLDER
from ctxwise.formats import read_transcript_file
from ctxwise.formats.claude_code import read_claude_code, read_claude_code_lines
from ctxwise.messages import Message, ToolResultBlock, ToolUseBlock, Transcript
from tests.formats._clear import clear_file

BASE = {"isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": "s1"}
LONG = "Some context. " * 60


class Session:
    """Events with explicit parents (``parent=None`` is a root, the default is the
    event added last)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, kind: str, parent: str | bool | None = True, **kw: Any) -> str:
        n = len(self.events) + 1
        if parent is True:
            parent = self.events[-1]["uuid"] if self.events else None
        event = {**BASE, "parentUuid": parent, "type": kind, "uuid": f"u{n}",
                 "timestamp": f"2026-05-01T09:00:{n:02d}.000Z", **kw}  # fmt: skip
        self.events.append(event)
        return str(event["uuid"])

    def user(self, text: str, parent: str | bool | None = True) -> str:
        return self.add("user", parent, message={"role": "user", "content": text})

    def say(self, mid: str, text: str, parent: str | bool | None = True) -> str:
        block = {"type": "text", "text": text}
        return self.add("assistant", parent, message=_assistant(mid, [block]))

    def call(self, mid: str, tool: str, parent: str | bool | None = True) -> str:
        use = {"type": "tool_use", "id": tool, "name": "Read", "input": {"file": tool}}
        return self.add("assistant", parent, message=_assistant(mid, [use]))

    def result(self, tool: str, output: str, parent: str | bool | None = True) -> str:
        block = {"type": "tool_result", "tool_use_id": tool, "content": output}
        return self.add("user", parent, message={"role": "user", "content": [block]},
                        toolUseResult={"type": "text", "file": {"content": output}})  # fmt: skip

    def text(self) -> str:
        return "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in self.events)


def _assistant(mid: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": mid, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": content}  # fmt: skip


def texts(t: Transcript) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in t.messages]


def tool_ids(t: Transcript) -> list[str]:
    return [
        b.id if isinstance(b, ToolUseBlock) else b.tool_use_id
        for m in t.messages
        for b in m.content
        if isinstance(b, ToolUseBlock | ToolResultBlock)
    ]


def rewound() -> Session:
    """Two turns, then a rewind to the first answer and an edited second prompt."""
    s = Session()
    s.user("Read a. " + LONG)
    s.call("msg_1", "toolu_1")
    s.result("toolu_1", "a\n" * 300)
    answer = s.say("msg_2", "Read a.")
    s.user("Now delete everything.")  # abandoned from here
    s.call("msg_3", "toolu_2")
    s.result("toolu_2", "deleted\n" * 300)
    s.say("msg_4", "Deleted.")
    s.user("Now read b instead.", parent=answer)  # the edited prompt
    s.call("msg_5", "toolu_3")
    s.result("toolu_3", "b\n" * 300)
    s.say("msg_6", "Read b.")
    return s


def test_a_rewound_branch_is_not_read() -> None:
    t, report = read_claude_code_lines(rewound().text().split("\n"))
    assert [text for _, text in texts(t) if text] == [
        "Read a. " + LONG, "Read a.", "Now read b instead.", "Read b."]  # fmt: skip
    assert tool_ids(t) == ["toolu_1", "toolu_1", "toolu_3", "toolu_3"]
    assert report.skipped["off_branch"] == 4
    assert t.problems("anthropic") == []


def test_a_retried_response_is_read_once() -> None:
    s = Session()
    prompt = s.user("Summarize the file.")
    s.say("msg_1", "The file is about")  # the response that failed midway
    s.say("msg_2", "The file describes the build.", parent=prompt)  # the retry
    t, report = read_claude_code_lines(s.text().split("\n"))
    assert texts(t) == [("user", "Summarize the file."),
                        ("assistant", "The file describes the build.")]  # fmt: skip
    assert report.skipped["off_branch"] == 1


def test_the_history_before_a_compaction_is_read_through_its_logical_parent() -> None:
    s = Session()
    s.user("Start.")
    before = s.say("msg_1", "Started.")
    s.user("An abandoned question.")
    s.say("msg_2", "An abandoned answer.")
    boundary = s.add("system", parent=None, subtype="compact_boundary",
                     content="Conversation compacted", logicalParentUuid=before,
                     compactMetadata={"trigger": "auto", "preTokens": 9000})  # fmt: skip
    s.add("user", boundary, message={"role": "user", "content": "Summary: started."},
          isCompactSummary=True)  # fmt: skip
    s.user("Go on.")
    s.say("msg_3", "Going on.")
    t, report = read_claude_code_lines(s.text().split("\n"))
    assert texts(t) == [("user", "Start."), ("assistant", "Started."),
                        ("user", "Summary: started."), ("user", "Go on."),
                        ("assistant", "Going on.")]  # fmt: skip
    assert t.compactions[0].index == 2 and t.compactions[0].pre_tokens == 9000
    assert t.live_window().messages[0].kind == "compact_summary"
    assert report.skipped["off_branch"] == 2 and report.unresolved_links == 0


def test_parallel_calls_on_sibling_branches_are_one_response() -> None:
    """Each parallel call is its own assistant event (same ``message.id``), the
    second a child of the first, and each result a child of its own call: the
    chain from the leaf passes one result only."""
    s = Session()
    s.user("Read a and b.")
    first = s.call("msg_1", "toolu_1")
    second = s.call("msg_1", "toolu_2")
    s.result("toolu_1", "a", parent=first)
    s.result("toolu_2", "b", parent=second)
    s.say("msg_2", "Both read.")
    t, report = read_claude_code_lines(s.text().split("\n"))
    assert [(m.role, len(m.content)) for m in t.messages] == [
        ("user", 1), ("assistant", 2), ("user", 2), ("assistant", 1)]  # fmt: skip
    assert t.problems("anthropic") == []
    assert report.skipped["off_branch"] == 0


def test_links_through_legacy_progress_events_are_bridged() -> None:
    s = Session()
    s.user("Run it.")
    call = s.call("msg_1", "toolu_1")
    s.add("progress", data={"type": "hook_progress"})
    tick = s.add("progress", data={"type": "hook_progress"})
    s.result("toolu_1", "ok", parent=call)
    s.say("msg_2", "Ran.", parent=tick)  # older versions chained through progress
    t, report = read_claude_code_lines(s.text().split("\n"))
    assert [m.role for m in t.messages] == ["user", "assistant", "user", "assistant"]
    assert report.skipped["off_branch"] == 0 and report.skipped["progress"] == 2
    assert report.unresolved_links == 0  # a link to a progress event is one to its parent


def test_a_link_to_no_entry_keeps_what_came_before() -> None:
    """Claude Code sometimes writes a parentUuid naming an entry it never wrote
    (anthropics/claude-code#22526); its own walk stops there. The reader goes on
    at the closest earlier entry, and counts the link."""
    s = Session()
    s.user("One.")
    s.say("msg_1", "Two.")
    s.user("Three.", parent="never-written")
    s.say("msg_2", "Four.")
    t, report = read_claude_code_lines(s.text().split("\n"))
    assert [text for _, text in texts(t)] == ["One.", "Two.", "Three.", "Four."]
    assert report.unresolved_links == 1


def test_replayed_copies_at_the_end_are_not_the_leaf() -> None:
    """Reopening a session in the IDE appends copies of its entries: the last
    line is then an old entry, whose branch would end two turns early."""
    s = rewound()
    s.events.extend(dict(e, cwd="/w/sub") for e in s.events[:4])
    t, report = read_claude_code_lines(s.text().split("\n"))
    assert texts(t)[-1] == ("assistant", "Read b.")
    assert report.skipped["duplicate"] == 4 and report.skipped["off_branch"] == 4


def test_a_subagent_event_last_in_a_main_file_is_not_the_leaf() -> None:
    s = rewound()
    s.user("Search the repo.", parent=None)
    s.events[-1]["isSidechain"] = True
    t, report = read_claude_code_lines(s.text().split("\n"))
    assert texts(t)[-1] == ("assistant", "Read b.")
    assert report.skipped["sidechain"] == 1 and report.skipped["off_branch"] == 4


def test_an_entry_without_a_uuid_follows_its_parent() -> None:
    s = rewound()
    note = {**BASE, "type": "user", "message": {"role": "user", "content": "A note."}}
    s.events.insert(8, dict(note, message={"role": "user", "content": "An abandoned note."}))
    s.events.insert(4, note)  # after "Read a." (u4), which the live branch holds
    t, report = read_claude_code_lines(s.text().split("\n"))
    assert [text for _, text in texts(t) if text][2:4] == ["A note.", "Now read b instead."]
    assert "An abandoned note." not in [text for _, text in texts(t)]
    assert report.skipped["off_branch"] == 5


@pytest.mark.parametrize(
    "strip",
    [
        lambda e: {k: v for k, v in e.items() if k not in ("uuid", "parentUuid")},
        lambda e: {k: v for k, v in e.items() if k != "parentUuid"},
    ],
    ids=["no uuids", "no parent links"],
)
def test_a_file_without_a_tree_is_read_in_file_order(
    strip: Callable[[dict[str, Any]], Any],
) -> None:
    s = rewound()
    s.events = [strip(e) for e in s.events]
    t, report = read_claude_code_lines(s.text().split("\n"))
    assert len([m for m in t.messages if m.text]) == 6  # every prompt and answer, as written
    assert report.skipped["off_branch"] == 0


def _view(messages: tuple[Message, ...]) -> list[tuple[str, str, Any]]:
    return [(m.role, m.kind, m.content) for m in messages]


def test_every_shared_session_reads_as_its_file_order(
    claude_code_session_paths: list[Path],
) -> None:
    """The shared sessions have no abandoned branch: following the tree (progress
    bridges, parallel calls, a compaction's logical parent, subagent files whose
    first links point into their parent session) reads what file order reads."""
    for path in claude_code_session_paths:
        text = path.read_text(encoding="utf-8")
        flat = "".join(
            json.dumps({k: v for k, v in json.loads(line).items() if k != "uuid"}) + "\n"
            for line in text.splitlines()
            if line.strip()
        )
        tree, report = read_claude_code_lines(text.split("\n"))
        order = read_claude_code(flat)
        assert _view(tree.messages) == _view(order.messages), path.name
        assert [c.index for c in tree.compactions] == [c.index for c in order.compactions]
        assert report.skipped["off_branch"] == 0, path.name


def test_a_compaction_whose_logical_parent_is_missing_keeps_its_history(data_dir: Path) -> None:
    path = data_dir / "transcripts/claude_code/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    t, report = read_claude_code_lines(path.read_text(encoding="utf-8").split("\n"))
    assert report.unresolved_links == 1  # the boundary's logicalParentUuid names no entry
    before = t.messages[: t.compactions[0].index]
    assert sum(m.role == "user" and m.plain for m in before) >= 1  # the turns before it
    assert t.problems("anthropic") == []


@pytest.fixture
def claude_code_session_paths(data_dir: Path) -> list[Path]:
    paths = sorted((data_dir / "transcripts" / "claude_code").rglob("*.jsonl"))
    assert len(paths) >= 12
    return paths


# ----------------------------------------------------------------- slash commands


def test_slash_commands_are_read_as_the_user_text_claude_code_sends(data_dir: Path) -> None:
    path = data_dir / "transcripts/claude_code/short.jsonl"
    t, report = read_claude_code_lines(path.read_text(encoding="utf-8").split("\n"))
    commands = [m for m in t.messages if "command-" in m.text]
    assert [m.role for m in commands] == ["user", "user"]
    assert commands[0].text.startswith("<command-name>/model</command-name>")
    assert commands[1].text.startswith("<local-command-stdout>Kept model as")
    assert commands[1].text.endswith("</local-command-stdout>")
    assert all(m.plain and m.id for m in commands)
    assert "system:local_command" not in report.skipped


def test_a_slash_command_between_turns_keeps_the_turns_whole() -> None:
    s = Session()
    s.user("Read a.")
    s.call("msg_1", "toolu_1")
    s.result("toolu_1", "a")
    s.say("msg_2", "Read.")
    echo = "<command-name>/cost</command-name>\n<command-message>cost</command-message>"
    s.add("system", subtype="local_command", level="info", isMeta=False, content=echo)
    s.add("system", subtype="local_command", level="info", isMeta=False,
          content="<local-command-stdout>Total cost: $0.12</local-command-stdout>")  # fmt: skip
    s.user("What did that cost?")
    t, _ = read_claude_code_lines(s.text().split("\n"))
    assert [m.role for m in t.messages] == ["user", "assistant", "user", "assistant", "user",
                                            "user", "user"]  # fmt: skip
    assert "Total cost: $0.12" in t.messages[5].text
    assert t.problems("anthropic") == []


def test_a_slash_command_without_content_names_its_line() -> None:
    from ctxwise.errors import FormatError

    s = Session()
    s.user("Hi.")
    s.add("system", subtype="local_command", content=None)
    with pytest.raises(FormatError) as info:
        read_claude_code_lines(s.text().split("\n"))
    assert info.value.line == 2


# ----------------------------------------------------------------- writing back


def forked() -> Session:
    """A branch abandoned after a tool call, and the live branch making the same
    call again under the same id (a session edited by a tool that forks by copying
    entries): the id repeats, once per branch."""
    s = Session()
    prompt = s.user("Read a. " + LONG)
    s.call("msg_1", "toolu_1")
    s.result("toolu_1", "old a\n" * 300)
    s.say("msg_2", "Read the old a.")
    s.call("msg_1b", "toolu_1", parent=prompt)
    s.result("toolu_1", "a\n" * 300)
    s.say("msg_3", "Read a.")
    s.user("Thanks.")
    return s


def test_clearing_writes_back_the_live_branch_only(tmp_path: Path) -> None:
    text = forked().text()
    _, edit, data, _ = clear_file(tmp_path / "s.jsonl", text, keep_last=0)
    assert [c.tool_use_id for c in edit.cleared] == ["toolu_1"]
    old, new = text.split("\n"), data.decode("utf-8").split("\n")
    assert [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b] == [5]
    assert json.loads(new[5])["message"]["content"][0]["content"] == DEFAULT_PLACEHOLDER
    assert texts(read_claude_code(data.decode("utf-8"))) == texts(edit.transcript)


def test_compaction_writes_the_live_tail_after_the_leaf(tmp_path: Path) -> None:
    s = rewound()
    s.say("msg_7", "Read b, retried.", parent="u11")  # "Read b." (u12) was abandoned
    s.events.extend(dict(e, cwd="/w/sub") for e in s.events[:4])  # a replay at the end
    text = s.text()
    p = tmp_path / "s.jsonl"
    p.write_text(text, encoding="utf-8")
    f = read_transcript_file(p)
    result = compact(f.transcripts[0], keep_tail_tokens=340)
    assert result.compacted
    data, _ = write_back_compaction(f, result)
    appended = [json.loads(line) for line in data.decode("utf-8")[len(text) :].splitlines()]
    assert appended[0]["logicalParentUuid"] == "u13"  # the leaf, not the replayed last line
    tail = appended[2:]
    assert any("toolUseResult" in e for e in tail)  # the original events, copied
    assert [e["message"]["content"][0].get("text") for e in tail if e["type"] == "assistant"][
        -1
    ] == "Read b, retried."
    assert not any('Read b."' in json.dumps(e) or "delete" in json.dumps(e) for e in tail)
    out = tmp_path / "out.jsonl"
    out.write_bytes(data)
    back = read_transcript_file(out).transcripts[0]
    assert _view(back.live_window().messages[1:]) == _view(result.transcript.messages[1:])
    assert back.messages[: back.compactions[-1].index] == f.transcripts[0].messages


def test_a_message_id_that_is_not_a_string_is_no_response_id() -> None:
    s = Session()
    prompt = s.user("Hi.")
    s.say("msg_1", "Hel")
    s.events[-1]["message"]["id"] = ["msg_1"]  # on the abandoned branch
    s.say("msg_2", "Hello.", parent=prompt)
    t, _ = read_claude_code_lines(s.text().split("\n"))
    assert texts(t) == [("user", "Hi."), ("assistant", "Hello.")]


@pytest.mark.parametrize("kind", [{"a": 1}, ["user"], 7, None])
def test_an_event_whose_type_is_not_a_string_is_skipped(kind: Any, tmp_path: Path) -> None:
    """An object or a list as ``type`` made the branch walk raise ``TypeError``
    (unhashable) from the reader and the compaction writer (issue 33): such an event
    is read as one without a type, skipped and counted like any unknown event."""
    s = rewound()
    plain_text = s.text()
    s.events.insert(3, {**BASE, "type": kind, "uuid": "odd", "parentUuid": "u3"})
    s.events.append({**BASE, "type": kind, "parentUuid": "u12"})
    path = tmp_path / "s.jsonl"
    path.write_text(s.text(), encoding="utf-8")
    transcript, report = read_claude_code_lines(s.text().split("\n"))
    assert texts(transcript) == texts(read_claude_code(plain_text))
    assert report.skipped["None"] == 2
    file = read_transcript_file(path)
    data, shape = write_back_compaction(file, compact(file.transcripts[0], keep_tail_turns=1))
    assert shape == "session" and data.startswith(path.read_bytes())
