"""Standing rules (ctxwise.memory.rules): what a rule is and is not, kept verbatim,
deduplicated, pinned, persisted, and read from what the user said only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxwise.assembly import Section
from ctxwise.errors import FormatError, UsageError
from ctxwise.memory.facts import MAX_TEXT_CHARS
from ctxwise.memory.rules import Rule, Rules
from ctxwise.messages import Message, TextBlock, ToolResultBlock


@pytest.mark.parametrize(
    "text",
    [
        "Never call me before 9am.",
        "Please never call me before 9am.",
        "From now on, send everything to my work email.",
        "I'll only pay by Visa from now on.",
        "Always use my aisle seat preference.",
        "Please make sure to always CC my wife on emails.",
        "Make sure you never book me on a red-eye.",
        "I want you to always confirm the total before charging me.",
        "Don't ever put me on hold again!",
        "Do not ever share my phone number.",
        "Do not share my email with anyone.",
        "Don't call my landline.",
        "Don’t use my gift card for this trip.",
        "Stop sending me promotional emails.",
        "Please stop calling me during work hours.",
        "Remember that I'm allergic to peanuts.",
        "Remember, I only fly out of JFK.",
        "Keep in mind that my wife travels with me.",
        "Going forward, please address me as Dr. Li.",
        "Could you please always use my full name?",
        "Can you never book basic economy for me?",
        "For the rest of this conversation, answer in French.",
        "Thanks, never call my landline.",
        "Ok, and also always send me a receipt.",
    ],
)
def test_rule_capture_positives(text: str) -> None:
    rules = Rules()
    assert rules.capture(text, source="message 3") == [text]
    assert list(rules) == [Rule(text, "message 3")]


@pytest.mark.parametrize(
    "text",
    [
        "I never received my order.",
        "My order never arrived, always late with you guys.",
        "You never listen to me!",
        "Never mind.",
        "Never again!",
        "Don't worry about it.",
        "Don't bother, I found it.",
        "Don't know what happened.",
        "Do not cancel the reservation yet.",
        "Don't charge my card right now.",
        "Don't you have an earlier flight?",
        "Can you do not charge my card?",
        "Can you not charge my card today?",
        "Do you remember that I called yesterday?",
        "I remember that I booked it in March.",
        "I always fly business.",
        "Always happy to help!",
        "I don't have my reservation ID with me right now.",
        "I do not want travel insurance.",
        "No, I really don't want to be transferred.",
        "The bus stop is near the airport.",
        "I might travel in the future.",
        "I'd like to stop by the airport lounge.",
    ],
)
def test_rule_capture_negatives(text: str) -> None:
    rules = Rules()
    assert rules.capture(text) == []
    assert len(rules) == 0


def test_rule_capture_keeps_sentences_verbatim_and_dedupes() -> None:
    rules = Rules()
    text = (
        "Hi, I need to change my flight. Never call me before 9 a.m. I work nights! "
        "Also, from now on, email me instead."
    )
    assert rules.capture(text, source="message 1") == [
        "Never call me before 9 a.m.",
        "Also, from now on, email me instead.",
    ]
    assert rules.capture("never call me before 9 A.M.", source="message 7") == []
    assert rules.capture("NEVER   call me before 9 a.m.!") == []
    assert "never call me before 9 a.m" in rules
    assert [r.source for r in rules] == ["message 1", "message 1"]


def test_rules_add_render_and_pinned_section() -> None:
    rules = Rules()
    assert rules.render() == "" and rules.section() == Section("rules", "", 100, pinned=True)
    assert rules.add("Never call me before 9am.", source="message 2") is True
    assert rules.add("  never call me   before 9am  ") is False  # same rule
    assert rules.add("Always answer in English") is True
    assert len(rules) == 2
    assert rules.render() == "Rules:\n- Never call me before 9am.\n- Always answer in English"
    section = rules.section()
    assert (section.name, section.priority, section.pinned) == ("rules", 100, True)
    assert section.content == rules.render()
    assert rules.section(name="standing", priority=99).name == "standing"
    for bad in ["", "   ", "x" * (MAX_TEXT_CHARS + 1)]:
        with pytest.raises(UsageError):
            rules.add(bad)
    with pytest.raises(UsageError):
        rules.add("ok", source="")
    with pytest.raises(UsageError):
        rules.capture("x" * (MAX_TEXT_CHARS + 1))


def test_rules_round_trip_and_bad_data() -> None:
    rules = Rules(["Never call me before 9am.", Rule("Always CC my wife.", "message 4")])
    back = Rules.from_dict(json.loads(json.dumps(rules.to_dict())))
    assert list(back) == list(rules)
    bad_data: list[dict[str, Any]] = [
        {"version": 2, "rules": []},
        {"version": 1},
        {"version": 1, "rules": ["text"]},
        {"version": 1, "rules": [{"text": ""}]},
    ]
    for bad in bad_data:
        with pytest.raises(FormatError):
            Rules.from_dict(bad)


def test_capture_messages_reads_only_what_the_user_said() -> None:
    messages = [
        Message.text_message("system", "Never reveal the policy."),
        Message.text_message("user", "Hi. Never call me before 9am."),
        Message.text_message("assistant", "Always happy to help! Never hesitate to ask."),
        Message("user", (ToolResultBlock("c1", "Do not retry this call."),)),
        Message("user", (TextBlock("From now on, email me."),), kind="compact_summary"),
    ]
    rules = Rules()
    assert rules.capture_messages(messages, offset=10) == ["Never call me before 9am."]
    assert [r.source for r in rules] == ["message 11"]
