from __future__ import annotations

from pathlib import Path

import pytest

from ctxwise import (
    CharCounter,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    composition,
    read_transcript,
)
from ctxwise.composition import KINDS, ToolTokens
from tests.conftest import long_sessions


def test_kinds_and_tools() -> None:
    t = Transcript(
        (
            Message.text_message("system", "s" * 40),
            Message.text_message("user", "u" * 8),
            Message("assistant", (TextBlock("a" * 4), ToolUseBlock("t1", "Read", {"f": "x"}))),
            Message("user", (ToolResultBlock("t1", "r" * 400),)),
        )
    )
    c = composition(t, CharCounter(), top=2)
    assert (
        c.by_kind["system"] == 10
        and c.by_kind["user_text"] == 2
        and c.by_kind["tool_result"] == 100
    )
    # a tool's share is its calls' inputs ("Read" + '{"f":"x"}': 4) and its results
    assert c.by_tool == {"Read": 104} and c.by_kind["tool_use"] == 4
    assert c.tools["Read"] == ToolTokens(calls=1, inputs=4, results=100)
    # the total is the counter's count_messages: blocks plus 4 per message of framing
    assert c.by_kind["framing"] == 4 * 4
    assert c.total_tokens == sum(c.by_kind.values()) == CharCounter().count_messages(t.messages)
    assert [i.kind for i in c.largest] == ["tool_result", "system"]
    assert set(c.to_dict()) >= {"total_tokens", "by_kind", "by_tool", "largest", "problems"}
    assert set(c.by_kind) == set(KINDS)


@pytest.mark.data
@pytest.mark.parametrize("path", long_sessions(), ids=lambda p: p.name)
def test_long_session_tool_results_dominate(path: Path, data_dir: Path) -> None:
    c = composition(read_transcript(path))
    assert c.total_tokens == sum(c.by_kind.values())
    assert max(c.by_kind, key=c.by_kind.__getitem__) == "tool_result"
    assert c.by_kind["compact_summary"] > 0
    assert c.problems == ()
    live = composition(read_transcript(path).live_window())
    assert 0 < live.total_tokens < c.total_tokens
