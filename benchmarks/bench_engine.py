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
  is cleared or compacted (the turns the target is about); ``ledger off``: the same
  turns on an Engine whose ``ledger`` step was removed (issue 32: the ledger's cost
  per turn), the two Engines turn by turn in alternation, and ``ledger step`` the
  step's own time from the trace;
- ``compacting``: budget a third of the transcript, so the first turn after recording
  clears and compacts (the extractive summarizer; reported apart, ``COMPACT_RUNS``
  fresh sessions, one turn each); ``its effect``: remembering the compacted turns
  in long-term memory, which runs after the turn's commit on the Engine's worker
  thread (timed by ``Engine.wait`` right after the turn: the Engine's next call
  waits for it, so an agent's next turn, after an LLM call, finds it done).
  Target (issue 29): compacting p50 <= 100 ms at 100k tokens, <= 250 ms at 200k;
- ``baseline``: what any layer must do at least, measured in the same run: encode
  the whole history as an Anthropic request (``formats.anthropic.encode_messages``)
  and count it (``CharCounter.count_messages``), with no caching; ``ratio`` is the
  Engine's p50 over it.

Stores: the embedded default (a SQLite file in a temporary folder) and
``memory``. Target (issue 12): p50 <= 5 ms at 100k tokens for turns that do not
compact, growing no faster than linearly (``growth``: p50 at 2 × the size over
p50 at the size, per doubling; linear is 2).

Long session (issue 33: per-turn cost flat in session length). The same three
sessions back to back ``LONG_COPIES`` times (tool ids suffixed per copy), driven
turn by turn as ``ctxwise replay`` drives a recording (everything new before each
assistant message), into one session per store with the default config and a
budget of ``LONG_BUDGET`` tokens: the history is cleared and compacted as it
grows, compacted turns are remembered and recalled, so the live history stays
bounded while the log, the memory, the traces and the tool ids grow with every
turn. Every copy is timed; a row is one copy (434 turns): the first (turns 1-434,
a session of about 400 turns) and the last (turns 3,039-3,472), the same messages
at a session length 8 times longer. Per row: p50 and p99 of the turns that neither
clear nor compact (``no edit``; of those, the turns of a new user message, whose
recall searches the memory anew, apart), and of the clearing and the compacting
turns apart (their count sets the phase of a copy: an edit's cost follows the
live history, not the session's length). ``ratio``: the last copy over the first.
Target (issue 33): p50 and p99 of the no-edit turns within 1.5 × at 3,000+ turns.
The long session is replayed ``LONG_REPEATS`` times per store (a fresh session
each time) and each turn's time is its median over the replays: on a machine
shared with other work a p99 over a few hundred turns otherwise moves with
whatever else ran during one replay; a turn that is slow in every replay stays slow.

A turn's time is its own: the replay calls ``Engine.wait`` before each turn and
times it apart. After a compacting turn that wait is its effect (remembering the
compacted turns, on the Engine's worker thread), which the Engine's next call
waits for; an agent's next turn comes after an LLM call and finds it done, but a
back-to-back replay does not. ``with wait``: the no-edit turns' p99 with the wait
before them added (what a caller that turns again at once feels), and ``waited``:
how many turns waited for an effect, and the longest wait.

Run: ``.venv/bin/python benchmarks/bench_engine.py``; writes
``benchmarks/results/bench_engine.json``. About five minutes.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    _suffix_ids,
    long_sessions,
    print_table,
    require,
    say,
    scaled,
    summarize_ns,
    write_results,
)
from ctxwise import CharCounter
from ctxwise.config import EngineConfig
from ctxwise.engine import Engine
from ctxwise.formats import anthropic, read_transcript
from ctxwise.messages import Message, Transcript
from ctxwise.replay import _turns as replay_turns  # the turns `ctxwise replay` runs

SIZES = (10_000, 50_000, 100_000, 200_000)
TURNS = 60
COMPACT_RUNS = 3
TARGET_MS = 5.0
COUNTER = CharCounter()
LONG_COPIES = 8
LONG_BUDGET = 100_000
LONG_TARGET = 1.5
LONG_REPEATS = 3
"""Replays of the long session per store; a turn's time is its median over them."""
WAITED_NS = 1_000_000
"""A wait before a turn this long or longer counts as waiting for an effect."""
COMPACT_TARGET_MS = {100_000: 100.0, 200_000: 250.0}
"""Issue 29: the compacting turn's p50 (its effect runs after it, on the worker)."""


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
    # counted by char with no safety margin, as the committed figures were measured
    return Engine(
        EngineConfig(
            store=store,
            budget=budget,
            system="You are a coding agent.",
            counter="char",
            safety_margin=0,
        )
    )


def time_turns(
    stores: tuple[str, str], prefix: Transcript, budget: int, pairs: list[tuple[Message, Message]]
) -> tuple[list[int], list[int], list[float]]:
    """The no-edit turns with the ledger step (the default) and without it (removed
    from ``engine.steps``), each on its own session and store, the two turn by turn
    in alternation so both see the same machine; and the ledger step's own time."""
    with engine_for(stores[0], budget) as on, engine_for(stores[1], budget) as off:
        off.steps.remove("ledger")
        on.record("bench", prefix.messages)
        off.record("bench", prefix.messages)
        with_ledger: list[int] = []
        without: list[int] = []
        step_ms: list[float] = []
        for reply, ask in pairs:
            for engine, samples in ((on, with_ledger), (off, without)):
                start = time.perf_counter_ns()
                result = engine.turn("bench", [reply, ask])
                samples.append(time.perf_counter_ns() - start)
                assert result.trace.compacted is None and result.trace.cleared is None
                if engine is on:
                    assert result.trace.ledger is not None
                    step_ms.append(result.trace.timings_ms["ledger"])
                else:
                    assert result.trace.ledger is None
    return with_ledger, without, step_ms


def time_compacting(
    store_for: Any, prefix: Transcript, budget: int, runs: int
) -> tuple[list[int], list[int]]:
    """The compacting turn's time, and its effect's (remembering the compacted turns
    on the Engine's worker thread; ``Engine.wait`` until it is done)."""
    samples, effects = [], []
    for run in range(runs):
        with engine_for(store_for(run), budget) as engine:
            engine.record("bench", prefix.messages)
            engine.wait()
            start = time.perf_counter_ns()
            go_on = [Message.text_message("user", "Go on.")]  # after a recorded prefix
            result = engine.turn("bench", go_on, warn_unanswered=False)
            turned = time.perf_counter_ns()
            engine.wait()
            samples.append(turned - start)
            effects.append(time.perf_counter_ns() - turned)
            assert result.trace.compacted is not None
    return samples, effects


def time_baseline(prefix: Transcript, runs: int = 21) -> list[int]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        anthropic.encode_messages(prefix)
        COUNTER.count_messages(prefix.messages)
        samples.append(time.perf_counter_ns() - start)
    return samples


def long_turns(sessions: list[Transcript], copies: int) -> list[list[Message]]:
    """The turns of ``sessions`` back to back ``copies`` times (tool ids suffixed
    ``~COPY.SESSION``), as replay runs them."""
    messages = [
        _suffix_ids(m, f"~{c}.{i}")
        for c in range(copies)
        for i, t in enumerate(sessions)
        for m in t.messages
    ]
    return [list(new) for _, _, new in replay_turns(messages)]


def time_long(store: str, turns: list[list[Message]]) -> list[dict[str, Any]]:
    """Each turn's own time (ns), the time it waited for the last turn's effect
    before it (``Engine.wait``, timed apart), and what it did: cleared, compacted,
    a new question."""
    out = []
    with engine_for(store, LONG_BUDGET) as engine:
        for new in turns:
            start = time.perf_counter_ns()
            engine.wait()  # what the turn's own first step would wait for
            ready = time.perf_counter_ns()
            result = engine.turn("long", new, warn_unanswered=False)
            ns = time.perf_counter_ns() - ready
            out.append(
                {
                    "ns": ns,
                    "wait_ns": ready - start,
                    "cleared": result.trace.cleared is not None,
                    "compacted": result.trace.compacted is not None,
                    "asked": any(
                        m.role == "user" and m.kind == "message" and m.text.strip() for m in new
                    ),
                }
            )
    return out


def median_turns(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each turn's median time and wait over replays of the same turns (which clear,
    compact and ask alike in every replay)."""
    out = []
    for same in zip(*runs, strict=True):
        what = {k: v for k, v in same[0].items() if k not in ("ns", "wait_ns")}
        assert all({k: v for k, v in t.items() if k not in ("ns", "wait_ns")} == what for t in same)
        out.append(
            {
                **what,
                "ns": int(statistics.median(t["ns"] for t in same)),
                "wait_ns": int(statistics.median(t["wait_ns"] for t in same)),
            }
        )
    return out


def long_row(store: str, copy: int, first: int, turns: list[dict[str, Any]]) -> dict[str, Any]:
    def stats(picked: list[dict[str, Any]]) -> dict[str, float] | None:
        return summarize_ns([t["ns"] for t in picked]) if picked else None

    plain = [t for t in turns if not t["cleared"] and not t["compacted"]]
    waited = [t["wait_ns"] for t in turns if t["wait_ns"] >= WAITED_NS]
    return {
        "store": store,
        "copy": copy,
        "first_turn": first,
        "last_turn": first + len(turns) - 1,
        "no_edit": stats(plain),
        "no_edit_with_wait": summarize_ns([t["ns"] + t["wait_ns"] for t in plain])
        if plain
        else None,
        "waited": {**summarize_ns(waited), "max_ms": max(waited) / 1e6} if waited else None,
        "no_edit_same_question": stats([t for t in plain if not t["asked"]]),
        "no_edit_new_question": stats([t for t in plain if t["asked"]]),
        "clearing": stats([t for t in turns if t["cleared"] and not t["compacted"]]),
        "compacting": stats([t for t in turns if t["compacted"]]),
    }


def long_session(sessions: list[Transcript], tmp: str) -> dict[str, Any]:
    turns = long_turns(sessions, LONG_COPIES)
    per_copy = len(turns) // LONG_COPIES
    say(f"long session: {len(turns):,} turns ({LONG_COPIES} copies of {per_copy})")
    copies: list[dict[str, Any]] = []
    for kind in ("sqlite", "memory"):
        runs = [
            time_long(
                f"sqlite:///{Path(tmp) / f'long-{r}.db'}" if kind == "sqlite" else "memory", turns
            )
            for r in range(LONG_REPEATS)
        ]
        timed = median_turns(runs)
        for c in range(LONG_COPIES):
            part = timed[c * per_copy : (c + 1) * per_copy]
            copies.append(long_row(kind, c + 1, c * per_copy + 1, part))
    rows = []
    for kind in ("sqlite", "memory"):
        first, last = (r for r in copies if r["store"] == kind and r["copy"] in (1, LONG_COPIES))
        for row in (first, last):
            rows.append(
                {
                    **row,
                    "ratio_p50": row["no_edit"]["p50_ms"] / first["no_edit"]["p50_ms"],
                    "ratio_p99": row["no_edit"]["p99_ms"] / first["no_edit"]["p99_ms"],
                    "ratio_p99_with_wait": row["no_edit_with_wait"]["p99_ms"]
                    / first["no_edit_with_wait"]["p99_ms"],
                }
            )
    met = all(r["ratio_p50"] <= LONG_TARGET and r["ratio_p99"] <= LONG_TARGET for r in rows)
    met_with_wait = all(r["ratio_p99_with_wait"] <= LONG_TARGET for r in rows)
    return {
        "copies": LONG_COPIES,
        "repeats": LONG_REPEATS,
        "turns": len(turns),
        "budget": LONG_BUDGET,
        "target_ratio": LONG_TARGET,
        "target_met": met,
        "target_met_with_wait": met_with_wait,
        "rows": rows,
        "per_copy": copies,
    }


def fmt(stats: dict[str, float] | None, key: str = "p50_ms") -> str:
    return "-" if stats is None else f"{stats[key]:.2f}"


def print_long(long: dict[str, Any]) -> None:
    print_table(
        f"Long session: {long['turns']:,} turns, budget {long['budget']:,} tokens (ms)",
        [
            "store",
            "turns",
            "no edit n",
            "p50",
            "p99",
            "p99 with wait",
            "same question p99",
            "new question p50",
            "clearing n",
            "p50",
            "compacting n",
            "p50",
            "waited n",
            "max",
            "ratio p50",
            "ratio p99",
            "with wait",
        ],
        [
            [
                r["store"],
                f"{r['first_turn']:,}-{r['last_turn']:,}",
                r["no_edit"]["n"],
                fmt(r["no_edit"]),
                fmt(r["no_edit"], "p99_ms"),
                fmt(r["no_edit_with_wait"], "p99_ms"),
                fmt(r["no_edit_same_question"], "p99_ms"),
                fmt(r["no_edit_new_question"]),
                0 if r["clearing"] is None else r["clearing"]["n"],
                fmt(r["clearing"]),
                0 if r["compacting"] is None else r["compacting"]["n"],
                fmt(r["compacting"]),
                0 if r["waited"] is None else r["waited"]["n"],
                fmt(r["waited"], "max_ms"),
                f"{r['ratio_p50']:.2f}",
                f"{r['ratio_p99']:.2f}",
                f"{r['ratio_p99_with_wait']:.2f}",
            ]
            for r in long["rows"]
        ],
    )
    print_table(
        "Long session, every copy: no-edit turns (ms)",
        ["store", "turns", "p50", "p99", "same question p99", "new question p50", "clearing n"],
        [
            [
                r["store"],
                f"{r['first_turn']:,}-{r['last_turn']:,}",
                fmt(r["no_edit"]),
                fmt(r["no_edit"], "p99_ms"),
                fmt(r["no_edit_same_question"], "p99_ms"),
                fmt(r["no_edit_new_question"]),
                0 if r["clearing"] is None else r["clearing"]["n"],
            ]
            for r in long["per_copy"]
        ],
    )
    say(
        f"target: no-edit p50 and p99 at {long['turns']:,} turns within {LONG_TARGET} x "
        f"the first copy: {'met' if long['target_met'] else 'NOT met'} (p99 with the wait "
        f"for the last turn's effect: {'met' if long['target_met_with_wait'] else 'NOT met'})"
    )


def main() -> None:
    sessions = [read_transcript(require(p)) for p in long_sessions()]
    pairs = follow_ups(sessions, TURNS)
    added = sum(COUNTER.count_messages(pair) for pair in pairs)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        long = long_session(sessions, tmp)
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
                on_ns, off_ns, step_ms = time_turns((url(98), url(99)), prefix, roomy, pairs)
                plain, no_ledger = summarize_ns(on_ns), summarize_ns(off_ns)
                turn_ns, effect_ns = time_compacting(url, prefix, tokens // 3, COMPACT_RUNS)
                comp, effect = summarize_ns(turn_ns), summarize_ns(effect_ns)
                rows.append(
                    {
                        "size": size,
                        "tokens": tokens,
                        "messages": len(prefix.messages),
                        "store": kind,
                        "no_edit": plain,
                        "no_edit_without_ledger": no_ledger,
                        "ledger_step_p50_ms": statistics.median(step_ms),
                        "compacting": comp,
                        "compacting_effect": effect,
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
    compacting_met = all(
        r["compacting"]["p50_ms"] <= COMPACT_TARGET_MS[r["size"]]
        for r in rows
        if r["size"] in COMPACT_TARGET_MS
    )
    print_table(
        "Engine.turn overhead (ms), no LLM calls",
        [
            "tokens",
            "store",
            "no edit p50",
            "p99",
            "ledger off p50",
            "ledger step p50",
            "compacting p50",
            "its effect p50",
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
                f"{r['no_edit_without_ledger']['p50_ms']:.2f}",
                f"{r['ledger_step_p50_ms']:.3f}",
                f"{r['compacting']['p50_ms']:.0f}",
                f"{r['compacting_effect']['p50_ms']:.0f}",
                f"{r['baseline']['p50_ms']:.2f}",
                f"{r['ratio']:.2f}",
                "-" if r["growth"] is None else f"{r['growth']:.2f}",
            ]
            for r in rows
        ],
    )
    say(f"target p50 <= {TARGET_MS} ms at 100k tokens (no edit): {'met' if met else 'NOT met'}")
    targets = ", ".join(f"{ms} ms at {size // 1000}k" for size, ms in COMPACT_TARGET_MS.items())
    say(f"target compacting p50 <= {targets}: {'met' if compacting_met else 'NOT met'}")
    print_long(long)
    write_results(
        "bench_engine",
        {
            "turns": TURNS,
            "compact_runs": COMPACT_RUNS,
            "target_ms": TARGET_MS,
            "target_met": met,
            "compact_target_ms": {str(k): v for k, v in COMPACT_TARGET_MS.items()},
            "compact_target_met": compacting_met,
            "rows": rows,
            "long_session": long,
        },
    )


if __name__ == "__main__":
    main()
