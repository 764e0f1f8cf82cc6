"""The ``eval`` command group, ``eval memory`` and ``eval tokens``.

The other ``eval`` commands live beside the component they measure and are
registered here by :mod:`ctxwise.cli`: ``eval routing`` (:mod:`~ctxwise.cli.routing`),
``eval tools`` (:mod:`~ctxwise.cli.tools`), ``eval handoff``
(:mod:`~ctxwise.cli.handoff`), ``eval relay`` (:mod:`~ctxwise.cli.relay`). Those that
embed share their options (:mod:`ctxwise.cli._eval`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ctxwise.cli._eval import (
    EmbedderOpt,
    EmbeddingCacheOpt,
    NoEmbeddingCacheOpt,
    PresetOpt,
    check_preset,
    open_embedder,
    print_skipped,
)
from ctxwise.cli._progress import progress
from ctxwise.cli._store import STORE_HELP, writable_store
from ctxwise.cli._util import (
    _buffered_console,
    _guard,
    _num_col,
    _print_json,
    _table,
    _text_col,
    _write,
)
from ctxwise.errors import StoreDimensionError, UsageError

__all__ = ["EVAL_SCHEMA", "eval_app", "eval_memory_cmd", "eval_tokens_cmd"]

EVAL_SCHEMA = "ctxwise_eval"

eval_app = typer.Typer(help="Evaluate components on labeled data.", no_args_is_help=True)


@eval_app.command("memory")
def eval_memory_cmd(
    data: Annotated[
        Path, typer.Option(help="Conversations with evidence (generic JSON or LoCoMo).")
    ],
    k: Annotated[str, typer.Option(help="Comma-separated k values.")] = "1,5,10",
    embedder: EmbedderOpt = None,
    format: Annotated[str, typer.Option("--format", help="auto, generic or locomo.")] = "auto",
    store: Annotated[
        str,
        typer.Option(
            help=f"Where to remember ({STORE_HELP}; a new SQLite file is created; in"
            " PostgreSQL, in --schema); namespaces eval/<conversation>. Default: a"
            " private in-memory SQLite database."
        ),
    ] = "sqlite://",
    schema: Annotated[
        str,
        typer.Option(
            help="PostgreSQL schema of a --store postgresql://… (one schema holds one"
            " embedder's vector dimension)."
        ),
    ] = EVAL_SCHEMA,
    preset: PresetOpt = "neutral",
    embedding_cache: EmbeddingCacheOpt = None,
    no_embedding_cache: NoEmbeddingCacheOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
) -> None:
    """Remember every turn, recall for every question: recall@k, hybrid and baselines."""
    from ctxwise.memory.evaluation import evaluate_recall, load_conversations
    from ctxwise.memory.urls import open_store, store_kind

    def run() -> dict[str, Any]:
        url = writable_store(store)  # a bad URL fails before anything is read or written
        kind = store_kind(url)
        if schema != EVAL_SCHEMA and kind != "postgresql":
            raise UsageError(f"--schema applies to a PostgreSQL --store, not {kind}")
        name = embedder or "hashing"
        check_preset(preset, name)
        try:
            ks = [int(x) for x in k.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"--k must be comma-separated integers, got {k!r}") from None
        conversations = load_conversations(data, format)
        used = open_embedder(name, cache=embedding_cache, no_cache=no_embedding_cache)
        emb = used.embedder

        def opened() -> Any:
            try:
                return open_store(url, dim=emb.dim, schema=schema)
            except StoreDimensionError as exc:
                raise UsageError(
                    f"schema {exc.schema!r} holds {exc.held}-dimensional vectors and"
                    f" --embedder {emb.name} makes {exc.dim}: pass --schema NAME to keep"
                    f" these in another schema (nothing was written)"
                ) from None

        try:
            with progress(f"remembering and recalling {data.name}", enabled=not as_json) as rep:
                result = evaluate_recall(
                    conversations,
                    ks,
                    embedder=emb,
                    store_factory=opened,
                    options={"preset": preset},
                    progress=rep,
                )
            cache = used.report()["embedding_cache"]
        finally:
            used.close()
        return {
            **result,
            "store": kind,
            "schema": schema if kind == "postgresql" else None,
            "preset": preset,
            "embedding_cache": cache,
        }

    result = _guard(run)
    if as_json:
        _print_json(result)
        return
    console, buf = _buffered_console()
    table = _table(
        f"recall on {data.name} ({result['n']} questions, {result['store']} store,"
        f" embedder {result['embedder']}, preset {result['preset']})"
    )
    _text_col(table, "method")
    for key in result["recall_at"]:
        _num_col(table, f"recall@{key}")
    rows = [("hybrid", result), *[(m, b) for m, b in result["baselines"].items()]]
    rows += [(f"hybrid, category {c}", v) for c, v in result["by_category"].items()]
    for name, values in rows:
        table.add_row(name, *[f"{v:.3f}" for v in values["recall_at"].values()])
    console.print(table)
    console.print(f"hybrid recall p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms")
    print_skipped(console, result)
    _write(buf)


@eval_app.command("tokens")
def eval_tokens_cmd(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Transcripts with per-call usage: Claude Code sessions (and their"
            " subagents/*.jsonl), or any format ctxwise reads whose responses kept it.",
            show_default=False,
        ),
    ],
    counter: Annotated[
        list[str] | None,
        typer.Option(
            "--counter",
            help="A counter to score (repeat for several): char, word, tiktoken,"
            " anthropic, anthropic:chars, anthropic:o200k, openai:MODEL, auto:MODEL."
            " Default: char, tiktoken and both anthropic tokenizations (those installed).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Replay recorded calls: each counter's estimate of the messages added between
    two calls against the provider's prompt delta (docs/tokens.md)."""
    result = _guard(lambda: token_report(files, counter, show_progress=not as_json))
    if as_json:
        _print_json(result)
        return
    console, buf = _buffered_console()
    table = _table(
        f"counters against the provider's deltas ({result['steps']} steps from"
        f" {len(result['files'])} file(s))"
    )
    _text_col(table, "counter")
    for header in ("Σest / Σprovider", "p50", "p90", "p95", "median signed"):
        _num_col(table, header)
    for row in result["counters"]:
        table.add_row(
            row["counter"],
            f"{row['ratio']:.3f}",
            f"{row['p50_error']:.1%}",
            f"{row['p90_error']:.1%}",
            f"{row['p95_error']:.1%}",
            f"{row['median_signed']:+.1%}",
        )
    console.print(table)
    console.print("relative error per step: |estimate - delta| / delta")
    if result["skipped"]:
        console.print(
            f"skipped {sum(result['skipped'].values())} pair(s) of calls: "
            + "; ".join(f"{n} {why}" for why, n in result["skipped"].items())
        )
    _write(buf)


DEFAULT_TOKEN_COUNTERS = ("char", "tiktoken", "anthropic:chars", "anthropic:o200k")
"""What ``eval tokens`` scores without ``--counter`` (those installed)."""


def token_report(
    files: list[Path], names: list[str] | None, *, show_progress: bool = False
) -> dict[str, Any]:
    """The ``eval tokens`` report (see :func:`eval_tokens_cmd`)."""
    from ctxwise.calibration import score_counter
    from ctxwise.errors import MissingDependencyError, TokenizerUnavailableError
    from ctxwise.formats.usage import read_usage_steps
    from ctxwise.tokens import TokenCounter, get_counter

    counters: list[TokenCounter] = []
    left_out: dict[str, str] = {}
    for name in names or DEFAULT_TOKEN_COUNTERS:
        try:
            counters.append(get_counter(name))
        except (MissingDependencyError, TokenizerUnavailableError) as exc:
            if names:  # asked for by name: refuse
                raise
            left_out[name] = str(exc)
    steps = []
    per_file = []
    skipped: dict[str, int] = {}
    with progress("reading usage", enabled=show_progress) as rep:
        for i, path in enumerate(files):
            more, reports = read_usage_steps(path)
            steps += more
            for r in reports:
                per_file.append(
                    {
                        "path": r.source,
                        "calls": r.calls,
                        "steps": r.steps,
                        "skipped": dict(sorted(r.skipped.items())),
                    }
                )
                for why, n in r.skipped.items():
                    skipped[why] = skipped.get(why, 0) + n
            if rep is not None:
                rep(i + 1, len(files))
    if not steps:
        raise UsageError(
            f"no usage steps in {', '.join(str(f) for f in files)}: a step needs two"
            " consecutive calls with their usage recorded"
            + (
                f" (skipped: {', '.join(f'{n} {w}' for w, n in skipped.items())})"
                if skipped
                else ""
            )
        )
    scores = [score_counter(c, steps).as_dict() for c in counters]
    return {
        "files": per_file,
        "steps": len(steps),
        "skipped": dict(sorted(skipped.items())),
        "counters": scores,
        "not_installed": left_out,
    }
