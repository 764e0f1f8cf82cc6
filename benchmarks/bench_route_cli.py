"""How long ``ctxwise route router.json --query …`` takes with the CLINC150 lexical
router, against ``ctxwise --help`` in the same run, and how long
``IntentRouter.load`` takes.

Router: ``build_router`` (what ``ctxwise router build`` runs) on CLINC150 train +
oos_train (15,100 rows), calibrated on val + oos_val for the default objective,
saved to a temporary folder as ``router.json`` + ``router.json.<hash>.npz``.

Measurements (each command in its own fresh process, the two commands
interleaved so load on the machine hits both alike; one warm-up run of each
first):

- ``help``: ``ctxwise --help``, the floor of any CLI call (Python start-up, typer,
  rich);
- ``route``: ``ctxwise route router.json --query "how do I transfer money to my
  mom"``, end to end: start-up, reading both files, restoring the scorer, routing,
  printing the table;
- ``load``: ``IntentRouter.load(path)`` timed inside fresh processes (imports
  excluded), and whether scikit-learn was imported (it must not be);
- ``v1 load + first route``: the same router written as a version 1 file (no
  arrays: the scorer re-fits on first use), for the before/after.

Decisions are checked: the loaded router's decisions (label, reason, every score)
on all 5,500 CLINC150 test queries equal the fitted router's.

Targets: route p50 ≤ 5 × help p50 (a ratio, measured in one run); load p50 ≤ 100 ms.

Run: ``.venv/bin/python benchmarks/bench_route_cli.py [--runs N]``. About a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    CLINC150_FILE,
    fmt_ms,
    print_table,
    ratio,
    require,
    say,
    summarize_ns,
    write_results,
)
from ctxwise.routing import IntentRouter, LexicalScorer
from ctxwise.routing.evaluation import build_router, clinc150_splits, load_labeled

QUERY = "how do I transfer money to my mom"
RUNS = 15
LOAD_RUNS = 10
ROUTE_VS_HELP = 5.0
LOAD_MS = 100.0

TIME_LOAD = """
import json, sys, time
from ctxwise.routing import IntentRouter
start = time.perf_counter_ns()
router = IntentRouter.load(sys.argv[1])
loaded = time.perf_counter_ns()
decision = router.route(sys.argv[2])
routed = time.perf_counter_ns()
print(json.dumps({"load_ns": loaded - start, "route_ns": routed - loaded,
                  "label": decision.label, "sklearn": "sklearn" in sys.modules}))
"""


def cli_command() -> list[str]:
    script = Path(sys.executable).with_name("ctxwise")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ctxwise.cli"]


def run_ns(cmd: list[str]) -> int:
    start = time.perf_counter_ns()
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "COLUMNS": "120"})
    return time.perf_counter_ns() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS, help="runs of each command")
    parser.add_argument("--skip-v1", action="store_true", help="skip the version 1 re-fit run")
    args = parser.parse_args()
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="bench-route-cli-"))
    try:
        clinc150_splits(require(CLINC150_FILE), tmp)
        t0 = time.perf_counter()
        router, report, _ = build_router(
            load_labeled(tmp / "train.jsonl"),
            scorer=LexicalScorer(),
            fit_on=load_labeled(tmp / "fit.jsonl"),
        )
        build_s = time.perf_counter() - t0
        path = tmp / "router.json"
        router.save(path)
        arrays = path.with_name(json.loads(path.read_text(encoding="utf-8"))["state"]["file"])
        sizes = {path.name: path.stat().st_size, "router.json.<hash>.npz": arrays.stat().st_size}
        say(
            f"CLINC150 lexical router: built in {build_s:.1f} s; "
            + ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in sizes.items())
        )

        # decisions of the loaded router = the fitted router's, on the whole test set
        test = [t for t, _ in load_labeled(tmp / "test.jsonl")]
        loaded = IntentRouter.load(path)
        identical = [d.to_dict(None) for d in loaded.route_many(test)] == [
            d.to_dict(None) for d in router.route_many(test)
        ]

        cli = cli_command()
        help_cmd = [*cli, "--help"]
        route_cmd = [*cli, "route", str(path), "--query", QUERY]
        run_ns(help_cmd), run_ns(route_cmd)  # warm-up: page cache, .pyc files
        help_ns: list[int] = []
        route_ns: list[int] = []
        for _ in range(args.runs):
            help_ns.append(run_ns(help_cmd))
            route_ns.append(run_ns(route_cmd))
        help_t, route_t = summarize_ns(help_ns), summarize_ns(route_ns)

        load_runs = []
        for _ in range(LOAD_RUNS):
            out = subprocess.run(
                [sys.executable, "-c", TIME_LOAD, str(path), QUERY],
                check=True,
                capture_output=True,
                text=True,
            )
            load_runs.append(json.loads(out.stdout))
        load_t = summarize_ns([r["load_ns"] for r in load_runs])
        first_route = summarize_ns([r["route_ns"] for r in load_runs])
        sklearn_imported = any(r["sklearn"] for r in load_runs)

        v1: dict[str, Any] | None = None
        if not args.skip_v1:
            doc = router.to_dict()
            doc["version"] = 1
            del doc["state"]
            v1_path = tmp / "router-v1.json"
            v1_path.write_text(json.dumps(doc))
            out = subprocess.run(
                [sys.executable, "-c", TIME_LOAD, str(v1_path), QUERY],
                check=True,
                capture_output=True,
                text=True,
            )
            v1 = json.loads(out.stdout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    route_ratio = ratio(route_t["p50_ms"], help_t["p50_ms"])
    rows = [
        ["ctxwise --help", fmt_ms(help_t["p50_ms"]), fmt_ms(help_t["p99_ms"]), "1.00×"],
        [
            "ctxwise route router.json --query …",
            fmt_ms(route_t["p50_ms"]),
            fmt_ms(route_t["p99_ms"]),
            f"{route_ratio:.2f}×",
        ],
        ["IntentRouter.load (in process)", fmt_ms(load_t["p50_ms"]), fmt_ms(load_t["p99_ms"]), ""],
        [
            "first route after load",
            fmt_ms(first_route["p50_ms"]),
            fmt_ms(first_route["p99_ms"]),
            "",
        ],
    ]
    if v1 is not None:
        v1_ms = (v1["load_ns"] + v1["route_ns"]) / 1e6
        rows.append(["version 1 file: load + first route (re-fit)", fmt_ms(v1_ms), "", ""])
    print_table(
        f"Routing one query with the CLINC150 lexical router ({args.runs} runs each)",
        ["what", "p50 ms", "p99 ms", "vs help"],
        rows,
        align="lrrr",
        caption="each CLI run is a fresh process; load is timed inside fresh processes",
    )
    targets = {
        f"route p50 ≤ {ROUTE_VS_HELP:g} × help p50": route_ratio <= ROUTE_VS_HELP,
        f"IntentRouter.load p50 ≤ {LOAD_MS:g} ms": load_t["p50_ms"] <= LOAD_MS,
        "load imports no scikit-learn": not sklearn_imported,
        "loaded decisions = fitted decisions (5,500 test queries)": identical,
    }
    print_table(
        "Targets",
        ["target", "met?"],
        [[k, "yes" if v else "NO"] for k, v in targets.items()],
        align="ll",
    )
    runtime = time.perf_counter() - started
    say(f"runtime {runtime:.0f} s")
    write_results(
        "bench_route_cli",
        {
            "data": {"file": str(CLINC150_FILE)},
            "query": QUERY,
            "runs": args.runs,
            "router": {
                "build_seconds": build_s,
                "file_bytes": sizes,
                "calibration": report.to_dict(),
            },
            "help": help_t,
            "route": route_t,
            "route_vs_help": route_ratio,
            "load": load_t,
            "first_route": first_route,
            "sklearn_imported_by_load": sklearn_imported,
            "identical_decisions": identical,
            "version_1": v1,
            "targets": targets,
            "runtime_seconds": runtime,
            "load_average": os.getloadavg(),
        },
        packages=("numpy", "scikit-learn"),
    )


if __name__ == "__main__":
    main()
