"""The turn's effects alone: what a committed session still needs, and running it."""

from __future__ import annotations

from collections.abc import Sequence

from ctxwise.formats import neutral
from ctxwise.memory.store import InMemoryStore
from ctxwise.messages import Message
from ctxwise.turn import Remember, SessionView
from ctxwise.turn.context import OnceSummarizer
from ctxwise.turn.effects import pending, remember

from ._build import assistant, call, context, result, user


def _log(messages: Sequence[Message]) -> dict[str, list[dict[str, object]]]:
    return {"s": [neutral.encode_message(m) for m in messages]}


def test_pending_is_the_compacted_span_memory_does_not_hold() -> None:
    ctx = context().but(memory=InMemoryStore())
    live = SessionView("s", 3, origins=(None, 6, 7), log_length=8, remembered=2)
    assert pending(ctx, live) == (Remember("s", 2, 6),)
    assert pending(ctx, live.but(remembered=6)) == ()
    assert pending(ctx.but(memory=None), live) == ()  # no memory: nothing to do
    whole = SessionView("s", 1, origins=(0, 1), log_length=2)
    assert pending(ctx, whole) == ()  # nothing was compacted


def test_remember_puts_one_item_per_turn_and_twice_changes_nothing() -> None:
    messages = [
        user("where is order 8812?"),
        call("t1", q=1),
        result("t1", "shipped"),
        assistant("ok"),
    ]
    log = _log(messages)
    store = InMemoryStore()
    ctx = context().but(memory=store, read_log=lambda sid, start, end: log[sid][start:end])
    assert remember(ctx, Remember("s", 0, 4)) == 3  # the call and its result are one
    assert remember(ctx, Remember("s", 0, 4)) == 3
    namespace = ctx.namespace("s")
    assert store.count(namespace) == 3
    texts = [i.text for i in store.recent(namespace, 10)]
    assert any("8812" in t for t in texts) and any("shipped" in t for t in texts)


def test_once_summarizer_calls_once_for_equal_arguments() -> None:
    calls: list[int] = []

    class Counting:
        def summarize(self, previous: str, turns: Sequence[Message], budget: int) -> str:
            calls.append(budget)
            return f"{len(turns)} turns"

    once = OnceSummarizer(Counting())
    turns = [user("a"), assistant("b")]
    assert once.summarize("", turns, 100) == "2 turns"
    assert once.summarize("", [user("a"), assistant("b")], 100) == "2 turns"  # equal, not same
    assert once.summarize("", turns, 50) == "2 turns"
    assert calls == [100, 50]
