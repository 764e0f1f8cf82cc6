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
- ``bm25``: the same selection with plain BM25 as the scorer
  (:class:`~ctxwise.handoff.scoring.BM25Scorer` over the text the default
  scorer's lexical index holds, :func:`default_bm25`): the same pinning, the same
  share of the budget for the latest chunks and the same packing by score over
  size (:func:`~ctxwise.handoff.select.select_scored`), so only the scorer differs;
- ``whole``: the whole transcript (every chunk; its share is 1).

:func:`held_out_handoff` chooses the packing constants (``size_exponent``,
``recent_share``) held out: on all conversations but one, scored on the one left
out, each in turn, for the default scorer and for BM25 (which also chooses
what it indexes) alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ctxwise.errors import BudgetError, FormatError, UsageError
from ctxwise.handoff.chunks import Chunk, chunk_transcript
from ctxwise.handoff.scoring import BM25Scorer, ChunkScorer, HybridScorer
from ctxwise.handoff.select import chunk_costs, select_scored
from ctxwise.memory.evaluation import (
    check_conversations,
    conversation_name,
    skipped_question,
    turn_messages,
)
from ctxwise.memory.longterm import PRESETS
from ctxwise.tokens import CharCounter, TokenCounter

__all__ = ["PACKING_SETTINGS", "default_bm25", "evaluate_handoff", "held_out_handoff"]

PACKING_SETTINGS = frozenset({"size_exponent", "recent_share"})
"""What a setting of :func:`held_out_handoff`'s grid may set (keywords of
:func:`~ctxwise.handoff.select.select_scored`)."""


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


def _recall(evidence: set[str], chunks: Sequence[Chunk]) -> float:
    """The share of the evidence turns some chunk of ``chunks`` came from."""
    held = {mid for c in chunks for mid in c.message_ids}
    return len(evidence & held) / len(evidence)


def default_bm25() -> BM25Scorer:
    """The ``bm25`` baseline's scorer: BM25 over the text the default scorer's
    lexical index holds for a chunk (the chunk with the ones before it, as many as
    the ``neutral`` preset's ``context``)."""
    return BM25Scorer(context=PRESETS["neutral"].context)


def _conversations(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    conversations = data.get("conversations") if isinstance(data, Mapping) else None
    if not isinstance(conversations, list):
        raise FormatError("handoff data", "expected {'conversations': [...]}")
    check_conversations(data, "handoff data")
    return conversations


def _check_budget(budget: int) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise BudgetError(budget, "a handoff budget is an integer >= 1")


def evaluate_handoff(
    data: Mapping[str, Any],
    budget: int,
    *,
    scorer: ChunkScorer | None = None,
    counter: TokenCounter | None = None,
    progress: Callable[[int, int], None] | None = None,
    recent_share: float | None = None,
    size_exponent: float | None = None,
    bm25: BM25Scorer | None = None,
) -> dict[str, Any]:
    """``n``, ``evidence_recall``, ``token_share``, ``by_category`` and
    ``baselines`` (``recent``, ``bm25``, ``whole``) for
    :func:`~ctxwise.handoff.select.select_context` with ``scorer`` (see the module
    docstring); ``skipped`` counts the questions without evidence, which are left
    out of every figure, and ``skipped_questions`` lists them with the reason
    (:func:`~ctxwise.memory.evaluation.skipped_question`); ``excluded`` is what the
    loader left out (LoCoMo: ``{"category 5": n}``). ``progress(done, total)`` is
    called as the questions are done (``total``: every question, those without
    evidence too); nothing is printed. ``recent_share`` and ``size_exponent``
    (default: the library's) apply to ``scorer`` and to the ``bm25`` baseline alike (``bm25``: a
    :class:`~ctxwise.handoff.scoring.BM25Scorer`; by default :func:`default_bm25`).

    Raises:
        FormatError: ``data`` is not the generic format (checked by
            :func:`~ctxwise.memory.evaluation.check_conversations`).
        BudgetError: ``budget`` is not a positive integer.
        UsageError: ``recent_share`` or ``size_exponent`` is out of range.
    """
    _check_budget(budget)
    conversations = _conversations(data)
    tc = counter if counter is not None else CharCounter()
    scorer = scorer if scorer is not None else HybridScorer()
    lexical = bm25 if bm25 is not None else default_bm25()
    packing: dict[str, Any] = {"recent_share": recent_share, "size_exponent": size_exponent}
    names = ("ctxwise", "recent", "bm25", "whole")
    recall: dict[str, list[float]] = {n: [] for n in names}
    share: dict[str, list[float]] = {n: [] for n in names}
    by_category: dict[str, list[float]] = {}
    skipped: list[dict[str, Any]] = []
    asked = 0
    work = sum(len(conv.get("questions", [])) for conv in conversations)
    if progress is not None:
        progress(0, work)
    for cn, conv in enumerate(conversations, 1):
        chunks = chunk_transcript(turn_messages(conv), tc)
        cost = chunk_costs(chunks, tc)
        total = sum(cost) or 1
        newest = list(range(len(chunks) - 1, -1, -1))
        for qn, q in enumerate(conv.get("questions", []), 1):
            if progress is not None:  # the questions done before this one
                progress(asked, work)
            asked += 1
            # turn ids compare as strings, as message ids (and eval memory) do
            evidence = {str(e) for e in q.get("evidence", [])}
            if not evidence:
                skipped.append(skipped_question(conversation_name(conv, cn), qn, q))
                continue
            for name, chosen in (("ctxwise", scorer), ("bm25", lexical)):
                scores = chosen.score(q["question"], chunks) if chunks else []
                handoff = select_scored(
                    q["question"],
                    chunks,
                    scores,
                    budget,
                    counter=tc,
                    costs=cost,
                    scorer=chosen.name,
                    **packing,
                )
                got = _recall(evidence, handoff.chunks)
                recall[name].append(got)
                share[name].append(handoff.tokens / total)
                if name == "ctxwise":
                    by_category.setdefault(str(q.get("category", "")), []).append(got)
            taken = _pack(newest, cost, budget)
            recall["recent"].append(len(evidence & _turns(chunks, taken)) / len(evidence))
            share["recent"].append(sum(cost[i] for i in taken) / total)
            recall["whole"].append(1.0)
            share["whole"].append(1.0)
    if progress is not None:
        progress(work, work)

    def mean(values: list[float]) -> float:
        return round(float(np.mean(values)), 4) if values else 0.0

    return {
        "n": len(recall["ctxwise"]),
        "skipped": len(skipped),
        "skipped_questions": skipped,
        "excluded": dict(data.get("excluded", {})),
        "budget": budget,
        "scorer": scorer.name,
        "bm25_scorer": lexical.name,
        "evidence_recall": mean(recall["ctxwise"]),
        "token_share": mean(share["ctxwise"]),
        "by_category": {k: mean(v) for k, v in sorted(by_category.items())},
        "baselines": {
            name: {"evidence_recall": mean(recall[name]), "token_share": mean(share[name])}
            for name in ("recent", "bm25", "whole")
        },
    }


def held_out_handoff(
    data: Mapping[str, Any],
    budgets: Sequence[int],
    grid: Sequence[Mapping[str, float]],
    *,
    scorer: ChunkScorer | None = None,
    bm25: Sequence[BM25Scorer] | None = None,
    counter: TokenCounter | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Evidence recall with the packing constants chosen on all conversations but
    one and scored on that one, each conversation in turn, for ``scorer`` (the
    default scorer when None) and for the ``bm25`` baseline fit the same way
    (default: :func:`default_bm25` alone).

    A setting of ``grid`` sets ``size_exponent`` and ``recent_share``
    (:data:`PACKING_SETTINGS`; left out: the library's). The default scorer's
    candidates are the settings; BM25's are every scorer of ``bm25`` (what it
    indexes) with every setting. A candidate is chosen for all ``budgets`` at once,
    as the library's constants serve every budget: the best mean over the budgets
    of the recall pooled over the other conversations' questions (a tie goes to
    the candidate listed first). ``recent`` (nothing to choose) is reported beside
    them.

    Returns ``{"n", "skipped", "budgets", "conversations", "recent", "scorers"}``:
    ``recent`` is its recall per budget; ``scorers`` has, for ``ctxwise`` and
    ``bm25``, ``held_out`` (per budget, pooled over every held-out question),
    ``folds`` (per conversation: the candidate chosen without it, its recall per
    budget and question count) and ``in_sample`` (the best candidate on every
    conversation and its recall per budget on them). Budgets are keyed as strings.
    ``progress(done, total)`` is called as the questions are done.

    Raises:
        FormatError: ``data`` is not the generic format.
        BudgetError: a budget is not a positive integer.
        UsageError: no budgets, an empty grid or one setting something other than
            :data:`PACKING_SETTINGS` or out of range, no BM25 scorer, or fewer than
            two conversations.
    """
    if isinstance(budgets, str | bytes) or not budgets:
        raise UsageError("held_out_handoff needs at least one budget")
    for budget in budgets:
        _check_budget(budget)
    if not grid:
        raise UsageError("the grid holds no settings")
    for setting in grid:
        unknown = sorted(set(setting) - PACKING_SETTINGS)
        if unknown:
            raise UsageError(
                f"unknown packing setting(s) {', '.join(unknown)};"
                f" choose from {', '.join(sorted(PACKING_SETTINGS))}"
            )
    bm25 = [default_bm25()] if bm25 is None else list(bm25)
    if not bm25 or not all(isinstance(b, BM25Scorer) for b in bm25):
        raise UsageError("bm25 is one or more BM25Scorer")
    conversations = _conversations(data)
    if len(conversations) < 2:
        raise UsageError("holding a conversation out needs at least two conversations")
    tc = counter if counter is not None else CharCounter()
    default = scorer if scorer is not None else HybridScorer()
    names = [str(c.get("id", f"conversation-{n}")) for n, c in enumerate(conversations, 1)]
    candidates: dict[str, list[tuple[ChunkScorer, Mapping[str, float]]]] = {
        "ctxwise": [(default, setting) for setting in grid],
        "bm25": [(b, setting) for b in bm25 for setting in grid],
    }
    # got[family][candidate][budget][conversation] = recall of each question
    got: dict[str, list[list[list[list[float]]]]] = {
        family: [[[[] for _ in names] for _ in budgets] for _ in found]
        for family, found in candidates.items()
    }
    recent: list[list[float]] = [[] for _ in budgets]
    skipped = 0
    asked = 0
    work = sum(len(conv.get("questions", [])) for conv in conversations)
    if progress is not None:
        progress(0, work)
    for c, conv in enumerate(conversations):
        chunks = chunk_transcript(turn_messages(conv), tc)
        cost = chunk_costs(chunks, tc)
        newest = list(range(len(chunks) - 1, -1, -1))
        for q in conv.get("questions", []):
            asked += 1
            evidence = {str(e) for e in q.get("evidence", [])}
            if not evidence:
                skipped += 1
            else:
                task = q["question"]
                scored: dict[int, list[float]] = {}
                for family, found in candidates.items():
                    for i, (chosen, setting) in enumerate(found):
                        if id(chosen) not in scored:
                            scored[id(chosen)] = chosen.score(task, chunks) if chunks else []
                        for b, budget in enumerate(budgets):
                            handoff = select_scored(
                                task,
                                chunks,
                                scored[id(chosen)],
                                budget,
                                counter=tc,
                                costs=cost,
                                scorer=chosen.name,
                                **setting,
                            )
                            got[family][i][b][c].append(_recall(evidence, handoff.chunks))
                for b, budget in enumerate(budgets):
                    taken = _pack(newest, cost, budget)
                    recent[b].append(len(evidence & _turns(chunks, taken)) / len(evidence))
            if progress is not None:
                progress(asked, work)

    def pooled(rows: list[list[float]], convs: Sequence[int]) -> float:
        values = [x for k in convs for x in rows[k]]
        return sum(values) / len(values) if values else 0.0

    def choose(family: str, convs: Sequence[int]) -> int:
        def mean(i: int) -> float:
            return float(np.mean([pooled(per, convs) for per in got[family][i]]))

        best = 0
        for i in range(1, len(candidates[family])):
            if mean(i) > mean(best):
                best = i
        return best

    def described(family: str, i: int) -> dict[str, Any]:
        chosen, setting = candidates[family][i]
        return {"scorer": chosen.name, **setting}

    everyone = list(range(len(names)))
    keys = [str(b) for b in budgets]
    scorers: dict[str, Any] = {}
    for family in candidates:
        held: list[list[float]] = [[] for _ in budgets]
        folds = []
        for h in everyone:
            i = choose(family, [k for k in everyone if k != h])
            for b in range(len(budgets)):
                held[b].extend(got[family][i][b][h])
            folds.append(
                {
                    "held_out": names[h],
                    "chosen": described(family, i),
                    "recall": {
                        key: round(pooled(got[family][i][b], [h]), 4) for b, key in enumerate(keys)
                    },
                    "n": len(got[family][i][0][h]),
                }
            )
        best = choose(family, everyone)
        scorers[family] = {
            "candidates": len(candidates[family]),
            "held_out": {
                key: round(float(np.mean(held[b])), 4) if held[b] else 0.0
                for b, key in enumerate(keys)
            },
            "folds": folds,
            "in_sample": {
                "chosen": described(family, best),
                "recall": {
                    key: round(pooled(got[family][best][b], everyone), 4)
                    for b, key in enumerate(keys)
                },
            },
        }
    return {
        "n": len(recent[0]),
        "skipped": skipped,
        "budgets": list(budgets),
        "conversations": names,
        "recent": {
            key: round(float(np.mean(recent[b])), 4) if recent[b] else 0.0
            for b, key in enumerate(keys)
        },
        "scorers": scorers,
    }
