"""An overflow names what must stay (pinned sections and the history), never a
source that is not pinned."""

from __future__ import annotations

import pytest

from ctxwise import Engine, EngineConfig, Message
from ctxwise.errors import PinnedOverflowError


def test_a_history_overflow_with_compaction_off_names_the_history() -> None:
    config = EngineConfig(
        store="memory",
        budget=500,
        compaction={"enabled": False},
        clearing={"enabled": False},
        sources={"faq": {"text": "faq " * 100}},
    )
    with Engine(config) as engine, pytest.raises(PinnedOverflowError) as info:
        for i in range(40):
            engine.turn("s", [Message.text_message("user", f"q{i} " + "w " * 40)])
            engine.record("s", [Message.text_message("assistant", "a " * 20)])
    assert "faq" not in info.value.sections
    assert "history" in info.value.sections


def test_a_budget_below_the_request_framing_names_it() -> None:
    # with nothing pinned, the error listed nothing: "(pinned: )"
    engine = Engine(EngineConfig(store="memory", budget=1))
    with engine, pytest.raises(PinnedOverflowError) as info:
        engine.turn("s", [Message.text_message("user", "hello")])
    assert info.value.sections == ("request framing",)
    assert "(pinned: request framing)" in str(info.value)
