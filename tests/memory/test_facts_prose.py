"""Facts without false positives: the default extractor reads prose, not code or tool output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise import read_transcript
from ctxwise.errors import UsageError
from ctxwise.memory import CaseFacts, FactExtractor
from ctxwise.memory._prose import MASK, prose_only, without_harness
from ctxwise.memory.facts import DEFAULT_KINDS, KINDS, LIST_KEYS, PRESETS, Extraction
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from tests.conftest import claude_code_files

PROSE = FactExtractor()
EVERY_KIND_PROSE = FactExtractor(KINDS)  # the domain patterns too, still prose only
SUPPORT = FactExtractor.preset("support")
ELIXIR = 'It uses ETS:\n\n```elixir\ncase :ets.match(@table, {:"$1", session_id}) do\n```\n'


def found(extractor: FactExtractor, text: str) -> list[tuple[str, str]]:
    return [(e.key, e.value) for e in extractor.extract(text)]


# --------------------------------------------------------------------------- presets


def test_default_is_the_prose_preset() -> None:
    assert FactExtractor() == FactExtractor.preset("prose") == PRESETS["prose"]
    assert set(PROSE.kinds) == set(DEFAULT_KINDS) == {"date", "email"}
    assert (PROSE.tool_output, PROSE.code) == (False, False)
    assert repr(PROSE) == "FactExtractor(kinds=['email', 'date'], tool_output=False, code=False)"


def test_support_preset_is_every_kind_from_everything() -> None:
    assert SUPPORT == FactExtractor(KINDS, tool_output=True, code=True) == PRESETS["support"]
    assert set(SUPPORT.kinds) == set(KINDS)
    assert (SUPPORT.tool_output, SUPPORT.code) == (True, True)
    assert hash(SUPPORT) == hash(FactExtractor(KINDS, tool_output=True, code=True))
    assert SUPPORT != PROSE and SUPPORT != "support"


def test_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(UsageError, match="unknown fact extractor preset 'airline'; known: prose"):
        FactExtractor.preset("airline")
    with pytest.raises(UsageError, match="support"):
        FactExtractor.preset(None)  # type: ignore[arg-type]


def test_extractors_are_immutable_and_check_their_arguments() -> None:
    with pytest.raises(AttributeError):
        PROSE.tool_output = True  # type: ignore[misc]
    with pytest.raises(AttributeError):
        PROSE.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match="True or False"):
        FactExtractor(tool_output="yes")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="True or False"):
        FactExtractor(code=1)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="not the string"):
        FactExtractor("email")
    with pytest.raises(TypeError):
        FactExtractor(["email"], True)  # type: ignore[call-arg]


def test_the_elixir_pattern_is_no_amount() -> None:
    """The shared sessions' false fact: ``:"$1"`` read as ``amount: USD 1.00``."""
    assert found(SUPPORT, ELIXIR) == [("amount", "USD 1.00")]  # today's behaviour, kept
    assert found(EVERY_KIND_PROSE, ELIXIR) == []
    assert found(PROSE, ELIXIR) == []


# --------------------------------------------------------------------------- code


@pytest.mark.parametrize(
    "block",
    [
        "```\nmail a@b.co by 2024-05-20\n```",
        "```python\nmail a@b.co by 2024-05-20\n```",
        "~~~\nmail a@b.co by 2024-05-20\n~~~",
        "````\nmail a@b.co\n```\nby 2024-05-20\n````",  # a shorter fence does not close
        "```\nmail a@b.co by 2024-05-20\n`````",  # a longer one does
        "   ```\n   mail a@b.co by 2024-05-20\n   ```",  # indented, as in a list item
        "> ```\n> mail a@b.co by 2024-05-20\n> ```",  # quoted
        "`a@b.co` by `2024-05-20`",
        "``a@b.co ` 2024-05-20``",  # a double-backtick span holds a single backtick
        "`mail a@b.co\nby 2024-05-20`",  # a span may break a line
        "<bash-input>mail a@b.co by 2024-05-20</bash-input>",
    ],
)
def test_code_is_not_read_by_default(block: str) -> None:
    text = f"Send it to me@host.org.\n\n{block}\n\nThe deadline is 2024-06-01."
    assert found(PROSE, text) == [("email", "me@host.org"), ("date", "2024-06-01")]
    read = found(FactExtractor(code=True), text)
    assert ("email", "a@b.co") in read and len(read) > 2


def test_code_edge_cases() -> None:
    # an unclosed fence runs to the end of the text
    assert found(PROSE, "On 2024-05-20:\n```\nx = 1\nmail a@b.co") == [("date", "2024-05-20")]
    # "```x``` y" is inline code, not a fence
    assert found(PROSE, "```x``` on 2024-05-20") == [("date", "2024-05-20")]
    # a backtick with no partner is literal, and spans do not cross paragraphs
    assert found(PROSE, "it's 5` long, due 2024-05-20") == [("date", "2024-05-20")]
    assert found(PROSE, "a ` b\n\non 2024-05-20 ` c") == [("date", "2024-05-20")]
    # no pattern reads across blanked code: "May `x` 20" is not "May 20"
    assert found(PROSE, "May `x` 20") == []
    assert found(PROSE, "May 20") == [("date", "May 20")]


def test_spans_refer_to_the_original_text() -> None:
    text = "```\n2024-01-01\n```\nsee `x` on 2024-05-20 or mail a@b.co"
    for e in PROSE.extract(text):
        assert text[e.start : e.end] in ("2024-05-20", "a@b.co")


# --------------------------------------------------------------------------- tool output


def test_harness_output_in_user_text_is_never_read() -> None:
    """Not by default, and not by an extractor that reads tool results either: tool
    output in user text is the harness's, not a tool result the agent asked for."""
    text = (
        "<system-reminder>\nPostToolUse hook: Last updated: 2024-05-20\n</system-reminder>\n"
        "<local-command-stdout>owner ops@corp.io</local-command-stdout>\n"
        "Please move the review to 2024-06-01."
    )
    for extractor in (PROSE, FactExtractor(tool_output=True), SUPPORT):
        assert found(extractor, text) == [("date", "2024-06-01")]
    # an unclosed element runs to the end
    assert found(PROSE, "due 2024-06-01 <task-notification>on 2024-05-20") == [
        ("date", "2024-06-01")
    ]


def _with_tool_result() -> list[Message]:
    return [
        Message.text_message("user", "My e-mail is mia@example.com."),
        Message(
            "assistant",
            (ToolUseBlock("c1", "lookup", {"email": "mia@example.com"}),),
        ),
        Message(
            "user",
            (ToolResultBlock("c1", '{"user_id": "mia_li_3668", "created": "2024-05-20"}'),),
        ),
        Message(
            "user",
            (ToolResultBlock("c2", "drwxr-xr-x 2 mia mia 4096 Feb 11 22:31 ."),),
        ),
    ]


def test_update_from_messages_skips_tool_results_by_default() -> None:
    facts = CaseFacts()
    facts.update_from_messages(_with_tool_result())
    assert [(f.key, f.value, f.source) for f in facts] == [
        ("email", "mia@example.com", "message 0")
    ]


def test_update_from_messages_reads_tool_results_when_asked() -> None:
    support = CaseFacts()
    support.update_from_messages(_with_tool_result(), extractor=SUPPORT)
    assert [(f.key, f.value, f.source) for f in support] == [
        ("email", "mia@example.com", "message 0"),
        ("user_id", "mia_li_3668", "message 2"),
        ("date", "February 11", "message 3"),
    ]
    prose_kinds = CaseFacts()
    prose_kinds.update_from_messages(_with_tool_result(), extractor=FactExtractor(tool_output=True))
    assert prose_kinds.get("date") is not None  # a plain-text listing's date
    assert "user_id" not in prose_kinds


def test_third_party_extractors_get_tool_results_only_if_they_say_so() -> None:
    seen: list[str] = []

    class Recorder:
        def extract(self, text: str) -> list[Extraction]:
            seen.append(text)
            return []

    class ToolReader(Recorder):
        tool_output = True

    CaseFacts().update_from_messages(_with_tool_result(), extractor=Recorder())
    assert seen == ["My e-mail is mia@example.com."]
    seen.clear()
    CaseFacts().update_from_messages(_with_tool_result(), extractor=ToolReader())
    assert len(seen) == 3


# --------------------------------------------------------------------------- properties

_PIECES = [
    "order", "#W2378156", "reservation", "ID", "is", "ZFA04Y", "HAT136", "flight", "$250",
    "USD", "49.00", "May", "20", "2024-05-20", ",", ".", "?", "and", "user", "mia_li_3668",
    "I'm", "delivered", "tracking", "1Z999AA10123456784", "a@b.co", "\n", "**", ":", "(",
    ")", "1.", ':"$1"', "x", "<", "`", "~~~", "```", "<system-reminder>", "</bash-input>",
]  # fmt: skip
_PROSE_PIECES = [p for p in _PIECES if not set(p) & set("`~<")]
texts = st.lists(st.sampled_from(_PIECES), max_size=30).map(" ".join)
prose = st.lists(st.sampled_from(_PROSE_PIECES), max_size=25).map(" ".join)
code = st.lists(st.sampled_from(_PROSE_PIECES), max_size=25).map(" ".join)


@given(texts, st.booleans())
def test_prose_only_keeps_length_newlines_and_what_it_keeps(text: str, keep_code: bool) -> None:
    out = prose_only(text, code=keep_code)
    assert len(out) == len(text)
    for a, b in zip(text, out, strict=True):
        assert b == a or (b == MASK and a != "\n")
    assert prose_only(out, code=keep_code) == out
    # with code kept, only harness text is blanked
    assert prose_only(text, code=True) == without_harness(text)
    assert without_harness(without_harness(text)) == without_harness(text)


@given(prose, code, prose)
def test_facts_in_code_are_never_read_and_never_hide_prose(
    before: str, snippet: str, after: str
) -> None:
    def values(text: str) -> list[tuple[str, str]]:
        return found(EVERY_KIND_PROSE, text)

    fenced = f"\n```\n{snippet}\n```\n"
    assert values(before + fenced + after) == values(before + "\n") + values("\n" + after)
    if snippet.strip():  # "``" alone is two literal backticks, not an empty span
        inline = f"\n`{snippet.replace(chr(10), ' ')}`\n"  # one paragraph
        assert values(before + inline + after) == values(before + "\n") + values("\n" + after)


# --------------------------------------------------------------------------- shared data

_FENCE = re.compile(r"^[ \t>]*(`{3,}|~{3,}).*?(?:^[ \t>]*\1`*[ \t]*$|\Z)", re.M | re.S)
_INLINE = re.compile(r"`[^`\n]+`")
_HARNESS = re.compile(r"<(system-reminder|local-command-std\w+|bash-\w+|task-notification)>")


def _code_or_tool_output(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds code or harness output, found independently of the library."""
    regions = [m.span() for m in _FENCE.finditer(text)]
    regions += [m.span() for m in _INLINE.finditer(text)]
    for m in _HARNESS.finditer(text):
        close = text.find(f"</{m.group(1)}>", m.end())
        regions.append((m.start(), len(text) if close < 0 else close))
    return regions


def _stated_in_prose(extractor: FactExtractor, message: Message, key: str, value: str) -> bool:
    """``message`` says ``key: value`` in its own text (not a tool result), outside code."""
    for block in message.content:
        if not isinstance(block, TextBlock):
            continue
        regions = _code_or_tool_output(block.text)
        for e in extractor.extract(block.text):
            if (LIST_KEYS.get(e.key, e.key), e.value) != (key, value):
                continue
            if not any(a < e.end and e.start < b for a, b in regions):
                return True
    return False


@pytest.mark.data
@pytest.mark.parametrize("extractor", [PROSE, EVERY_KIND_PROSE], ids=["default", "every-kind"])
def test_claude_code_sessions_pin_no_fact_from_code_or_tool_output(
    data_dir: Path, extractor: FactExtractor
) -> None:
    """Every shared Claude Code file (sessions, subagents, fixtures): each fact the
    extractor pins is stated in user or assistant prose, outside code. Measured: none
    is pinned at all (the support preset pins 11, every one from a tool result or a
    code fence, ``amount: USD 1.00`` from an Elixir ``:"$1"`` among them)."""
    paths = claude_code_files()
    assert len(paths) >= 12
    trap = 0
    for path in paths:
        messages = read_transcript(path).messages
        facts = CaseFacts()
        facts.update_from_messages(messages, extractor=extractor)
        for fact in facts:
            assert fact.source is not None
            message = messages[int(fact.source.removeprefix("message "))]
            for value in facts.values(fact.key):
                assert _stated_in_prose(extractor, message, fact.key, value), (path.name, fact)
        assert "USD 1.00" not in facts.values("amount"), path.name
        # the data does hold the trap: the support preset falls into it
        old = CaseFacts()
        old.update_from_messages(messages, extractor=SUPPORT)
        trap += "USD 1.00" in old.values("amount")
    assert trap >= 3
