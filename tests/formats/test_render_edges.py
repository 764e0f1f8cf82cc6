"""Thinking rendered for the provider that did not sign it.

- For Chat Completions an assistant message that held only thinking has nothing
  to send: it is left out (as ``clear_thinking`` removes such a message), never
  sent as ``content: null`` without ``tool_calls``, which the API refuses.
- For the Messages API thinking with no signature (a Responses API reasoning
  summary, thinking from another provider) is left out: the API verifies the
  signature of every thinking block sent back, and it is required.

The rules are read from the official SDKs' request types, not written out here."""

from __future__ import annotations

import copy
import typing
from typing import Any

import pytest
import typing_extensions

from ctxwise import CharCounter, Message
from ctxwise.formats import anthropic, openai
from ctxwise.formats.request import SentCounter, Window, render_anthropic, render_openai
from ctxwise.messages import TextBlock, ThinkingBlock, ToolUseBlock

anthropic_sdk = pytest.importorskip("anthropic")
openai_sdk = pytest.importorskip("openai")


def _required(typed_dict: Any) -> frozenset[str]:
    """The keys a request TypedDict of the SDK marks ``Required[...]``."""
    hints = typing_extensions.get_type_hints(typed_dict, include_extras=True)
    return frozenset(
        k for k, v in hints.items() if typing_extensions.get_origin(v) is typing_extensions.Required
    )


def assert_chat_accepts(messages: list[dict[str, Any]]) -> None:
    """Each assistant message has what the SDK's docstring says it needs: content
    unless ``tool_calls`` or ``function_call`` is given."""
    from openai.types.chat import ChatCompletionAssistantMessageParam

    doc = ChatCompletionAssistantMessageParam.__annotations__
    assert "content" in doc and "tool_calls" in doc  # the fields the rule is about
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        has_calls = bool(m.get("tool_calls")) or m.get("function_call") is not None
        assert m.get("content") is not None or has_calls, f"message {i}: {m!r}"


def assert_signed(messages: list[dict[str, Any]]) -> None:
    """Every thinking block carries the fields the SDK's request type requires, as
    non-empty strings (the signature Anthropic returned), and no message is empty."""
    from anthropic.types import ThinkingBlockParam

    required = _required(ThinkingBlockParam)
    assert "signature" in required
    for i, m in enumerate(messages):
        content = m["content"]
        assert content, f"message {i} is empty"
        if isinstance(content, str):
            continue
        assert any(not (b["type"] == "text" and not b["text"].strip()) for b in content)
        for b in content:
            if b["type"] == "thinking":
                assert required <= set(b), f"message {i}: {b!r}"
                assert isinstance(b["signature"], str) and b["signature"], f"message {i}"


# Anthropic responses as the Messages API returns them: one turn thinks and stops
# (max_tokens hit during thinking), Claude Code records "\n\n" before its thinking.
ANTHROPIC: list[dict[str, Any]] = [
    {"role": "user", "content": "Plan the migration."},
    {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "Tables first.", "signature": "EqQBCg"}],
    },
    {"role": "user", "content": "Go on."},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "\n\n"},
            {"type": "thinking", "thinking": "Then the indexes.", "signature": "ErUBCk"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        ],
    },
    {"role": "user", "content": "And?"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Answer now.", "signature": "EsgBCm"},
            {"type": "text", "text": "Tables, then indexes."},
        ],
    },
    {"role": "user", "content": "Thanks."},
]


def _window(messages: tuple[Message, ...], context_at: int | None = None) -> Window:
    return Window(("You plan migrations.",), 1, messages, "Schema v3.", context_at)


class TestThinkingOnlyForChatCompletions:
    def test_a_message_of_thinking_only_is_left_out(self) -> None:
        t = anthropic.decode_messages(ANTHROPIC)
        body = render_openai(_window(t.messages, 6), model="gpt-4o", max_tokens=256)
        assert_chat_accepts(body["messages"])
        assert [(m["role"], m["content"]) for m in body["messages"][1:]] == [
            ("user", "Plan the migration."),
            ("user", "Go on."),
            ("user", "And?"),
            ("assistant", [{"type": "text", "text": "Tables, then indexes."}]),
            ("user", [{"type": "text", "text": "<context>\nSchema v3.\n</context>"},
                      {"type": "text", "text": "Thanks."}]),
        ]  # fmt: skip

    def test_the_codec_and_the_kept_encodings_agree(self) -> None:
        t = anthropic.decode_messages(ANTHROPIC)
        assert_chat_accepts(openai.encode_messages(t))
        assert openai.encode_message(t.messages[1]) == []
        window = _window(t.messages, 6)
        kept = [openai.encode_message(m) for m in t.messages]
        fresh = render_openai(window, model="gpt-4o", max_tokens=256)
        assert render_openai(window, model="gpt-4o", max_tokens=256, encoded=kept) == fresh

    def test_the_counter_counts_no_message_for_it(self) -> None:
        t = anthropic.decode_messages(ANTHROPIC)
        counter = CharCounter()
        sent = openai.decode_messages(openai.encode_messages(t)).messages
        assert [m.role for m in sent] == ["user", "user", "user", "assistant", "user"]
        got = SentCounter(counter, "openai").count_messages(t.messages)
        assert got == counter.count_messages(sent)

    def test_a_response_of_thinking_only_keeps_its_null_content(self) -> None:
        # a response body (not a request) says what the model returned: nothing
        msg = anthropic.decode_messages(ANTHROPIC).messages[1]
        body = openai.encode_response(msg)
        assert body["choices"][0]["message"] == {"role": "assistant", "content": None}

    def test_thinking_with_a_tool_call_keeps_the_call(self) -> None:
        msg = Message("assistant", (ThinkingBlock("look it up", "sig"), ToolUseBlock("a", "f", {})))
        (out,) = openai.encode_message(msg)
        assert out["content"] is None and out["tool_calls"][0]["id"] == "a"


# What the OpenAI Agents SDK integration reads from a Responses reasoning item: the
# summary's text, no signature (ctxwise.integrations.openai_agents.to_messages).
UNSIGNED = ThinkingBlock("The user wants the refund status.", None)


def _agents_history() -> tuple[Message, ...]:
    return (
        Message.text_message("user", "Where is my refund?"),
        Message(
            "assistant",
            (UNSIGNED, ToolUseBlock("call_1", "refund_status", {"order": "4417"})),
        ),
        Message("user", (anthropic.decode_block(
            {"type": "tool_result", "tool_use_id": "call_1", "content": "sent"}),)),
        Message("assistant", (ThinkingBlock("Say it plainly.", None),)),
        Message("assistant", (TextBlock("It was sent today."),)),
        Message.text_message("user", "Thanks."),
    )  # fmt: skip


class TestUnsignedThinkingForMessages:
    def test_unsigned_thinking_is_not_sent(self) -> None:
        history = _agents_history()
        body = render_anthropic(_window(history, 5), model="claude-sonnet-5-5", max_tokens=256)
        assert_signed(body["messages"])
        assert [m["role"] for m in body["messages"]] == [
            "user",
            "assistant",
            "user",
            "assistant",  # the message of thinking only is not sent
            "user",
        ]
        call = body["messages"][1]["content"]
        assert [b["type"] for b in call] == ["tool_use"]
        assert "refund status" not in str(body) and "plainly" not in str(body)
        # the context still rides in the last user turn, the breakpoint before it
        assert body["messages"][4]["content"][0]["text"].startswith("<context>")
        assert "cache_control" in body["messages"][3]["content"][-1]

    def test_kept_encodings_give_the_same_body(self) -> None:
        history = _agents_history()
        window = _window(history, 5)
        kept = [anthropic.encode_message(m) for m in history]
        before = copy.deepcopy(kept)
        fresh = render_anthropic(window, model="claude-sonnet-5-5", max_tokens=256)
        again = render_anthropic(window, model="claude-sonnet-5-5", max_tokens=256, encoded=kept)
        assert again == fresh
        assert kept == before  # the caller's encodings are not changed

    def test_signed_and_redacted_thinking_are_sent_as_read(self) -> None:
        t = anthropic.decode_messages(ANTHROPIC)
        body = render_anthropic(_window(t.messages), model="claude-sonnet-5-5", max_tokens=256)
        for got, want in zip(body["messages"], ANTHROPIC, strict=True):
            content = got["content"]
            if isinstance(content, list):  # the breakpoint turns a string into a text block
                content = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
                if isinstance(want["content"], str):
                    content = content[0]["text"]
            assert content == want["content"]

    def test_the_counter_leaves_out_what_the_render_leaves_out(self) -> None:
        history = _agents_history()
        counter = CharCounter()
        body = render_anthropic(Window((), 0, history), model="claude-sonnet-5-5", max_tokens=256)
        sent = anthropic.decode_messages(body["messages"]).messages
        assert SentCounter(counter, "anthropic").count_messages(history) == counter.count_messages(
            sent
        )

    def test_the_codec_still_round_trips_unsigned_thinking(self) -> None:
        # a conversion keeps what it was given; only a request render leaves it out
        from ctxwise.messages import Transcript

        t = Transcript(_agents_history())
        wire = anthropic.encode_request(t)
        assert anthropic.decode_request(wire).messages == t.messages


def test_the_sdk_types_name_the_rules() -> None:
    """The fields these tests check are the SDKs' own (a rename would show here)."""
    from anthropic.types import ThinkingBlockParam
    from openai.types.chat import ChatCompletionAssistantMessageParam

    assert "signature" in _required(ThinkingBlockParam)
    doc = typing.get_type_hints(ChatCompletionAssistantMessageParam)["content"]
    assert type(None) in typing.get_args(doc)  # null content is allowed only with calls
