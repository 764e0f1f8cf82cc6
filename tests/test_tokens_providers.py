"""Counters per provider family: OpenAI's documented overheads, the calibrated
Anthropic counter, choosing one from a model name, and their measured errors."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise.calibration import (
    fit_anthropic,
    group_claude_code_files,
    leave_one_out,
    score_counter,
    score_estimates,
    step_estimate,
)
from ctxwise.errors import UsageError
from ctxwise.formats.usage import UsageStep, claude_code_usage_steps
from ctxwise.messages import (
    MediaBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ctxwise.tokens import (
    AnthropicCalibration,
    CalibratedAnthropicCounter,
    CharCounter,
    OpenAIChatCounter,
    counter_error,
    counter_for_model,
    get_counter,
    is_claude_model,
    openai_encoding,
)
from ctxwise.tokens.anthropic import char_units

ROOT = Path(__file__).resolve().parents[1]


def _bpe() -> None:
    pytest.importorskip("quicktok", reason="the tiktoken extra (quicktok-v1) is not installed")


# ------------------------------------------------------------------ OpenAI

# The cookbook's examples ("How to count tokens with tiktoken", sections 6 and 7),
# whose counts it checked against the API's usage.prompt_tokens.
JARGON = [
    (
        "system",
        None,
        "You are a helpful, pattern-following assistant that translates "
        "corporate jargon into plain English.",
    ),
    ("system", "example_user", "New synergies will help drive top-line growth."),
    ("system", "example_assistant", "Things working well together will increase revenue."),
    (
        "system",
        "example_user",
        "Let's circle back when we have more bandwidth to touch base "
        "on opportunities for increased leverage.",
    ),
    (
        "system",
        "example_assistant",
        "Let's talk later when we're less busy about how to do better.",
    ),
    (
        "user",
        None,
        "This late pivot means we don't have time to boil the ocean for the client deliverable.",
    ),
]
WEATHER_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {
                        "type": "string",
                        "description": "The city and state, e.g. San Francisco, CA",
                    },
                    "unit": {
                        "type": "string",
                        "description": "The unit of temperature to return",
                        "enum": ["celsius", "fahrenheit"],
                    },
                },
                "required": ["location"],
            },
        },
    }
]
WEATHER = [
    ("system", None, "You are a helpful assistant that can answer to questions about the weather."),
    ("user", None, "What's the weather like in San Francisco?"),
]


def _messages(rows: Sequence[tuple[str, str | None, str]]) -> list[Message]:
    return [
        Message(role, (TextBlock(text),), extra={"openai.name": name} if name else {})  # type: ignore[arg-type]
        for role, name, text in rows
    ]


@pytest.mark.parametrize(
    ("model", "expected"),
    [("gpt-4o", 124), ("gpt-4o-mini", 124), ("gpt-4-0613", 129), ("gpt-3.5-turbo", 129)],
)
def test_openai_messages_match_the_cookbook(model: str, expected: int) -> None:
    _bpe()
    assert OpenAIChatCounter(model).count_messages(_messages(JARGON)) == expected


@pytest.mark.parametrize(("model", "expected"), [("gpt-4o", 101), ("gpt-4", 105)])
def test_openai_tools_match_the_cookbook(model: str, expected: int) -> None:
    _bpe()
    counter = OpenAIChatCounter(model)
    total = counter.count_messages(_messages(WEATHER)) + counter.count_tools(WEATHER_TOOLS)
    assert total == expected
    # a bare function and an Anthropic-style definition count the same
    fn = WEATHER_TOOLS[0]["function"]
    bare = {"name": fn["name"], "description": fn["description"], "input_schema": fn["parameters"]}
    assert counter.count_tools([bare]) == counter.count_tools(WEATHER_TOOLS)
    assert counter.count_tools([]) == 0


def test_openai_model_names_choose_their_encoding() -> None:
    o200k = [
        "gpt-4o",
        "gpt-4o-2024-08-06",
        "gpt-4.1-mini",
        "gpt-5",
        "o1",
        "o3-mini",
        "o4-mini",
        "openai/gpt-4o",
        "chatgpt-4o-latest",
    ]
    assert all(openai_encoding(m) == "o200k_base" for m in o200k)
    assert all(
        openai_encoding(m) == "cl100k_base" for m in ("gpt-4", "gpt-4-turbo", "gpt-3.5-turbo")
    )
    assert all(openai_encoding(m) is None for m in ("claude-opus-4-6", "o1x", "llama-3", ""))
    with pytest.raises(UsageError, match="not an OpenAI chat model"):
        OpenAIChatCounter("claude-opus-4-6")


# ------------------------------------------------------------------ the chooser


def test_counter_for_model() -> None:
    for claude in (
        "claude-opus-4-6",
        "claude-3-5-sonnet-20241022",
        "anthropic/claude-sonnet-4-5",
        "us.anthropic.claude-sonnet-4-5-v1:0",
    ):
        assert is_claude_model(claude)
        assert isinstance(counter_for_model(claude), CalibratedAnthropicCounter)
    for unknown in (None, "", "  ", "llama-3.1-70b", "mistral-large", "gemini-2.5-pro"):
        counter = counter_for_model(unknown)
        assert isinstance(counter, CharCounter) and counter.safety_margin == 0
    gpt = counter_for_model("gpt-4o")
    if isinstance(gpt, OpenAIChatCounter):  # with the tiktoken extra
        assert gpt.encoding == "o200k_base"
    else:
        assert isinstance(gpt, CharCounter)


def test_get_counter_knows_the_provider_counters() -> None:
    assert get_counter("anthropic:chars").name == "anthropic:chars"
    assert get_counter("auto:mistral").name == "char"
    assert get_counter("auto:claude-opus-4-6").name.startswith("anthropic:")
    with pytest.raises(UsageError, match="unknown counter"):
        get_counter("anthropic:bpe")
    with pytest.raises(UsageError, match="not an OpenAI chat model"):
        get_counter("openai:llama")


def test_each_calibrated_counter_has_a_held_out_error() -> None:
    for name in ("anthropic:chars", "anthropic:o200k"):
        err = counter_error(name)
        assert err is not None and err.held_out and err.steps > 100
        assert 0 < err.p50 <= err.p90 <= err.p95
    char = counter_error(CharCounter())
    assert char is not None and not char.held_out
    assert counter_error("word", provider="openai") is None
    assert counter_error("nope") is None


# ------------------------------------------------------------------ calibrated Anthropic

TEXTS = st.text(alphabet=st.characters(codec="utf-8"), max_size=60)


@given(TEXTS, TEXTS)
def test_the_calibrated_count_never_falls_when_text_is_appended(a: str, b: str) -> None:
    counter = CalibratedAnthropicCounter("chars")
    assert counter.count(a + b) >= counter.count(a)
    assert counter.count(a) == counter.count(a)
    assert (counter.count(a) == 0) == (a == "")


_PIECE = re.compile(r"[A-Za-z]+|[0-9]|\n|[ \t]+|[!-/:-@\[-`{-~]|[^\x00-\x7f]|[\x00-\x1f\x7f]")


def _char_units_by_pieces(text: str) -> tuple[int, ...]:
    """The definition of the chars units, piece by piece (char_units counts them
    with byte operations)."""
    units = [0] * 7
    for m in _PIECE.finditer(text):
        piece = m.group()
        c = piece[0]
        if c.isascii() and c.isalpha():
            units[0] += 1
            units[1] += len(piece)
        elif c.isascii() and c.isdigit():
            units[2] += 1
        elif c == "\n":
            units[3] += 1
        elif c in " \t":
            units[4] += 1
        elif c.isascii() and c.isprintable():
            units[5] += 1
        else:
            units[6] += 1
    return tuple(units)


@given(
    st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("?a1 \t\n\r.é"), max_size=80)
)
def test_char_units_count_the_pieces(text: str) -> None:
    assert char_units(text) == _char_units_by_pieces(text)


def test_char_units() -> None:
    assert char_units("Hello, world 42\n  x") == (3, 11, 2, 1, 3, 1, 0)
    assert char_units("日本語") == (0, 0, 0, 0, 0, 0, 3)
    assert char_units("a\ud800?") == (1, 1, 0, 0, 0, 1, 1)  # a lone surrogate is one other


def test_the_calibrated_counter_counts_every_block_kind() -> None:
    counter = CalibratedAnthropicCounter("chars")
    cal = counter.calibration
    call = ToolUseBlock("t1", "Bash", {"command": "ls -la"})
    msgs = [
        Message("assistant", (ThinkingBlock("let me look"), TextBlock("Looking."), call)),
        Message("user", (ToolResultBlock("t1", "a.txt\nb.txt"),)),
    ]
    feats, media = counter.features(msgs)
    assert media == 0 and feats[-1] == 2  # two messages
    assert feats[len(cal.weights) : -1] == [1, 1, 1, 1, 0]  # one block of each kind
    n = counter.count_messages(msgs)
    assert n == math.ceil(sum(a * b for a, b in zip(cal.coefficients, feats, strict=True)) - 1e-9)
    image = MediaBlock("image", {"type": "base64", "media_type": "image/png", "data": "AAAA"})
    with_image = [*msgs, Message("user", (image,))]
    assert counter.count_messages(with_image) >= n + counter.media_tokens
    assert counter.count_messages([]) == 0


def test_a_calibration_is_checked() -> None:
    with pytest.raises(UsageError, match="at least 0"):
        AnthropicCalibration("chars", (-1.0, 0, 0, 0, 0, 0, 0), (0, 0, 0, 0, 0), 0)
    with pytest.raises(UsageError, match="7 weights"):
        AnthropicCalibration("chars", (1.0,), (0, 0, 0, 0, 0), 0)
    with pytest.raises(UsageError, match="finite"):
        AnthropicCalibration("o200k", (math.nan, 1, 1, 1), (0, 0, 0, 0, 0), 0)
    with pytest.raises(UsageError, match="for the chars tokenizer"):
        CalibratedAnthropicCounter("o200k", calibration=AnthropicCalibration.zeros("chars"))


def _step(delta: int, *messages: Message) -> UsageStep:
    return UsageStep("synthetic", f"synthetic#{delta}", tuple(messages), delta, 0, delta)


def test_the_fit_recovers_known_coefficients() -> None:
    truth = AnthropicCalibration.from_coefficients(
        "chars", [1.0, 0.2, 0.5, 1.0, 0.5, 0.8, 2.0, 3.0, 40.0, 0.0, 5.0, 0.0, 4.0]
    )
    counter = CalibratedAnthropicCounter("chars", calibration=truth)
    words = ["alpha", "beta42", "x = {y: 1}", "日本", "line\nbreak", "  indented", "ok."]
    steps = []
    for i in range(60):
        text = " ".join(words[j % len(words)] for j in range(i + 1))
        call = ToolUseBlock(f"t{i}", "Read", {"path": words[i % len(words)] * (i % 4 + 1)})
        msgs = (
            Message("assistant", (TextBlock(text),) + ((call,) if i % 2 else ())),
            Message(
                "user",
                (ToolResultBlock(f"t{i}", text[: i * 3]),) if i % 2 else (TextBlock("next"),),
            ),
        )
        steps.append(_step(counter.count_messages(msgs), *msgs))
    fitted = CalibratedAnthropicCounter("chars", calibration=fit_anthropic(steps, "chars"))
    score = score_counter(fitted, steps)
    assert score.p90 < 0.02 and abs(score.ratio - 1) < 0.01


def test_scoring_needs_steps() -> None:
    with pytest.raises(UsageError, match="no usage steps"):
        score_counter(CharCounter(), [])
    with pytest.raises(UsageError, match="no usage steps"):
        fit_anthropic([])
    with pytest.raises(UsageError, match="at least two groups"):
        leave_one_out({"a": [_step(5, Message("user", (TextBlock("x"),)))], "b": []})
    s = score_estimates("c", [90, 120], [100, 100])
    assert (s.ratio, s.p50, s.steps) == pytest.approx((1.05, 0.15, 2))


def test_a_step_estimate_leaves_out_the_request_overhead() -> None:
    _bpe()
    counter = get_counter("tiktoken")
    msgs = [Message("user", (TextBlock("hello there"),))]
    assert step_estimate(counter, msgs) == counter.count_messages(msgs) - 3


def test_grouping_files_by_session() -> None:
    paths = [Path("d/s1.jsonl"), Path("d/s1/subagents/agent-a.jsonl"), Path("d/short.jsonl")]
    assert group_claude_code_files(paths) == {
        "s1": [Path("d/s1.jsonl"), Path("d/s1/subagents/agent-a.jsonl")],
        "short": [Path("d/short.jsonl")],
    }


def test_held_out_calibration_beats_char_on_a_real_session(data_dir: Path) -> None:
    folder = data_dir / "transcripts" / "claude_code"
    groups = {
        key: [s for p in files for s in claude_code_usage_steps(p.read_text("utf-8"))[0]]
        for key, files in group_claude_code_files(
            sorted([*folder.glob("*.jsonl"), *folder.glob("*/subagents/*.jsonl")])
        ).items()
        if key[:8] in ("258c7280", "4d5611e5")
    }
    held = leave_one_out(groups, "chars")
    for key, h in held.items():
        char = score_counter(CharCounter(), groups[key])
        assert h.score.p50 < char.p50 / 2
        assert abs(h.score.ratio - 1) < abs(char.ratio - 1)


def test_the_shipped_fit_is_what_the_script_fits(data_dir: Path) -> None:
    _bpe()
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "calibrate_tokens.py"),
            "--data",
            str(data_dir),
            "--check",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
