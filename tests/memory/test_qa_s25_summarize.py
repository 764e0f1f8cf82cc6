"""The extractive summarizer on inputs the project was not built on."""

from __future__ import annotations

from ctxwise.messages import Message, TextBlock
from ctxwise.summarize import CUT_LEFT, CUT_RIGHT, ExtractiveSummarizer, parse_excerpt
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
