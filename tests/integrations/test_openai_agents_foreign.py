"""A history read from another provider's format, handed to the OpenAI Agents SDK
(Responses API items): every item is one the Responses API takes, checked against
the official ``openai`` SDK's own request type (``ResponseInputItemParam``), and the
real SDK runs on it through ctxwise's filter.

Anthropic's server-tool blocks become a visible text saying what was left out,
search results and text documents become text, thinking is not sent (a reasoning
item is the Responses API's own), an image in a tool result stays in the output;
content with no Responses form (an Anthropic file id, audio) is refused."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pydantic
import pytest

pytest.importorskip(
    "agents", reason="needs the openai-agents extra: pip install -e '.[openai-agents]'"
)
from agents import Agent, RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message
from openai.types.responses import ResponseInputItemParam

from ctxwise import Engine, EngineConfig, read_transcript
from ctxwise.errors import IntegrationError
from ctxwise.formats import anthropic, openai
from ctxwise.integrations.openai_agents import call_model_input_filter, to_items, to_messages
from ctxwise.messages import Message

_ITEM = pydantic.TypeAdapter(ResponseInputItemParam)


def assert_responses_accepts(items: list[dict[str, Any]]) -> None:
    for i, item in enumerate(items):
        try:
            _ITEM.validate_python(item)
        except pydantic.ValidationError:
            pytest.fail(f"item {i} is not a Responses API input item: {json.dumps(item)}")


LEFT_OUT = "[{block} left out: the Responses API has no form for it]"

# An Anthropic conversation with the blocks only Anthropic has, shaped as the
# Messages API documents them.
ANTHROPIC_MESSAGES: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What changed in 2.0? The terms are attached."},
            {
                "type": "document",
                "source": {"type": "content", "content": [{"type": "text", "text": "Clause 4."}]},
                "title": "Terms",
            },
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"},
                "title": "notes.pdf",
            },
            {"type": "container_upload", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Search first.", "signature": "EqQBCg"},
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
            {"type": "tool_use", "id": "toolu_02", "name": "screenshot", "input": {}},
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
            {
                "type": "tool_result",
                "tool_use_id": "toolu_02",
                "content": [
                    {"type": "text", "text": "the page"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"},
                    },
                ],
            },
            {"type": "text", "text": "Thanks. Anything else?"},
        ],
    },
]


def _messages() -> list[Message]:
    return list(anthropic.decode_messages(ANTHROPIC_MESSAGES).messages)


def test_an_anthropic_history_gives_only_responses_items() -> None:
    instructions, items = to_items(_messages())
    assert instructions is None
    assert_responses_accepts(items)
    sent = json.dumps(items)
    for kind in ("server_tool_use", "web_search_tool_result", "mcp_tool_use", "container_upload"):
        assert f'"type": "{kind}"' not in sent
    assert "EqgfCioIARgBIiQ3YTAwMjY1" not in sent  # encrypted search results
    assert "Search first" not in sent and "EmwKAhgBEgy3va3pzix" not in sent  # thinking


def test_what_was_left_out_is_visible_and_text_like_blocks_are_text() -> None:
    _, items = to_items(_messages())
    assert items[0] == {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What changed in 2.0? The terms are attached."},
            {"type": "input_text", "text": "Terms\n\nClause 4."},
            {
                "type": "input_file",
                "file_data": "data:application/pdf;base64,JVBERi0x",
                "filename": "notes.pdf",
            },
            {"type": "input_text", "text": LEFT_OUT.format(block="container_upload")},
        ],
    }
    said = items[1]
    assert said["role"] == "assistant"
    assert said["content"].split("\n\n") == [
        LEFT_OUT.format(block="server_tool_use (web_search)"),
        LEFT_OUT.format(block="web_search_tool_result"),
        LEFT_OUT.format(block="mcp_tool_use (echo)"),
        LEFT_OUT.format(block="mcp_tool_result"),
        "2.0 dropped Python 3.8.",
    ]
    assert [i.get("type") for i in items[2:6]] == ["function_call"] * 2 + [
        "function_call_output"
    ] * 2
    # a search result is its text, in the output that answers the call
    assert (
        items[4]["output"]
        == "Release 2.0\nhttps://docs.example.com/2.0\n\nPython 3.8 support ends."
    )
    # an image in a tool result stays in the output, which takes images
    assert items[5]["output"] == [
        {"type": "input_text", "text": "the page"},
        {"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,iVBOR"},
    ]
    assert items[6] == {"role": "user", "content": "Thanks. Anything else?"}


def test_the_sdk_runs_on_it_through_the_filter(tmp_path: Path) -> None:
    """The items go to a real Runner as its input; ctxwise's filter reads them back
    (it refuses an item type it cannot map) and the model gets valid items only."""
    _, items = to_items(_messages())
    model = ScriptedModel([[assistant_message("Nothing else.")]])
    agent = Agent(name="docs", instructions="Be brief.", model=model)
    config = EngineConfig.model_validate(
        {"store": f"sqlite:///{tmp_path / 'ctxwise.db'}", "budget": 4000, "render": "openai"}
    )
    with Engine(config) as engine:
        run_config = RunConfig(
            call_model_input_filter=call_model_input_filter(engine, "s"), tracing_disabled=True
        )
        result = asyncio.run(Runner.run(agent, copy.deepcopy(items), run_config=run_config))
    assert result.final_output == "Nothing else."
    (call,) = model.calls
    given = [dict(i) for i in call.input]
    assert_responses_accepts(given)
    assert any(
        LEFT_OUT.format(block="server_tool_use (web_search)") in json.dumps(i) for i in given
    )


@pytest.mark.parametrize(
    ("block", "why"),
    [
        (
            {"type": "document", "source": {"type": "file", "file_id": "file_011CNha8iCJcU1"}},
            "Anthropic's file store",
        ),
        (
            {"type": "image", "source": {"type": "file", "file_id": "file_011CNha8iCJcU1"}},
            "Anthropic's file store",
        ),
    ],
)
def test_user_content_without_a_responses_form_is_refused(block: dict[str, Any], why: str) -> None:
    t = anthropic.decode_messages(
        [{"role": "user", "content": [block, {"type": "text", "text": "?"}]}]
    )
    with pytest.raises(IntegrationError, match=why) as info:
        to_items(list(t.messages))
    assert info.value.reason == "message"


def test_chat_completions_parts_become_responses_parts() -> None:
    chat = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Read the receipt."},
                {
                    "type": "file",
                    "file": {"filename": "r.pdf", "file_data": "data:application/pdf;base64,JVBE"},
                },
                {"type": "image_url", "image_url": {"url": "https://e.com/a.png", "detail": "low"}},
            ],
        },
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "Not the photo."}]},
    ]  # fmt: skip
    _, items = to_items(list(openai.decode_messages(chat).messages))
    assert_responses_accepts(items)
    assert items == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Read the receipt."},
                {
                    "type": "input_file",
                    "filename": "r.pdf",
                    "file_data": "data:application/pdf;base64,JVBE",
                },
                {"type": "input_image", "detail": "low", "image_url": "https://e.com/a.png"},
            ],
        },
        {"role": "assistant", "content": "Not the photo."},
    ]
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRiQA", "format": "wav"}}
    t = openai.decode_messages([{"role": "user", "content": [audio]}])
    with pytest.raises(IntegrationError, match="input_audio"):
        to_items(list(t.messages))


def test_real_claude_code_sessions_give_responses_items(data_dir: Path) -> None:
    paths = sorted((data_dir / "transcripts" / "claude_code").glob("*.jsonl"))
    assert paths
    for path in paths:
        t = read_transcript(str(path))
        _, items = to_items(list(t.messages))
        assert_responses_accepts(items)
        to_messages(items)  # ctxwise's own mapper reads every item it made
