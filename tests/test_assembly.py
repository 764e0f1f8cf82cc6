from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise import (
    Budget,
    BudgetError,
    CharCounter,
    PinnedOverflowError,
    Section,
    SectionStatus,
    UsageError,
    WordCounter,
    assemble,
    order_for_recall,
)
from ctxwise.formats import anthropic, openai

MARKER = " […]"
words = st.lists(
    st.sampled_from(["alpha", "be", "gamma", "delta", "epsilon", "z", "policy", "30"]), max_size=40
)


@st.composite
def section_lists(draw: st.DrawFn) -> list[Section]:
    n = draw(st.integers(min_value=0, max_value=12))
    out = []
    for i in range(n):
        out.append(
            Section(
                name=f"s{i}",
                content=" ".join(draw(words)),
                priority=draw(st.integers(min_value=0, max_value=5)),
                pinned=draw(st.booleans()) and draw(st.booleans()),
                truncatable=draw(st.booleans()),
                stable=draw(st.booleans()),
            )
        )
    return out


counters = st.sampled_from([CharCounter(), WordCounter(), CharCounter(0.2)])


@given(section_lists(), st.integers(min_value=1, max_value=300), counters)
def test_invariants(sections: list[Section], budget: int, counter: CharCounter) -> None:
    pinned = sum(counter.count(s.content) for s in sections if s.pinned)
    if pinned > budget:
        with pytest.raises(PinnedOverflowError) as info:
            assemble(sections, budget, counter)
        assert info.value.pinned_tokens == pinned and info.value.budget == budget
        return
    a = assemble(sections, budget, counter)
    # the total never exceeds the budget, and is the sum of what was kept
    assert a.tokens <= budget
    assert a.tokens == sum(r.tokens for r in a.reports)
    assert a.tokens == sum(counter.count(s.content) for s in a.sections)
    # every section gets exactly one decision, in the caller's order
    assert [r.name for r in a.reports] == [s.name for s in sections]
    for r in a.reports:
        if r.section.pinned:
            # pinned sections always survive, whole
            assert r.status is SectionStatus.INCLUDED and r.content == r.section.content
        if r.status is SectionStatus.TRUNCATED:
            assert r.section.truncatable
            assert r.content.endswith(MARKER)
            kept = r.content[: -len(MARKER)]
            assert r.section.content.startswith(kept) and r.section.content[len(kept)] == " "
        if r.status is SectionStatus.DROPPED:
            assert r.tokens == 0 and not r.section.pinned
    # stable sections open the window
    flags = [s.stable for s in a.sections]
    assert flags == sorted(flags, reverse=True)


unicode_words = st.lists(
    st.sampled_from(
        [
            "東京都に住んでいます",
            "カタカナ",
            "e\u0301te\u0301",
            "👨\u200d👩\u200d👧",
            "❤\ufe0f",
            "word",
            "30",
        ]
    ),
    max_size=20,
)


@given(
    st.lists(
        st.tuples(unicode_words, st.integers(0, 5), st.booleans(), st.booleans(), st.booleans()),
        max_size=8,
    ),
    st.integers(min_value=1, max_value=120),
    counters,
    st.sampled_from(["given", "recall"]),
)
def test_property_unicode_windows_are_deterministic_and_whole(
    specs: list[tuple[list[str], int, bool, bool, bool]],
    budget: int,
    counter: CharCounter,
    order: str,
) -> None:
    """Han, kana, combining marks and emoji: within the budget, the same window twice,
    stable sections first in either order, and a cut never inside a character."""
    regex = pytest.importorskip("regex")
    sections = [
        Section(f"s{i}", " ".join(w), priority=p, pinned=pin, truncatable=cut, stable=stable)
        for i, (w, p, cut, stable, pin) in enumerate(specs)
        if not (pin and i % 3)  # a few pinned ones
    ]
    try:
        a = assemble(sections, budget, counter, order=order)  # type: ignore[arg-type]
    except PinnedOverflowError:
        return
    assert a == assemble(sections, budget, counter, order=order)  # type: ignore[arg-type]
    assert a.tokens == sum(counter.count(s.content) for s in a.sections) <= budget
    assert [s.stable for s in a.sections] == sorted((s.stable for s in a.sections), reverse=True)
    for r in a.truncated:
        kept = r.content.removesuffix(MARKER)
        graphemes = regex.findall(r"\X", r.section.content)
        ends = {sum(map(len, graphemes[:i])) for i in range(len(graphemes) + 1)}
        assert r.content.endswith(MARKER) and len(kept) in ends


@given(st.integers(min_value=1, max_value=8), st.integers(min_value=0, max_value=8))
def test_lowest_priority_drops_first(n: int, room: int) -> None:
    # equal-sized sections: with room for `room` of them, the top `room` priorities stay
    sections = [Section(f"s{i}", "x" * 40, priority=i) for i in range(n)]
    a = assemble(sections, max(1, room * 10), CharCounter())
    kept = sorted(r.section.priority for r in a.reports if r.status is SectionStatus.INCLUDED)
    assert kept == list(range(n))[max(0, n - room) :] if room else kept == []


def test_ties_keep_callers_order() -> None:
    sections = [Section(name, "x" * 40, priority=1) for name in ("first", "second", "third")]
    a = assemble(sections, 20, CharCounter())
    assert [r.name for r in a.included] == ["first", "second"]
    assert [r.name for r in a.dropped] == ["third"]


def test_truncates_on_word_boundary_with_marker() -> None:
    body = "Retrieved docs: The refund policy allows returns within 30 days. " * 4
    sections = [
        Section("system", "You are helpful.", priority=100, pinned=True),
        Section("docs", body, priority=50, truncatable=True),
        Section("chat", "y" * 200, priority=10),
    ]
    a = assemble(sections, 40, CharCounter())
    docs = a.report("docs")
    assert docs.status is SectionStatus.TRUNCATED
    assert docs.content.endswith(" […]") and docs.tokens <= 40 - 4
    assert a.report("chat").status is SectionStatus.DROPPED
    assert "not truncatable" in a.report("chat").reason
    assert a.tokens <= 40


def test_pinned_overflow_error_is_structured() -> None:
    sections = [
        Section("a", "x" * 400, pinned=True),
        Section("b", "y" * 400, pinned=True),
        Section("c", "z"),
    ]
    with pytest.raises(PinnedOverflowError) as info:
        assemble(sections, 150, CharCounter())
    err = info.value
    assert (err.budget, err.pinned_tokens, err.sections) == (150, 200, ("a", "b"))
    assert "200 tokens" in str(err) and "150" in str(err)


@pytest.mark.parametrize("bad", [0, -5])
def test_budget_must_be_positive(bad: int) -> None:
    with pytest.raises(BudgetError):
        assemble([Section("a", "x")], bad)
    with pytest.raises(BudgetError):
        Budget(100, reserve=100)


def test_reserve_is_kept_free() -> None:
    a = assemble(
        [Section("a", "x" * 400, truncatable=False)], Budget(120, reserve=30), CharCounter()
    )
    assert a.report("a").status is SectionStatus.DROPPED
    assert a.free == 90


def test_duplicate_names_and_bad_sections() -> None:
    with pytest.raises(UsageError, match="duplicate"):
        assemble([Section("a", "x"), Section("a", "y")], 10)
    with pytest.raises(UsageError):
        Section("", "x")
    with pytest.raises(UsageError):
        Section("a", "x", priority=float("nan"))


def test_order_for_recall_puts_the_best_at_the_edges() -> None:
    sections = [Section(f"p{p}", "", priority=p) for p in (3, 9, 1, 7, 5, 8)]
    ordered = [s.name for s in order_for_recall(sections)]
    assert ordered == ["p9", "p7", "p3", "p1", "p5", "p8"]
    assert {ordered[0], ordered[-1]} == {"p9", "p8"}
    assert ordered[len(ordered) // 2 - 1 : len(ordered) // 2 + 1] == ["p3", "p1"]


@given(st.lists(st.integers(min_value=0, max_value=20), min_size=2, max_size=15))
def test_order_for_recall_property(priorities: list[int]) -> None:
    sections = [Section(f"s{i}", "", priority=p) for i, p in enumerate(priorities)]
    ordered = order_for_recall(sections)
    assert sorted(s.name for s in ordered) == sorted(s.name for s in sections)
    top_two = sorted(priorities, reverse=True)[:2]
    assert sorted([ordered[0].priority, ordered[-1].priority], reverse=True) == top_two
    # priorities fall from both edges towards the middle
    mid = (len(ordered) + 1) // 2
    front = [s.priority for s in ordered[:mid]]
    back = [s.priority for s in ordered[mid:]][::-1]
    assert front == sorted(front, reverse=True) and back == sorted(back, reverse=True)


def test_assemble_recall_order_keeps_stable_prefix_first() -> None:
    sections = [
        Section("low", "a", priority=1),
        Section("tools", "t", priority=5, stable=True),
        Section("high", "b", priority=9),
        Section("mid", "c", priority=5),
        Section("system", "s", priority=10, stable=True, pinned=True),
    ]
    a = assemble(sections, 100, order="recall")
    assert [s.name for s in a.sections] == ["tools", "system", "high", "low", "mid"]
    with pytest.raises(UsageError):
        assemble(sections, 100, order="random")  # type: ignore[arg-type]


class TestRender:
    sections = (
        Section("system", "You are a support agent.", priority=100, pinned=True, stable=True),
        Section("policy", "Refunds within 30 days.", priority=90, stable=True),
        Section("memory", "User is on the Pro plan.", priority=50),
        Section("history", "user: hi\nassistant: hello", priority=20, truncatable=True),
    )

    def test_anthropic_request_has_breakpoint_after_last_stable(self) -> None:
        a = assemble(list(self.sections), 1000)
        body = anthropic.render_request(
            a, "Can I return my order?", model="claude-sonnet-5-5", cache_ttl="1h"
        )
        system = body["system"]
        assert [b["text"] for b in system] == [
            "You are a support agent.",
            "Refunds within 30 days.",
        ]
        assert "cache_control" not in system[0]
        assert system[1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
        content = body["messages"][0]["content"]
        assert [b["text"] for b in content] == [
            "User is on the Pro plan.",
            "user: hi\nassistant: hello",
            "Can I return my order?",
        ]
        # the rendered body is a valid request for the codec too
        t = anthropic.decode_request(body)
        assert t.messages[-1].content[-1].text == "Can I return my order?"  # type: ignore[union-attr]

    def test_no_stable_sections_means_no_system(self) -> None:
        a = assemble([Section("memory", "m")], 100)
        body = anthropic.render_request(a, "task", model="m")
        assert "system" not in body

    def test_openai_messages(self) -> None:
        a = assemble(list(self.sections), 1000)
        body = openai.render_request(a, "Can I return my order?", model="gpt-4o")
        assert body["messages"][0] == {
            "role": "system",
            "content": "You are a support agent.\n\nRefunds within 30 days.",
        }
        assert body["messages"][1]["content"].endswith("Can I return my order?")

    def test_empty_task_is_refused(self) -> None:
        a = assemble(list(self.sections), 1000)
        with pytest.raises(UsageError):
            anthropic.render_request(a, "  ", model="m")


@pytest.mark.parametrize(
    "make",
    [
        lambda: Budget(10, reserve="5"),  # type: ignore[arg-type]
        lambda: Budget(10, reserve=2.5),  # type: ignore[arg-type]
        lambda: Budget(True),
        lambda: Section("a", "x", priority=10**400),
        lambda: Section("a", "x", priority=float("inf")),
        lambda: CharCounter("0.1"),  # type: ignore[arg-type]
    ],
)
def test_bad_values_raise_library_errors(make) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError):
        make()


def test_empty_stable_sections_get_no_system_block() -> None:
    a = assemble([Section("s", "real", stable=True), Section("blank", "  ", stable=True)], 100)
    body = anthropic.render_request(a, "task", model="m")
    assert [b["text"] for b in body["system"]] == ["real"]
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
