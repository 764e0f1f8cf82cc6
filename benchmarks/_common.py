"""Helpers shared by the benchmark scripts: data paths, real texts, timing, output.

Nothing here downloads anything. The shared data folder is
``$CTXWISE_DATA`` or, by default, ``<repo root>/../shared/data``.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

import ctxwise
from ctxwise.embeddings import Embedder
from ctxwise.messages import (
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    block_text,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("CTXWISE_DATA", REPO_ROOT.parent / "shared" / "data"))
TRANSCRIPTS = DATA_DIR / "transcripts"
CLAUDE_CODE_DIR = TRANSCRIPTS / "claude_code"
TAU_BENCH_FILE = TRANSCRIPTS / "tau_bench" / "gpt-4o-airline.json"
CLINC150_FILE = DATA_DIR / "clinc150" / "data_full.json"
RESULTS_DIR = Path(__file__).resolve().parent / "results"

_console = Console() if sys.stdout.isatty() else Console(width=200)


# --------------------------------------------------------------------------- data


def require(path: Path) -> Path:
    """``path``, or exit with a clear message when the shared data is missing."""
    if not path.exists():
        sys.exit(f"benchmark data not found: {path} (set CTXWISE_DATA to the shared data folder)")
    return path


def claude_code_files() -> list[Path]:
    """Every Claude Code transcript: top-level ``*.jsonl`` and ``*/subagents/*.jsonl``."""
    base = require(CLAUDE_CODE_DIR)
    return sorted([*base.glob("*.jsonl"), *base.glob("*/subagents/*.jsonl")])


def long_sessions() -> list[Path]:
    """The long Claude Code sessions: top-level files that have a session folder
    (``<session>.jsonl`` next to ``<session>/subagents/``)."""
    return [
        p for p in claude_code_files() if p.parent == CLAUDE_CODE_DIR and p.with_suffix("").is_dir()
    ]


def claude_code_transcripts() -> list[Transcript]:
    return [ctxwise.read_transcript(p) for p in claude_code_files()]


def tau_bench_transcripts() -> list[Transcript]:
    return ctxwise.read_transcripts(require(TAU_BENCH_FILE))


def block_kind(role: str, block: object) -> str:
    """``prose`` (user/assistant text), ``tool_result``, ``tool_use`` or ``other``
    (system prompts, thinking, media, opaque blocks)."""
    if isinstance(block, TextBlock) and role in ("user", "assistant"):
        return "prose"
    if isinstance(block, ToolResultBlock):
        return "tool_result"
    if isinstance(block, ToolUseBlock):
        return "tool_use"
    return "other"


def iter_blocks(transcripts: Sequence[Transcript]) -> Iterator[tuple[str, str]]:
    """``(kind, text)`` for every content block, in transcript order."""
    for t in transcripts:
        for msg in t.messages:
            for block in msg.content:
                yield block_kind(msg.role, block), block_text(block)


# --------------------------------------------------------------------------- embedding


class CachedEmbedder:
    """Embeds each distinct text once, and remembers what embedding it cost.

    ``charge()`` returns, for the texts asked for since the last call, the seconds
    actually spent embedding and the seconds they cost when first embedded (each
    text's share of its batch), so a row that reuses vectors can still be charged
    the full embedding time.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self._vectors: dict[str, np.ndarray] = {}
        self._cost: dict[str, float] = {}
        self._asked: set[str] = set()
        self._spent = 0.0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            start = time.perf_counter()
            vectors = self.inner.embed(missing)
            spent = time.perf_counter() - start
            self._spent += spent
            for text, vector in zip(missing, vectors, strict=True):
                self._vectors[text] = vector
                self._cost[text] = spent / len(missing)
        self._asked.update(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    def charge(self) -> tuple[float, float]:
        """``(seconds spent, seconds charged)`` since the last call."""
        spent, charged = self._spent, sum(self._cost[t] for t in self._asked)
        self._spent, self._asked = 0.0, set()
        return spent, charged


# --------------------------------------------------------------------------- stats


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0–100) with linear interpolation between ranks."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def time_ns(fn: Callable[[], object]) -> int:
    """Wall time of one call of ``fn`` in nanoseconds."""
    start = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - start


def summarize_ns(samples: Sequence[int]) -> dict[str, float]:
    """p50 / p99 / min / mean of nanosecond samples, in milliseconds."""
    ms = [s / 1e6 for s in samples]
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "min_ms": min(ms),
        "mean_ms": sum(ms) / len(ms),
    }


def ratio(a: float, b: float) -> float:
    return a / b if b else math.nan


# --------------------------------------------------------------------------- output


def environment(packages: Sequence[str] = ()) -> dict[str, Any]:
    """What the numbers were measured on (versions of ctxwise, the token counters
    and ``packages``)."""
    versions = {}
    for pkg in ("ctxwise", "quicktok-v1", "tiktoken", *packages):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "packages": versions,
        "data_dir": str(DATA_DIR),
    }


def write_results(name: str, payload: dict[str, Any], packages: Sequence[str] = ()) -> Path:
    """Write ``payload`` (plus the environment, with the versions of ``packages``)
    to ``benchmarks/results/<name>.json``."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    doc = {"benchmark": name, "environment": environment(packages), **payload}
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    _console.print(f"wrote {path.relative_to(REPO_ROOT)}")
    return path


def print_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    align: str = "",
    caption: str = "",
) -> None:
    """A table. ``align`` has one letter per column, ``l`` or ``r``; by default the
    first column is left-aligned and the others (numbers) right-aligned."""
    align = align or "l" + "r" * (len(columns) - 1)
    assert len(align) == len(columns), "one alignment letter per column"
    table = Table(
        title=title, title_justify="left", caption=caption or None, caption_justify="left"
    )
    for col, a in zip(columns, align, strict=True):
        table.add_column(col, justify="left" if a == "l" else "right")
    for row in rows:
        table.add_row(*(str(v) for v in row))
    _console.print(table)


def say(text: str) -> None:
    _console.print(text, highlight=False)


def fmt_ms(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def fmt_pct(x: float) -> str:
    return f"{x:+.1%}"


# --------------------------------------------------------------------------- summary baselines


def char_capacity(counter: ctxwise.TokenCounter, budget: int) -> int | None:
    """How many characters a :class:`~ctxwise.CharCounter` lets ``budget`` tokens
    hold (``None`` for other counters, which cost a line by counting it)."""
    if not isinstance(counter, ctxwise.CharCounter):
        return None
    cap = int(budget * 4 / (1 + counter.safety_margin)) + 2
    while cap > 0 and counter.count("x" * cap) > budget:
        cap -= 1
    return cap


def greedy_summary(
    turns: Sequence[ctxwise.Message], budget: int, counter: ctxwise.TokenCounter
) -> str:
    """The naive greedy extractive baseline (issue 10): the lines of
    :func:`ctxwise.summarize.render_turns`, ranked by the retention specifics they
    hold that the summary does not hold yet, per character, picked best first while
    they fit; kept lines in transcript order.

    It ranks by the measure's own specifics (a line-number gutter is none) and gets
    the budget as exactly as ctxwise does (:func:`_greedy_pick`).
    """
    from ctxwise.retention import specifics
    from ctxwise.summarize import render_turns

    lines = [x for x in render_turns(turns).splitlines() if x.strip()]
    # ranked by the measure's own specifics: a line without a file read's gutter
    specs = [specifics(_GUTTER.sub("", x.removeprefix("tool result: "))) for x in lines]
    return _greedy_pick(lines, specs, budget, counter)


def greedy_excerpts(
    turns: Sequence[ctxwise.Message], budget: int, counter: ctxwise.TokenCounter
) -> str:
    """The same greedy held to ctxwise's rules for a summary line: each line of a
    block whole (stripped), written with its origin (``[m12 Bash result] …``), never a
    numbering-only line, ranked by fresh specifics per character *of the written line*.

    What :func:`greedy_summary` would keep if it had to say where each line came
    from, as ctxwise does (and as compaction needs to point back into the archive).
    """

    from ctxwise.retention import specifics
    from ctxwise.summarize import format_excerpt

    numbering = re.compile(r"[\W_]*(?:\d{1,3}[\W_]*)?")
    names = {b.id: b.name for m in turns for b in m.content if isinstance(b, ToolUseBlock)}
    lines: list[str] = []
    for i, m in enumerate(turns):
        for b in m.content:
            if isinstance(b, TextBlock):
                who = m.role
            elif isinstance(b, ToolUseBlock):
                who = f"{b.name} call"
            elif isinstance(b, ToolResultBlock):
                who = f"{names.get(b.tool_use_id, 'tool')} result"
            else:
                continue
            for row in block_text(b).splitlines():
                row = row.strip()
                if row and not numbering.fullmatch(row):
                    lines.append(format_excerpt(i, who, row))
    lines = list(dict.fromkeys(lines))
    # the origin holds no specific; a tool output line is measured without its gutter
    specs = [specifics(_GUTTER.sub("", x.split("] ", 1)[1])) for x in lines]
    return _greedy_pick(lines, specs, budget, counter)


_GUTTER = re.compile(r"^[ \t]*\d+[→\t]")


def _greedy_pick(
    lines: Sequence[str], specs: Sequence[set[Any]], budget: int, counter: ctxwise.TokenCounter
) -> str:
    """Lines by fresh specifics per character, best first while they fit (a lazy
    greedy: a stale score is re-ranked when it surfaces); kept in their order.

    With a CharCounter a line costs its characters plus the newline against the
    characters the budget holds; with another counter its count plus one, and the
    result is checked whole at the end."""
    import heapq

    cap = char_capacity(counter, budget)
    limit = cap + 1 if cap is not None else budget  # the last line has no newline
    costs = [len(x) + 1 if cap is not None else counter.count(x) + 1 for x in lines]
    covered: set[object] = set()
    heap = [(-len(s) / (len(x) + 1), i) for i, (x, s) in enumerate(zip(lines, specs, strict=True))]
    heapq.heapify(heap)
    chosen: list[int] = []
    used = 0
    while heap:
        _, i = heapq.heappop(heap)
        fresh = len(specs[i] - covered)
        if not fresh or used + costs[i] > limit:
            continue
        score = fresh / (len(lines[i]) + 1)
        if heap and score < -heap[0][0]:
            heapq.heappush(heap, (-score, i))  # stale: re-rank
            continue
        chosen.append(i)
        used += costs[i]
        covered |= specs[i]
    chosen.sort()
    while chosen and counter.count("\n".join(lines[i] for i in chosen)) > budget:
        chosen.remove(min(chosen, key=lambda i: len(specs[i]) / costs[i]))
    return "\n".join(lines[i] for i in chosen)


def excerpt_texts(summary: str) -> str:
    """A summary with every excerpt's origin prefix (``[m12 Bash result] ``) removed:
    what retention is measured on, so a message number in a prefix never counts as a
    kept number."""
    from ctxwise.summarize import parse_excerpt

    out = []
    for line in summary.splitlines():
        ex = parse_excerpt(line)
        out.append(ex.text if ex is not None else line)
    return "\n".join(out)


def _suffix_ids(m: Message, suffix: str) -> Message:
    blocks = []
    for b in m.content:
        if isinstance(b, ToolUseBlock):
            b = replace(b, id=b.id + suffix)
        elif isinstance(b, ToolResultBlock):
            b = replace(b, tool_use_id=b.tool_use_id + suffix)
        blocks.append(b)
    return replace(m, content=tuple(blocks))


def scaled(
    sessions: Sequence[Transcript], tokens: int, counter: ctxwise.TokenCounter | None = None
) -> Transcript:
    """Real sessions back to back until ``tokens`` (tool ids suffixed ``~N`` per copy),
    cut where no tool call is open, then one closing user message."""
    counter = counter if counter is not None else ctxwise.CharCounter()
    out: list[Message] = []
    total = 0
    open_ids: set[str] = set()
    copy = 0
    while True:
        for t in sessions:
            copy += 1
            for m in t.messages:
                m = _suffix_ids(m, f"~{copy}")
                out.append(m)
                total += counter.count_messages((m,))
                open_ids |= {b.id for b in m.content if isinstance(b, ToolUseBlock)}
                open_ids -= {b.tool_use_id for b in m.content if isinstance(b, ToolResultBlock)}
                if total >= tokens and not open_ids:
                    out.append(Message.text_message("user", "Continue with the next step."))
                    label = f"scaled-{tokens // 1000}k"
                    return Transcript(tuple(out), format="anthropic", source=label)


def run_cli(*args: str | Path) -> tuple[int, str, str]:
    """Run the ``ctxwise`` CLI in-process: (exit code, stdout, stderr)."""
    from ctxwise.cli import main as ctxwise_main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            ctxwise_main([str(a) for a in args])
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()
