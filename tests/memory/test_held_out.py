"""Held-out recall: settings chosen on all conversations but one, scored on that one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxwise.errors import UsageError
from ctxwise.memory import InMemoryStore, NewItem, RecallMode, SQLiteStore
from ctxwise.memory.evaluation import (
    MODE_SETTINGS,
    SettingScores,
    evaluate_recall,
    grid_for_mode,
    held_out_recall,
    score_settings,
)

# settings A and B over three conversations: A is best on c1 and c3, B on c2
SCORES = SettingScores(
    "hybrid",
    10,
    ("c1", "c2", "c3"),
    ({"rrf_k": 5}, {"rrf_k": 20}),
    (
        ((1.0, 1.0), (0.0, 0.0), (0.5, 0.5, 0.5)),
        ((0.0, 0.0), (1.0, 1.0), (0.4, 0.4, 0.4)),
    ),
)


def test_each_fold_chooses_without_the_conversation_it_scores() -> None:
    held = SCORES.held_out()
    # c1 out: A 1.5 / 5 (pooled over the questions of c2 and c3) < B 3.2 / 5, so B,
    # which scores 0 on c1; c2 out: A 3.5 / 5 > B 1.2 / 5; c3 out: A 2 / 4 = B 2 / 4,
    # a tie, which goes to A (listed first)
    assert [(f.held_out, f.chosen, f.recall, f.n) for f in held.folds] == [
        ("c1", {"rrf_k": 20}, 0.0, 2),
        ("c2", {"rrf_k": 5}, 0.0, 2),
        ("c3", {"rrf_k": 5}, 0.5, 3),
    ]
    assert held.recall == pytest.approx(1.5 / 7) and held.n == 7  # pooled per question
    # in sample, A is best on all three (3.5 / 7 against 3.2 / 7): a better figure
    assert held.best_on_all == {"rrf_k": 5} and held.recall_best_on_all == pytest.approx(0.5)
    report = held.report()
    assert report["held_out_recall"] == 0.2143 and report["in_sample"]["recall"] == 0.5
    assert report["folds"][0] == {"held_out": "c1", "chosen": {"rrf_k": 20}, "recall": 0.0, "n": 2}


def test_a_choice_among_part_of_the_grid() -> None:
    held = SCORES.held_out([{"rrf_k": 20}])
    assert held.settings == 1 and all(f.chosen == {"rrf_k": 20} for f in held.folds)
    with pytest.raises(UsageError, match="not scored"):
        SCORES.held_out([{"rrf_k": 7}])


def test_one_conversation_cannot_be_held_out() -> None:
    one = SettingScores("lexical", 10, ("c1",), ({},), (((1.0,),),))
    with pytest.raises(UsageError, match="at least two conversations"):
        one.held_out()


def test_a_baseline_grid_keeps_only_what_its_mode_reads() -> None:
    grid: list[dict[str, Any]] = [
        {"context": c, "weights": (1.0, w), "rrf_k": 10} for c in (1, 2) for w in (0.1, 0.5)
    ]
    assert grid_for_mode(grid, "hybrid") == grid
    assert grid_for_mode(grid, "lexical") == [
        {"context": 1, "rrf_k": 10},
        {"context": 2, "rrf_k": 10},
    ]
    assert grid_for_mode(grid, "vector") == [{"rrf_k": 10}]
    assert "weights" not in MODE_SETTINGS["lexical"] | MODE_SETTINGS["vector"]
    with pytest.raises(UsageError, match="unknown recall mode"):
        grid_for_mode(grid, "bm25")  # type: ignore[arg-type]


def _conversation(name: str, pet: str, hobby: str) -> dict[str, Any]:
    return {
        "id": name,
        "turns": [
            {"id": "D1:1", "speaker": "Ann", "text": f"I adopted a {pet} last week"},
            {"id": "D1:2", "speaker": "Bob", "text": "Lovely! What is its name?"},
            {"id": "D1:3", "speaker": "Ann", "text": "Rex, after my grandfather"},
            {"id": "D2:1", "speaker": "Bob", "text": f"I started {hobby} classes"},
            {"id": "D2:2", "speaker": "Ann", "text": "Which studio?"},
            {"id": "D2:3", "speaker": "Bob", "text": "The one by the river"},
        ],
        "questions": [
            {"question": f"What is the name of Ann's {pet}?", "evidence": ["D1:3"]},
            {"question": f"Where are Bob's {hobby} classes?", "evidence": ["D2:3"]},
            {"question": "What did Bob start?", "evidence": ["D2:1"]},
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
GRID = [
    {"context": c, "successor_share": s, "weights": (1.0, w)}
    for c in (0, 2)
    for s in (0.0, 0.7)
    for w in (0.0, 0.5)
]


@pytest.mark.parametrize("mode", ["hybrid", "lexical", "vector"])
def test_each_setting_scores_as_evaluate_recall_does(mode: RecallMode) -> None:
    scores = score_settings(DATA, GRID, mode=mode, k=2, options={"preset": "dialogue"})
    assert scores.settings == tuple(grid_for_mode(GRID, mode))
    assert scores.conversations == ("a", "b", "c")
    for i, setting in enumerate(scores.settings):
        alone = evaluate_recall(
            DATA, (2,), store_factory=InMemoryStore, options={"preset": "dialogue", **setting}
        )
        figure = (
            alone["recall_at"]["2"]
            if mode == "hybrid"
            else alone["baselines"][mode]["recall_at"]["2"]
        )
        assert [len(r) for r in scores.recall[i]] == [3, 3, 3]  # no evidence: left out
        assert scores.mean(i, [0, 1, 2]) == pytest.approx(figure, abs=1e-4)


def test_held_out_recall_and_its_progress() -> None:
    seen: list[tuple[int, int]] = []
    held = held_out_recall(
        DATA, GRID, k=2, store_factory=InMemoryStore, progress=lambda d, t: seen.append((d, t))
    )
    assert held.settings == len(GRID) and len(held.folds) == 3 and held.n == 9
    assert seen[0] == (0, len(GRID)) and seen[-1] == (len(GRID), len(GRID))


@pytest.mark.parametrize(
    ("grid", "options", "match"),
    [
        ([], None, "no settings"),
        ([{"contxt": 1}], None, "unknown memory option"),
        ([{}], {"prest": "dialogue"}, "unknown memory option"),
        ([{"rrf_k": 0}], None, "rrf_k"),
    ],
)
def test_a_bad_grid_is_refused(
    grid: list[dict[str, Any]], options: dict[str, Any] | None, match: str
) -> None:
    with pytest.raises(UsageError, match=match):
        score_settings(DATA, grid, options=options)


def test_a_store_holding_other_items_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "grid.db"
    with SQLiteStore(path) as store:
        store.put(("eval", "b"), NewItem("something else entirely"))
    with pytest.raises(UsageError, match="already holds 1 item"):
        score_settings(DATA, GRID, store_factory=lambda: SQLiteStore(path))
    with SQLiteStore(path) as store:
        assert store.count(("eval", "a")) == 0 and store.count(("eval", "b")) == 1
    # a rerun over the store's own items is not refused
    fresh = tmp_path / "fresh.db"
    first = score_settings(DATA, GRID[:2], store_factory=lambda: SQLiteStore(fresh))
    again = score_settings(DATA, GRID[:2], store_factory=lambda: SQLiteStore(fresh))
    assert first == again
