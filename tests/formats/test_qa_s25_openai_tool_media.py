"""A Chat Completions ``tool`` message holds text only (``content: string |
ChatCompletionContentPartText[]``, OpenAI reference). A tool result with an image
from another format (Claude Code reading a screenshot, an Anthropic
``tool_result`` with an image block) was written as a tool message with an
``image_url`` part, a request the API refuses; the image now goes to the user
message right after the tool messages, which Chat Completions allows."""

from __future__ import annotations

from ctxwise.formats import anthropic, openai
from ctxwise.formats.request import _as_sent_openai
from ctxwise.messages import Message, TextBlock, ToolResultBlock

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}


def _screenshot() -> list[Message]:
    t = anthropic.decode_messages(
        [
            {"role": "user", "content": "What does the page show?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"p": "a"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"p": "b"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "a.png (12 KB)"}, IMAGE],
                    },
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": [IMAGE]},
                    {"type": "text", "text": "Compare them."},
                ],
            },
        ]
    )
    return list(t.messages)


def test_images_of_tool_results_follow_in_a_user_message() -> None:
    out = [m for msg in _screenshot() for m in openai.encode_message(msg)]
    tools = [m for m in out if m["role"] == "tool"]
    text = [{"type": "text", "text": "a.png (12 KB)"}]
    assert tools == [
        {"role": "tool", "tool_call_id": "toolu_1", "content": text},
        {"role": "tool", "tool_call_id": "toolu_2", "content": ""},
    ]
    url = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}
    assert out[-1] == {
        "role": "user",
        "content": [url, url, {"type": "text", "text": "Compare them."}],
    }
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "user"]


def test_a_result_of_images_alone_still_gets_its_user_message() -> None:
    msg = Message("user", (ToolResultBlock("toolu_1", (anthropic.decode_block(IMAGE),)),))
    out = openai.encode_message(msg)
    assert [m["role"] for m in out] == ["tool", "user"]


def test_the_sent_count_counts_what_is_sent() -> None:
    # the token count "as sent" sees the same messages: the image in the user one
    last = _screenshot()[-1]
    sent = _as_sent_openai(last)
    assert len(sent) == len(openai.encode_message(last)) == 3
    results = [b for m in sent[:2] for b in m.content]
    assert all(isinstance(r, ToolResultBlock) for r in results)
    assert all(isinstance(p, TextBlock) for r in results for p in r.content if r.content)
    assert [type(b).__name__ for b in sent[2].content] == ["MediaBlock", "MediaBlock", "TextBlock"]


def test_results_read_from_openai_are_written_as_read() -> None:
    msgs = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "ok"}]},
        {"role": "tool", "tool_call_id": "d", "content": []},
    ]  # fmt: skip
    assert openai.encode_messages(openai.decode_messages(msgs)) == msgs
