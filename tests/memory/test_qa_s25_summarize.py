"""The extractive summarizer on inputs the project was not built on."""

from __future__ import annotations

import pytest

from ctxwise.errors import UsageError
from ctxwise.messages import Message, TextBlock
from ctxwise.summarize import (
    CUT_LEFT,
    CUT_RIGHT,
    ExtractiveSummarizer,
    LLMSummarizer,
    parse_excerpt,
)
from ctxwise.tokens import CharCounter


def test_a_message_of_many_sentences_is_read_in_one_pass() -> None:
    """Each sentence looked through every atom of its line for the ones inside it
    (quadratic): a 990 KB message of 30,000 sentences took 74 s. Now a sentence
    reads only its own run of atoms, and the summary is the same as before: what
    it keeps is verbatim and within the budget."""
    text = " ".join(f"Please fix file src/a{i}.py now." for i in range(12_000))
    out = ExtractiveSummarizer().summarize("", [Message("user", (TextBlock(text),))], 200)
    assert 0 < CharCounter().count(out) <= 200
    for line in out.splitlines():
        excerpt = parse_excerpt(line)
        assert excerpt is not None and (excerpt.index, excerpt.who) == (0, "user")
        piece = excerpt.text.removeprefix(CUT_LEFT).removesuffix(CUT_RIGHT)
        assert piece.startswith("Please fix file src/a") and piece in text  # verbatim


_TURNS = [Message("user", (TextBlock("my order is W2378156"),))]


@pytest.mark.parametrize(
    ("previous", "turns", "words"),
    [
        (None, _TURNS, "the previous summary is text"),
        ("", _TURNS[0], "turns are a sequence of Message, got Message"),
        ("", "my order is W1", "turns are a sequence of Message, got str"),
        ("", [{"role": "user", "content": "hi"}], r"turns\[0\] is not a Message: dict"),
    ],
    ids=["previous-none", "one-message", "a-string", "dicts"],
)
def test_summarizers_refuse_input_that_is_not_text_and_messages(
    previous: object, turns: object, words: str
) -> None:
    """Both raised AttributeError ('NoneType' object has no attribute 'splitlines',
    'dict' object has no attribute 'content') or TypeError ('Message' object is not
    iterable); the LLM summarizer before calling the model."""
    with pytest.raises(UsageError, match=words):
        ExtractiveSummarizer().summarize(previous, turns, 100)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=words):
        LLMSummarizer(_Unreachable()).summarize(previous, turns, 100)  # type: ignore[arg-type]


class _Unreachable:
    def complete(self, system: str, user: str, *, max_tokens: int) -> str:
        raise AssertionError("the model is not called")


@pytest.mark.parametrize("counter", ["char", 4])
def test_a_counter_that_is_not_one_is_refused(counter: object) -> None:
    """ExtractiveSummarizer('char') counted with str.count and gave summaries of
    any length."""
    with pytest.raises(UsageError, match="counter is a TokenCounter"):
        ExtractiveSummarizer(counter)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="counter is a TokenCounter"):
        LLMSummarizer(_Unreachable(), counter=counter)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="instructions must be non-empty text"):
        LLMSummarizer(_Unreachable(), instructions=None)  # type: ignore[arg-type]
