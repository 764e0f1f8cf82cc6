"""Property tests: any transcript the neutral model can express survives the
Anthropic codec, and any OpenAI-expressible one survives the OpenAI codec."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from ctxwise import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, Transcript
from ctxwise.formats import anthropic, openai

text = st.text(max_size=30)
ident = st.text(alphabet="abcdef0123456789_", min_size=1, max_size=8)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ident, inner, max_size=3),
    max_leaves=6,
)
tool_input = st.dictionaries(ident, json_value, max_size=3)


@st.composite
def anthropic_transcripts(draw: st.DrawFn) -> Transcript:
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message("system", (TextBlock(draw(text)),), plain=True))
    for i in range(draw(st.integers(0, 6))):
        role = "user" if i % 2 == 0 else "assistant"
        if draw(st.booleans()):
            messages.append(Message(role, (TextBlock(draw(text)),), plain=True))
            continue
        blocks: list = []  # type: ignore[type-arg]
        for j in range(draw(st.integers(1, 3))):
            if role == "assistant":
                kind = draw(st.sampled_from(["text", "thinking", "redacted", "tool_use"]))
                if kind == "text":
                    blocks.append(TextBlock(draw(text)))
                elif kind == "thinking":
                    blocks.append(ThinkingBlock(draw(text), draw(st.none() | ident)))
                elif kind == "redacted":
                    blocks.append(ThinkingBlock(draw(ident), None, True))
                else:
                    blocks.append(ToolUseBlock(f"toolu_{i}_{j}", draw(ident), draw(tool_input)))
            else:
                if draw(st.booleans()):
                    content = draw(text | st.lists(text.map(TextBlock), max_size=2).map(tuple))
                    blocks.append(
                        ToolResultBlock(draw(ident), content, draw(st.none() | st.booleans()))
                    )
                else:
                    blocks.append(TextBlock(draw(text)))
        messages.append(Message(role, tuple(blocks)))
    return Transcript(tuple(messages))


@given(anthropic_transcripts())
def test_anthropic_round_trip(t: Transcript) -> None:
    wire = json.loads(json.dumps(anthropic.encode_request(t)))
    back = anthropic.decode_request(wire)
    assert back.messages == t.messages
    assert anthropic.encode_request(back) == wire


@st.composite
def openai_payloads(draw: st.DrawFn) -> list[dict]:  # type: ignore[type-arg]
    out: list[dict] = [{"role": "system", "content": draw(text)}]  # type: ignore[type-arg]
    for i in range(draw(st.integers(0, 5))):
        out.append({"role": "user", "content": draw(text)})
        if draw(st.booleans()):
            calls = [
                {
                    "id": f"call_{i}_{j}",
                    "type": "function",
                    "function": {
                        "name": draw(ident),
                        "arguments": json.dumps(
                            draw(tool_input),
                            separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])),
                        ),
                    },
                }
                for j in range(draw(st.integers(1, 3)))
            ]
            out.append(
                {"role": "assistant", "content": draw(st.none() | text), "tool_calls": calls}
            )
            for c in calls:
                out.append({"role": "tool", "tool_call_id": c["id"], "content": draw(text)})
        out.append({"role": "assistant", "content": draw(text)})
    return out


@given(openai_payloads())
def test_openai_round_trip_and_pairing(payload: list[dict]) -> None:  # type: ignore[type-arg]
    t = openai.decode_messages(payload)
    assert openai.encode_messages(t) == payload
    assert t.problems("openai") == []
    assert t.problems("loose") == []
