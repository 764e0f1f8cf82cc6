"""Case facts, the rule-based fact extractor, and standing rules.

The data tests run the extractor over the 200 real tau-bench airline trajectories
and check it against each task's ground truth (``info.task``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise import read_transcripts
from ctxwise.assembly import Section
from ctxwise.errors import FormatError, UsageError
from ctxwise.memory.facts import (
    DEFAULT_KINDS,
    KINDS,
    LIST_KEYS,
    MAX_TEXT_CHARS,
    CaseFacts,
    Extraction,
    Fact,
    FactExtractor,
    Rules,
)
from ctxwise.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from tests.conftest import TAU

EX = FactExtractor.preset("support")  # every kind, tool output and code: the tau-bench cases


def pairs(text: str, *kinds: str) -> list[tuple[str, str]]:
    found = EX.extract(text)
    return [(e.key, e.value) for e in found if not kinds or e.key in kinds]


# --------------------------------------------------------------------------- values


def test_fact_is_a_frozen_value() -> None:
    fact = Fact("order_id", "W2378156", "message 4", "2024-05-15T15:00:00")
    assert fact.to_dict() == {
        "key": "order_id",
        "value": "W2378156",
        "source": "message 4",
        "at": "2024-05-15T15:00:00",
    }
    with pytest.raises(AttributeError):
        fact.value = "other"  # type: ignore[misc]
    assert Fact("k", "v") == Fact("k", "v")


@pytest.mark.parametrize(
    ("key", "value", "source", "at"),
    [
        ("", "v", None, None),
        ("   ", "v", None, None),
        ("k", "", None, None),
        ("k", " \n", None, None),
        ("two\nlines", "v", None, None),
        ("k", "v", "", None),
        ("k", "v", None, ""),
        (1, "v", None, None),
        ("k", 2, None, None),
    ],
)
def test_fact_rejects_empty_or_wrong_fields(key: Any, value: Any, source: Any, at: Any) -> None:
    with pytest.raises(UsageError):
        Fact(key, value, source, at)


def test_extraction_span() -> None:
    text = "My order #W2378156 has not arrived."
    (e,) = EX.extract(text)
    assert e == Extraction("order_id", "W2378156", 10, 18)
    assert e.span == (10, 18) and text[e.start : e.end] == "W2378156"


# --------------------------------------------------------------------------- extractor


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hi, my order #W2378156 hasn't arrived yet.", ["W2378156"]),
        ("I placed order W2378156 last week.", ["W2378156"]),
        ("My order number is 8812.", ["8812"]),
        ("The order ID: #W4817420, please check it.", ["W4817420"]),
        ("I have two orders, #W2378156 and #W7654321.", ["W2378156", "W7654321"]),
        ("Amazon says order 112-3456789-1234567 is late.", ["112-3456789-1234567"]),
    ],
)
def test_order_ids(text: str, expected: list[str]) -> None:
    assert [v for _, v in pairs(text, "order_id")] == expected


@pytest.mark.parametrize(
    "text",
    [
        "I want to place an order for 2 items.",
        "In order to help you I need your name.",
        "I ordered it in 2023 and the order 2024 catalog is out.",
        "My order from 2024-05-01 is missing.",
        "Ticket #12345 was opened for you.",
        "My order of 1500 units arrived.",
        "Call me at 415-555-0199 about the order.",
    ],
)
def test_order_id_false_positives(text: str) -> None:
    assert pairs(text, "order_id") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My reservation ID is ZFA04Y.", ["ZFA04Y"]),
        ("Hi! I'd like to make some changes to my reservation HXDUBJ.", ["HXDUBJ"]),
        ("Please cancel reservations XEHM4B and UDMOP1.", ["XEHM4B", "UDMOP1"]),
        ("Your current reservation (ID: 4NQLHD) is in economy.", ["4NQLHD"]),
        ("- **Reservation ID:** PEP4E0\n- **Cabin:** economy", ["PEP4E0"]),
        ("The reservations with IDs **UDMOP1** and **NM1VX1** are basic.", ["UDMOP1", "NM1VX1"]),
        ("Here are the reservation IDs:\n\n1. NM1VX1\n2. KC18K6\n3. S61CZX", None),
        ("My booking reference is BOH180.", ["BOH180"]),
        ("The confirmation code? It's PUNERT.", ["PUNERT"]),
        ("Sure! My reservation ID is YAX4DR, and the user ID is chen_lee_6825.", ["YAX4DR"]),
    ],
)
def test_reservation_ids(text: str, expected: list[str] | None) -> None:
    want = expected if expected is not None else ["NM1VX1", "KC18K6", "S61CZX"]
    assert [v for _, v in pairs(text, "reservation_id")] == want


@pytest.mark.parametrize(
    "text",
    [
        "MY RESERVATION PLEASE CANCEL IT NOW",  # shouting, not codes
        "My reservation is URGENT, I fly tomorrow.",
        "I'm calling about my delayed flight HAT045 from PHX to SEA.",  # a flight, no cue
        "Please proceed with booking the HAT102 flight for me.",
        "The reservation for 123456 dollars",  # digits only
        "I can't find the reservation. ASAP please.",
    ],
)
def test_reservation_id_false_positives(text: str) -> None:
    assert pairs(text, "reservation_id") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Sure, my user ID is mia_li_3668.", "mia_li_3668"),
        ("Sure, it's sofia_kim_7287.", "sofia_kim_7287"),
        ("I don't remember the reservation ID, but I'm omar_rossi_1241.", "omar_rossi_1241"),
        ("my user profile should be under ivan_muller_7015.", "ivan_muller_7015"),
        ("I have my user ID, which is daiki_lee_6144, but not the rest.", "daiki_lee_6144"),
        ("Could you check it with my user ID, mohamed_hernandez_5188?", "mohamed_hernandez_5188"),
        ("I have retrieved your user ID, which is `yara_garcia_1905`.", "yara_garcia_1905"),
        ("Here it is: yara_garcia_1905. Can you help?", "yara_garcia_1905"),
        ("My username is john.smith", "john.smith"),
        ("My customer number is 884213.", "884213"),
        ("Certificate certificate_3221322 added to user mei_brown_7075.", "mei_brown_7075"),
    ],
)
def test_user_ids(text: str, expected: str) -> None:
    assert pairs(text, "user_id") == [("user_id", expected)]


@pytest.mark.parametrize(
    "text",
    [
        "My email address is yara_garcia_1905@gmail.com",  # an e-mail, not a user id
        "Sure, it's credit_card_4421486.",  # a payment method
        "I found two reservations under your profile: M05KNL and UHDAHF.",
        "My user ID is not with me right now.",
        "I'm 35 and it's 2024.",
        "I found your reservation with the ID 4NQLHD.",
    ],
)
def test_user_id_false_positives(text: str) -> None:
    assert pairs(text, "user_id") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The refund of $250 was issued.", ["USD 250.00"]),
        ("I was charged 250 USD twice.", ["USD 250.00"]),
        ("The fee is EUR 49.00 per bag.", ["EUR 49.00"]),
        ("It cost €12.50 in the end.", ["EUR 12.50"]),
        ("A total of $1,234.5 and then £3", ["USD 1234.50", "GBP 3.00"]),
        ("They gave me a 50 dollar voucher", ["USD 50.00"]),
        ("$250 USD", ["USD 250.00"]),  # one amount, not two
    ],
)
def test_amounts(text: str, expected: list[str]) -> None:
    assert [v for _, v in pairs(text, "amount")] == expected


@pytest.mark.parametrize(
    "text",
    [
        "Call me at 415-555-0199 or +1 (415) 555 0199.",
        "The card ending in 7447 please.",
        "I have 3 bags weighing 50 pounds.",
        "My zip is 78750 and I was born in 1990.",
    ],
)
def test_amount_false_positives(text: str) -> None:
    assert pairs(text, "amount") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I want to fly on 2024-05-20.", "2024-05-20"),
        ("My flight is on May 20, 2024 in the morning.", "2024-05-20"),
        ("It left on 20 May 2024.", "2024-05-20"),
        ("The 3rd of Sept. 2024 works.", "2024-09-03"),
        ("Delivered 2024/05/20 at noon.", "2024-05-20"),
        ("Paid on 13/05/2024.", "2024-05-13"),  # only day/month works
        ("Paid on 05/13/2024.", "2024-05-13"),  # only month/day works
        ("Paid on 05/06/2024.", "05/06/2024"),  # either: kept verbatim
        ("I'm looking to book a flight on May 20th.", "May 20"),  # no year: no ISO
        ("The current time is 2024-05-15T15:00:00.", "2024-05-15"),
    ],
)
def test_dates(text: str, expected: str) -> None:
    assert pairs(text, "date") == [("date", expected)]


@pytest.mark.parametrize(
    "text",
    [
        "I have flown with you since 2019.",
        "My date of birth is 1990-04-05.",
        "I was born on April 5, 1990.",
        "It is February 30, 2024 apparently.",  # not a date
        "May I change my seat?",
        "Version 2024-13-45 of the app",
    ],
)
def test_date_false_positives(text: str) -> None:
    assert pairs(text, "date") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Your order #W2378156 has been delivered.", "delivered"),
        ("I never received my order, but the site says it was delivered.", "delivered"),
        ("The reservation NQNU5R has been successfully canceled.", "cancelled"),
        ("My package shipped on Monday.", "shipped"),
        ("Your refund has been processed.", "processed"),
        ("The order is still pending.", "pending"),
    ],
)
def test_statuses(text: str, expected: str) -> None:
    assert pairs(text, "status") == [("status", expected)]


@pytest.mark.parametrize(
    "text",
    [
        "Has my order shipped?",
        "My order has not been shipped yet.",
        "I want my order cancelled.",
        "I'd like the reservation cancelled.",
        "If the order has already shipped, tell me.",
        "The refund will be processed in 5 days.",
        "This reservation can be canceled for a refund.",
        "My flight got delivered to the wrong gate.",  # no order or reservation
    ],
)
def test_status_false_positives(text: str) -> None:
    assert pairs(text, "status") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My tracking number is 1Z999AA10123456784.", ["1Z999AA10123456784"]),
        ("The tracking id 3498219012 shows it in Ohio.", ["3498219012"]),
        ("UPS says 1Z999AA10123456784 is out for delivery.", ["1Z999AA10123456784"]),
    ],
)
def test_tracking_numbers(text: str, expected: list[str]) -> None:
    assert [v for _, v in pairs(text, "tracking_number")] == expected


def test_tracking_false_positives() -> None:
    assert pairs("The tracking page is down, I keep tracking it.", "tracking_number") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My flight HAT039 from ATL to SEA has been delayed.", ["HAT039"]),
        ("The flights HAT057 and HAT039 connect in ATL.", ["HAT057", "HAT039"]),
        ("1. **Flight HAT069**\n   - Departure: 06:00", ["HAT069"]),
        ("I'm on flight UA 123 tonight.", ["UA123"]),
        ("Please book the HAT102 flight for me.", ["HAT102"]),
    ],
)
def test_flight_numbers(text: str, expected: list[str]) -> None:
    assert [v for _, v in pairs(text, "flight_number")] == expected


@pytest.mark.parametrize(
    "text",
    [
        "My flight from JFK to SEA is at 5.",
        "The flight was 2 hours late.",
        "Reservation BOH180 is for two passengers.",
    ],
)
def test_flight_number_false_positives(text: str) -> None:
    assert pairs(text, "flight_number") == []


def test_emails() -> None:
    assert pairs("Email me at mia.li3818@example.com, thanks.") == [
        ("email", "mia.li3818@example.com")
    ]
    assert pairs("Ping @support on Twitter or write to me@host") == []


def test_json_tool_results_are_read_by_field_name() -> None:
    reservation = json.dumps(
        {
            "reservation_id": "JG7FMM",
            "user_id": "omar_davis_3817",
            "flights": [{"flight_number": "HAT028", "date": "2024-05-21", "price": 1859}],
            "passengers": [{"first_name": "Omar", "dob": "1982-10-19"}],
            "status": "cancelled",
        }
    )
    assert pairs(reservation) == [
        ("reservation_id", "JG7FMM"),
        ("user_id", "omar_davis_3817"),
        ("status", "cancelled"),
    ]
    # search results: options, not facts of the case
    search = json.dumps([{"flight_number": "HAT069", "status": "available", "date": "2024-05-20"}])
    assert pairs(search) == []
    order = "{'order_id': '#W2378156', 'status': 'delivered', 'tracking_id': ['349821901234']}"
    assert pairs(order) == [
        ("order_id", "W2378156"),
        ("status", "delivered"),
        ("tracking_number", "349821901234"),
    ]


def test_extractor_kinds() -> None:
    text = "Order #W2378156 for $25 on 2024-05-20."
    assert pairs(text) == [
        ("order_id", "W2378156"),
        ("amount", "USD 25.00"),
        ("date", "2024-05-20"),
    ]
    only = FactExtractor(kinds=["amount"])
    assert [(e.key, e.value) for e in only.extract(text)] == [("amount", "USD 25.00")]
    assert set(EX.kinds) == set(KINDS)
    # the default: generic kinds only, no domain patterns
    assert set(FactExtractor().kinds) == set(DEFAULT_KINDS) == {"date", "email"}
    assert [(e.key, e.value) for e in FactExtractor().extract(text)] == [("date", "2024-05-20")]
    with pytest.raises(UsageError, match="unknown fact kinds"):
        FactExtractor(kinds=["order_id", "shoe_size"])
    with pytest.raises(UsageError):
        FactExtractor(kinds=[])


def test_extractor_rejects_huge_or_non_text() -> None:
    with pytest.raises(UsageError, match="limit"):
        EX.extract("a" * (MAX_TEXT_CHARS + 1))
    with pytest.raises(UsageError):
        EX.extract(b"bytes")  # type: ignore[arg-type]
    assert EX.extract("a" * MAX_TEXT_CHARS) == []
    assert EX.extract("") == []


_TOKENS = [
    "order", "#W2378156", "reservation", "ID", "is", "ZFA04Y", "HAT136", "flight", "$250",
    "USD", "49.00", "May", "20", "2024-05-20", ",", ".", "?", "and", "user", "mia_li_3668",
    "I'm", "delivered", "not", "tracking", "1Z999AA10123456784", "a@b.co", "\n", "**", ":",
    "never", "always", "don't", "from now on", "please", "(", ")", "1.",
]  # fmt: skip


@given(st.lists(st.sampled_from(_TOKENS), max_size=40))
def test_extraction_invariants(tokens: list[str]) -> None:
    text = " ".join(tokens)
    found = EX.extract(text)
    assert found == EX.extract(text)  # deterministic
    last_end = 0
    for e in found:
        assert e.key in KINDS and e.value.strip()
        assert last_end <= e.start < e.end <= len(text)
        last_end = e.end
    facts = CaseFacts()
    changed = facts.update_from_text(text)
    assert len({f.key for f in changed}) == len(changed) <= len(facts)
    Rules().capture(text)


# --------------------------------------------------------------------------- case facts


def test_set_updates_in_place_and_keeps_first_seen_order() -> None:
    facts = CaseFacts()
    assert facts.set("order_id", "W1", source="message 1") is True
    assert facts.set("status", "pending", source="message 1") is True
    assert facts.set("email", "a@b.co") is True
    assert facts.set("order_id", "W1", source="message 9") is False  # same value
    assert facts.get("order_id") == Fact("order_id", "W1", "message 1")  # first statement kept
    assert facts.set("status", "delivered", source="message 5", at="t5") is True
    assert [f.key for f in facts] == ["order_id", "status", "email"]  # position kept
    assert facts.get("status") == Fact("status", "delivered", "message 5", "t5")
    assert len(facts) == 3 and "status" in facts and "amount" not in facts
    assert facts.get("amount") is None and facts.values("amount") == []
    assert facts.remove("status") is True and facts.remove("status") is False
    assert [f.key for f in facts] == ["order_id", "email"]
    facts.set("status", "shipped")
    assert [f.key for f in facts] == ["order_id", "email", "status"]  # a new key goes last


def test_set_rejects_bad_input() -> None:
    facts = CaseFacts()
    for key, value in [("", "v"), ("k", ""), ("k", "   ")]:
        with pytest.raises(UsageError):
            facts.set(key, value)
    with pytest.raises(UsageError):
        facts.set("k", "x" * (MAX_TEXT_CHARS + 1))
    with pytest.raises(UsageError):
        CaseFacts(["not a fact"])  # type: ignore[list-item]
    assert len(facts) == 0


def test_render_and_pinned_section() -> None:
    facts = CaseFacts()
    assert facts.render() == ""
    empty = facts.section()
    assert empty == Section("case facts", "", priority=95, pinned=True)
    facts.set("order_id", "W2378156", source="message 4")
    facts.set("status", "delivered", source="message 6", at="2024-05-15T15:00:00")
    facts.set("note", "multi\nline   value")
    assert facts.render() == (
        "Case facts:\n"
        "- order_id: W2378156 (message 4)\n"
        "- status: delivered (message 6, 2024-05-15T15:00:00)\n"
        "- note: multi line value"
    )
    section = facts.section()
    assert section.name == "case facts" and section.priority == 95
    assert section.pinned and not section.truncatable
    assert section.content == facts.render()
    custom = facts.section(name="case", priority=80)
    assert (custom.name, custom.priority, custom.pinned) == ("case", 80, True)


def test_update_from_text_latest_wins_and_lists_accumulate() -> None:
    facts = CaseFacts()
    changed = facts.update_from_text(
        "Please cancel reservations XEHM4B and UDMOP1. I paid $100.",
        source="message 1",
        at="t1",
        extractor=EX,
    )
    assert changed == [
        Fact("reservation_ids", "XEHM4B, UDMOP1", "message 1", "t1"),
        Fact("amount", "USD 100.00", "message 1", "t1"),
    ]
    changed = facts.update_from_text(
        "Also reservation UDMOP1 and reservation ZFA04Y; the fee was $30.",
        source="message 3",
        extractor=EX,
    )
    assert [(f.key, f.value) for f in changed] == [
        ("reservation_ids", "XEHM4B, UDMOP1, ZFA04Y"),
        ("amount", "USD 30.00"),
    ]
    assert facts.values("reservation_ids") == ["XEHM4B", "UDMOP1", "ZFA04Y"]
    assert facts.values("amount") == ["USD 30.00"]
    # nothing new: nothing changed, and provenance is kept
    assert facts.update_from_text("reservation ZFA04Y, $30", source="message 5", extractor=EX) == []
    assert facts.get("amount") == Fact("amount", "USD 30.00", "message 3")
    # two values of one scalar kind in one text: the last one wins, reported once
    assert facts.update_from_text("It was $10, no, $12.", extractor=EX) == [
        Fact("amount", "USD 12.00")
    ]
    assert LIST_KEYS == {"reservation_id": "reservation_ids", "flight_number": "flight_numbers"}


def test_update_from_text_with_a_custom_extractor() -> None:
    class Shoes:
        def extract(self, text: str) -> list[Extraction]:
            m = re.search(r"size (\d+)", text)
            return [Extraction("shoe_size", m.group(1), m.start(1), m.end(1))] if m else []

    facts = CaseFacts()
    assert facts.update_from_text("I need size 42 and order #W2378156", extractor=Shoes()) == [
        Fact("shoe_size", "42")
    ]
    assert "order_id" not in facts
    with pytest.raises(UsageError):
        facts.update_from_text("x" * (MAX_TEXT_CHARS + 1))
    with pytest.raises(UsageError):
        facts.update_from_text("ok", source="")


def _conversation() -> list[Message]:
    return [
        Message.text_message("system", "The current time is 2024-05-15 15:00:00 EST."),
        Message.text_message("user", "Hi, I need to change my reservation ZFA04Y."),
        Message.text_message("assistant", "Sure. Could you give me your user ID?"),
        Message(
            "user",
            (TextBlock("My user ID is mia_li_3668."),),
            timestamp="2024-05-15T15:01:00",
        ),
        Message(
            "assistant",
            (
                ThinkingBlock("the user id might be fake_user_9999"),
                ToolUseBlock("c1", "get_reservation_details", {"reservation_id": "ZFA04Y"}),
            ),
        ),
        Message(
            "user",
            (
                ToolResultBlock(
                    "c1",
                    json.dumps(
                        {
                            "reservation_id": "ZFA04Y",
                            "user_id": "mia_li_3668",
                            "flights": [{"flight_number": "HAT136", "date": "2024-05-20"}],
                            "status": "cancelled",
                        }
                    ),
                ),
            ),
        ),
        Message.text_message(
            "assistant", "Your reservation ZFA04Y on flight HAT136 ($250) is cancelled."
        ),
    ]


def test_update_from_messages_sources_and_timestamps() -> None:
    facts = CaseFacts()
    changed = facts.update_from_messages(_conversation(), at="2024-05-15T15:00:00", extractor=EX)
    assert [(f.key, f.value, f.source) for f in changed] == [
        ("reservation_ids", "ZFA04Y", "message 1"),
        ("user_id", "mia_li_3668", "message 3"),
        ("status", "cancelled", "message 5"),
        ("flight_numbers", "HAT136", "message 6"),
        ("amount", "USD 250.00", "message 6"),
    ]
    # the message's own timestamp wins over the default
    assert facts.get("user_id") == Fact(
        "user_id", "mia_li_3668", "message 3", "2024-05-15T15:01:00"
    )
    assert facts.get("amount") == Fact("amount", "USD 250.00", "message 6", "2024-05-15T15:00:00")
    # system prompts, thinking and tool inputs are not scanned
    assert "date" not in facts and facts.values("user_id") == ["mia_li_3668"]
    assert facts.render().startswith("Case facts:\n- reservation_ids: ZFA04Y (message 1,")


def test_update_from_messages_incrementally_with_offset() -> None:
    conversation = _conversation()
    whole, parts = CaseFacts(), CaseFacts()
    whole.update_from_messages(conversation, extractor=EX)
    parts.update_from_messages(conversation[:4], extractor=EX)
    parts.update_from_messages(conversation[4:], offset=4, extractor=EX)
    assert list(parts) == list(whole) and len(whole) == 5
    assert parts.update_from_messages(conversation[4:], offset=4, extractor=EX) == []
    with pytest.raises(UsageError):
        parts.update_from_messages(conversation, offset=-1)
    with pytest.raises(UsageError):
        parts.update_from_messages(["not a message"])  # type: ignore[list-item]


def test_round_trip_through_json() -> None:
    facts = CaseFacts()
    facts.update_from_messages(_conversation(), at="t0", extractor=EX)
    data = json.loads(json.dumps(facts.to_dict()))
    assert data["version"] == 1
    back = CaseFacts.from_dict(data)
    assert list(back) == list(facts) and back.render() == facts.render()
    assert list(CaseFacts.from_dict({"version": 1, "facts": []})) == []


@pytest.mark.parametrize(
    "data",
    [
        {"version": 2, "facts": []},
        {"facts": []},
        {"version": "1", "facts": []},
        {"version": True, "facts": []},
        {"version": 1},
        {"version": 1, "facts": [["order_id", "W1"]]},
        {"version": 1, "facts": [{"key": "order_id"}]},
        {"version": 1, "facts": [{"key": "", "value": "W1"}]},
        {"version": 1, "facts": [{"key": "a", "value": "1"}, {"key": "a", "value": "2"}]},
        ["version", 1],
    ],
)
def test_from_dict_rejects_bad_data(data: Any) -> None:
    with pytest.raises(FormatError):
        CaseFacts.from_dict(data)


# --------------------------------------------------------------------------- harness text

CAVEAT = (
    "<local-command-caveat>Caveat: The messages below were generated by the user while "
    "running local commands. DO NOT respond to these messages or otherwise consider them "
    "in your response unless the user explicitly asks you to.</local-command-caveat>"
)
COMMAND = (
    "<command-name>/remind</command-name>\n<command-message>remind</command-message>\n"
    "<command-args>always cc ops@corp.io from 2024-05-20</command-args>"
)
COMPACT_PROMPT = (
    "Your task is to create a detailed summary of the conversation so far.\n"
    "8. Optional Next Step: Do not start on tangential requests without confirming first.\n"
    "Additional Instructions:\nNever skip the checklist. Due 2024-05-20."
)
CONTINUED = (
    "This session is being continued from a previous conversation that ran out of "
    "context. The conversation is summarized below:\nThe user said: from now on, reply "
    "in French; mail ana@example.com by 2024-05-20."
)
REMINDER = "<system-reminder>\nNever use TodoWrite again. Updated 2024-05-20.\n</system-reminder>"


@pytest.mark.parametrize(
    "harness",
    [CAVEAT, COMMAND, COMPACT_PROMPT, CONTINUED, REMINDER],
    ids=["caveat", "command", "compaction-prompt", "continued-summary", "reminder"],
)
def test_harness_text_is_never_a_rule_or_a_fact(harness: str) -> None:
    """Claude Code's own text in a user message (its caveat, a slash command's echo,
    its compaction prompt, the summary it resumes from, a reminder) states no rule and
    no fact, by any extractor; the user's own words around it still do."""
    assert Rules().capture(harness) == []
    for extractor in (FactExtractor(), EX):
        facts = CaseFacts()
        assert facts.update_from_text(harness, extractor=extractor) == []
        assert facts.update_from_messages([Message.text_message("user", harness)]) == []
    if not harness.startswith("<"):
        return  # a message the harness writes itself: it runs to the end of its text
    said = "Never call me before 9am. My e-mail is mia@example.com."
    for text in (f"{harness}\n{said}", f"{said}\n{harness}"):
        rules = Rules()
        assert rules.capture_messages([Message.text_message("user", text)]) == [
            "Never call me before 9am."
        ]
        facts = CaseFacts()
        facts.update_from_messages([Message.text_message("user", text)], extractor=EX)
        assert [(f.key, f.value) for f in facts] == [("email", "mia@example.com")]


def test_a_closing_tag_alone_is_harness_text_too() -> None:
    """A sentence split from its caveat kept ``</local-command-caveat>`` in the rule."""
    text = "DO NOT respond to these messages unless asked.</local-command-caveat> Never call."
    assert all("</" not in r for r in Rules().capture(text))


def test_any_extractor_reads_text_without_harness_text_at_the_same_offsets() -> None:
    seen: list[str] = []

    class Recorder:
        def extract(self, text: str) -> list[Extraction]:
            seen.append(text)
            return []

    text = f"{CAVEAT}\nmail mia@example.com"
    CaseFacts().update_from_messages([Message.text_message("user", text)], extractor=Recorder())
    CaseFacts().update_from_text(text, extractor=Recorder())
    for got in seen:
        assert len(got) == len(text) and got.endswith("\nmail mia@example.com")
        assert "DO NOT" not in got and "<" not in got


_HARNESS_TAGS = (
    "system-reminder|local-command-caveat|local-command-stdout|local-command-stderr|"
    "command-name|command-message|command-args|bash-stdout|bash-stderr|task-notification|"
    "user-prompt-submit-hook"
)
_HARNESS_ELEMENT = re.compile(rf"<({_HARNESS_TAGS})>")
_HARNESS_MARK = re.compile(rf"</?(?:{_HARNESS_TAGS})>")
_OPENINGS = (
    "Your task is to create a detailed summary",
    "This session is being continued from a previous conversation",
)


def _harness_regions(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds harness text, found independently of the library: its
    elements, and a text that opens with Claude Code's compaction prompt or summary."""
    regions = []
    for m in _HARNESS_ELEMENT.finditer(text):
        close = text.find(f"</{m.group(1)}>", m.end())
        regions.append((m.start(), len(text) if close < 0 else close + len(m.group(1)) + 3))
    if text.lstrip().startswith(_OPENINGS):
        regions.append((0, len(text)))
    return regions


def _only_in_harness(message: Message, needle: str) -> bool:
    """Every occurrence of ``needle`` in ``message``'s text lies in harness text."""
    hits = 0
    for b in message.content:
        if not isinstance(b, TextBlock):
            continue
        regions = _harness_regions(b.text)
        for m in re.finditer(re.escape(needle), b.text):
            hits += 1
            if not any(a <= m.start() < z for a, z in regions):
                return False
    return hits > 0


@pytest.mark.data
def test_claude_code_sessions_read_no_rule_or_fact_from_harness_text(
    data_dir: Path, tmp_path: Path
) -> None:
    """Every shared Claude Code file (sessions, subagents, fixtures), through
    :class:`Rules`, :class:`CaseFacts` (the default and the support preset) and the
    Engine's observe step: no rule or fact holds a harness tag or comes from harness
    text. Measured before the fix: 4 rules did, Claude Code's caveat "DO NOT respond to
    these messages … </local-command-caveat>" (tool_heavy) and its compaction prompt's
    "Do not start on tangential requests …" (the three agent-acompact files)."""
    from ctxwise import read_transcript
    from ctxwise.config import EngineConfig
    from ctxwise.engine import Engine
    from tests.conftest import claude_code_files

    paths = claude_code_files()
    assert len(paths) >= 12
    traps = {"DO NOT respond to these messages": 0, "Do not start on tangential requests": 0}
    config = EngineConfig.model_validate({"store": f"sqlite:///{tmp_path / 'e.db'}"})
    with Engine(config) as engine:
        for n, path in enumerate(paths):
            messages = read_transcript(path).live_window().messages
            for needle in traps:  # the data holds the trap: rule-shaped harness text
                traps[needle] += any(_only_in_harness(m, needle) for m in messages)
            rules = Rules()
            rules.capture_messages(messages)
            engine.record(f"s{n}", list(messages))
            for rule in [*rules, *engine.rules(f"s{n}")]:
                assert rule.source is not None
                said = messages[int(rule.source.removeprefix("message "))]
                assert not _HARNESS_MARK.search(rule.text), (path.name, rule)
                assert not _only_in_harness(said, rule.text), (path.name, rule)
            for extractor in (FactExtractor(), EX):
                facts = CaseFacts()
                facts.update_from_messages(messages, extractor=extractor)
                for fact in facts:
                    assert fact.source is not None
                    said = messages[int(fact.source.removeprefix("message "))]
                    assert not _HARNESS_MARK.search(fact.value), (path.name, fact)
                    for value in facts.values(fact.key):
                        assert not _only_in_harness(said, value), (path.name, fact)
    assert all(traps.values()), traps


# --------------------------------------------------------------------------- tau-bench


def _said(transcript_messages: tuple[Message, ...]) -> str:
    return "\n".join(m.text for m in transcript_messages if m.role in ("user", "assistant"))


@pytest.mark.data
def test_tau_bench_user_ids_and_reservation_ids(data_dir: Path) -> None:
    raw = json.loads(TAU.read_text(encoding="utf-8"))
    transcripts = read_transcripts(TAU)
    assert len(raw) == len(transcripts) == 200

    stated = found_in_text = mentioned = found_anywhere = final_ok = 0
    res_relevant = res_found = res_extracted = res_correct = 0
    for task, transcript in zip(raw, transcripts, strict=True):
        truth = task["info"]["task"]
        uid = truth["user_id"]
        said = _said(transcript.messages)
        from_text = [
            e
            for m in transcript.messages
            if m.role in ("user", "assistant")
            for e in EX.extract(m.text)
        ]
        facts = CaseFacts()
        changed: list[Fact] = []
        for i, message in enumerate(transcript.messages):
            changed += facts.update_from_messages([message], offset=i, extractor=EX)

        # user id: stated in what the user or agent said (as an id, not inside an e-mail)
        if re.search(rf"(?<![\w@.]){re.escape(uid)}(?![\w@])", said):
            stated += 1
            found_in_text += any(e.key == "user_id" and e.value == uid for e in from_text)
        # ... or anywhere in the conversation, tool results included
        everything = said + "".join(str(b.content) for m in transcript for b in m.tool_results)
        if uid in everything:
            mentioned += 1
            found_anywhere += any(f.key == "user_id" and f.value == uid for f in changed)
            final = facts.get("user_id")
            final_ok += final is not None and final.value == uid

        # reservation ids of the ground-truth actions that the conversation states
        gold = {
            a["kwargs"]["reservation_id"]
            for a in truth["actions"]
            if a["kwargs"].get("reservation_id")
        }
        got = {e.value for e in from_text if e.key == "reservation_id"}
        for rid in gold:
            if re.search(rf"\b{rid}\b", said):
                res_relevant += 1
                res_found += rid in got
        # precision: every id extracted from the text is a reservation of this trajectory
        real = set(gold) | set(re.findall(r"\b[A-Z0-9]{6}\b", truth["instruction"]))
        for m in task["traj"]:
            if m["role"] == "tool":
                real |= set(re.findall(r'"reservation_id": "(\w+)"', m["content"] or ""))
                for listed in re.findall(r'"reservations": \[([^\]]*)\]', m["content"] or ""):
                    real |= set(re.findall(r"\w+", listed))
        res_extracted += len(got)
        res_correct += len(got & real)

    # measured: 165/165 stated in text, 180/180 anywhere, 180/180 correct at the end
    assert stated >= 160 and found_in_text / stated >= 0.97, (found_in_text, stated)
    assert mentioned >= 175 and found_anywhere / mentioned >= 0.97, (found_anywhere, mentioned)
    assert final_ok / mentioned >= 0.97, (final_ok, mentioned)
    # measured: recall 216/217, precision 330/330
    assert res_relevant >= 200 and res_found / res_relevant >= 0.95, (res_found, res_relevant)
    assert res_correct / res_extracted >= 0.98, (res_correct, res_extracted)


@pytest.mark.data
def test_tau_bench_users_state_no_standing_rules(data_dir: Path) -> None:
    """The simulated customers ask and answer; none gives a standing instruction, and
    their many "I don't …" / "never" sentences must not be taken for rules."""
    captured = []
    for transcript in read_transcripts(TAU):
        rules = Rules()
        captured += rules.capture_messages(transcript.messages)
    assert captured == []


@pytest.mark.data
def test_tau_bench_case_facts_stay_small_and_pinned(data_dir: Path) -> None:
    transcript = read_transcripts(TAU)[0]
    facts = CaseFacts()
    facts.update_from_messages(transcript.messages, extractor=EX)
    assert facts.get("user_id") == Fact("user_id", "mia_li_3668", "message 3")
    assert "HAT136" in facts.values("flight_numbers")
    section = facts.section()
    assert section.pinned and section.content.startswith("Case facts:\n")
    assert len(section.content) < 600
    assert CaseFacts.from_dict(facts.to_dict()).render() == section.content
