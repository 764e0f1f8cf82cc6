"""A conversation read from one provider's format and rendered for the other carries
no block that API refuses: each is converted, left out with a visible placeholder,
or refused with a UsageError; rendered for its own provider it is sent as read.

The block types each API takes are read from the official SDKs' request types
(``anthropic.types.beta.BetaContentBlockParam``, the Chat Completions content part
params), not written out here."""

from __future__ import annotations

import copy
import json
import typing
from pathlib import Path
from typing import Any

import pytest

from ctxwise import CharCounter, Message, UsageError, read_transcript
from ctxwise.formats import anthropic, openai
from ctxwise.formats.request import SentCounter, Window, render_anthropic, render_openai

anthropic_sdk = pytest.importorskip("anthropic")
openai_sdk = pytest.importorskip("openai")


def _literal_types(union: Any) -> set[str]:
    """The ``type`` literals of a union of the SDK's TypedDicts."""
    if typing.get_origin(union) is typing.Annotated:
        return _literal_types(typing.get_args(union)[0])
    if typing.get_origin(union) is typing.Union:
        return {t for member in typing.get_args(union) for t in _literal_types(member)}
    fields = getattr(union, "model_fields", None)  # a response block (a pydantic model)
    if fields is not None:
        hint = fields["type"].annotation
    else:  # a request block (a TypedDict)
        hint = typing.get_type_hints(union, include_extras=True)["type"]
    while typing.get_origin(hint) is not typing.Literal:
        hint = typing.get_args(hint)[0]  # Required[...]
    return set(typing.get_args(hint))


def _anthropic_types() -> tuple[set[str], set[str]]:
    from anthropic.types.beta import beta_tool_result_block_param
    from anthropic.types.beta.beta_content_block_param import BetaContentBlockParam

    return _literal_types(BetaContentBlockParam), _literal_types(
        beta_tool_result_block_param.Content
    )


def _openai_types() -> dict[str, set[str]]:
    from openai.types.chat import chat_completion_assistant_message_param as assistant
    from openai.types.chat.chat_completion_content_part_param import (
        ChatCompletionContentPartParam,
    )
    from openai.types.chat.chat_completion_content_part_text_param import (
        ChatCompletionContentPartTextParam,
    )

    text = _literal_types(ChatCompletionContentPartTextParam)
    return {
        "user": _literal_types(ChatCompletionContentPartParam),
        "assistant": _literal_types(assistant.ContentArrayOfContentPart),
        "system": text,
        "developer": text,
        "tool": text,
    }


def assert_anthropic_accepts(messages: list[dict[str, Any]]) -> None:
    blocks, in_results = _anthropic_types()
    for i, m in enumerate(messages):
        if isinstance(m["content"], str):
            continue
        for b in m["content"]:
            assert b["type"] in blocks, f"message {i}: {b['type']!r} is not a Messages API block"
            if b["type"] == "tool_result" and isinstance(b.get("content"), list):
                for inner in b["content"]:
                    assert inner["type"] in in_results, f"message {i}: {inner['type']!r}"
            if b["type"] == "image":
                assert b["source"]["type"] in ("base64", "url", "file")
                if b["source"]["type"] == "url":
                    assert b["source"]["url"].startswith("https://")
            if b["type"] == "text":
                assert b["text"], f"message {i}: an empty text block"


def assert_chat_accepts(messages: list[dict[str, Any]]) -> None:
    parts = _openai_types()
    for i, m in enumerate(messages):
        content = m.get("content")
        if isinstance(content, list):
            for p in content:
                assert p["type"] in parts[m["role"]], (
                    f"message {i}: a {m['role']} message cannot hold a {p['type']!r} part"
                )
                if p["type"] == "image_url":
                    assert isinstance(p["image_url"]["url"], str)


# An Anthropic conversation with the blocks only Anthropic has, shaped as the
# Messages API documents them (server tools, MCP connector, code execution files).
ANTHROPIC_MESSAGES: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What changed in the 2.0 release? Also run stats.py."},
            {"type": "container_upload", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Search first, then run it.", "signature": "EqQBCg"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
            {
                "type": "server_tool_use",
                "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
                "name": "web_search",
                "input": {"query": "release 2.0 changelog"},
            },
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
                "content": [
                    {
                        "type": "web_search_result",
                        "url": "https://example.com/changelog",
                        "title": "Changelog",
                        "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1",
                        "page_age": "April 30, 2025",
                    }
                ],
            },
            {
                "type": "mcp_tool_use",
                "id": "mcptoolu_014Q35RayjACSWkSj4X2yov1",
                "name": "echo",
                "server_name": "example-mcp",
                "input": {"param1": "value1"},
            },
            {
                "type": "mcp_tool_result",
                "tool_use_id": "mcptoolu_014Q35RayjACSWkSj4X2yov1",
                "is_error": False,
                "content": [{"type": "text", "text": "echoed value1"}],
            },
            {"type": "text", "text": "2.0 dropped Python 3.8.", "citations": None},
            {"type": "tool_use", "id": "toolu_01", "name": "search_docs", "input": {"q": "2.0"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01",
                "content": [
                    {
                        "type": "search_result",
                        "source": "https://docs.example.com/2.0",
                        "title": "Release 2.0",
                        "content": [{"type": "text", "text": "Python 3.8 support ends."}],
                        "citations": {"enabled": True},
                    }
                ],
            },
            {"type": "text", "text": "Thanks. Anything else?"},
        ],
    },
]

# A Chat Completions conversation with the parts only OpenAI has, as documented.
OPENAI_MESSAGES: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Read this receipt and this photo."},
            {
                "type": "file",
                "file": {
                    "filename": "receipt.pdf",
                    "file_data": "data:application/pdf;base64,JVBERi0x",
                },
            },
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
    },
    {
        "role": "assistant",
        "content": [{"type": "refusal", "refusal": "I can't help with the photo."}],
    },
    {"role": "user", "content": "Just the receipt then."},
]

_AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRiQAAABXQVZF", "format": "wav"}}
_FILE_ID = {"type": "file", "file": {"file_id": "file-6F2ksmvXxt4VdoqmHRw6kL"}}


def _window(messages: tuple[Message, ...]) -> Window:
    return Window(("You help with releases.",), 1, messages)


class TestAnthropicToOpenAI:
    def test_render_carries_no_anthropic_block(self) -> None:
        t = anthropic.decode_messages(ANTHROPIC_MESSAGES)
        body = render_openai(_window(t.messages), model="gpt-4o", max_tokens=256)
        assert_chat_accepts(body["messages"])
        assert_chat_accepts(openai.encode_messages(t))
        sent = json.dumps(body)
        for kind in ("server_tool_use", "web_search_tool_result", "mcp_tool_use"):
            assert f'"type": "{kind}"' not in sent
        assert "EqgfCioIARgBIiQ3YTAwMjY1" not in sent  # encrypted search results
        assert "Search first" not in sent and "EmwKAhgBEgy3va3pzix" not in sent  # thinking

    def test_what_was_left_out_is_visible_and_text_is_converted(self) -> None:
        t = anthropic.decode_messages(ANTHROPIC_MESSAGES)
        msgs = openai.encode_messages(t)
        upload = openai.LEFT_OUT.format(block="container_upload")
        assert msgs[0]["content"][1] == {"type": "text", "text": upload}
        said = [p["text"] for p in msgs[1]["content"]]
        assert said == [
            openai.LEFT_OUT.format(block="server_tool_use (web_search)"),
            openai.LEFT_OUT.format(block="web_search_tool_result"),
            openai.LEFT_OUT.format(block="mcp_tool_use (echo)"),
            openai.LEFT_OUT.format(block="mcp_tool_result"),
            "2.0 dropped Python 3.8.",
        ]
        # a search result is text: it stays in the tool message that answers the call
        assert msgs[2] == {
            "role": "tool",
            "tool_call_id": "toolu_01",
            "content": [
                {
                    "type": "text",
                    "text": "Release 2.0\nhttps://docs.example.com/2.0\n\nPython 3.8 support ends.",
                }
            ],
        }
        assert msgs[3] == {
            "role": "user",
            "content": [{"type": "text", "text": "Thanks. Anything else?"}],
        }

    def test_text_like_blocks_are_text(self) -> None:
        doc = {
            "type": "document",
            "source": {"type": "content", "content": [{"type": "text", "text": "Clause 4."}]},
            "title": "Terms",
        }
        summary = {"type": "compaction", "content": "The user asked about 2.0.", "signature": "x"}
        messages = [
            {"role": "user", "content": [doc, {"type": "text", "text": "Summarize"}]},
            {"role": "assistant", "content": [summary, {"type": "text", "text": "Done."}]},
        ]
        msgs = openai.encode_messages(anthropic.decode_messages(messages))
        assert_chat_accepts(msgs)
        assert msgs[0]["content"][0] == {"type": "text", "text": "Terms\n\nClause 4."}
        assert msgs[1]["content"][0] == {"type": "text", "text": "The user asked about 2.0."}

    def test_sent_counter_counts_what_is_sent(self) -> None:
        t = anthropic.decode_messages(ANTHROPIC_MESSAGES)
        counter = CharCounter()
        sent = openai.decode_messages(openai.encode_messages(t)).messages
        assert SentCounter(counter, "openai").count_messages(t.messages) == counter.count_messages(
            sent
        )

    def test_user_content_without_a_chat_form_is_refused(self) -> None:
        by_file = [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
                    },
                    {"type": "text", "text": "What is this?"},
                ],
            }
        ]
        t = anthropic.decode_messages(by_file)
        with pytest.raises(
            UsageError, match="an image given by 'file' has no Chat Completions form"
        ):
            openai.encode_messages(t)

    def test_real_claude_code_sessions_render_for_chat_completions(self, data_dir: Path) -> None:
        for path in sorted((data_dir / "transcripts" / "claude_code").glob("*.jsonl")):
            t = read_transcript(str(path))
            assert_chat_accepts(openai.encode_messages(t))


class TestOpenAIToAnthropic:
    def test_parts_with_a_messages_form_are_converted(self) -> None:
        t = openai.decode_messages(OPENAI_MESSAGES)
        body = render_anthropic(_window(t.messages), model="claude-sonnet-5-5", max_tokens=256)
        assert_anthropic_accepts(body["messages"])
        user, assistant = body["messages"][0], body["messages"][1]
        assert user["content"][1] == {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"},
            "title": "receipt.pdf",
        }
        assert user["content"][2] == {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        }
        assert assistant["content"] == [{"type": "text", "text": "I can't help with the photo."}]

    def test_a_web_image_stays_a_url_image(self) -> None:
        url = {"type": "image_url", "image_url": {"url": "https://e.com/a.png", "detail": "low"}}
        t = openai.decode_messages([{"role": "user", "content": [url]}])
        assert anthropic.encode_messages(t)[1][0]["content"] == [
            {"type": "image", "source": {"type": "url", "url": "https://e.com/a.png"}}
        ]

    @pytest.mark.parametrize(
        ("part", "why"),
        [
            (_AUDIO, "the Messages API takes no audio"),
            (_FILE_ID, "OpenAI file_id"),
            (
                {"type": "file", "file": {"file_data": "data:text/csv;base64,YSxi"}},
                "'text/csv' is neither a PDF",
            ),
        ],
    )
    def test_parts_without_a_messages_form_are_refused(
        self, part: dict[str, Any], why: str
    ) -> None:
        t = openai.decode_messages(
            [{"role": "user", "content": [part, {"type": "text", "text": "hi"}]}]
        )
        kind = part["type"]
        with pytest.raises(
            UsageError, match=f"an OpenAI '{kind}' part has no Anthropic Messages form: .*{why}"
        ):
            render_anthropic(_window(t.messages), model="claude-sonnet-5-5", max_tokens=256)


class TestSameProvider:
    def test_anthropic_blocks_are_sent_back_as_read(self) -> None:
        body = {"model": "claude-sonnet-5-5", "max_tokens": 256, "messages": ANTHROPIC_MESSAGES}
        original = copy.deepcopy(body)
        t = anthropic.decode_request(body)
        assert anthropic.encode_request(t) == original
        sent = render_anthropic(_window(t.messages), model="claude-sonnet-5-5", max_tokens=256)
        # the render adds the cache breakpoint on the history's last block, nothing else
        for got, want in zip(sent["messages"], original["messages"], strict=True):
            got_blocks = [
                {k: v for k, v in b.items() if k != "cache_control"} for b in got["content"]
            ]
            assert got_blocks == want["content"]

    def test_openai_parts_are_sent_back_as_read(self) -> None:
        messages = copy.deepcopy(OPENAI_MESSAGES)
        messages[0]["content"].extend([_AUDIO, _FILE_ID])
        original = copy.deepcopy(messages)
        t = openai.decode_messages(messages)
        assert openai.encode_messages(t) == original
        body = render_openai(_window(t.messages), model="gpt-4o", max_tokens=256)
        assert body["messages"][1:] == original
