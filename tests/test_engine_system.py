"""``Engine.turn(..., system=...)``: this call's system prompt is pinned, counted and
placed first in the system part, and not kept in the session."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise.config import EngineConfig
from ctxwise.engine import Engine
from ctxwise.errors import PinnedOverflowError, UsageError
from ctxwise.messages import Message, ToolResultBlock, ToolUseBlock

USER = Message.text_message
CONFIGURED = "You are the support agent of Northwind."
PROMPT = "You track orders. Quote the order id in every answer."


def _engine(tmp_path: Path, **overrides: object) -> Engine:
    data: dict[str, object] = {
        "store": f"sqlite:///{tmp_path / 'ctxwise.db'}",
        "budget": 4000,
        "system": CONFIGURED,
        **overrides,
    }
    return Engine(EngineConfig.model_validate(data))


def _system(window_messages: tuple[Message, ...]) -> list[str]:
    """The texts of a window's system part, one per section."""
    first = window_messages[0]
    assert first.role == "system"
    return [b.text for b in first.content if hasattr(b, "text")]


def test_the_prompt_opens_the_system_part_and_is_counted(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        bare = engine.turn("a", [USER("user", "Where is order 4417?")])
        r = engine.turn("b", [USER("user", "Where is order 4417?")], system=PROMPT)
    assert _system(r.window.messages)[0] == f"{PROMPT}\n\n{CONFIGURED}"
    assert r.request["system"][0]["text"] == f"{PROMPT}\n\n{CONFIGURED}"
    assert r.request["system"][0]["cache_control"] == {"type": "ephemeral"}
    counted = engine.counter.count(f"{PROMPT}\n\n{CONFIGURED}")
    (section,) = [s for s in r.trace.sections if s.name == "system"]
    assert section.tokens == counted and section.pinned and section.stable
    assert section.placement == "system" and section.source == "(system)"
    assert r.trace.tokens.system == counted
    assert r.trace.tokens.stable_prefix == counted
    assert r.trace.tokens.total == engine.counter.count_messages(r.window.messages)
    assert r.trace.tokens.total > bare.trace.tokens.total


def test_the_prompt_is_not_kept_in_the_session(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        engine.turn("s", [USER("user", "Hi.")], system=PROMPT)
        later = engine.turn("s", [USER("assistant", "Hello."), USER("user", "Refund?")])
        other = engine.turn(
            "s", [USER("assistant", "Which?"), USER("user", "4417.")], system="You refund."
        )
        assert all(PROMPT not in m["content"] for m in engine.sessions.log("s"))
    assert _system(later.window.messages) == [CONFIGURED]
    assert _system(other.window.messages) == [f"You refund.\n\n{CONFIGURED}"]
    with _engine(tmp_path) as engine:  # read back from the store
        again = engine.turn("s", [USER("assistant", "Done."), USER("user", "Thanks.")])
        state = engine.sessions.load("s")
    assert _system(again.window.messages) == [CONFIGURED]
    assert state is not None and "You refund." not in str(state)


def test_the_prompt_comes_before_the_session_texts(tmp_path: Path) -> None:
    """The configured and session texts follow it, in their order: a prompt that stays
    the same keeps the system part a stable prefix as the session's texts grow."""
    with _engine(tmp_path, system_file="") as engine:
        one = engine.turn(
            "s", [Message.text_message("system", "Be brief."), USER("user", "Hi.")], system=PROMPT
        )
        two = engine.turn(
            "s",
            [
                USER("assistant", "Hi."),
                Message.text_message("system", "Be kind."),
                USER("user", "?"),
            ],
            system=PROMPT,
        )
    assert _system(one.window.messages) == [f"{PROMPT}\n\n{CONFIGURED}\n\nBe brief."]
    assert _system(two.window.messages) == [f"{PROMPT}\n\n{CONFIGURED}\n\nBe brief.\n\nBe kind."]
    assert _system(two.window.messages)[0].startswith(_system(one.window.messages)[0])


def test_a_text_equal_to_the_prompt_is_not_repeated(tmp_path: Path) -> None:
    """A session that recorded the prompt as a system message (as the integrations did
    before ``system=``) counts and sends it once."""
    with _engine(tmp_path) as engine:
        engine.turn("s", [Message.text_message("system", PROMPT), USER("user", "Hi.")])
        r = engine.turn("s", [USER("assistant", "Hello."), USER("user", "?")], system=f"{PROMPT}\n")
        same = engine.turn(
            "t", [USER("user", "Hi.")], system=CONFIGURED
        )  # the configured prompt again
    assert _system(r.window.messages) == [f"{PROMPT}\n\n\n{CONFIGURED}"]
    assert r.trace.tokens.system == engine.counter.count(f"{PROMPT}\n\n\n{CONFIGURED}")
    assert _system(same.window.messages) == [CONFIGURED]


def test_the_prompt_is_pinned_when_the_history_is_compacted(tmp_path: Path) -> None:
    prompt = "You track orders for Northwind. " + "Quote the order id in every answer. " * 20
    with _engine(tmp_path, budget=900) as engine:
        msgs: list[Message] = [USER("user", "Where are my orders?")]
        for i in range(8):
            r = engine.turn("s", msgs, system=prompt)
            assert _system(r.window.messages)[0].startswith(prompt)
            assert r.trace.tokens.total <= 900
            msgs = [
                Message("assistant", (ToolUseBlock(f"c{i}", "lookup", {"order": str(i)}),)),
                Message("user", (ToolResultBlock(f"c{i}", "Tracking event logged. " * 30),)),
            ]
        assert any(t.compacted is not None or t.cleared for t in engine.traces("s"))


def test_a_prompt_the_budget_cannot_hold_is_refused_and_nothing_written(tmp_path: Path) -> None:
    with _engine(tmp_path, budget=500) as engine:
        engine.turn("s", [USER("user", "Hi.")])
        before = (engine.sessions.version("s"), engine.sessions.log("s"))
        with pytest.raises(PinnedOverflowError) as err:
            engine.turn("s", [USER("assistant", "Hello."), USER("user", "?")], system="x " * 2000)
        assert "system" in err.value.sections
        assert (engine.sessions.version("s"), engine.sessions.log("s")) == before


@pytest.mark.parametrize(
    "bad", [b"You track orders.", 1, ["You track orders."], Message.text_message("system", "x")]
)
def test_a_prompt_that_is_not_a_string_is_a_usage_error(tmp_path: Path, bad: object) -> None:
    with _engine(tmp_path) as engine:
        with pytest.raises(UsageError, match="system is this call's system prompt"):
            engine.turn("s", [USER("user", "Hi.")], system=bad)  # type: ignore[arg-type]
        assert engine.sessions.version("s") == 0


@pytest.mark.parametrize("blank", ["", "  ", "\n\n"])
def test_a_blank_prompt_is_no_prompt(tmp_path: Path, blank: str) -> None:
    with _engine(tmp_path) as engine:
        none = engine.turn("a", [USER("user", "Hi.")])
        r = engine.turn("b", [USER("user", "Hi.")], system=blank)
    assert _system(r.window.messages) == _system(none.window.messages) == [CONFIGURED]
    assert r.trace.tokens.total == none.trace.tokens.total


def test_aturn_takes_the_prompt(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        r = asyncio.run(engine.aturn("s", [USER("user", "Hi.")], system=PROMPT))
    assert _system(r.window.messages)[0].startswith(PROMPT)


def test_the_openai_render_sends_the_prompt_first(tmp_path: Path) -> None:
    with _engine(tmp_path, render="openai") as engine:
        r = engine.turn("s", [USER("user", "Hi.")], system=PROMPT)
    assert r.request["messages"][0]["role"] == "system"
    assert str(r.request["messages"][0]["content"]).startswith(PROMPT)


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 120), min_size=1, max_size=10),
    budget=st.integers(700, 2500),
)
def test_every_request_with_a_changing_prompt_fits_the_budget(
    sizes: list[int], budget: int
) -> None:
    """Whatever the prompt of each call, what is sent (counted as it is sent) fits."""
    cfg = EngineConfig(store="memory", budget=budget)
    with Engine(cfg) as engine:
        msgs: list[Message] = [USER("user", "Where are my orders?")]
        for i, size in enumerate(sizes):
            prompt = "Quote the order id. " * size
            try:
                r = engine.turn("s", msgs, system=prompt)
            except PinnedOverflowError:
                return
            sent = engine.counter.count_messages(r.window.messages)
            calibration = r.trace.calibration
            assert calibration is not None
            assert sent == r.trace.tokens.total <= calibration.limit <= budget - cfg.reserve
            if prompt.strip():
                assert _system(r.window.messages)[0].startswith(prompt)
            msgs = [
                Message("assistant", (ToolUseBlock(f"c{i}", "lookup", {"order": str(i)}),)),
                Message("user", (ToolResultBlock(f"c{i}", "Tracking event logged. " * 25),)),
            ]
