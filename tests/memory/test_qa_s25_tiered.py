"""TieredMemory on turns the project was not built on: broken Unicode, huge turns,
summarizers that fail, messages built wrong."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise.errors import SummarizerError, UsageError
from ctxwise.memory import InMemoryStore, LongTermMemory, SQLiteStore, TieredMemory
from ctxwise.memory.evaluation import evaluate_recall, load_conversations
from ctxwise.memory.store import MAX_TEXT_CHARS
from ctxwise.memory.tiered import _results_end, turn_items
from ctxwise.messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ctxwise.tokens import CharCounter


def _user(text: str) -> Message:
    return Message.text_message("user", text)


def test_a_turn_with_a_lone_surrogate_is_remembered_and_does_not_wedge_the_tiers(
    tmp_path: Path,
) -> None:
    """The long-term store refused the turn ('not valid Unicode'), so every add()
    after it raised the same error for ever: the turn could never be evicted."""
    store = SQLiteStore(tmp_path / "tiers.db")
    try:
        memory = TieredMemory(working_turns=1, longterm=LongTermMemory(store, ("t",)))
        cut = Message(
            "assistant",
            (ToolUseBlock("c1", "Read", {"path": "notes.md"}),),
            timestamp="2024-05-20T10:00:00\ud800",
            extra={"name": "bot\udc9f"},
        )
        turns = [
            _user("the parcel tracking code is ZX81 \ud83d"),
            cut,
            Message("user", (ToolResultBlock("c1", "party emoji \ud83d\udc9f cut"),)),
            _user("what next?"),
            _user("and then?"),
        ]
        for message in turns:
            memory.add(message)
        assert memory.archive == turns[:4]  # verbatim, surrogates and all
        assert store.count(("t",)) == 3
        hit = memory.longterm.recall("parcel tracking code", k=1)[0]  # type: ignore[union-attr]
        assert hit.item.text == "user: the parcel tracking code is ZX81 \ufffd"
        (call,) = [it for it in store.recent(("t",), 5) if "called Read" in it.text]
        assert call.text == (
            'bot\ufffd called Read {"path":"notes.md"}\ntool result: party emoji \U0001f49f cut'
        )
        assert call.metadata["speaker"] == "bot\ufffd"
        assert call.metadata["time"] == "2024-05-20T10:00:00\ufffd"
    finally:
        store.close()


def test_a_turn_longer_than_a_store_holds_is_remembered_by_its_start(tmp_path: Path) -> None:
    """A 1.2M-character tool output was refused by the store ('exceeds 1,000,000'),
    and every add() after it raised again."""
    store = SQLiteStore(tmp_path / "tiers.db")
    try:
        memory = TieredMemory(
            working_turns=1, working_tokens=10**7, longterm=LongTermMemory(store, ("t",))
        )
        huge = _user("the build log starts here " + "x " * 600_000)
        for message in (huge, _user("ok"), _user("next")):
            memory.add(message)
        assert memory.archive == [huge, _user("ok")]
        (item,) = [it for it in store.recent(("t",), 5) if it.text.startswith("user: the build")]
        assert len(item.text) == MAX_TEXT_CHARS and item.text.endswith(" […]")
    finally:
        store.close()


def test_items_of_ordinary_turns_are_unchanged() -> None:
    messages = [_user("héllo 世界 مرحبا e\u0301"), Message("assistant", (TextBlock("ok"),))]
    assert [it.text for it in turn_items(messages)] == [
        "user: héllo 世界 مرحبا e\u0301",
        "assistant: ok",
    ]


def test_the_evaluation_remembers_a_turn_with_a_lone_surrogate(tmp_path: Path) -> None:
    """JSON may escape a lone surrogate ("\\ud83d"); the evaluation failed mid-run
    with 'text is not valid Unicode' after the conversations before it were written."""
    path = tmp_path / "conversations.json"
    data = {
        "conversations": [
            {
                "id": "c",
                "turns": [
                    {"id": "a", "speaker": "Ann", "text": "my parrot is called Kiwi \ud83d"},
                    {"id": "b", "speaker": "Bob", "text": "what a name"},
                ],
                "questions": [{"question": "what is the parrot called?", "evidence": ["a"]}],
            }
        ]
    }
    path.write_text(json.dumps(data), encoding="utf-8")  # ensure_ascii: "\ud83d"
    result = evaluate_recall(load_conversations(path), (1,))
    assert result["recall_at"]["1"] == 1.0


class _Summarizer:
    """A custom summarizer that answers ``reply`` (or raises it)."""

    def __init__(self, reply: object) -> None:
        self.reply = reply

    def summarize(self, previous: str, turns: Sequence[Message], budget: int) -> object:
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (ValueError("model overloaded"), "ValueError: model overloaded"),
        (None, "returned NoneType, not text"),
        (["a", "list"], "returned list, not text"),
        ("  \n", "it returned an empty summary"),
    ],
    ids=["raises", "none", "list", "blank"],
)
def test_a_summarizer_that_fails_is_a_summarizer_error_and_changes_nothing(
    reply: object, reason: str
) -> None:
    """A raise escaped as itself (a bare ValueError); None or a list became the
    summary, so the next add() or sections() raised AttributeError / TypeError; a
    blank answer silently dropped the evicted turns from the summary."""
    memory = TieredMemory(working_turns=1, summary_tokens=50)
    memory.add(_user("my order is W2378156"))
    memory.add(_user("it has not arrived"))  # the extractive summary holds the order
    assert "W2378156" in memory.summary
    memory.summarizer = _Summarizer(reply)  # type: ignore[assignment]
    before = (list(memory.working), memory.summary, list(memory.archive))
    with pytest.raises(SummarizerError) as err:
        memory.add(_user("please send it again"))
    assert err.value.summarizer == "_Summarizer" and err.value.reason == reason
    assert (list(memory.working), memory.summary, list(memory.archive)) == before


def test_a_summary_over_its_budget_is_cut_to_it() -> None:
    memory = TieredMemory(
        counter=CharCounter(),
        working_turns=1,
        summary_tokens=20,
        summarizer=_Summarizer("y " * 500),  # type: ignore[arg-type]
    )
    memory.add(_user("first"))
    memory.add(_user("second"))
    assert 0 < CharCounter().count(memory.summary) <= 20
    assert memory.sections()[-1].name == "summary"


@pytest.mark.parametrize(
    ("message", "words"),
    [
        (Message("user", [TextBlock("hi")]), "content is a list"),  # type: ignore[arg-type]
        (Message("user", (TextBlock(None),)), "text is a NoneType"),  # type: ignore[arg-type]
        (Message("bot", (TextBlock("hi"),)), "role 'bot'"),  # type: ignore[arg-type]
        (Message("assistant", (ToolUseBlock("", "Read", {}),)), "empty or non-string id"),
    ],
    ids=["list-content", "none-text", "bad-role", "empty-call-id"],
)
def test_a_malformed_message_is_refused_before_it_enters_the_tiers(
    message: Message, words: str
) -> None:
    """It was kept: a None text failed in the next add() with a TypeError, far from
    its cause; a list of blocks, role 'bot' and an empty tool-call id were evicted
    into the summary and long-term memory as they were."""
    memory = TieredMemory(working_turns=1)
    memory.add(_user("hello"))
    with pytest.raises(UsageError, match=words):
        memory.add(message)
    assert memory.working == [_user("hello")] and memory.archive == []


_BLOB = "EqQBCkgIARABGAIiQJ0cXJ1c3QgbWUgSSdtIGVuY3J5cHRlZA"


def test_redacted_thinking_is_not_rendered_as_something_the_assistant_said() -> None:
    """Its encrypted data was rendered as 'assistant: EqQB…' in the recent turns
    section, in the long-term item of the turn and in the LLM summarizer's prompt."""
    from ctxwise.summarize import LLMSummarizer, render_turns

    reply = Message(
        "assistant",
        (ThinkingBlock(_BLOB, redacted=True), TextBlock("Your order W1 ships today.")),
    )
    assert render_turns([reply]) == "assistant: Your order W1 ships today."
    assert [it.text for it in turn_items([reply])] == ["assistant: Your order W1 ships today."]
    memory = TieredMemory()
    memory.add(reply)
    assert _BLOB not in memory.sections()[0].content
    _, user = LLMSummarizer(object()).prompt("", [reply], 100)  # type: ignore[arg-type]
    assert _BLOB not in user
    only = Message("assistant", (ThinkingBlock(_BLOB, redacted=True),))
    assert turn_items([only]) == []  # nothing to remember


_texts = st.lists(  # st.text would drop the lone surrogate
    st.characters() | st.sampled_from("世界مرحبا\u0301 \n\ud83d"), max_size=60
).map("".join)


@st.composite
def _conversation(draw: st.DrawFn) -> list[Message]:
    """User and assistant turns, some assistant turns calling tools whose results
    follow (in one message or several), text of any script (lone surrogates too),
    blank or empty."""
    out: list[Message] = []
    for i in range(draw(st.integers(1, 14))):
        calls = draw(st.integers(0, 3))
        if calls:
            uses = tuple(ToolUseBlock(f"c{i}_{j}", "lookup", {"q": j}) for j in range(calls))
            out.append(Message("assistant", uses))
            results = [ToolResultBlock(u.id, draw(_texts)) for u in uses]
            if draw(st.booleans()):
                out.append(Message("user", tuple(results)))
            else:
                out.extend(Message("user", (r,)) for r in results)
        else:
            out.append(
                Message(draw(st.sampled_from(["user", "assistant"])), (TextBlock(draw(_texts)),))
            )
    return out


@settings(max_examples=80, deadline=None)
@given(_conversation(), st.integers(1, 300), st.integers(1, 6))
def test_the_tiers_keep_every_turn_in_order_and_never_split_a_tool_call(
    messages: list[Message], working_tokens: int, working_turns: int
) -> None:
    """Archive + working is every message added, in order; the working turns fit
    both bounds unless they are one exchange; no tool call is on the other side of
    the cut from its results; the summary fits its budget; the pinned facts are in
    every window whole and never pass through the summary."""
    from ctxwise.memory import CaseFacts

    facts = CaseFacts()
    facts.set("order_id", "W4417")
    counter = CharCounter()
    memory = TieredMemory(
        counter=counter,
        working_tokens=working_tokens,
        working_turns=working_turns,
        summary_tokens=40,
        longterm=LongTermMemory(InMemoryStore(), ("t",)),
        pinned=[facts],
    )
    for message in messages:
        memory.add(message)
        assert memory.archive + memory.working == messages[: len(memory.archive + memory.working)]
        working = memory.working
        if len(working) > 1 and _results_end(working, 0) < len(working):  # could evict
            assert len(working) <= working_turns
            assert counter.count_messages(working) <= working_tokens
        archived_calls = {b.id for m in memory.archive for b in m.tool_uses}
        archived_results = {b.tool_use_id for m in memory.archive for b in m.tool_results}
        assert not archived_calls & {b.tool_use_id for m in working for b in m.tool_results}
        assert not archived_results & {b.id for m in working for b in m.tool_uses}
        assert counter.count(memory.summary) <= 40
        sections = memory.sections()
        assert sections[0].content == "Case facts:\n- order_id: W4417" and sections[0].pinned
        assert "Case facts" not in memory.summary
        assert memory.longterm is not None
        remembered = memory.longterm.store.count(("t",)) if memory.archive else 0
        assert remembered == len(turn_items(memory.archive))
    assert memory.archive + memory.working == messages


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"longterm": InMemoryStore()}, "longterm is a LongTermMemory or None, got InMemoryStore"),
        ({"pinned": [object()]}, "pinned is a sequence of objects with section()"),
        ({"pinned": "rules"}, "pinned is a sequence of objects with section()"),
        ({"summarizer": "llm"}, "summarizer is a Summarizer or None, got str"),
        ({"counter": "char"}, "counter is a TokenCounter or None, got str"),
    ],
    ids=["store-as-longterm", "pinned-object", "pinned-string", "summarizer-name", "counter-name"],
)
def test_parts_of_the_wrong_kind_are_refused_when_built(
    kwargs: dict[str, object], words: str
) -> None:
    """They were taken: sections() raised AttributeError ('InMemoryStore' object has
    no attribute 'recall', 'str' object has no attribute 'section'), and a
    summarizer or counter given by name failed on the first eviction."""
    with pytest.raises(UsageError, match=words):
        TieredMemory(**kwargs)  # type: ignore[arg-type]


def test_pinned_may_be_any_iterable_of_sections() -> None:
    from ctxwise.memory import CaseFacts, Rules

    facts, rules = CaseFacts(), Rules(["Never call before 9am."])
    facts.set("order_id", "W1")
    memory = TieredMemory(pinned=(p for p in (rules, facts)))  # type: ignore[arg-type]
    assert [s.name for s in memory.sections()] == ["rules", "case facts"]


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_a_blank_query_recalls_nothing_as_no_query_does(query: str) -> None:
    """'' recalled nothing but '   ' raised 'empty query: there is nothing to recall'
    (a user turn of only whitespace made the window fail)."""
    ltm = LongTermMemory(InMemoryStore(), ("t",))
    memory = TieredMemory(working_turns=1, longterm=ltm)
    memory.add(_user("the secret code is pineapple"))
    memory.add(_user("ok"))
    assert [s.name for s in memory.sections(query)] == ["recent turns", "summary"]
    assert "recalled" in [s.name for s in memory.sections("secret code")]
    with pytest.raises(UsageError, match="empty query"):
        memory.sections(5)  # type: ignore[arg-type]
