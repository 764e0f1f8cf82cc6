"""Compacting a ~150,000-token transcript with the extractive summarizer (no LLM call).

Transcripts:

- the three long Claude Code sessions of the shared data, whole, as one window
  (their compaction boundaries dropped: about 123k–146k CharCounter tokens each);
- ``scaled-150k``: those sessions' messages one after the other (tool ids
  suffixed per copy), cut after the first message at or past 150,000 tokens
  where no tool call is open, then one closing user message. Real text, no
  randomness;
- ``support-150k``: a synthetic customer-support conversation (a fixed seed) of
  short user turns, each with an order lookup tool call and a JSON result,
  until 150,000 tokens: many user turns, many case facts.

Configurations (p50 and p99 over ``ITERATIONS`` runs after one warm-up; a total
budget of 75,000 tokens, :class:`AutoCompactor`'s default at the 150,000-token
trigger, with the default split and ``summary_tokens=4_000``):

- ``compact``: :func:`ctxwise.compact` with its defaults: extractive summary and
  the fact and rule scan of the conversation (``extract=True``, the prose preset);
- ``compact, support facts``: the same with the ``support`` fact preset (every
  kind, tool output read);
- ``compact, facts kept``: ``extract=False``, as :class:`AutoCompactor` calls it
  (it scans each message once as it arrives, see ``track per message``);
- ``summarizer alone``: ``ExtractiveSummarizer.summarize`` on the summarized range;
- ``fact scan alone``: ``CaseFacts.update_from_messages`` + ``Rules.capture_messages``
  on the whole conversation;
- ``compaction only``: ``compact`` with a constant summarizer and
  ``extract=False``: ctxwise's own work (cut points, token counts, media, the
  pinned block, assembly);
- ``track per message``: the :class:`AutoCompactor`'s incremental fact tracking,
  the whole transcript fed one message at a time, per message (mean).

Target (issue 5): <= 100 ms to compact a 150k-token transcript, excluding LLM
calls; the ``met`` column compares each configuration's p50 with it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from _common import (
    fmt_ms,
    long_sessions,
    print_table,
    say,
    scaled,
    summarize_ns,
    time_ns,
    write_results,
)
from ctxwise import (
    AutoCompactor,
    CaseFacts,
    CharCounter,
    Message,
    Rules,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    compact,
    read_transcript,
    safe_cut_points,
)
from ctxwise.memory import FactExtractor
from ctxwise.summarize import ExtractiveSummarizer

ITERATIONS = 11
TARGET_MS = 100.0
SCALED_TOKENS = 150_000
BUDGET = 75_000
SUMMARY = 4_000
COUNTER = CharCounter()


def support(tokens: int, seed: int = 7) -> Transcript:
    """A support conversation of short turns with order lookups, until ``tokens``."""
    rng = random.Random(seed)
    names = ["Mia", "Omar", "Lena", "Kenji", "Ana", "Yusuf", "Priya", "Tom"]
    items = ["router", "laptop", "headphones", "standing desk", "coffee grinder", "monitor"]
    msgs: list[Message] = [Message.text_message("system", "You are a support agent.")]
    total = COUNTER.count_messages(msgs)
    i = 0
    while total < tokens:
        i += 1
        order = f"W{rng.randrange(10**6, 10**7)}"
        amount = f"{rng.randrange(5, 900)}.{rng.randrange(100):02d}"
        date = f"2024-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
        turn = [
            Message.text_message(
                "user",
                f"Hi, this is {rng.choice(names)}. My order {order} for the "
                f"{rng.choice(items)} (${amount}) has not arrived; it was due {date}. "
                + ("Never call me before 9am. " if i % 50 == 1 else "")
                + "Can you check it?",
            ),
            Message(
                "assistant",
                (
                    TextBlock("Let me look that up."),
                    ToolUseBlock(f"call_{i}", "get_order_details", {"order_id": order}),
                ),
            ),
            Message(
                "user",
                (
                    ToolResultBlock(
                        f"call_{i}",
                        json.dumps(
                            {
                                "order_id": order,
                                "status": rng.choice(["pending", "shipped", "delivered"]),
                                "total": float(amount),
                                "items": [
                                    {"name": rng.choice(items), "price": p}
                                    for p in range(rng.randrange(20, 60))
                                ],
                            }
                        ),
                    ),
                ),
            ),
            Message.text_message(
                "assistant", f"Order {order} is on its way; tracking number 1Z{i:016d}."
            ),
        ]
        msgs.extend(turn)
        total += COUNTER.count_messages(turn)
    msgs.append(Message.text_message("user", "Thanks, one last question."))
    return Transcript(tuple(msgs), format="anthropic", source="support-150k")


class Constant:
    def summarize(self, previous: str, turns: Sequence[Message], budget: int) -> str:
        return "Earlier: orders were looked up."


def measure(fn: Callable[[], object], n: int = ITERATIONS) -> dict[str, float]:
    fn()  # warm-up
    return summarize_ns([time_ns(fn) for _ in range(n)])


def track_per_message(t: Transcript) -> float:
    """Mean ms per message of AutoCompactor's incremental fact tracking."""
    auto = AutoCompactor(Constant(), trigger_tokens=10**9)
    msgs = t.messages
    total = 0
    for k in range(1, len(msgs) + 1):
        view = Transcript(msgs[:k], format=t.format)
        total += time_ns(lambda view=view: auto._track(view.messages))  # type: ignore[misc]
    return total / len(msgs) / 1e6


def run(t: Transcript, label: str) -> dict[str, Any]:
    tokens = COUNTER.count_messages(t.messages)
    first = compact(t, budget=BUDGET, summary_tokens=SUMMARY)
    cut = first.cut_index
    s = sum(1 for m in t.messages if m.role == "system")
    older = t.messages[s:cut]
    ex = ExtractiveSummarizer(COUNTER)
    support_facts = FactExtractor.preset("support")

    def scan() -> None:
        CaseFacts().update_from_messages(t.messages[s:], offset=s)
        Rules().capture_messages(t.messages[s:], offset=s)

    configs = {
        "compact": lambda: compact(t, budget=BUDGET, summary_tokens=SUMMARY),
        "compact, support facts": lambda: compact(
            t, budget=BUDGET, summary_tokens=SUMMARY, extractor=support_facts
        ),
        "compact, facts kept": lambda: compact(
            t, budget=BUDGET, summary_tokens=SUMMARY, extract=False
        ),
        "summarizer alone": lambda: ex.summarize("", older, SUMMARY, first_index=s),
        "fact scan alone": scan,
        "compaction only": lambda: compact(
            t, Constant(), budget=BUDGET, summary_tokens=SUMMARY, extract=False
        ),
    }
    timings = {name: measure(fn) for name, fn in configs.items()}
    per_message = track_per_message(t)
    return {
        "transcript": label,
        "messages": len(t.messages),
        "tokens": tokens,
        "safe_cuts": len(safe_cut_points(t)),
        "cut_index": cut,
        "summarized_messages": first.summarized_messages,
        "tokens_after": first.tokens_after,
        "facts_pinned": len(first.facts),
        "rules_pinned": len(first.rules),
        "timings": timings,
        "track_per_message_ms": per_message,
        "met": {name: v["p50_ms"] <= TARGET_MS for name, v in timings.items()},
    }


def main() -> None:
    sessions = [replace(read_transcript(p), compactions=()) for p in long_sessions()]
    inputs = [(t, p.name[:8]) for t, p in zip(sessions, long_sessions(), strict=True)]
    inputs.append((scaled(sessions, SCALED_TOKENS), "scaled-150k"))
    inputs.append((support(SCALED_TOKENS), "support-150k"))
    rows: list[list[object]] = []
    results = []
    for t, label in inputs:
        r = run(t, label)
        results.append(r)
        for name, v in r["timings"].items():
            rows.append(
                [
                    label,
                    f"{r['tokens']:,}",
                    name,
                    fmt_ms(v["p50_ms"]),
                    fmt_ms(v["p99_ms"]),
                    "yes" if r["met"][name] else "no",
                ]
            )
        rows.append([label, "", "track per message", fmt_ms(r["track_per_message_ms"]), "", ""])
        say(
            f"{label}: {r['messages']} messages, {r['tokens']:,} tokens → "
            f"{r['tokens_after']:,} (cut at {r['cut_index']}, {r['facts_pinned']} facts, "
            f"{r['rules_pinned']} rules pinned)"
        )
    print_table(
        f"compaction to a budget of {BUDGET:,}, summary_tokens={SUMMARY:,} "
        f"(CharCounter; target p50 <= {TARGET_MS:g} ms)",
        ["transcript", "tokens", "configuration", "p50 ms", "p99 ms", "met"],
        rows,
        align="lrlrrl",
    )
    write_results(
        "bench_compaction",
        {
            "iterations": ITERATIONS,
            "target_ms": TARGET_MS,
            "budget": BUDGET,
            "summary_tokens": SUMMARY,
            "counter": COUNTER.name,
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
