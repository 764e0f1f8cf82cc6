"""Long-term memory at scale: remember throughput, recall latency and file size.

For each size (default 10k and 100k; ``--sizes 10000,100000,1000000`` for the
1M row, which takes several minutes and ~1.5 GB of disk) a fresh SQLite store is
filled through ``LongTermMemory.remember_many`` (hashing embedder, batches of
2,000) with realistic synthetic customer-support sentences (a fixed seed), then
queried: hybrid recall p50/p99 over 200 queries drawn from the same generator.
PostgreSQL rows run when ``CTXWISE_PG_DSN`` names a server.

Targets (issue 4): remember >= 5,000 items/s batched into SQLite; recall p50
<= 20 ms at 100k items and <= 150 ms at 1M.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import fmt_ms, print_table, say, summarize_ns, write_results
from ctxwise.embeddings import HashingEmbedder
from ctxwise.memory import LongTermMemory, NewItem, SQLiteStore, Store

NAMES = ["Mia", "Omar", "Lena", "Kenji", "Ana", "Yusuf", "Priya", "Tom", "Chen", "Sofia"]
PRODUCTS = ["router", "laptop", "headphones", "standing desk", "coffee grinder", "monitor"]
VERBS = ["ordered", "returned", "asked about", "complained about", "upgraded", "cancelled"]
PLACES = ["Berlin", "Austin", "Lisbon", "Osaka", "Nairobi", "Toronto", "Seoul"]
DIM = 256


def sentence(rng: random.Random, i: int) -> str:
    order = rng.randrange(10**6, 10**7)
    amount = f"{rng.randrange(5, 900)}.{rng.randrange(100):02d}"
    date = f"2024-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
    return (
        f"{rng.choice(NAMES)} {rng.choice(VERBS)} the {rng.choice(PRODUCTS)} "
        f"(order W{order}) for ${amount}, shipping to {rng.choice(PLACES)} on {date}; "
        f"ticket T-{i}."
    )


def query(rng: random.Random) -> str:
    return (
        f"what did {rng.choice(NAMES)} do with the {rng.choice(PRODUCTS)} in {rng.choice(PLACES)}"
    )


def run(store: Store, size: int, label: str) -> dict[str, Any]:
    rng = random.Random(size)
    memory = LongTermMemory(store, ("bench", str(size)), HashingEmbedder(DIM), context=0)
    t0 = time.perf_counter()
    memory.remember_many((NewItem(sentence(rng, i)) for i in range(size)), batch_size=2000)
    insert_s = time.perf_counter() - t0
    memory.recall("warm up the vector cache", k=10)
    samples = []
    for _ in range(200):
        q = query(rng)
        t = time.perf_counter_ns()
        memory.recall(q, k=10)
        samples.append(time.perf_counter_ns() - t)
    latency = summarize_ns(samples)
    return {
        "backend": label,
        "items": size,
        "insert_seconds": round(insert_s, 3),
        "items_per_second": round(size / insert_s),
        **{k: round(v, 4) for k, v in latency.items() if k != "n"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        for size in sizes:
            path = Path(tmp) / f"m{size}.db"
            store = SQLiteStore(path)
            result = run(store, size, "sqlite")
            store.close()
            size_mb = sum(p.stat().st_size for p in Path(tmp).glob(f"m{size}.db*")) / 1e6
            result["file_mb"] = round(size_mb, 1)
            rows.append(result)
            rate, p50 = result["items_per_second"], result["p50_ms"]
            say(f"sqlite {size:,}: {rate:,} items/s, p50 {p50:.2f} ms")
            path.unlink()
        dsn = os.environ.get("CTXWISE_PG_DSN")
        if dsn:
            from ctxwise.memory.postgres import PostgresStore

            for size in sizes:
                store = PostgresStore(dsn, dim=DIM, schema=f"bench_{size}")
                try:
                    rows.append({**run(store, size, "postgres"), "file_mb": None})
                finally:
                    store.drop()  # type: ignore[attr-defined]
                    store.close()
        else:
            say("postgres rows skipped: set CTXWISE_PG_DSN (scripts/pg_server.py start DIR)")
    print_table(
        "LongTermMemory: remember (hashing embedder, batches of 2,000) and hybrid recall@10",
        ["backend", "items", "items/s", "p50 ms", "p99 ms", "file MB"],
        [
            [
                r["backend"],
                f"{r['items']:,}",
                f"{r['items_per_second']:,}",
                fmt_ms(r["p50_ms"]),
                fmt_ms(r["p99_ms"]),
                r["file_mb"] if r["file_mb"] is not None else "-",
            ]
            for r in rows
        ],
    )
    write_results("bench_memory", {"dim": DIM, "rows": rows}, packages=["numpy"])


if __name__ == "__main__":
    main()
