"""Reading what agents write, and writing it back in the same shape.

The files are made here, shaped exactly as the tools write them: LiveMCPBench's
published results (``baseline/output/*.json``: a list of task objects, each with
an OpenAI ``messages`` list), OpenAI messages JSONL, files with a byte order mark.
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any

import pytest

from ctxwise.errors import FormatError, UnknownFormatError, UsageError
from ctxwise.formats import (
    detect_format,
    openai,
    read_transcript,
    read_transcript_file,
    read_transcripts,
    write_back,
)
from ctxwise.messages import ToolResultBlock, Transcript


def livemcp_task(i: int, calls: int = 2) -> dict[str, Any]:
    """One task of a LiveMCPBench results file, with its fields in the tool's order."""
    question = f"Generate a report number {i} as a PDF in /root/pdf."
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent designed to assist users ..."},
        {"role": "user", "content": question},
    ]
    for c in range(calls):
        call_id = f"toolu_{i:02d}{c:02d}"
        messages.append(
            {
                "content": f"Let me search for tools, step {c}.",
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": call_id,
                        "function": {
                            "arguments": json.dumps({"query": f"<tool_assistant>step {c}"}),
                            "name": "route",
                        },
                        "type": "function",
                    }
                ],
            }
        )
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call_id,
                "content": "meta=None content=[TextContent(type='text', text=\"success: "
                + "matched_tools: ... " * 40
                + '")] isError=False',
            }
        )
    messages.append({"content": f"Done: report {i} written.", "role": "assistant"})
    return {
        "task_id": f"0e3287cb-c0ff-4d2a-8c3d-d8833014a7b{i}",
        "Question": question,
        "answers": f"file /root/pdf/report_{i}.pdf",
        "category": "work",
        "file_name": "",
        "Annotator Metadata": {"Steps": "1. search\n2. write", "Number of steps": "2"},
        "response": f"Done: report {i} written.",
        "messages": messages,
    }


def write_json(path: Path, doc: Any, indent: int | None = 4) -> Path:
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=indent), encoding="utf-8")
    return path


def jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    return path


class TestLiveMCPBench:
    def test_each_task_is_a_transcript(self, tmp_path: Path) -> None:
        tasks = [livemcp_task(i) for i in range(3)]
        p = write_json(tmp_path / "claude-sonnet-4_Qwen3-Embedding-0.6B.json", tasks)
        assert detect_format(p) == "openai"
        f = read_transcript_file(p)
        assert (f.format, f.shape, len(f.transcripts)) == ("openai", "records", 3)
        assert f.reason is not None and "'messages'" in f.reason
        t = read_transcript(p, index=1)
        assert t.source == f"{p}[1]" and t.format == "openai"
        assert [m.role for m in t.messages][:3] == ["system", "user", "assistant"]
        assert t.problems("openai") == []
        assert t.tool_names() == {"toolu_0100": "route", "toolu_0101": "route"}

    def test_write_back_replaces_one_tasks_messages_only(self, tmp_path: Path) -> None:
        tasks = [livemcp_task(i) for i in range(3)]
        p = write_json(tmp_path / "results.json", tasks)
        f = read_transcript_file(p)
        t = f.transcripts[2]
        edited = Transcript(t.messages[:-1], t.params, source=t.source, format=t.format)
        data, shape = write_back(f, {2: edited})
        assert shape == "records"
        body = json.loads(data)
        assert body[:2] == tasks[:2]
        assert {k: v for k, v in body[2].items() if k != "messages"} == {
            k: v for k, v in tasks[2].items() if k != "messages"
        }
        assert list(body[2]) == list(tasks[2])  # the fields keep their order
        assert body[2]["messages"] == tasks[2]["messages"][:-1]
        # nothing edited: the same document
        assert json.loads(write_back(f, {})[0]) == tasks
        assert json.loads(write_back(f, {0: f.transcripts[0]})[0]) == tasks

    def test_it_was_misread_as_anthropic(self, tmp_path: Path) -> None:
        # the issue: 'message 0: role must be 'user' or 'assistant', got None'
        p = write_json(tmp_path / "results.json", [livemcp_task(0)])
        assert read_transcripts(p)[0].messages[0].role == "system"

    def test_a_broken_task_names_the_format_and_the_task(self, tmp_path: Path) -> None:
        tasks = [livemcp_task(0), livemcp_task(1)]
        tasks[1]["messages"][3]["role"] = "robot"
        p = write_json(tmp_path / "results.json", tasks)
        with pytest.raises(FormatError) as info:
            read_transcripts(p)
        msg = str(info.value)
        assert msg.startswith(f"{p}[1]: read as OpenAI records")
        assert "message 3: unknown role 'robot'" in msg
        assert info.value.source == f"{p}[1]"


class TestMessagesJSONL:
    LINES: list[dict[str, Any]] = [  # noqa: RUF012
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                    "type": "function",
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C, cloudy"},
        {"role": "assistant", "content": "18 C and cloudy."},
    ]

    def test_openai_jsonl_is_read_and_written_back_as_jsonl(self, tmp_path: Path) -> None:
        p = jsonl(tmp_path / "chat.jsonl", self.LINES)
        assert detect_format(p) == "openai"
        f = read_transcript_file(p)
        assert (f.format, f.shape, len(f.transcripts)) == ("openai", "jsonl", 1)
        t = f.transcripts[0]
        assert t.tool_names() == {"call_1": "weather"}
        data, shape = write_back(f, {0: t})
        assert shape == "jsonl"
        assert [json.loads(line) for line in data.decode().splitlines()] == self.LINES
        assert data.decode() == p.read_text()  # json.dumps lines come back byte for byte

    def test_detected_by_content_whatever_the_extension(self, tmp_path: Path) -> None:
        for name in ("chat.json", "chat.txt", "chat.jsonl"):
            p = jsonl(tmp_path / name, self.LINES)
            f = read_transcript_file(p)
            assert (f.format, f.shape) == ("openai", "jsonl"), name
            assert read_transcript_file(p, "openai").shape == "jsonl"
        one = jsonl(tmp_path / "one.jsonl", self.LINES[1:2])
        assert read_transcript_file(one).shape == "jsonl"

    def test_claude_code_jsonl_is_still_claude_code(self, tmp_path: Path) -> None:
        event = {"type": "user", "message": {"role": "user", "content": "hi"}, "uuid": "u1"}
        p = jsonl(tmp_path / "session.jsonl", [event])
        assert detect_format(p) == "claude-code"
        assert read_transcript_file(p).shape == "session"

    def test_jsonl_that_is_no_session_is_refused(self, tmp_path: Path) -> None:
        # a tool catalog (LiveMCPBench lines): no 'role', no 'type' on any line; it
        # was read as an empty Claude Code session (``ctxwise clear`` wrote a copy)
        tools = [
            {"server": "weather", "name": "forecast", "description": "d", "inputSchema": {}},
            {"server": "mail", "name": "send", "description": "d", "inputSchema": {}},
        ]
        p = jsonl(tmp_path / "tools.jsonl", tools)
        with pytest.raises(UnknownFormatError, match="no line is a message object"):
            detect_format(p)
        with pytest.raises(UnknownFormatError):
            read_transcript_file(p)
        snapshot = {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}
        assert detect_format(jsonl(tmp_path / "empty.jsonl", [snapshot])) == "claude-code"

    def test_anthropic_messages_jsonl(self, tmp_path: Path) -> None:
        lines: list[dict[str, Any]] = [
            {"role": "user", "content": "Look it up."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "find", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}],
            },
        ]
        p = jsonl(tmp_path / "m.jsonl", lines)
        f = read_transcript_file(p)
        assert (f.format, f.shape) == ("anthropic", "jsonl")
        data, _ = write_back(f, {0: f.transcripts[0]})
        assert [json.loads(x) for x in data.decode().splitlines()] == lines

    def test_a_half_written_file_names_the_line(self, tmp_path: Path) -> None:
        p = tmp_path / "chat.jsonl"
        text = "".join(json.dumps(x) + "\n" for x in self.LINES)
        p.write_text(text[: text.index('"role": "tool"') + 10])
        with pytest.raises(FormatError) as info:
            read_transcripts(p)
        assert info.value.line == 4
        assert "not valid messages JSONL" in str(info.value) and f"{p}:4:" in str(info.value)
        with pytest.raises(FormatError, match="not valid OpenAI JSONL") as given:
            read_transcripts(p, "openai")
        assert given.value.line == 4

    def test_a_bad_message_names_its_line_and_the_format(self, tmp_path: Path) -> None:
        lines = [*self.LINES[:3], {"role": "tool", "content": "no id"}, *self.LINES[4:]]
        p = jsonl(tmp_path / "chat.jsonl", [{}, *lines][1:])
        p.write_text("\n" + p.read_text())  # a blank first line: line numbers count it
        with pytest.raises(FormatError) as info:
            read_transcripts(p)
        assert info.value.line == 5
        assert "read as OpenAI messages JSONL (auto-detected: a message object" in str(info.value)
        assert "needs 'tool_call_id'" in str(info.value)


class TestEncodings:
    @pytest.mark.parametrize(
        ("bom", "codec"),
        [
            (codecs.BOM_UTF8, "utf-8"),
            (codecs.BOM_UTF16_LE, "utf-16-le"),
            (codecs.BOM_UTF16_BE, "utf-16-be"),
            (codecs.BOM_UTF32_LE, "utf-32-le"),
            (codecs.BOM_UTF32_BE, "utf-32-be"),
        ],
    )
    def test_bom_files_read_and_write_back_as_utf8(
        self, tmp_path: Path, bom: bytes, codec: str
    ) -> None:
        doc = [livemcp_task(0)]
        doc[0]["Question"] = "Résumé du café \U0001f600"
        p = tmp_path / "results.json"
        p.write_bytes(bom + json.dumps(doc, ensure_ascii=False, indent=4).encode(codec))
        f = read_transcript_file(p)
        assert (f.format, f.shape) == ("openai", "records")
        data, _ = write_back(f, {0: f.transcripts[0]})
        assert not data.startswith(codecs.BOM_UTF8)
        assert json.loads(data.decode("utf-8")) == doc
        lines = tmp_path / "chat.jsonl"
        body = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in TestMessagesJSONL.LINES)
        lines.write_bytes(bom + body.encode(codec))
        assert read_transcript_file(lines).shape == "jsonl"


class TestErrorsNameTheFormat:
    def test_detected_format_and_why(self, tmp_path: Path) -> None:
        p = write_json(tmp_path / "m.json", [{"role": "user", "content": [{"type": "text"}]}])
        with pytest.raises(FormatError) as info:
            read_transcripts(p)
        msg = str(info.value)
        assert msg.startswith(
            f"{p}: read as Anthropic messages (auto-detected: no OpenAI role or field): "
        )

    def test_given_format(self, tmp_path: Path) -> None:
        p = write_json(tmp_path / "r.json", {"messages": [{"role": "robot", "content": "x"}]})
        with pytest.raises(FormatError, match=r"read as OpenAI request: message 0: unknown role"):
            read_transcripts(p, "openai")
        junk = tmp_path / "junk.json"
        junk.write_text('{"messages": [')
        with pytest.raises(FormatError, match="not valid OpenAI JSON") as info:
            read_transcripts(junk, "openai")
        assert info.value.line == 1
        with pytest.raises(UnknownFormatError, match="not JSON or JSONL"):
            read_transcripts(junk)

    def test_empty_and_unknown(self, tmp_path: Path) -> None:
        p = tmp_path / "e.json"
        p.write_text("  \n")
        with pytest.raises(UnknownFormatError, match="empty file"):
            read_transcripts(p)
        p.write_text('{"hello": 1}')
        with pytest.raises(UnknownFormatError, match="no known transcript shape"):
            read_transcripts(p)


class TestWriteBack:
    def test_shapes_round_trip(self, tmp_path: Path) -> None:
        msgs = TestMessagesJSONL.LINES
        cases: dict[str, tuple[Any, str]] = {
            "request": ({"model": "gpt-4o", "temperature": 0, "messages": msgs}, "request"),
            "messages": (msgs, "messages"),
            "trajectory": ({"task_id": 3, "reward": 1.0, "traj": msgs}, "trajectory"),
            "trajectories": ([{"task_id": i, "traj": msgs} for i in range(2)], "trajectories"),
        }
        for name, (doc, shape) in cases.items():
            p = write_json(tmp_path / f"{name}.json", doc)
            f = read_transcript_file(p)
            assert f.shape == shape, name
            data, written = write_back(f, dict(enumerate(f.transcripts)))
            assert written == shape and json.loads(data) == doc, name

    def test_response_stays_a_response_while_it_is_one_message(self, tmp_path: Path) -> None:
        resp = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "hi"},
                    "finish_reason": "stop",
                }
            ],
        }
        f = read_transcript_file(write_json(tmp_path / "resp.json", resp))
        data, shape = write_back(f, {0: f.transcripts[0]})
        assert shape == "response" and json.loads(data) == resp

    def test_sessions_and_refusals(self, tmp_path: Path) -> None:
        event = {"type": "user", "message": {"role": "user", "content": "hi"}}
        f = read_transcript_file(jsonl(tmp_path / "s.jsonl", [event]))
        # a Claude Code session is written back as a session: unedited, byte for byte
        assert write_back(f, {}) == (f.text.encode("utf-8"), "session")
        assert write_back(f, {0: f.transcripts[0]})[0] == f.text.encode("utf-8")
        g = read_transcript_file(write_json(tmp_path / "m.json", TestMessagesJSONL.LINES))
        with pytest.raises(UsageError, match="index 5 is out of range"):
            write_back(g, {5: g.transcripts[0]})

    def test_lone_surrogates_are_escaped(self, tmp_path: Path) -> None:
        p = tmp_path / "m.json"
        p.write_text('[{"role": "user", "content": "cut \\ud83d"}]')
        f = read_transcript_file(p)
        data, _ = write_back(f, {0: f.transcripts[0]})
        assert b"\\ud83d" in data and json.loads(data)[0]["content"] == "cut \ud83d"

    def test_tool_result_edit_lands_in_the_right_task(self, tmp_path: Path) -> None:
        tasks = [livemcp_task(i) for i in range(2)]
        f = read_transcript_file(write_json(tmp_path / "r.json", tasks))
        t = f.transcripts[0]
        msgs = list(t.messages)
        i = next(
            k for k, m in enumerate(msgs) if any(isinstance(b, ToolResultBlock) for b in m.content)
        )
        block = msgs[i].content[0]
        assert isinstance(block, ToolResultBlock)
        msgs[i] = type(msgs[i])(
            "user",
            (ToolResultBlock(block.tool_use_id, "[cleared]", None, block.extra),),
            extra=msgs[i].extra,
        )
        data, _ = write_back(f, {0: Transcript(tuple(msgs), format="openai")})
        body = json.loads(data)
        assert body[1] == tasks[1]
        assert body[0]["messages"][3] == {
            "role": "tool",
            "tool_call_id": tasks[0]["messages"][3]["tool_call_id"],
            "content": "[cleared]",
        }
        assert openai.decode_messages(body[0]["messages"]).problems("openai") == []
