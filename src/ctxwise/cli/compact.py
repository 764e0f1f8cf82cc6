"""``ctxwise compact``: compact a transcript file with a verbatim tail.

The output keeps the input's format and shape
(:func:`ctxwise.compaction.write_back_compaction`): an Anthropic request stays a
request; an OpenAI request, messages list, JSONL or tau-bench trajectory stays
one; a list of trajectories (tau-bench) or of records (LiveMCPBench) is written
whole, the chosen one (``--index``) compacted and the others and every other
field unchanged. A Claude Code session is compacted as the model sees it, its
window after the last compaction (``Transcript.live_window``), and stays Claude
Code JSONL, written the way Claude Code records its own compactions: every
original line unchanged, then a ``compact_boundary`` event, the summary as an
``isCompactSummary`` user event (the pinned facts and rules as its first text
block) and copies of the tail's events. An Anthropic messages list becomes a
request when the result has a system part (a bare list cannot hold one). The file
is written by :func:`ctxwise.formats.save_transcript_file` (a temporary file renamed
over it, so an error never leaves a half-written output; ``-`` is standard output),
and ``--out`` may not be the input file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ctxwise._io import is_stdout
from ctxwise.cli._util import MaxIdOpt, _guard, max_input_bytes, max_input_option
from ctxwise.errors import MissingDependencyError, UsageError
from ctxwise.formats import FORMATS, MAX_ID_CHARS, MAX_TRANSCRIPT_BYTES

if TYPE_CHECKING:
    from ctxwise.compaction import Compaction
    from ctxwise.memory.facts import FactExtractor
    from ctxwise.providers.chat import ChatModel
    from ctxwise.summarize import Summarizer
    from ctxwise.tokens import TokenCounter

__all__ = ["FACT_CHOICES", "SUMMARIZERS", "compact_cmd"]

SUMMARIZERS = ("extractive", "anthropic", "openai")


def _chat_model(provider: str, model: str) -> ChatModel:
    """A chat model over the official SDK; the SDK reads its API key from the environment."""
    if provider == "anthropic":
        try:
            import anthropic
        except ImportError:
            raise MissingDependencyError(
                "anthropic", "anthropic", "--summarizer anthropic"
            ) from None
        from ctxwise.providers import AnthropicChat

        try:
            client: Any = anthropic.Anthropic()
        except Exception as exc:
            raise UsageError(f"cannot create the Anthropic client: {exc}") from None
        return AnthropicChat(client, model)
    try:
        import openai
    except ImportError:
        raise MissingDependencyError("openai", "openai", "--summarizer openai") from None
    from ctxwise.providers import OpenAIChat

    try:
        oclient: Any = openai.OpenAI()
    except Exception as exc:
        raise UsageError(f"cannot create the OpenAI client: {exc}") from None
    return OpenAIChat(oclient, model)


def _summarizer(name: str, model: str | None, counter: TokenCounter) -> Summarizer:
    from ctxwise.summarize import ExtractiveSummarizer, LLMSummarizer

    if name not in SUMMARIZERS:
        raise UsageError(f"unknown summarizer {name!r}; choose one of {', '.join(SUMMARIZERS)}")
    if name == "extractive":
        if model is not None:
            raise UsageError("--model applies to the anthropic and openai summarizers")
        return ExtractiveSummarizer(counter)
    if not model:
        raise UsageError(f"--summarizer {name} needs --model (the model that writes the summary)")
    return LLMSummarizer(_chat_model(name, model), counter=counter)


FACT_CHOICES = ("prose", "support", "none")


def _extractor(name: str) -> FactExtractor | None:
    from ctxwise.memory.facts import FactExtractor

    if name not in FACT_CHOICES:
        raise UsageError(f"unknown --facts {name!r}; choose one of {', '.join(FACT_CHOICES)}")
    return None if name == "none" else FactExtractor.preset(name)


def _segments(
    data: bytes, result: Compaction, fmt: str, counter: TokenCounter
) -> list[dict[str, Any]]:
    """Each compaction segment of what is written: its messages, tokens and pairing
    problems (the API sees one segment at a time, so each is checked on its own)."""
    from ctxwise.formats.claude_code import read_claude_code
    from ctxwise.pairing import placement_for

    written = (
        read_claude_code(data.decode("utf-8", "surrogatepass"))
        if fmt == "claude-code"
        else result.transcript
    )
    rule = placement_for(result.transcript)
    return [
        {
            "index": k,
            "messages": len(seg.messages),
            "tokens": counter.count_messages(seg.messages),
            "problems": len(seg.problems(rule)),
        }
        for k, seg in enumerate(written.segments())
    ]


def compact_cmd(
    transcript: Annotated[
        Path, typer.Argument(help="A transcript file (JSON or Claude Code JSONL).")
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="Where to write the compacted transcript, in the input's format and shape "
            "(a bare Anthropic messages list becomes a request when the result has a system "
            "part) (not the input; '-': standard output, the report then goes to standard "
            "error). Written atomically (a symlink's target is replaced, a FIFO or device "
            "written in place); untouched on error.",
        ),
    ],
    budget: Annotated[
        int | None,
        typer.Option(
            "--budget",
            help="The whole output window (system part, pinned facts and rules, summary and "
            "tail) holds at most N tokens.",
        ),
    ] = None,
    keep_tail_tokens: Annotated[
        int | None,
        typer.Option(
            "--keep-tail-tokens",
            help="The verbatim tail's target: at most N tokens (within --budget, or alone).",
        ),
    ] = None,
    keep_tail_turns: Annotated[
        int | None,
        typer.Option("--keep-tail-turns", help="Or: keep the last N user turns verbatim."),
    ] = None,
    format: Annotated[
        str, typer.Option("--format", help=f"One of: {', '.join(FORMATS)}.")
    ] = "auto",
    index: Annotated[int, typer.Option(help="Which transcript of a multi-transcript file.")] = 0,
    summary_tokens: Annotated[
        int, typer.Option("--summary-tokens", help="The summary's token budget.")
    ] = 4000,
    summarizer: Annotated[
        str, typer.Option(help=f"Who writes the summary: {', '.join(SUMMARIZERS)}.")
    ] = "extractive",
    model: Annotated[
        str | None, typer.Option(help="Model for the anthropic/openai summarizer.")
    ] = None,
    counter: Annotated[str, typer.Option(help="char | word | tiktoken.")] = "char",
    facts: Annotated[
        str,
        typer.Option(
            "--facts",
            help=f"Which case facts to pin: {' | '.join(FACT_CHOICES)} (prose: dates and "
            "e-mails the user and assistant wrote; support: orders, amounts, flights, "
            "reservations and tool output too; none: no extraction).",
        ),
    ] = "prose",
    repair: Annotated[
        bool,
        typer.Option("--repair", help="Repair tool pairing problems instead of refusing."),
    ] = False,
    max_input: Annotated[
        str | None, max_input_option("a transcript file", MAX_TRANSCRIPT_BYTES)
    ] = None,
    max_id_chars: MaxIdOpt = MAX_ID_CHARS,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Summarize the older part of a transcript, keep a verbatim tail, write the result.

    With --budget N the whole output window holds at most N tokens (the tail
    takes up to --keep-tail-tokens, or half of the room; the summary the rest), or
    the command names the parts that alone exceed N. The cut may fall inside a tool
    loop, never between a tool call and its result; the user's messages of the
    summarized part stay verbatim in the summary. Case facts (--facts) and rules
    are pinned in the system part. The output keeps
    the input's format: a Claude Code session (its window after the last compaction)
    is written as Claude Code JSONL (the original lines, then a compaction boundary,
    the summary and the tail, as Claude Code records its own compactions), which can
    be compacted again. --out may not be the input file.
    """

    def run() -> tuple[Compaction, str, str, list[dict[str, Any]]]:
        from ctxwise import get_counter
        from ctxwise.compaction import compact, write_back_compaction
        from ctxwise.formats import (
            check_destination,
            read_transcript_file,
            save_transcript_file,
        )

        if format not in FORMATS:
            raise UsageError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
        if keep_tail_tokens is not None and keep_tail_turns is not None:
            raise UsageError("give at most one of --keep-tail-tokens and --keep-tail-turns")
        if budget is None and keep_tail_tokens is None and keep_tail_turns is None:
            raise UsageError("give --budget N, --keep-tail-tokens N or --keep-tail-turns N")
        extractor = _extractor(facts)
        ctr = get_counter(counter)
        chosen = _summarizer(summarizer, model, ctr)
        limit = max_input_bytes(max_input, MAX_TRANSCRIPT_BYTES)
        file = read_transcript_file(
            transcript,
            format,  # type: ignore[arg-type]
            max_bytes=limit,
            max_id_chars=max_id_chars,
        )
        check_destination(file, out)  # before the (perhaps paid) summary
        items = file.transcripts
        if not -len(items) <= index < len(items):
            raise UsageError(
                f"{transcript} holds {len(items)} transcript(s); --index {index} is out of range"
            )
        t = items[index]
        fmt = file.format
        if fmt == "claude-code":
            # what the model sees: the window after the session's last compaction
            # (Claude Code's own or an earlier ctxwise one); the history before it
            # stays in the file untouched
            t = t.live_window()
        result = compact(
            t,
            chosen,
            budget=budget,
            keep_tail_tokens=keep_tail_tokens,
            keep_tail_turns=keep_tail_turns,
            summary_tokens=summary_tokens,
            counter=ctr,
            repair=repair,
            extract=extractor is not None,
            extractor=extractor,
        )
        data, shape = write_back_compaction(file, result, index % len(items))
        written_as = "claude-code" if fmt == "claude-code" else f"{fmt}:{shape}"
        segments = _segments(data, result, fmt, ctr)
        save_transcript_file(file, data, out)
        return result, fmt, written_as, segments

    result, fmt, written_as, segments = _guard(run)
    err = is_stdout(out)  # standard output holds the transcript
    if as_json:
        report = {
            "source": str(transcript),
            "format": fmt,
            "out": str(out),
            "written_as": written_as,
            **result.to_dict(),
            "segments": segments,
        }
        (sys.stderr if err else sys.stdout).write(
            json.dumps(report, indent=2, ensure_ascii=False) + "\n"
        )
        return
    if result.compacted:
        typer.echo(
            err=err,
            message=f"summarized {result.summarized_messages} message(s) before message "
            f"{result.cut_index}: {result.tokens_before:,} → {result.tokens_after:,} tokens "
            f"({result.counter}); summary {result.summary_tokens:,} tokens, verbatim tail "
            f"{result.tail_tokens:,} tokens",
        )
        if result.dropped_media:
            typer.echo(f"dropped {len(result.dropped_media)} image(s)/document(s)", err=err)
    else:
        typer.echo(f"nothing compacted: {result.reason}", err=err)
    typer.echo(f"wrote {out} ({written_as.replace(':', ' ')})", err=err)
