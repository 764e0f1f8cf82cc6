"""mkdocs hooks (``hooks:`` in mkdocs.yml): the benchmark plots, drawn at build time.

Each plot of :mod:`bench_plots` whose results file is in ``benchmarks/results`` is
added to the site as ``img/bench/NAME.svg``; ``scripts/bench_docs.py`` links the same
ones from the benchmarks page, so a strict build finds every image it links.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_plots


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for name, svg in bench_plots.draw_all().items():
        files.append(File.generated(config, f"img/bench/{name}.svg", content=svg))
    return files
