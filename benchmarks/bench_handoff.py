"""Handoffs on LoCoMo: how much of a question's evidence a selection carries.

Data: ``../shared/data/locomo/locomo_dev5.json`` (5 conversations, categories 1–4).
Each conversation is the transcript (one message per turn) and each question the
task; :func:`ctxwise.handoff.evaluation.evaluate_handoff` gives the selection's
evidence recall (the fraction of the question's evidence turns inside it) and its
share of the transcript's tokens, beside the baselines under the same chunks,
headers and budget: ``recent`` (the latest turns), ``bm25`` (plain BM25 over the
turns, then the latest) and ``whole``. Budgets of 1,500, 3,000 and 6,000 tokens
(``CharCounter``); the default scorer (hybrid recall, the ``neutral`` preset: not
tuned on LoCoMo). Each conversation is also scored alone, to show the spread.
Time: the wall time of one evaluation over all questions.
"""

from __future__ import annotations

import time

from _common import DATA_DIR, print_table, require, write_results
from ctxwise.handoff.evaluation import evaluate_handoff
from ctxwise.memory.evaluation import load_conversations

LOCOMO = DATA_DIR / "locomo" / "locomo_dev5.json"
BUDGETS = (1_500, 3_000, 6_000)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}" if b else "-"


def main() -> None:
    data = load_conversations(require(LOCOMO))
    rows = []
    for budget in BUDGETS:
        t0 = time.perf_counter()
        result = evaluate_handoff(data, budget)
        seconds = time.perf_counter() - t0
        rows.append(
            {"budget": budget, "conversation": "all", "seconds": round(seconds, 2), **result}
        )
    per_conversation = []
    for conv in data["conversations"]:
        one = evaluate_handoff({"conversations": [conv]}, 3_000)
        per_conversation.append({"conversation": conv["id"], "budget": 3_000, **one})
    print_table(
        "handoff evidence recall on LoCoMo dev (categories 1-4)",
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
    write_results("bench_handoff", {"rows": rows, "per_conversation": per_conversation})


if __name__ == "__main__":
    main()
