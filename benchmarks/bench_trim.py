"""Fitting real transcripts into a budget: langchain-core's ``trim_messages`` vs ctxwise.

Every Claude Code transcript in the shared data (sessions, subagents, fixtures)
and every tau-bench trajectory is cut to 10%, 25%, 50% and 75% of its size, by

- ``trim_messages`` (langchain-core), on the transcript as OpenAI chat messages
  (ctxwise's OpenAI codec, then ``convert_to_messages``), ``strategy="last"``,
  ``token_counter="approximate"``, in three configurations: its defaults; the
  settings its documentation recommends for a valid history
  (``include_system=True, start_on="human"``); and those plus
  ``end_on=("human", "tool")``;
- ``ctxwise.compaction.compact`` held to the same *total* budget
  (``compact(t, budget=N)``: system part, pinned facts and rules, summary and tail
  together; the offline extractive summarizer), which refuses a transcript that is
  already invalid unless asked to repair it, and a budget smaller than the system
  part and the latest user message (both are counted).

Each result is converted back (``convert_to_openai_messages`` → ctxwise's OpenAI
codec; ctxwise's own result as is) and checked with ``Transcript.problems`` under
the provider's placement rule. *Invalid* = at least one pairing problem (an
orphan tool result, an unanswered tool call, a duplicate id, a misplaced result).
*Empty* = nothing but the system prompt left. *Over budget* = the output counts more
than the budget by ctxwise's ``CharCounter`` (four characters a token plus four a
message; ``trim_messages``' approximate counter is four characters a token plus
three a message, so each is held to nearly its own measure). Invalid and over
budget are counted separately (an output can be both). 49 tau-bench trajectories
reuse a tool-call id in the source itself; the table reports the sources that are
valid and all sources separately. The time per call (p50, p99) of each method is
measured in the same run.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from _common import (
    claude_code_transcripts,
    fmt_ms,
    percentile,
    print_table,
    say,
    tau_bench_transcripts,
    write_results,
)
from ctxwise import CharCounter, Transcript
from ctxwise.compaction import CompactionBudgetError, compact
from ctxwise.formats import openai as openai_format
from ctxwise.pairing import PairingError

FRACTIONS = (0.1, 0.25, 0.5, 0.75)
CONFIGS: dict[str, dict[str, Any]] = {
    "trim_messages (defaults)": {},
    "trim_messages (start_on=human, include_system)": {"include_system": True, "start_on": "human"},
    "trim_messages (+ end_on=human|tool)": {
        "include_system": True,
        "start_on": "human",
        "end_on": ("human", "tool"),
    },
}


def _classify(t: Transcript) -> str:
    if not [m for m in t.messages if m.role != "system"]:
        return "empty"
    return "invalid" if t.problems("openai") else "valid"


def main() -> None:
    from langchain_core.messages import (
        convert_to_messages,
        convert_to_openai_messages,
        trim_messages,
    )

    counter = CharCounter()
    transcripts = [*claude_code_transcripts(), *tau_bench_transcripts()]
    tally: dict[str, dict[str, Counter[str]]] = {}
    times: dict[str, list[float]] = {}

    def count(tool: str, source_valid: bool, outcome: str) -> None:
        by = tally.setdefault(tool, {"valid sources": Counter(), "all sources": Counter()})
        by["all sources"][outcome] += 1
        if source_valid:
            by["valid sources"][outcome] += 1

    def judge(tool: str, source_valid: bool, t: Transcript, budget: int) -> None:
        count(tool, source_valid, "runs")
        kind = _classify(t)
        count(tool, source_valid, kind)
        if counter.count_messages(t.messages) > budget:
            count(tool, source_valid, "over budget")

    for t in transcripts:
        t = t.live_window()
        source_valid = not t.problems("openai" if t.format == "openai" else "anthropic")
        as_openai = openai_format.encode_messages(t)
        lc_messages = convert_to_messages(as_openai)
        total = counter.count_messages(t.messages)
        for fraction in FRACTIONS:
            budget = max(1, int(total * fraction))
            for name, options in CONFIGS.items():
                start = time.perf_counter()
                out = trim_messages(
                    lc_messages,
                    max_tokens=budget,
                    token_counter="approximate",
                    strategy="last",
                    **options,
                )
                times.setdefault(name, []).append((time.perf_counter() - start) * 1000)
                back = openai_format.decode_messages(convert_to_openai_messages(out))
                judge(name, source_valid, back, budget)
            for repair in (False, True):
                name = "ctxwise compact --budget" + (" --repair" if repair else "")
                start = time.perf_counter()
                try:
                    result = compact(t, budget=budget, counter=counter, repair=repair)
                except PairingError:
                    count(name, source_valid, "runs")
                    count(name, source_valid, "refused: invalid source")
                    continue
                except CompactionBudgetError:
                    count(name, source_valid, "runs")
                    count(name, source_valid, "refused: system + task over budget")
                    continue
                finally:
                    times.setdefault(name, []).append((time.perf_counter() - start) * 1000)
                placement = "openai" if t.format == "openai" else "anthropic"
                out_t = result.transcript
                count(name, source_valid, "runs")
                if out_t.problems(placement):
                    count(name, source_valid, "invalid")
                elif not [m for m in out_t.messages if m.role != "system"]:
                    count(name, source_valid, "empty")
                else:
                    count(name, source_valid, "valid")
                if counter.count_messages(out_t.messages) > budget:
                    count(name, source_valid, "over budget")

    outcomes = [
        "valid",
        "invalid",
        "empty",
        "over budget",
        "refused: invalid source",
        "refused: system + task over budget",
    ]
    rows = []
    for tool, by in tally.items():
        for scope in ("valid sources", "all sources"):
            c = by[scope]
            rows.append([tool, scope, c.get("runs", 0), *(c.get(o, 0) for o in outcomes)])
    print_table(
        f"{len(transcripts)} real transcripts (live windows) × {len(FRACTIONS)} budgets "
        f"({', '.join(f'{f:.0%}' for f in FRACTIONS)} of each), the same total budget for all",
        ["method", "sources", "runs", *outcomes],
        rows,
        align="ll" + "r" * (1 + len(outcomes)),
    )
    timing = {
        tool: {"p50_ms": round(percentile(ms, 50), 3), "p99_ms": round(percentile(ms, 99), 3)}
        for tool, ms in times.items()
    }
    print_table(
        "time per call, same run",
        ["method", "p50 ms", "p99 ms"],
        [[tool, fmt_ms(v["p50_ms"]), fmt_ms(v["p99_ms"])] for tool, v in timing.items()],
    )
    invalid = {tool: by["all sources"].get("invalid", 0) for tool, by in tally.items()}
    over = {tool: by["all sources"].get("over budget", 0) for tool, by in tally.items()}
    say("invalid transcripts produced: " + ", ".join(f"{k}: {v}" for k, v in invalid.items()))
    say("over the budget: " + ", ".join(f"{k}: {v}" for k, v in over.items()))
    write_results(
        "bench_trim",
        {
            "transcripts": len(transcripts),
            "fractions": list(FRACTIONS),
            "results": {
                tool: {scope: dict(c) for scope, c in by.items()} for tool, by in tally.items()
            },
            "time_per_call": timing,
        },
        packages=("langchain-core",),
    )


if __name__ == "__main__":
    main()
