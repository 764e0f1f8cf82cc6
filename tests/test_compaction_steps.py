"""The named steps of ``compact()`` (ctxwise.compaction._steps), each alone on a
hand-built transcript: read the window, settle, keep, plan the cut, budget the
summary, summarize, fit; and ``compact()`` as exactly their sequence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from ctxwise import (
    CharCounter,
    EmptyTranscriptError,
    InMemoryStore,
    Message,
    PairingError,
    SummarizerError,
    Transcript,
    WordCounter,
    compact,
    safe_cut_points,
)
from ctxwise.compaction import PINNED_HEADER, CompactionBudgetError, CompactionSettings
from ctxwise.compaction._steps import (
    FIT_ROUNDS,
    MIN_EMPTY_CHECK,
    BareCut,
    Fitted,
    Kept,
    Skip,
    SummaryPlan,
    Window,
    budget_summary,
    compacted,
    fit,
    keep,
    no_change,
    plan_cut,
    read_window,
    safe_cuts,
    settled,
    summarize,
)
from ctxwise.compaction.archive import archive
from ctxwise.compaction.cuts import user_messages
from ctxwise.compaction.result import media_note
from ctxwise.compaction.summary import summarizer_call
from ctxwise.summarize import ExtractiveSummarizer
from tests.test_compaction import RULE, Recording, support, user

CTR = CharCounter()


def window(t: Transcript | None = None, budget: int | None = 150, **kw: object) -> Window:
    cfg = CompactionSettings().with_overrides(kw)  # type: ignore[arg-type]
    return read_window(t if t is not None else support(), cfg, CTR, budget)


def kept_of(w: Window, **kw: object) -> tuple[Kept, CompactionSettings]:
    cfg = CompactionSettings().with_overrides(kw)  # type: ignore[arg-type]
    return keep(w, cfg, user_messages(w.messages, w.start), None, None), cfg


def planned(budget: int = 150, *, blank: bool = True) -> tuple[Kept, SummaryPlan]:
    w = window(budget=budget)
    kept, cfg = kept_of(w)
    cut = plan_cut(kept, cfg, safe_cuts(w))
    assert isinstance(cut, int)
    plan = budget_summary(kept, cfg, cut, blank_kept=blank)
    assert isinstance(plan, SummaryPlan)
    return kept, plan


# ---- read the window


def test_read_window_counts_every_message_once() -> None:
    t = support()
    w = window(t)
    assert (w.head, w.start, w.n) == (1, 1, len(t.messages))
    assert w.tokens_before == CTR.count_messages(t.messages)
    assert len(w.sizes) == w.n and len(w.suffix) == w.n + 1
    assert w.suffix[0] == sum(w.sizes) and w.suffix[w.n] == 0
    assert all(w.suffix[i] == w.suffix[i + 1] + w.sizes[i] for i in range(w.n))
    assert w.sizes[3] == w.tokens_of((t.messages[3],))
    assert w.repaired == () and w.work is t


def test_read_window_repairs_or_refuses_pairing_problems() -> None:
    t = support()
    broken = Transcript((*t.messages[:2], *t.messages[3:]), t.params, format=t.format)
    with pytest.raises(PairingError):
        window(broken)
    w = window(broken, repair=True)
    assert len(w.repaired) == 1 and "toolu_1" in w.repaired[0]
    assert not w.work.problems()


def test_read_window_refuses_a_transcript_of_only_system_messages() -> None:
    t = Transcript((Message.text_message("system", "s"),))
    with pytest.raises(EmptyTranscriptError, match="only system"):
        window(t)


# ---- settled, safe cuts


def test_settled_when_the_window_fits_or_the_tail_bound_keeps_it_whole() -> None:
    w = window(budget=100_000)
    done = settled(w, CompactionSettings(), user_messages(w.messages, w.start))
    assert isinstance(done, Skip) and "already fits the budget" in done.reason
    assert settled(window(budget=150), CompactionSettings(), [1, 5]) is None
    free = window(budget=None)
    turns = settled(free, CompactionSettings(keep_tail_turns=9), [1, 5, 6, 10, 14])
    assert isinstance(turns, Skip) and "keep_tail_turns=9" in turns.reason


def test_safe_cuts_are_the_safe_cut_points_after_the_start() -> None:
    t = support()
    w = window(t)
    assert safe_cuts(w) == [c for c in safe_cut_points(t) if c > w.start]


def test_a_budget_may_cut_right_after_a_previous_summary() -> None:
    first = compact(support(), budget=150)
    t = first.transcript
    assert first.summary
    w = window(t, budget=100)
    assert w.start == w.head + 1
    assert safe_cuts(w)[0] == w.start
    assert w.start not in safe_cuts(window(t, budget=None))


# ---- keep


def test_keep_pins_the_rule_and_finds_the_task() -> None:
    w = window()
    kept, _ = kept_of(w)
    assert [r.text for r in kept.state.rules] == [RULE]
    assert any(PINNED_HEADER in str(m.content) for m in kept.system)
    assert kept.system_tokens > kept.bare_tokens
    assert kept.latest == kept.task_at == 14
    assert kept.users == (1, 5, 6, 10, 14)


def test_the_smallest_summary_is_cached_and_counted_in_need() -> None:
    w = window()
    kept, _ = kept_of(w)
    before, after = kept.floor(10), kept.floor(w.n)
    assert kept.floor(12) is before  # the same contents: the task not yet summarized
    assert after[1] > before[1]  # the task summarized: its lines are in the summary
    assert kept.need(10) == w.framing + kept.system_tokens + before[1] + w.suffix[10]
    assert kept.dropped(w.n) == ()


# ---- 1. plan the cut


def test_plan_cut_leaves_the_summary_its_reserve() -> None:
    w = window(budget=150)
    kept, cfg = kept_of(w)
    cut = plan_cut(kept, cfg, safe_cuts(w))
    assert isinstance(cut, int) and cut in safe_cuts(w)
    reserve = min(cfg.summary_tokens, (150 - w.framing - kept.system_tokens) // 4)
    assert kept.need(cut) + reserve <= 150


def test_plan_cut_without_a_budget_keeps_the_last_user_turns() -> None:
    w = window(budget=None)
    kept, cfg = kept_of(w, keep_tail_turns=2)
    assert plan_cut(kept, cfg, safe_cuts(w)) == 10
    kept, cfg = kept_of(w, keep_tail_tokens=1)
    assert plan_cut(kept, cfg, safe_cuts(w)) == w.n  # no tail
    kept, cfg = kept_of(w, keep_tail_turns=5)
    skip = plan_cut(kept, cfg, safe_cuts(w))
    assert isinstance(skip, Skip) and "nothing lies before" in skip.reason


def test_plan_cut_falls_back_to_the_bare_window_then_refuses() -> None:
    w = window(budget=10_000)
    kept, cfg = kept_of(w)
    bare_size = CTR.count_messages((*kept.system, w.messages[14], w.messages[15]))
    # no room for the smallest summary, room for the task as the user wrote it
    w = window(budget=bare_size)
    kept, cfg = kept_of(w)
    bare = plan_cut(kept, cfg, safe_cuts(w))
    assert isinstance(bare, BareCut) and bare.task == (w.messages[14],)
    assert CTR.count_messages(bare.messages) <= bare_size
    w = window(budget=bare_size // 2)
    kept, cfg = kept_of(w)
    with pytest.raises(CompactionBudgetError) as info:
        plan_cut(kept, cfg, safe_cuts(w))
    assert info.value.parts["pinned"] == kept.system_tokens - kept.bare_tokens


# ---- 2. budget the summary


def test_budget_summary_splits_the_summary_budget() -> None:
    kept, plan = planned()
    w = kept.window
    assert plan.limit == 150
    content = max(0, min(CompactionSettings().summary_tokens, 150 - kept.need(plan.cut)))
    assert 0 <= plan.summarizer_budget <= content
    assert plan.turns == tuple(
        Message(m.role, (), m.kind, m.plain, m.id, m.timestamp)
        if w.start + k in set(plan.kept_users)
        else m
        for k, m in enumerate(w.messages[w.start : plan.cut])
    )
    _, unblanked = planned(blank=False)
    assert unblanked.turns == tuple(w.messages[w.start : plan.cut])


def test_budget_summary_without_a_budget_refuses_a_window_that_would_not_shrink() -> None:
    t = Transcript(
        (user("a"), Message.text_message("assistant", "b"), user("a much longer question?"))
    )
    w = window(t, budget=None)
    kept, cfg = kept_of(w, keep_tail_turns=1)
    skip = budget_summary(kept, cfg, 2, blank_kept=True)
    assert isinstance(skip, Skip) and "would not shrink" in skip.reason


# ---- 4. summarize


def test_summarize_calls_the_summarizer_once_with_the_plan() -> None:
    kept, plan = planned(blank=False)
    rec = Recording(f"The customer asked.\n{RULE}")
    body = summarize(
        summarizer_call(rec, None), kept, plan, name="R", extractive=False, archive_id=None
    )
    assert len(rec.calls) == 1
    previous, turns, budget = rec.calls[0]
    assert (previous, tuple(turns), budget) == ("", plan.turns, plan.summarizer_budget)
    assert body == "The customer asked."  # the pinned rule is not repeated


def test_summarize_skips_a_plan_with_no_room() -> None:
    kept, plan = planned()
    rec = Recording()
    none = replace(plan, summarizer_budget=0)
    run = summarizer_call(rec, None)
    assert summarize(run, kept, none, name="R", extractive=False, archive_id=None) == ""
    assert rec.calls == []


@pytest.mark.parametrize(
    ("answer", "match"), [(RuntimeError("down"), "down"), (7, "not text"), ("  ", "empty")]
)
def test_summarize_names_the_archive_when_the_summarizer_fails(answer: object, match: str) -> None:
    kept, plan = planned(budget=220, blank=False)
    assert plan.summarizer_budget >= MIN_EMPTY_CHECK

    def run(previous: str, turns: Sequence[Message], budget: int, first: int) -> str:
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]

    with pytest.raises(SummarizerError, match=match) as info:
        summarize(run, kept, plan, name="R", extractive=False, archive_id="a1")
    assert info.value.archive_id == "a1"
    assert info.value.archived_messages == len(kept.window.source.messages)
    # an extractive summarizer's empty answer is a finding, not a failure
    assert summarize(lambda *a: "", kept, plan, name="E", extractive=True, archive_id=None) == ""


# ---- 5. fit


def test_fit_cuts_an_over_long_body_back_within_the_limit() -> None:
    kept, plan = planned()
    fitted = fit(kept, plan, "word " * 5_000, "")
    assert isinstance(fitted, Fitted)
    assert fitted.tokens == CTR.count_messages(fitted.messages) <= plan.limit
    assert fitted.messages == (*kept.system, fitted.summary, *kept.window.messages[plan.cut :])
    assert FIT_ROUNDS >= 1


def test_fit_refuses_when_not_even_the_smallest_summary_fits() -> None:
    kept, plan = planned()
    tight = replace(plan, limit=1)
    kept = replace(kept, window=replace(kept.window, budget=1))
    with pytest.raises(CompactionBudgetError) as info:
        fit(kept, tight, "", "")
    assert info.value.parts["tail"] == kept.window.suffix[plan.cut]


# ---- the sequence


def test_compact_is_the_sequence_of_its_steps() -> None:
    t = support()
    store = InMemoryStore()
    rec = Recording()
    cfg = CompactionSettings()
    w = read_window(t, cfg, WordCounter(), 120)
    users = user_messages(w.messages, w.start)
    assert settled(w, cfg, users) is None
    kept = keep(w, cfg, users, None, None)
    cut = plan_cut(kept, cfg, safe_cuts(w))
    assert isinstance(cut, int)
    plan = budget_summary(kept, cfg, cut, blank_kept=False)
    assert isinstance(plan, SummaryPlan)
    archive_id = archive(store, tuple(cfg.namespace), t)
    body = summarize(
        summarizer_call(rec, None), kept, plan, name="R", extractive=False, archive_id=archive_id
    )
    fitted = fit(kept, plan, body, media_note(kept.dropped(cut), archive_id))
    assert isinstance(fitted, Fitted)
    by_steps = compacted(kept, plan, fitted, kept.dropped(cut), archive_id)

    again = Recording()
    result = compact(t, again, budget=120, counter=WordCounter(), store=InMemoryStore())
    assert result == by_steps
    assert len(again.calls) == len(rec.calls) == 1
    assert no_change(w, "x").transcript is w.work


def test_an_extractive_compaction_equals_its_steps_too() -> None:
    t = support()
    cfg = CompactionSettings()
    w = read_window(t, cfg, CTR, 150)
    kept = keep(w, cfg, user_messages(w.messages, w.start), None, None)
    cut = plan_cut(kept, cfg, safe_cuts(w))
    assert isinstance(cut, int)
    plan = budget_summary(kept, cfg, cut, blank_kept=True)
    assert isinstance(plan, SummaryPlan)
    run = summarizer_call(ExtractiveSummarizer(CTR), None)
    body = summarize(run, kept, plan, name="E", extractive=True, archive_id=None)
    fitted = fit(kept, plan, body, media_note(kept.dropped(cut), None))
    assert isinstance(fitted, Fitted)
    assert compact(t, budget=150) == compacted(kept, plan, fitted, kept.dropped(cut), None)
