"""Long-term memory at scale: remember throughput, recall latency, index quality, size.

For each size (default 10k, 100k and 1M for SQLite; ``--pg-sizes`` for PostgreSQL,
default 10k and 100k, which runs when ``CTXWISE_PG_DSN`` names a server) a fresh
store is filled through ``LongTermMemory.remember_many`` (hashing embedder, dim 256,
batches of 2,000) with realistic synthetic customer-support sentences (a fixed
seed), then queried with 200 questions from a second fixed-seed generator:

- ``items/s``: remember throughput (embedding included);
- ``index s``: building the HNSW index after the load: SQLite's
  (``SQLiteStore.index_info``; from 50k vectors, with the ``ann`` extra) and
  PostgreSQL's (the load runs in ``PostgresStore.bulk_load()``, which builds it at
  the end with ``--pg-maintenance-work-mem``, default 4GB);
- recall p50/p99 for hybrid recall@10 (the default) and for the lexical-only and
  vector-only modes, measured after a first ``cold`` pass of hybrid recall over the
  same queries (also reported: it is where a store pays for what it caches per
  process, such as PostgreSQL's exact count of a common term), and hybrid recall
  p99 while writing (one item remembered before each query, untimed);
- ``vec top10``: how many of the vector search's top 10 are truly in the exact top
  10 (ties counted: a hit whose cosine reaches the exact 10th-best counts), against
  brute force over the same vectors;
- ``lex top10``: the same for SQLite's bounded lexical search against FTS5's exact
  BM25 over all query terms (50 queries; the exact ranking is slow by design);
- file size (SQLite: the database, and the index directory beside it) or database
  size (PostgreSQL: tables, indexes and TOAST of the store's schema).

Targets (issue 4): remember >= 5,000 items/s batched into SQLite; recall p50
<= 20 ms at 100k items and <= 150 ms at 1M (SQLite, this machine).

The 1M SQLite row takes ~10 minutes and ~2 GB of disk in a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import tempfile
import time
from collections.abc import Sequence
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
QUERIES = 200
LEXICAL_CHECKS = 50


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


def queries(size: int) -> list[str]:
    rng = random.Random(size + 1)
    return [query(rng) for _ in range(QUERIES)]


def timed(fn: Any, qs: Sequence[str]) -> dict[str, float]:
    samples = []
    for q in qs:
        t = time.perf_counter_ns()
        fn(q)
        samples.append(time.perf_counter_ns() - t)
    stats = summarize_ns(samples)
    return {"p50_ms": round(stats["p50_ms"], 3), "p99_ms": round(stats["p99_ms"], 3)}


def exact_vector_floors(store: Store, ns: tuple[str, ...], qs: Sequence[str]) -> list[float]:
    """The exact 10th-best cosine for each query (brute force)."""
    emb = HashingEmbedder(DIM)
    return [store.vector_search(ns, emb.embed([q])[0], 10)[-1][1] for q in qs]


def vector_overlap(
    store: Store, ns: tuple[str, ...], qs: Sequence[str], floors: Sequence[float]
) -> float:
    emb = HashingEmbedder(DIM)
    hits = 0
    for q, floor in zip(qs, floors, strict=True):
        found = store.vector_search(ns, emb.embed([q])[0], 10)
        hits += sum(1 for _, s in found if s >= floor - 1e-5)
    return round(hits / (10 * len(qs)), 4)


def lexical_overlap(
    store: SQLiteStore, ns: tuple[str, ...], path: Path, qs: Sequence[str]
) -> float:
    """Bounded lexical top 10 against FTS5's exact BM25 over every query term."""
    conn = sqlite3.connect(path)
    table = f'"{store.lexical_table(ns)}"'  # the namespace's FTS5 table
    hits = total = 0
    for q in qs[:LEXICAL_CHECKS]:
        match = " OR ".join('"' + t + '"' for t in sorted(set(store.analyzer.words(q))))
        exact = conn.execute(
            f"SELECT rowid, -bm25({table}) FROM {table} WHERE {table} MATCH ?"
            f" ORDER BY bm25({table}) LIMIT 2000",
            (match,),
        ).fetchall()
        if len(exact) < 10:
            continue
        floor = exact[9][1]
        good = {r for r, s in exact if s >= floor - 1e-9}
        seqs = [it.seq for it, _ in store.lexical_search(ns, q, 10)]
        rowids = [
            conn.execute(
                "SELECT rowid FROM items WHERE ns = ? AND seq = ?", ("/".join(ns), s)
            ).fetchone()[0]
            for s in seqs
        ]
        hits += sum(1 for r in rowids if r in good)
        total += 10
    conn.close()
    return round(hits / total, 4) if total else float("nan")


def fill(store: Store, size: int) -> tuple[LongTermMemory, float]:
    rng = random.Random(size)
    memory = LongTermMemory(store, ("bench", str(size)), HashingEmbedder(DIM), context=0)
    t0 = time.perf_counter()
    memory.remember_many((NewItem(sentence(rng, i)) for i in range(size)), batch_size=2000)
    return memory, time.perf_counter() - t0


def measure(memory: LongTermMemory, qs: Sequence[str], size: int) -> dict[str, Any]:
    """The first pass over the queries (hybrid, ``cold``: each term seen for the
    first time by this process), then each mode again over the same queries, then
    hybrid again with one item remembered before each query (``writing``; the
    write is not timed)."""
    memory.recall("warm up the caches", k=10)
    cold = timed(lambda q: memory.recall(q, k=10), qs)
    steady = {
        mode: timed(lambda q, m=mode: memory.recall(q, k=10, mode=m), qs)
        for mode in ("hybrid", "lexical", "vector")
    }
    rng = random.Random(size + 2)
    samples = []
    for i, q in enumerate(qs):
        memory.remember(sentence(rng, size + i))
        t = time.perf_counter_ns()
        memory.recall(q, k=10)
        samples.append(time.perf_counter_ns() - t)
    stats = summarize_ns(samples)
    writing = {"p50_ms": round(stats["p50_ms"], 3), "p99_ms": round(stats["p99_ms"], 3)}
    return {"cold": cold, **steady, "writing": writing}


def dir_mb(path: Path) -> float:
    if not path.exists():
        return 0.0
    return round(sum(p.stat().st_size for p in path.iterdir()) / 1e6, 1)


def run_sqlite(size: int, tmp: Path, floors: dict[int, list[float]]) -> dict[str, Any]:
    path = tmp / f"m{size}.db"
    store = SQLiteStore(path)
    memory, insert_s = fill(store, size)
    ns = memory.namespace
    t0 = time.perf_counter()
    info = store.index_info(ns)
    index_s = time.perf_counter() - t0
    qs = queries(size)
    latency = measure(memory, qs, size)
    exact = SQLiteStore(path, ann_min_items=None)
    floors[size] = exact_vector_floors(exact, ns, qs)
    exact.close()
    vec = vector_overlap(store, ns, qs, floors[size]) if info.method == "hnsw" else 1.0
    lex = lexical_overlap(store, ns, path, qs)
    store.close()
    db_mb = sum(p.stat().st_size for p in tmp.glob(f"m{size}.db*") if p.is_file()) / 1e6
    row = {
        "backend": "sqlite",
        "items": size,
        "insert_seconds": round(insert_s, 3),
        "items_per_second": round(size / insert_s),
        "vector_method": info.method,
        "index_seconds": round(index_s, 2),
        "latency": latency,
        "vector_top10_overlap": vec,
        "lexical_top10_overlap": lex,
        "file_mb": round(db_mb, 1),
        "index_mb": dir_mb(Path(str(path) + ".ann")),
    }
    for p in tmp.glob(f"m{size}.db*"):
        if p.is_dir():
            for f in p.iterdir():
                f.unlink()
            p.rmdir()
        else:
            p.unlink()
    return row


def run_postgres(
    dsn: str, size: int, floors: dict[int, list[float]], work_mem: str
) -> dict[str, Any]:
    import psycopg

    from ctxwise.memory.postgres import EXACT_MAX_ITEMS, PostgresStore

    schema = f"bench_{size}"
    store = PostgresStore(dsn, dim=DIM, schema=schema)
    try:
        # the HNSW index is built once after the load, as pgvector recommends
        # (maintaining it row by row: 576 items/s at 100k)
        # (with the graph inside maintenance_work_mem: past it, pgvector's build
        # slows down by an order of magnitude)
        with store.bulk_load(maintenance_work_mem=work_mem):
            memory, insert_s = fill(store, size)
            loaded = time.perf_counter()
        index_s = time.perf_counter() - loaded
        qs = queries(size)
        latency = measure(memory, qs, size)
        vec = vector_overlap(store, memory.namespace, qs, floors[size]) if size in floors else None
        with psycopg.connect(dsn) as conn:
            found = conn.execute(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relkind = 'r'",
                [schema],
            ).fetchone()
        db_mb = round(float(found[0]) / 1e6, 1) if found and found[0] is not None else None
    finally:
        store.drop()
    return {
        "backend": "postgres",
        "items": size,
        "insert_seconds": round(insert_s, 3),
        "items_per_second": round(size / insert_s),
        # a namespace of at most EXACT_MAX_ITEMS items is scanned exactly
        "vector_method": "exact" if size <= EXACT_MAX_ITEMS else "hnsw",
        "index_seconds": round(index_s, 1),
        "latency": latency,
        "vector_top10_overlap": vec,
        "lexical_top10_overlap": None,
        "file_mb": db_mb,
        "index_mb": None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="SQLite sizes")
    parser.add_argument("--pg-sizes", default="10000,100000", help="PostgreSQL sizes")
    parser.add_argument(
        "--pg-maintenance-work-mem",
        default="4GB",
        help="maintenance_work_mem for the HNSW build after a bulk load (default 4GB)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    pg_sizes = [int(s) for s in args.pg_sizes.split(",") if s]
    rows = []
    floors: dict[int, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        for size in sizes:
            row = run_sqlite(size, Path(tmp), floors)
            rows.append(row)
            say(
                f"sqlite {size:,}: {row['items_per_second']:,} items/s, "
                f"hybrid p50 {row['latency']['hybrid']['p50_ms']:.2f} ms"
            )
    dsn = os.environ.get("CTXWISE_PG_DSN")
    if dsn and pg_sizes:
        for size in pg_sizes:
            row = run_postgres(dsn, size, floors, args.pg_maintenance_work_mem)
            rows.append(row)
            say(
                f"postgres {size:,}: {row['items_per_second']:,} items/s, "
                f"hybrid p50 {row['latency']['hybrid']['p50_ms']:.2f} ms"
            )
    else:
        say("postgres rows skipped: set CTXWISE_PG_DSN (scripts/pg_server.py start DIR)")

    def opt(x: object) -> str:
        return "-" if x is None else str(x)

    print_table(
        "LongTermMemory: remember (hashing embedder, dim 256, batches of 2,000), recall@10",
        [
            "backend",
            "items",
            "items/s",
            "index s",
            "hybrid p50",
            "hybrid p99",
            "cold p99",
            "writing p99",
            "lexical p50",
            "vector p50",
            "vec top10",
            "lex top10",
            "file MB",
            "index MB",
        ],
        [
            [
                r["backend"],
                f"{r['items']:,}",
                f"{r['items_per_second']:,}",
                opt(r["index_seconds"]),
                fmt_ms(r["latency"]["hybrid"]["p50_ms"]),
                fmt_ms(r["latency"]["hybrid"]["p99_ms"]),
                fmt_ms(r["latency"]["cold"]["p99_ms"]),
                fmt_ms(r["latency"]["writing"]["p99_ms"]),
                fmt_ms(r["latency"]["lexical"]["p50_ms"]),
                fmt_ms(r["latency"]["vector"]["p50_ms"]),
                opt(r["vector_top10_overlap"]),
                opt(r["lexical_top10_overlap"]),
                opt(r["file_mb"]),
                opt(r["index_mb"]),
            ]
            for r in rows
        ],
        caption="latencies in ms; top10 = share of the exact top 10 found (ties counted)",
    )
    write_results(
        "bench_memory",
        {"dim": DIM, "queries": QUERIES, "rows": rows},
        packages=["numpy", "usearch", "psycopg", "pgvector"],
    )


if __name__ == "__main__":
    main()
