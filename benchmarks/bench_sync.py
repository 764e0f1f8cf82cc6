"""``Engine.sync`` per model call at 100 / 300 / 600 messages, on a SQLite file.

The history: the messages of the Claude Code sessions in the shared data, in file
order, cycled (a copy beyond the first cycle gets ``(copy k)`` appended to its first
text, so no two messages share content), recorded in the session up to the size.
Then, per size, measured in the same run (p50 and p99 of one call):

- ``sync, 2 new``: the whole history with two more messages (a reply and the next
  question), as a framework hands it over before a model call; the two are recorded
  after the timer, so every call sees a session its own Engine moved on;
- ``sync, none new``: the same history again;
- ``sync, cold``: a fresh Engine on the same file (its keys read from the whole log
  once, as after a restart);
- ``log read`` (the baseline): reading and decoding the session's whole log, which the
  integrations did whenever the session's version had moved.

The default sync keys (a SHA-256 of each message's content) are the costly case: an
integration's own keys (LangChain message ids) cost less.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from _common import (
    claude_code_transcripts,
    fmt_ms,
    print_table,
    ratio,
    summarize_ns,
    time_ns,
    write_results,
)
from ctxwise import Engine, EngineConfig, Message, TextBlock
from ctxwise.formats import neutral

SIZES = (100, 300, 600)
CALLS = 40
COLD_CALLS = 5


def messages(n: int) -> list[Message]:
    """``n`` messages of the Claude Code sessions, cycled, each copy told apart."""
    pool = [m for t in claude_code_transcripts() for m in t.messages if m.role != "system"]
    out: list[Message] = []
    while len(out) < n:
        copy = len(out) // len(pool)
        m = pool[len(out) % len(pool)]
        if copy:
            text = TextBlock(f"(copy {copy})")
            m = replace(m, content=(*m.content, text))
        out.append(m)
    return out


def _engine(path: Path) -> Engine:
    # counted by char with no safety margin, as the committed figures were measured
    return Engine(
        EngineConfig.model_validate(
            {"store": f"sqlite:///{path}", "budget": 200_000, "counter": "char", "safety_margin": 0}
        )
    )


def measure(size: int, root: Path) -> dict[str, Any]:
    history = messages(size + 2 * CALLS + 2)
    path = root / f"sync-{size}.db"
    with _engine(path) as engine:
        engine.record("s", history[:size])
        engine.sync("s", history[:size])  # its keys, once
        grown, none, log = [], [], []
        at = size
        for _ in range(CALLS):
            given = history[: at + 2]
            grown.append(time_ns(lambda given=given: engine.sync("s", given)))
            engine.record("s", given[at:])
            at += 2
            none.append(time_ns(lambda given=given: engine.sync("s", given)))
            log.append(
                time_ns(lambda: neutral.decode_messages(engine.sessions.log("s")))  # baseline
            )
    cold = []
    for _ in range(COLD_CALLS):
        with _engine(path) as fresh:
            given = history[:at]
            cold.append(time_ns(lambda fresh=fresh, given=given: fresh.sync("s", given)))
    return {
        "size": size,
        "sync_2_new": summarize_ns(grown),
        "sync_none_new": summarize_ns(none),
        "sync_cold": summarize_ns(cold),
        "log_read": summarize_ns(log),
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(size, Path(tmp)) for size in SIZES]
    print_table(
        "Engine.sync per model call (SQLite, default content keys)",
        ["messages", "sync, 2 new", "sync, none new", "sync, cold", "log read", "2 new / log"],
        [
            [
                r["size"],
                fmt_ms(r["sync_2_new"]["p50_ms"]),
                fmt_ms(r["sync_none_new"]["p50_ms"]),
                fmt_ms(r["sync_cold"]["p50_ms"]),
                fmt_ms(r["log_read"]["p50_ms"]),
                f"{ratio(r['sync_2_new']['p50_ms'], r['log_read']['p50_ms']):.2f}",
            ]
            for r in rows
        ],
        caption="p50 of one call; 'log read': reading and decoding the whole log (baseline)",
    )
    write_results("bench_sync", {"calls": CALLS, "rows": rows})


if __name__ == "__main__":
    main()
