"""Plots of the benchmark results, as SVG, for the benchmarks page.

Drawn from ``benchmarks/results/*.json`` when the docs site is built (the mkdocs hook
``scripts/mkdocs_hooks.py`` adds them to the site as ``img/bench/NAME.svg``), and
referenced by ``scripts/bench_docs.py`` where the page's tables are hard to read: a
plot is drawn, and linked, only when its results file is there. Needs matplotlib
(the ``docs`` extra).

``python scripts/bench_plots.py DIR`` writes every plot into DIR, to look at them
without building the site.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

_ROUTING_SPLITS = {
    "bench_routing": "CLINC150",
    "bench_routing_holdout7_0": "held out, offset 0",
    "bench_routing_holdout7_1": "held out, offset 1",
    "bench_routing_holdout7_2": "held out, offset 2",
}


def _load(name: str, results: Path) -> dict[str, Any] | None:
    path = results / f"{name}.json"
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "svg.hashsalt": "ctxwise",  # the same SVG for the same figures
            "svg.fonttype": "none",  # text stays text: smaller, selectable
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.3,
        }
    )
    return plt


def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    _pyplot().close(fig)
    return buffer.getvalue()


def routing(results: Path) -> str | None:
    """In-scope accuracy against OOS recall, one point per router and split, and each
    router's p50 latency (log scale), from the CLINC150 and held-out-intent runs."""
    runs = {label: _load(name, results) for name, label in _ROUTING_SPLITS.items()}
    present = {label: d for label, d in runs.items() if d is not None}
    if not present:
        return None
    plt = _pyplot()
    fig, (quality, speed) = plt.subplots(
        2, 1, figsize=(8, 9), height_ratios=(1.4, 1), layout="constrained"
    )
    markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
    routers: list[str] = []
    for d in present.values():
        for r in d["rows"]:
            if r["router"] not in routers:
                routers.append(r["router"])
    palette = plt.get_cmap("tab20")
    colours = {r: palette(i % 20) for i, r in enumerate(routers)}
    for i, d in enumerate(present.values()):
        for r in d["rows"]:
            m = r["metrics"]
            quality.scatter(
                m["oos_recall"],
                m["in_scope_accuracy"],
                color=colours[r["router"]],
                marker=markers[i % len(markers)],
                s=40,
                label=r["router"] if i == 0 else None,
            )
    for i, label in enumerate(present):
        quality.scatter([], [], color="grey", marker=markers[i % len(markers)], label=label)
    quality.set_xlabel("out-of-scope recall (refusals that should be)")
    quality.set_ylabel("in-scope accuracy")
    quality.set_title("Routing: accuracy against refusal (up and right is better)")
    quality.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    first = next(iter(present.values()))
    names = [r["router"] for r in first["rows"]]
    p50 = [r["latency"]["p50_ms"] for r in first["rows"]]
    speed.barh(names, p50, color=[colours[n] for n in names])
    speed.set_xscale("log")
    speed.set_xlabel("p50 ms per query (log)")
    speed.set_title(f"Latency ({next(iter(present))})")
    speed.tick_params(axis="y", labelsize=7)
    speed.invert_yaxis()
    return _svg(fig)


def handoff(results: Path) -> str | None:
    """Evidence recall against the selection budget: ctxwise and its two baselines."""
    d = _load("bench_handoff", results)
    if d is None:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    rows = sorted(d["rows"], key=lambda r: r["budget"])
    budgets = [r["budget"] for r in rows]
    ax.plot(budgets, [r["evidence_recall"] for r in rows], "o-", label="ctxwise")
    for name in ("bm25", "recent"):
        recall = [r["baselines"][name]["evidence_recall"] for r in rows]
        ax.plot(budgets, recall, "s--" if name == "bm25" else "^:", label=name)
    ax.set_xscale("log")
    ax.set_xticks(budgets, [f"{b:,}" for b in budgets])
    ax.minorticks_off()
    ax.set_xlabel("selection budget (tokens, log)")
    ax.set_ylabel("evidence recall")
    ax.set_ylim(0, 1)
    ax.set_title("Handoffs on LoCoMo: evidence kept for the subagent")
    ax.legend(frameon=False)
    return _svg(fig)


def overhead(results: Path) -> str | None:
    """Per-turn time against history size: a turn without edits, a compacting turn,
    and the baseline (encode and count the history once), per store (log scale)."""
    d = _load("bench_engine", results)
    if d is None:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    stores = sorted({r["store"] for r in d["rows"]})
    for i, store in enumerate(stores):
        rows = sorted((r for r in d["rows"] if r["store"] == store), key=lambda r: r["tokens"])
        tokens = [r["tokens"] for r in rows]
        style = "-" if i == 0 else "--"
        ax.plot(
            tokens,
            [r["no_edit"]["p50_ms"] for r in rows],
            "o" + style,
            color="C0",
            label=f"turn, no edit ({store})",
        )
        ax.plot(
            tokens,
            [r["compacting"]["p50_ms"] for r in rows],
            "s" + style,
            color="C3",
            label=f"compacting turn ({store})",
        )
    rows = sorted((r for r in d["rows"] if r["store"] == stores[0]), key=lambda r: r["tokens"])
    ax.plot(
        [r["tokens"] for r in rows],
        [r["baseline"]["p50_ms"] for r in rows],
        "^:",
        color="grey",
        label="baseline: encode + count once",
    )
    ax.set_yscale("log")
    ax.set_xlabel("history tokens")
    ax.set_ylabel("p50 ms (log)")
    ax.set_title("Engine overhead per turn")
    ax.legend(fontsize=7, frameon=False)
    return _svg(fig)


PLOTS: dict[str, tuple[str, Callable[[Path], str | None]]] = {
    "routing": ("bench_routing", routing),
    "handoff": ("bench_handoff", handoff),
    "overhead": ("bench_engine", overhead),
}
"""Plot name: (the results file it is linked under on the page, its drawing)."""


def draw_all(results: Path = RESULTS) -> dict[str, str]:
    """Every plot whose results are there: name → SVG text."""
    out = {}
    for name, (_, draw) in PLOTS.items():
        svg = draw(results)
        if svg is not None:
            out[name] = svg
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/bench_plots.py DIR", file=sys.stderr)
        return 2
    folder = Path(argv[0])
    folder.mkdir(parents=True, exist_ok=True)
    for name, svg in draw_all().items():
        (folder / f"{name}.svg").write_text(svg, encoding="utf-8")
        print(f"wrote {folder / name}.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
