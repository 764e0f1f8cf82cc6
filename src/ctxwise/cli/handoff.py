"""CLI commands for subagent handoffs: ``handoff select`` and ``eval handoff``.

``handoff select`` reads a transcript (any format :func:`ctxwise.formats.read_transcript`
detects) and prints the prompt :func:`ctxwise.handoff.select.select_context` builds
for a task: the task, then the chosen chunks of the transcript verbatim, in their
original order. ``eval handoff`` measures evidence recall and token share of that
selection on LoCoMo or the generic conversation format
(:func:`ctxwise.handoff.evaluation.evaluate_handoff`), beside recency, BM25 and the
whole transcript under the same budget. Any error prints one line on stderr and
nothing on stdout.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
from ctxwise.cli._util import (
    MaxIdOpt,
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
from ctxwise.errors import BudgetError, FormatError, UsageError
from ctxwise.formats import FORMATS, MAX_ID_CHARS, MAX_TRANSCRIPT_BYTES

if TYPE_CHECKING:
    from ctxwise.handoff.select import Handoff

__all__ = ["eval_handoff_cmd", "handoff_app", "select_cmd"]

handoff_app = typer.Typer(
    help="Hand a subagent the parts of a transcript its task needs, verbatim.",
    no_args_is_help=True,
)

CounterOpt = Annotated[str, typer.Option(help="char | word | tiktoken (or tiktoken:ENCODING).")]


def _check_budget(budget: int) -> int:
    if budget < 1:
        raise BudgetError(budget, "--budget must be 1 or more")
    return budget


def _task(task: str | None, task_file: Path | None) -> str:
    from ctxwise._io import read_text_file

    if (task is None) == (task_file is None):
        raise UsageError("give exactly one of --task and --task-file")
    text = task if task is not None else read_text_file(task_file or "", "a text file", FormatError)
    where = "--task" if task is not None else f"--task-file {task_file}"
    if not text.strip():
        raise UsageError(f"the task is empty ({where}): say what the subagent must do")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:  # bytes of the command line that are not UTF-8
        raise UsageError(f"the task is not UTF-8 text ({where}, character {e.start})") from None
    return text.strip()


def _summary(h: Handoff) -> str:
    total = len(h.selected) + len(h.left_out)
    line = (
        f"handoff: {len(h.selected)} of {total} chunks, {h.tokens:,} of "
        f"{h.transcript_tokens:,} tokens ({h.share:.1%}), budget {h.budget:,}; "
    )
    line += "matched the task" if h.matched else "nothing matched the task: the most recent chunks"
    if h.unmatched:
        line += f"; unmatched: {', '.join(h.unmatched)}"
    return line


@handoff_app.command("select")
def select_cmd(
    transcript: Annotated[
        Path,
        typer.Argument(
            help="A transcript file: Claude Code JSONL, Anthropic or OpenAI request, "
            "tau-bench, … (detected)."
        ),
    ],
    task: Annotated[
        str | None, typer.Option("--task", "-t", help="What the subagent must do.")
    ] = None,
    task_file: Annotated[
        Path | None, typer.Option("--task-file", help="Read the task from this file instead.")
    ] = None,
    budget: Annotated[int, typer.Option(help="Tokens of transcript the handoff carries.")] = 20_000,
    counter: CounterOpt = "char",
    format: Annotated[
        str, typer.Option("--format", help=f"One of: {', '.join(FORMATS)}.")
    ] = "auto",
    index: Annotated[int, typer.Option(help="Which transcript of a multi-transcript file.")] = 0,
    max_input: Annotated[
        str | None, max_input_option("a transcript file", MAX_TRANSCRIPT_BYTES)
    ] = None,
    max_id_chars: MaxIdOpt = MAX_ID_CHARS,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"prompt": …, "report": …} as JSON.')
    ] = False,
) -> None:
    """The subagent prompt for --task: the task, then the transcript chunks it needs."""

    def run() -> Handoff:
        from ctxwise.formats import read_transcript_file
        from ctxwise.handoff.select import select_context
        from ctxwise.tokens import get_counter

        text = _task(task, task_file)
        _check_budget(budget)
        if format not in FORMATS:
            raise UsageError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
        ctr = get_counter(counter)
        items = read_transcript_file(
            transcript,
            format,  # type: ignore[arg-type]
            max_bytes=max_input_bytes(max_input, MAX_TRANSCRIPT_BYTES),
            max_id_chars=max_id_chars,
        ).transcripts
        if not -len(items) <= index < len(items):
            raise UsageError(
                f"{transcript} holds {len(items)} transcript(s); --index {index} is out of range"
            )
        return select_context(items[index], text, budget, counter=ctr)

    handoff = _guard(run)
    if as_json:
        _print_json({"prompt": handoff.render(), "report": handoff.report()})
        return
    typer.echo(handoff.render())
    typer.echo(_summary(handoff), err=True)


def eval_handoff_cmd(
    data: Annotated[
        Path, typer.Option(help="Conversations with evidence (generic JSON or LoCoMo).")
    ],
    budget: Annotated[int, typer.Option(help="Tokens of transcript each handoff carries.")] = 3_000,
    counter: CounterOpt = "char",
    embedder: EmbedderOpt = None,
    preset: PresetOpt = "neutral",
    embedding_cache: EmbeddingCacheOpt = None,
    no_embedding_cache: NoEmbeddingCacheOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
) -> None:
    """Evidence recall and token share of handoffs, beside recent, BM25 and whole."""

    def run() -> dict[str, Any]:
        from ctxwise.handoff.evaluation import evaluate_handoff
        from ctxwise.handoff.scoring import HybridScorer
        from ctxwise.memory.evaluation import load_conversations
        from ctxwise.tokens import get_counter

        _check_budget(budget)
        ctr = get_counter(counter)
        name = embedder or "hashing"
        check_preset(preset, name)
        conversations = load_conversations(data)  # its errors name the file
        used = open_embedder(name, cache=embedding_cache, no_cache=no_embedding_cache)
        try:
            scorer = HybridScorer(used.embedder, preset=preset)
            with progress(f"handing off {data.name}", enabled=not as_json) as report:
                result = evaluate_handoff(
                    conversations, budget, counter=ctr, scorer=scorer, progress=report
                )
            return {**result, **used.report(), "preset": preset, "counter": counter}
        finally:
            used.close()

    result = _guard(run)
    if as_json:
        _print_json(result)
        return
    console, buf = _buffered_console()
    table = _table(
        f"handoff on {data.name} ({result['n']} questions, budget {result['budget']:,},"
        f" {counter} tokens)"
    )
    _text_col(table, "method")
    _num_col(table, "evidence recall")
    _num_col(table, "token share")
    rows = [(f"ctxwise ({result['scorer']})", result), *result["baselines"].items()]
    for name, values in rows:
        table.add_row(name, f"{values['evidence_recall']:.3f}", f"{values['token_share']:.3f}")
    console.print(table)
    if result["by_category"]:
        console.print(
            "ctxwise by category: "
            + ", ".join(f"{c or '-'} {v:.3f}" for c, v in result["by_category"].items())
        )
    print_skipped(console, result)
    _write(buf)
