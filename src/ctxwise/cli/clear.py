"""``ctxwise clear``: clear old tool results in a transcript file, keeping its shape."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ctxwise._io import is_stdout
from ctxwise.cli._util import MaxIdOpt, _guard, max_input_bytes, max_input_option
from ctxwise.editing import EditResult, clear_tool_uses
from ctxwise.errors import UsageError
from ctxwise.formats import (
    FORMATS,
    MAX_ID_CHARS,
    MAX_TRANSCRIPT_BYTES,
    check_destination,
    read_transcript_file,
    save_transcript_file,
    write_back,
)
from ctxwise.tokens import get_counter

__all__ = ["LIVE_NOTE", "clear_cmd"]

LIVE_NOTE = (
    "--live: only the window after Claude Code's last compaction was edited; the whole "
    "session is written, the events before it byte-identical"
)


def clear_cmd(
    transcript: Annotated[
        Path, typer.Argument(help="A transcript file (JSON or Claude Code JSONL).")
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="Where to write the edited transcript ('-': standard output; the report "
            "then goes to standard error). It keeps the input's format and shape; Claude "
            "Code JSONL stays JSONL, with only the events of cleared tool results and "
            "inputs rewritten. Written atomically (a symlink's target is replaced, a FIFO "
            "or device written in place); untouched on error.",
        ),
    ],
    format: Annotated[
        str, typer.Option("--format", help=f"One of: {', '.join(FORMATS)}.")
    ] = "auto",
    index: Annotated[
        int | None,
        typer.Option(
            help="Edit only this transcript of a multi-transcript file (the others are "
            "written back unchanged); default: every transcript."
        ),
    ] = None,
    keep_last: Annotated[
        int, typer.Option("--keep-last", help="The last N tool uses keep their results.")
    ] = 3,
    clear_at_least: Annotated[
        int,
        typer.Option(
            "--clear-at-least",
            help="Do nothing unless at least N tokens would be freed (clearing breaks the "
            "provider's prompt cache).",
        ),
    ] = 0,
    trigger: Annotated[
        int,
        typer.Option(
            "--trigger", help="Only clear a transcript of more than N tokens (0: always)."
        ),
    ] = 0,
    exclude: Annotated[
        list[str] | None,
        typer.Option("--exclude", help="A tool whose results are never cleared (repeatable)."),
    ] = None,
    clear_inputs: Annotated[
        bool, typer.Option("--clear-inputs", help="Also replace cleared calls' inputs by {}.")
    ] = False,
    counter: Annotated[str, typer.Option(help="char | word | tiktoken.")] = "char",
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Claude Code: clear only in the window after the last compaction (the "
            "whole session is still written).",
        ),
    ] = False,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Repair tool pairing problems first (drop orphan results, answer unanswered "
            "calls with an error result, rename reused ids) instead of refusing.",
        ),
    ] = False,
    max_input: Annotated[
        str | None, max_input_option("a transcript file", MAX_TRANSCRIPT_BYTES)
    ] = None,
    max_id_chars: MaxIdOpt = MAX_ID_CHARS,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Clear old tool results (Anthropic's clear_tool_uses_20250919, done locally).

    A Claude Code session is written back as JSONL: every line is byte-identical
    except the events whose tool_result content (and its toolUseResult copy) or, with
    --clear-inputs, tool_use input was cleared. A session that needs --repair is
    refused: the repair drops or adds tool results that have no event to write.
    """

    def run() -> dict[str, Any]:
        if format not in FORMATS:
            raise UsageError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
        ctr = get_counter(counter)
        limit = max_input_bytes(max_input, MAX_TRANSCRIPT_BYTES)
        file = read_transcript_file(
            transcript,
            format,  # type: ignore[arg-type]
            max_bytes=limit,
            max_id_chars=max_id_chars,
        )
        fmt, items = file.format, file.transcripts
        if index is not None and not -len(items) <= index < len(items):
            raise UsageError(
                f"{transcript} holds {len(items)} transcript(s); --index {index} is out of range"
            )
        if live and fmt != "claude-code":
            raise UsageError("--live applies to Claude Code sessions only")
        chosen = range(len(items)) if index is None else [index % len(items)]
        results: dict[int, EditResult] = {}
        for i in chosen:
            t = items[i].live_window() if live else items[i]
            results[i] = clear_tool_uses(
                t,
                trigger_tokens=trigger,
                keep_last=keep_last,
                clear_at_least=clear_at_least,
                exclude_tools=exclude or (),
                clear_inputs=clear_inputs,
                counter=ctr,
                repair=repair,
            )
        # the input may be replaced (atomically), unless it is a Claude Code session
        check_destination(file, out, replace_source=True)
        if fmt == "claude-code":
            _check_session_edit(transcript, results[0])
        data, shape = write_back(file, {i: r.transcript for i, r in results.items()})
        save_transcript_file(file, data, out, replace_source=True)
        report: dict[str, Any] = {
            "source": str(transcript),
            "out": str(out),
            "input_format": fmt,
            "output_format": fmt,
            "shape": shape,
            "transcripts": len(items),
            "edited": [{"index": i, **r.to_dict()} for i, r in results.items()],
            "applied": sum(r.applied for r in results.values()),
            "tokens_before": sum(r.tokens_before for r in results.values()),
            "tokens_after": sum(r.tokens_after for r in results.values()),
            "tokens_freed": sum(r.tokens_freed for r in results.values()),
            "cleared_tool_uses": sum(r.cleared_tool_uses for r in results.values()),
        }
        if live:
            report["note"] = LIVE_NOTE
        return report

    report = _guard(run)
    to_stderr = is_stdout(out)  # standard output holds the transcript
    if as_json:
        stream = sys.stderr if to_stderr else sys.stdout
        stream.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        return
    before, after = report["tokens_before"], report["tokens_after"]
    share = f" (-{(before - after) / before:.1%})" if before else ""
    edited = report["edited"]
    lines = [
        f"{report['source']}: cleared {report['cleared_tool_uses']} tool result(s) in "
        f"{report['applied']} of {len(edited)} transcript(s); {before:,} -> {after:,} tokens"
        f"{share} ({edited[0]['counter'] if edited else counter})"
    ]
    if len(edited) == 1:
        lines.append(f"  {edited[0]['detail']}")
    else:
        reasons: dict[str, int] = {}
        for e in edited:
            if not e["applied"]:
                reasons[e["reason"]] = reasons.get(e["reason"], 0) + 1
        lines.extend(f"  not applied ({r}): {n}" for r, n in sorted(reasons.items()))
    lines.append(f"wrote {report['out']} ({report['output_format']}, {report['shape']})")
    if "note" in report:
        lines.append(f"note: {report['note']}")
    typer.echo("\n".join(lines), err=to_stderr)


def _check_session_edit(source: Path, result: EditResult) -> None:
    """A repaired session cannot be patched: its repairs have no events to write."""
    if result.repaired:
        kinds = ", ".join(sorted({p.kind.value for p in result.repaired}))
        raise UsageError(
            f"{source} has tool pairing problems ({kinds}); repairing drops or adds tool "
            "results that have no event in the session, so a repaired session cannot be "
            "written back as Claude Code JSONL"
        )
