"""Identifier splitting: one splitter, and the analyzer's ``identifiers`` option."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ctxwise.errors import UsageError
from ctxwise.text import DEFAULT_ANALYZER, Analyzer, identifier_parts, split_identifier, words


def test_split_identifier() -> None:
    assert split_identifier("getMe") == "get Me"
    assert split_identifier("getHTTPResponse") == "get HTTP Response"
    assert split_identifier("getHTTPResponse", acronyms=False) == "get HTTPResponse"
    assert split_identifier("list_issues") == "list_issues"


def test_identifier_parts_follow_the_word() -> None:
    assert identifier_parts("see ProjectReviewLive now") == (
        "see ProjectReviewLive (Project Review Live) now"
    )
    assert identifier_parts("plain words") == "plain words"


def test_the_analyzer_option_indexes_the_parts_too() -> None:
    code = replace(DEFAULT_ANALYZER, identifiers=True)
    text = "ProjectReviewLive renders reviewItems"
    assert code.words(text) == DEFAULT_ANALYZER.words(identifier_parts(text))
    assert {"project", "review", "live", "item"} <= set(code.words(text))
    assert not {"project", "live"} & set(DEFAULT_ANALYZER.words(text))
    assert code.query_terms("the ProjectReview") == sorted({"projectreview", "project", "review"})
    assert code.name != DEFAULT_ANALYZER.name and code.name.endswith("+identifiers")
    assert words("getMe") == ["getme"]


def test_a_bad_option_is_refused() -> None:
    with pytest.raises(UsageError):
        Analyzer(identifiers="yes")  # type: ignore[arg-type]
