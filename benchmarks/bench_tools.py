"""Tool catalogs: definition tokens with deferral and search, and search quality.

Data (``../shared/data/tools``): LiveMCPBench's tool catalog and its annotated
queries (``livemcpbench/``; the one definition whose schema is not valid JSON
Schema is left out with ``skip_invalid=True``), the GitHub MCP server's
``tools/list`` listing, and the eight mcp-proxy snapshots combined into one catalog
(one server per file, named by the file's ``server`` or ``server_info.name``).

(a) Definition tokens per turn. *all*: every definition sent as it is, every turn.
    *deferred*: what :meth:`ToolCatalog.for_turn` sends with ``k=5``: the
    ``tool_search`` tool plus the five best matches for the turn's query (nothing
    always loaded, nothing loaded by earlier searches); the other definitions go
    with ``defer_loading`` (Anthropic) or not at all (OpenAI) and cost nothing
    until loaded. Queries: LiveMCPBench's own for its catalog; for the GitHub
    listing and the combined snapshots (whose largest server is GitHub's), the
    hand-written tasks in ``benchmarks/data/github_tasks.jsonl``. *no query*: the
    turn with only ``tool_search``. Counted with ``CharCounter`` and, when it loads
    offline, tiktoken's ``o200k_base``. ``reduction`` = 1 - deferred mean / all.

(b) Search quality on LiveMCPBench (:mod:`ctxwise.tools.evaluation`): recall and
    any-hit at k = 5 and 10 of plain BM25 (:func:`~ctxwise.tools.evaluation.plain_bm25`, the
    same texts and analyzer, no vectors, no server affinity), ctxwise's default
    (lexical with server affinity), ctxwise with the hashing embedder, and ctxwise
    with MiniLM (only when sentence-transformers and the model load offline;
    otherwise recorded as skipped with the reason). On all queries and on the two
    halves by query index (even: ``fit``, odd: ``test``); nothing is tuned, so the
    halves show the spread. BM25 has no ``k1``/``b`` knobs here, so the baseline is
    plain BM25 only. ``p50_ms``: median time of one search, after the index (and
    the tool embeddings) are built; the build time is reported apart.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from _common import DATA_DIR, fmt_ms, print_table, require, say, write_results
from ctxwise.embeddings import Embedder, HashingEmbedder
from ctxwise.tokens import CharCounter, TokenCounter, get_counter
from ctxwise.tools.catalog import ToolCatalog
from ctxwise.tools.evaluation import ToolQuery, evaluate_tool_search, load_tool_queries, plain_bm25

TOOLS = DATA_DIR / "tools"
LIVEMCP = TOOLS / "livemcpbench" / "livemcp_tool_catalog.jsonl"
LIVEMCP_QUERIES = TOOLS / "livemcpbench" / "livemcp_queries_gold_tools.jsonl"
GITHUB = TOOLS / "mcp_listings" / "github-mcp-server.tools_list.json"
SNAPSHOTS = TOOLS / "mcp_listings" / "mcp-proxy-snapshots"
GITHUB_TASKS = Path(__file__).resolve().parent / "data" / "github_tasks.jsonl"
K = 5
KS = (5, 10)


def _counters() -> dict[str, TokenCounter]:
    out: dict[str, TokenCounter] = {"char": CharCounter()}
    try:
        counter = get_counter("tiktoken:o200k_base")
        counter.count("probe")
    except Exception as e:  # an optional counter: record why it is missing
        say(f"tiktoken:o200k_base skipped: {type(e).__name__}: {e}")
    else:
        out["tiktoken:o200k_base"] = counter
    return out


def _snapshot_catalog(counter: TokenCounter) -> ToolCatalog:
    cat = ToolCatalog(counter=counter)
    for path in sorted(require(SNAPSHOTS).glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        server = doc.get("server") or (doc.get("server_info") or {}).get("name") or path.stem
        cat.add_mcp(doc, server=server)
    return cat


def _tasks(path: Path) -> list[str]:
    lines = require(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(x)["query"] for x in lines if x.strip()]


def definition_tokens(
    livemcp_queries: list[str], counters: dict[str, TokenCounter]
) -> list[dict[str, Any]]:
    github_tasks = _tasks(GITHUB_TASKS)
    rows = []
    for counter_name, counter in counters.items():
        catalogs = [
            (
                "LiveMCPBench",
                ToolCatalog.load(require(LIVEMCP), skip_invalid=True, counter=counter),
                "LiveMCPBench queries",
                livemcp_queries,
            ),
            (
                "GitHub MCP server",
                ToolCatalog.load(require(GITHUB), counter=counter),
                "github_tasks.jsonl",
                github_tasks,
            ),
            (
                "mcp-proxy snapshots (8 servers)",
                _snapshot_catalog(counter),
                "github_tasks.jsonl",
                github_tasks,
            ),
        ]
        for name, cat, query_set, queries in catalogs:
            per_turn = [cat.for_turn(q, k=K).tokens for q in queries]
            empty = cat.for_turn(None)
            all_tokens = cat.all_tokens()
            mean = sum(per_turn) / len(per_turn)
            rows.append(
                {
                    "catalog": name,
                    "counter": counter_name,
                    "tools": len(cat),
                    "servers": len({t.server for t in cat}),
                    "queries": query_set,
                    "n_queries": len(queries),
                    "all_tokens": all_tokens,
                    "search_tool_tokens": cat.tokens(None),
                    "no_query_tokens": empty.tokens,
                    "deferred_tokens": round(mean, 1),
                    "deferred_tokens_max": max(per_turn),
                    "reduction": round(1 - mean / all_tokens, 4),
                }
            )
    return rows


def _methods(base: ToolCatalog) -> tuple[dict[str, ToolCatalog], dict[str, str]]:
    methods = {
        "plain BM25": plain_bm25(base),
        "ctxwise (lexical)": ToolCatalog(list(base)),
        "ctxwise + hashing": ToolCatalog(list(base), embedder=HashingEmbedder()),
    }
    skipped: dict[str, str] = {}
    try:
        from ctxwise.embeddings import get_embedder

        minilm: Embedder = get_embedder("minilm")
        minilm.embed(["probe"])
    except Exception as e:  # optional: sentence-transformers or the model may be absent
        skipped["ctxwise + MiniLM"] = f"{type(e).__name__}: {e}"
    else:
        methods["ctxwise + MiniLM"] = ToolCatalog(list(base), embedder=minilm)
    return methods, skipped


def selection(queries: list[ToolQuery]) -> dict[str, Any]:
    base = ToolCatalog.load(require(LIVEMCP), skip_invalid=True)
    methods, skipped = _methods(base)
    splits = {"all": queries, "fit": queries[0::2], "test": queries[1::2]}
    rows = []
    for method, cat in methods.items():
        start = time.perf_counter()
        cat.search("warm up the index", 1)
        build_ms = (time.perf_counter() - start) * 1000
        for split, qs in splits.items():
            ev = evaluate_tool_search(cat, qs, KS)
            rows.append(
                {"method": method, "split": split, "build_ms": round(build_ms, 1), **ev.to_dict()}
            )
    return {
        "tools": len(base),
        "queries": len(queries),
        "ks": list(KS),
        "rows": rows,
        "skipped": skipped,
    }


def main() -> None:
    queries = load_tool_queries(require(LIVEMCP_QUERIES))
    counters = _counters()
    tokens = definition_tokens([q.query for q in queries], counters)
    print_table(
        f"definition tokens per turn: all definitions vs tool_search + k={K} found",
        [
            "catalog",
            "counter",
            "tools",
            "queries",
            "all",
            "no query",
            "deferred mean",
            "deferred max",
            "reduction",
        ],
        [
            [
                r["catalog"],
                r["counter"],
                r["tools"],
                f"{r['n_queries']} ({r['queries']})",
                f"{r['all_tokens']:,}",
                f"{r['no_query_tokens']:,}",
                f"{r['deferred_tokens']:,.0f}",
                f"{r['deferred_tokens_max']:,}",
                f"{r['reduction']:.1%}",
            ]
            for r in tokens
        ],
        align="llrlrrrrr",
    )
    sel = selection(queries)
    print_table(
        f"search on LiveMCPBench ({sel['tools']} tools, {sel['queries']} queries; "
        "fit = even query index, test = odd)",
        [
            "method",
            "split",
            "n",
            "recall@5",
            "recall@10",
            "any@5",
            "any@10",
            "p50 ms",
            "build ms",
        ],
        [
            [
                r["method"],
                r["split"],
                r["n"],
                f"{r['recall_at']['5']:.3f}",
                f"{r['recall_at']['10']:.3f}",
                f"{r['any_at']['5']:.3f}",
                f"{r['any_at']['10']:.3f}",
                fmt_ms(r["p50_ms"]),
                f"{r['build_ms']:,.0f}",
            ]
            for r in sel["rows"]
        ],
        align="llrrrrrrr",
    )
    for method, why in sel["skipped"].items():
        say(f"{method} skipped: {why}")
    write_results(
        "tools",
        {"k": K, "counters": list(counters), "definition_tokens": tokens, "selection": sel},
        packages=("tiktoken", "sentence-transformers", "jsonschema"),
    )


if __name__ == "__main__":
    main()
