from __future__ import annotations

from pathlib import Path

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
