"""How the ``dialogue`` recall preset's values were chosen, and what they give held out.

On ``locomo/locomo_dev5.json`` (760 questions of categories 1–4, five
conversations), with the hashing embedder and an in-memory SQLite store, every
conversation is remembered through the write path ``TieredMemory`` uses
(:func:`ctxwise.memory.evaluation.turn_items`), once per ``context``; then every
setting of a grid is scored (hybrid recall@10 per question):

- the first grid: context 1–3, successor share 0–0.5, speaker boost 0–1, vector
  weight 0.25–0.5, ``rrf_k`` 5–20 (216 settings);
- the second, drawn around the first one's best on all five conversations, where
  it sat at the grid's edges: context 2, successor share 0.3–1, boost 0.5–4,
  vector weight 0–0.25, ``rrf_k`` 10–40 (144).

It prints the best setting on all five conversations (the preset's values: a
dev-set figure) and, leaving each conversation out in turn, the setting chosen on
the other four and its recall on the one left out, pooled over the 760 held-out
questions, for the whole grid and for the first grid alone. Ties go to the
setting that sorts last as JSON, so the run is deterministic.

``--embedder NAME`` runs the same grids with another embedder (``minilm`` needs
the ``minilm`` extra and loads offline); its results go to
``bench_presets_<name>.json``. Each text is embedded once for the whole run.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Iterable, Sequence

from _common import DATA_DIR, CachedEmbedder, print_table, require, say, write_results
from ctxwise.embeddings import Embedder, get_embedder
from ctxwise.memory.evaluation import load_conversations, turn_items
from ctxwise.memory.longterm import LongTermMemory
from ctxwise.memory.sqlite import SQLiteStore

Setting = tuple[int, float, float, float, int]  # context, successor, boost, vector w, rrf_k


def grid() -> tuple[list[Setting], list[Setting]]:
    first = [
        (c, s, b, w, k)
        for c in (1, 2, 3)
        for s, b, w, k in itertools.product(
            (0.0, 0.2, 0.3, 0.5), (0.0, 0.5, 1.0), (0.25, 0.5), (5, 10, 20)
        )
    ]
    second = [
        (2, s, b, w, k)
        for s, b, w, k in itertools.product(
            (0.3, 0.5, 0.7, 1.0), (0.5, 1.0, 2.0, 4.0), (0.0, 0.1, 0.25), (10, 20, 40)
        )
    ]
    return first, second


def score(per: Sequence[Sequence[float]], convs: Iterable[int]) -> float:
    xs = [x for i in convs for x in per[i]]
    return sum(xs) / len(xs)


def choose(results: dict[Setting, list[list[float]]], convs: Sequence[int]) -> Setting:
    return max(results, key=lambda s: (score(results[s], convs), json.dumps(s)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="hashing", help="hashing (default) or minilm")
    args = parser.parse_args()
    embedder: Embedder | None = (
        None if args.embedder == "hashing" else CachedEmbedder(get_embedder(args.embedder))
    )
    data = load_conversations(require(DATA_DIR / "locomo" / "locomo_dev5.json"))
    convs = data["conversations"]
    first, second = grid()
    settings = list(dict.fromkeys([*first, *second]))
    results: dict[Setting, list[list[float]]] = {}
    for context in sorted({s[0] for s in settings}):
        store = SQLiteStore(":memory:")
        for c in convs:
            LongTermMemory(
                store, ("eval", c["id"]), embedder, preset="dialogue", context=context
            ).remember_many(turn_items(c))
        for setting in (s for s in settings if s[0] == context):
            _, share, boost, w, k = setting
            per = []
            for c in convs:
                memory = LongTermMemory(
                    store,
                    ("eval", c["id"]),
                    embedder,
                    preset="dialogue",
                    context=context,
                    successor_share=share,
                    mention_boost=boost,
                    weights=(1.0, w),
                    rrf_k=k,
                )
                row = []
                for q in c["questions"]:
                    ids = {h.item.id for h in memory.recall(q["question"], k=10)}
                    evidence = set(q["evidence"])
                    row.append(len(evidence & ids) / len(evidence))
                per.append(row)
            results[setting] = per
        store.close()
        say(f"context {context}: {sum(1 for s in settings if s[0] == context)} settings scored")
    n = len(convs)
    payload: dict[str, object] = {"settings_scored": len(results)}
    rows = []
    for name, pool in (("whole grid", settings), ("first grid", first)):
        sub = {s: results[s] for s in pool}
        best = choose(sub, range(n))
        held: list[float] = []
        folds = []
        for h in range(n):
            chosen = choose(sub, [i for i in range(n) if i != h])
            held.extend(sub[chosen][h])
            folds.append(
                {"held_out": convs[h]["id"], "chosen": chosen, "recall": score(sub[chosen], [h])}
            )
        loco = sum(held) / len(held)
        payload[name] = {
            "best_on_all": best,
            "recall_best_on_all": score(sub[best], range(n)),
            "loco_recall": loco,
            "folds": folds,
        }
        rows.append([name, len(sub), str(best), f"{score(sub[best], range(n)):.4f}", f"{loco:.4f}"])
    print_table(
        f"dialogue preset: recall@10 on LoCoMo dev ({args.embedder})",
        [
            "grid",
            "settings",
            "best on all five (context, share, boost, w, k)",
            "best",
            "chosen on 4, scored on 5th",
        ],
        rows,
    )
    payload["embedder"] = args.embedder
    suffix = "" if args.embedder == "hashing" else "_" + args.embedder.replace(":", "_")
    write_results("bench_presets" + suffix, payload)


if __name__ == "__main__":
    main()
