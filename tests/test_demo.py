from __future__ import annotations

import pytest

from ctxwise import BudgetError, PinnedOverflowError, SectionStatus, WordCounter
from ctxwise._demo import demo_transcript, run_demo


def test_demo_session_is_a_well_formed_transcript() -> None:
    t = demo_transcript()
    assert t.problems("anthropic") == []
    assert len(t.tool_names()) == 6


def test_every_turn_fits_and_keeps_what_must_stay() -> None:
    steps = run_demo(700)
    assert [s.turn for s in steps] == [1, 2, 3, 4, 5]
    for s in steps:
        a = s.assembly
        assert a.tokens + a.budget.reserve <= 700
        assert a.report("system").status is SectionStatus.INCLUDED
        assert a.report("rules").status is SectionStatus.INCLUDED
        # the stable prefix opens the window and is cached in the rendered request
        assert a.sections[0].name == "system"
        assert s.request["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert s.request["messages"][0]["content"][-1]["text"] == s.task
    # the session outgrows the budget: later turns cut or drop the oldest history
    last = steps[-1].assembly
    assert last.report("turn 4").status is SectionStatus.INCLUDED
    assert last.report("turn 1").status is not SectionStatus.INCLUDED
    assert steps[-1].kitchen_sink_tokens > 700


def test_demo_with_other_counters_and_budgets() -> None:
    assert run_demo(5000, WordCounter())[-1].assembly.dropped == ()
    with pytest.raises(PinnedOverflowError):
        run_demo(60)
    with pytest.raises(BudgetError):
        run_demo(0)
