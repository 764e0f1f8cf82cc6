"""What the framework integrations share: the supported-version check (PEP 440 ranges
read by ``packaging``, pre-releases refused), and taking the call's own system prompt
(and those an older ctxwise recorded) out of a window's system part."""

from __future__ import annotations

import importlib.metadata

import pytest

from ctxwise.errors import IntegrationError, MissingDependencyError
from ctxwise.integrations._framework import require_framework, without_texts


@pytest.mark.parametrize(
    ("blocks", "texts", "left"),
    [
        (["A\n\nP\n\nB", "rules"], ["P"], ["A\n\nB", "rules"]),
        (["P\n\nB"], ["P"], ["B"]),
        (["A\n\nP"], ["P"], ["A"]),
        (["P", "rules"], ["P"], ["rules"]),
        (["AP\n\nB"], ["P"], ["AP\n\nB"]),  # only where it stands whole
        (["P one\n\nP"], ["P"], ["P one"]),
        (["x\n\nP\n\nQ\n\ny"], ["P\n\nQ"], ["x\n\ny"]),  # a prompt with blank lines in it
        (["A\n\nB"], ["nowhere", ""], ["A\n\nB"]),
        # the call's prompt (first, as the Engine places it), then a recorded one
        (["P\n\nC\n\nO", "rules"], ["P", "O"], ["C", "rules"]),
        (["P\n\nO\n\nP"], ["P", "P"], ["O"]),  # each text once, where it first stands
        (["P\n\nC"], ["P\n\nC"], []),
    ],
)
def test_without_texts(blocks: list[str], texts: list[str], left: list[str]) -> None:
    assert without_texts(blocks, texts) == left


@pytest.mark.parametrize(
    ("installed", "supported"),
    [
        ("2.0rc1", ">=1.5,<2"),  # the next major's pre-release
        ("1.5.0rc1", ">=1.5,<2"),  # a pre-release of the lower bound
        ("1.6.0.dev3", ">=1.5,<2"),  # a development release inside the range
        ("1.6b2", ">=1.5,<2"),
        ("2.0.1", ">=1.5,<2"),
        ("1.4.9", ">=1.5,<2"),
        ("not-a-version", ">=1.5,<2"),
    ],
)
def test_a_version_outside_the_range_or_a_pre_release_is_refused(
    monkeypatch: pytest.MonkeyPatch, installed: str, supported: str
) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda name: installed)
    with pytest.raises(IntegrationError) as info:
        require_framework("langchain", supported, "langchain", "the LangChain middleware")
    assert info.value.reason == "version" and info.value.supported == supported
    assert installed in str(info.value)


@pytest.mark.parametrize(
    ("installed", "supported"),
    [
        ("1.5", ">=1.5,<2"),
        ("1.5.2", ">=1.5,<2"),
        ("1.9.9.post1", ">=1.5,<2"),
        ("0.2.190", ">=0.2.189,<0.3"),
        ("2.1rc1", ">=2.1rc1,<3"),  # a range that names a pre-release admits it
    ],
)
def test_a_version_within_the_range_is_returned(
    monkeypatch: pytest.MonkeyPatch, installed: str, supported: str
) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda name: installed)
    assert require_framework("langchain", supported, "langchain", "x") == installed


def test_a_missing_framework_names_the_extra() -> None:
    with pytest.raises(MissingDependencyError, match="ctxwise-no-such-framework"):
        require_framework("ctxwise-no-such-framework", ">=1", "langchain", "x")


def test_a_bad_range_is_a_config_error() -> None:
    with pytest.raises(IntegrationError) as info:
        require_framework("langchain", ">=1.5,,<<2", "langchain", "x")
    assert info.value.reason == "config"
