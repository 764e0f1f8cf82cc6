"""CLI commands for relay jobs: ``relay run``, ``relay resume``, ``eval relay``, ``data relay``.

``relay run SPEC`` reads a spec file (:func:`ctxwise.relay.load_spec`), keeps it with
the run as ``spec.json`` and runs the workload chunk by chunk, committing after every
step; ``relay resume RUN_ID`` reads that ``spec.json`` back and continues after the
last committed step. ``eval relay`` runs a workload (a folder, or the synthetic
equipment log of :func:`ctxwise.relay.generate`) in memory, nothing written, and
scores it against its answers; ``data relay`` writes the synthetic log as a workload
folder. Any error prints one line on stderr and nothing on stdout.

A run in which the step recognised nothing in some chunks (the parser on a log
written with other phrasings) says so: one ``ctxwise: warning:`` line on stderr
naming the count and the step to use instead, or, with ``--json``, the same text in
the ``warnings`` list beside ``unrecognised_chunks``.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ctxwise.cli._progress import progress
from ctxwise.cli._util import _buffered_console, _guard, _print_json, _write
from ctxwise.errors import RelayError, UsageError

if TYPE_CHECKING:
    from ctxwise.relay import Relay, RelayResult, Step, Workload

__all__ = ["data_relay_cmd", "eval_relay_cmd", "relay_app", "resume_cmd", "run_cmd"]

relay_app = typer.Typer(
    help="Carry a long job across fresh calls: a verbatim line store, a checked state "
    "table, resume.",
    no_args_is_help=True,
)

DEFAULT_RUNS = ".ctxwise/relay"


class Variant(StrEnum):
    needles = "needles"
    counting = "counting"


class StepKind(StrEnum):
    auto = "auto"
    parser = "parser"
    faulty_parser = "faulty-parser"
    none = "none"


class DropPolicyOpt(StrEnum):
    lowest_score = "lowest-score"
    oldest = "oldest"


JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
RunsOpt = Annotated[
    Path | None,
    typer.Option(
        "--runs", help="Where runs are kept (default: the spec's runs key, else .ctxwise/relay)."
    ),
]


# -- the unrecognised-chunks warning ----------------------------------------------


def _warnings(unrecognised: int, steps: int, parser: bool, instead: str) -> list[str]:
    """The warning for a run whose step recognised nothing in ``unrecognised`` of
    its ``steps`` chunks (none when it recognised something in every one).
    ``parser``: the step is the handover parser, which knows one phrasing; ``instead``
    names, in the command's own terms, the step that only keeps lines."""
    if not unrecognised:
        return []
    head = (
        f"the {'parser' if parser else 'step'} recognised nothing in {unrecognised:,} of "
        f"{steps:,} chunks, so the table did not change there"
    )
    if not parser:
        return [head]
    return [
        f"{head}: it knows only the synthetic equipment log's phrasing; for a log it "
        'does not know, use a model step ([step] kind = "anthropic" or "openai" in a '
        '`ctxwise relay run` spec) or your own (kind = "python"), or '
        f"{instead} to keep and score the lines alone"
    ]


def _is_parser(step: object) -> bool:
    """The handover parser, or the faulty parser around it."""
    from ctxwise.relay import FaultyStep, HandoverParser

    return isinstance(step, HandoverParser) or (
        isinstance(step, FaultyStep) and isinstance(step.inner, HandoverParser)
    )


def _warn(warnings: list[str]) -> None:
    for text in warnings:
        typer.echo(f"ctxwise: warning: {text}", err=True)


# -- relay run / relay resume ---------------------------------------------------


def _report(relay: Relay, result: RelayResult) -> dict[str, Any]:
    from ctxwise.relay import score_run

    report: dict[str, Any] = {
        "run_id": result.run_id,
        "where": relay.runs.where(result.run_id),
        "done": result.done,
        "steps": result.steps,
        "total_steps": result.total_steps,
        "lines_kept": len(result.lines),
        "dropped": len(result.dropped),
        "rejected_updates": len(result.rejections),
        "carry_tokens_max": result.carry_tokens_max,
        "unrecognised_chunks": result.unrecognised_chunks,
        "table": [dict(row) for row in result.table],
        "warnings": _warnings(
            result.unrecognised_chunks,
            result.steps,
            _is_parser(relay.step),
            '[step] kind = "none"',
        ),
    }
    if relay.workload.answers is not None:
        report["score"] = score_run(result, relay.workload).as_dict()
    return report


def _print_report(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _print_json(report)
        return
    _warn(report["warnings"])
    console, buf = _buffered_console()
    state = "done" if report["done"] else "stopped"
    console.print(Text(f"relay run {report['run_id']}: {state}"))
    table = Table(show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows: list[tuple[str, str]] = [
        ("steps", f"{report['steps']:,} of {report['total_steps']:,}"),
        ("lines kept", f"{report['lines_kept']:,}"),
        ("lines dropped", f"{report['dropped']:,}"),
        ("rejected updates", f"{report['rejected_updates']:,}"),
        ("chunks unrecognised", f"{report['unrecognised_chunks']:,}"),
        ("carry tokens max", f"{report['carry_tokens_max']:,}"),
        ("table rows", f"{len(report['table']):,}"),
    ]
    score = report.get("score")
    if score is not None:
        rows += [
            ("needles kept", f"{score['needles_kept']:,} of {score['needles_total']:,}"),
            ("filler kept", f"{score['filler_kept']:,}"),
            ("holders correct", f"{score['holders_correct']:,} of {score['rows_total']:,}"),
            ("counts exact", f"{score['counts_exact']:,} of {score['rows_total']:,}"),
        ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    console.print(Text(f"run kept in {report['where']}"))
    _write(buf)


@relay_app.command("run")
def run_cmd(
    spec: Annotated[Path, typer.Argument(help="A relay spec file (TOML, or .json).")],
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="The run's id (default: the spec's run_id).")
    ] = None,
    runs: RunsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Start a relay run from SPEC and process every chunk, committing after each step."""

    def go() -> dict[str, Any]:
        from ctxwise.errors import RelayError
        from ctxwise.relay import build_relay, load_spec

        job = load_spec(spec)
        update: dict[str, Any] = {}
        if run_id is not None:
            update["run_id"] = run_id
        if runs is not None:
            update["runs"] = str(runs.resolve())
        if update:
            job = job.model_copy(update=update)
        relay = build_relay(job)
        rid = job.run_id or spec.stem
        if relay.runs.exists(rid):
            raise RelayError(
                "run", f"run {rid!r} exists in {relay.runs.where(rid)}; resume it instead"
            )
        relay.runs.attach(rid, "spec.json", job.model_dump_json().encode("utf-8"))
        return _report(relay, relay.run(rid))

    _print_report(_guard(go), as_json)


@relay_app.command("resume")
def resume_cmd(
    run_id: Annotated[str, typer.Argument(help="The id of a run started by `relay run`.")],
    runs: Annotated[Path, typer.Option("--runs", help="Where runs are kept.")] = Path(DEFAULT_RUNS),
    as_json: JsonOpt = False,
) -> None:
    """Continue run RUN_ID after its last committed step (a finished run gives its result)."""

    def go() -> dict[str, Any]:
        from pydantic import ValidationError

        from ctxwise.errors import RelayError, RelayStateError
        from ctxwise.relay import DirectoryRuns, RelaySpec, build_relay

        store = DirectoryRuns(runs.resolve())
        raw = store.attachment(run_id, "spec.json")
        if raw is None:
            if not store.exists(run_id):
                raise RelayError("run", f"no run {run_id!r} in {store.where(run_id)}")
            raise RelayError(
                "run",
                f"run {run_id!r} in {store.where(run_id)} has no spec.json "
                "(it was not started by `ctxwise relay run`)",
            )
        try:
            job = RelaySpec.model_validate_json(raw)
        except ValidationError as exc:
            from ctxwise._schema import describe

            raise RelayStateError(
                f"spec.json is damaged ({describe(exc)})",
                path=f"{store.where(run_id)}/spec.json",
            ) from None
        # the run is where it was found, even if its folder moved since
        relay = build_relay(job.model_copy(update={"runs": str(runs.resolve())}))
        return _report(relay, relay.resume(run_id))

    _print_report(_guard(go), as_json)


# -- eval relay -------------------------------------------------------------------


def _step(kind: StepKind, workload: Workload, rate: float, seed: int) -> Step:
    from ctxwise.relay import FaultyStep, HandoverParser, keep_state

    if kind is StepKind.auto:
        # the parser where the table has its columns (the synthetic log), else none
        try:
            return HandoverParser.for_table(workload.table)
        except RelayError:
            return keep_state
    if kind is StepKind.none:
        return keep_state
    if kind is StepKind.parser:
        return HandoverParser.for_table(workload.table)
    table = workload.table
    return FaultyStep(
        HandoverParser.for_table(table),
        rate=rate,
        seed=seed,
        key=table.key if table else "asset",
        counters=tuple(c for c, col in table.columns.items() if col.counter) if table else (),
    )


def _step_name(step: object) -> str:
    """What ``--step`` resolved to: ``parser``, ``faulty-parser`` or ``none``."""
    from ctxwise.relay import FaultyStep

    if isinstance(step, FaultyStep):
        return "faulty-parser"
    return "parser" if _is_parser(step) else "none"


def eval_relay_cmd(
    workload: Annotated[
        Path | None,
        typer.Option(help="A workload folder with answers.json (default: the synthetic log)."),
    ] = None,
    chunks: Annotated[
        int | None, typer.Option(min=1, help="Chunks of the synthetic log (default 96).")
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(help="Seed of the synthetic log and of the faulty parser (default 0)."),
    ] = None,
    variant: Annotated[
        Variant | None, typer.Option(help="Shape of the synthetic log (default needles).")
    ] = None,
    needles: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Handover lines of the synthetic log (default: the variant's 497, or 16 "
            "a chunk for counting, at 96 chunks, scaled in proportion to --chunks).",
        ),
    ] = None,
    assets: Annotated[int | None, typer.Option(min=1, help="Assets of the synthetic log.")] = None,
    step: Annotated[
        StepKind,
        typer.Option(
            help="What runs once per chunk: auto (the parser when the workload's table has "
            "a key, a holder and a counter, else none), parser, faulty-parser or none."
        ),
    ] = StepKind.auto,
    rate: Annotated[
        float,
        typer.Option(min=0.0, max=1.0, help="faulty-parser: share of first attempts broken."),
    ] = 0.25,
    carry_tokens: Annotated[int, typer.Option(min=1, help="The carry's cap in tokens.")] = 24_000,
    drop_policy: Annotated[
        DropPolicyOpt, typer.Option(help="Which kept line goes first when the store is full.")
    ] = DropPolicyOpt.lowest_score,
    as_json: Annotated[bool, typer.Option("--json", help="Print the scores as JSON.")] = False,
) -> None:
    """Run a workload in memory (nothing written) and score it against its answers."""

    def go() -> tuple[str, dict[str, Any]]:
        from ctxwise.memory import InMemoryStore
        from ctxwise.relay import Relay, StoreRuns, generate, load_workload, score_run

        if workload is not None:
            given = [
                f"--{name}"
                for name, value in (
                    ("chunks", chunks),
                    ("seed", seed),
                    ("variant", variant),
                    ("needles", needles),
                    ("assets", assets),
                )
                if value is not None
            ]
            if given:
                raise UsageError(
                    f"give --workload or {', '.join(given)} (options of the synthetic log), "
                    "not both"
                )
            job = load_workload(workload)
            if job.answers is None:
                from ctxwise.errors import RelayError

                raise RelayError("workload", "no answers.json to score against", path=str(workload))
            name = str(workload)
        else:
            job = generate(
                0 if seed is None else seed,
                variant=(variant or Variant.needles).value,
                chunks=96 if chunks is None else chunks,
                needles=needles,
                assets=assets,
            )
            name = job.name
        relay = Relay(
            job,
            _step(step, job, rate, 0 if seed is None else seed),
            runs=StoreRuns(InMemoryStore()),
            carry_tokens=carry_tokens,
            drop_policy=drop_policy.value,
        )
        with progress("relay", enabled=not as_json) as report:
            total = len(job.chunks)
            on_commit = None if report is None else (lambda step: report(step + 1, total))
            result = relay.run("eval", on_commit=on_commit)
        score = score_run(result, job).as_dict()
        warnings = _warnings(
            result.unrecognised_chunks, result.steps, _is_parser(relay.step), "--step none"
        )
        return name, {
            **score,
            "workload": name,
            "step": _step_name(relay.step),
            "carry_cap_tokens": carry_tokens,
            "drop_policy": drop_policy.value,
            "chunks": len(job.chunks),
            "warnings": warnings,
        }

    name, score = _guard(go)
    if as_json:
        _print_json(score)
        return
    _warn(score["warnings"])
    console, buf = _buffered_console()
    asked = "" if step.value == score["step"] else f" (--step {step.value})"
    console.print(
        Text(
            f"relay on {name}: {score['chunks']:,} chunks, {score['steps']:,} steps, step"
            f" {score['step']}{asked}, carry cap {score['carry_cap_tokens']:,} tokens,"
            f" drop policy {score['drop_policy']}"
        )
    )
    table = Table(show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for label, value in (
        ("needles kept", f"{score['needles_kept']:,} of {score['needles_total']:,}"),
        ("needles verbatim", f"{score['needles_exact']:,} of {score['needles_total']:,}"),
        ("filler kept", f"{score['filler_kept']:,}"),
        ("carry tokens max", f"{score['carry_tokens_max']:,}"),
        ("holders correct", f"{score['holders_correct']:,} of {score['rows_total']:,}"),
        ("counts exact", f"{score['counts_exact']:,} of {score['rows_total']:,}"),
        ("rejected updates", f"{score['rejected_updates']:,}"),
        ("chunks unrecognised", f"{score['unrecognised_chunks']:,}"),
    ):
        table.add_row(label, value)
    console.print(table)
    _write(buf)


# -- data relay -------------------------------------------------------------------


def data_relay_cmd(
    seed: Annotated[int, typer.Option(help="Seed: the same seed writes the same bytes.")],
    out: Annotated[Path, typer.Option(help="Folder to write (missing or empty).")],
    variant: Annotated[Variant, typer.Option(help="Shape of the log.")] = Variant.needles,
    chunks: Annotated[int, typer.Option(min=1, help="Chunks of the log.")] = 96,
    chunk_tokens: Annotated[
        int, typer.Option(min=100, help="Tokens per chunk (char counter).")
    ] = 4000,
    needles: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Handover lines (default: the variant's 497, or 16 a chunk for counting, "
            "at 96 chunks, scaled in proportion to --chunks). Refused if they do not fit "
            "--chunks chunks of --chunk-tokens.",
        ),
    ] = None,
    assets: Annotated[
        int | None, typer.Option(min=1, help="Assets (default: the variant's).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print what was written as JSON.")
    ] = False,
) -> None:
    """Write the synthetic equipment log as a relay workload folder, with its answers."""

    def go() -> dict[str, Any]:
        from ctxwise.errors import RelayError
        from ctxwise.relay import generate, write_workload

        job = generate(
            seed,
            variant=variant.value,
            chunks=chunks,
            chunk_tokens=chunk_tokens,
            needles=needles,
            assets=assets,
        )
        try:
            where = write_workload(job, out)
        except OSError as exc:
            raise RelayError(
                "workload", f"cannot write ({exc.strerror or exc})", path=str(out)
            ) from None
        answers = job.answers
        return {
            "out": str(where),
            "name": job.name,
            "chunks": len(job.chunks),
            "needles": len(answers.needles) if answers else 0,
            "assets": len(job.table.rows) if job.table else 0,
        }

    report = _guard(go)
    if as_json:
        _print_json(report)
        return
    typer.echo(
        f"{report['name']}: {report['chunks']:,} chunks, {report['needles']:,} needles, "
        f"{report['assets']:,} assets → {report['out']}"
    )
