"""Auto-detection of Chat Completions requests that carry no system, tool or
tool_calls message: audio, refusals, file parts and named participants.

The shapes follow the OpenAI Chat Completions reference: an assistant audio reply
is ``{"role": "assistant", "content": null, "audio": {"id": ...}}``, a refusal
``{"content": null, "refusal": "..."}``, user parts of type ``input_audio`` and
``file``, an assistant part of type ``refusal``, and ``name`` on any message. The
Messages API has none of these, so each says the file is OpenAI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxwise.compaction import write_back_compaction
from ctxwise.compaction.core import compact
from ctxwise.errors import FormatError
from ctxwise.formats import read_transcript_file, write_back
from ctxwise.memory.facts import Fact
from tests._cli import assert_usage_error, run

AUDIO: dict[str, Any] = {
    "model": "gpt-4o-audio-preview",
    "modalities": ["text", "audio"],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this recording?"},
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            ],
        },
        {"role": "assistant", "content": None, "audio": {"id": "audio_abc123"}},
        {"role": "user", "content": "Say it again, slower."},
    ],
}

REFUSAL: dict[str, Any] = {
    "model": "gpt-4o",
    "messages": [
        {"role": "user", "content": "Help me pick a lock."},
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        {"role": "user", "content": "It is my own door."},
    ],
}

PARTS: dict[str, Any] = {
    "model": "gpt-4o",
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "file", "file": {"file_id": "file-abc123"}},
                {"type": "text", "text": "Summarize the report."},
            ],
        },
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]},
    ],
}

NAMED: dict[str, Any] = {
    "model": "gpt-4o",
    "messages": [
        {"role": "user", "name": "alice", "content": "Hi"},
        {"role": "assistant", "content": "Hello Alice."},
    ],
}


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        (AUDIO, "a 'input_audio' content part"),
        (REFUSAL, "a message with 'refusal'"),
        (PARTS, "a 'file' content part"),
        (NAMED, "a message with 'name'"),
    ],
    ids=["audio", "refusal", "file-part", "name"],
)
def test_openai_only_fields_say_openai(tmp_path: Path, doc: dict[str, Any], reason: str) -> None:
    # these were read as Anthropic ("no OpenAI role or field"): audio and refusal
    # failed with "content must be a string or a list of blocks", the others were
    # taken for an Anthropic request, rendered and counted as one
    p = tmp_path / "req.json"
    p.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    f = read_transcript_file(p)
    assert (f.format, f.shape, f.reason) == ("openai", "request", reason)
    data, shape = write_back(f, {0: f.transcripts[0]})
    assert shape == "request"
    assert json.loads(data) == doc


def test_null_content_alone_says_openai(tmp_path: Path) -> None:
    doc = [{"role": "user", "content": "x"}, {"role": "assistant", "content": None}]
    p = tmp_path / "messages.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    f = read_transcript_file(p)
    assert (f.format, f.reason) == ("openai", "a message whose content is null")
    assert json.loads(write_back(f, {0: f.transcripts[0]})[0]) == doc


def test_anthropic_messages_are_still_anthropic(tmp_path: Path) -> None:
    doc = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            {"role": "assistant", "content": "Hello."},
        ],
    }
    p = tmp_path / "req.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    assert read_transcript_file(p).format == "anthropic"


def _chat(**params: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for i in range(6):
        ask = f"Question {i}: my email is ana@example.com, order 4417. " + "more " * 80
        messages.append({"role": "user", "content": ask})
        messages.append({"role": "assistant", "content": f"Answer {i}. " + "text " * 80})
    return {"model": "gpt-4o", **params, "messages": messages}


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"max_completion_tokens": 500}, "max_completion_tokens"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"n": 2, "seed": 7}, "n"),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
            "tools",
        ),
    ],
    ids=["max_completion_tokens", "response_format", "n", "function-tools"],
)
def test_chat_completions_parameters_say_openai(
    tmp_path: Path, params: dict[str, Any], key: str
) -> None:
    # a request of plain user and assistant strings gives no sign in its messages;
    # its parameters do (the Messages API has none of these)
    p = tmp_path / "req.json"
    p.write_text(json.dumps(_chat(**params)), encoding="utf-8")
    f = read_transcript_file(p)
    assert (f.format, f.reason) == ("openai", f"a request with {key!r}")


def test_anthropic_tools_and_params_are_still_anthropic(tmp_path: Path) -> None:
    doc = _chat(max_tokens=500, tools=[{"name": "f", "input_schema": {"type": "object"}}])
    p = tmp_path / "req.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    assert read_transcript_file(p).format == "anthropic"


def test_compacting_an_openai_request_keeps_it_one(tmp_path: Path) -> None:
    # read as Anthropic, the pinned facts went into a top-level "system", which
    # Chat Completions rejects ("Unrecognized request argument supplied: system")
    p = tmp_path / "req.json"
    p.write_text(json.dumps(_chat(max_completion_tokens=500)), encoding="utf-8")
    f = read_transcript_file(p)
    facts = [Fact("email", "ana@example.com")]
    result = compact(f.transcripts[0], keep_tail_turns=1, facts=facts)
    assert result.compacted
    out = json.loads(write_back_compaction(f, result)[0])
    assert "system" not in out
    assert out["max_completion_tokens"] == 500
    assert out["messages"][0]["role"] == "system"
    assert "ana@example.com" in out["messages"][0]["content"]


@pytest.mark.parametrize("kind", [{"a": 1}, ["text"], 3, None])
def test_a_block_type_that_is_no_string_is_a_format_error(tmp_path: Path, kind: Any) -> None:
    # detection looked the type up in a set: a dict or list raised TypeError (a
    # traceback from the CLI) before the codec could say what was wrong
    doc = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": kind, "text": "x"}]}]}  # fmt: skip
    p = tmp_path / "req.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(FormatError, match="content block has no 'type'"):
        read_transcript_file(p)
    assert_usage_error(run("clear", p, "--out", tmp_path / "out.json"), "no 'type'")
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("m.jsonl", '{"role": ["user"], "content": "x"}\n{"role": "assistant", "content": "y"}\n',
         "no line is a message object"),
        ("m.json", '{"role": {"a": 1}, "content": "x"}', "no known transcript shape"),
    ],
    ids=["jsonl", "one-message"],
)  # fmt: skip
def test_a_role_that_is_no_string_is_refused(
    tmp_path: Path, name: str, text: str, why: str
) -> None:
    # the role was looked up in a set too: TypeError, a traceback from the CLI
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    assert_usage_error(run("clear", p, "--out", tmp_path / "out.json"), why)
    assert not (tmp_path / "out.json").exists()
