"""Clearing: Anthropic's context-edit semantics, pairing safety, codec round trips."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise import (
    ClearedItem,
    EditParameterError,
    EditResult,
    Message,
    PairingError,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    UsageError,
    WordCounter,
    clear_thinking,
    clear_tool_uses,
    context_management,
    read_transcript,
    read_transcripts,
    repair_pairing,
)
from ctxwise.editing import (
    CONTEXT_MANAGEMENT_BETA,
    DEFAULT_PLACEHOLDER,
    MISSING_RESULT_TEXT,
)
from ctxwise.formats import anthropic, openai
from ctxwise.messages import ContentBlock, Placement, ProblemKind
from tests.conftest import TAU, claude_code_files, long_sessions

# --------------------------------------------------------------------------- helpers


def session(
    n: int = 6,
    *,
    size: int = 400,
    names: tuple[str, ...] = ("Read",),
    thinking: bool = False,
) -> Transcript:
    """user, then n × (assistant tool_use, user tool_result), then a closing answer."""
    msgs = [Message.text_message("user", "fix the bug")]
    for i in range(n):
        blocks: list[ContentBlock] = []
        if thinking:
            blocks.append(ThinkingBlock(f"thinking about step {i} " * 10, f"sig{i}"))
        blocks.append(ToolUseBlock(f"toolu_{i}", names[i % len(names)], {"path": f"/src/f{i}.py"}))
        msgs.append(Message("assistant", tuple(blocks)))
        msgs.append(
            Message("user", (ToolResultBlock(f"toolu_{i}", f"line {i} of output " * size),))
        )
    msgs.append(Message("assistant", (TextBlock("done"),)))
    return Transcript(
        tuple(msgs), {"model": "claude-sonnet-4-5", "max_tokens": 1024}, format="anthropic"
    )


def result_of(t: Transcript, tool_use_id: str) -> ToolResultBlock:
    for m in t.messages:
        for b in m.content:
            if isinstance(b, ToolResultBlock) and b.tool_use_id == tool_use_id:
                return b
    raise AssertionError(tool_use_id)


def use_of(t: Transcript, tool_use_id: str) -> ToolUseBlock:
    for m in t.messages:
        for b in m.content:
            if isinstance(b, ToolUseBlock) and b.id == tool_use_id:
                return b
    raise AssertionError(tool_use_id)


def is_cleared(t: Transcript, tool_use_id: str, placeholder: str = DEFAULT_PLACEHOLDER) -> bool:
    return result_of(t, tool_use_id).content == placeholder


def placement(t: Transcript) -> Placement:
    return "openai" if t.format == "openai" else "anthropic"


def _clean(block: ContentBlock) -> Any:
    """A block without ctxwise's own marks (no codec writes them)."""
    if isinstance(block, TextBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock):
        extra = {k: v for k, v in block.extra.items() if not k.startswith("ctxwise.")}
        return replace(block, extra=extra)
    return block


def assert_valid_and_round_trips(t: Transcript) -> None:
    """Zero pairing problems, and a clean trip through the transcript's own codec."""
    rule = placement(t)
    assert t.problems(rule) == [], t.problems(rule)[:3]
    if rule == "openai":
        wire = json.loads(json.dumps(openai.encode_messages(t)))
        back = openai.decode_messages(wire)
        assert openai.encode_messages(back) == wire
    else:
        wire = json.loads(json.dumps(anthropic.encode_request(t)))
        back = anthropic.decode_request(wire)
        assert anthropic.encode_request(back) == wire
    assert back.problems(rule) == []
    # the neutral content survives too (reader-only metadata aside)
    assert [(m.role, [_clean(b) for b in m.content]) for m in back.messages] == [
        (m.role, [_clean(b) for b in m.content]) for m in t.messages if m.content
    ]


# --------------------------------------------------------------------------- clear_tool_uses


def test_nothing_happens_at_or_below_the_trigger() -> None:
    t = session()
    total = WordCounter().count_messages(t.messages)
    r = clear_tool_uses(t, trigger_tokens=total, counter=WordCounter())
    assert not r.applied and r.reason == "below_trigger" and r.transcript is t
    assert r.tokens_before == r.tokens_after == total and r.cleared == ()
    fired = clear_tool_uses(t, trigger_tokens=total - 1, counter=WordCounter())
    assert fired.applied and fired.counter == "word"


def test_oldest_results_cleared_last_keep_last_kept() -> None:
    t = session(6)
    r = clear_tool_uses(t, trigger_tokens=0, keep_last=3)
    assert r.applied and r.reason is None
    assert [i.tool_use_id for i in r.cleared] == ["toolu_0", "toolu_1", "toolu_2"]
    assert all(i.kind == "tool_result" and i.tool_name == "Read" for i in r.cleared)
    assert [i.message_index for i in r.cleared] == [2, 4, 6]
    for k in range(3):
        assert is_cleared(r.transcript, f"toolu_{k}")
        # the call and its id stay, untouched
        assert use_of(r.transcript, f"toolu_{k}") == use_of(t, f"toolu_{k}")
    for k in range(3, 6):
        assert result_of(r.transcript, f"toolu_{k}") == result_of(t, f"toolu_{k}")
    assert r.tokens_freed == r.tokens_before - r.tokens_after == sum(i.tokens for i in r.cleared)
    assert r.tokens_freed > 0.4 * r.tokens_before
    assert r.cleared_tool_uses == 3
    assert_valid_and_round_trips(r.transcript)
    # params and format are kept, so the request writes back whole
    assert anthropic.encode_request(r.transcript)["model"] == "claude-sonnet-4-5"


def test_keep_last_zero_clears_all_and_large_keep_clears_none() -> None:
    t = session(4)
    assert clear_tool_uses(t, trigger_tokens=0, keep_last=0).cleared_tool_uses == 4
    r = clear_tool_uses(t, trigger_tokens=0, keep_last=4)
    assert not r.applied and r.reason == "nothing_to_clear" and r.transcript is t


def test_excluded_tools_are_never_cleared_but_count_as_kept_uses() -> None:
    t = session(6, names=("Read", "memory"))
    r = clear_tool_uses(t, trigger_tokens=0, keep_last=2, exclude_tools=["memory"])
    # uses 0..3 are older than the last 2; the memory ones (1, 3) stay
    assert [i.tool_use_id for i in r.cleared] == ["toolu_0", "toolu_2"]
    assert not is_cleared(r.transcript, "toolu_1") and not is_cleared(r.transcript, "toolu_3")
    assert "2 excluded" in r.detail


def test_clear_at_least_leaves_the_transcript_when_it_would_free_too_little() -> None:
    t = session(4)
    full = clear_tool_uses(t, trigger_tokens=0, keep_last=1)
    r = clear_tool_uses(t, trigger_tokens=0, keep_last=1, clear_at_least=full.tokens_freed + 1)
    assert not r.applied and r.reason == "below_clear_at_least" and r.transcript is t
    assert "prompt cache" in r.detail and f"{full.tokens_freed:,}" in r.detail
    assert r.tokens_after == r.tokens_before and r.cleared == ()
    ok = clear_tool_uses(t, trigger_tokens=0, keep_last=1, clear_at_least=full.tokens_freed)
    assert ok.applied and ok.tokens_freed == full.tokens_freed


def test_clear_inputs_replaces_cleared_calls_inputs() -> None:
    t = session(5, names=("Write", "Read"))
    r = clear_tool_uses(t, trigger_tokens=0, keep_last=2, clear_inputs=True)
    for k in range(3):
        assert use_of(r.transcript, f"toolu_{k}").input == {}
        assert use_of(r.transcript, f"toolu_{k}").id == f"toolu_{k}"
    assert use_of(r.transcript, "toolu_3").input == {"path": "/src/f3.py"}
    kinds = [(i.kind, i.tool_use_id) for i in r.cleared]
    assert ("tool_input", "toolu_0") in kinds and ("tool_result", "toolu_0") in kinds
    assert r.cleared_tool_uses == 3
    only = clear_tool_uses(t, trigger_tokens=0, keep_last=2, clear_inputs=["Write"])
    assert use_of(only.transcript, "toolu_0").input == {}  # Write
    assert use_of(only.transcript, "toolu_1").input == {"path": "/src/f1.py"}  # Read
    assert_valid_and_round_trips(r.transcript)


def test_idempotent_and_already_cleared_results_are_not_recounted() -> None:
    t = session(6)
    once = clear_tool_uses(t, trigger_tokens=0, keep_last=3)
    twice = clear_tool_uses(once.transcript, trigger_tokens=0, keep_last=3)
    assert not twice.applied and twice.reason == "nothing_to_clear"
    assert "3 already cleared" in twice.detail
    # also after a trip through the wire format, where ctxwise's mark is gone
    wire = json.loads(json.dumps(anthropic.encode_request(once.transcript)))
    again = clear_tool_uses(anthropic.decode_request(wire), trigger_tokens=0, keep_last=3)
    assert again.reason == "nothing_to_clear"
    # moving the window on clears only the newly old ones
    more = clear_tool_uses(once.transcript, trigger_tokens=0, keep_last=1)
    assert [i.tool_use_id for i in more.cleared] == ["toolu_3", "toolu_4"]


def test_custom_placeholder_and_small_results_left_alone() -> None:
    t = session(4)
    msgs = list(t.messages)
    msgs[2] = Message("user", (ToolResultBlock("toolu_0", "ok", is_error=True),))
    t = replace(t, messages=tuple(msgs))
    r = clear_tool_uses(t, trigger_tokens=0, keep_last=1, placeholder="[gone]")
    assert result_of(r.transcript, "toolu_0").content == "ok"  # smaller than the placeholder
    assert is_cleared(r.transcript, "toolu_1", "[gone]")
    assert "1 no larger than the placeholder" in r.detail
    big_error = replace(
        t,
        messages=(
            *t.messages[:2],
            Message("user", (ToolResultBlock("toolu_0", "Traceback " * 300, is_error=True),)),
            *t.messages[3:],
        ),
    )
    e = clear_tool_uses(big_error, trigger_tokens=0, keep_last=1)
    assert result_of(e.transcript, "toolu_0").is_error is True
    assert is_cleared(e.transcript, "toolu_0")


def test_cleared_results_encode_through_both_codecs() -> None:
    blocks = (TextBlock("a screenshot"), TextBlock("x" * 4000))
    t = session(3)
    msgs = list(t.messages)
    msgs[2] = Message(
        "user",
        (
            ToolResultBlock(
                "toolu_0", blocks, extra={"anthropic.cache_control": {"type": "ephemeral"}}
            ),
        ),
    )
    t = replace(t, messages=tuple(msgs))
    r = clear_tool_uses(t, trigger_tokens=0, keep_last=1)
    cleared = result_of(r.transcript, "toolu_0")
    assert cleared.content == DEFAULT_PLACEHOLDER
    wire = anthropic.encode_request(r.transcript)["messages"][2]["content"][0]
    assert wire == {
        "type": "tool_result",
        "tool_use_id": "toolu_0",
        "content": DEFAULT_PLACEHOLDER,
        "cache_control": {"type": "ephemeral"},
    }
    oa = openai.encode_messages(r.transcript)
    assert {"role": "tool", "tool_call_id": "toolu_0", "content": DEFAULT_PLACEHOLDER} in oa
    assert_valid_and_round_trips(r.transcript)


def test_openai_cleared_call_with_unparsable_arguments_writes_empty_object() -> None:
    raw = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{oops"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "result " * 200},
        {"role": "assistant", "content": "done"},
    ]
    t = openai.decode_messages(raw)
    # unparsable arguments decode to {} (nothing to clear): give the call an input
    msgs = list(t.messages)
    call = msgs[1].content[0]
    assert isinstance(call, ToolUseBlock)
    msgs[1] = replace(msgs[1], content=(replace(call, input={"q": "secret"}),))
    t = replace(t, messages=tuple(msgs))
    r = clear_tool_uses(t, trigger_tokens=0, keep_last=0, clear_inputs=True)
    out = openai.encode_messages(r.transcript)
    assert out[1]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert out[2]["content"] == DEFAULT_PLACEHOLDER
    assert_valid_and_round_trips(r.transcript)


def test_empty_transcript_is_a_no_op() -> None:
    for fn in (
        lambda t: clear_tool_uses(t, trigger_tokens=0),
        lambda t: clear_thinking(t),
    ):
        r = fn(Transcript(()))
        assert not r.applied and r.reason == "empty" and r.tokens_before == 0


def test_to_dict() -> None:
    r = clear_tool_uses(session(5), trigger_tokens=0)
    d = r.to_dict()
    assert set(d) == {
        "strategy",
        "applied",
        "reason",
        "detail",
        "counter",
        "tokens_before",
        "tokens_after",
        "tokens_freed",
        "cleared_tool_uses",
        "cleared",
        "repaired",
    }
    assert d["strategy"] == "clear_tool_uses" and d["counter"] == "char"
    assert d["cleared"][0] == {
        "kind": "tool_result",
        "message_index": 2,
        "tool_use_id": "toolu_0",
        "tool_name": "Read",
        "tokens": r.cleared[0].tokens,
    }
    json.dumps(d)
    assert isinstance(r, EditResult) and isinstance(r.cleared[0], ClearedItem)


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"trigger_tokens": -1}, "trigger_tokens"),
        ({"trigger_tokens": 1.5}, "trigger_tokens"),
        ({"trigger_tokens": True}, "trigger_tokens"),
        ({"trigger_tokens": 0, "keep_last": -1}, "keep_last"),
        ({"trigger_tokens": 0, "keep_last": False}, "keep_last"),
        ({"trigger_tokens": 0, "clear_at_least": -5}, "clear_at_least"),
        ({"trigger_tokens": 0, "exclude_tools": "Read"}, "exclude_tools"),
        ({"trigger_tokens": 0, "exclude_tools": [""]}, "exclude_tools"),
        ({"trigger_tokens": 0, "clear_inputs": "Read"}, "clear_inputs"),
        ({"trigger_tokens": 0, "placeholder": "  "}, "placeholder"),
        ({"trigger_tokens": 0, "placement": "gemini"}, "placement"),
    ],
)
def test_bad_parameters_are_usage_errors(kwargs: dict[str, Any], parameter: str) -> None:
    with pytest.raises(EditParameterError) as info:
        clear_tool_uses(session(2), **kwargs)
    assert isinstance(info.value, UsageError)
    assert info.value.parameter == parameter and parameter in str(info.value)


def test_bad_thinking_parameters() -> None:
    for bad in (0, -1, "some", 1.0):
        with pytest.raises(EditParameterError) as info:
            clear_thinking(session(2), bad)  # type: ignore[arg-type]
        assert info.value.parameter == "keep_turns"
    with pytest.raises(EditParameterError):
        clear_tool_uses("not a transcript", trigger_tokens=0)  # type: ignore[arg-type]


def test_a_malformed_message_is_a_usage_error_naming_it() -> None:
    """A tool input that is not JSON data (a date) raised a bare TypeError from the
    token count; the Engine refuses such a message, and so do the edits now."""
    import datetime

    bad = Message(
        "assistant", (ToolUseBlock("toolu_0", "Read", {"when": datetime.date(2026, 1, 2)}),)
    )
    t = session(3)
    t = replace(t, messages=(*t.messages[:1], bad, *t.messages[2:]))
    for edit in (
        lambda: clear_tool_uses(t, trigger_tokens=0, keep_last=0),
        lambda: clear_thinking(t),
    ):
        with pytest.raises(
            UsageError, match=r"message 1: content\[0\] is a ToolUseBlock whose input"
        ):
            edit()
    good = session(3)
    odd = replace(good, messages=(*good.messages, {"role": "user", "content": "hi"}))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="not a ctxwise Message"):
        clear_tool_uses(odd, trigger_tokens=0)


# --------------------------------------------------------------------------- pairing


def _with(t: Transcript, *msgs: Message) -> Transcript:
    return replace(t, messages=msgs)


def test_orphan_results_refused_then_repaired() -> None:
    t = session(3)
    orphan = Message("user", (ToolResultBlock("toolu_ghost", "who called me"), TextBlock("and hi")))
    bad = _with(t, *t.messages[:3], orphan, *t.messages[3:])
    with pytest.raises(PairingError) as info:
        clear_tool_uses(bad, trigger_tokens=0)
    err = info.value
    assert isinstance(err, UsageError) and err.placement == "anthropic"
    assert [p.kind for p in err.problems] == [ProblemKind.ORPHAN_RESULT]
    assert "toolu_ghost" in str(err) and "repair=True" in str(err) and "\n" not in str(err)
    r = clear_tool_uses(bad, trigger_tokens=0, keep_last=1, repair=True)
    assert [p.kind for p in r.repaired] == [ProblemKind.ORPHAN_RESULT]
    assert all(b.tool_use_id != "toolu_ghost" for m in r.transcript for b in m.tool_results)
    assert any(m.text == "and hi" for m in r.transcript)  # only the orphan block went
    assert r.to_dict()["repaired"][0]["kind"] == "orphan_result"
    assert_valid_and_round_trips(r.transcript)


def test_unanswered_calls_get_an_error_result() -> None:
    t = session(3)
    # drop the result of toolu_1, and add a call at the end nothing answers
    msgs = [m for m in t.messages if not any(b.tool_use_id == "toolu_1" for b in m.tool_results)]
    msgs.append(Message("assistant", (ToolUseBlock("toolu_9", "Bash", {"cmd": "ls"}),)))
    bad = _with(t, *msgs)
    fixed, problems = repair_pairing(bad)
    assert sorted(p.tool_use_id for p in problems) == ["toolu_1", "toolu_9"]
    for tid in ("toolu_1", "toolu_9"):
        r = result_of(fixed, tid)
        assert r.is_error is True and r.content == MISSING_RESULT_TEXT
    assert_valid_and_round_trips(fixed)


def test_missing_result_goes_first_in_the_next_user_message() -> None:
    t = Transcript(
        (
            Message.text_message("user", "go"),
            Message("assistant", (ToolUseBlock("a", "f", {}), ToolUseBlock("b", "f", {}))),
            Message("user", (ToolResultBlock("a", "1"), TextBlock("note"))),
        ),
        format="anthropic",
    )
    fixed, _ = repair_pairing(t)
    assert [type(b).__name__ for b in fixed.messages[2].content] == [
        "ToolResultBlock",
        "ToolResultBlock",
        "TextBlock",
    ]
    assert_valid_and_round_trips(fixed)


def test_reused_ids_are_renamed_with_their_answers() -> None:
    raw = [
        {"role": "system", "content": "agent"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "first " * 100},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "second " * 100},
        {"role": "assistant", "content": None, "tool_calls": [_call("c2")]},
        {"role": "tool", "tool_call_id": "c2", "content": "third " * 100},
        {"role": "assistant", "content": "done"},
    ]
    t = openai.decode_messages(raw)
    with pytest.raises(PairingError) as info:
        clear_tool_uses(t, trigger_tokens=0)
    assert info.value.placement == "openai"
    assert [p.kind for p in info.value.problems] == [ProblemKind.DUPLICATE_ID]
    r = clear_tool_uses(t, trigger_tokens=0, keep_last=1, repair=True)
    out = openai.encode_messages(r.transcript)
    assert out[4]["tool_calls"][0]["id"] == out[5]["tool_call_id"] == "c1_2"
    assert out[2]["tool_calls"][0]["id"] == out[3]["tool_call_id"] == "c1"
    assert out[3]["content"] == out[5]["content"] == DEFAULT_PLACEHOLDER
    assert out[7]["content"] == "third " * 100
    assert_valid_and_round_trips(r.transcript)


def _call(cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


def test_openai_missing_results_go_after_the_tool_messages() -> None:
    raw = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_call("a"), _call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "user", "content": "next"},
    ]
    fixed, problems = repair_pairing(openai.decode_messages(raw))
    assert [p.kind for p in problems] == [ProblemKind.UNANSWERED_USE]
    out = openai.encode_messages(fixed)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "user"]
    assert out[3] == {"role": "tool", "tool_call_id": "b", "content": MISSING_RESULT_TEXT}
    assert_valid_and_round_trips(fixed)


def test_misplaced_results_cannot_be_repaired() -> None:
    t = Transcript(
        (
            Message.text_message("user", "go"),
            Message("assistant", (ToolUseBlock("a", "f", {}),)),
            Message.text_message("user", "wait"),
            Message("user", (ToolResultBlock("a", "late"),)),
        ),
        format="anthropic",
    )
    with pytest.raises(PairingError) as info:
        clear_tool_uses(t, trigger_tokens=0, repair=True)
    assert info.value.problems[0].kind is ProblemKind.MISPLACED_RESULT
    assert "cannot be repaired" in str(info.value)
    # under the loose rule the same transcript is valid
    assert clear_tool_uses(t, trigger_tokens=0, placement="loose").reason == "nothing_to_clear"


def test_repair_of_a_valid_transcript_changes_nothing() -> None:
    t = session(3)
    fixed, problems = repair_pairing(t)
    assert fixed is t and problems == ()


# --------------------------------------------------------------------------- clear_thinking


def thinking_session() -> Transcript:
    """Three user turns; the last is a tool loop over two assistant messages."""

    def think(s: str) -> ThinkingBlock:
        return ThinkingBlock(s * 40, "sig")

    return Transcript(
        (
            Message.text_message("user", "q1"),
            Message("assistant", (think("a"), TextBlock("answer 1"))),
            Message.text_message("user", "q2"),
            Message("assistant", (think("b"), ThinkingBlock("xx", None, True))),
            Message("assistant", (TextBlock("answer 2"),)),
            Message.text_message("user", "q3"),
            Message("assistant", (think("c"), ToolUseBlock("t1", "Read", {}))),
            Message("user", (ToolResultBlock("t1", "file"),)),
            Message("assistant", (think("d"), ToolUseBlock("t2", "Read", {}))),
            Message("user", (ToolResultBlock("t2", "file"),)),
        ),
        format="anthropic",
    )


def test_clear_thinking_keeps_the_last_turn_whole() -> None:
    t = thinking_session()
    r = clear_thinking(t)
    assert r.applied and r.strategy == "clear_thinking"
    kept = [b for m in r.transcript for b in m.content if isinstance(b, ThinkingBlock)]
    # the whole last turn (a tool loop over two assistant messages) keeps its thinking
    assert [b.thinking[0] for b in kept] == ["c", "d"]
    assert [(i.kind, i.message_index) for i in r.cleared] == [
        ("thinking", 1),
        ("thinking", 3),
        ("thinking", 3),
    ]
    # message 3 held only thinking and is gone; the rest is in order
    assert len(r.transcript) == len(t) - 1
    # the removed message's framing (4 tokens with CharCounter) is freed too
    assert r.tokens_freed == sum(i.tokens for i in r.cleared) + 4 > 4
    assert_valid_and_round_trips(r.transcript)
    two = clear_thinking(t, 2)
    assert [i.message_index for i in two.cleared] == [1]
    assert clear_thinking(t, "all").reason == "keep_all"
    assert clear_thinking(t, 3).reason == "nothing_to_clear"
    assert clear_thinking(r.transcript).reason == "nothing_to_clear"  # idempotent


def test_a_message_left_with_only_blank_text_goes_with_its_thinking() -> None:
    """Claude Code records a "\\n\\n" text block before a reply's thinking: clearing the
    thinking left an assistant message of blank text, which the API refuses."""
    t = Transcript(
        (
            Message.text_message("user", "first"),
            Message("assistant", (TextBlock("\n\n"), ThinkingBlock("plan " * 20, "s1"))),
            Message("assistant", (TextBlock("The answer."),)),
            Message.text_message("user", "second"),
            Message("assistant", (TextBlock("\n\n"), ThinkingBlock("more " * 20, "s2"))),
            Message("assistant", (TextBlock("Another answer."),)),
        ),
        format="anthropic",
    )
    r = clear_thinking(t)
    assert [m.text for m in r.transcript.messages] == [
        "first",
        "The answer.",
        "second",
        "\n\n",
        "Another answer.",
    ]
    assert [(i.kind, i.message_index) for i in r.cleared] == [("thinking", 1)]
    assert r.tokens_after < r.tokens_before and r.transcript.problems("anthropic") == []


# --------------------------------------------------------------------------- server side


def test_context_management_renders_the_api_block() -> None:
    assert CONTEXT_MANAGEMENT_BETA == "context-management-2025-06-27"
    assert context_management() == {
        "edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 3}}]
    }
    block = context_management(
        trigger_tokens=30000,
        keep_last=5,
        clear_at_least=5000,
        exclude_tools=["web_search", "memory"],
        clear_inputs=True,
        keep_thinking_turns=2,
    )
    assert block == {
        "edits": [
            {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}},
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": 30000},
                "keep": {"type": "tool_uses", "value": 5},
                "clear_at_least": {"type": "input_tokens", "value": 5000},
                "exclude_tools": ["memory", "web_search"],
                "clear_tool_inputs": True,
            },
        ]
    }
    by_uses = context_management(
        trigger_tool_uses=10, clear_inputs=["Write"], keep_thinking_turns="all"
    )
    assert by_uses["edits"][0] == {"type": "clear_thinking_20251015", "keep": "all"}
    assert by_uses["edits"][1]["trigger"] == {"type": "tool_uses", "value": 10}
    assert by_uses["edits"][1]["clear_tool_inputs"] == ["Write"]
    for bad in (
        {"trigger_tokens": 1, "trigger_tool_uses": 1},
        {"trigger_tokens": 0},
        {"keep_last": -1},
        {"keep_thinking_turns": 0},
        {"exclude_tools": "memory"},
    ):
        with pytest.raises(EditParameterError):
            context_management(**bad)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- properties

text = st.text(max_size=40)
ident = st.text(alphabet="abcdef0123456789", min_size=1, max_size=6)
names = st.sampled_from(["Read", "Bash", "Write", "memory"])
# mostly results worth clearing, some smaller than the placeholder
output = st.text(min_size=5, max_size=40).map(lambda s: s * 20) | text


@st.composite
def anthropic_sessions(draw: st.DrawFn) -> Transcript:
    """Valid Anthropic transcripts: tool loops with thinking, errors, media-free results."""
    msgs: list[Message] = []
    if draw(st.booleans()):
        msgs.append(Message("system", (TextBlock(draw(text)),), plain=True))
    n = 0
    for _turn in range(draw(st.integers(0, 4))):
        msgs.append(Message.text_message("user", draw(text)))
        for _step in range(draw(st.integers(0, 3))):
            blocks: list[ContentBlock] = []
            if draw(st.booleans()):
                blocks.append(ThinkingBlock(draw(text), draw(st.none() | ident)))
            if draw(st.booleans()):
                blocks.append(TextBlock(draw(text)))
            uses = [
                ToolUseBlock(f"toolu_{(n := n + 1)}", draw(names), {"q": draw(text)})
                for _ in range(draw(st.integers(1, 3)))
            ]
            msgs.append(Message("assistant", tuple(blocks) + tuple(uses)))
            results: list[ContentBlock] = [
                ToolResultBlock(
                    u.id,
                    draw(output | st.lists(output.map(TextBlock), max_size=2).map(tuple)),
                    draw(st.none() | st.booleans()),
                )
                for u in uses
            ]
            if draw(st.booleans()):
                results.append(TextBlock(draw(text)))
            msgs.append(Message("user", tuple(results)))
        if draw(st.booleans()):
            msgs.append(Message("assistant", (TextBlock(draw(text) or "ok"),)))
    return Transcript(tuple(msgs), format="anthropic")


@st.composite
def openai_sessions(draw: st.DrawFn) -> Transcript:
    raw: list[dict[str, Any]] = [{"role": "system", "content": draw(text)}]
    n = 0
    for _ in range(draw(st.integers(0, 5))):
        raw.append({"role": "user", "content": draw(text)})
        for _ in range(draw(st.integers(0, 2))):
            calls = [
                {
                    "id": f"call_{(n := n + 1)}",
                    "type": "function",
                    "function": {"name": draw(names), "arguments": json.dumps({"q": draw(text)})},
                }
                for _ in range(draw(st.integers(1, 3)))
            ]
            raw.append(
                {"role": "assistant", "content": draw(st.none() | text), "tool_calls": calls}
            )
            raw.extend(
                {"role": "tool", "tool_call_id": c["id"], "content": draw(output)} for c in calls
            )
        raw.append({"role": "assistant", "content": draw(text)})
    return openai.decode_messages(raw)


params = st.fixed_dictionaries(
    {
        "trigger_tokens": st.just(0) | st.integers(0, 400),
        "keep_last": st.integers(0, 6),
        "clear_at_least": st.just(0) | st.integers(0, 200),
        "exclude_tools": st.lists(names, max_size=2, unique=True),
        "clear_inputs": st.booleans() | st.lists(names, max_size=2, unique=True),
        "placeholder": st.sampled_from([DEFAULT_PLACEHOLDER, "[cleared]"]),
    }
)


def _check_clear(t: Transcript, p: dict[str, Any]) -> None:
    r = clear_tool_uses(t, **p)
    assert_valid_and_round_trips(r.transcript)
    assert r.tokens_after <= r.tokens_before
    uses = [b for m in t for b in m.content if isinstance(b, ToolUseBlock)]
    recent = uses[len(uses) - p["keep_last"] :] if p["keep_last"] else []
    for u in recent:
        assert result_of(r.transcript, u.id) == result_of(t, u.id)
        assert use_of(r.transcript, u.id) == u
    for item in r.cleared:
        assert item.tool_name not in p["exclude_tools"] and item.tokens > 0
    if r.applied:
        assert r.tokens_freed >= p["clear_at_least"] and r.tokens_before > p["trigger_tokens"]
        assert r.tokens_freed == sum(i.tokens for i in r.cleared)
    else:
        assert r.transcript is t and r.cleared == ()
    # clearing again with the same parameters finds nothing new to clear
    assert not clear_tool_uses(r.transcript, **p).applied


@given(anthropic_sessions(), params)
def test_property_anthropic_clear_is_valid_and_round_trips(
    t: Transcript, p: dict[str, Any]
) -> None:
    _check_clear(t, p)
    th = clear_thinking(t, keep_turns=1)
    assert_valid_and_round_trips(th.transcript)
    # the last turn (a running tool loop needs it back unmodified) keeps every thinking block
    assert last_turn_thinking(th.transcript) == last_turn_thinking(t)


def last_turn_thinking(t: Transcript) -> list[ThinkingBlock]:
    breaks = [
        i
        for i, m in enumerate(t.messages)
        if m.role == "user" and not (m.content and isinstance(m.content[0], ToolResultBlock))
    ]
    rest = t.messages[breaks[-1] + 1 :] if breaks else t.messages
    return [
        b for m in rest if m.role == "assistant" for b in m.content if isinstance(b, ThinkingBlock)
    ]


@given(openai_sessions(), params)
def test_property_openai_clear_is_valid_and_round_trips(t: Transcript, p: dict[str, Any]) -> None:
    _check_clear(t, p)


@st.composite
def broken(draw: st.DrawFn) -> Transcript:
    """A valid transcript, then broken: results dropped, orphans added, ids reused."""
    t = draw(anthropic_sessions() | openai_sessions())
    msgs = list(t.messages)
    lead = next((i for i, m in enumerate(msgs) if m.role != "system"), len(msgs))
    for _ in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["drop", "orphan", "reuse"]))
        if what == "orphan" or len(msgs) < 2:
            # after the system prompt: a system message later on is a codec error,
            # not a pairing problem
            at = draw(st.integers(lead, len(msgs)))
            msgs.insert(at, Message("user", (ToolResultBlock(draw(ident), "orphan"),)))
        elif what == "drop":
            at = draw(st.integers(0, len(msgs) - 1))
            kept = tuple(b for b in msgs[at].content if not isinstance(b, ToolResultBlock))
            msgs[at] = replace(msgs[at], content=kept or (TextBlock("x"),))
        else:
            ids = [b.id for m in msgs for b in m.content if isinstance(b, ToolUseBlock)]
            if len(ids) >= 2:
                a, b = draw(st.sampled_from(ids)), draw(st.sampled_from(ids))
                msgs = [_rename(m, a, b) for m in msgs]
    return replace(t, messages=tuple(msgs))


def _rename(m: Message, old: str, new: str) -> Message:
    out: list[ContentBlock] = []
    for b in m.content:
        if isinstance(b, ToolUseBlock) and b.id == old:
            b = replace(b, id=new)
        elif isinstance(b, ToolResultBlock) and b.tool_use_id == old:
            b = replace(b, tool_use_id=new)
        out.append(b)
    return replace(m, content=tuple(out))


@given(broken(), params)
def test_property_repair_never_emits_an_invalid_transcript(
    t: Transcript, p: dict[str, Any]
) -> None:
    try:
        r = clear_tool_uses(t, repair=True, **p)
    except PairingError as exc:
        # only what repair cannot fix: results placed after a later message
        assert {q.kind for q in exc.problems} == {ProblemKind.MISPLACED_RESULT}
        return
    assert_valid_and_round_trips(r.transcript)
    if not t.problems(placement(t)):
        assert r.repaired == ()


# --------------------------------------------------------------------------- real data


@cache
def _claude_code(path: Path) -> Transcript:
    return read_transcript(path)


@cache
def _tau() -> list[Transcript]:
    return read_transcripts(TAU)


@pytest.mark.data
@pytest.mark.parametrize("path", claude_code_files(), ids=lambda p: p.name)
def test_every_claude_code_session_clears_valid(path: Path, data_dir: Path) -> None:
    t = _claude_code(path)
    for keep in (0, 3, 10):
        r = clear_tool_uses(t, trigger_tokens=0, keep_last=keep, clear_inputs=keep == 10)
        assert r.repaired == ()
        assert_valid_and_round_trips(r.transcript)
    assert_valid_and_round_trips(clear_thinking(t).transcript)
    assert_valid_and_round_trips(clear_tool_uses(t.live_window(), trigger_tokens=0).transcript)


@pytest.mark.data
def test_every_tau_bench_trajectory_clears_valid(data_dir: Path) -> None:
    repaired = 0
    for t in _tau():
        r = clear_tool_uses(t, trigger_tokens=0, keep_last=3, repair=True)
        assert_valid_and_round_trips(r.transcript)
        repaired += bool(r.repaired)
        assert {p.kind for p in r.repaired} <= {ProblemKind.DUPLICATE_ID}
        if not r.repaired:  # nothing renamed: the wire form differs only in cleared results
            wire = openai.encode_messages(r.transcript)
            orig = openai.encode_messages(t)
            assert len(wire) == len(orig)
            for a, b in zip(wire, orig, strict=True):
                assert a == b or (a["role"] == "tool" and a["content"] == DEFAULT_PLACEHOLDER)
    assert repaired == 49  # the trajectories that reuse a tool call id


@pytest.mark.data
@settings(max_examples=30)
@given(
    st.integers(0, 1000),
    st.integers(0, 200_000),
    st.integers(0, 12),
    st.integers(0, 60_000),
    st.booleans(),
)
def test_property_real_transcripts_at_random_budgets(
    data_dir: Path, pick: int, trigger: int, keep: int, at_least: int, inputs: bool
) -> None:
    files = claude_code_files()
    pool = [*files, *range(len(_tau()))]
    chosen = pool[pick % len(pool)]
    t = _claude_code(chosen) if isinstance(chosen, Path) else _tau()[chosen]
    r = clear_tool_uses(
        t,
        trigger_tokens=trigger,
        keep_last=keep,
        clear_at_least=at_least,
        clear_inputs=inputs,
        repair=True,
    )
    assert_valid_and_round_trips(r.transcript)
    assert r.applied == (r.tokens_freed > 0)


@pytest.mark.data
@pytest.mark.parametrize("path", long_sessions(), ids=lambda p: p.name)
def test_long_sessions_keep_last_3_frees_half(path: Path, data_dir: Path) -> None:
    t = _claude_code(path)
    r = clear_tool_uses(t, trigger_tokens=100_000, keep_last=3)
    assert r.applied and r.tokens_before > 100_000
    assert r.tokens_freed >= 0.5 * r.tokens_before, (r.tokens_before, r.tokens_after)
    assert_valid_and_round_trips(r.transcript)
