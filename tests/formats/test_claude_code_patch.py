"""Writing edits back into Claude Code session JSONL (``patch_claude_code``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise.editing import DEFAULT_PLACEHOLDER, clear_tool_uses, repair_pairing
from ctxwise.errors import FormatError
from ctxwise.formats.claude_code import patch_claude_code, read_claude_code
from ctxwise.messages import (
    ContentBlock,
    Message,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
)
from tests.conftest import claude_code_files, long_sessions


def unmarked(messages: tuple[Message, ...]) -> list[Message]:
    """Messages without ctxwise's own ``ctxwise.*`` bookkeeping keys."""

    def block(b: ContentBlock) -> ContentBlock:
        if isinstance(b, ToolUseBlock):
            extra = {k: v for k, v in b.extra.items() if not k.startswith("ctxwise.")}
            return ToolUseBlock(b.id, b.name, b.input, extra)
        if isinstance(b, ToolResultBlock):
            extra = {k: v for k, v in b.extra.items() if not k.startswith("ctxwise.")}
            return ToolResultBlock(b.tool_use_id, b.content, b.is_error, extra)
        return b

    return [
        Message(
            m.role, tuple(block(b) for b in m.content), m.kind, m.plain, m.id, m.timestamp, m.extra
        )
        for m in messages
    ]


def check_patch(text: str, edited: Transcript, *, live: bool = False) -> str:
    """Patch, then check every promise: the read-back equals the edit, pairs, and
    every line that is not a changed tool event is byte-identical."""
    out = patch_claude_code(text, edited)
    back = read_claude_code(out)
    window = back.live_window() if live else back
    assert unmarked(window.messages) == unmarked(edited.messages)
    assert back.problems() == []
    assert out.endswith("\n") == text.endswith("\n")
    before, after = text.split("\n"), out.split("\n")
    assert len(before) == len(after)
    cleared_results = {
        b.tool_use_id
        for m in edited.messages
        for b in m.content
        if isinstance(b, ToolResultBlock) and b.extra.get("ctxwise.cleared")
    }
    cleared_inputs = {
        b.id
        for m in edited.messages
        for b in m.content
        if isinstance(b, ToolUseBlock) and b.extra.get("ctxwise.cleared")
    }
    # sidechain events are left alone, except in a subagent's file, where they are all
    has_main = any(
        not e.get("isSidechain") and e.get("type") in ("user", "assistant")
        for e in (json.loads(line) for line in before if line.strip())
    )
    for old_line, new_line in zip(before, after, strict=True):
        if old_line == new_line:
            continue
        old, new = json.loads(old_line), json.loads(new_line)
        assert new_line.rstrip("\r") == json.dumps(new, ensure_ascii=False, separators=(",", ":"))
        assert old["type"] in ("user", "assistant")
        assert not (has_main and old.get("isSidechain"))
        assert set(old) == set(new)
        assert {k: v for k, v in old.items() if k not in ("message", "toolUseResult")} == {
            k: v for k, v in new.items() if k not in ("message", "toolUseResult")
        }
        assert {k: v for k, v in old["message"].items() if k != "content"} == {
            k: v for k, v in new["message"].items() if k != "content"
        }
        changed_result = False
        for ob, nb in zip(old["message"]["content"], new["message"]["content"], strict=True):
            if ob == nb:
                continue
            assert list(ob) == [k for k in nb if k in ob]  # key order kept
            if nb["type"] == "tool_result":
                assert nb["tool_use_id"] in cleared_results
                assert nb["content"] == DEFAULT_PLACEHOLDER
                assert {k: v for k, v in ob.items() if k != "content"} == {
                    k: v for k, v in nb.items() if k != "content"
                }
                changed_result = True
            else:
                assert nb["type"] == "tool_use" and nb["id"] in cleared_inputs
                assert nb["input"] == {}
                assert {k: v for k, v in ob.items() if k != "input"} == {
                    k: v for k, v in nb.items() if k != "input"
                }
        if "toolUseResult" in old and changed_result:
            assert new["toolUseResult"] == DEFAULT_PLACEHOLDER
        else:
            assert new.get("toolUseResult") == old.get("toolUseResult")
    return out


# --------------------------------------------------------------------------- synthetic sessions


def event(etype: str, content: Any, **fields: Any) -> dict[str, Any]:
    return {"type": etype, "message": {"role": etype, "content": content}, **fields}


def session(outputs: list[str], *, extras: bool = False) -> str:
    """A session: a prompt, then one streamed tool call and its result per output,
    with progress events, a blank line and a sidechain event in between."""
    lines: list[Any] = [
        {"type": "file-history-snapshot", "snapshot": {"files": {}}},
        event("user", "fix the tests ✓", uuid="u0"),
    ]
    for i, text in enumerate(outputs):
        use: dict[str, Any] = {
            "type": "tool_use",
            "id": f"toolu_{i}",
            "name": "Bash",
            "input": {"command": f"pytest -k t{i}"},
        }
        if extras:
            use["caller"] = {"type": "direct"}
        lines.append(
            {
                "type": "assistant",
                "uuid": f"a{i}",
                "message": {"role": "assistant", "id": f"msg_{i}", "content": [use]},
            }
        )
        lines.append({"type": "progress", "data": {"tool": f"toolu_{i}"}})
        result: dict[str, Any] = {"tool_use_id": f"toolu_{i}", "type": "tool_result"}
        result["content"] = text
        if extras:
            result["is_error"] = i % 2 == 0
        lines.append(
            event(
                "user",
                [result],
                uuid=f"r{i}",
                toolUseResult={"stdout": text, "stderr": "", "interrupted": False},
            )
        )
        if i == 0:
            lines.append("")
            lines.append(event("user", "side quest", isSidechain=True, uuid="s0"))
    lines.append(event("assistant", [{"type": "text", "text": "done"}], uuid="end"))
    return (
        "\n".join(
            x if isinstance(x, str) else json.dumps(x, ensure_ascii=False, separators=(", ", ": "))
            for x in lines
        )
        + "\n"
    )


def test_cleared_results_inputs_and_tool_use_result_are_rewritten() -> None:
    text = session([f"line {i} é\n" * 300 for i in range(5)], extras=True)
    result = clear_tool_uses(
        read_claude_code(text), trigger_tokens=0, keep_last=2, clear_inputs=True
    )
    assert result.cleared_tool_uses == 3
    out = check_patch(text, result.transcript)
    lines = out.split("\n")
    # untouched lines keep their original spacing; rewritten ones are compact
    assert lines[0] == text.split("\n")[0] and ", " in lines[0]
    changed = [n for n, (a, b) in enumerate(zip(text.split("\n"), lines, strict=True)) if a != b]
    assert len(changed) == 6  # 3 results + 3 inputs
    first = json.loads(lines[changed[1]])
    assert first["toolUseResult"] == DEFAULT_PLACEHOLDER
    assert first["message"]["content"][0] == {
        "tool_use_id": "toolu_0",
        "type": "tool_result",
        "content": DEFAULT_PLACEHOLDER,
        "is_error": True,
    }
    assert "é" not in lines[changed[1]] and "✓" in lines[1]
    use = json.loads(lines[changed[0]])["message"]["content"][0]
    assert use == {
        "type": "tool_use",
        "id": "toolu_0",
        "name": "Bash",
        "input": {},
        "caller": {"type": "direct"},
    }


def test_unchanged_transcript_gives_the_text_back() -> None:
    text = session(["x" * 2000] * 3)
    assert patch_claude_code(text, read_claude_code(text)) == text
    noop = clear_tool_uses(read_claude_code(text), trigger_tokens=10**9)
    assert not noop.applied and patch_claude_code(text, noop.transcript) == text
    no_newline = text.rstrip("\n")
    cleared = clear_tool_uses(read_claude_code(no_newline), trigger_tokens=0, keep_last=0)
    assert not check_patch(no_newline, cleared.transcript).endswith("\n")


def test_crlf_lines_and_lone_surrogates() -> None:
    lines = session(["out " * 500, "fine " * 500]).split("\n")
    n = next(n for n, line in enumerate(lines) if '"r0"' in line)
    ev = json.loads(lines[n])
    ev["slug"] = "cut emoji \ud83d"  # a lone surrogate elsewhere in the event to rewrite
    lines[n] = json.dumps(ev)
    text = "\r\n".join(lines)
    assert "\\ud83d" in text
    cleared = clear_tool_uses(read_claude_code(text), trigger_tokens=0, keep_last=0)
    out = patch_claude_code(text, cleared.transcript)
    out.encode("utf-8")  # nothing unencodable
    assert out.count("\r\n") == text.count("\r\n")
    assert "\\ud83d" in out.split("\r\n")[n]
    assert unmarked(read_claude_code(out).messages) == unmarked(cleared.transcript.messages)


@given(
    sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=8),
    keep_last=st.integers(0, 9),
    clear_inputs=st.booleans(),
    extras=st.booleans(),
)
def test_any_clearing_writes_back_exactly(
    sizes: list[int], keep_last: int, clear_inputs: bool, extras: bool
) -> None:
    text = session(["y" * n for n in sizes], extras=extras)
    result = clear_tool_uses(
        read_claude_code(text), trigger_tokens=0, keep_last=keep_last, clear_inputs=clear_inputs
    )
    check_patch(text, result.transcript)


# --------------------------------------------------------------------------- refused


def test_a_transcript_that_is_not_an_edit_of_the_text_is_refused() -> None:
    text = session(["z" * 1000] * 3)
    other = session(["z" * 1000] * 4)
    cleared = clear_tool_uses(read_claude_code(other), trigger_tokens=0, keep_last=0)
    with pytest.raises(FormatError, match="not in the session"):
        patch_claude_code(text, cleared.transcript)
    # a changed text message: nothing to write it into
    t = read_claude_code(text)
    changed = Transcript(
        (Message.text_message("user", "something else"), *t.messages[1:]), format="claude-code"
    )
    with pytest.raises(FormatError, match="message 0 differs"):
        patch_claude_code(text, changed)
    # a dropped message
    with pytest.raises(FormatError, match="differs"):
        patch_claude_code(text, Transcript(t.messages[:-1], format="claude-code"))


def test_repaired_and_duplicate_ids_are_refused() -> None:
    text = session(["w" * 1000] * 3)
    lines = text.split("\n")
    orphan = event("user", [{"type": "tool_result", "tool_use_id": "ghost", "content": "?"}])
    broken = "\n".join([*lines[:2], json.dumps(orphan), *lines[2:]])
    repaired, problems = repair_pairing(read_claude_code(broken))
    assert [p.kind.value for p in problems] == ["orphan_result"]
    with pytest.raises(FormatError, match="differs"):
        patch_claude_code(broken, repaired)
    # the last tool_result event once more, as another event (a replayed copy with
    # the same uuid is read once, and written alike: test_qa_s25_claude_code_replayed)
    again = json.loads(lines[-3])
    again["uuid"] = "another"
    twice = text + json.dumps(again) + "\n"
    t = read_claude_code(text)
    cleared = clear_tool_uses(t, trigger_tokens=0, keep_last=0).transcript
    with pytest.raises(FormatError, match="twice"):
        patch_claude_code(twice, cleared)
    dup = Transcript((*t.messages, *t.messages[1:3]), format="claude-code")
    with pytest.raises(FormatError, match="twice"):
        patch_claude_code(text, dup)


# --------------------------------------------------------------------------- real sessions


@pytest.mark.data
@pytest.mark.parametrize("path", claude_code_files(), ids=lambda p: p.name)
@pytest.mark.parametrize("keep_last", [0, 3])
def test_real_sessions_write_back_exactly(path: Path, keep_last: int, data_dir: Path) -> None:
    text = path.read_text(encoding="utf-8")
    t = read_claude_code(text)
    result = clear_tool_uses(t, trigger_tokens=0, keep_last=keep_last, clear_inputs=True)
    check_patch(text, result.transcript)


@pytest.mark.data
@pytest.mark.parametrize("path", long_sessions(), ids=lambda p: p.name)
def test_long_sessions_live_window_and_savings(path: Path, data_dir: Path) -> None:
    text = path.read_text(encoding="utf-8")
    t = read_claude_code(text)
    result = clear_tool_uses(t, trigger_tokens=0, keep_last=3)
    assert result.tokens_freed >= 0.5 * result.tokens_before
    out = check_patch(text, result.transcript)
    # the toolUseResult copies are cleared too: 53-63% of the bytes are left
    assert len(out.encode()) < 0.65 * len(text.encode())
    live = clear_tool_uses(t.live_window(), trigger_tokens=0, keep_last=3)
    assert live.applied
    out = check_patch(text, live.transcript, live=True)
    boundary = max(
        n
        for n, line in enumerate(text.split("\n"))
        if line and json.loads(line).get("subtype") == "compact_boundary"
    )
    assert out.split("\n")[: boundary + 1] == text.split("\n")[: boundary + 1]


def test_a_byte_order_mark_is_written_back(tmp_path: Path, data_dir: Path) -> None:
    from ctxwise.compaction import write_back_compaction
    from ctxwise.formats import read_transcript_file, write_back

    source = data_dir / "transcripts" / "claude_code" / "tool_heavy.jsonl"
    raw = source.read_bytes()
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + raw)
    file = read_transcript_file(path)
    assert file.bom and not file.text.startswith("\ufeff")
    cleared = clear_tool_uses(file.transcripts[0], trigger_tokens=0, keep_last=1).transcript
    data, shape = write_back(file, {0: cleared})
    assert shape == "session" and data.startswith(b"\xef\xbb\xbf")
    before, after = (b"\xef\xbb\xbf" + raw).split(b"\n"), data.split(b"\n")
    assert len(before) == len(after) and before[0] == after[0]
    plain, _ = write_back(read_transcript_file(source), {0: cleared})
    assert plain == data[3:]  # the mark is the only difference
    from ctxwise.compaction import compact

    result = compact(file.transcripts[0], keep_tail_turns=1)
    compacted, _ = write_back_compaction(file, result)
    assert compacted.startswith(b"\xef\xbb\xbf" + raw)  # every original line kept as it was
