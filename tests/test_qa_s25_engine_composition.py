"""composition() given arguments the project was not built on: a UsageError naming
the argument, not a TypeError or AttributeError from deep inside."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxwise.composition import composition
from ctxwise.errors import UsageError
from ctxwise.formats import read_transcripts
from ctxwise.messages import Message, Transcript
from ctxwise.tokens import CharCounter


def _transcript() -> Transcript:
    return Transcript([Message.text_message("user", "hello there")])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"top": "5"}, r"top must be a whole number of 0 or more, got '5'"),
        ({"top": 2.5}, r"top must be a whole number"),
        ({"top": None}, r"top must be a whole number"),
        ({"top": True}, r"top must be a whole number"),
        ({"top": -1}, r"top must be a whole number"),
        ({"counter": "char"}, r"counter must be a TokenCounter"),
        ({"counter": object()}, r"counter must be a TokenCounter"),
        # an unknown placement was taken as 'loose' without a word
        ({"placement": "antropic"}, r"unknown placement 'antropic'; choose loose"),
    ],
)
def test_a_bad_argument_is_a_usage_error_naming_it(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        composition(_transcript(), **kwargs)


def test_a_list_of_messages_is_refused_naming_transcript() -> None:
    with pytest.raises(UsageError, match="transcript must be a Transcript"):
        composition([Message.text_message("user", "hi")])  # type: ignore[arg-type]


def test_every_placement_and_top_zero_still_work(data_dir: Path) -> None:
    path = data_dir / "transcripts" / "claude_code" / "tool_heavy.jsonl"
    transcript = read_transcripts(path, "auto")[0]
    for placement in ("loose", "anthropic", "openai"):
        c = composition(transcript, CharCounter(), top=0, placement=placement)  # type: ignore[arg-type]
        assert c.largest == () and c.total_tokens == sum(c.by_kind.values())
