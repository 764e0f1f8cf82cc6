from __future__ import annotations

import pytest

from ctxwise import CharCounter, Message, UsageError
from ctxwise.summarize import ExtractiveSummarizer

TURNS = [
    Message.text_message("user", "Hi there. I was charged twice for order W2378156 on May 2."),
    Message.text_message("assistant", "Sorry about that! Let me look. Thanks for waiting."),
    Message.text_message(
        "user", "Please do not refund to the old card, it expires until June. Cool."
    ),
    Message.text_message(
        "assistant", "Understood. I updated config/billing.yaml as asked. Anything else?"
    ),
    Message.text_message("user", "Great, nice weather today anyway"),
]


def test_keeps_fact_and_instruction_sentences_verbatim_in_order() -> None:
    summary = ExtractiveSummarizer().summarize("", TURNS, 200)
    lines = summary.splitlines()
    assert lines[0] == "user: I was charged twice for order W2378156 on May 2."
    assert "user: Please do not refund to the old card, it expires until June." in lines
    assert "assistant: I updated config/billing.yaml as asked." in lines
    assert not any("Thanks for waiting" in line or "Hi there" in line for line in lines)
    assert [lines.index(x) for x in lines] == sorted(lines.index(x) for x in lines)


def test_budget_and_rolling() -> None:
    counter = CharCounter()
    summarizer = ExtractiveSummarizer(counter)
    tight = summarizer.summarize("", TURNS, 25)
    assert counter.count(tight) <= 25 and "do not refund" in tight  # instructions weigh most
    rolled = summarizer.summarize(
        tight, [Message.text_message("user", "Ship it to 12 Elm St by Friday.")], 60
    )
    assert "do not refund" in rolled and "12 Elm St" in rolled
    with pytest.raises(UsageError):
        summarizer.summarize("", TURNS, 0)


def test_without_details_it_keeps_the_latest_words_rather_than_nothing() -> None:
    chat = [
        Message.text_message("user", "Hello there. Could you look at the flaky login page?"),
        Message.text_message("assistant", "Sure, looking now."),
    ]
    summary = ExtractiveSummarizer().summarize("", chat, 12)
    assert summary == "assistant: Sure, looking now."
    assert ExtractiveSummarizer().summarize("", chat, 200).startswith("user: Hello there.")
