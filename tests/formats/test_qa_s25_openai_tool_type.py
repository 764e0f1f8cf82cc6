"""A tool call written for Chat Completions from another format (an Anthropic
request, a Claude Code session, a call ctxwise made) carries ``"type":
"function"``: the API requires it and answers a call without it with 400
"Missing required parameter: 'messages[1].tool_calls[0].type'" (seen with Azure
OpenAI in langchain-ai/langchain-azure#35). It was written without one."""

from __future__ import annotations

from ctxwise.formats import anthropic, openai
from ctxwise.messages import Message, ToolUseBlock, Transcript


def test_a_call_from_anthropic_is_a_function_call() -> None:
    t = anthropic.decode_request(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 100,
            "messages": [
                {"role": "user", "content": "Weather?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {"c": "P"}}
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "s"}],
                },
            ],
        }
    )
    out = openai.encode_messages(t)
    assert out[1]["tool_calls"] == [
        {"id": "toolu_1", "type": "function", "function": {"name": "w", "arguments": '{"c": "P"}'}}
    ]
    assert out[2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "s"}


def test_a_call_made_in_code_is_a_function_call() -> None:
    m = Message("assistant", (ToolUseBlock("call_1", "lookup", {}),))
    (body,) = openai.encode_message(m)
    assert body["tool_calls"][0]["type"] == "function"


def test_a_call_read_from_openai_keeps_its_shape() -> None:
    # some recorders leave "type" out; what was read is written back as it was
    calls = [
        {"id": "a", "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
    ]
    msgs = [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": calls}]
    assert openai.encode_messages(openai.decode_messages(msgs)) == msgs
    t = openai.decode_messages(msgs)
    assert openai.encode_messages(Transcript(t.messages)) == msgs
