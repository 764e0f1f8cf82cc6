"""Handoffs on LoCoMo: how much of a question's evidence a selection carries.

Data: ``../shared/data/locomo/locomo_dev5.json`` (5 conversations, categories 1–4).
Each conversation is the transcript (one message per turn) and each question the
task; :func:`ctxwise.handoff.evaluation.evaluate_handoff` gives the selection's
evidence recall (the fraction of the question's evidence turns inside it) and its
share of the transcript's tokens, beside the baselines under the same chunks,
headers and budget: ``recent`` (the latest turns), ``bm25`` (the same selection
with plain BM25 as its scorer, over the text the default scorer's lexical index
holds, a chunk with the two before it: the same pinning, share of the budget for
the latest chunks and packing, so only the scorer differs) and ``whole``. Budgets of
1,500, 3,000 and 6,000 tokens (``CharCounter``); the default scorer (hybrid
recall, the ``neutral`` preset: not tuned on LoCoMo).

Two of the packing constants, ``SIZE_EXPONENT`` and ``DEFAULT_RECENT_SHARE``,
were chosen on the Claude Code task sets and on these conversations, so the
figures at the library's constants are in-sample. The held-out figures choose
them again (size exponent 0–1, recent share 0–0.2) on four conversations and
score the fifth, in turn (:func:`ctxwise.handoff.evaluation.held_out_handoff`),
for the default scorer and for BM25 alike; BM25 also chooses what it indexes (the
chunk alone or with the two chunks before it, as the default scorer's lexical
index has them; with or without the chunk's header). One choice serves the three
budgets, as the library's constants do. Each conversation is also scored alone at
3,000 tokens, to show the spread. Time: the wall time of one evaluation over all
questions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from _common import DATA_DIR, print_table, require, say, write_results
from ctxwise.handoff.evaluation import evaluate_handoff, held_out_handoff
from ctxwise.handoff.scoring import BM25Scorer
from ctxwise.handoff.select import DEFAULT_RECENT_SHARE, SIZE_EXPONENT
from ctxwise.memory.evaluation import load_conversations

LOCOMO = DATA_DIR / "locomo" / "locomo_dev5.json"
BUDGETS = (1_500, 3_000, 6_000)
GRID = [
    {"size_exponent": e, "recent_share": r}
    for e in (0.0, 0.25, 0.5, 1.0)
    for r in (0.0, 0.05, 0.1, 0.2)
]
BM25 = [BM25Scorer(context=c, headers=h) for c in (0, 2) for h in (False, True)]


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}" if b else "-"


def progress(label: str) -> Callable[[int, int], None]:
    start = time.perf_counter()
    shown = [-1]

    def report(done: int, total: int) -> None:
        step = max(total // 10, 1)
        if (done == total or done // step > shown[0] // step) and done != shown[0]:
            shown[0] = done
            say(f"  {label}: {done}/{total} questions ({time.perf_counter() - start:.0f} s)")

    return report


def chosen(c: dict[str, Any]) -> str:
    return f"{c['scorer']}, exponent {c['size_exponent']}, recent {c['recent_share']}"


def main() -> None:
    data = load_conversations(require(LOCOMO))
    rows = []
    for budget in BUDGETS:
        t0 = time.perf_counter()
        result = evaluate_handoff(data, budget, progress=progress(f"budget {budget}"))
        seconds = time.perf_counter() - t0
        rows.append(
            {"budget": budget, "conversation": "all", "seconds": round(seconds, 2), **result}
        )
    per_conversation = []
    for conv in data["conversations"]:
        one = evaluate_handoff({"conversations": [conv]}, 3_000)
        per_conversation.append({"conversation": conv["id"], "budget": 3_000, **one})
    say("held out: the packing constants chosen on four conversations, scored on the fifth")
    held = held_out_handoff(data, BUDGETS, GRID, bm25=BM25, progress=progress("held out"))
    print_table(
        "handoff evidence recall on LoCoMo dev (categories 1-4), the library's constants",
        ["budget", "n", "ctxwise", "share", "recent", "bm25", "ctxwise / recent", "s"],
        [
            [
                r["budget"],
                r["n"],
                f"{r['evidence_recall']:.3f}",
                f"{r['token_share']:.1%}",
                f"{r['baselines']['recent']['evidence_recall']:.3f}",
                f"{r['baselines']['bm25']['evidence_recall']:.3f}",
                f"{_ratio(r['evidence_recall'], r['baselines']['recent']['evidence_recall'])}x",
                r["seconds"],
            ]
            for r in rows
        ],
        caption=(
            f"SIZE_EXPONENT {SIZE_EXPONENT} and DEFAULT_RECENT_SHARE {DEFAULT_RECENT_SHARE} "
            "were chosen on these conversations (and the Claude Code sets): in-sample"
        ),
    )
    scorers = held["scorers"]
    print_table(
        "held out: constants chosen on four conversations, scored on the fifth",
        ["budget", "ctxwise", "bm25 (fit the same way)", "recent", "ctxwise in-sample"],
        [
            [
                b,
                f"{scorers['ctxwise']['held_out'][str(b)]:.3f}",
                f"{scorers['bm25']['held_out'][str(b)]:.3f}",
                f"{held['recent'][str(b)]:.3f}",
                f"{scorers['ctxwise']['in_sample']['recall'][str(b)]:.3f}",
            ]
            for b in BUDGETS
        ],
    )
    print_table(
        "each held-out conversation: what was chosen on the other four",
        ["held out", "ctxwise", "bm25"],
        [
            [f["held_out"], chosen(f["chosen"]), chosen(g["chosen"])]
            for f, g in zip(scorers["ctxwise"]["folds"], scorers["bm25"]["folds"], strict=True)
        ],
    )
    print_table(
        "per conversation, budget 3000",
        ["conversation", "n", "ctxwise", "share", "recent", "bm25"],
        [
            [
                r["conversation"],
                r["n"],
                f"{r['evidence_recall']:.3f}",
                f"{r['token_share']:.1%}",
                f"{r['baselines']['recent']['evidence_recall']:.3f}",
                f"{r['baselines']['bm25']['evidence_recall']:.3f}",
            ]
            for r in per_conversation
        ],
    )
    write_results(
        "bench_handoff",
        {
            "rows": rows,
            "per_conversation": per_conversation,
            "constants": {
                "SIZE_EXPONENT": SIZE_EXPONENT,
                "DEFAULT_RECENT_SHARE": DEFAULT_RECENT_SHARE,
                "chosen_on": "the Claude Code task sets and these LoCoMo conversations",
            },
            "held_out": {
                "grid": GRID,
                "bm25_scorers": [b.name for b in BM25],
                **held,
            },
        },
    )


if __name__ == "__main__":
    main()
