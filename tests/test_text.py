"""The one analyzer: normalization, Unicode words, stopwords, stemming."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise.errors import UsageError
from ctxwise.text import (
    _CJK_RUN,
    DEFAULT_ANALYZER,
    MAX_TERM_CHARS,
    STOPWORDS,
    Analyzer,
    _fold_table,
    _word_pattern,
    normalize,
    words,
)


def test_normalization_folds_case_width_ligatures_and_latin_diacritics() -> None:
    assert normalize("Straße ﬁne Ｆｕｌｌ ² Café") == "strasse fine full 2 cafe"
    assert words("Café naïve ÉCOLE") == ["cafe", "naive", "ecole"]
    assert words("Ελληνικά") == ["ελληνικα"]
    assert words("Привет, МИР") == ["привет", "мир"]  # Cyrillic keeps its letters


def test_words_are_unicode_and_cjk_is_one_term_per_character() -> None:
    assert words("Don't STOP, it's 9-5! foo_bar W2378156") == [
        "don", "t", "stop", "it", "s", "9", "5", "foo", "bar", "w2378156",
    ]  # fmt: skip
    assert words("東京タワーに行きました") == list("東京タワーに行きました")
    assert words("hello東京world") == ["hello", "東", "京", "world"]
    assert words("हिन्दी भाषा") == ["हिन्दी", "भाषा"]  # combining marks stay in their word
    assert words("안녕하세요 세계") == ["안녕하세요", "세계"]  # Hangul is written with spaces
    assert words("!!! ... ---") == []
    assert words("x" * 300) == ["x" * MAX_TERM_CHARS]


def test_the_default_analyzer_stems_english_and_can_be_turned_off() -> None:
    assert DEFAULT_ANALYZER.words("Refunded parcels, running") == ["refund", "parcel", "run"]
    assert Analyzer(stem=None).words("Refunded parcels") == ["refunded", "parcels"]
    assert DEFAULT_ANALYZER.terms("Refunded  the parcels") == "refund the parcel"
    assert DEFAULT_ANALYZER.name != Analyzer(stem=None).name
    with pytest.raises(UsageError):
        Analyzer(stem="klingon")  # type: ignore[arg-type]


def test_query_terms_leave_out_stopwords_unless_nothing_else_is_left() -> None:
    assert {"what", "the", "did"} <= STOPWORDS
    assert DEFAULT_ANALYZER.query_terms("What did the parcels do?") == ["parcel"]
    assert DEFAULT_ANALYZER.query_terms("what is it") == ["is", "it", "what"]


@given(st.text(max_size=200))
def test_terms_round_trip_and_analysis_is_stable(text: str) -> None:
    found = DEFAULT_ANALYZER.words(text)
    assert all(w and " " not in w and len(w) <= MAX_TERM_CHARS for w in found)
    assert DEFAULT_ANALYZER.terms(text).split() == found
    assert words(" ".join(words(text))) == words(text)  # normalized words are fixed points


def _words_by_the_full_steps(text: str) -> list[str]:
    """Steps 1–3 with no shortcut: the folding table on every text, and the word
    pattern that holds every combining mark."""
    folded = unicodedata.normalize("NFKC", text).casefold().translate(_fold_table())
    found = _word_pattern().findall(_CJK_RUN.sub(r" \1 ", folded.replace("_", " ")))
    return [w[:MAX_TERM_CHARS] for w in found]


_MIXED = st.text(
    alphabet=st.one_of(
        st.sampled_from("aZ9_ -'.\n"),
        st.sampled_from("éÉçœßﬁ²Ａ東京タワーー々ह िन्‍\u0301\u0308\u200dΆάῷЖж한😀"),
        st.characters(),
    ),
    max_size=300,
)


@given(_MIXED)
def test_the_shortcuts_give_exactly_the_terms_of_the_full_steps(text: str) -> None:
    assert words(text) == _words_by_the_full_steps(text)
    assert normalize(text) == unicodedata.normalize("NFKC", text).casefold().translate(
        _fold_table()
    )


@pytest.mark.parametrize(
    "text",
    [
        "plain ascii text_with_underscores and 42",
        "a dash — and “quotes” only",  # non-ASCII without marks or diacritics
        "café then e\u0301 decomposed",  # NFKC composes this one
        "\u1e9b\u0323 and q\u0307",  # a mark NFKC cannot compose stays in its word
        "हिन्दी and 東京 and Ελληνικά",
        "x" * 300 + " é",
    ],
)
def test_the_shortcuts_on_each_kind_of_text(text: str) -> None:
    assert words(text) == _words_by_the_full_steps(text)
