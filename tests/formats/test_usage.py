"""Usage steps: what the provider counted between two calls of a recorded session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxwise.errors import FormatError
from ctxwise.formats.usage import (
    CallUsage,
    claude_code_usage_steps,
    prompt_tokens,
    transcript_calls,
    usage_steps,
)
from ctxwise.messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
)

SESSION = "transcripts/claude_code/258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def _lines(path: Path, n: int) -> str:
    """The first ``n`` lines of a file."""
    with path.open(encoding="utf-8") as f:
        return "".join(next(f) for _ in range(n))


def _usage(inp: int, read: int = 0, write: int = 0, out: int = 1) -> dict[str, Any]:
    return {
        "input_tokens": inp,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
        "output_tokens": out,
    }


def _event(kind: str, uid: str, parent: str | None, message: dict[str, Any], **kw: Any) -> str:
    return json.dumps({"type": kind, "uuid": uid, "parentUuid": parent, "message": message, **kw})


def _session(*calls: tuple[str, dict[str, Any] | None], model: str = "claude-opus-4-6") -> str:
    """A session: a prompt, then per call an assistant line with ``usage`` (none
    when None) and a tool call, and a user line with its result."""
    lines = [_event("user", "u0", None, {"role": "user", "content": "start"})]
    parent = "u0"
    for i, (mid, usage) in enumerate(calls):
        msg: dict[str, Any] = {
            "role": "assistant",
            "id": mid,
            "model": model,
            "content": [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"n": i}}],
        }
        if usage is not None:
            msg["usage"] = usage
        lines.append(_event("assistant", f"a{i}", parent, msg))
        lines.append(
            _event(
                "user",
                f"r{i}",
                f"a{i}",
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"result {i}"}
                    ],
                },
            )
        )
        parent = f"r{i}"
    return "\n".join(lines) + "\n"


def test_prompt_tokens_adds_the_cache_fields() -> None:
    assert prompt_tokens(_usage(3, 17842, 8037)) == 25882
    assert prompt_tokens({"input_tokens": 5}) == 5  # before prompt caching
    assert prompt_tokens({"input_tokens": 5, "cache_read_input_tokens": None}) == 5
    assert prompt_tokens({"prompt_tokens": 12, "completion_tokens": 3}) == 12  # OpenAI
    for bad in (
        None,
        {},
        {"input_tokens": -1},
        {"input_tokens": "3"},
        {"input_tokens": True},
        {"input_tokens": 1, "cache_read_input_tokens": 2.5},
        [1, 2],
    ):
        assert prompt_tokens(bad) is None


def test_a_real_session_gives_one_step_per_pair_of_calls(data_dir: Path) -> None:
    # the first 140 lines of a real session: several calls, one split over many
    # assistant lines with parallel tool calls and their results interleaved
    text = _lines(data_dir / SESSION, 140)
    steps, report = claude_code_usage_steps(text, source="s")
    assert report.calls == len(steps) + 1 and not report.skipped
    first = steps[0]
    # recorded usage: 3 + 17842 + 8037 then 1 + 25879 + 1457
    assert (first.prompt_before, first.prompt_after, first.delta) == (25882, 27337, 1455)
    assert first.step == "s#1" and first.model == "claude-opus-4-6"
    assistant, results = first.added
    assert assistant.role == "assistant" and results.role == "user"
    kinds = [type(b) for b in assistant.content]
    assert ThinkingBlock in kinds and kinds.count(ToolUseBlock) == 3  # one response, 6 lines
    assert [type(b) for b in results.content] == [ToolResultBlock] * 3  # the parallel results
    assert all(s.delta > 0 for s in steps)


def test_every_shared_claude_code_file_reads_without_error(data_dir: Path) -> None:
    folder = data_dir / "transcripts" / "claude_code"
    total = 0
    for path in sorted([*folder.glob("*.jsonl"), *folder.glob("*/subagents/*.jsonl")]):
        steps, report = claude_code_usage_steps(path.read_text(encoding="utf-8"))
        assert report.steps == len(steps)
        assert set(report.skipped) <= {"compaction"}
        total += len(steps)
    assert total > 400


def test_the_pair_around_a_compaction_is_skipped(data_dir: Path) -> None:
    text = (data_dir / SESSION).read_text(encoding="utf-8")
    steps, report = claude_code_usage_steps(text)
    assert report.skipped == {"compaction": 1}
    assert report.calls == len(steps) + 2
    assert all(m.kind != "compact_summary" for s in steps for m in s.added)


def test_missing_inconsistent_and_shrinking_usage_are_counted() -> None:
    text = _session(
        ("m0", _usage(10, 100)),
        ("m1", None),  # no usage: both pairs touching it are skipped
        ("m2", _usage(10, 300)),
        ("m3", _usage(10, 250)),  # the prompt shrank
        ("m4", _usage(10, 400)),
        ("m5", _usage(10, 500)),
    )
    steps, report = claude_code_usage_steps(text)
    assert report.skipped == {"missing_usage": 2, "non_positive_delta": 1}
    assert [s.delta for s in steps] == [150, 100]
    # one response over two lines that disagree on its prompt
    lines = text.split("\n")
    copy = json.loads(lines[-3])
    copy["uuid"] = "a5-again"
    copy["message"]["usage"] = _usage(11, 500)
    copy["message"]["content"] = [{"type": "text", "text": "more"}]
    lines.insert(len(lines) - 2, json.dumps(copy))
    steps, report = claude_code_usage_steps("\n".join(lines))
    assert report.skipped == {"missing_usage": 2, "non_positive_delta": 1, "inconsistent_usage": 1}
    assert [s.delta for s in steps] == [150]


def test_a_model_change_is_skipped() -> None:
    lines = _session(("m0", _usage(1, 100)), ("m1", _usage(1, 200))).split("\n")
    event = json.loads(lines[3])
    event["message"]["model"] = "claude-sonnet-4-5"
    lines[3] = json.dumps(event)
    steps, report = claude_code_usage_steps("\n".join(lines))
    assert steps == [] and report.skipped == {"model_changed": 1}


def test_a_file_that_is_not_a_session_raises_a_format_error() -> None:
    with pytest.raises(FormatError):
        claude_code_usage_steps("{not json\n")


def test_any_transcript_with_usage_on_its_responses_plugs_in() -> None:
    msgs = (
        Message("user", (TextBlock("hi"),)),
        Message("assistant", (TextBlock("a"),), extra={"openai.usage": {"prompt_tokens": 10}}),
        Message("user", (TextBlock("more"),)),
        Message("assistant", (TextBlock("b"),), extra={"openai.usage": {"prompt_tokens": 25}}),
        Message("assistant", (TextBlock("c"),)),  # no usage recorded
    )
    transcript = Transcript(msgs)
    calls = transcript_calls(transcript)
    assert [c.prompt_tokens for c in calls] == [10, 25, None]
    steps, report = usage_steps(transcript, calls, source="x")
    assert [(s.delta, len(s.added)) for s in steps] == [(15, 2)]
    assert report.skipped == {"missing_usage": 1}
    # calls given in any order are paired by position in the transcript
    steps, _ = usage_steps(transcript, [calls[1], calls[0]])
    assert [s.delta for s in steps] == [15]
    assert usage_steps(transcript, [CallUsage(1, 10)])[0] == []


def test_billed_split_reads_each_apis_usage() -> None:
    from ctxwise.formats.usage import billed_split
    from ctxwise.pricing import TokenSplit

    anthropic = {
        "input_tokens": 12,
        "cache_read_input_tokens": 900,
        "cache_creation_input_tokens": 300,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
        "output_tokens": 40,
    }
    assert billed_split(anthropic) == TokenSplit(12, 900, 100, 200, 40)
    assert billed_split({"input_tokens": 7, "output_tokens": 3}) == TokenSplit(7, 0, 0, 0, 3)
    chat = {
        "prompt_tokens": 1000,
        "prompt_tokens_details": {"cached_tokens": 768},
        "completion_tokens": 20,
    }
    assert billed_split(chat) == TokenSplit(232, 768, 0, 0, 20)
    responses = {
        "input_tokens": 500,
        "input_tokens_details": {"cached_tokens": 256},
        "output_tokens": 9,
    }
    assert billed_split(responses) == TokenSplit(244, 256, 0, 0, 9)
    # cached tokens cannot exceed the input they are part of
    assert billed_split({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 50}}) == (
        TokenSplit(0, 5, 0, 0, 0)
    )
    for missing in (None, {}, {"output_tokens": 3}, {"input_tokens": "many"}, [1]):
        assert billed_split(missing) is None
