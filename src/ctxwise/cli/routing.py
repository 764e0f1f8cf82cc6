"""CLI commands for routing: ``route``, ``router build``, ``eval routing``, ``data``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from ctxwise.cli._eval import (
    EmbedderOpt,
    EmbeddingCacheOpt,
    EvalEmbedder,
    NoEmbeddingCacheOpt,
    embedder_report,
    open_embedder,
)
from ctxwise.cli._progress import progress
from ctxwise.cli._util import (
    _buffered_console,
    _guard,
    _num_col,
    _print_json,
    _table,
    _text_col,
    _write,
)
from ctxwise.errors import OutputError, UsageError

if TYPE_CHECKING:
    from ctxwise.routing import Scorer
    from ctxwise.routing.decision import RouteDecision

__all__ = [
    "OBJECTIVES",
    "SCORERS",
    "build_cmd",
    "clinc150_cmd",
    "data_app",
    "eval_routing_cmd",
    "route_cmd",
    "router_app",
]

SCORERS = ("bow", "lexical", "embedding", "hybrid")  # ctxwise.routing.SCORERS, without numpy
OBJECTIVES = ("accuracy", "balanced", "macro_f1")  # ctxwise.routing.calibration.OBJECTIVES

router_app = typer.Typer(help="Build intent routers.", no_args_is_help=True)
data_app = typer.Typer(help="Convert public datasets to ctxwise's formats.", no_args_is_help=True)

ScorerOpt = Annotated[
    str,
    typer.Option(
        help="Scorer: bow, lexical (the default), embedding (--embedder, default hashing)"
        " or hybrid (lexical + --embedder, default minilm: the minilm extra)."
    ),
]
HeadOpt = Annotated[
    str | None,
    typer.Option(
        help="Head of --scorer embedding (refused with any other scorer): nearest (the"
        " default: the best example's cosine) or linear (a logistic regression)."
    ),
]
ObjectiveOpt = Annotated[
    str,
    typer.Option(
        help="What calibration maximises: balanced (harmonic mean of in-scope accuracy "
        "and OOS recall), accuracy (0.75 × in-scope accuracy + 0.25 × OOS recall) "
        "or macro_f1."
    ),
]


def _objective(name: str) -> Any:
    if name not in OBJECTIVES:
        raise UsageError(f"unknown objective {name!r}; choose {', '.join(OBJECTIVES)}")
    return name


def _check_out(out: Path, inputs: dict[str, Path | None]) -> None:
    """Fail before the (slow) fit when the router cannot be written to ``out``, or
    would be written over one of the ``inputs`` (by option name)."""
    from ctxwise._io import is_stdout, same_file

    if is_stdout(out):
        raise UsageError("--out: a router is saved as two files (JSON and .npz); give a path")
    if out.is_dir():
        raise OutputError(str(out), "is a directory")
    if not out.parent.is_dir():
        raise OutputError(str(out), f"folder {out.parent} does not exist")
    # the arrays file is named by its content (IntentRouter.save refuses one that
    # exists with other bytes), so only the JSON can land on an input
    for option, path in inputs.items():
        if path is not None and same_file(path, out):
            raise OutputError(str(out), f"is the {option} file; write the router elsewhere")


def _scorer(
    name: str,
    embedder: str | None,
    head: str | None,
    *,
    cache: Path | None = None,
    no_cache: bool = False,
) -> tuple[Scorer, EvalEmbedder | None]:
    """The scorer the flags name, and the embedder it runs (None: it embeds nothing).
    A flag that does not apply, or a default embedder whose extra is missing, is
    refused naming the flag to change."""
    from ctxwise.routing import EmbeddingScorer, HybridScorer, make_scorer

    if name not in SCORERS:
        raise UsageError(f"unknown scorer {name!r}; choose {', '.join(SCORERS)}")
    if head is not None and name != "embedding":
        raise UsageError(f"--head applies to the embedding scorer, not {name}")
    if name not in ("embedding", "hybrid"):
        if embedder is not None:
            raise UsageError(f"--embedder applies to the embedding and hybrid scorers, not {name}")
        if cache is not None:
            raise UsageError(f"--embedding-cache applies to a scorer that embeds, not {name}")
        return make_scorer(name), None
    default = "hashing" if name == "embedding" else "minilm"
    hint = (
        ""
        if embedder is not None
        else f"or pass --embedder hashing (--scorer {name} embeds with {default} by default)"
    )
    used = open_embedder(embedder or default, cache=cache, no_cache=no_cache, flag_hint=hint)
    if name == "embedding":
        return EmbeddingScorer(used.embedder, head=head or "nearest"), used
    return HybridScorer(used.embedder), used


def route_cmd(
    router: Annotated[Path, typer.Argument(help="A router file saved by ctxwise.")],
    query: Annotated[str, typer.Option("--query", "-q", help="The query to route.")],
    explain: Annotated[bool, typer.Option(help="Show every intent's score.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the decision as JSON.")] = False,
    top: Annotated[int, typer.Option(help="How many scores to show.")] = 10,
) -> None:
    """Route one query with a saved router and show the scores."""

    def run() -> RouteDecision:
        from ctxwise.routing import IntentRouter

        if top < 1:
            raise UsageError("--top must be 1 or more")
        return IntentRouter.load(router).route(query)

    decision = _guard(run)
    if as_json:
        _print_json(decision.to_dict(top_scores=None if explain else top))
        return
    console, buf = _buffered_console()
    style = "green" if decision.label else "yellow"
    console.print(Text(f"{decision.reason.value}: ", style=style) + Text(decision.explain()))
    table = _table("scores")
    _text_col(table, "intent")
    _num_col(table, "score")
    _num_col(table, "threshold")
    ranked = sorted(decision.scores.items(), key=lambda kv: -kv[1])
    for name, score in ranked if explain else ranked[:top]:
        table.add_row(
            Text(name), f"{score:.4f}", f"{decision.threshold:.4f}" if name == decision.top else ""
        )
    console.print(table)
    _write(buf)


@router_app.command("build")
def build_cmd(
    train: Annotated[
        Path, typer.Option(help='JSONL of {"text", "label"}; label "oos" = out of scope.')
    ],
    out: Annotated[
        Path, typer.Option(help="Where to write the router: PATH (JSON) and PATH.<hash>.npz.")
    ],
    fit_on: Annotated[
        Path | None,
        typer.Option(
            help="Labeled JSONL to calibrate on, with oos rows (default: every 5th row "
            "of each label held out of --train)."
        ),
    ] = None,
    scorer: ScorerOpt = "lexical",
    embedder: EmbedderOpt = None,
    head: HeadOpt = None,
    objective: ObjectiveOpt = "balanced",
    as_json: Annotated[bool, typer.Option("--json", help="Print the fit report as JSON.")] = False,
) -> None:
    """Train a router on labeled examples, calibrate it, and save it (always fitted)."""
    from ctxwise.routing.evaluation import load_labeled

    def run() -> dict[str, Any]:
        from ctxwise.routing.evaluation import build_router

        goal = _objective(objective)
        _check_out(out, {"--train": train, "--fit-on": fit_on})
        examples = load_labeled(train)
        fit_rows = load_labeled(fit_on) if fit_on is not None else None
        chosen, _ = _scorer(scorer, embedder, head, no_cache=True)
        with progress("fitting and calibrating the router", enabled=not as_json):
            r, fitted, how = build_router(
                examples,
                scorer=chosen,
                fit_on=fit_rows,
                objective=goal,
                train_source=str(train),
                fit_source=str(fit_on),
            )
        report: dict[str, Any] = {"intents": len(r.intents), "scorer": r.scorer.name}
        report.update(fitted.to_dict())
        report["calibrated_on"] = how
        r.save(out)
        report["out"] = str(out)
        return report

    report = _guard(run)
    if as_json:
        _print_json(report)
        return
    after = report["after"]
    typer.echo(
        f"wrote {report['out']}: {report['intents']} intents, scorer {report['scorer']}, "
        f"threshold {report['threshold']:.4f}, margin {report['margin']}; calibrated for "
        f"{report['objective']} on {report['calibrated_on']}: in-scope accuracy "
        f"{after['in_scope_accuracy']:.3f}, OOS recall {after['oos_recall']:.3f}"
    )


def eval_routing_cmd(
    train: Annotated[Path, typer.Option(help='Training JSONL of {"text", "label"}.')],
    test: Annotated[Path, typer.Option(help="Test JSONL.")],
    fit_on: Annotated[Path | None, typer.Option(help="Calibration JSONL (with oos rows).")] = None,
    scorer: ScorerOpt = "lexical",
    embedder: EmbedderOpt = None,
    head: HeadOpt = None,
    objective: ObjectiveOpt = "balanced",
    latency_queries: Annotated[
        int,
        typer.Option(
            min=0,
            help="Test queries routed one at a time for p50_ms/p99_ms (0: none), each"
            " through the model, never the embedding cache.",
        ),
    ] = 200,
    embedding_cache: EmbeddingCacheOpt = None,
    no_embedding_cache: NoEmbeddingCacheOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
) -> None:
    """Train on --train, calibrate for --objective on --fit-on (or, as `router build`
    does, on every 5th row of each label held out of --train), measure on --test."""
    from ctxwise.routing.evaluation import evaluate, load_labeled

    def run() -> dict[str, Any]:
        goal = _objective(objective)
        rows = load_labeled(train)
        test_rows = load_labeled(test)
        fit_rows = load_labeled(fit_on) if fit_on is not None else None
        chosen, used = _scorer(
            scorer, embedder, head, cache=embedding_cache, no_cache=no_embedding_cache
        )
        what = f"fitting, then routing {test.name}"
        try:
            with progress(what, enabled=not as_json) as report:
                result = evaluate(
                    rows,
                    test_rows,
                    scorer=chosen,
                    fit_on=fit_rows,
                    objective=goal,
                    train_source=str(train),
                    fit_source=str(fit_on),
                    latency_queries=latency_queries,
                    progress=report,
                ).to_dict()
            return {
                **result,
                **embedder_report(used),
                "head": (head or "nearest") if scorer == "embedding" else None,
                "latency_queries": min(latency_queries, len(test_rows)),
                "train_rows": len(rows),
                "fit_rows": len(fit_rows) if fit_rows is not None else None,
                "test_rows": len(test_rows),
            }
        finally:
            if used is not None:
                used.close()

    result = _guard(run)
    if as_json:
        _print_json(result)
        return
    console, buf = _buffered_console()
    table = _table(f"routing: {result['scorer']}")
    _text_col(table, "metric")
    _text_col(table, "value", justify="right")
    for key, value in result.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        table.add_row(key, Text("-" if value is None else str(value)))
    console.print(table)
    _write(buf)


@data_app.command("clinc150")
def clinc150_cmd(
    data_full: Annotated[Path, typer.Argument(help="CLINC150 data_full.json.")],
    out_dir: Annotated[Path, typer.Argument(help="Folder for train/fit/test JSONL.")],
    hold_out_every: Annotated[
        int | None,
        typer.Option(
            help="Held-out-intent split: of the intents sorted by name, leave every K-th "
            "out of train and label its fit and test rows oos."
        ),
    ] = None,
    offset: Annotated[
        int,
        typer.Option(help="First held-out intent's position (0 to K-1); needs --hold-out-every."),
    ] = 0,
) -> None:
    """Write CLINC150 as train (train+oos_train), fit (val+oos_val), test (test+oos_test)."""
    from ctxwise.routing.evaluation import clinc150_splits

    def run() -> dict[str, int]:
        if hold_out_every is None and offset != 0:
            raise UsageError("--offset applies to a held-out-intent split: give --hold-out-every")
        return clinc150_splits(data_full, out_dir, hold_out_every=hold_out_every, offset=offset)

    counts = _guard(run)
    held = counts.pop("held_out", None)
    typer.echo(
        ", ".join(f"{name}.jsonl: {n:,} rows" for name, n in counts.items())
        + (f" ({held} intents held out as oos)" if held is not None else "")
        + f" → {out_dir}"
    )
