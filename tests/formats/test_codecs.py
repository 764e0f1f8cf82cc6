"""Codecs on payloads shaped exactly like the providers' documented bodies."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from ctxwise import (
    FormatError,
    Message,
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    UnknownFormatError,
    UsageError,
    detect_format,
    read_transcript,
)
from ctxwise.formats import anthropic, claude_code, openai

ANTHROPIC_REQUEST = {
    "model": "claude-sonnet-5-5",
    "max_tokens": 1024,
    "system": [
        {"type": "text", "text": "You are a support agent."},
        {
            "type": "text",
            "text": "Policy: refunds within 30 days.",
            "cache_control": {"type": "ephemeral"},
        },
    ],
    "tools": [
        {"name": "get_order", "description": "Look up an order", "input_schema": {"type": "object"}}
    ],
    "messages": [
        {"role": "user", "content": "Where is order 8812?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Look it up.", "signature": "EqQBCgIYAhIM"},
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A",
                    "name": "get_order",
                    "input": {"id": "8812"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01A",
                    "content": [{"type": "text", "text": "shipped 2024-05-02"}],
                    "is_error": False,
                },
                {
                    "type": "text",
                    "text": "Also, here is my receipt.",
                    "cache_control": {"type": "ephemeral"},
                },
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                },
                {
                    "type": "document",
                    "source": {
                        "type": "base64",
                        "media_type": "application/pdf",
                        "data": "JVBERi0x",
                    },
                    "title": "receipt.pdf",
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "web_search",
                    "input": {"query": "x"},
                },
                {"type": "text", "text": "It shipped on May 2.", "citations": None},
            ],
        },
    ],
    "temperature": 0.2,
}

ANTHROPIC_RESPONSE = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-5-5",
    "content": [
        {"type": "text", "text": "I'll look that up."},
        {"type": "tool_use", "id": "toolu_01B", "name": "get_order", "input": {"id": "8812"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 2095, "output_tokens": 503, "cache_read_input_tokens": 1800},
}

OPENAI_REQUEST = {
    "model": "gpt-4o",
    "messages": [
        {"role": "developer", "content": "You are a support agent."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Where is 8812?"},
                {"type": "image_url", "image_url": {"url": "https://e.com/a.png", "detail": "low"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": '{"id":"8812"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_user", "arguments": '{ "id": 7 }'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "shipped"},
        {"role": "tool", "tool_call_id": "call_2", "content": '{"name": "Mia"}'},
        {"role": "assistant", "content": "It shipped.", "refusal": None},
    ],
    "tools": [
        {"type": "function", "function": {"name": "get_order", "parameters": {"type": "object"}}}
    ],
    "temperature": 0,
}

OPENAI_RESPONSE = {
    "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
    "object": "chat.completion",
    "created": 1741570283,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location":"Paris"}'},
                    }
                ],
                "refusal": None,
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99},
    "service_tier": "default",
    "system_fingerprint": "fp_fc9f1d7035",
}


class TestAnthropic:
    def test_request_round_trip_is_lossless(self) -> None:
        t = anthropic.decode_request(ANTHROPIC_REQUEST)
        assert anthropic.encode_request(t) == ANTHROPIC_REQUEST
        assert t.messages[0].role == "system"
        assistant = t.messages[2]
        assert isinstance(assistant.content[0], ThinkingBlock)
        assert isinstance(assistant.content[1], ThinkingBlock) and assistant.content[1].redacted
        assert isinstance(t.messages[-1].content[0], OpaqueBlock)
        assert t.problems("anthropic") == []

    def test_response_round_trip(self) -> None:
        msg = anthropic.decode_response(ANTHROPIC_RESPONSE)
        assert msg.id == ANTHROPIC_RESPONSE["id"]
        assert msg.tool_uses[0].input == {"id": "8812"}
        assert anthropic.encode_response(msg) == ANTHROPIC_RESPONSE

    def test_bad_payloads(self) -> None:
        with pytest.raises(FormatError, match="needs 'messages'"):
            anthropic.decode_request({"model": "x"})
        with pytest.raises(FormatError, match="role"):
            anthropic.decode_request({"messages": [{"role": "tool", "content": "x"}]})
        with pytest.raises(FormatError, match="missing 'id'"):
            anthropic.decode_block({"type": "tool_use", "name": "x", "input": {}})
        with pytest.raises(FormatError, match="type 'message'"):
            anthropic.decode_response({"type": "error"})

    def test_system_mid_conversation_is_refused(self) -> None:
        t = Transcript((Message.text_message("user", "hi"), Message.text_message("system", "late")))
        with pytest.raises(UsageError):
            anthropic.encode_request(t)


class TestOpenAI:
    def test_request_round_trip_is_lossless(self) -> None:
        t = openai.decode_request(OPENAI_REQUEST)
        assert openai.encode_request(t) == OPENAI_REQUEST
        call = t.messages[2].tool_uses[1]
        assert call.input == {"id": 7}
        assert t.problems("openai") == []
        # two tool messages are two user messages of results: not Anthropic-valid placement
        assert [p.kind.value for p in t.problems("anthropic")] == ["misplaced_result"]

    def test_response_round_trip(self) -> None:
        msg = openai.decode_response(OPENAI_RESPONSE)
        assert msg.tool_uses[0].name == "get_weather"
        assert openai.encode_response(msg) == OPENAI_RESPONSE

    def test_cross_format_drops_foreign_fields(self) -> None:
        t = openai.decode_request(OPENAI_REQUEST)
        body = anthropic.encode_request(t)
        assert "temperature" not in body and "tools" not in body  # OpenAI-shaped params
        assert body["system"] == "You are a support agent."
        text = json.dumps(body)
        assert "refusal" not in text and "tool_call_id" not in text
        back = anthropic.decode_request(body)
        assert [b.id for b in back.messages[2].tool_uses] == ["call_1", "call_2"]

    def test_anthropic_to_openai(self) -> None:
        t = anthropic.decode_request(ANTHROPIC_REQUEST)
        msgs = openai.encode_messages(t)
        assert msgs[0] == {
            "role": "system",
            "content": [
                {"type": "text", "text": "You are a support agent."},
                {"type": "text", "text": "Policy: refunds within 30 days."},
            ],
        }
        assert msgs[2]["tool_calls"][0]["function"] == {
            "name": "get_order",
            "arguments": '{"id": "8812"}',
        }
        assert msgs[4]["content"][-1] == {
            "type": "file",
            "file": {
                "file_data": "data:application/pdf;base64,JVBERi0x",
                "filename": "receipt.pdf",
            },
        }
        assert msgs[3] == {
            "role": "tool",
            "tool_call_id": "toolu_01A",
            "content": [{"type": "text", "text": "shipped 2024-05-02"}],
        }

    def test_documents_without_a_file_form(self) -> None:
        def user(doc: dict[str, object]) -> list[dict[str, object]]:
            content = [doc, {"type": "text", "text": "Summarize"}]
            return [{"role": "user", "content": content}, {"role": "assistant", "content": "ok"}]

        text = {"type": "text", "media_type": "text/plain", "data": "doc body"}
        plain = openai.encode_messages(
            anthropic.decode_messages(user({"type": "document", "source": text}))
        )
        assert plain[0]["content"][0] == {"type": "text", "text": "doc body"}
        titled = openai.encode_messages(
            anthropic.decode_messages(user({"type": "document", "source": text, "title": "Notes"}))
        )
        assert titled[0]["content"][0] == {"type": "text", "text": "Notes\n\ndoc body"}
        url = {"type": "url", "url": "https://example.com/a.pdf"}
        with pytest.raises(UsageError, match="a document given by 'url' has no Chat Completions"):
            openai.encode_messages(
                anthropic.decode_messages(user({"type": "document", "source": url}))
            )

    def test_unparseable_arguments_survive(self) -> None:
        raw = [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{bad json"},
                    }
                ],
            }
        ]
        t = openai.decode_messages(raw)
        assert t.messages[0].tool_uses[0].input == {}
        assert openai.encode_messages(t) == raw

    def test_bad_payloads(self) -> None:
        with pytest.raises(FormatError, match="unknown role"):
            openai.decode_messages([{"role": "robot", "content": "x"}])
        with pytest.raises(FormatError, match="tool_call_id"):
            openai.decode_messages([{"role": "tool", "content": "x"}])


_UUIDS = itertools.count()


def _event(kind: str, content: object, **extra: object) -> str:
    message: dict[str, object] = {"role": kind, "content": content}
    if "mid" in extra:
        message["id"] = extra.pop("mid")
    # every event its own uuid, as in a real session (a repeated uuid is a replayed copy)
    return json.dumps({"type": kind, "message": message, "uuid": f"u{next(_UUIDS)}", **extra})


class TestClaudeCode:
    def test_interleaved_stream_is_rebuilt_as_api_messages(self) -> None:
        def use(i: int) -> dict[str, object]:
            return {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file": str(i)}}

        def res(i: int) -> dict[str, object]:
            return {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"file {i}"}

        lines = [
            json.dumps({"type": "file-history-snapshot", "snapshot": {}}),
            _event("user", "read both files"),
            _event("assistant", [{"type": "text", "text": "ok"}], mid="m1"),
            _event("assistant", [use(1)], mid="m1"),
            json.dumps({"type": "progress", "data": {}}),
            _event("user", [res(1)]),
            _event("assistant", [use(2)], mid="m1"),
            _event("user", [res(2)]),
            json.dumps(
                {
                    "type": "system",
                    "subtype": "compact_boundary",
                    "compactMetadata": {"trigger": "manual", "preTokens": 9000},
                }
            ),
            _event("user", "This session is being continued…", isCompactSummary=True),
            _event("assistant", [{"type": "text", "text": "done"}], mid="m2"),
            json.dumps({"type": "system", "subtype": "turn_duration", "durationMs": 5}),
        ]
        t, report = claude_code.read_claude_code_lines(lines)
        roles = [(m.role, len(m.content)) for m in t.messages]
        assert roles == [("user", 1), ("assistant", 3), ("user", 2), ("user", 1), ("assistant", 1)]
        assert t.problems("anthropic") == []
        assert t.compactions[0].index == 3 and t.compactions[0].pre_tokens == 9000
        assert t.messages[3].kind == "compact_summary"
        assert report.skipped == {
            "file-history-snapshot": 1,
            "progress": 1,
            "system:turn_duration": 1,
        }

    def test_truncated_line_names_the_line(self, tmp_path: Path) -> None:
        path = tmp_path / "s.jsonl"
        path.write_text(
            _event("user", "hi") + "\n" + _event("assistant", "hello", mid="m")[:30] + "\n"
        )
        with pytest.raises(FormatError) as info:
            read_transcript(path)
        assert info.value.line == 2
        assert "truncated" in str(info.value)


class TestDetectAndRead:
    def test_detects_each_format(self, tmp_path: Path) -> None:
        cases = {
            "a.json": (ANTHROPIC_REQUEST, "anthropic"),
            "b.json": (ANTHROPIC_RESPONSE, "anthropic"),
            "c.json": (OPENAI_REQUEST, "openai"),
            "d.json": (OPENAI_RESPONSE, "openai"),
            "e.json": (OPENAI_REQUEST["messages"], "openai"),
            "f.json": (ANTHROPIC_REQUEST["messages"], "anthropic"),
            "g.json": ([{"traj": OPENAI_REQUEST["messages"]}], "openai"),
        }
        for name, (doc, fmt) in cases.items():
            p = tmp_path / name
            p.write_text(json.dumps(doc))
            assert detect_format(p) == fmt, name
            assert read_transcript(p).messages
        jl = tmp_path / "s.jsonl"
        jl.write_text(_event("user", "hi") + "\n")
        assert detect_format(jl) == "claude-code"

    def test_errors(self, tmp_path: Path) -> None:
        binary = tmp_path / "x.bin"
        binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
        with pytest.raises(FormatError, match="binary"):
            read_transcript(binary)
        with pytest.raises(FormatError, match="no such file"):
            read_transcript(tmp_path / "missing.json")
        junk = tmp_path / "junk.json"
        junk.write_text("{not json")
        with pytest.raises(UnknownFormatError):
            read_transcript(junk)
        ok = tmp_path / "ok.json"
        ok.write_text(json.dumps(OPENAI_REQUEST))
        with pytest.raises(UnknownFormatError, match="unknown format"):
            read_transcript(ok, "gemini")  # type: ignore[arg-type]


class TestPairing:
    def _t(self, *msgs: Message) -> Transcript:
        return Transcript(msgs)

    def test_orphan_unanswered_duplicate(self) -> None:
        t = self._t(
            Message(
                "assistant",
                (
                    ToolUseBlock("a", "f", {}),
                    ToolUseBlock("a", "f", {}),
                    ToolUseBlock("b", "g", {}),
                ),
            ),
            Message("user", (ToolResultBlock("a"), ToolResultBlock("zz"))),
        )
        kinds = sorted(p.kind.value for p in t.problems())
        assert kinds == [
            "duplicate_id",
            "orphan_result",
            "unanswered_use",
            "unanswered_use",
        ] or kinds == ["duplicate_id", "orphan_result", "unanswered_use"]
        assert {p.tool_use_id for p in t.problems() if p.kind.value == "unanswered_use"} >= {"b"}

    def test_misplaced(self) -> None:
        late = self._t(
            Message("assistant", (ToolUseBlock("a", "f", {}),)),
            Message("assistant", (TextBlock("meanwhile"),)),
            Message("user", (ToolResultBlock("a"),)),
        )
        assert [p.kind.value for p in late.problems()] == ["misplaced_result"]
        text_first = self._t(
            Message("assistant", (ToolUseBlock("a", "f", {}),)),
            Message("user", (TextBlock("note"), ToolResultBlock("a"))),
        )
        assert text_first.problems() == []
        assert [p.kind.value for p in text_first.problems("anthropic")] == ["misplaced_result"]
        assert [p.kind.value for p in text_first.problems("openai")] == ["misplaced_result"]


class TestPairingEdges:
    def test_result_in_the_calling_message_or_wrong_role(self) -> None:
        same = Transcript(
            (Message("assistant", (ToolUseBlock("a", "f", {}), ToolResultBlock("a"))),)
        )
        for rule in ("loose", "anthropic", "openai"):
            assert [p.kind.value for p in same.problems(rule)] == ["misplaced_result"]  # type: ignore[arg-type]
        in_system = Transcript(
            (
                Message("assistant", (ToolUseBlock("a", "f", {}),)),
                Message("system", (ToolResultBlock("a"),)),
            )
        )
        problems = in_system.problems("anthropic")
        assert [p.kind.value for p in problems] == ["misplaced_result"]
        assert "user message" in problems[0].detail
        use_in_user = Transcript(
            (
                Message("user", (ToolUseBlock("a", "f", {}),)),
                Message("user", (ToolResultBlock("a"),)),
            )
        )
        assert "not an assistant message" in use_in_user.problems()[0].detail


class TestReviewRegressions:
    def test_response_fields_do_not_leak_into_requests(self) -> None:
        for codec, response in ((anthropic, ANTHROPIC_RESPONSE), (openai, OPENAI_RESPONSE)):
            msg = codec.decode_response(response)
            t = Transcript((Message.text_message("user", "hi"), msg))
            wire = json.dumps(codec.encode_request(t))
            for field in ("usage", "stop_reason", "finish_reason", "_response", "refusal", "model"):
                assert f'"{field}"' not in wire, (codec.__name__, field)
            assert codec.encode_response(msg) == response

    def test_openai_nulls_and_empty_lists_survive(self) -> None:
        raw = [
            {"role": "system", "content": None},
            {"role": "user", "content": []},
            {"role": "assistant", "content": "y", "tool_calls": None},
            {
                "role": "assistant",
                "content": [],
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": "[1, 2]"},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "g", "arguments": "null"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "x"},
            {"role": "tool", "tool_call_id": "c2", "content": "y"},
            {"role": "assistant"},
        ]
        assert openai.encode_messages(openai.decode_messages(raw)) == raw

    def test_anthropic_explicit_nulls_survive(self) -> None:
        body = {
            "system": None,
            "messages": [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "t", "signature": None},
                        {"type": "tool_use", "id": "a", "name": "f", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "a", "is_error": None}],
                },
            ],
        }
        assert anthropic.encode_request(anthropic.decode_request(body)) == body

    @pytest.mark.parametrize(
        "block",
        [
            {"type": "text", "text": None},
            {"type": "tool_result", "tool_use_id": "a", "is_error": "false"},
            {"type": "tool_use", "id": "a", "name": "f", "input": [["a", 1]]},
            {"type": "image", "source": "x"},
        ],
    )
    def test_malformed_blocks_are_format_errors(self, block: dict) -> None:  # type: ignore[type-arg]
        with pytest.raises(FormatError):
            anthropic.decode_block(block)

    def test_openai_dict_arguments_are_a_format_error(self) -> None:
        raw = [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "f", "arguments": {"a": 1}},
                    }
                ],
            }
        ]
        with pytest.raises(FormatError, match="JSON string"):
            openai.decode_messages(raw)

    def test_openai_request_with_max_tokens_is_detected_as_openai(self, tmp_path: Path) -> None:
        p = tmp_path / "req.json"
        p.write_text(
            json.dumps(
                {"model": "gpt-4o", "max_tokens": 100, "messages": OPENAI_REQUEST["messages"]}
            )
        )
        assert detect_format(p) == "openai"

    def test_claude_code_edge_events(self) -> None:
        raw_line = json.dumps(
            {"type": "user", "message": {"role": "user", "content": "a\u2028b"}}, ensure_ascii=False
        )
        assert "\u2028" in raw_line
        t = claude_code.read_claude_code(raw_line + "\n")
        assert t.messages[0].text == "a\u2028b"
        boundary = json.dumps(
            {
                "type": "system",
                "subtype": "compact_boundary",
                "compactMetadata": {"preTokens": 1e400},
            }
        )
        assert (
            claude_code.read_claude_code(boundary.replace("Infinity", "1e400"))
            .compactions[0]
            .pre_tokens
            is None
        )
        # assistant events without message ids, directly consecutive: one message
        lines = [
            _event("user", "go"),
            _event("assistant", [{"type": "tool_use", "id": "t1", "name": "R", "input": {}}]),
            _event("assistant", [{"type": "tool_use", "id": "t2", "name": "R", "input": {}}]),
            _event("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "1"}]),
            _event("user", [{"type": "tool_result", "tool_use_id": "t2", "content": "2"}]),
            _event("assistant", "side", isSidechain=True),
        ]
        t, report = claude_code.read_claude_code_lines(lines)
        assert [m.role for m in t.messages] == ["user", "assistant", "user"]
        assert t.problems("anthropic") == []
        assert report.skipped["sidechain"] == 1
