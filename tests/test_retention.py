from __future__ import annotations

from pathlib import Path

import pytest

from ctxwise import CharCounter, Message, read_transcript
from ctxwise.messages import TextBlock, ToolResultBlock, ToolUseBlock
from ctxwise.retention import Specific, retention, specifics
from ctxwise.summarize import ExtractiveSummarizer
from tests.conftest import long_sessions


def test_specifics_by_kind() -> None:
    found = specifics(
        "Edited lib/spotter/annotation.ex and app.js for spotter-gqc.1 (commit 8cc42b0); "
        "397 tests, 4,417 rows, 12.50 USD. ** (CompileError) undefined function get/2 here"
    )
    keys = {(s.kind, s.key) for s in found}
    assert ("path", "lib/spotter/annotation.ex") in keys
    assert ("path", "app.js") in keys
    assert ("id", "spotter-gqc.1") in keys
    assert ("id", "8cc42b0") in keys
    assert {("number", "397"), ("number", "4417"), ("number", "12.50")} <= keys
    assert ("error", "undefined function get/2 here") in keys
    # single digits and dates-as-fractions are not specifics
    assert not any(s.key in {"1", "12/05/2024"} for s in specifics("step 1 on 12/05/2024"))


def test_retention_by_origin_and_generous_matching() -> None:
    messages = [
        Message.text_message("user", "Please fix lib/app/session_live.ex for order W4417."),
        Message(
            "assistant",
            (
                TextBlock("Running the tests."),
                ToolUseBlock("t1", "bash", {"command": "mix test"}),
            ),
        ),
        Message(
            "user",
            (ToolResultBlock("t1", "Error: 3 failures in test/session_test.exs, seed 48213"),),
        ),
    ]
    # the summary names the file by its base name and states one number
    r = retention(messages, "Fixed session_live.ex for W4417; 48213 was the seed.")
    conv = {s.key for s in r.kept["conversation"]}
    tool = {s.key for s in r.kept["tool_output"]}
    assert conv == {"lib/app/session_live.ex", "w4417"}
    assert tool == {"48213"}
    assert Specific("path", "test/session_test.exs") in r.present["tool_output"]
    counts = r.counts()
    assert counts["conversation"]["path"] == [1, 1]
    assert counts["total"][0] == 3
    assert counts["total"][1] == len(r.present["conversation"] | r.present["tool_output"])


def test_a_longer_id_or_file_name_does_not_keep_a_specific() -> None:
    """``W44170`` kept the order ``W4417`` and ``zapp.py`` kept ``app.py``: matched as
    substrings, a summary got credit for specifics it never stated."""
    messages = [Message.text_message("user", "Order W4417: see app.py and spotter-gqc.1.")]

    def kept(summary: str) -> set[str]:
        return {s.key for s in retention(messages, summary).kept["conversation"]}

    assert kept("Order W44170, zapp.py and app.pyc, spotter-gqc.12.") == set()
    assert kept("Order W4417 (spotter-gqc.1); fixed src/app.py.") == {
        "w4417",
        "spotter-gqc.1",
        "app.py",
    }


def test_a_specific_in_both_origins_counts_once_under_conversation() -> None:
    messages = [
        Message.text_message("user", "Look at order W4417"),
        Message("user", (ToolResultBlock("x", "W4417 shipped"),)),
    ]
    r = retention(messages, "")
    assert Specific("id", "w4417") in r.present["conversation"]
    assert Specific("id", "w4417") not in r.present["tool_output"]
    assert r.counts()["total"] == [0, len(r.present["conversation"] | r.present["tool_output"])]


@pytest.mark.data
@pytest.mark.parametrize("index", range(3))
def test_ctxwise_keeps_more_specifics_than_claude_codes_own_summary(
    data_dir: Path, index: int
) -> None:
    sessions = long_sessions()
    assert len(sessions) == 3
    t = read_transcript(sessions[index])
    boundary = t.compactions[0]
    theirs = t.messages[boundary.index]
    assert theirs.kind == "compact_summary"
    compacted = t.messages[: boundary.index]
    counter = CharCounter()
    budget = counter.count(theirs.text)
    ours = ExtractiveSummarizer(counter).summarize("", compacted, budget)
    assert counter.count(ours) <= budget
    theirs_r, ours_r = retention(compacted, theirs.text), retention(compacted, ours)
    assert ours_r.counts()["total"][0] > theirs_r.counts()["total"][0]
    # also on what the user and the agent said, not only on tool output
    assert len(ours_r.kept["conversation"]) > len(theirs_r.kept["conversation"])


def test_line_number_gutters_are_not_specifics() -> None:
    from ctxwise.messages import Message, ToolResultBlock, ToolUseBlock

    read = "     57→def load(path):\n     58→    return open(path).read()  # 4417 bytes\n"
    msgs = [
        Message("assistant", (ToolUseBlock("t1", "Read", {"file_path": "src/app.py"}),)),
        Message("user", (ToolResultBlock("t1", read),)),
    ]
    numbers = {s.key for s in retention(msgs, "").present["tool_output"] if s.kind == "number"}
    assert numbers == {"4417"}  # the gutters say where a line was, not what it said
    gutter_lines = "57→\n58→"
    assert retention(msgs, gutter_lines).counts()["total"][0] == 0
    raw = retention(msgs, gutter_lines, count_gutters=True)
    assert {s.key for s in raw.kept["tool_output"]} == {"57", "58"}
