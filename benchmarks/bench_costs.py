"""Replay with money (issue 30): ctxwise's policy with the prompt cache simulated,
beside what the recordings were billed, and cache-aware edits against edits at
every trigger.

Data: every Claude Code file in ``transcripts/claude_code`` (the three long
sessions, their subagent transcripts and the fixtures). Each is replayed through
the Engine (``ctxwise.replay.replay(cost=True)``, default settings: the counter
and safety margin ``auto`` picks for the model, tool pairing repaired as ``ctxwise
replay --repair`` does) and priced at the model most of its recorded calls used;
the recorded replies are not fed back as usage (no online calibration), so every
turn plans with the counter's own margin. ``recorded`` is what the file's own
calls were billed (``ctxwise.formats.usage.claude_code_billed``): it includes
Claude Code's system prompt and tool definitions, which the transcript does not
hold, so the replay cannot send them; the two columns are what each side sent,
not the same requests.

(a) Every file at budget 100,000: turns, the policy's input split (cache read,
    written, uncached) and money, the recording's, and turns over budget.
(b) The edit gate (``costs.gate``) on and off at the same budget, on each long
    session at budgets 30,000, 50,000 and 100,000: clears, compactions, cache
    breaks, tokens written to the cache, total money, turns over budget. Target
    (issue 30): with the gate, fewer cache-write tokens and lower cost on every
    session, no turn over budget. Nothing here is fit: the gate's horizon is the
    session's own turn count, its prices the model's list prices.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ctxwise
from _common import CLAUDE_CODE_DIR, claude_code_files, long_sessions, print_table, write_results
from ctxwise import EngineConfig
from ctxwise.formats.usage import claude_code_billed, most_used_model
from ctxwise.pairing import repair_pairing
from ctxwise.replay import ReplayReport, replay

BUDGETS = (30_000, 50_000, 100_000)


def run(path: Path, budget: int, gate: bool) -> tuple[ReplayReport, str]:
    text = path.read_text(encoding="utf-8")
    calls, _ = claude_code_billed(text)
    model = most_used_model(calls, EngineConfig().model)
    t = ctxwise.read_transcript(path)
    t, _ = repair_pairing(t)
    config = EngineConfig.model_validate(
        {"store": "memory", "model": model, "costs": {"gate": gate}}
    )
    return replay(t, budget=budget, config=config, cost=True, recorded=calls), model


def row(path: Path, report: ReplayReport, model: str) -> dict[str, Any]:
    cost = report.cost
    assert cost is not None
    data = cost.to_dict()
    return {
        "file": str(path.relative_to(CLAUDE_CODE_DIR)),
        "model": model,
        "turns": report.turns,
        "budget": report.budget,
        "over_budget_turns": report.over_budget_turns,
        "clears": report.clears,
        "compactions": report.compactions,
        "cache_breaks": cost.cache_breaks,
        "total": data["total"],
        "usd": cost.usd,
        "recorded_calls": cost.recorded_calls,
        "recorded_total": data["recorded_total"],
        "recorded_usd": cost.recorded_usd,
    }


def writes(r: dict[str, Any]) -> int:
    t = r["total"]
    return int(t["cache_write_5m"] + t["cache_write_1h"])


def main() -> None:
    every = []
    for path in claude_code_files():
        report, model = run(path, 100_000, gate=True)
        every.append(row(path, report, model))
    print_table(
        "(a) every Claude Code file at 100,000 tokens: ctxwise (cache simulated) vs the recording",
        ["file", "turns", "read", "written", "uncached", "ctxwise $", "recorded $", "over"],
        [
            [
                r["file"],
                r["turns"],
                f"{r['total']['cache_read']:,}",
                f"{writes(r):,}",
                f"{r['total']['uncached']:,}",
                f"{r['usd']:.3f}",
                f"{r['recorded_usd']:.3f}",
                r["over_budget_turns"],
            ]
            for r in every
        ],
    )
    gate = []
    for path in long_sessions():
        for budget in BUDGETS:
            off, model = run(path, budget, gate=False)
            on, _ = run(path, budget, gate=True)
            a, b = row(path, off, model), row(path, on, model)
            gate.append({"file": a["file"], "budget": budget, "off": a, "on": b})
    print_table(
        "(b) the edit gate off / on at the same budget",
        ["session", "budget", "clears", "breaks", "written", "$", "over", "written Δ", "$ Δ"],
        [
            [
                g["file"][:8],
                f"{g['budget']:,}",
                f"{g['off']['clears']} / {g['on']['clears']}",
                f"{g['off']['cache_breaks']} / {g['on']['cache_breaks']}",
                f"{writes(g['off']):,} / {writes(g['on']):,}",
                f"{g['off']['usd']:.3f} / {g['on']['usd']:.3f}",
                f"{g['off']['over_budget_turns']} / {g['on']['over_budget_turns']}",
                f"{writes(g['on']) / writes(g['off']) - 1:+.1%}",
                f"{g['on']['usd'] / g['off']['usd'] - 1:+.1%}",
            ]
            for g in gate
        ],
    )
    write_results("bench_costs", {"budgets": list(BUDGETS), "every": every, "gate": gate})


if __name__ == "__main__":
    main()
