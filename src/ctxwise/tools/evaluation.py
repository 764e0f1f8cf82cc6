"""Measuring tool search: recall at k against gold tools, beside plain BM25.

A query file is JSON lines of ``{"query": "...", "gold_tools": [{"tool": NAME,
"servers": [SERVER, ...]}, ...]}`` (LiveMCPBench's annotated tasks in
``../shared/data/tools/livemcpbench``). A gold tool counts as found when a tool of
that name from one of its listed servers is in the top ``k``; one with no servers
listed can never be found and still counts (the score is not flattered by leaving
it out). For each ``k``:

- ``recall_at[k]``: the mean over queries of the fraction of the query's gold tools
  found;
- ``any_at[k]``: the fraction of queries with at least one gold tool found.

The baseline is plain BM25 over the same texts (the same analyzer and fields as
the catalog's search, no vectors and no server affinity): a
:class:`~ctxwise.tools.ToolCatalog` with ``embedder=None, server_weight=0``.
``p50_ms`` is the median wall time of one search (the injected ``clock``).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxwise._io import parse_json
from ctxwise.embedding_cache import bypassing
from ctxwise.errors import FormatError, UsageError
from ctxwise.tools.catalog import ToolCatalog

__all__ = [
    "GoldTool",
    "ToolQuery",
    "ToolSearchEvaluation",
    "evaluate_tool_search",
    "load_tool_queries",
    "plain_bm25",
]


class GoldTool(BaseModel):
    """A tool a query needs: its name and the servers that have it."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    tool: str
    servers: list[str] = Field(default_factory=list)


class ToolQuery(BaseModel):
    """One query of a query file and the tools it needs."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    query: str = Field(min_length=1)
    gold_tools: list[GoldTool] = Field(min_length=1)


@dataclass(frozen=True, slots=True)
class ToolSearchEvaluation:
    """Figures for one search setting (see the module docstring)."""

    n: int
    recall_at: dict[int, float]
    any_at: dict[int, float]
    p50_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "recall_at": {str(k): v for k, v in self.recall_at.items()},
            "any_at": {str(k): v for k, v in self.any_at.items()},
            "p50_ms": self.p50_ms,
        }


def load_tool_queries(path: str | Path) -> list[ToolQuery]:
    """The queries of a JSONL query file.

    Raises:
        FormatError: the file cannot be read, a line is not JSON, or a line has no
            non-empty ``query`` or no ``gold_tools`` (the line number is given).
    """
    from ctxwise._io import read_text_file

    source = str(path)
    text = read_text_file(source, "a query file", FormatError)
    out: list[ToolQuery] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(ToolQuery.model_validate(parse_json(line)))
        except json.JSONDecodeError as e:
            raise FormatError(source, f"not JSON: {e.msg}", line=n) from None
        except RecursionError:
            raise FormatError(source, "JSON nested too deeply", line=n) from None
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the line"
            raise FormatError(source, f"{where}: {first['msg']}", line=n) from None
    if not out:
        raise FormatError(source, "no queries")
    return out


def plain_bm25(catalog: ToolCatalog) -> ToolCatalog:
    """The baseline: the same tools and texts, ranked by BM25 alone."""
    base = ToolCatalog(analyzer=catalog.analyzer, counter=catalog.counter, server_weight=0.0)
    base.add(list(catalog))
    return base


def _check_ks(ks: Iterable[int]) -> list[int]:
    given = list(ks)
    if not given or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in given):
        raise UsageError(f"k values are positive integers, got {given!r}")
    return sorted(set(given))


def evaluate_tool_search(
    catalog: ToolCatalog,
    queries: Sequence[ToolQuery] | Sequence[Mapping[str, Any]],
    ks: Iterable[int] = (5, 10),
    *,
    clock: Callable[[], float] = time.perf_counter,
    progress: Callable[[int, int], None] | None = None,
) -> ToolSearchEvaluation:
    """Recall at each ``k`` of ``catalog.search`` over ``queries`` (module
    docstring). ``progress(done, total)`` is called after each query; nothing is
    printed."""
    wanted = _check_ks(ks)
    parsed = [q if isinstance(q, ToolQuery) else ToolQuery.model_validate(q) for q in queries]
    if not parsed:
        raise UsageError("there are no queries to evaluate")
    depth = max(wanted)
    recall = {k: 0.0 for k in wanted}
    anyhit = {k: 0 for k in wanted}
    times: list[float] = []
    if progress is not None:
        progress(0, len(parsed))
    catalog.build_index()  # not in the first query's time
    for n, q in enumerate(parsed, 1):
        # a query's latency is the model's: a cached embedder embeds it afresh
        with bypassing(catalog.embedder):
            t0 = clock()
            hits = catalog.search(q.query, depth)
            times.append((clock() - t0) * 1000)
        keys = [h.tool.key for h in hits]
        for k in wanted:
            top = set(keys[:k])
            found = sum(1 for g in q.gold_tools if any((s, g.tool) in top for s in g.servers))
            recall[k] += found / len(q.gold_tools)
            anyhit[k] += found > 0
        if progress is not None:
            progress(n, len(parsed))
    n = len(parsed)
    return ToolSearchEvaluation(
        n,
        {k: round(recall[k] / n, 4) for k in wanted},
        {k: round(anyhit[k] / n, 4) for k in wanted},
        round(statistics.median(times), 3),
    )
