"""CLI commands for tool catalogs: ``tools search``, ``tools budget``, ``eval tools``.

Each reads a catalog file with :meth:`ctxwise.tools.ToolCatalog.load` (LiveMCPBench
JSONL, an MCP ``tools/list`` JSON, or an Anthropic or OpenAI tools array, detected
from the content). With ``--skip-invalid`` a definition that does not validate is
left out and named on stderr (``skipped: …``, one line each) once the command has
succeeded; any error prints one line on stderr instead and nothing on stdout.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ctxwise.cli._util import _buffered_console, _guard, _print_json, _write
from ctxwise.errors import UsageError

if TYPE_CHECKING:
    from ctxwise.tools.catalog import ToolCatalog

__all__ = ["budget_cmd", "eval_tools_cmd", "search_cmd", "tools_app"]

tools_app = typer.Typer(
    help="Search a tool catalog and count what deferred loading saves.", no_args_is_help=True
)

CatalogArg = Annotated[
    Path,
    typer.Argument(
        help="Tool catalog: LiveMCPBench JSONL, MCP tools/list JSON, Anthropic or OpenAI "
        "tools array."
    ),
]
EmbedderOpt = Annotated[
    str | None,
    typer.Option(
        help="Add vector search with this embedder (hashing, hashing:DIM, minilm, st:DIR); "
        "default: lexical only."
    ),
]
SkipOpt = Annotated[
    bool,
    typer.Option(
        "--skip-invalid", help="Leave out definitions that do not validate (named on stderr)."
    ),
]
KOpt = Annotated[int, typer.Option("--k", "-k", help="Tools found per query.")]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _check_k(k: int) -> int:
    if k < 1:
        raise UsageError(f"--k must be 1 or more, got {k}")
    return k


def _parse_ks(value: str) -> list[int]:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    try:
        ks = [int(p) for p in parts]
    except ValueError:
        raise UsageError(f"--k must be comma-separated integers, got {value!r}") from None
    if not ks or any(k < 1 for k in ks):
        raise UsageError(f"--k values must be 1 or more, got {value!r}")
    return sorted(set(ks))


def _load(
    path: Path, *, embedder: str | None, skip_invalid: bool, always: list[str] | None = None
) -> ToolCatalog:
    from ctxwise.tools.catalog import ToolCatalog

    options: dict[str, Any] = {}
    if embedder is not None:
        from ctxwise.embeddings import get_embedder

        options["embedder"] = get_embedder(embedder)
    return ToolCatalog.load(path, skip_invalid=skip_invalid, always_loaded=always or (), **options)


def _report_skipped(catalog: ToolCatalog) -> None:
    for err in catalog.skipped:
        typer.echo(f"skipped: {_one_line(str(err))}", err=True)


@tools_app.command("search")
def search_cmd(
    catalog: CatalogArg,
    query: Annotated[str, typer.Option("--query", "-q", help="What the tool should do.")],
    k: KOpt = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print the hits as JSON.")] = False,
    embedder: EmbedderOpt = None,
    skip_invalid: SkipOpt = False,
) -> None:
    """The k best tools of CATALOG for --query: rank, name, server, score."""

    def run() -> tuple[ToolCatalog, dict[str, Any], list[str]]:
        _check_k(k)
        cat = _load(catalog, embedder=embedder, skip_invalid=skip_invalid)
        hits = cat.search(query, k)
        rows = [
            {
                "name": h.tool.name,
                "server": h.tool.server,
                "wire_name": cat.wire_name(h.tool),
                "score": round(h.score, 6),
                "lexical_rank": h.lexical_rank,
                "vector_rank": h.vector_rank,
            }
            for h in hits
        ]
        firsts = [(h.tool.description.strip().splitlines() or [""])[0] for h in hits]
        return cat, {"query": query, "k": k, "hits": rows}, firsts

    cat, result, firsts = _guard(run)
    _report_skipped(cat)
    if as_json:
        _print_json(result)
        return
    console, buf = _buffered_console()
    table = Table(
        title=f"{len(result['hits'])} of {len(cat)} tools for {query!r}", title_justify="left"
    )
    table.add_column("rank", justify="right")
    table.add_column("tool")
    table.add_column("server")
    table.add_column("score", justify="right")
    table.add_column("description")
    for rank, (hit, first) in enumerate(zip(result["hits"], firsts, strict=True), 1):
        table.add_row(
            str(rank),
            Text(hit["wire_name"]),
            Text(hit["server"] or ""),
            f"{hit['score']:.4f}",
            Text(first),
        )
    console.print(table)
    _write(buf)


@tools_app.command("budget")
def budget_cmd(
    catalog: CatalogArg,
    k: KOpt = 5,
    queries: Annotated[
        Path | None,
        typer.Option(
            help='JSONL of {"query", "gold_tools"}: average the tokens of one turn over '
            "these queries."
        ),
    ] = None,
    always: Annotated[
        list[str] | None,
        typer.Option(
            "--always", help="A tool to keep always loaded (name or server/name); repeat."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    embedder: EmbedderOpt = None,
    skip_invalid: SkipOpt = False,
) -> None:
    """Definition tokens of CATALOG sent as is, against deferred loading with tool search."""

    def run() -> tuple[ToolCatalog, dict[str, Any]]:
        from ctxwise.tools.evaluation import load_tool_queries

        _check_k(k)
        rows = load_tool_queries(queries) if queries is not None else []
        cat = _load(catalog, embedder=embedder, skip_invalid=skip_invalid, always=always)
        if rows:
            deferred = round(statistics.fmean(cat.for_turn(q.query, k).tokens for q in rows), 1)
        else:
            deferred = float(cat.for_turn(None, k).tokens)
        total = cat.all_tokens()
        return cat, {
            "tools": len(cat),
            "k": k,
            "queries": len(rows),
            "all_tokens": total,
            "deferred_tokens": deferred,
            "reduction": round(1 - deferred / total, 4) if total else 0.0,
        }

    cat, result = _guard(run)
    _report_skipped(cat)
    if as_json:
        _print_json(result)
        return
    per = (
        f"always loaded + tool_search + {k} found, mean over {result['queries']} queries"
        if result["queries"]
        else "always loaded + tool_search, no query"
    )
    typer.echo(
        f"{result['tools']} tools: {result['all_tokens']:,} tokens sent as is; "
        f"{result['deferred_tokens']:,.1f} deferred ({per}); "
        f"reduction {result['reduction']:.1%}"
    )


def eval_tools_cmd(
    catalog: Annotated[Path, typer.Option(help="Tool catalog file (as for `tools search`).")],
    queries: Annotated[Path, typer.Option(help='JSONL of {"query", "gold_tools"}.')],
    k: Annotated[str, typer.Option(help="Comma-separated k values.")] = "5,10",
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
    embedder: EmbedderOpt = None,
    skip_invalid: SkipOpt = False,
) -> None:
    """Recall@k and any@k of tool search against gold tools, beside plain BM25."""

    def run() -> tuple[ToolCatalog, dict[str, Any]]:
        from ctxwise.tools.evaluation import evaluate_tool_search, load_tool_queries, plain_bm25

        ks = _parse_ks(k)
        rows = load_tool_queries(queries)
        cat = _load(catalog, embedder=embedder, skip_invalid=skip_invalid)
        ours = evaluate_tool_search(cat, rows, ks).to_dict()
        base = evaluate_tool_search(plain_bm25(cat), rows, ks).to_dict()
        return cat, {
            "n": ours["n"],
            "recall_at": ours["recall_at"],
            "any_at": ours["any_at"],
            "baseline_bm25": {key: base[key] for key in ("recall_at", "any_at", "p50_ms")},
            "p50_ms": ours["p50_ms"],
        }

    cat, result = _guard(run)
    _report_skipped(cat)
    if as_json:
        _print_json(result)
        return
    console, buf = _buffered_console()
    how = "hybrid" if embedder else "lexical"
    table = Table(
        title=f"tool search on {catalog.name} ({result['n']} queries, {len(cat)} tools)",
        title_justify="left",
    )
    table.add_column("method")
    for key in result["recall_at"]:
        table.add_column(f"recall@{key}", justify="right")
    for key in result["any_at"]:
        table.add_column(f"any@{key}", justify="right")
    table.add_column("p50 ms", justify="right")
    for name, values in (
        (f"ctxwise ({how}{', ' + embedder if embedder else ''})", result),
        ("plain BM25", result["baseline_bm25"]),
    ):
        table.add_row(
            name,
            *[f"{v:.3f}" for v in values["recall_at"].values()],
            *[f"{v:.3f}" for v in values["any_at"].values()],
            f"{values['p50_ms']:.2f}",
        )
    console.print(table)
    _write(buf)
