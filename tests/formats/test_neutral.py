"""ctxwise's own JSON form of messages: an exact round trip, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxwise.errors import FormatError
from ctxwise.formats import neutral, read_transcripts
from tests.conftest import TAU, claude_code_files


def _all_messages(data_dir: Path) -> list:  # type: ignore[type-arg]
    out = []
    for path in [*claude_code_files(), TAU]:
        for t in read_transcripts(path):
            out.extend(t.messages)
    return out


def test_every_shared_message_round_trips_exactly(data_dir: Path) -> None:
    messages = _all_messages(data_dir)
    assert len(messages) > 5000
    for m in messages:
        raw = json.loads(json.dumps(neutral.encode_message(m), ensure_ascii=False))
        assert neutral.decode_message(raw) == m


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ([], "must be an object"),
        ({"role": "robot", "content": []}, "role must be one of"),
        ({"role": "user"}, "'content' is missing"),
        ({"role": "user", "content": [{"type": "laser"}]}, "unknown block type 'laser'"),
        ({"role": "user", "content": [{"type": "text"}]}, "'text' is missing"),
        ({"role": "user", "content": [], "kind": "weird"}, "unknown kind"),
        ({"role": "user", "content": [], "extra": []}, "'extra' must be an object"),
        (
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": 3}],
            },
            "text or a list",
        ),
    ],
)
def test_bad_input_names_the_message_and_block(raw: object, match: str) -> None:
    with pytest.raises(FormatError, match=match):
        neutral.decode_message(raw, 7)
