"""Every transcript in the shared data through ``ctxwise compact --budget``, then chained.

For each Claude Code file (sessions, every subagent transcript, the fixtures) and
each of the 200 tau-bench trajectories (``--index``), at N = 25%, 50% and 75% of
its live tokens (``ctxwise inspect --live --json``'s ``total_tokens``):

1. ``ctxwise compact FILE --budget N --out OUT --json``: compacted, ``tokens_after``
   ≤ N, zero pairing problems in every segment of OUT (``segments``); a source
   with pairing problems is refused, then run again with ``--repair`` (counted);
   a refusal for the budget must be one where the system part, the pinned block
   and the latest user message alone exceed N (checked from the error's numbers);
2. ``ctxwise clear OUT --out OUT2 --json`` (``--keep-last 1``, every segment);
3. ``ctxwise compact OUT2 --budget N --out OUT3 --json`` (within N again);
4. ``ctxwise clear OUT3 --out OUT4 --json``; then ``ctxwise inspect OUT4 --json``
   must report no pairing problem in any segment;
5. besides, a deeper compaction of OUT2 to half its live tokens (a compaction on
   top of a compaction), counted as compacted or refused (only allowed when the
   system part, the pinned block and the task alone exceed it).

The commands run in this process through ``ctxwise.cli.main`` (the same code as
the console script, without 2,000 interpreter start-ups). Prints the counts by
outcome and reason, writes ``benchmarks/results/bench_compact_all.json``.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _common import TAU_BENCH_FILE, claude_code_files, print_table, require, say, write_results
from _common import run_cli as run

FRACTIONS = (0.25, 0.5, 0.75)
_NUMBERS = re.compile(r"(system|pinned|latest user message|summary framing|tail) ([\d,]+)")


def live_tokens(path: Path, index: list[str]) -> int:
    code, out, err = run("inspect", path, *index, "--live", "--json")
    if code:
        raise RuntimeError(f"inspect {path}: {err.strip()}")
    return int(json.loads(out)["total_tokens"])


def segments_ok(path: Path, index: list[str]) -> bool:
    code, out, err = run("inspect", path, *index, "--json")
    if code:
        raise RuntimeError(f"inspect {path}: {err.strip()}")
    return not json.loads(out)["problems"]


def one(path: Path, index: list[str], fraction: float, work: Path) -> dict[str, Any]:
    name = path.name + (f"[{index[1]}]" if index else "")
    live = live_tokens(path, index)
    budget = max(1, int(live * fraction))
    out = work / f"out{path.suffix}"
    row: dict[str, Any] = {"file": name, "fraction": fraction, "live": live, "budget": budget}
    args = ["compact", path, *index, "--budget", str(budget), "--out", out, "--json"]
    start = time.perf_counter()
    code, text, err = run(*args)
    repaired = False
    if code and "tool pairing problem" in err:
        repaired = True
        code, text, err = run(*args, "--repair")
    row["compact_ms"] = round((time.perf_counter() - start) * 1000, 1)
    row["repaired"] = repaired
    if code:
        found = dict((k, int(v.replace(",", ""))) for k, v in _NUMBERS.findall(err))
        must = found.get("system", 0) + found.get("latest user message", 0)
        row["outcome"] = "refused"
        row["reason"] = err.strip().removeprefix("ctxwise: error: ")[:200]
        # allowed: the system part and the latest user message alone exceed N; the
        # pinned facts and rules on top of them (never dropped) are counted apart
        row["allowed"] = "too small" in err and must > budget
        row["allowed_with_pinned"] = "too small" in err and must + found.get("pinned", 0) > budget
        row["must"] = must + found.get("pinned", 0) + found.get("summary framing", 0)
        return row
    report = json.loads(text)
    row["outcome"] = "compacted" if report["compacted"] else "not compacted"
    row["tokens_after"] = report["tokens_after"]
    row["within_budget"] = report["tokens_after"] <= budget
    row["segments"] = len(report["segments"])
    row["segment_problems"] = sum(s["problems"] for s in report["segments"])
    row["mid_turn"] = report["mid_turn"]
    # chain: clear, compact again to N, clear again; then a deeper compaction of
    # the cleared file to half its live tokens, where that is possible at all
    out2, out3, out4, out5 = (work / f"out{k}{path.suffix}" for k in (2, 3, 4, 5))
    steps: dict[str, Any] = {}
    code, _, err = run("clear", out, *index, "--keep-last", "1", "--out", out2, "--json")
    steps["clear"] = code == 0 or err.strip()
    if code == 0:
        code, text, err = run(
            "compact", out2, *index, "--budget", str(budget), "--out", out3, "--json"
        )
        steps["compact_again"] = code == 0 or err.strip()
        if code == 0:
            steps["compact_again_within_budget"] = json.loads(text)["tokens_after"] <= budget
            code, _, err = run("clear", out3, *index, "--keep-last", "1", "--out", out4, "--json")
            steps["clear_again"] = code == 0 or err.strip()
            if code == 0:
                steps["no_problems_after_chain"] = segments_ok(out4, index)
        half = max(1, live_tokens(out2, index) // 2)
        code, text, err = run(
            "compact", out2, *index, "--budget", str(half), "--out", out5, "--json"
        )
        if code == 0:
            deeper = json.loads(text)
            row["deeper"] = "compacted" if deeper["tokens_after"] <= half else "OVER BUDGET"
        else:
            found = dict((k, int(v.replace(",", ""))) for k, v in _NUMBERS.findall(err))
            must = found.get("system", 0) + found.get("latest user message", 0)
            allowed = "too small" in err and must + found.get("pinned", 0) > half
            row["deeper"] = "refused: system + task over N" if allowed else "REFUSED: " + err[:160]
    row["chain"] = steps
    row["chain_ok"] = all(v is True for v in steps.values()) and len(steps) == 5
    return row


def main() -> None:
    files: list[tuple[Path, list[str]]] = [(p, []) for p in claude_code_files()]
    tau = require(TAU_BENCH_FILE)
    n_tau = len(json.loads(tau.read_text(encoding="utf-8")))
    files += [(tau, ["--index", str(i)]) for i in range(n_tau)]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for path, index in files:
            for fraction in FRACTIONS:
                rows.append(one(path, index, fraction, Path(tmp)))
    tally: Counter[str] = Counter()
    bad: list[dict[str, Any]] = []
    for r in rows:
        kind = "claude code" if not r["file"].startswith(TAU_BENCH_FILE.name) else "tau-bench"
        if r["outcome"] == "refused":
            key = "refused: " + (
                "system + task over N"
                if r["allowed"]
                else "system + pinned + task over N"
                if r["allowed_with_pinned"]
                else "NOT ALLOWED"
            )
        else:
            key = r["outcome"]
            if not (r["within_budget"] and r["segment_problems"] == 0 and r["chain_ok"]):
                key += " BUT FAILED A CHECK"
                bad.append(r)
        tally[f"{kind}|{key}"] += 1
        tally[f"{kind}|runs"] += 1
        tally[f"{kind}|repaired"] += r["repaired"]
        tally[f"{kind}|mid-turn cut"] += bool(r.get("mid_turn"))
        if "deeper" in r:
            tally[f"{kind}|deeper recompaction: {r['deeper']}"] += 1
    table = [[k.split("|")[0], k.split("|")[1], v] for k, v in sorted(tally.items())]
    print_table(
        f"ctxwise compact --budget N on every shared transcript at "
        f"{', '.join(f'{f:.0%}' for f in FRACTIONS)} of its live tokens, then chained",
        ["data", "outcome", "runs"],
        table,
        align="llr",
    )
    for r in bad[:20]:
        say(f"FAILED: {r}")
    ms = sorted(r["compact_ms"] for r in rows)
    say(f"compact end to end (in process): p50 {ms[len(ms) // 2]:.1f} ms, max {ms[-1]:.1f} ms")
    write_results(
        "bench_compact_all",
        {"fractions": list(FRACTIONS), "counts": dict(tally), "runs": rows, "failed": len(bad)},
    )


if __name__ == "__main__":
    main()
