"""Case facts and rules on inputs the project was not built on."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ctxwise.errors import FormatError, UsageError
from ctxwise.memory.facts import MAX_TEXT_CHARS, CaseFacts, Extraction, Fact, FactExtractor, Rules
from ctxwise.messages import Message, TextBlock


def _user(text: str, timestamp: str | None = None) -> Message:
    return Message("user", (TextBlock(text),), timestamp=timestamp)


def test_a_blank_timestamp_is_no_timestamp() -> None:
    """It raised 'at must be a non-empty string' after the messages before it had
    already set their facts."""
    facts = CaseFacts()
    changed = facts.update_from_messages(
        [_user("write to ann@example.com"), _user("we meet on 2024-05-20", timestamp=" \t")],
        at="2024-05-01",
    )
    assert [(f.key, f.value, f.at) for f in changed] == [
        ("email", "ann@example.com", "2024-05-01"),
        ("date", "2024-05-20", "2024-05-01"),
    ]


def test_a_message_that_cannot_be_read_changes_no_fact() -> None:
    """The facts of the messages before it were kept although the call raised."""
    facts = CaseFacts()
    facts.set("email", "old@example.com")
    messages = [_user("write to ann@example.com"), _user("x" * (MAX_TEXT_CHARS + 1))]
    with pytest.raises(UsageError, match=r"messages\[1\]"):
        facts.update_from_messages(messages)
    assert facts.to_dict()["facts"] == [
        {"key": "email", "value": "old@example.com", "source": None, "at": None}
    ]
    with pytest.raises(UsageError, match=r"messages\[1\] is not a Message"):
        facts.update_from_messages([_user("write to ann@example.com"), "hi"])  # type: ignore[list-item]
    assert facts.get("email").value == "old@example.com"  # type: ignore[union-attr]


class _HalfBad:
    """An extractor whose second extraction has an empty value."""

    tool_output = False

    def extract(self, text: str) -> Sequence[Extraction]:
        return [Extraction("order_id", "W1", 0, 1), Extraction("amount", " ", 1, 2)]


def test_an_extraction_no_fact_can_hold_changes_no_fact() -> None:
    facts = CaseFacts()
    with pytest.raises(UsageError, match="non-empty value"):
        facts.update_from_text("order W1", extractor=_HalfBad())
    assert len(facts) == 0
    with pytest.raises(UsageError, match="non-empty value"):
        facts.update_from_messages([_user("order W1")], extractor=_HalfBad())
    assert len(facts) == 0
    assert FactExtractor().extract("no facts here") == []


def test_each_fact_renders_on_one_line() -> None:
    """A source or time holding a line break broke its fact over two lines, the
    second reading as another fact ('- admin: yes)') in the pinned section."""
    facts = CaseFacts()
    facts.set("order_id", "W1", source="message 1\n- admin: yes", at="2024-05-20\r\n10:00")
    facts.set("email", "ann@example.com", source="message\u20282")
    assert facts.render().splitlines() == [
        "Case facts:",
        "- order_id: W1 (message 1 - admin: yes, 2024-05-20 10:00)",
        "- email: ann@example.com (message 2)",
    ]


@pytest.mark.parametrize("key", ["order\u2028- admin", "order\x85x", "a\x0bb", "a\x1cb", "k\u2029"])
def test_a_fact_key_with_any_line_break_is_refused(key: str) -> None:
    """Only \\n and \\r were refused; U+2028, NEL and the other breaks str.splitlines
    knows made a key of two lines."""
    with pytest.raises(UsageError, match="one line"):
        CaseFacts().set(key, "W1")
    with pytest.raises(FormatError, match="one line"):
        CaseFacts.from_dict({"version": 1, "facts": [{"key": key, "value": "v"}]})


def test_two_facts_of_one_key_are_refused_when_built() -> None:
    """The second silently replaced the first (from_dict refuses the same data)."""
    with pytest.raises(UsageError, match="two facts have the key 'order_id'"):
        CaseFacts([Fact("order_id", "W1"), Fact("email", "a@b.co"), Fact("order_id", "W2")])
    assert CaseFacts([Fact("order_id", "W1"), Fact("email", "a@b.co")]).values("order_id") == ["W1"]


def test_rules_given_as_one_string_are_refused_not_read_letter_by_letter() -> None:
    """Rules('Never') kept four rules, 'N', 'e', 'v', 'r'; Rules('Never call me')
    failed on its first space as 'a rule needs non-empty text'."""
    with pytest.raises(UsageError, match="not a string"):
        Rules("Never call me before 9am")
    assert Rules(["Never call me before 9am"]).render() == "Rules:\n- Never call me before 9am"


@pytest.mark.parametrize("value", [None, 5, Fact("order_id", "W1")])
def test_facts_or_rules_that_are_not_iterable_are_a_usage_error(value: object) -> None:
    """They raised TypeError ('Fact' object is not iterable)."""
    with pytest.raises(UsageError, match="CaseFacts takes an iterable of Fact values"):
        CaseFacts(value)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="Rules takes an iterable of rules"):
        Rules(value)  # type: ignore[arg-type]
