"""How much fusing the lexical and vector rankings can add to recall on LoCoMo dev.

Issue 4 asks hybrid recall@10 to beat the better single method by 3 points. This
measures, per embedder (hashing; MiniLM when the ``minilm`` extra is installed),
on ``locomo/locomo_dev5.json`` (760 questions of categories 1–4):

1. ``evaluate_recall`` with the library's defaults: hybrid, lexical only and
   vector only, through the same pipeline (context indexing, successor credit,
   speaker mention boost, de-duplication);
2. the same with the vector weight of the reciprocal rank fusion swept
   (``weights=(1.0, w)``): the best that tuning the fusion weight reaches;
3. a ceiling for fusing these two rankings: a logistic-regression ranker trained
   on four conversations and scored on the fifth, in turn (leave one conversation
   out), given both rankings' features, against the same ranker given the
   lexical features only. Candidates: the top 100 of each ranking used and the
   item before each. Features per candidate: BM25 score / best BM25 score,
   1 / (10 + lexical rank), cosine, cosine - best cosine, 1 / (10 + vector rank),
   the same five for the item after it (a turn is found through its reply), and
   whether the question names its speaker. Recall@10 is read from the ranker's
   top 10 after de-duplication, as the library reads it.

The gain that matters is (3): ranked by what both rankings know, how much better
than ranked by what BM25 knows. The ranker is plain Newton-iterated logistic
regression with an L2 penalty, on standardized features, in numpy.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from _common import DATA_DIR, CachedEmbedder, print_table, require, say, write_results
from ctxwise.embeddings import Embedder, HashingEmbedder
from ctxwise.memory.evaluation import evaluate_recall, load_conversations, turn_items
from ctxwise.memory.longterm import LongTermMemory, lexical_query
from ctxwise.memory.sqlite import SQLiteStore
from ctxwise.memory.store import fts_tokens

LOCOMO = DATA_DIR / "locomo" / "locomo_dev5.json"
K = 10
DEPTH = 100
WEIGHTS = (0.25, 0.5, 0.75, 1.0)
L2 = 1.0


# ------------------------------------------------------------------ rankings


def collect(data: dict[str, Any], embedder: Embedder) -> list[dict[str, Any]]:
    """Per conversation: its items by seq and, per question, both rankings."""
    store = SQLiteStore(":memory:")
    out = []
    try:
        for conv in data["conversations"]:
            memory = LongTermMemory(store, ("bench", str(conv["id"])), embedder)
            items = turn_items(conv)
            memory.remember_many(items)
            found = store.by_seq(memory.namespace, list(range(len(items))))
            by_seq = {it.seq: it for it in found}
            seq_of = {it.id: it.seq for it in found}
            vectors = embedder.embed([q["question"] for q in conv["questions"]])
            questions = []
            for q, vec in zip(conv["questions"], vectors, strict=True):
                lex = store.lexical_search(
                    memory.namespace, lexical_query(q["question"], memory.stopwords), DEPTH
                )
                near = store.vector_search(memory.namespace, vec, DEPTH)
                questions.append(
                    {
                        "words": fts_tokens(q["question"]),
                        "evidence": {seq_of[e] for e in q["evidence"]},
                        "lexical": [(it.seq, score) for it, score in lex],
                        "vector": [(it.seq, score) for it, score in near],
                    }
                )
            out.append(
                {
                    "text": {s: it.text for s, it in by_seq.items()},
                    "speaker": {s: it.metadata.get("speaker") for s, it in by_seq.items()},
                    "questions": questions,
                }
            )
    finally:
        store.close()
    return out


def _names(words: list[str], speaker: object) -> bool:
    if not isinstance(speaker, str) or not speaker.strip():
        return False
    name = fts_tokens(speaker)
    return any(words[i : i + len(name)] == name for i in range(len(words) - len(name) + 1))


def features(
    conv: dict[str, Any], q: dict[str, Any], channels: Sequence[str]
) -> tuple[np.ndarray, list[int]]:
    """The candidates of one question and their feature rows."""
    lex = {s: (r, x) for r, (s, x) in enumerate(q["lexical"], start=1)}
    vec = {s: (r, x) for r, (s, x) in enumerate(q["vector"], start=1)}
    best_lex = q["lexical"][0][1] if q["lexical"] else 1.0
    best_cos = q["vector"][0][1] if q["vector"] else 0.0
    cands: set[int] = set()
    for channel in channels:
        cands |= {s for s, _ in q[channel]}
    cands |= {s - 1 for s in cands if s > 0}
    named = {conv["speaker"][s] for s in cands if _names(q["words"], conv["speaker"].get(s))}

    def one(s: int) -> list[float]:
        f: list[float] = []
        if "lexical" in channels:
            r, x = lex.get(s, (DEPTH + 50, 0.0))
            f += [x / best_lex if best_lex else 0.0, 1.0 / (10 + r)]
        if "vector" in channels:
            r, x = vec.get(s, (DEPTH + 50, best_cos - 0.5))
            f += [x, x - best_cos, 1.0 / (10 + r)]
        return f

    seqs = sorted(cands)
    rows = [
        [*one(s), *one(s + 1), float(len(named) == 1 and conv["speaker"].get(s) in named)]
        for s in seqs
    ]
    return np.asarray(rows, dtype=np.float64), seqs


def fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logistic regression (L2, Newton): standardization and weights."""
    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std == 0] = 1.0
    z = np.hstack([(x - mean) / std, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], L2)
    penalty[-1] = 0.0  # no penalty on the intercept
    for _ in range(25):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (p - y) + penalty * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return mean, std, w


def top_k(conv: dict[str, Any], seqs: list[int], scores: np.ndarray) -> list[int]:
    out: list[int] = []
    seen: set[str] = set()
    for i in np.argsort(-scores, kind="stable"):
        text = re.sub(r"\s+", " ", conv["text"][seqs[i]].strip().lower())
        if text in seen:
            continue
        seen.add(text)
        out.append(seqs[i])
        if len(out) == K:
            break
    return out


def learned(convs: list[dict[str, Any]], channels: Sequence[str]) -> float:
    """Leave-one-conversation-out recall@K of the ranker over ``channels``."""
    recalls: list[float] = []
    for held in range(len(convs)):
        xs, ys = [], []
        for i, conv in enumerate(convs):
            if i == held:
                continue
            for q in conv["questions"]:
                x, seqs = features(conv, q, channels)
                xs.append(x)
                ys.append(np.array([float(s in q["evidence"]) for s in seqs]))
        mean, std, w = fit(np.vstack(xs), np.concatenate(ys))
        conv = convs[held]
        for q in conv["questions"]:
            x, seqs = features(conv, q, channels)
            z = np.hstack([(x - mean) / std, np.ones((len(x), 1))])
            top = top_k(conv, seqs, z @ w)
            recalls.append(len(q["evidence"] & set(top)) / len(q["evidence"]))
    return round(float(np.mean(recalls)), 4)


# ------------------------------------------------------------------ main


def run(name: str, embedder: Embedder, data: dict[str, Any]) -> dict[str, Any]:
    cached = CachedEmbedder(embedder)
    sweep = {}
    for w in WEIGHTS:
        report = evaluate_recall(data, (K,), embedder=cached, options={"weights": (1.0, w)})
        sweep[w] = report
    default = sweep[0.5]
    lexical = default["baselines"]["lexical"]["recall_at"][str(K)]
    vector = default["baselines"]["vector"]["recall_at"][str(K)]
    best_w = max(WEIGHTS, key=lambda w: sweep[w]["recall_at"][str(K)])
    convs = collect(data, cached)
    lex_only = learned(convs, ("lexical",))
    both = learned(convs, ("lexical", "vector"))
    row = {
        "embedder": name,
        "hybrid": default["recall_at"][str(K)],
        "lexical": lexical,
        "vector": vector,
        "rrf_sweep": {str(w): sweep[w]["recall_at"][str(K)] for w in WEIGHTS},
        "rrf_best_weight": best_w,
        "rrf_best": sweep[best_w]["recall_at"][str(K)],
        "learned_lexical": lex_only,
        "learned_hybrid": both,
        "learned_gain": round(both - lex_only, 4),
        "target_gain": 0.03,
    }
    say(
        f"{name}: hybrid {row['hybrid']}, lexical {lexical}; learned ranker "
        f"{lex_only} -> {both} with vectors"
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--embedders", default="hashing,minilm", help="hashing and/or minilm (when installed)"
    )
    args = parser.parse_args()
    data = load_conversations(require(LOCOMO))
    rows = []
    for name in [e for e in args.embedders.split(",") if e]:
        if name == "hashing":
            rows.append(run(name, HashingEmbedder(), data))
        elif name == "minilm":
            try:
                from ctxwise.embeddings import SentenceTransformerEmbedder

                rows.append(run(name, SentenceTransformerEmbedder(), data))
            except ImportError as exc:  # MissingDependencyError is an ImportError
                say(f"minilm skipped: {exc}")
        else:
            raise SystemExit(f"unknown embedder {name!r}: choose hashing or minilm")
    print_table(
        f"LoCoMo dev, categories 1-4: recall@{K}; what fusing the vector ranking adds",
        [
            "embedder",
            "hybrid",
            "lexical",
            "vector",
            "best RRF w",
            "hybrid @ w",
            "learned lex",
            "learned both",
            "learned gain",
        ],
        [
            [
                r["embedder"],
                r["hybrid"],
                r["lexical"],
                r["vector"],
                r["rrf_best_weight"],
                r["rrf_best"],
                r["learned_lexical"],
                r["learned_hybrid"],
                f"{r['learned_gain']:+.4f}",
            ]
            for r in rows
        ],
        caption="learned = logistic regression, leave one conversation out; target gain +0.03",
    )
    write_results(
        "bench_fusion",
        {"k": K, "depth": DEPTH, "l2": L2, "data": str(LOCOMO), "rows": rows},
        packages=["numpy", "sentence-transformers"],
    )


if __name__ == "__main__":
    main()
