from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxwise import CharCounter, Message, UsageError, read_transcript
from ctxwise.messages import TextBlock, ToolResultBlock, ToolUseBlock, block_text
from ctxwise.retention import (
    Specific,
    future_reference_recall,
    references,
    retention,
    specifics,
)
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
def test_retention_of_summaries_of_claude_codes_compacted_ranges(
    data_dir: Path, index: int
) -> None:
    """Both summaries are scored against the same specifics, and each keeps some of
    them. (Which keeps more is a benchmark figure, ``bench_retention``; no summarizer
    ranks by this measure, so no test holds one above the other.)"""
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
    assert theirs_r.present == ours_r.present
    for r in (theirs_r, ours_r):
        assert 0 < r.counts()["total"][0] < r.counts()["total"][1]
        assert all(r.kept[o] <= r.present[o] for o in r.present)


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


# --------------------------------------------------------------------------- future references


def _refs(text: str) -> set[tuple[str, str]]:
    return {(r.kind, r.key) for r in references(text)}


def test_references_by_kind() -> None:
    found = _refs(
        "Edited lib/spotter/annotation.ex for spotter-gqc.6 (commit 8cc42b0): 397 tests, "
        "4,417 rows with Phoenix, ProjectReviewLive and close_review_session; see "
        "https://example.com/a/b and `credo`, Spotter.Repo, release 1.2.3."
    )
    assert found == {
        ("path", "annotation.ex"),
        ("identifier", "spotter-gqc.6"),
        ("identifier", "8cc42b0"),
        ("number", "397"),
        ("number", "4417"),
        ("name", "phoenix"),
        ("identifier", "projectreviewlive"),
        ("identifier", "close_review_session"),
        ("path", "https://example.com/a/b"),
        ("name", "credo"),
        ("identifier", "spotter.repo"),
        ("identifier", "1.2.3"),
    }


def test_references_leave_out_plain_words_sentence_starts_and_single_digits() -> None:
    assert _refs("Then we ran it. The step 1 worked, and It was fine. Done") == set()
    assert _refs("") == set()


def test_references_read_json_as_its_strings() -> None:
    """A tool call's input is JSON: its keys name fields, and an escaped line break
    separates words (``\\nadd`` is not a word ``nadd``)."""
    call = 'Edit {"file_path":"lib/a.ex","old_string":"x\\nadd_thing \\"Spotter.Repo\\""}'
    assert _refs(call) == {
        ("path", "a.ex"),
        ("identifier", "add_thing"),
        ("identifier", "spotter.repo"),
    }


def test_a_path_is_one_reference_wherever_it_is_rooted() -> None:
    """A file path is keyed by its file name; a path without one by the whole path."""
    assert _refs("/home/u/p/lib/a/x.ex") == _refs("lib/a/x.ex") == {("path", "x.ex")}
    assert _refs("cd lib/spotter_web/ now") == {("path", "lib/spotter_web")}


def _tiny_session() -> tuple[list[Message], list[Message], list[Message]]:
    """A summarized range, a kept tail and what came after, built by hand."""
    summarized = [
        Message.text_message("user", "Fix order W4417 in lib/app/session.ex please."),
        Message("assistant", (ToolUseBlock("r1", "Read", {"file_path": "lib/app/session.ex"}),)),
        Message("user", (ToolResultBlock("r1", "    57→defmodule Session\n    58→  # 397 rows"),)),
        Message.text_message("assistant", "It needs the helper in lib/app/zzz.py and config.yaml."),
    ]
    kept = [Message.text_message("user", "Also check config.yaml.")]
    after = [
        Message.text_message("assistant", "Back to W4417: editing session.ex, ignoring new_thing."),
        Message("user", (ToolResultBlock("x", "397 rows"),)),
        Message(
            "user",
            (TextBlock("<system-reminder>lib/app/zzz.py changed</system-reminder> go on"),),
        ),
        Message.text_message("assistant", "Kept 397 rows; zzz.py and config.yaml are fine."),
    ]
    return summarized, kept, after


def test_future_reference_recall_on_a_tiny_session() -> None:
    summarized, kept, after = _tiny_session()
    r = future_reference_recall(summarized, after, "Order W4417 is open.", kept=kept)
    # needed: written after the point, only in the summarized range, not re-shown first;
    # config.yaml is in the kept tail, new_thing was never in the range, 397 and zzz.py
    # a tool result or a harness element showed again before the agent wrote them
    assert {(x.kind, x.key) for x in r.needed} == {("identifier", "w4417"), ("path", "session.ex")}
    assert {(x.kind, x.key) for x in r.held} == {("identifier", "w4417")}
    assert r.recall == 0.5
    assert r.counts() == {"identifier": [1, 1], "path": [0, 1], "total": [1, 2]}
    every = future_reference_recall(summarized, after, "session.ex; 397", kept=kept, reread=True)
    assert {x.key for x in every.needed} == {"w4417", "session.ex", "397", "zzz.py"}
    assert every.counts()["total"] == [2, 4]


def test_future_reference_recall_gutters_and_empty_cases() -> None:
    """A file read's line numbers are not references of the range; nothing needed
    gives no recall, and the window holds what the range held."""
    summarized, _, after = _tiny_session()
    later = [Message.text_message("assistant", "See line 57, 58 and W4417.")]
    r = future_reference_recall(summarized, later, "")
    assert {x.key for x in r.needed} == {"w4417"}  # 57 and 58 were only gutters
    assert future_reference_recall(summarized, [], "W4417").recall is None
    whole = "\n".join(m.text for m in summarized)
    assert future_reference_recall(summarized, after, whole).recall == 1.0


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: references(None), "references"),  # type: ignore[arg-type]
        (lambda: future_reference_recall([], [], None), "the window is text"),  # type: ignore[arg-type]
        (lambda: future_reference_recall("hi", [], ""), "summarized"),  # type: ignore[arg-type]
        (lambda: future_reference_recall([], [], "", kept=[{"role": "user"}]), "kept"),  # type: ignore[list-item]
    ],
    ids=["references-none", "window-none", "summarized-str", "kept-dicts"],
)
def test_future_reference_recall_refuses_bad_input(call: Any, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        call()


@pytest.mark.data
@pytest.mark.parametrize("index", range(3))
def test_future_reference_recall_at_claude_codes_compaction_points(
    data_dir: Path, index: int
) -> None:
    """On each shared session, at Claude Code's compaction point: what is needed was
    written after the point and held by the range, and what is held is needed."""
    t = read_transcript(long_sessions()[index])
    b = t.compactions[0].index
    before, after = t.messages[:b], t.messages[b + 1 :]
    r = future_reference_recall(before, after, t.messages[b].text)
    assert r.needed and r.held <= r.needed
    in_range = set().union(*(references(m.text) for m in before))
    in_range |= {x for m in before for blk in m.content for x in references(block_text(blk))}
    assert r.needed <= in_range
    assert r.counts()["total"] == [len(r.held), len(r.needed)]
