"""The BM25 baseline packed as the filter packs, and packing constants chosen held out."""

from __future__ import annotations

from typing import Any

import pytest

from ctxwise import Message
from ctxwise.errors import BudgetError, UsageError
from ctxwise.handoff.chunks import chunk_transcript
from ctxwise.handoff.evaluation import default_bm25, evaluate_handoff, held_out_handoff
from ctxwise.handoff.scoring import BM25Scorer, HybridScorer
from ctxwise.handoff.select import chunk_costs, select_context, select_scored
from ctxwise.memory.evaluation import turn_messages
from ctxwise.messages import Role, TextBlock
from ctxwise.tokens import CharCounter

C = CharCounter()


def _say(role: Role, text: str, when: str | None = None) -> Message:
    return Message(role, (TextBlock(text),), plain=True, timestamp=when)


def _talk() -> list[Message]:
    return [
        _say("user", "I adopted a beagle named Rex last week", "1 May"),
        _say("assistant", "Lovely! Is it your first dog?"),
        _say("user", "Yes, and he already chewed my sandals", "2 May"),
        _say("assistant", "Puppies do that. " + "Training takes time. " * 30),
        _say("user", "I also started pottery classes by the river"),
        _say("assistant", "What did you make first?"),
        _say("user", "A lopsided mug for my sister"),
    ]


def test_bm25_scores_what_it_is_told_to_index() -> None:
    chunks = chunk_transcript(_talk(), C)
    plain = BM25Scorer().score("beagle", chunks)
    assert plain[0] > 0 and all(s == 0 for s in plain[1:])
    # with the chunk before it, the reply about the dog is found through "beagle" too
    context = BM25Scorer(context=1).score("beagle", chunks)
    assert context[0] > 0 and context[1] > 0 and context[2] == 0
    # the header holds the date, which the chunk's own text does not
    assert BM25Scorer().score("May", chunks)[0] == 0
    assert BM25Scorer(headers=True).score("May", chunks)[0] > 0
    assert BM25Scorer(context=2, headers=True).name == "bm25:context=2:headers"
    assert BM25Scorer().score("beagle", []) == []
    with pytest.raises(UsageError, match="context"):
        BM25Scorer(context=-1)


def test_select_scored_is_select_context_after_scoring() -> None:
    messages = _talk()
    chunks = chunk_transcript(messages, C)
    scorer = HybridScorer()
    for budget in (60, 150, 400):
        for share, power in ((None, None), (0.0, 0.0), (0.2, 1.0)):
            whole = select_context(
                messages,
                "What did the dog chew?",
                budget,
                scorer=scorer,
                recent_share=share,
                size_exponent=power,
            )
            scores = scorer.score("What did the dog chew?", chunks)
            parts = select_scored(
                "What did the dog chew?",
                chunks,
                scores,
                budget,
                counter=C,
                costs=chunk_costs(chunks, C),
                recent_share=share,
                size_exponent=power,
                scorer=scorer.name,
            )
            assert parts == whole


def test_the_size_exponent_decides_whether_a_long_chunk_goes_first() -> None:
    chunks = chunk_transcript(_talk(), C)
    # the long chunk scores a little higher than the short ones it would shut out
    scores = [0.0, 0.0, 0.0, 1.2, 1.0, 1.0, 0.0]
    cost = chunk_costs(chunks, C)
    budget = cost[3] + 5

    def ids(power: float) -> list[str]:
        h = select_scored("task", chunks, scores, budget, size_exponent=power, recent_share=0.0)
        return [c.id for c in h.chunks]

    assert ids(0.0) == [chunks[3].id]  # score alone: the long chunk, nothing else fits
    assert ids(1.0) == [chunks[4].id, chunks[5].id]  # score per token: the short ones
    for bad in (-0.5, float("inf"), float("nan"), True, "1"):
        with pytest.raises(UsageError, match="size_exponent"):
            select_scored("task", chunks, scores, budget, size_exponent=bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="costs"):
        select_scored("task", chunks, scores, budget, costs=cost[:-1])
    with pytest.raises(UsageError, match="scores for"):
        select_scored("task", chunks, scores[:-1], budget)


def _conversation(name: str, pet: str, hobby: str) -> dict[str, Any]:
    return {
        "id": name,
        "turns": [
            {
                "id": "D1:1",
                "speaker": "Ann",
                "text": f"I adopted a {pet} last week",
                "date": "1 May",
            },
            {"id": "D1:2", "speaker": "Bob", "text": "Lovely! What is its name?"},
            {"id": "D1:3", "speaker": "Ann", "text": "Rex, after my grandfather"},
            {"id": "D1:4", "speaker": "Bob", "text": "A fine name. " + "Dogs are great. " * 20},
            {"id": "D2:1", "speaker": "Bob", "text": f"I started {hobby} classes", "date": "9 May"},
            {"id": "D2:2", "speaker": "Ann", "text": "Which studio?"},
            {"id": "D2:3", "speaker": "Bob", "text": "The one by the river"},
            {"id": "D2:4", "speaker": "Ann", "text": "Lunch is at noon"},
        ],
        "questions": [
            {"question": f"What is the name of Ann's {pet}?", "evidence": ["D1:3"]},
            {"question": f"Where are Bob's {hobby} classes?", "evidence": ["D2:1", "D2:3"]},
            {"question": "When did Ann adopt it?", "evidence": ["D1:1"]},
            {"question": "No evidence", "evidence": []},
        ],
    }


DATA = {
    "conversations": [
        _conversation("a", "dog", "pottery"),
        _conversation("b", "cat", "salsa"),
        _conversation("c", "parrot", "yoga"),
    ]
}
GRID = [{"size_exponent": e, "recent_share": r} for e in (0.0, 1.0) for r in (0.0, 0.3)]
BM25 = [BM25Scorer(), BM25Scorer(context=2, headers=True)]


def test_the_bm25_baseline_is_the_same_selection_with_another_scorer() -> None:
    result = evaluate_handoff(DATA, 40, recent_share=0.3, size_exponent=1.0)
    # BM25 over what the default scorer's lexical index holds: the chunk and two before
    assert result["bm25_scorer"] == default_bm25().name == "bm25:context=2"
    got = []
    for conv in DATA["conversations"]:
        messages = turn_messages(conv)
        for q in conv["questions"]:
            if q["evidence"]:
                h = select_context(
                    messages,
                    q["question"],
                    40,
                    scorer=BM25Scorer(context=2),
                    recent_share=0.3,
                    size_exponent=1.0,
                )
                held = {m for c in h.chunks for m in c.message_ids}
                got.append(len(held & set(q["evidence"])) / len(q["evidence"]))
                assert any(s.reason == "recent" for s in h.selected)  # the recent share too
    assert result["baselines"]["bm25"]["evidence_recall"] == pytest.approx(
        sum(got) / len(got), abs=1e-4
    )


def test_each_fold_chooses_the_constants_on_the_other_conversations() -> None:
    held = held_out_handoff(DATA, (40, 80), GRID, bm25=BM25)
    assert (held["n"], held["skipped"], held["budgets"]) == (9, 3, [40, 80])
    assert held["conversations"] == ["a", "b", "c"]
    for family, candidates in (("ctxwise", len(GRID)), ("bm25", len(GRID) * len(BM25))):
        scored = held["scorers"][family]
        assert scored["candidates"] == candidates
        pooled = {"40": 0.0, "80": 0.0}
        for h, fold in enumerate(scored["folds"]):
            others = {"conversations": [c for i, c in enumerate(DATA["conversations"]) if i != h]}
            alone = held_out_handoff(others, (40, 80), GRID, bm25=BM25)
            # chosen without the conversation it is scored on
            assert fold["chosen"] == alone["scorers"][family]["in_sample"]["chosen"]
            assert fold["n"] == 3
            for budget in pooled:
                pooled[budget] += fold["recall"][budget] * fold["n"] / held["n"]
        assert scored["held_out"] == pytest.approx(pooled, abs=1e-3)
    fold = held["scorers"]["ctxwise"]["folds"][0]
    setting = {k: fold["chosen"][k] for k in ("size_exponent", "recent_share")}
    alone = evaluate_handoff({"conversations": [DATA["conversations"][0]]}, 40, **setting)
    assert fold["recall"]["40"] == pytest.approx(alone["evidence_recall"], abs=1e-4)


def test_held_out_handoff_reports_progress() -> None:
    seen: list[tuple[int, int]] = []
    held_out_handoff(DATA, (40,), GRID[:1], progress=lambda d, t: seen.append((d, t)))
    assert seen[0] == (0, 12) and seen[-1] == (12, 12) and len(seen) == 13


@pytest.mark.parametrize(
    ("budgets", "grid", "data", "error", "match"),
    [
        ((), GRID, DATA, UsageError, "at least one budget"),
        ((0,), GRID, DATA, BudgetError, "integer"),
        ((40,), [], DATA, UsageError, "no settings"),
        ((40,), [{"exponent": 1.0}], DATA, UsageError, "unknown packing setting"),
        ((40,), [{"size_exponent": -1.0}], DATA, UsageError, "size_exponent"),
        ((40,), GRID, {"conversations": DATA["conversations"][:1]}, UsageError, "two conv"),
    ],
)
def test_a_bad_held_out_handoff_is_refused(
    budgets: tuple[int, ...],
    grid: list[dict[str, float]],
    data: dict[str, Any],
    error: type[Exception],
    match: str,
) -> None:
    with pytest.raises(error, match=match):
        held_out_handoff(data, budgets, grid)
