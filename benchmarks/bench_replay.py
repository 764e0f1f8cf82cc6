"""``ctxwise replay`` over every recorded session in the shared data, and a 200-turn
scripted session, at 50% and 25% of each one's full size.

Inputs:

- every Claude Code file (the 3 sessions, their 6 subagent transcripts, the 3
  fixtures);
- 20 tau-bench trajectories (indices 0, 10, …, 190 of ``gpt-4o-airline.json``),
  replayed with ``--repair`` (the file reuses tool call ids);
- ``scripted-200``: :func:`ctxwise._scripted.scripted_session` with 200 rounds whose
  tool results take the sizes of the Claude Code sessions' tool results (seed 0),
  written as an Anthropic request file.

Each input is run through the CLI in-process (``ctxwise replay FILE --budget N
--json --config data/replay_char.toml``: the defaults, counted by CharCounter with
no safety margin) with N = 50% and 25% of its full size (the whole recording counted
by CharCounter). A run either replays every turn (then ``over_budget_turns``,
``invalid_requests`` and ``pinned_missing`` must be 0) or is refused with exit
code 2 and one line; a refusal is *allowed* only when what every request must
hold cannot fit N: the pinned part alone (``pinned sections need``) or the
latest user message (``latest user message``). ``sent/full`` is ``tokens_sent /
tokens_full`` over the replayed runs.

Run: ``.venv/bin/python benchmarks/bench_replay.py``; writes
``benchmarks/results/bench_replay.json``. A few minutes.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from _common import (
    TAU_BENCH_FILE,
    claude_code_files,
    print_table,
    require,
    run_cli,
    say,
    write_results,
)
from ctxwise import CharCounter
from ctxwise._scripted import scripted_session
from ctxwise.formats import anthropic, read_transcript, read_transcripts
from ctxwise.messages import ToolResultBlock, block_text

FRACTIONS = (0.5, 0.25)
CHAR_CONFIG = Path(__file__).resolve().parent / "data" / "replay_char.toml"
"""The Engine's settings: its defaults, but counted by char with no safety margin, as
the committed figures were measured (the default counter is chosen from the model)."""
TAU_INDICES = tuple(range(0, 200, 10))
COUNTER = CharCounter()
_NEED = re.compile(r"pinned sections need (\d+) tokens but the budget is (\d+)")
_KEEP = re.compile(r"budget ([\d,]+) tokens is too small: what a compaction must keep needs")


def allowed_refusal(message: str) -> bool:
    return bool(_NEED.search(message)) or (
        bool(_KEEP.search(message)) and "latest user message" in message
    )


def one(path: Path, index: int, full: int, fraction: float, repair: bool) -> dict[str, Any]:
    budget = max(1, int(full * fraction))
    args: list[str | Path] = ["replay", path, "--budget", str(budget), "--json"]
    args += ["--config", CHAR_CONFIG]
    if index:
        args += ["--index", str(index)]
    if repair:
        args.append("--repair")
    code, out, err = run_cli(*args)
    row: dict[str, Any] = {
        "file": path.name,
        "index": index,
        "fraction": fraction,
        "budget": budget,
        "full_tokens": full,
    }
    if code == 0:
        row.update(json.loads(out))
        row["ok"] = (
            row["over_budget_turns"] == 0
            and row["invalid_requests"] == 0
            and row["pinned_missing"] == 0
        )
    else:
        row["refused"] = err.strip()
        row["ok"] = allowed_refusal(err)
    return row


def main() -> None:
    cc = claude_code_files()
    tau = require(TAU_BENCH_FILE)
    trajectories = read_transcripts(tau)
    sessions = [read_transcript(p) for p in cc if p.parent.name == "claude_code"]
    sizes = [
        len(block_text(b))
        for t in sessions
        for m in t.messages
        for b in m.content
        if isinstance(b, ToolResultBlock)
    ]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        scripted = scripted_session(200, sizes, seed=0)
        scripted_path = Path(tmp) / "scripted-200.json"
        scripted_path.write_text(json.dumps(anthropic.encode_request(scripted)), encoding="utf-8")
        inputs: list[tuple[str, Path, int, int, bool]] = []
        for p in cc:
            t = read_transcript(p)
            inputs.append(("claude code", p, 0, COUNTER.count_messages(t.messages), False))
        for i in TAU_INDICES:
            full = COUNTER.count_messages(trajectories[i].messages)
            inputs.append(("tau-bench", tau, i, full, True))
        inputs.append(
            ("scripted", scripted_path, 0, COUNTER.count_messages(scripted.messages), False)
        )
        for kind, path, index, full, repair in inputs:
            for fraction in FRACTIONS:
                row = one(path, index, full, fraction, repair)
                row["kind"] = kind
                rows.append(row)
                state = "ok" if row["ok"] else "FAILED"
                what = row.get("refused", "")[:100] or (
                    f"{row['turns']} turns, sent/full {row['sent_ratio']:.3f}"
                )
                say(f"{kind} {path.name}[{index}] at {fraction:.0%}: {state}: {what}")
    summary = []
    for kind in ("claude code", "tau-bench", "scripted"):
        for fraction in FRACTIONS:
            mine = [r for r in rows if r["kind"] == kind and r["fraction"] == fraction]
            done = [r for r in mine if "refused" not in r]
            sent = sum(r["tokens_sent"] for r in done)
            fulls = sum(r["tokens_full"] for r in done)
            summary.append(
                {
                    "kind": kind,
                    "fraction": fraction,
                    "runs": len(mine),
                    "replayed": len(done),
                    "refused": len(mine) - len(done),
                    "refused_allowed": sum(1 for r in mine if "refused" in r and r["ok"]),
                    "turns": sum(r["turns"] for r in done),
                    "over_budget_turns": sum(r["over_budget_turns"] for r in done),
                    "invalid_requests": sum(r["invalid_requests"] for r in done),
                    "pinned_missing": sum(r["pinned_missing"] for r in done),
                    "compactions": sum(r["compactions"] for r in done),
                    "clears": sum(r["clears"] for r in done),
                    "sent_ratio": sent / fulls if fulls else None,
                    "max_p50_ms": max((r["p50_ms"] for r in done), default=None),
                }
            )
    print_table(
        "ctxwise replay over the shared data",
        [
            "data",
            "budget",
            "runs",
            "replayed",
            "refused (allowed)",
            "turns",
            "over",
            "invalid",
            "pins missing",
            "compactions",
            "sent/full",
        ],
        [
            [
                s["kind"],
                f"{s['fraction']:.0%}",
                s["runs"],
                s["replayed"],
                f"{s['refused']} ({s['refused_allowed']})",
                s["turns"],
                s["over_budget_turns"],
                s["invalid_requests"],
                s["pinned_missing"],
                s["compactions"],
                "-" if s["sent_ratio"] is None else f"{s['sent_ratio']:.3f}",
            ]
            for s in summary
        ],
    )
    failed = [r for r in rows if not r["ok"]]
    say(f"{len(rows)} runs, {len(failed)} failed the checks")
    write_results("bench_replay", {"summary": summary, "rows": rows, "failed": len(failed)})


if __name__ == "__main__":
    main()
