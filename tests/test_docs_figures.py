"""Measured figures live on docs/benchmarks.md, not in hand-written docs (issue 12).

docs/benchmarks.md is written by ``scripts/bench_docs.py`` from
``benchmarks/results/*.json``; a figure typed into prose drifts when the benchmark
is rerun. So the hand-written pages are checked, line by line, for what looks like
a measured result: a percentage, a time in ms, a p50/p99, a ``recall@N`` figure, a
rate in items/s, a score with three decimals, or a ratio such as ``2.4×``. They say
what a knob does and link to the benchmarks page or the command that measures it.

Key and flag names (``p50_ms``, ``recall@k``) are not figures and do not match.
Lines whose numbers are not measurements go in :data:`ALLOWED`, by a substring
that occurs once in the docs, with the reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    "docs/guide.md",
    "docs/engine.md",
    "docs/cli.md",
    "docs/index.md",
    "README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs" / "integrations").glob("*.md")),
]

FIGURE = re.compile(
    r"\d+(?:\.\d+)?\s?%"  # percentage
    r"|\d+(?:\.\d+)?\s?ms\b"  # time in milliseconds
    r"|\bp(?:50|99)\b"  # percentile (not the key names p50_ms, p99_ms)
    r"|recall@\d"  # a recall@10 figure (not recall@k)
    r"|items/s"  # rate
    r"|(?<![\w.])\d\.\d{3}\b"  # a three-decimal score
    r"|\d(?:\.\d+)?\s?×"  # a measured ratio such as 2.4×
)

ALLOWED: dict[str, str] = {
    "Anthropic prompt caching (reads 0.1×, 5-minute writes 1.25×)": (
        "Anthropic's published cache prices, inputs of the cost-simulator example"
    ),
}
"""Unique substring of an allowed line → why its numbers are not measurements."""


def _lines() -> list[tuple[str, int, str]]:
    out = []
    for page in PAGES:
        path = ROOT / page
        if path.is_file():
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                out.append((page, n, line))
    return out


def test_no_measured_figures_in_hand_written_docs() -> None:
    found = [
        f"{page}:{n}: {line.strip()}"
        for page, n, line in _lines()
        if FIGURE.search(line) and not any(key in line for key in ALLOWED)
    ]
    assert not found, (
        "measured figures belong on docs/benchmarks.md (scripts/bench_docs.py); "
        "link to it instead, or add the line to ALLOWED with a reason:\n" + "\n".join(found)
    )


@pytest.mark.parametrize("key", sorted(ALLOWED))
def test_allowlist_entries_match_one_line(key: str) -> None:
    hits = [(page, n) for page, n, line in _lines() if key in line]
    assert len(hits) == 1, f"ALLOWED key {key!r} matches {hits}; keep it unique and current"


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        ("frees 67–68% of the tokens", True),
        ("loads in 48 ms", True),
        ("2.4× `ctxwise --help`", True),
        ("hybrid **0.719** against", True),
        ("9,557 items/s", True),
        ("recall@10 by category", True),
        ("p50 / p99 after a first pass", True),
        ("prints `p50_ms, p99_ms`", False),
        ("recall@k (plus any/all)", False),
        ("`user_share` (0.25) of the summary budget", False),
        ("ceil(len × (1+m) / 4)", False),
        ("version 1.1.1", False),
    ],
)
def test_pattern(text: str, flagged: bool) -> None:
    assert bool(FIGURE.search(text)) is flagged
