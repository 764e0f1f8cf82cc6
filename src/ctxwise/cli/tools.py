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
from rich.text import Text

from ctxwise.cli._eval import (
    EMBEDDER_HELP,
    EmbeddingCacheOpt,
    NoEmbeddingCacheOpt,
    embedder_report,
    open_embedder,
    resolve_embedder,
)
from ctxwise.cli._progress import progress, scaled
from ctxwise.cli._util import (
    _buffered_console,
    _guard,
    _num_col,
    _print_json,
    _table,
    _text_col,
    _write,
    max_input_bytes,
    max_input_option,
)
from ctxwise.errors import ToolCatalogError, UsageError
from ctxwise.tools.catalog import MAX_CATALOG_BYTES

if TYPE_CHECKING:
    from ctxwise.embeddings import Embedder
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
        help=f"Add vector search with this embedder (default: lexical only): {EMBEDDER_HELP}."
    ),
]
SkipOpt = Annotated[
    bool,
    typer.Option(
        "--skip-invalid", help="Leave out definitions that do not validate (named on stderr)."
    ),
]
KOpt = Annotated[int, typer.Option("--k", "-k", help="Tools found per query.")]
MaxInputOpt = Annotated[str | None, max_input_option("a catalog file", MAX_CATALOG_BYTES)]
SKIPPABLE = ("invalid_schema", "bad_definition")
"""The refusals ``--skip-invalid`` turns into a skipped definition (a duplicate
name, an unknown ``--always`` tool are never skipped)."""


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
    path: Path,
    *,
    embedder: str | Embedder | None,
    skip_invalid: bool,
    max_input: str | None,
    always: list[str] | None = None,
) -> ToolCatalog:
    from ctxwise.tools.catalog import ToolCatalog

    options: dict[str, Any] = {"max_bytes": max_input_bytes(max_input, MAX_CATALOG_BYTES)}
    if isinstance(embedder, str):
        options["embedder"] = resolve_embedder(embedder)
    elif embedder is not None:
        options["embedder"] = embedder
    try:
        return ToolCatalog.load(
            path, skip_invalid=skip_invalid, always_loaded=always or (), **options
        )
    except ToolCatalogError as e:
        if skip_invalid or e.reason not in SKIPPABLE:
            raise
        raise UsageError(
            f"{e}; --skip-invalid leaves out the definitions that do not validate"
        ) from None


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
    max_input: MaxInputOpt = None,
) -> None:
    """The k best tools of CATALOG for --query: rank, name, server, score."""

    def run() -> tuple[ToolCatalog, dict[str, Any], list[str]]:
        _check_k(k)
        cat = _load(catalog, embedder=embedder, skip_invalid=skip_invalid, max_input=max_input)
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
    table = _table(f"{len(result['hits'])} of {len(cat)} tools for {query!r}")
    _num_col(table, "rank")
    _text_col(table, "tool")
    _text_col(table, "server", max_width=24)
    _num_col(table, "score")
    _text_col(table, "description")
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
            "these queries (without it: the turn before any tool is found, and the most "
            "a turn with k found can send)."
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
    max_input: MaxInputOpt = None,
) -> None:
    """Definition tokens of CATALOG sent as is, against deferred loading with tool search."""

    def run() -> tuple[ToolCatalog, dict[str, Any]]:
        from ctxwise.tools.evaluation import load_tool_queries

        _check_k(k)
        rows = load_tool_queries(queries) if queries is not None else []
        with progress(f"{catalog.name}: one turn a query", enabled=not as_json) as report:
            cat = _load(
                catalog,
                embedder=embedder,
                skip_invalid=skip_invalid,
                max_input=max_input,
                always=always,
            )
            per_query = []
            for n, q in enumerate(rows, 1):
                per_query.append(cat.for_turn(q.query, k).tokens)
                if report is not None:
                    report(n, len(rows))
        bare = cat.for_turn(None, k)
        total = cat.all_tokens()
        deferred = round(statistics.fmean(per_query), 1) if rows else float(bare.tokens)
        # the most one turn sends with k found: the k largest definitions not
        # already always loaded, on top of what goes before any search
        rest = sorted((cat.tokens(t) for t in cat if not cat.is_always_loaded(t)), reverse=True)
        most = bare.tokens + sum(rest[:k])
        if rows:
            counts = f"always loaded + tool_search + {k} found, mean over {len(rows)} queries"
        else:
            counts = "always loaded + tool_search, before any tool is found"
        return cat, {
            "tools": len(cat),
            "k": k,
            "queries": len(rows),
            "all_tokens": total,
            "deferred_tokens": deferred,
            "reduction": round(1 - deferred / total, 4) if total else 0.0,
            "counts": counts,
            "max_tokens": most,
            "max_reduction": round(1 - most / total, 4) if total else 0.0,
        }

    cat, result = _guard(run)
    _report_skipped(cat)
    if as_json:
        _print_json(result)
        return
    console, buf = _buffered_console()
    table = _table(f"{catalog.name}: {result['tools']:,} tools, the definitions one turn sends")
    _text_col(table, "sent")
    _num_col(table, "tokens")
    _num_col(table, "less")
    table.add_row("every definition, as is", f"{result['all_tokens']:,}", "-")
    table.add_row(
        Text(f"deferred: {result['counts']}"),
        f"{result['deferred_tokens']:,.{1 if result['queries'] else 0}f}",
        f"{result['reduction']:.1%}",
    )
    table.add_row(
        Text(f"deferred, the most with --k {k}: + the {k} largest definitions"),
        f"{result['max_tokens']:,}",
        f"{result['max_reduction']:.1%}",
    )
    console.print(table)
    if not result["queries"]:
        console.print(
            Text(
                f'no --queries: give a JSONL of {{"query": …}} to count the {k} tools '
                "each query finds",
                style="dim",
            )
        )
    _write(buf)


def eval_tools_cmd(
    catalog: Annotated[Path, typer.Option(help="Tool catalog file (as for `tools search`).")],
    queries: Annotated[Path, typer.Option(help='JSONL of {"query", "gold_tools"}.')],
    k: Annotated[str, typer.Option(help="Comma-separated k values.")] = "5,10",
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
    embedder: EmbedderOpt = None,
    embedding_cache: EmbeddingCacheOpt = None,
    no_embedding_cache: NoEmbeddingCacheOpt = False,
    skip_invalid: SkipOpt = False,
    max_input: MaxInputOpt = None,
) -> None:
    """Recall@k and any@k of tool search against gold tools, beside plain BM25."""

    def run() -> tuple[ToolCatalog, dict[str, Any]]:
        from ctxwise.tools.evaluation import evaluate_tool_search, load_tool_queries, plain_bm25

        ks = _parse_ks(k)
        if embedder is None and embedding_cache is not None:
            raise UsageError("--embedding-cache applies with --embedder: add --embedder")
        rows = load_tool_queries(queries)
        used = (
            open_embedder(embedder, cache=embedding_cache, no_cache=no_embedding_cache)
            if embedder is not None
            else None
        )
        what = f"{catalog.name}: ctxwise, then plain BM25"
        try:
            with progress(what, enabled=not as_json) as report:
                cat = _load(
                    catalog,
                    embedder=used.embedder if used is not None else None,
                    skip_invalid=skip_invalid,
                    max_input=max_input,
                )
                ours = evaluate_tool_search(cat, rows, ks, progress=scaled(report, 0, 2)).to_dict()
                base = evaluate_tool_search(
                    plain_bm25(cat), rows, ks, progress=scaled(report, 1, 2)
                ).to_dict()
            described = embedder_report(used)
        finally:
            if used is not None:
                used.close()
        return cat, {
            "n": ours["n"],
            "tools": len(cat),
            "skipped_tools": len(cat.skipped),
            "search": "hybrid" if embedder else "lexical",
            **described,
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
    how = result["search"]
    table = _table(f"tool search on {catalog.name} ({result['n']} queries, {len(cat)} tools)")
    _text_col(table, "method")
    for key in result["recall_at"]:
        _num_col(table, f"recall@{key}")
    for key in result["any_at"]:
        _num_col(table, f"any@{key}")
    _num_col(table, "p50 ms")
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
