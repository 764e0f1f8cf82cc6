"""Evidence recall of a handoff: does the selection hold the turns a task needs?

Data is the generic conversation format of :mod:`ctxwise.memory.evaluation` (or
LoCoMo, converted by it: categories 1–4). Each conversation is the transcript
(one message per turn, its id the turn id) and each question is a task. For a
selection under ``budget`` tokens:

- ``evidence_recall``: the mean over questions of the fraction of the question's
  evidence turns inside the selection (a turn split into parts counts when any
  part is in);
- ``token_share``: the mean share of the transcript's tokens the selection holds
  (chunks with their headers, as the budget counts them).

Baselines get the same chunks, the same headers and the same budget:

- ``recent``: the most recent chunks that fit;
- ``bm25``: plain BM25 over the chunks' texts (the same analyzer), best first,
  then the most recent of the rest while they fit;
- ``whole``: the whole transcript (every chunk; its share is 1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ctxwise._bm25 import BM25Index
from ctxwise.errors import BudgetError, FormatError
from ctxwise.handoff.chunks import Chunk, chunk_transcript
from ctxwise.handoff.scoring import ChunkScorer, HybridScorer
from ctxwise.handoff.select import select_context
from ctxwise.memory.evaluation import check_conversations, turn_messages
from ctxwise.text import DEFAULT_ANALYZER
from ctxwise.tokens import CharCounter, TokenCounter

__all__ = ["evaluate_handoff"]


def _pack(order: Sequence[int], cost: Sequence[int], budget: int) -> set[int]:
    taken: set[int] = set()
    used = 0
    for i in order:
        if i not in taken and used + cost[i] <= budget:
            taken.add(i)
            used += cost[i]
    return taken


def _turns(chunks: Sequence[Chunk], taken: set[int]) -> set[str]:
    return {mid for i in taken for mid in chunks[i].message_ids}


def evaluate_handoff(
    data: Mapping[str, Any],
    budget: int,
    *,
    scorer: ChunkScorer | None = None,
    counter: TokenCounter | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """``n``, ``evidence_recall``, ``token_share``, ``by_category`` and
    ``baselines`` (``recent``, ``bm25``, ``whole``) for :func:`select_context`
    with ``scorer`` (see the module docstring); ``skipped`` counts the questions
    without evidence, which are left out of every figure. ``progress(done,
    total)`` is called as the questions are done (``total``: every question, those
    without evidence too); nothing is printed.

    Raises:
        FormatError: ``data`` is not the generic format (checked by
            :func:`~ctxwise.memory.evaluation.check_conversations`).
        BudgetError: ``budget`` is not a positive integer.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise BudgetError(budget, "a handoff budget is an integer >= 1")
    conversations = data.get("conversations") if isinstance(data, Mapping) else None
    if not isinstance(conversations, list):
        raise FormatError("handoff data", "expected {'conversations': [...]}")
    check_conversations(data, "handoff data")
    tc = counter if counter is not None else CharCounter()
    scorer = scorer if scorer is not None else HybridScorer()
    names = ("ctxwise", "recent", "bm25", "whole")
    recall: dict[str, list[float]] = {n: [] for n in names}
    share: dict[str, list[float]] = {n: [] for n in names}
    by_category: dict[str, list[float]] = {}
    skipped = 0
    asked = 0
    work = sum(len(conv.get("questions", [])) for conv in conversations)
    if progress is not None:
        progress(0, work)
    for conv in conversations:
        messages = turn_messages(conv)
        chunks = chunk_transcript(messages, tc)
        cost = [tc.count(f"{c.header()}\n{c.text}") + 2 for c in chunks]
        total = sum(cost) or 1
        lexical = BM25Index([c.text for c in chunks], DEFAULT_ANALYZER)
        newest = list(range(len(chunks) - 1, -1, -1))
        for q in conv.get("questions", []):
            if progress is not None:  # the questions done before this one
                progress(asked, work)
            asked += 1
            # turn ids compare as strings, as message ids (and eval memory) do
            evidence = {str(e) for e in q.get("evidence", [])}
            if not evidence:
                skipped += 1
                continue
            handoff = select_context(messages, q["question"], budget, scorer=scorer, counter=tc)
            held = {mid for c in handoff.chunks for mid in c.message_ids}
            got = len(evidence & held) / len(evidence)
            recall["ctxwise"].append(got)
            share["ctxwise"].append(handoff.tokens / total)
            by_category.setdefault(str(q.get("category", "")), []).append(got)
            scores = lexical.query(q["question"])
            ranked = [i for i in np.argsort(-scores, kind="stable") if scores[i] > 0]
            for name, order in (("recent", newest), ("bm25", [*ranked, *newest])):
                taken = _pack(order, cost, budget)
                recall[name].append(len(evidence & _turns(chunks, taken)) / len(evidence))
                share[name].append(sum(cost[i] for i in taken) / total)
            recall["whole"].append(1.0)
            share["whole"].append(1.0)
    if progress is not None:
        progress(work, work)

    def mean(values: list[float]) -> float:
        return round(float(np.mean(values)), 4) if values else 0.0

    return {
        "n": len(recall["ctxwise"]),
        "skipped": skipped,
        "budget": budget,
        "scorer": scorer.name,
        "evidence_recall": mean(recall["ctxwise"]),
        "token_share": mean(share["ctxwise"]),
        "by_category": {k: mean(v) for k, v in sorted(by_category.items())},
        "baselines": {
            name: {"evidence_recall": mean(recall[name]), "token_share": mean(share[name])}
            for name in ("recent", "bm25", "whole")
        },
    }
