"""Fitting real transcripts into a budget: langchain-core's ``trim_messages`` vs ctxwise.

Every Claude Code transcript in the shared data (sessions, subagents, fixtures)
and every tau-bench trajectory is cut to 10%, 25%, 50% and 75% of its size, by

- ``trim_messages`` (langchain-core), on the transcript as OpenAI chat messages
  (ctxwise's OpenAI codec, then ``convert_to_messages``), ``strategy="last"``,
  ``token_counter="approximate"``, in three configurations: its defaults; the
  settings its documentation recommends for a valid history
  (``include_system=True, start_on="human"``); and those plus
  ``end_on=("human", "tool")``;
- ``ctxwise.compaction.compact`` with ``keep_tail_tokens`` = the same budget (the
  offline extractive summarizer), which refuses a transcript that is already
  invalid unless asked to repair it (both are counted).

Each result is converted back (``convert_to_openai_messages`` → ctxwise's OpenAI
codec; ctxwise's own result as is) and checked with ``Transcript.problems`` under
the provider's placement rule. *Invalid* = at least one pairing problem (an
orphan tool result, an unanswered tool call, a duplicate id, a misplaced result).
*Empty* = nothing but the system prompt left. 49 tau-bench trajectories reuse a
tool-call id in the source itself; the table reports the sources that are valid
and all sources separately.

Budgets are in each tool's own approximate units (about four characters a token
for both), so the two see the same budget.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from _common import (
    claude_code_transcripts,
    print_table,
    say,
    tau_bench_transcripts,
    write_results,
)
from ctxwise import CharCounter, Transcript
from ctxwise.compaction import TailOverBudgetError, compact
from ctxwise.editing import PairingError
from ctxwise.formats import openai as openai_format

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

    def count(tool: str, source_valid: bool, outcome: str) -> None:
        by = tally.setdefault(tool, {"valid sources": Counter(), "all sources": Counter()})
        by["all sources"][outcome] += 1
        if source_valid:
            by["valid sources"][outcome] += 1

    for t in transcripts:
        source_valid = not t.problems("openai" if t.format == "openai" else "anthropic")
        as_openai = openai_format.encode_messages(t)
        lc_messages = convert_to_messages(as_openai)
        total = counter.count_messages(t.messages)
        for fraction in FRACTIONS:
            budget = max(1, int(total * fraction))
            for name, options in CONFIGS.items():
                out = trim_messages(
                    lc_messages,
                    max_tokens=budget,
                    token_counter="approximate",
                    strategy="last",
                    **options,
                )
                back = openai_format.decode_messages(convert_to_openai_messages(out))
                count(name, source_valid, _classify(back))
            for repair in (False, True):
                name = "ctxwise compact" + (" (repair=True)" if repair else "")
                try:
                    result = compact(t, keep_tail_tokens=budget, counter=counter, repair=repair)
                except PairingError:
                    count(name, source_valid, "refused: invalid source")
                    continue
                except TailOverBudgetError:
                    count(name, source_valid, "refused: tail over budget")
                    continue
                placement = "openai" if t.format == "openai" else "anthropic"
                if result.transcript.problems(placement):
                    count(name, source_valid, "invalid")
                elif not [m for m in result.transcript.messages if m.role != "system"]:
                    count(name, source_valid, "empty")
                else:
                    count(name, source_valid, "valid")

    outcomes = [
        "valid",
        "invalid",
        "empty",
        "refused: invalid source",
        "refused: tail over budget",
    ]
    rows = []
    for tool, by in tally.items():
        for scope in ("valid sources", "all sources"):
            c = by[scope]
            rows.append([tool, scope, sum(c.values()), *(c.get(o, 0) for o in outcomes)])
    print_table(
        f"{len(transcripts)} real transcripts × {len(FRACTIONS)} budgets "
        f"({', '.join(f'{f:.0%}' for f in FRACTIONS)} of each)",
        ["method", "sources", "runs", *outcomes],
        rows,
        align="ll" + "r" * (1 + len(outcomes)),
    )
    invalid = {tool: by["all sources"].get("invalid", 0) for tool, by in tally.items()}
    say("invalid transcripts produced: " + ", ".join(f"{k}: {v}" for k, v in invalid.items()))
    write_results(
        "bench_trim",
        {
            "transcripts": len(transcripts),
            "fractions": list(FRACTIONS),
            "results": {
                tool: {scope: dict(c) for scope, c in by.items()} for tool, by in tally.items()
            },
        },
        packages=("langchain-core",),
    )


if __name__ == "__main__":
    main()
