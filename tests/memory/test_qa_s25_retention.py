"""ctxwise.retention on inputs the project was not built on."""

from __future__ import annotations

import pytest

from ctxwise.errors import UsageError
from ctxwise.messages import Message, ToolResultBlock, ToolUseBlock
from ctxwise.retention import Specific, retention, specifics


def test_a_long_listing_of_paths_and_ids_is_read_in_one_pass() -> None:
    """Each id and number was checked against every path and id read before it, so
    a 300,000-character grep listing took about 100 s (quadratic); now the spans
    read are marked once. What is read is unchanged: an id inside a path
    (W9999x) and a number inside an id (1234) are not specifics of their own."""
    line = "lib/W9999x/cd.py:12 W4417 abc-1234 9001 "
    text = line * 8_000
    assert specifics(text) == {
        Specific("path", "lib/w9999x/cd.py"),
        Specific("number", "12"),
        Specific("id", "w4417"),
        Specific("id", "abc-1234"),
        Specific("number", "9001"),
    }
    messages = [
        Message("assistant", (ToolUseBlock("c1", "Grep", {"pattern": "W4417"}),)),
        Message("user", (ToolResultBlock("c1", text),)),
    ]
    kept = retention(messages, "W4417 is in cd.py, line 12").counts()
    assert kept["tool_output"] == {"id": [0, 1], "number": [1, 2], "path": [1, 1]}
    assert kept["conversation"] == {"id": [1, 1]}


def test_a_span_read_does_not_reach_past_its_end() -> None:
    assert specifics("a/b.py 12 W4417") == {
        Specific("path", "a/b.py"),
        Specific("number", "12"),
        Specific("id", "w4417"),
    }
    assert specifics("") == set()


@pytest.mark.parametrize(
    ("messages", "summary", "words"),
    [
        ([Message.text_message("user", "order W4417")], None, "the summary is text"),
        ("order W4417", "W4417", "messages are a sequence of Message, got str"),
        (Message.text_message("user", "W4417"), "W4417", "got Message"),
        ([{"role": "user", "content": "W4417"}], "W4417", r"messages\[0\] is not a Message"),
    ],
    ids=["summary-none", "a-string", "one-message", "dicts"],
)
def test_retention_refuses_what_is_not_messages_and_text(
    messages: object, summary: object, words: str
) -> None:
    """They raised TypeError ('expected string or bytes-like object', 'Message'
    object is not iterable) or AttributeError ('str' object has no attribute
    'content')."""
    with pytest.raises(UsageError, match=words):
        retention(messages, summary)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="specifics"):
        specifics(None)  # type: ignore[arg-type]
