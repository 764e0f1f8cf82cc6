"""``ctxwise inspect <file> --json`` on the three long Claude Code sessions (~3 MB each).

Measured per session file (p50 over 5 runs, the runs of each file interleaved):

(a) in process: ``read_transcript`` + ``composition`` (CharCounter, the CLI's
    default, with the CLI's ``anthropic`` placement), next to an in-process
    baseline that only parses the JSONL (``json.loads`` on every line);
(b) end to end: wall time of ``python -m ctxwise.cli inspect <file> --json`` as a
    subprocess, against a subprocess that only parses the JSONL
    (``python -c "import json,sys; [json.loads(l) for l in open(sys.argv[1])]"``).
    Ratios are CLI / baseline, measured in the same run. Interpreter start-up
    plus ``import ctxwise.cli`` is reported on its own for context.

Target: end to end < 1 s per file. Also reported: the file size, the message
count, ``total_tokens`` and the largest kind from the CLI's JSON output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import ctxwise
from _common import (
    REPO_ROOT,
    fmt_ms,
    long_sessions,
    print_table,
    ratio,
    say,
    summarize_ns,
    time_ns,
    write_results,
)

RUNS = 5
TARGET_S = 1.0
PARSE_ONLY = "import json,sys; [json.loads(l) for l in open(sys.argv[1])]"


def run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def in_process(path: Path) -> ctxwise.Composition:
    t = ctxwise.read_transcript(path)
    return ctxwise.composition(t, ctxwise.CharCounter(), placement="anthropic")


def parse_only(path: Path) -> list[Any]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def bench_file(path: Path) -> dict[str, Any]:
    cli = [sys.executable, "-m", "ctxwise.cli", "inspect", str(path), "--json"]
    baseline = [sys.executable, "-c", PARSE_ONLY, str(path)]
    out = json.loads(run(cli))  # warm-up (page cache, .pyc) and the reported numbers
    run(baseline)
    comp = in_process(path)
    assert comp.total_tokens == out["total_tokens"], "CLI and library disagree"

    modes = {
        "in_process": lambda: in_process(path),
        "in_process_parse_only": lambda: parse_only(path),
        "cli": lambda: run(cli),
        "cli_parse_only": lambda: run(baseline),
    }
    samples: dict[str, list[int]] = {m: [] for m in modes}
    for _ in range(RUNS):
        for m, fn in modes.items():
            samples[m].append(time_ns(fn))
    timing = {m: summarize_ns(s) for m, s in samples.items()}
    by_kind = out["by_kind"]
    largest = max(by_kind, key=by_kind.get)
    cli_s = timing["cli"]["p50_ms"] / 1e3
    return {
        "file": path.name,
        "mb": path.stat().st_size / 1e6,
        "messages": out["messages"],
        "total_tokens": out["total_tokens"],
        "largest_kind": largest,
        "largest_kind_tokens": by_kind[largest],
        "timing": timing,
        "ratio_in_process": ratio(
            timing["in_process"]["p50_ms"], timing["in_process_parse_only"]["p50_ms"]
        ),
        "ratio_cli": ratio(timing["cli"]["p50_ms"], timing["cli_parse_only"]["p50_ms"]),
        "target_s": TARGET_S,
        "met": cli_s < TARGET_S,
    }


def main() -> None:
    files = long_sessions()
    if len(files) != 3:
        say(f"expected 3 long sessions, found {len(files)}: {[p.name for p in files]}")
    startup = [
        time_ns(lambda: run([sys.executable, "-c", "import ctxwise.cli"])) for _ in range(RUNS)
    ]
    results = [bench_file(p) for p in files]

    rows = []
    for r in results:
        t = r["timing"]
        rows.append(
            [
                r["file"][:8] + "….jsonl",
                f"{r['mb']:.2f}",
                f"{r['messages']:,}",
                f"{r['total_tokens']:,}",
                f"{r['largest_kind']} ({r['largest_kind_tokens'] / r['total_tokens']:.0%})",
                fmt_ms(t["in_process"]["p50_ms"]),
                fmt_ms(t["in_process_parse_only"]["p50_ms"]),
                f"{r['ratio_in_process']:.2f}",
                fmt_ms(t["cli"]["p50_ms"]),
                fmt_ms(t["cli_parse_only"]["p50_ms"]),
                f"{r['ratio_cli']:.2f}",
                f"< {TARGET_S:g} s",
                "yes" if r["met"] else "NO",
            ]
        )
    print_table(
        f"ctxwise inspect --json on the long Claude Code sessions (p50 of {RUNS} runs)",
        [
            "file",
            "MB",
            "messages",
            "total_tokens",
            "largest kind",
            "in-proc ms",
            "parse-only ms",
            "ratio",
            "CLI ms",
            "parse-only proc ms",
            "ratio",
            "target",
            "met?",
        ],
        rows,
        align="lrrrlrrrrrrll",
        caption="in-proc = read_transcript + composition; CLI = python -m ctxwise.cli inspect "
        "FILE --json (subprocess); parse-only = json.loads of every line (in process / as a "
        "subprocess)",
    )
    st = summarize_ns(startup)
    say(
        f"python -c 'import ctxwise.cli' (start-up + imports): p50 {fmt_ms(st['p50_ms'])} ms, "
        f"p99 {fmt_ms(st['p99_ms'])} ms"
    )
    write_results(
        "bench_inspect",
        {"runs": RUNS, "target_s": TARGET_S, "startup_import_cli": st, "files": results},
    )


if __name__ == "__main__":
    main()
