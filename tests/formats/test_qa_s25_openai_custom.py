"""Chat Completions custom tool calls (``"type": "custom"``): the model's free
text is in ``custom.input`` and there is no ``function`` object (OpenAI reference,
``ChatCompletionMessageCustomToolCall``: ``id``, ``type: "custom"``,
``custom: {name, input}``). Such a request was refused as a whole: "a tool call
needs a 'function' object"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxwise.editing import DEFAULT_PLACEHOLDER
from ctxwise.errors import FormatError
from ctxwise.formats import openai
from ctxwise.messages import ToolUseBlock
from ctxwise.pairing import problems
from tests.formats._clear import clear_file

PATCH = "*** Begin Patch\n*** Update File: a.py\n-x = 1\n+x = 2\n*** End Patch"


def request() -> dict[str, Any]:
    return {
        "model": "gpt-5",
        "tools": [{"type": "custom", "custom": {"name": "apply_patch"}}],
        "messages": [
            {"role": "developer", "content": "You edit code."},
            {"role": "user", "content": "Set x to 2."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_custom_1",
                        "type": "custom",
                        "custom": {"name": "apply_patch", "input": PATCH},
                    },
                    {
                        "id": "call_fn_2",
                        "type": "function",
                        "function": {"name": "run_tests", "arguments": "{}"},
                    },
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "call_custom_1",
                "content": "Done. " + "patched a.py line 1; " * 20,
            },
            {"role": "tool", "tool_call_id": "call_fn_2", "content": "1 passed " + "." * 200},
            {"role": "assistant", "content": "x is 2 now."},
        ],
    }


def test_custom_call_is_a_tool_use_and_round_trips() -> None:
    doc = request()
    t = openai.decode_request(doc)
    use = t.messages[2].content[0]
    assert isinstance(use, ToolUseBlock)
    assert (use.id, use.name, dict(use.input)) == ("call_custom_1", "apply_patch", {"input": PATCH})
    assert problems(t, "openai") == []
    assert openai.encode_request(t) == doc


def test_cleared_custom_input_is_written_as_a_custom_call(tmp_path: Path) -> None:
    doc = request()
    text = json.dumps(doc, indent=1) + "\n"
    _, edit, data, _ = clear_file(tmp_path / "req.json", text, keep_last=0, clear_inputs=True)
    assert edit.applied
    back = json.loads(data)
    calls = back["messages"][2]["tool_calls"]
    assert calls[0] == {
        "id": "call_custom_1",
        "type": "custom",
        "custom": {"name": "apply_patch", "input": ""},
    }
    assert calls[1]["function"] == {"name": "run_tests", "arguments": "{}"}
    assert back["messages"][3]["content"] == DEFAULT_PLACEHOLDER


@pytest.mark.parametrize(
    "call",
    [
        {"id": "c", "type": "custom"},
        {"id": "c", "type": "custom", "custom": {"name": "x"}},
        {"id": "c", "type": "custom", "custom": {"name": "x", "input": {"a": 1}}},
        {"type": "custom", "custom": {"name": "x", "input": ""}},
    ],
    ids=["no-custom", "no-input", "input-not-text", "no-id"],
)
def test_malformed_custom_call_is_a_format_error(call: dict[str, Any]) -> None:
    with pytest.raises(FormatError, match="custom tool call needs"):
        openai.decode_messages([{"role": "assistant", "content": None, "tool_calls": [call]}])
