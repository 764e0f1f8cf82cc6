"""Per-turn overhead of ``Engine.turn`` (no LLM calls), by transcript size.

Transcripts: the three long Claude Code sessions of the shared data back to back
(tool ids suffixed per copy; ``_common.scaled``), cut at 10k, 50k, 100k and 200k
CharCounter tokens. Each is recorded into a fresh session (``Engine.record``, not
timed); then ``TURNS`` turns are timed, each adding a recorded-sized assistant
reply and a user message (the next messages of the same sessions, text only) with
``clock`` around ``engine.turn``: append, facts and rules, route, budget, edit,
gather, assemble, render and the commit to the store.

Rows:

- ``no edit``: budget 4 × the transcript and everything the turns add, so nothing
  is cleared or compacted (the turns the target is about);
- ``compacting``: budget a third of the transcript, so the first turn after recording
  clears and compacts (the extractive summarizer; reported apart, ``COMPACT_RUNS``
  fresh sessions, one turn each);
- ``baseline``: what any layer must do at least, measured in the same run: encode
  the whole history as an Anthropic request (``formats.anthropic.encode_messages``)
  and count it (``CharCounter.count_messages``), with no caching; ``ratio`` is the
  Engine's p50 over it.

Stores: the embedded default (a SQLite file in a temporary folder) and
``memory``. Target (issue 12): p50 <= 5 ms at 100k tokens for turns that do not
compact, growing no faster than linearly (``growth``: p50 at 2 × the size over
p50 at the size, per doubling; linear is 2).

Run: ``.venv/bin/python benchmarks/bench_engine.py``; writes
``benchmarks/results/bench_engine.json``. About a minute.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from _common import long_sessions, print_table, require, say, scaled, summarize_ns, write_results
from ctxwise import CharCounter
from ctxwise.config import EngineConfig
from ctxwise.engine import Engine
from ctxwise.formats import anthropic, read_transcript
from ctxwise.messages import Message, Transcript

SIZES = (10_000, 50_000, 100_000, 200_000)
TURNS = 60
COMPACT_RUNS = 3
TARGET_MS = 5.0
COUNTER = CharCounter()


def follow_ups(sessions: list[Transcript], n: int) -> list[tuple[Message, Message]]:
    """``n`` (assistant reply, user message) pairs of recorded text, in order."""
    replies = [m for t in sessions for m in t.messages if m.role == "assistant" and m.text.strip()]
    asks = [
        m
        for t in sessions
        for m in t.messages
        if m.role == "user" and m.text.strip() and not m.tool_results
    ]
    return [
        (
            Message.text_message("assistant", replies[i % len(replies)].text),
            Message.text_message("user", asks[i % len(asks)].text),
        )
        for i in range(n)
    ]


def engine_for(store: str, budget: int) -> Engine:
    return Engine(EngineConfig(store=store, budget=budget, system="You are a coding agent."))


def time_turns(
    store: str, prefix: Transcript, budget: int, pairs: list[tuple[Message, Message]]
) -> list[int]:
    with engine_for(store, budget) as engine:
        engine.record("bench", prefix.messages)
        samples = []
        for reply, ask in pairs:
            start = time.perf_counter_ns()
            result = engine.turn("bench", [reply, ask])
            samples.append(time.perf_counter_ns() - start)
            assert result.trace.compacted is None and result.trace.cleared is None
    return samples


def time_compacting(store_for: Any, prefix: Transcript, budget: int, runs: int) -> list[int]:
    samples = []
    for run in range(runs):
        with engine_for(store_for(run), budget) as engine:
            engine.record("bench", prefix.messages)
            start = time.perf_counter_ns()
            go_on = [Message.text_message("user", "Go on.")]  # after a recorded prefix
            result = engine.turn("bench", go_on, warn_unanswered=False)
            samples.append(time.perf_counter_ns() - start)
            assert result.trace.compacted is not None
    return samples


def time_baseline(prefix: Transcript, runs: int = 21) -> list[int]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        anthropic.encode_messages(prefix)
        COUNTER.count_messages(prefix.messages)
        samples.append(time.perf_counter_ns() - start)
    return samples


def main() -> None:
    sessions = [read_transcript(require(p)) for p in long_sessions()]
    pairs = follow_ups(sessions, TURNS)
    added = sum(COUNTER.count_messages(pair) for pair in pairs)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            prefix = scaled(sessions, size)
            tokens = COUNTER.count_messages(prefix.messages)
            say(f"{size:,} tokens: {len(prefix.messages)} messages ({tokens:,} tokens)")
            base = summarize_ns(time_baseline(prefix))
            for kind in ("sqlite", "memory"):

                def url(i: int, kind: str = kind, size: int = size) -> str:
                    path = Path(tmp) / f"{kind}-{size}-{i}.db"
                    return f"sqlite:///{path}" if kind == "sqlite" else "memory"

                roomy = 4 * (tokens + added)
                plain = summarize_ns(time_turns(url(99), prefix, roomy, pairs))
                comp = summarize_ns(time_compacting(url, prefix, tokens // 3, COMPACT_RUNS))
                rows.append(
                    {
                        "size": size,
                        "tokens": tokens,
                        "messages": len(prefix.messages),
                        "store": kind,
                        "no_edit": plain,
                        "compacting": comp,
                        "baseline": base,
                        "ratio": plain["p50_ms"] / base["p50_ms"],
                    }
                )
    for row in rows:
        bigger = [r for r in rows if r["store"] == row["store"] and r["size"] == 2 * row["size"]]
        row["growth"] = (
            bigger[0]["no_edit"]["p50_ms"] / row["no_edit"]["p50_ms"] if bigger else None
        )
    at_100k = [r for r in rows if r["size"] == 100_000]
    met = all(r["no_edit"]["p50_ms"] <= TARGET_MS for r in at_100k)
    print_table(
        "Engine.turn overhead (ms), no LLM calls",
        [
            "tokens",
            "store",
            "no edit p50",
            "p99",
            "compacting p50",
            "baseline p50",
            "ratio",
            "growth",
        ],
        [
            [
                f"{r['tokens']:,}",
                r["store"],
                f"{r['no_edit']['p50_ms']:.2f}",
                f"{r['no_edit']['p99_ms']:.2f}",
                f"{r['compacting']['p50_ms']:.0f}",
                f"{r['baseline']['p50_ms']:.2f}",
                f"{r['ratio']:.2f}",
                "-" if r["growth"] is None else f"{r['growth']:.2f}",
            ]
            for r in rows
        ],
    )
    say(f"target p50 <= {TARGET_MS} ms at 100k tokens (no edit): {'met' if met else 'NOT met'}")
    write_results(
        "bench_engine",
        {
            "turns": TURNS,
            "compact_runs": COMPACT_RUNS,
            "target_ms": TARGET_MS,
            "target_met": met,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
