"""Compaction: cuts anywhere a tool pair stays whole, a total budget, the user's
words verbatim, pinned facts and rules, archive first, bad input, the auto policy
and its thrash protection, and every real transcript."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise import (
    AutoCompactor,
    CaseFacts,
    CharCounter,
    Compaction,
    CompactionArchiveError,
    CompactionThrashError,
    EmptyTranscriptError,
    InMemoryStore,
    MediaBlock,
    Message,
    PairingError,
    Rules,
    SQLiteStore,
    SummarizerError,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    UsageError,
    compact,
    read_transcript,
    read_transcripts,
    safe_cut_points,
)
from ctxwise.compaction import (
    PINNED_HEADER,
    SUMMARY_HEADER,
    CompactionBudgetError,
    CompactionSettings,
    PinnedState,
)
from ctxwise.compaction.cuts import is_real_user
from ctxwise.compaction.pinned import is_pinned
from ctxwise.formats import anthropic, openai
from ctxwise.memory import Fact, FactExtractor, NewItem, Rule, StoreError
from ctxwise.messages import ContentBlock, Placement
from ctxwise.summarize import DEFAULT_INSTRUCTIONS, ExtractiveSummarizer, LLMSummarizer
from tests._http import mock_client, response
from tests.conftest import TAU, claude_code_files, long_sessions

# --------------------------------------------------------------------------- helpers

RULE = "Do not refund order 4417 until the address check is done."
SUPPORT = FactExtractor.preset("support")


def user(text: str) -> Message:
    return Message.text_message("user", text)


def assistant(text: str) -> Message:
    return Message.text_message("assistant", text)


def call(i: int, name: str = "lookup_order", **args: Any) -> Message:
    return Message("assistant", (ToolUseBlock(f"toolu_{i}", name, args or {"order_id": "4417"}),))


def result(i: int, text: str) -> Message:
    return Message("user", (ToolResultBlock(f"toolu_{i}", text),))


def support(fmt: str | None = "anthropic") -> Transcript:
    """A support conversation: order 4417, a standing rule at message 6, tool calls."""
    msgs = [
        Message.text_message("system", "You are the Northwind support agent."),
        user("Hi, my order number is W2378156 and it arrived damaged."),  # 1
        call(1, order_id="W2378156"),  # 2
        result(1, '{"order_id": "W2378156", "status": "delivered", "total": 249.0}'),  # 3
        assistant("I see order W2378156 was delivered on May 2. Sorry about that."),  # 4
        user("Also check order 4417 please, it is late."),  # 5
        user(RULE),  # 6 (a supervisor)
        call(2),  # 7
        result(2, '{"order_id": "4417", "status": "pending"}'),  # 8
        assistant("Order 4417 is pending; I will not refund it yet."),  # 9
        user("What is the tracking number for 4417?"),  # 10
        call(3, "track"),  # 11
        result(3, "tracking number 1Z999AA10123456784"),  # 12
        assistant("It is 1Z999AA10123456784."),  # 13
        user("Thanks. Can you run the address check now?"),  # 14
        assistant("Running it."),  # 15
    ]
    return Transcript(tuple(msgs), {"model": "claude-sonnet-4-5", "max_tokens": 512}, format=fmt)


class Recording:
    """A summarizer that records what it was given and answers with fixed text."""

    def __init__(self, answer: Any = "The customer reported order W2378156 damaged.") -> None:
        self.answer = answer
        self.calls: list[tuple[str, list[Message], int]] = []

    def summarize(self, previous: str, turns: Sequence[Message], budget: int) -> str:
        self.calls.append((previous, list(turns), budget))
        return self.answer  # type: ignore[no-any-return]


class Raising:
    def summarize(self, previous: str, turns: Sequence[Message], budget: int) -> str:
        raise RuntimeError("model overloaded")


def system_text(t: Transcript) -> str:
    return "\n".join(
        b.text
        for m in t.messages
        if m.role == "system"
        for b in m.content
        if isinstance(b, TextBlock)
    )


def summary_message(t: Transcript) -> Message:
    msgs = [m for m in t.messages if m.kind == "compact_summary"]
    assert len(msgs) == 1
    return msgs[0]


def placement(t: Transcript) -> Placement:
    return "openai" if t.format == "openai" else "anthropic"


def _clean(block: ContentBlock) -> ContentBlock:
    if isinstance(block, TextBlock | ToolUseBlock | ToolResultBlock):
        return replace(
            block, extra={k: v for k, v in block.extra.items() if not k.startswith("ctxwise.")}
        )
    return block


def _view(t: Transcript, ns: str) -> list[Message]:
    """What a codec can carry: no kind, ids, timestamps or other codecs' extras."""
    return [
        replace(
            m,
            kind="message",
            id=None,
            timestamp=None,
            content=tuple(_clean(b) for b in m.content),
            extra={k: v for k, v in m.extra.items() if k.startswith(ns + ".")},
        )
        for m in t.messages
    ]


def assert_valid_and_round_trips(t: Transcript) -> None:
    """Zero pairing problems under both placements that apply, and an exact trip
    through the transcript's own codec (and Anthropic's for every format)."""
    rule = placement(t)
    assert t.problems(rule) == [], t.problems(rule)[:3]
    assert t.problems("loose") == []
    if rule == "openai":
        wire_o = json.loads(json.dumps(openai.encode_messages(t)))
        back_o = openai.decode_messages(wire_o)
        assert openai.encode_messages(back_o) == wire_o
        assert back_o.messages == tuple(_view(t, "openai"))
        assert back_o.problems("openai") == []
        return
    wire = json.loads(json.dumps(anthropic.encode_request(t)))
    back = anthropic.decode_request(wire)
    assert anthropic.encode_request(back) == wire
    assert back.messages == tuple(_view(t, "anthropic"))
    assert back.problems("anthropic") == []


def last_user_index(t: Transcript) -> int:
    return max(i for i, m in enumerate(t.messages) if is_real_user(m))


def user_kept_verbatim(before: Transcript, r: Compaction, index: int) -> bool:
    """Message ``index`` of ``before`` is in the result verbatim: in the tail as it
    was, or in the summary as one excerpt line per line of its text."""
    msg = before.messages[index]
    if index >= r.cut_index:
        return msg in r.transcript.messages
    if msg in r.transcript.messages:  # the bare window: the task as it was written
        return True
    summary = summary_message(r.transcript).text.splitlines()
    lines = [ln for b in msg.content if isinstance(b, TextBlock) for ln in b.text.splitlines()]
    return all(f"[m{index} user] {ln}" in summary for ln in lines if ln.strip())


# --------------------------------------------------------------------------- cut points


def test_cuts_fall_anywhere_a_tool_pair_stays_whole() -> None:
    t = support()
    cuts = safe_cut_points(t)
    # 3, 8 and 12 would separate a result from its call; 1 would summarize nothing;
    # 16 (after the last message) leaves no tail
    assert cuts == (2, 4, 5, 6, 7, 9, 10, 11, 13, 14, 15, 16)
    for c in cuts[:-1]:
        assert not t.messages[c].tool_results


def test_a_user_note_inside_an_open_tool_call_is_not_a_cut() -> None:
    msgs = (
        user("start"),
        Message("assistant", (ToolUseBlock("a", "Read", {}), ToolUseBlock("b", "Read", {}))),
        Message("user", (ToolResultBlock("a", "x"),)),
        user("[Request interrupted by user]"),  # between a call and its result (loose)
        Message("user", (ToolResultBlock("b", "y"),)),
        user("next"),
    )
    assert safe_cut_points(Transcript(msgs)) == (1, 5, 6)


def test_cut_points_start_after_a_previous_summary() -> None:
    t = compact(support(), Recording(), keep_tail_turns=2).transcript
    cuts = safe_cut_points(t)
    s = sum(1 for m in t.messages if m.role == "system")
    assert t.messages[s].kind == "compact_summary"
    assert all(c > s + 1 for c in cuts)


def thinking_loop(
    steps: int, interleaved: frozenset[int] = frozenset(), blank: bool = False
) -> Transcript:
    """A tool loop still running (it ends with a result) whose turn opened with
    thinking; the steps in ``interleaved`` open with thinking of their own; ``blank``
    puts a ``"\\n\\n"`` text block before each thinking block, as Claude Code records."""

    def step(i: int, think: bool) -> Message:
        lead: tuple[ContentBlock, ...] = (
            (ThinkingBlock(f"Step {i}: read file {i} next.", f"sig{i}"),) if think else ()
        )
        if think and blank:
            lead = (TextBlock("\n\n"), *lead)
        return Message("assistant", (*lead, ToolUseBlock(f"t{i}", "Read", {"path": f"f{i}.py"})))

    msgs = [
        Message.text_message("system", "You are a coding agent."),
        user("An earlier question."),
        assistant("An earlier answer."),
        user("Fix the bug in the parser."),
    ]
    for i in range(steps):
        msgs += [
            step(i, i == 0 or i in interleaved),
            Message("user", (ToolResultBlock(f"t{i}", f"contents of file {i} " * 30),)),
        ]
    return Transcript(tuple(msgs), format="anthropic")


def running_turn_opens_with_thinking(t: Transcript) -> bool:
    """The Anthropic rule with thinking on: while a tool loop runs, its turn (from the
    last user message that is not tool results) opens with a thinking block."""
    ms = t.messages
    if not ms or not ms[-1].tool_results:
        return True
    turn = max(i for i, m in enumerate(ms) if m.role == "user" and not m.tool_results)
    first = next((m for m in ms[turn:] if m.role == "assistant"), None)
    lead = (
        [b for b in first.content if not (isinstance(b, TextBlock) and not b.text.strip())]
        if first
        else []
    )
    return first is None or isinstance(lead[0], ThinkingBlock)


def test_a_cut_never_opens_a_running_thinking_turn_without_its_thinking() -> None:
    """A tail that started at step 5 of a loop whose thinking is at step 0 opened the
    turn with a bare tool_use after the summary: refused with thinking enabled."""
    t = thinking_loop(6)
    assert safe_cut_points(t) == (2, 3, 4, 16)  # before each later step: not safe
    for budget in (300, 600, 900):
        r = compact(t, budget=budget)
        assert r.compacted and r.tokens_after <= budget
        assert running_turn_opens_with_thinking(r.transcript)
    # interleaved thinking: a step that thinks again may open the tail
    t2 = thinking_loop(6, interleaved=frozenset({4}))
    assert safe_cut_points(t2) == (2, 3, 4, 12, 16)
    r = compact(t2, budget=900)
    assert r.cut_index == 12 and running_turn_opens_with_thinking(r.transcript)
    # a finished turn constrains nothing: the next user message opens a new one
    done = replace(t, messages=(*t.messages, assistant("Fixed.")))
    assert 14 in safe_cut_points(done)
    # Claude Code records a blank text block before the thinking: still the opening
    assert safe_cut_points(thinking_loop(6, interleaved=frozenset({4}), blank=True)) == (
        2,
        3,
        4,
        12,
        16,
    )


@settings(max_examples=60, deadline=None)
@given(
    steps=st.integers(1, 8),
    interleaved=st.frozensets(st.integers(1, 7)),
    share=st.floats(0.05, 1.0),
    keep=st.none() | st.integers(1, 600),
    blank=st.booleans(),
)
def test_property_a_compacted_running_turn_opens_with_its_thinking(
    steps: int, interleaved: frozenset[int], share: float, keep: int | None, blank: bool
) -> None:
    t = thinking_loop(steps, interleaved, blank)
    budget = max(1, int(CharCounter().count_messages(t.messages) * share))
    try:
        r = compact(t, budget=budget, keep_tail_tokens=keep)
    except CompactionBudgetError:
        return
    assert r.tokens_after <= budget and r.transcript.problems("anthropic") == []
    assert running_turn_opens_with_thinking(r.transcript)


def agent_run(steps: int = 30, size: int = 300) -> Transcript:
    """One user prompt, then a long tool loop: what real agent runs look like."""
    msgs: list[Message] = [
        Message.text_message("system", "You are a coding agent."),
        user("Fix the failing test in src/app/session.py and run the suite."),
    ]
    for i in range(steps):
        msgs.append(call(i, "Read", path=f"src/app/mod_{i}.py"))
        msgs.append(result(i, f"def f_{i}(): return {i}  # line\n" * size))
    msgs.append(assistant("Fixed: mod_3 returned the wrong value; 397 tests pass."))
    return Transcript(tuple(msgs), format="anthropic")


def test_an_agent_run_with_one_user_message_compacts_mid_turn() -> None:
    t = agent_run()
    total = CharCounter().count_messages(t.messages)
    r = compact(t, budget=total // 4)
    assert r.compacted and r.mid_turn and r.tokens_after <= total // 4
    assert r.transcript.messages[2].role == "assistant"  # the tail starts inside the turn
    assert r.user_messages == (1,) and user_kept_verbatim(t, r, 1)
    assert_valid_and_round_trips(r.transcript)
    o = compact(openai.decode_messages(openai.encode_messages(t)), budget=total // 4)
    assert_valid_and_round_trips(o.transcript)


# --------------------------------------------------------------------------- the budget


def test_the_whole_window_fits_the_budget() -> None:
    t = support()
    c = CharCounter()
    total = c.count_messages(t.messages)
    for budget in range(total // 3, total, 17):
        r = compact(t, budget=budget)
        assert r.compacted and r.budget == budget
        assert c.count_messages(r.transcript.messages) == r.tokens_after <= budget
        assert user_kept_verbatim(t, r, 14)
        assert_valid_and_round_trips(r.transcript)


class Framed(CharCounter):
    """A counter with a per-request overhead, as tiktoken's reply priming (3 tokens)."""

    request_overhead = 3


def test_a_per_request_overhead_is_counted_once_in_the_window() -> None:
    """Each part was counted as a request of its own, so the split paid the 3 tokens
    for every tail message, the summary and the system part: a budget that held a
    summary got the bare task instead, and the parts added up to more than the window."""
    msgs = [Message.text_message("system", "You are helpful.")]
    for i in range(30):
        msgs += [user(f"question {i} about the order"), assistant(f"answer {i} " * 5)]
    t = Transcript((*msgs, user("final question please")))
    c = Framed()
    r = compact(t, budget=42, counter=c)
    assert r.summary and r.tokens_after == c.count_messages(r.transcript.messages) == 42
    for budget in range(42, 120, 3):
        r = compact(t, budget=budget, counter=c)
        system = c.count_messages(r.transcript.messages[:1]) - 3
        assert system + r.summary_tokens + r.tail_tokens + 3 == r.tokens_after <= budget
    # nothing to compact: the tail is everything after the system part, counted alike
    r = compact(t, budget=100_000, counter=c)
    assert not r.compacted
    assert c.count_messages(t.messages[:1]) - 3 + r.tail_tokens + 3 == r.tokens_after


def test_keep_tail_tokens_is_the_tails_target_inside_the_budget() -> None:
    t = agent_run()
    c = CharCounter()
    total = c.count_messages(t.messages)
    r = compact(t, budget=total // 2, keep_tail_tokens=total // 8)
    assert (
        r.tail_tokens
        <= total // 8
        < r.tail_tokens + c.count_messages(t.messages[r.cut_index - 2 : r.cut_index])
    )
    assert r.tokens_after <= total // 2
    default = compact(t, budget=total // 2)  # half the room goes to the tail
    assert default.tail_tokens > r.tail_tokens


def test_an_empty_tail_is_allowed_when_only_the_task_fits() -> None:
    t = agent_run(steps=5, size=50)
    c = CharCounter()
    system_and_task = c.count_messages(t.messages[:2])
    r = compact(t, budget=system_and_task + 40)
    assert r.compacted and r.cut_index == len(t.messages) and r.tail_tokens == 0
    assert r.tokens_after <= system_and_task + 40
    assert user_kept_verbatim(t, r, 1)
    assert_valid_and_round_trips(r.transcript)


def test_a_budget_below_the_system_part_and_the_task_names_the_parts() -> None:
    t = support()
    c = CharCounter()
    system = c.count_messages(t.messages[:1])
    with pytest.raises(CompactionBudgetError) as exc:
        compact(t, budget=system - 1, extract=False)
    err = exc.value
    assert err.budget == system - 1 and err.parts["system"] == system
    assert err.parts["latest user message"] == c.count_messages(t.messages[14:15])
    assert err.required > err.budget and err.largest is not None
    assert err.largest.message_index == 14
    assert f"{system - 1:,}" in str(err) and "system" in str(err)
    # a budget that holds the system part and the task, but no framing: the task as it was
    least = c.count_messages((t.messages[0], t.messages[14]))
    bare = compact(t, budget=least, extract=False)
    assert bare.compacted and bare.summary == ""
    assert bare.transcript.messages[1:] == (t.messages[14],)
    # one token less: the error names that least, not the summary's framing on top
    with pytest.raises(CompactionBudgetError) as exc:
        compact(t, budget=least - 1, extract=False)
    assert exc.value.required == least and "summary framing" not in exc.value.parts


def test_budget_error_pickles() -> None:
    import pickle

    err = CompactionBudgetError(10, {"system": 8, "latest user message": 5}, source="x.json")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and back.parts == err.parts and back.source == "x.json"


def test_the_user_messages_are_kept_verbatim_newest_first_within_their_share() -> None:
    t = support()
    r = compact(t, Recording(), budget=180, keep_tail_tokens=3)
    assert r.cut_index > 14 and r.user_messages == (10, 14)  # the latest always, then newest
    for i in r.user_messages:
        assert user_kept_verbatim(t, r, i)
    # room for all: every user message, except the rule (it is pinned, not repeated)
    wide = compact(t, Recording(), keep_tail_tokens=3)
    assert wide.user_messages == (1, 5, 10, 14) and RULE in system_text(wide.transcript)
    # none at all with user_share=0, except the latest
    r0 = compact(t, Recording(), keep_tail_tokens=3, user_share=0.0)
    assert r0.user_messages == (14,)
    assert "[m1 user]" in wide.summary and "[m1 user]" not in r0.summary


def test_the_summarizer_gets_the_range_and_the_rest_of_the_budget() -> None:
    rec = Recording()
    r = compact(support(), rec, keep_tail_turns=1, summary_tokens=2_000)
    previous, turns, budget = rec.calls[0]
    assert previous == "" and 0 < budget < 2_000  # the user lines took their part
    assert turns == list(support().messages[1:14])
    assert r.user_messages == (1, 5, 10)


def test_the_extractive_summarizer_does_not_quote_the_kept_user_lines_twice() -> None:
    seen: list[Message] = []

    class Seeing(ExtractiveSummarizer):
        def summarize(self, previous: str, turns: Sequence[Message], budget: int, **kw: Any) -> str:
            seen.extend(turns)
            return super().summarize(previous, turns, budget, **kw)

    r = compact(support(), Seeing(), keep_tail_turns=1)
    for k, m in enumerate(seen, start=1):
        assert (m.content == ()) == (k in r.user_messages)
    assert r.summary.count("[m1 user]") == 1


# --------------------------------------------------------------------------- semantics


def test_summary_then_verbatim_tail() -> None:
    t = support()
    r = compact(t, Recording(), keep_tail_turns=2)
    assert isinstance(r, Compaction) and r.compacted
    assert r.cut_index == 10 and r.summarized_messages == 9
    out = r.transcript.messages
    assert out[0].role == "system" and out[0].content[0] == t.messages[0].content[0]
    summary = out[1]
    assert summary.role == "user" and summary.kind == "compact_summary"
    assert summary.text.startswith(SUMMARY_HEADER) and r.summary == summary.text
    assert "The customer reported order W2378156 damaged." in summary.text
    # the tail is the very same message objects
    assert out[2:] == t.messages[10:]
    assert all(a is b for a, b in zip(out[2:], t.messages[10:], strict=True))
    assert r.transcript.params == t.params and r.transcript.format == "anthropic"
    c = CharCounter()
    assert r.tokens_before == c.count_messages(t.messages)
    assert r.tokens_after == c.count_messages(out) < r.tokens_before
    assert r.tail_tokens == c.count_messages(t.messages[10:])
    assert_valid_and_round_trips(r.transcript)


def test_keep_tail_tokens_takes_the_longest_tail_that_fits() -> None:
    t = support()
    c = CharCounter()
    sizes = {cut: c.count_messages(t.messages[cut:]) for cut in safe_cut_points(t)}
    budget = sizes[10]  # fits from 10 on, not from 9
    assert sizes[9] > budget
    r = compact(t, Recording(), keep_tail_tokens=budget)
    assert r.cut_index == 10 and r.tail_tokens <= budget


def test_a_tail_smaller_than_the_last_turn_summarizes_the_latest_user_message_verbatim() -> None:
    t = support()
    r = compact(t, Recording(), keep_tail_tokens=5)
    assert r.cut_index == 16 and r.tail_tokens == 0
    assert 14 in r.user_messages and user_kept_verbatim(t, r, 14)
    assert_valid_and_round_trips(r.transcript)


def test_default_summarizer_is_extractive_and_keeps_specifics() -> None:
    r = compact(support(), keep_tail_turns=1)
    assert "W2378156" in r.summary and "1Z999AA10123456784" in r.summary
    assert r.summary_tokens <= 4_000 + 50


def test_long_summaries_are_cut_to_the_budget() -> None:
    r = compact(support(), Recording("word " * 500), keep_tail_turns=1, summary_tokens=40)
    body = r.summary.splitlines()[-1]
    assert CharCounter().count(body) <= 40 and body.endswith("[…]")


def test_nothing_to_compact_is_a_no_op_with_a_reason() -> None:
    t = support()
    r = compact(t, Recording(), keep_tail_tokens=1_000_000)
    assert not r.compacted and r.transcript is t and r.summary == ""
    assert "already fits" in r.reason and r.tokens_after == r.tokens_before
    r2 = compact(t, Recording(), keep_tail_turns=50)
    assert not r2.compacted and "keeps them all" in r2.reason
    r3 = compact(t, Recording(), budget=r.tokens_before)
    assert not r3.compacted and "already fits the budget" in r3.reason


def test_to_dict_is_json() -> None:
    r = compact(support(), keep_tail_turns=1, extractor=SUPPORT)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["compacted"] is True and d["cut_index"] == 14 and d["budget"] is None
    assert d["tokens_saved"] == d["tokens_before"] - d["tokens_after"] > 0
    assert {f["key"] for f in d["facts"]} >= {"order_id"}
    assert d["rules"][0]["text"] == RULE
    assert d["user_messages"] == [1, 5, 10] and d["mid_turn"] is False


def test_settings_object_and_keywords_agree() -> None:
    s = CompactionSettings(keep_tail_turns=1, summary_tokens=300)
    a = compact(support(), settings=s)
    b = compact(support(), keep_tail_turns=1, summary_tokens=300)
    assert a == b
    c = compact(support(), settings=s, keep_tail_tokens=100)  # one tail option replaces the other
    assert c.tail_tokens <= 100
    with pytest.raises(UsageError, match="unknown compaction setting"):
        compact(support(), keep_tail_turns=1, bogus=1)  # type: ignore[call-arg]


# --------------------------------------------------------------------------- facts and rules


def test_facts_and_rules_go_to_the_system_part_never_the_summary() -> None:
    t = support()
    r = compact(t, keep_tail_turns=1, extractor=SUPPORT)
    system = system_text(r.transcript)
    assert PINNED_HEADER in system
    assert RULE in system
    assert "order_id:" in system and "tracking_number: 1Z999AA10123456784" in system
    summary = summary_message(r.transcript).text
    assert RULE not in summary and PINNED_HEADER not in summary
    assert "Case facts:" not in summary and "Rules:" not in summary
    # every fact the configured extractor finds in the conversation is pinned
    expected = CaseFacts()
    expected.update_from_messages(t.messages, extractor=SUPPORT)
    for f in expected:
        assert f"- {f.key}: {f.value}" in system
    assert [x.text for x in r.rules] == [RULE]


def test_only_what_the_configured_extractor_finds_is_pinned() -> None:
    r = compact(support(), Recording(), keep_tail_turns=1)  # the default: prose, no domain
    assert not any(f.key in ("order_id", "tracking_number", "amount") for f in r.facts)
    assert RULE in system_text(r.transcript)
    dates = FactExtractor(["date"])
    r2 = compact(support(), Recording(), keep_tail_turns=1, extractor=dates)
    assert {f.key for f in r2.facts} <= {"date"}


def test_given_facts_and_rules_win_and_are_pinned() -> None:
    facts = CaseFacts([Fact("order_id", "W9999999", source="crm")])
    rules = Rules(["Always confirm the address before shipping."])
    r = compact(
        support(), Recording(), keep_tail_turns=1, facts=facts, rules=rules, extractor=SUPPORT
    )
    system = system_text(r.transcript)
    assert "- order_id: W9999999 (crm)" in system  # over the extracted 4417
    assert "Always confirm the address before shipping." in system and RULE in system
    # the caller's objects are not modified
    assert len(facts) == 1 and len(rules) == 1


def test_extract_false_pins_only_what_is_given() -> None:
    r = compact(support(), Recording(), keep_tail_turns=1, extract=False, rules=[Rule(RULE)])
    system = system_text(r.transcript)
    assert "Case facts:" not in system and RULE in system
    r2 = compact(support(), Recording(), keep_tail_turns=1, extract=False)
    assert PINNED_HEADER not in system_text(r2.transcript) and r2.facts == () == r2.rules


def test_recompaction_rolls_the_summary_and_keeps_one_pinned_block() -> None:
    t = support()
    first = compact(t, keep_tail_turns=2, extractor=SUPPORT)
    grown = replace(
        first.transcript,
        messages=(
            *first.transcript.messages,
            user("Please also note my email is ana@example.com."),
            assistant("Noted."),
            user("Is the address check done?"),
        ),
    )
    rec = Recording("Address check requested for 4417.")
    second = compact(grown, rec, keep_tail_turns=1, extractor=SUPPORT)
    previous, turns, _ = rec.calls[0]
    old_lines = [ln for ln in first.summary.splitlines()[1:] if ln]  # no blank separator
    # the old summary's excerpts roll into the new one; its user lines stay user lines
    assert previous.splitlines() == [
        ln for ln in old_lines if not ln.startswith("[m") or " user] " not in ln
    ]
    assert all(m.kind == "message" for m in turns)
    for ln in old_lines:
        if " user] " in ln:
            assert ln in second.summary
    system = system_text(second.transcript)
    assert system.count(PINNED_HEADER) == 1
    # facts pinned by the first compaction survive, new ones join, the rule stays
    for f in first.facts:
        assert f"- {f.key}: " in system
    assert "- order_id: 4417" in system and "- email: ana@example.com" in system
    assert RULE in system
    assert sum(1 for m in second.transcript.messages if m.kind == "compact_summary") == 1
    assert_valid_and_round_trips(second.transcript)
    # compacting again with nothing new to summarize keeps the pinned block as it is
    third = compact(second.transcript, Recording(), keep_tail_turns=1)
    assert not third.compacted


def test_pinned_state_travels_as_data_and_reads_back_from_text() -> None:
    facts = CaseFacts(
        [
            Fact("order_id", "W1 (old)", source="message 3", at="2026-01-02T10:00:00Z"),
            Fact("note", "a: b"),
            Fact("amount", "USD 12.00", at="2026-01-02"),
        ]
    )
    r1 = compact(support(), Recording(), keep_tail_turns=2, facts=facts, extract=False)
    block = system_text(r1.transcript)
    pinned = [b for m in r1.transcript.messages for b in m.content if b.extra.get("ctxwise.pinned")]  # type: ignore[union-attr]
    assert len(pinned) == 1
    grown = replace(
        r1.transcript, messages=(*r1.transcript.messages, assistant("ok"), user("next"))
    )
    r2 = compact(grown, Recording(), keep_tail_turns=1, extract=False)
    assert system_text(r2.transcript) == block
    # through a JSON request the data is gone; the rendering reads back the same
    wire = anthropic.decode_request(json.loads(json.dumps(anthropic.encode_request(grown))))
    r3 = compact(wire, Recording(), keep_tail_turns=1, extract=False)
    assert system_text(r3.transcript) == block


def facts_of(c: Compaction) -> list[tuple[str, str, str | None, str | None]]:
    return [(f.key, f.value, f.source, f.at) for f in c.facts]


def test_facts_read_back_from_text_keep_their_value_source_and_time() -> None:
    """From a JSON request's text, ``shipped (partial)`` came back as the value
    ``shipped`` stated by ``partial``, and a time without a source as the source."""
    facts = [
        Fact("status", "shipped (partial)"),
        Fact("amount", "USD 12.00", at="2026-01-02"),
        Fact("order_id", "W1 (old)", source="message 3", at="2026-01-02T10:00:00Z"),
    ]
    r1 = compact(support(), Recording(), keep_tail_turns=2, facts=facts, extract=False)
    grown = replace(
        r1.transcript, messages=(*r1.transcript.messages, assistant("ok"), user("next"))
    )
    wire = anthropic.decode_request(json.loads(json.dumps(anthropic.encode_request(grown))))
    r2 = compact(wire, Recording(), keep_tail_turns=1, extract=False)
    assert facts_of(r2) == facts_of(r1) == [(f.key, f.value, f.source, f.at) for f in facts]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["status", "order_id", "note", "amount"]),
            st.text(alphabet="ab1 (),:-", min_size=1, max_size=14).filter(str.strip),
            st.none() | st.sampled_from(["m3", "user", "message 12"]),
            st.none() | st.sampled_from(["2026-01-02", "10:00"]),
        ),
        max_size=6,
    ),
    st.lists(st.text(alphabet="ab1 (),:-", min_size=1, max_size=14).filter(str.strip)),
)
def test_property_the_pinned_block_reads_back_as_written(
    facts: list[tuple[str, str, str | None, str | None]], rules: list[str]
) -> None:
    state = PinnedState()
    for key, value, source, at in facts:
        state.facts.set(key, value, source=source, at=at)
    state.add_rules(rules)
    back = PinnedState.parse(state.render())
    assert [(f.key, f.value, f.source, f.at) for f in back.facts] == [
        (f.key, " ".join(f.value.split()), f.source, f.at) for f in state.facts
    ]
    assert [r.text for r in back.rules] == [" ".join(r.text.split()) for r in state.rules]


def test_summary_lines_restating_a_rule_are_dropped() -> None:
    rec = Recording(f"user: {RULE}\nuser: Order W2378156 arrived damaged.")
    r = compact(support(), rec, keep_tail_turns=1)
    assert "user: Order W2378156 arrived damaged." in r.summary
    assert RULE not in r.summary  # neither the summarizer's line nor the user's (pinned)
    only = compact(support(), Recording(f"user: {RULE}"), keep_tail_turns=1)
    assert RULE not in only.summary and RULE in system_text(only.transcript)


# --------------------------------------------------------------------------- media


def test_images_and_documents_in_the_summarized_range_are_listed_as_dropped() -> None:
    image = MediaBlock("image", {"type": "base64", "media_type": "image/png", "data": "iVBOR" * 10})
    pdf = MediaBlock("document", {"type": "url", "url": "https://example.com/invoice.pdf"})
    shot = MediaBlock("image", {"type": "file", "file_id": "file_abc"})
    msgs = (
        Message("user", (TextBlock("Here is the damage:"), image)),
        Message("assistant", (ToolUseBlock("t1", "fetch_invoice", {}),)),
        Message("user", (ToolResultBlock("t1", (TextBlock("invoice"), pdf)),)),
        assistant("Got the invoice for order W2378156."),
        Message("user", (TextBlock("And the box:"), shot)),
        assistant("Thanks."),
        user("Refund please."),
    )
    r = compact(Transcript(msgs, format="anthropic"), Recording(), keep_tail_turns=1)
    got = [
        (d.message_index, d.media, d.source_type, d.reference, d.tool_use_id)
        for d in r.dropped_media
    ]
    assert got == [
        (0, "image", "base64", "image/png data, 50 characters", None),
        (2, "document", "url", "https://example.com/invoice.pdf", "t1"),
        (4, "image", "file", "file_abc", None),
    ]
    assert (
        "[Dropped with the summarized messages: 2 images and 1 document"
        in summary_message(r.transcript).text
    )
    assert not any(isinstance(b, MediaBlock) for m in r.transcript.messages for b in m.content)


def test_the_latest_user_messages_media_stays_with_it() -> None:
    shot = MediaBlock("image", {"type": "file", "file_id": "file_abc"})
    msgs = (
        user("Look at order W2378156."),
        assistant("Sure."),
        Message("user", (TextBlock("Here is the box:"), shot)),
        call(1, "inspect"),
        result(1, "damaged " * 200),
        assistant("It is damaged."),
    )
    t = Transcript(msgs, format="anthropic")
    r = compact(t, Recording(), keep_tail_tokens=5)
    assert r.cut_index == 6 and r.dropped_media == ()
    summary = summary_message(r.transcript)
    assert summary.content[-1] == shot and user_kept_verbatim(t, r, 2)
    assert_valid_and_round_trips(r.transcript)


# --------------------------------------------------------------------------- chained compaction


def _task_kept(original: Message, index: int, r: Compaction) -> bool:
    """The task (``original``, message ``index`` before any compaction) is in the
    window: as a user message whose text holds its lines in order (blank lines
    aside), or as one ``[m<index> user]`` excerpt per line in the summary."""
    lines = [ln for ln in original.text.splitlines() if ln.strip()]
    for m in r.transcript.messages:
        if m.role != "user":
            continue
        text = "\n".join(b.text for b in m.content if isinstance(b, TextBlock))
        if m.kind == "message" and [x for x in text.splitlines() if x.strip()] == lines:
            return True
        if m.kind == "compact_summary" and all(
            f"[m{index} user] {ln}" in text.splitlines() for ln in lines
        ):
            return True
    return False


def test_a_summary_quoting_an_older_user_message_keeps_the_task_as_the_task() -> None:
    """The offline summarizer quotes user messages it did not keep whole (``[m1 user]
    …`` after the kept ones). A second compaction took the last such quote for the
    latest user message; the user part now ends at the blank line before the body."""
    t = support()
    quote = "[m1 user] Hi, my order number is W2378156 and it arrived damaged."
    first = compact(t, Recording(quote), keep_tail_tokens=5, user_share=0.0)
    assert first.cut_index == len(t.messages) and first.user_messages == (14,)
    assert quote in first.summary.splitlines()
    second = compact(first.transcript, Recording("rolled"), budget=first.tokens_after - 1)
    assert second.compacted and _task_kept(t.messages[14], 14, second)
    assert_valid_and_round_trips(second.transcript)


def test_the_tasks_media_stay_with_it_through_a_second_compaction() -> None:
    shot = MediaBlock("image", {"type": "file", "file_id": "file_abc"})
    msgs = (
        user("Look at order W2378156."),
        assistant("Sure."),
        Message("user", (TextBlock("Here is the box:"), shot)),
        call(1, "inspect"),
        result(1, "damaged " * 200),
        assistant("It is damaged."),
    )
    t = Transcript(msgs, format="anthropic")
    first = compact(t, Recording("An inspection: damaged. " * 20), keep_tail_tokens=5)
    assert summary_message(first.transcript).content[-1] == shot
    second = compact(first.transcript, Recording("damaged"), budget=first.tokens_after - 1)
    assert second.compacted and second.dropped_media == ()
    assert summary_message(second.transcript).content[-1] == shot
    assert "Dropped with the summarized messages" not in second.summary
    assert_valid_and_round_trips(second.transcript)


def _subagents() -> list[Path]:
    return [p for p in claude_code_files() if p.parent.name == "subagents" or "agent" in p.stem]


@pytest.mark.data
@pytest.mark.parametrize("path", _subagents(), ids=lambda p: p.stem)
def test_compacting_a_compacted_subagent_transcript_holds_at_the_direct_budget(
    path: Path, data_dir: Path
) -> None:
    """The least budget a transcript compacts to directly (what the refusal at one
    token names) holds for it after one compaction too: the earlier summary is the
    summary, and the task it carries is rebuilt as the user wrote it, not as its
    excerpt lines. ``agent-acompact-fffbd0`` (its task: Claude Code's compaction
    prompt) was refused that way, the summary's excerpt lines taken as the latest user
    message and counted with their ``[m2 user]`` origins."""
    t = _claude_code(path)
    with pytest.raises(CompactionBudgetError) as refused:
        compact(t, budget=1)
    least = refused.value.required
    direct = compact(t, budget=least)
    assert direct.compacted and direct.tokens_after <= least
    task = last_user_index(t)
    for first_budget in (2 * least, 3 * least, 4 * least):
        first = compact(t, budget=first_budget)
        if not (first.compacted and first.summary):
            continue  # the window fits, or no summary to read back
        again = compact(first.transcript, budget=least)
        assert again.compacted and again.tokens_after <= least, (first_budget, again.reason)
        assert _task_kept(t.messages[task], task, again), first_budget
        assert_valid_and_round_trips(again.transcript)


@pytest.mark.data
@pytest.mark.parametrize("path", claude_code_files(), ids=lambda p: p.stem)
def test_no_harness_text_is_pinned_as_a_rule_or_fact(path: Path, data_dir: Path) -> None:
    """Claude Code's caveat ("DO NOT respond to these messages …
    </local-command-caveat>", tool_heavy) and its compaction prompt ("Do not start on
    tangential requests …", the agent-acompact files) were pinned as standing rules;
    harness text is read by no rule or fact extractor, so nothing of it is pinned."""
    t = _claude_code(path)
    with pytest.raises(CompactionBudgetError) as refused:
        compact(t, budget=1)
    budget = max(refused.value.required, CharCounter().count_messages(t.messages) // 2)
    for extractor in (None, SUPPORT):
        r = compact(t, budget=budget, extractor=extractor)
        pinned = system_text(r.transcript) + "".join(
            b.text for m in r.transcript.messages for b in m.content if is_pinned(b)
        )
        for text in [*(x.text for x in r.rules), *(f.value for f in r.facts), pinned]:
            assert "DO NOT respond to these messages" not in text
            assert "Do not start on tangential requests" not in text
            assert not re.search(r"</?(?:local-command-caveat|system-reminder|command-\w+)>", text)


# --------------------------------------------------------------------------- archive


class CountingSummarizer:
    """Records how many items the store held when the summarizer ran."""

    def __init__(self, store: SQLiteStore, namespace: tuple[str, ...]) -> None:
        self.store, self.namespace, self.seen = store, namespace, -1

    def summarize(self, previous: str, turns: Sequence[Message], budget: int) -> str:
        self.seen = self.store.count(self.namespace)
        return "Order W2378156 damaged."


def test_full_transcript_is_archived_first_and_searchable(tmp_path: Path) -> None:
    ns = ("acme", "case-17")
    with SQLiteStore(tmp_path / "archive.db") as store:
        t = support()
        s = CountingSummarizer(store, ns)
        r = compact(t, s, keep_tail_turns=1, store=store, namespace=ns)
        assert r.archive_id and r.archive_id.startswith("compaction-")
        assert s.seen == len(t.messages) == store.count(ns)  # all of it, before summarizing
        hits = store.lexical_search(ns, "1Z999AA10123456784 tracking", 3)
        assert hits and hits[0][0].metadata["message_index"] == 12
        meta = hits[0][0].metadata
        assert meta["archive_id"] == r.archive_id and meta["tools"] == ["track"]
        assert meta["tool_use_ids"] == ["toolu_3"] and meta["role"] == "user"
        # the same transcript archives to the same id and items (idempotent)
        again = compact(t, Recording(), keep_tail_turns=1, store=store, namespace=ns)
        assert again.archive_id == r.archive_id and store.count(ns) == len(t.messages)
        # the tail is archived too: the archive holds the whole input
        assert store.get(ns, f"{r.archive_id}:14") is not None


def test_huge_messages_are_archived_in_parts() -> None:
    store = InMemoryStore()
    big = "x" * 1_500_000 + " end"
    t = Transcript((user("start"), assistant(big), assistant("ok"), user("next")))
    r = compact(t, Recording(), keep_tail_turns=1, store=store, namespace=("n",))
    assert r.archive_id
    parts = store.get_many(("n",), [f"{r.archive_id}:1", f"{r.archive_id}:1.1"])
    assert [p.metadata["part"] for p in parts] == [0, 1] and parts[0].metadata["parts"] == 2


class BrokenStore(InMemoryStore):
    def put_many(self, namespace: Sequence[str], items: Sequence[NewItem]) -> list[str]:
        raise StoreError("disk full")


def test_archive_failure_stops_before_the_summarizer() -> None:
    rec = Recording()
    with pytest.raises(CompactionArchiveError) as exc:
        compact(support(), rec, keep_tail_turns=1, store=BrokenStore())
    assert rec.calls == [] and "disk full" in str(exc.value)
    assert exc.value.namespace == ("ctxwise", "compaction-archive")


# --------------------------------------------------------------------------- bad input


def test_summarizer_that_raises_leaves_the_transcript_and_says_why(tmp_path: Path) -> None:
    t = support()
    before = t.messages
    with SQLiteStore(tmp_path / "a.db") as store:
        with pytest.raises(SummarizerError) as exc:
            compact(t, Raising(), keep_tail_turns=1, store=store)
        err = exc.value
        assert err.summarizer == "Raising" and "model overloaded" in err.reason
        assert err.archive_id and err.archived_messages == len(t.messages)
        assert store.count(("ctxwise", "compaction-archive")) == len(t.messages)
        assert "archived first" in str(err) and "unchanged" in str(err)
    assert t.messages is before
    with pytest.raises(SummarizerError, match="nothing was archived"):
        compact(t, Raising(), keep_tail_turns=1)


@pytest.mark.parametrize("answer", ["", "   \n", None, 42])
def test_summarizer_that_returns_nothing_is_an_error(answer: Any) -> None:
    with pytest.raises(SummarizerError) as exc:
        compact(support(), Recording(answer), keep_tail_turns=1)
    assert "empty summary" in exc.value.reason or "not text" in exc.value.reason


def test_empty_transcripts_are_refused() -> None:
    with pytest.raises(EmptyTranscriptError, match="no messages"):
        compact(Transcript(()), keep_tail_turns=1)
    only_system = Transcript((Message.text_message("system", "be nice"),), source="s.json")
    with pytest.raises(EmptyTranscriptError, match=r"s\.json: nothing to compact"):
        compact(only_system, keep_tail_turns=1)


def test_orphans_and_reused_ids_are_refused_then_repaired() -> None:
    msgs = list(support().messages)
    msgs[7] = call(1)  # reuses toolu_1 for the second lookup
    msgs[8] = result(1, '{"order_id": "4417", "status": "pending"}')
    msgs.insert(5, Message("user", (ToolResultBlock("ghost", "stray"),)))  # an orphan
    t = Transcript(tuple(msgs), format="anthropic")
    with pytest.raises(PairingError) as exc:
        compact(t, Recording(), keep_tail_turns=1)
    kinds = {p.kind.value for p in exc.value.problems}
    assert {"orphan_result", "duplicate_id"} <= kinds
    assert "ghost" in str(exc.value)
    r = compact(t, Recording(), keep_tail_turns=1, repair=True)
    assert r.repaired and any("ghost" in x for x in r.repaired)
    assert_valid_and_round_trips(r.transcript)


def test_unanswered_call_is_refused() -> None:
    t = Transcript((*support().messages, call(9)), format="anthropic")
    with pytest.raises(PairingError, match="unanswered_use"):
        compact(t, Recording(), keep_tail_turns=1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"keep_tail_tokens": 10, "keep_tail_turns": 1},
        {"budget": 0},
        {"budget": True},
        {"keep_tail_turns": 1, "user_share": 1.5},
        {"keep_tail_turns": 1, "tail_share": 0},
        {"keep_tail_tokens": 0},
        {"keep_tail_turns": -1},
        {"keep_tail_turns": True},
        {"keep_tail_turns": 1, "summary_tokens": 0},
        {"keep_tail_turns": 1, "instructions": "keep ids"},  # extractive takes none
        {"keep_tail_turns": 1, "instructions": " "},
        {"keep_tail_turns": 1, "store": InMemoryStore(), "namespace": ()},
    ],
)
def test_bad_parameters_are_usage_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        compact(support(), **kwargs)


def test_not_a_transcript() -> None:
    with pytest.raises(UsageError, match="takes a Transcript"):
        compact([user("x")], keep_tail_turns=1)  # type: ignore[arg-type]


def test_a_malformed_message_is_a_usage_error_naming_it() -> None:
    """A tool input that is not JSON data raised a bare TypeError from the count."""
    import datetime

    t = support()
    bad = call(1, order_id=datetime.date(2026, 1, 2))  # type: ignore[arg-type]
    t = replace(t, messages=(*t.messages[:2], bad, *t.messages[3:]))
    with pytest.raises(UsageError, match=r"message 2: content\[0\] is a ToolUseBlock whose input"):
        compact(t, budget=100)


# --------------------------------------------------------------------------- instructions


def test_instructions_extend_an_llm_summarizers_prompt() -> None:
    anthropic_sdk = pytest.importorskip("anthropic")
    from ctxwise.providers import AnthropicChat

    sent: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        sent.append(json.loads(request.content))
        return response(
            "anthropic",
            200,
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-5-5",
                "content": [{"type": "text", "text": "Order W2378156 damaged; 4417 pending."}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 10},
            },
        )

    client = anthropic_sdk.Anthropic(
        api_key="k", max_retries=0, http_client=mock_client("anthropic", handler)
    )
    summarizer = LLMSummarizer(AnthropicChat(client, "claude-sonnet-5-5"))
    r = compact(
        support(), summarizer, keep_tail_turns=1, instructions="Keep every tracking number."
    )
    assert r.summary.endswith("\nOrder W2378156 damaged; 4417 pending.")
    system = sent[0]["system"]
    assert system.startswith(DEFAULT_INSTRUCTIONS.split("{budget}")[0])
    assert system.endswith(
        "Additional instructions for this compaction:\nKeep every tracking number."
    )
    assert summarizer.instructions == DEFAULT_INSTRUCTIONS  # the caller's summarizer unchanged


def test_instructions_go_to_a_summarizer_that_accepts_them() -> None:
    class Instructed:
        got: str | None = None

        def summarize(
            self,
            previous: str,
            turns: Sequence[Message],
            budget: int,
            *,
            instructions: str | None = None,
        ) -> str:
            self.got = instructions
            return "Order W2378156."

    s = Instructed()
    compact(support(), s, keep_tail_turns=1, instructions="Keep ids.")
    assert s.got == "Keep ids."


# --------------------------------------------------------------------------- codecs


def test_openai_pinned_block_is_its_own_system_message_and_round_trips() -> None:
    raw = openai.encode_messages(support("openai"))
    t = openai.decode_messages(raw)
    r = compact(t, Recording(), keep_tail_turns=1)
    wire = openai.encode_messages(r.transcript)
    assert [m["role"] for m in wire[:3]] == ["system", "system", "user"]
    assert wire[0] == raw[0]  # the original system prompt, untouched
    assert wire[1]["content"].startswith(PINNED_HEADER)
    assert wire[2]["content"].startswith(SUMMARY_HEADER)
    assert wire[3:] == raw[-2:]
    assert_valid_and_round_trips(r.transcript)


def test_anthropic_pinned_block_joins_the_system_field() -> None:
    r = compact(support(), Recording(), keep_tail_turns=1)
    body = anthropic.encode_request(r.transcript)
    assert body["model"] == "claude-sonnet-4-5"
    assert body["system"][0] == {"type": "text", "text": "You are the Northwind support agent."}
    assert body["system"][1]["text"].startswith(PINNED_HEADER)
    assert body["messages"][0]["content"].startswith(SUMMARY_HEADER)
    assert_valid_and_round_trips(r.transcript)


def test_no_system_prompt_gets_one_for_the_pinned_block() -> None:
    t = Transcript(support().messages[1:], format="anthropic")
    r = compact(t, Recording(), keep_tail_turns=1)
    body = anthropic.encode_request(r.transcript)
    assert isinstance(body["system"], str) and body["system"].startswith(PINNED_HEADER)
    assert_valid_and_round_trips(r.transcript)


# --------------------------------------------------------------------------- auto policy


def test_auto_compactor_fires_over_the_trigger_only() -> None:
    t = support()
    total = CharCounter().count_messages(t.messages)
    auto = AutoCompactor(Recording(), trigger_tokens=total, keep_tail_turns=1)
    assert auto.maybe_compact(t) is None
    grown = replace(t, messages=(*t.messages, user("One more thing about order 4417.")))
    r = auto.maybe_compact(grown)
    assert r is not None and r.compacted and r.tokens_after <= auto.budget < total
    assert auto.compactions == 1 and auto.last is r
    assert RULE in system_text(r.transcript)


def test_auto_compactor_tracks_facts_incrementally() -> None:
    t = support()
    auto = AutoCompactor(Recording(), trigger_tokens=10_000, keep_tail_turns=1, extractor=SUPPORT)
    msgs = list(t.messages[:2])
    for m in t.messages[2:]:
        msgs.append(m)
        assert auto.maybe_compact(replace(t, messages=tuple(msgs))) is None
    assert auto.tracked_facts.get("tracking_number") is not None
    assert RULE in auto.tracked_rules
    auto.trigger_tokens = CharCounter().count_messages(msgs) - 1  # force the next one
    auto.budget = auto.trigger_tokens - 1
    r = auto.maybe_compact(replace(t, messages=tuple(msgs)))
    assert r is not None
    system = system_text(r.transcript)
    assert "1Z999AA10123456784" in system and RULE in system


def test_auto_compactor_default_budget_and_validation() -> None:
    auto = AutoCompactor()
    assert auto.trigger_tokens == 150_000 and auto.budget == 75_000
    assert auto.settings == CompactionSettings()
    with pytest.raises(UsageError, match="must be below trigger_tokens"):
        AutoCompactor(trigger_tokens=1000, budget=1000)
    with pytest.raises(UsageError):
        AutoCompactor(keep_tail_tokens=10, keep_tail_turns=1)
    with pytest.raises(UsageError):
        AutoCompactor(instructions="keep ids")  # the extractive summarizer takes none
    with pytest.raises(UsageError):
        AutoCompactor(max_attempts=0)


def _turn(i: int, size: int) -> tuple[Message, ...]:
    """A user asks, the agent reads a big file, answers."""
    return (
        user(f"Now look at file {i}."),
        call(100 + i, "Read", path=f"/src/f{i}.py"),
        result(100 + i, f"line of f{i} " * size),
        assistant(f"Read f{i}."),
    )


def test_thrash_protection_names_the_item_that_keeps_refilling() -> None:
    auto = AutoCompactor(
        Recording("Files were read."),
        trigger_tokens=1_000,
        keep_tail_tokens=300,
        summary_tokens=100,
    )
    msgs: tuple[Message, ...] = (user("Review the repo."), assistant("OK."))
    compactions = 0
    with pytest.raises(CompactionThrashError) as exc:
        for i in range(20):
            # each turn reads one file of ~1,100 tokens: the window refills at once
            msgs = (*msgs, *_turn(i, 400), user("next?"))
            r = auto.maybe_compact(Transcript(msgs))
            if r is not None:
                compactions += 1
                msgs = r.transcript.messages
    err = exc.value
    assert compactions == 3 and err.attempts == 3 and err.trigger_tokens == 1_000
    assert err.item is not None
    assert err.item.kind == "tool_result" and err.item.tool_name == "Read"
    assert err.item.tool_use_id == "toolu_103" and err.item.tokens > 1_000
    assert (
        Transcript(msgs).messages[err.item.message_index].tool_results[0].tool_use_id == "toolu_103"
    )
    assert "toolu_103" in str(err) and "Read" in str(err)
    auto.reset()
    assert auto.maybe_compact(Transcript(msgs)) is not None


def test_slow_growth_never_counts_as_thrashing() -> None:
    auto = AutoCompactor(
        Recording("Files were read."),
        trigger_tokens=1_000,
        keep_tail_tokens=300,
        summary_tokens=100,
        refill_messages=6,
    )
    msgs: tuple[Message, ...] = (user("Review the repo."), assistant("OK."))
    done = 0
    for i in range(40):
        msgs = (*msgs, *_turn(i, 60))  # small files: many turns before the next compaction
        r = auto.maybe_compact(Transcript(msgs))
        if r is not None:
            done += 1
            msgs = r.transcript.messages
    assert done >= 4


def test_a_task_larger_than_the_budget_raises_a_budget_error() -> None:
    auto = AutoCompactor(Recording(), trigger_tokens=1_000, budget=500)
    msgs = (user("hi"), assistant("ok"), user("x " * 1_200), *_turn(1, 400)[1:])
    with pytest.raises(CompactionBudgetError) as exc:
        auto.maybe_compact(Transcript(msgs))
    assert exc.value.budget == 500 and exc.value.parts["latest user message"] > 500


# --------------------------------------------------------------------------- real data


@cache
def _claude_code(path: Path) -> Transcript:
    return read_transcript(path).live_window()


@cache
def _tau() -> list[Transcript]:
    return read_transcripts(TAU)


def _check_real(t: Transcript, r: Compaction, budget: int | None, keep: int | None) -> None:
    """Valid under the format's rule, within the budget, the tail verbatim, and the
    latest user message verbatim (in the tail or in the summary)."""
    assert_valid_and_round_trips(r.transcript)
    for rule in ("anthropic", "openai"):  # valid under each rule the source met
        if not t.problems(rule):
            assert r.transcript.problems(rule) == [], rule
    c = CharCounter()
    assert c.count_messages(r.transcript.messages) == r.tokens_after
    if budget is not None:
        assert r.tokens_after <= budget
    if not r.compacted:
        return
    assert r.tokens_after < r.tokens_before  # a compaction never grows the window
    n_tail = len(t.messages) - r.cut_index
    tail = r.transcript.messages[len(r.transcript.messages) - n_tail :] if n_tail else ()
    assert tuple(tail) == t.messages[r.cut_index :]
    if keep is not None and budget is None:
        assert r.tail_tokens <= keep
    users = [i for i, m in enumerate(t.messages) if is_real_user(m)]
    if users:
        assert user_kept_verbatim(t, r, users[-1])


def _compact_or_refused(
    t: Transcript, budget: int | None, keep: int | None, turns: int | None, summary: int
) -> Compaction | None:
    try:
        return compact(
            t,
            budget=budget,
            keep_tail_tokens=keep,
            keep_tail_turns=turns,
            summary_tokens=summary,
            repair=True,  # 49 tau-bench trajectories reuse a tool call id
        )
    except CompactionBudgetError as exc:
        # allowed only when what must stay (system, pinned, the task) alone is over
        assert budget is not None
        must = exc.parts["system"] + exc.parts["pinned"] + exc.parts["latest user message"]
        if "message framing" in exc.parts:  # the bare window: its size is the least
            assert exc.required == sum(exc.parts.values()) > budget
        else:
            assert must + exc.parts["summary framing"] > budget
        return None


@pytest.mark.data
@pytest.mark.parametrize("path", claude_code_files(), ids=lambda p: p.name)
@settings(max_examples=8)
@given(
    share=st.floats(0.02, 1.2),
    keep=st.none() | st.integers(1, 60_000),
    turns=st.none() | st.integers(1, 4),
    summary=st.integers(1, 6_000),
)
def test_property_every_claude_code_file_compacts_valid_within_budget(
    path: Path, data_dir: Path, share: float, keep: int | None, turns: int | None, summary: int
) -> None:
    t = _claude_code(path)
    budget = max(1, int(CharCounter().count_messages(t.messages) * share))
    if keep is not None and turns is not None:
        turns = None
    r = _compact_or_refused(t, budget, keep, turns, summary)
    if r is not None:
        _check_real(t, r, budget, keep)


@pytest.mark.data
@pytest.mark.parametrize("path", claude_code_files(), ids=lambda p: p.name)
@settings(max_examples=4)
@given(keep=st.integers(1, 60_000), summary=st.integers(1, 6_000))
def test_property_every_claude_code_file_compacts_to_a_tail_target(
    path: Path, data_dir: Path, keep: int, summary: int
) -> None:
    t = _claude_code(path)
    r = _compact_or_refused(t, None, keep, None, summary)
    assert r is not None
    _check_real(t, r, None, keep)


@pytest.mark.data
@settings(max_examples=120)
@given(
    index=st.integers(0, 199),
    share=st.floats(0.05, 1.2),
    keep=st.none() | st.integers(1, 5_000),
    turns=st.none() | st.integers(1, 8),
    summary=st.integers(1, 2_000),
)
def test_property_every_tau_bench_trajectory_compacts_valid_within_budget(
    data_dir: Path, index: int, share: float, keep: int | None, turns: int | None, summary: int
) -> None:
    from ctxwise import repair_pairing

    t = repair_pairing(_tau()[index])[0]
    budget = max(1, int(CharCounter().count_messages(t.messages) * share))
    if keep is not None and turns is not None:
        turns = None
    r = _compact_or_refused(t, budget, keep, turns, summary)
    if r is None:
        return
    _check_real(t, r, budget, keep)
    # tau-bench is OpenAI: valid under the OpenAI placement, and under Anthropic's
    assert r.transcript.problems("anthropic") == []
    a = anthropic.decode_request(json.loads(json.dumps(anthropic.encode_request(r.transcript))))
    assert a.problems("anthropic") == []


@pytest.mark.data
def test_every_tau_bench_trajectory_compacts_to_one_turn(data_dir: Path) -> None:
    done = 0
    for t in _tau():
        r = compact(t, keep_tail_turns=1, summary_tokens=400, repair=True)
        assert_valid_and_round_trips(r.transcript)
        assert r.tokens_after < r.tokens_before  # trajectory 138 grew by 34 tokens
        done += r.compacted
    assert done == 200


@pytest.mark.data
@pytest.mark.parametrize("path", long_sessions(), ids=lambda p: p.name)
def test_long_sessions_compact_to_20k_keeping_the_last_user_message(
    path: Path, data_dir: Path
) -> None:
    t = read_transcript(path)
    r = compact(t, budget=20_000)
    live = t.live_window()
    assert r.compacted and r.tokens_before == CharCounter().count_messages(live.messages)
    assert r.tokens_after <= 20_000, r.tokens_after
    last = last_user_index(live)
    assert user_kept_verbatim(live, r, last)
    assert_valid_and_round_trips(r.transcript)


def test_without_a_budget_a_summary_larger_than_its_range_compacts_nothing() -> None:
    """Only the tail is bounded without a budget, but the window must still shrink: a
    summary of "hi" / "hello" is larger than the two messages it would replace."""
    t = Transcript(
        (user("hi"), assistant("hello"), user("a long question " * 20), assistant("ok " * 40))
    )
    before = CharCounter().count_messages(t.messages)
    for r in (compact(t, keep_tail_turns=1), compact(t, keep_tail_tokens=120)):
        assert not r.compacted and r.transcript == t and r.tokens_after == before
        assert "would not shrink the window" in r.reason
    # a summary that would grow the window is cut back until it does not
    r = compact(t, keep_tail_tokens=1)
    assert r.compacted and r.tokens_after < before
    assert user_kept_verbatim(t, r, 2)


def test_an_empty_extractive_summary_is_not_a_failure() -> None:
    """A range with nothing worth a token (a bare tool call) compacts to the header."""
    t = Transcript(
        (
            Message.text_message("user", "Start."),
            Message("assistant", (ToolUseBlock("t0", "lookup", {"k": 0}),)),
            Message("user", (ToolResultBlock("t0", "order refund parcel " * 40),)),
        )
    )
    done = compact(t, budget=150)
    assert done.compacted and done.tokens_after <= 150
