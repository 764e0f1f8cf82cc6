"""Compacted Claude Code sessions are written back as Claude Code JSONL."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise.compaction import PINNED_HEADER, SUMMARY_HEADER, Compaction, compact
from ctxwise.compaction._claude_code import ClaudeCodeWriteError, compacted_claude_code
from ctxwise.formats.anthropic import decode_block, encode_block
from ctxwise.formats.claude_code import read_claude_code
from ctxwise.memory import Fact
from ctxwise.messages import Message, TextBlock, ToolResultBlock
from tests.conftest import TRANSCRIPTS, claude_code_files

_LINKS = ("parentUuid", "logicalParentUuid", "sourceToolAssistantUUID")


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def _view(messages: tuple[Message, ...] | list[Message]) -> list[tuple[str, str, Any]]:
    return [(m.role, m.kind, m.content) for m in messages]


def _conversational(e: dict[str, Any]) -> bool:
    """An event the model sees: a message, or a slash command's echo (sent as user text)."""
    return e["type"] in ("user", "assistant") or e.get("subtype") == "local_command"


def check_written(text: str, result: Compaction, out: str, *, copied: bool = True) -> None:
    """Every property of a compaction written back into its session file."""
    assert out.startswith(text)  # the original lines, byte-identical
    assert out.encode("utf-8").startswith(text.encode("utf-8"))
    original = _events(text)
    added = _events(out[len(text) :])
    boundary, summary, *tail = added
    back = read_claude_code(out)
    last = back.compactions[-1]
    assert last.trigger == "manual" and last.pre_tokens == result.tokens_before
    assert len(back.compactions) == len(read_claude_code(text).compactions) + 1
    # the live window: the summary message, then the tail, block for block
    live = back.live_window()
    expected = result.transcript.messages
    pinned = [b for m in expected if m.role == "system" for b in m.content]
    tail_msgs = [m for m in expected if m.role != "system"][1:]
    if copied:
        assert _view(live.messages[1:]) == _view(tail_msgs)
    else:  # one event per message: block extras only ctxwise reads are not written
        assert _view(live.messages[1:]) == [
            (m.role, m.kind, tuple(decode_block(encode_block(b)) for b in m.content))
            for m in tail_msgs
        ]
    head = live.messages[0]
    assert head.kind == "compact_summary" and head.role == "user"
    assert all(isinstance(b, TextBlock) for b in head.content)
    texts = [b.text for b in head.content if isinstance(b, TextBlock)]
    if result.facts or result.rules:
        assert len(pinned) == 1 and texts[0].startswith(PINNED_HEADER)
        assert isinstance(pinned[0], TextBlock) and head.content[0].text == pinned[0].text  # type: ignore[union-attr]
        # the pinned state travels as data on the summary event
        assert head.extra["ctxwise.pinned"] == pinned[0].extra["ctxwise.pinned"]
    else:
        assert not pinned
    assert texts[-1].startswith(SUMMARY_HEADER) and result.summary in texts[-1]
    assert live.problems("anthropic") == []
    # the events: Claude Code's compaction shape, one fresh uuid chain
    last_uuid = next(e["uuid"] for e in reversed(original) if "uuid" in e)
    assert boundary["type"] == "system" and boundary["subtype"] == "compact_boundary"
    assert boundary["parentUuid"] is None and boundary["logicalParentUuid"] == last_uuid
    assert boundary["content"] == "Conversation compacted"
    assert boundary["compactMetadata"] == {
        "trigger": "manual",
        "preTokens": result.tokens_before,
    }
    assert boundary["timestamp"] == next(
        e["timestamp"] for e in reversed(original) if "timestamp" in e
    )
    for key in ("sessionId", "cwd", "version", "gitBranch"):
        have = [e[key] for e in original if key in e]
        if have:
            assert boundary[key] == summary[key] == have[-1]
    assert summary["type"] == "user" and summary["isCompactSummary"] is True
    assert summary["parentUuid"] == boundary["uuid"]
    parent = summary["uuid"]
    for e in tail:
        assert _conversational(e) and e["parentUuid"] == parent
        parent = e["uuid"]
    uuids = [e["uuid"] for e in original + added if "uuid" in e]
    assert len(uuids) == len(set(uuids))
    # the tail: copies of the original events from the tail's first one on (no
    # bookkeeping, no sidechain), or, for a repaired tail, one event per message
    has_main = any(
        e["type"] in ("user", "assistant") and not e.get("isSidechain") for e in original
    )
    strip = set(_LINKS) | {"uuid"}

    def bare(e: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in e.items() if k not in strip}

    starts = [i for i, e in enumerate(original) if bare(e) == bare(tail[0])] if tail else []
    kept = [
        e
        for e in (original[starts[-1] :] if starts else [])
        if _conversational(e) and not (has_main and e.get("isSidechain"))
    ]
    assert ([bare(e) for e in kept] == [bare(e) for e in tail]) == copied
    assert len(tail) >= len(tail_msgs)


@pytest.mark.data
@pytest.mark.parametrize("turns", [1, 2])
def test_every_session_round_trips_as_claude_code(data_dir: Path, turns: int) -> None:
    written = 0
    for path in claude_code_files():
        text = path.read_text(encoding="utf-8")
        result = compact(read_claude_code(text, source=str(path)), keep_tail_turns=turns)
        out = compacted_claude_code(text, result, source=str(path))
        if not result.compacted:
            assert out == text
            continue
        check_written(text, result, out)
        written += 1
    assert written >= 5


@pytest.mark.data
def test_long_session_at_a_token_budget_keeps_tail_events_verbatim(data_dir: Path) -> None:
    path = TRANSCRIPTS / "claude_code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    text = path.read_text(encoding="utf-8")
    result = compact(read_claude_code(text), keep_tail_tokens=16_000)
    assert result.compacted and result.mid_turn
    out = compacted_claude_code(text, result)
    check_written(text, result, out)
    # deterministic: the same input writes the same bytes (no clock, no randomness)
    assert compacted_claude_code(text, result) == out
    # the written file compacts again, on top of the new boundary: its live window
    # (the whole file holds the tail twice, so its tool ids are issued twice there)
    again = compact(read_claude_code(out).live_window(), keep_tail_turns=1)
    assert again.compacted and again.summarized_messages >= 2
    check_written(out, again, compacted_claude_code(out, again))


@pytest.mark.data
@settings(max_examples=12)
@given(budget=st.integers(min_value=500, max_value=60_000))
def test_property_any_budget_round_trips(budget: int) -> None:
    base = TRANSCRIPTS / "claude_code"
    if not base.is_dir():
        pytest.skip("shared data not found")
    for name in ("subagent.jsonl", "tool_heavy.jsonl"):
        text = (base / name).read_text(encoding="utf-8")
        result = compact(read_claude_code(text), keep_tail_tokens=budget)
        out = compacted_claude_code(text, result)
        if result.compacted:
            check_written(text, result, out)
        else:
            assert out == text


def _event(uid: str, parent: str | None, etype: str, content: Any, **more: Any) -> str:
    message: dict[str, Any] = {"role": etype, "content": content}
    if "mid" in more:
        message["id"] = more.pop("mid")
    return json.dumps(
        {
            "parentUuid": parent,
            "isSidechain": False,
            "sessionId": "s-1",
            "cwd": "/repo",
            "version": "2.1.39",
            "gitBranch": "main",
            "type": etype,
            "message": message,
            "uuid": uid,
            "timestamp": f"2026-02-11T21:00:0{uid[-1]}.000Z",
            **more,
        }
    )


def unanswered_session() -> str:
    """A session whose last tool call was never answered: only --repair compacts it."""
    lines = [
        _event("u1", None, "user", "Refund order 4417? Do not refund order 4417 yet."),
        _event(
            "u2",
            "u1",
            "assistant",
            [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"id": "4417"}}],
            mid="msg_1",
        ),
        _event(
            "u3",
            "u2",
            "user",
            [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "4417 pending"}],
        ),
        _event("u4", "u3", "assistant", [{"type": "text", "text": "4417 is pending."}], mid="m2"),
        _event("u5", "u4", "user", "Check the address."),
        _event(
            "u6",
            "u5",
            "assistant",
            [{"type": "tool_use", "id": "toolu_2", "name": "check", "input": {}}],
            mid="msg_3",
        ),
        _event("u7", "u6", "user", "Still there?"),
    ]
    return "\n".join(lines) + "\n"


def test_a_repaired_tail_is_written_from_the_compacted_messages() -> None:
    text = unanswered_session()
    result = compact(read_claude_code(text), keep_tail_turns=1, repair=True)
    assert result.compacted and result.repaired
    out = compacted_claude_code(text, result)
    check_written(text, result, out, copied=False)
    live = read_claude_code(out).live_window()
    answered = [b for m in live.messages for b in m.content if isinstance(b, ToolResultBlock)]
    assert [b.tool_use_id for b in answered] == ["toolu_2"]


def test_nothing_compacted_leaves_the_file_unchanged() -> None:
    text = unanswered_session().replace("Still there?", "Thanks")
    text = "\n".join(line for line in text.split("\n") if '"u6"' not in line)
    result = compact(read_claude_code(text), keep_tail_turns=5)
    assert not result.compacted
    assert compacted_claude_code(text, result) == text
    noop = compact(read_claude_code(unanswered_session()), keep_tail_turns=5, repair=True)
    with pytest.raises(ClaudeCodeWriteError) as err:
        compacted_claude_code(unanswered_session(), noop, source="s.jsonl")
    assert err.value.source == "s.jsonl" and err.value.repaired


def test_a_file_without_a_final_newline_gains_one() -> None:
    text = unanswered_session()
    text = "\n".join(line for line in text.split("\n") if '"u6"' not in line).rstrip("\n")
    result = compact(read_claude_code(text), keep_tail_turns=1)
    assert result.compacted
    out = compacted_claude_code(text, result)
    assert out.startswith(text + "\n")
    check_written(text + "\n", result, out)


@pytest.mark.data
def test_pinned_facts_and_rules_survive_a_second_compaction_of_the_written_file(
    data_dir: Path,
) -> None:
    text = next(p for p in claude_code_files() if p.stat().st_size > 1_000_000).read_text(
        encoding="utf-8"
    )
    first = compact(
        read_claude_code(text).live_window(),
        keep_tail_turns=2,
        rules=["Never push to main."],
        facts=[Fact("ticket", "GH-1234", source="crm"), Fact("branch", "fix/session-live")],
    )
    assert first.facts
    written = compacted_claude_code(text, first)
    live = read_claude_code(written).live_window()
    assert live.messages[0].kind == "compact_summary"
    second = compact(live, keep_tail_turns=1)
    assert second.compacted
    # every fact survives (a newer statement in the new range may update its value)
    assert {f.key for f in first.facts} <= {f.key for f in second.facts}
    assert [r.text for r in second.rules][:1] == ["Never push to main."]
    # the old pinned block is not fed back into the summary as text
    assert PINNED_HEADER not in second.summary


def test_a_window_of_only_the_task_is_written_and_compacts_again() -> None:
    text = unanswered_session().replace("Still there?", "Thanks")
    text = "\n".join(line for line in text.split("\n") if '"u6"' not in line)
    t = read_claude_code(text)
    task = t.messages[-1]
    from ctxwise import CharCounter

    budget = CharCounter().count_messages((task,))
    bare = compact(t, budget=budget, extract=False)
    assert bare.compacted and bare.summary == "" and bare.transcript.messages == (task,)
    out = compacted_claude_code(text, bare)
    live = read_claude_code(out).live_window()
    assert live.messages[0].kind == "compact_summary" and live.messages[0].text == task.text
    # a later compaction keeps the task: the summary message holds it as written
    grown = replace(live, messages=(*live.messages, Message.text_message("assistant", "ok " * 40)))
    again = compact(grown, budget=budget + 12, extract=False)
    assert task.text in "\n".join(m.text for m in again.transcript.messages)
