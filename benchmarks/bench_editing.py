"""Clearing a ~150,000-token transcript: ``clear_tool_uses`` and ``clear_thinking``.

Transcripts:

- the three long Claude Code sessions of the shared data, whole (about 121k–146k
  CharCounter tokens each);
- a synthetic session scaled to 150,000 CharCounter tokens: tool loops (one user
  turn, then assistant text + thinking + one tool_use, then its result) whose
  texts are the real tool results and prose of the Claude Code sessions, cycled
  in file order until the transcript reaches 150,000 tokens. No randomness.

Measured per transcript (one call each; p50 and p99 over ``ITERATIONS`` runs):

- ``clear_tool_uses(trigger_tokens=100_000, keep_last=3)`` with the default
  CharCounter. Target: <= 100 ms at p50 on a ~150k-token transcript.
- the same with ``clear_inputs=True``;
- ``clear_thinking(keep_turns=1)``;
- ``count_messages`` alone, the floor every edit pays (it must count the window
  to compare with the trigger): the ``ratio`` column is clear / count.
- on the longest real session, ``clear_tool_uses`` with a fresh
  ``TiktokenCounter`` per call (cold cache; exact o200k_base counts), when it
  loads here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from _common import (
    claude_code_transcripts,
    fmt_ms,
    long_sessions,
    print_table,
    ratio,
    say,
    summarize_ns,
    time_ns,
    write_results,
)
from ctxwise import (
    CharCounter,
    Message,
    TextBlock,
    ThinkingBlock,
    TiktokenCounter,
    TokenCounter,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    clear_thinking,
    clear_tool_uses,
    read_transcript,
)
from ctxwise.errors import MissingDependencyError, TokenizerUnavailableError

ITERATIONS = 50
TIKTOKEN_ITERATIONS = 10
SYNTHETIC_TOKENS = 150_000
TARGET_MS = 100.0
TRIGGER = 100_000
KEEP_LAST = 3


def real_texts() -> tuple[list[str], list[str]]:
    """(tool results, prose) of every Claude Code transcript, in file order."""
    results: list[str] = []
    prose: list[str] = []
    for t in claude_code_transcripts():
        for m in t.messages:
            for b in m.content:
                if isinstance(b, ToolResultBlock) and isinstance(b.content, str) and b.content:
                    results.append(b.content)
                elif isinstance(b, TextBlock) and b.text.strip() and m.kind == "message":
                    prose.append(b.text)
    return results, prose


def synthetic(tokens: int) -> Transcript:
    """A tool-loop session of at least ``tokens`` CharCounter tokens, from real texts."""
    results, prose = real_texts()
    counter = CharCounter()
    msgs: list[Message] = []
    total = 0
    i = 0
    while total < tokens:
        turn = [
            Message.text_message("user", prose[i % len(prose)]),
            Message(
                "assistant",
                (
                    ThinkingBlock(prose[(i + 1) % len(prose)], f"sig-{i}"),
                    TextBlock(prose[(i + 2) % len(prose)]),
                    ToolUseBlock(f"toolu_{i:05d}", "Bash", {"command": f"step {i}"}),
                ),
            ),
            Message("user", (ToolResultBlock(f"toolu_{i:05d}", results[i % len(results)]),)),
        ]
        msgs.extend(turn)
        total += counter.count_messages(turn)
        i += 1
    return Transcript(tuple(msgs), format="anthropic", source=f"synthetic-{tokens}")


def timed(fn: Callable[[], object], iterations: int) -> dict[str, float]:
    fn()  # warm-up
    return summarize_ns([time_ns(fn) for _ in range(iterations)])


def bench(name: str, t: Transcript) -> dict[str, Any]:
    counter = CharCounter()
    r = clear_tool_uses(t, trigger_tokens=TRIGGER, keep_last=KEEP_LAST, counter=counter)
    ri = clear_tool_uses(
        t, trigger_tokens=TRIGGER, keep_last=KEEP_LAST, clear_inputs=True, counter=counter
    )
    th = clear_thinking(t, counter=counter)
    assert r.applied and r.transcript.problems("anthropic") == []
    timing = {
        "count_messages": timed(lambda: counter.count_messages(t.messages), ITERATIONS),
        "clear_tool_uses": timed(
            lambda: clear_tool_uses(
                t, trigger_tokens=TRIGGER, keep_last=KEEP_LAST, counter=counter
            ),
            ITERATIONS,
        ),
        "clear_tool_uses+inputs": timed(
            lambda: clear_tool_uses(
                t, trigger_tokens=TRIGGER, keep_last=KEEP_LAST, clear_inputs=True, counter=counter
            ),
            ITERATIONS,
        ),
        "clear_thinking": timed(lambda: clear_thinking(t, counter=counter), ITERATIONS),
    }
    return {
        "transcript": name,
        "messages": len(t.messages),
        "tool_uses": sum(len(m.tool_uses) for m in t.messages),
        "tokens_before": r.tokens_before,
        "clear_tool_uses": {
            "tokens_after": r.tokens_after,
            "tokens_freed": r.tokens_freed,
            "freed_share": r.tokens_freed / r.tokens_before,
            "cleared_tool_uses": r.cleared_tool_uses,
        },
        "clear_tool_uses+inputs": {
            "tokens_after": ri.tokens_after,
            "freed_share": ri.tokens_freed / ri.tokens_before,
        },
        "clear_thinking": {"tokens_freed": th.tokens_freed, "blocks": len(th.cleared)},
        "timing": timing,
    }


def bench_tiktoken(t: Transcript) -> dict[str, Any] | str:
    try:
        probe: TokenCounter = TiktokenCounter("o200k_base")
    except (MissingDependencyError, TokenizerUnavailableError) as exc:
        return str(exc)
    r = clear_tool_uses(t, trigger_tokens=TRIGGER, keep_last=KEEP_LAST, counter=probe)
    samples = []
    for _ in range(TIKTOKEN_ITERATIONS):
        fresh = TiktokenCounter("o200k_base")  # cold cache, built outside the timer
        samples.append(
            time_ns(
                lambda c=fresh: clear_tool_uses(  # type: ignore[misc]
                    t, trigger_tokens=TRIGGER, keep_last=KEEP_LAST, counter=c
                )
            )
        )
    return {
        "counter": probe.name,
        "tokens_before": r.tokens_before,
        "tokens_after": r.tokens_after,
        "freed_share": r.tokens_freed / r.tokens_before,
        "timing": summarize_ns(samples),
    }


def main() -> None:
    cases = [(p.name[:13], read_transcript(p)) for p in long_sessions()]
    cases.append((f"synthetic {SYNTHETIC_TOKENS // 1000}k", synthetic(SYNTHETIC_TOKENS)))
    results = [bench(name, t) for name, t in cases]
    rows = []
    for r in results:
        tm = r["timing"]
        clear = tm["clear_tool_uses"]
        rows.append(
            [
                r["transcript"],
                f"{r['messages']:,}",
                f"{r['tokens_before']:,}",
                f"{r['clear_tool_uses']['freed_share']:.1%}",
                f"{r['clear_tool_uses+inputs']['freed_share']:.1%}",
                fmt_ms(tm["count_messages"]["p50_ms"]),
                fmt_ms(clear["p50_ms"]),
                fmt_ms(clear["p99_ms"]),
                f"{ratio(clear['p50_ms'], tm['count_messages']['p50_ms']):.1f}",
                fmt_ms(tm["clear_tool_uses+inputs"]["p50_ms"]),
                fmt_ms(tm["clear_thinking"]["p50_ms"]),
                "yes" if clear["p50_ms"] <= TARGET_MS else "NO",
            ]
        )
    print_table(
        f"clear_tool_uses(trigger={TRIGGER:,}, keep_last={KEEP_LAST}), CharCounter "
        f"({ITERATIONS} runs; ms)",
        [
            "transcript",
            "msgs",
            "tokens",
            "freed",
            "freed +inputs",
            "count p50",
            "clear p50",
            "clear p99",
            "ratio",
            "+inputs p50",
            "thinking p50",
            f"<= {TARGET_MS:g} ms",
        ],
        rows,
    )
    longest = max(cases[:-1], key=lambda c: CharCounter().count_messages(c[1].messages))
    tik = bench_tiktoken(longest[1])
    if isinstance(tik, str):
        say(f"TiktokenCounter skipped: {tik}")
    else:
        say(
            f"{longest[0]} with a cold TiktokenCounter ({tik['counter']}): "
            f"{tik['tokens_before']:,} tokens, frees {tik['freed_share']:.1%}, "
            f"p50 {fmt_ms(tik['timing']['p50_ms'])} ms, p99 {fmt_ms(tik['timing']['p99_ms'])} ms"
        )
    met = all(r["timing"]["clear_tool_uses"]["p50_ms"] <= TARGET_MS for r in results)
    write_results(
        "bench_editing",
        {
            "parameters": {
                "iterations": ITERATIONS,
                "trigger_tokens": TRIGGER,
                "keep_last": KEEP_LAST,
                "synthetic_tokens": SYNTHETIC_TOKENS,
            },
            "target": {"clear_p50_ms": TARGET_MS, "met": met},
            "results": results,
            "tiktoken_longest": {"transcript": longest[0], "result": tik},
        },
    )


if __name__ == "__main__":
    main()
