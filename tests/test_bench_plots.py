"""The benchmark plots the docs site draws from benchmarks/results at build time."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_plots  # noqa: E402 - the script under test


def _write(folder: Path, name: str, data: dict[str, Any]) -> None:
    (folder / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")


def _routing(acc: float) -> dict[str, Any]:
    def row(router: str, shift: float, p50: float) -> dict[str, Any]:
        metrics = {"in_scope_accuracy": acc + shift, "oos_recall": 0.9 - shift}
        return {"router": router, "metrics": metrics, "latency": {"p50_ms": p50}}

    return {"rows": [row("ctxwise lexical", 0.0, 0.2), row("svm", 0.01, 0.05)]}


def test_nothing_is_drawn_without_results(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="needs the docs extra")
    assert bench_plots.draw_all(tmp_path) == {}


def test_each_plot_is_an_svg_drawn_from_its_results(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="needs the docs extra")
    _write(tmp_path, "bench_routing", _routing(0.87))
    _write(tmp_path, "bench_routing_holdout7_1", _routing(0.80))
    recall = {"recent": {"evidence_recall": 0.2}, "bm25": {"evidence_recall": 0.5}}
    rows = [
        {"budget": b, "evidence_recall": 0.6 + b / 1e5, "baselines": recall} for b in (1000, 3000)
    ]
    _write(tmp_path, "bench_handoff", {"rows": rows})
    engine = [
        {
            "tokens": t,
            "store": store,
            "no_edit": {"p50_ms": 0.4},
            "compacting": {"p50_ms": t / 100},
            "baseline": {"p50_ms": t / 1e4},
        }
        for t in (18_000, 100_000)
        for store in ("memory", "sqlite")
    ]
    _write(tmp_path, "bench_engine", {"rows": engine})
    drawn = bench_plots.draw_all(tmp_path)
    assert set(drawn) == set(bench_plots.PLOTS)
    for name, svg in drawn.items():
        root = ET.fromstring(svg)
        assert root.tag.endswith("svg"), name
        assert "ctxwise lexical" in drawn["routing"]  # text stays text (svg.fonttype none)
    # the same results give the same file (no date, a fixed hash salt)
    assert bench_plots.draw_all(tmp_path) == drawn
