"""What the framework integrations share: taking the call's own system prompt (and
those an older ctxwise recorded) out of a window's system part."""

from __future__ import annotations

import pytest

from ctxwise.integrations._framework import without_texts


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
