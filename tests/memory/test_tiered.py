from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise import (
    CharCounter,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    read_transcripts,
)
from ctxwise.assembly import Section
from ctxwise.memory import InMemoryStore, LongTermMemory, TieredMemory
from ctxwise.memory.tiered import turn_items
from tests.conftest import TAU


class FixedFacts:
    def section(self) -> Section:
        return Section("case facts", "Case facts:\n- order_id: W2378156", 95, pinned=True)


def exchange(i: int, tools: int) -> list[Message]:
    msgs = [Message.text_message("user", f"question {i} about order W{i:07d}")]
    if tools:
        uses = tuple(ToolUseBlock(f"t{i}_{j}", "lookup", {"n": j}) for j in range(tools))
        msgs.append(Message("assistant", uses))
        msgs.append(
            Message("user", tuple(ToolResultBlock(u.id, f"result {u.id} " * 5) for u in uses))
        )
    msgs.append(Message("assistant", (TextBlock(f"answer {i}"),)))
    return msgs


@given(
    st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=25), st.integers(60, 400)
)
def test_nothing_lost_and_pairs_never_split(tools: list[int], budget: int) -> None:
    memory = TieredMemory(
        counter=CharCounter(), working_tokens=budget, working_turns=7, summary_tokens=80
    )
    sent: list[Message] = []
    for i, n in enumerate(tools):
        for m in exchange(i, n):
            memory.add(m)
            sent.append(m)
            # the working tier never starts with an orphan result or holds a split pair
            kinds = {p.kind.value for p in Transcript(tuple(memory.working)).problems()}
            assert "orphan_result" not in kinds
    assert memory.archive + memory.working == sent  # nothing silently lost, order kept
    if memory.archive:
        assert memory.summary  # evicted turns were folded into the summary


def test_sections_order_and_pinning() -> None:
    store = InMemoryStore()
    memory = TieredMemory(
        working_turns=4,
        longterm=LongTermMemory(store, ("t", "1")),
        pinned=[FixedFacts()],
        recall_k=3,
    )
    for i in range(6):
        for m in exchange(i, 1):
            memory.add(m)
    sections = {s.name: s for s in memory.sections("question 0 about order W0000000")}
    assert sections["case facts"].pinned
    assert (
        sections["recent turns"].priority
        > sections["recalled"].priority
        > sections["summary"].priority
    )
    assert "W0000000" in sections["recalled"].content  # evicted turns are recalled from the archive


def test_tau_bench_trajectory(data_dir: Path) -> None:
    t = read_transcripts(TAU)[0]
    memory = TieredMemory(working_tokens=1500, working_turns=12, summary_tokens=300)
    for m in t.messages[1:]:
        memory.add(m)
    assert memory.archive and memory.summary
    assert Transcript(tuple(memory.working)).problems() == []
    assert "mia_li_3668" in memory.summary  # the user id survives in the summary, verbatim


def test_evicted_turns_are_summarized_with_their_archive_index() -> None:
    from ctxwise.summarize import parse_excerpt

    memory = TieredMemory(working_tokens=60, working_turns=2)
    for i in range(6):
        memory.add(
            Message.text_message("user", f"Order W{1000 + i} arrived damaged on May {i + 2}.")
        )
        memory.add(Message.text_message("assistant", f"Noted for order W{1000 + i}."))
    lines = [parse_excerpt(x) for x in memory.summary.splitlines()]
    assert lines and all(x is not None for x in lines)
    for ex in lines:
        assert ex is not None
        assert f"W{1000 + ex.index // 2}" in ex.text  # the origin is the archive's index
        assert memory.archive[ex.index].text.find(ex.text.strip("[…] ")) >= 0


def test_longterm_keeps_one_item_per_turn() -> None:
    """A user message, an assistant reply, and a tool call with its results are one
    item each, with role, speaker, tool, position and time (not one per line)."""
    store = InMemoryStore()
    ltm = LongTermMemory(store, ("t", "turns"), context=0)
    memory = TieredMemory(working_turns=1, longterm=ltm)
    call = ToolUseBlock("t1", "get_order", {"id": "W2378156"})
    result = '{\n    "order": "W2378156",\n    "status": "delivered"\n}'
    sent = [
        Message("user", (TextBlock("Where is order W2378156?"),), timestamp="2026-05-02T10:00Z"),
        Message("assistant", (TextBlock("Let me look."), call)),
        Message("user", (ToolResultBlock("t1", result),)),
        Message("assistant", (TextBlock("It was delivered.\nAnything else?"),), id="msg_9"),
        Message("user", (TextBlock("No, thanks."),), extra={"name": "Mia"}),
        Message.text_message("assistant", "Bye."),
    ]
    for m in sent:
        memory.add(m)
    items = sorted(store.by_seq(ltm.namespace, range(10)), key=lambda it: it.seq)
    assert [it.metadata["position"] for it in items] == [0, 1, 3, 4]  # "Bye." is working
    assert [it.metadata["role"] for it in items] == ["user", "assistant", "assistant", "user"]
    assert items[0].text == "user: Where is order W2378156?"
    assert items[0].metadata["time"] == "2026-05-02T10:00Z" and items[0].metadata["tool"] is None
    tool = items[1]
    assert tool.metadata["tool"] == "get_order" and tool.metadata["speaker"] == "assistant"
    assert tool.text.startswith("assistant: Let me look.\nassistant called get_order")
    assert '"status": "delivered"' in tool.text and tool.text.endswith("}")  # the whole result
    assert items[2].id == "msg_9" and items[2].text.count("\n") == 1  # one reply, two lines
    assert items[3].text == "Mia: No, thanks." and items[3].metadata["speaker"] == "Mia"
    hits = ltm.recall("status delivered", k=1)
    assert hits[0].item.metadata["tool"] == "get_order"


def test_turn_items_is_the_evaluation_write_path() -> None:
    from ctxwise.memory.evaluation import turn_items as eval_items
    from ctxwise.memory.evaluation import turn_messages

    conv = {
        "turns": [
            {"id": "D1:1", "speaker": "Ann", "text": "I adopted Rex", "date": "1 May 2023"},
            {"id": "D1:2", "speaker": "Bob", "text": "  ", "date": "1 May 2023"},
            {"id": "D1:3", "speaker": "Bob", "text": "Lovely!", "date": "1 May 2023"},
        ]
    }
    assert eval_items(conv) == turn_items(turn_messages(conv))
    first, second = eval_items(conv)
    assert (first.id, first.text, second.id) == ("D1:1", "Ann: I adopted Rex", "D1:3")
    assert first.metadata == {
        "role": "user",
        "speaker": "Ann",
        "tool": None,
        "position": 0,
        "time": "1 May 2023",
    }
    assert second.metadata["position"] == 2


@pytest.mark.data
def test_tiered_memory_remembers_locomo_as_the_evaluation_does(data_dir: Path) -> None:
    """What users get is what is measured: TieredMemory.add writes the items the
    evaluation writes (issue 11)."""
    from ctxwise.memory.evaluation import load_conversations, turn_messages
    from ctxwise.memory.evaluation import turn_items as eval_items

    conv = load_conversations(data_dir / "locomo" / "locomo_dev5.json")["conversations"][0]
    store = InMemoryStore()
    ltm = LongTermMemory(store, ("t", "locomo"), preset="dialogue")
    memory = TieredMemory(working_turns=1, working_tokens=10**6, longterm=ltm)
    messages = turn_messages(conv)
    for m in messages:
        memory.add(m)
    ltm.remember_many(turn_items(memory.working, len(memory.archive)))  # the one left
    got = sorted(store.by_seq(ltm.namespace, range(len(messages))), key=lambda it: it.seq)
    want = eval_items(conv)
    assert [(it.id, it.text, it.metadata) for it in got] == [
        (it.id, it.text, it.metadata) for it in want
    ]


def test_a_failing_long_term_store_leaves_the_tiers_as_they_were(tmp_path: Path) -> None:
    """Evicted turns that cannot be remembered (the store is closed, locked) are not
    dropped from the working turns either: add() raises and changes nothing."""
    from ctxwise.memory import SQLiteStore, StoreError

    store = SQLiteStore(tmp_path / "tiers.db")
    memory = TieredMemory(working_turns=2, longterm=LongTermMemory(store, ("t",)))
    first = [Message.text_message("user", f"turn {i} about order W{i}") for i in range(3)]
    for m in first:
        memory.add(m)
    before = (list(memory.working), memory.summary, list(memory.archive))
    assert before[2] == first[:1] and store.count(("t",)) == 1
    store.close()
    with pytest.raises(StoreError):
        memory.add(Message.text_message("user", "turn 3 about order W3"))
    assert (list(memory.working), memory.summary, list(memory.archive)) == before
