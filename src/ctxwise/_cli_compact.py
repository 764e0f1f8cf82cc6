"""``ctxwise compact``: compact a transcript file with a verbatim tail.

The output keeps the input's format and shape: an Anthropic request stays a
request; an OpenAI request, messages list or tau-bench trajectory stays one (a
trajectory collection gives the chosen trajectory, other fields kept). A Claude
Code session is compacted as the model sees it, its window after the last
compaction (``Transcript.live_window``), and stays Claude Code JSONL, written the
way Claude Code records its own compactions
(:func:`ctxwise.formats._claude_code_compact.compacted_claude_code`):
every original line unchanged, then a ``compact_boundary`` event, the summary as
an ``isCompactSummary`` user event (the pinned facts and rules as its first text
block) and copies of the tail's events. An Anthropic messages list becomes a
request when the result has a system part (a bare list cannot hold one). The file
is written to a temporary file and renamed, so an error never leaves a
half-written output, and ``--out`` may not be the input file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ctxwise._cli_util import _guard, _print_json
from ctxwise.errors import MissingDependencyError, UsageError
from ctxwise.formats import FORMATS

if TYPE_CHECKING:
    from ctxwise.compaction import Compaction
    from ctxwise.messages import Transcript
    from ctxwise.providers.chat import ChatModel
    from ctxwise.summarize import Summarizer
    from ctxwise.tokens import TokenCounter

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


def _load_json(path: Path) -> Any:
    from ctxwise._io import read_text_file
    from ctxwise.errors import FormatError

    return json.loads(read_text_file(path, "a transcript file", FormatError))


def _encode(result: Transcript, fmt: str, path: Path, index: int) -> tuple[Any, str]:
    """The output document and what it is written as (``format:shape``); not Claude Code."""
    from ctxwise.formats import anthropic, openai

    doc = _load_json(path)
    if fmt == "openai":
        messages = openai.encode_messages(result)
        if (
            isinstance(doc, list)
            and doc
            and all(isinstance(x, Mapping) and "traj" in x for x in doc)
        ):
            return {**doc[index], "traj": messages}, "openai:trajectory"
        if isinstance(doc, Mapping) and "traj" in doc:
            return {**doc, "traj": messages}, "openai:trajectory"
        if isinstance(doc, Mapping):
            return openai.encode_request(result), "openai:request"
        return messages, "openai:messages"
    if isinstance(doc, list) and not any(m.role == "system" for m in result.messages):
        return anthropic.encode_messages(result)[1], "anthropic:messages"
    return anthropic.encode_request(result), "anthropic:request"


def _output(result: Compaction, fmt: str, path: Path, index: int) -> tuple[str, str]:
    """The output file's text and what it is written as."""
    if fmt == "claude-code":
        from ctxwise._io import read_text_file
        from ctxwise.errors import FormatError
        from ctxwise.formats._claude_code_compact import compacted_claude_code

        original = read_text_file(path, "a transcript file", FormatError)
        return compacted_claude_code(original, result, source=str(path)), "claude-code"
    doc, written_as = _encode(result.transcript, fmt, path, index)
    return json.dumps(doc, ensure_ascii=False, indent=1) + "\n", written_as


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (b.exists() and a.samefile(b))
    except OSError:
        return False


def _write_atomic(path: Path, text: str) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def compact_cmd(
    transcript: Annotated[
        Path, typer.Argument(help="A transcript file (JSON or Claude Code JSONL).")
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="Where to write the compacted transcript, in the input's format (not the input).",
        ),
    ],
    keep_tail_tokens: Annotated[
        int | None,
        typer.Option("--keep-tail-tokens", help="Keep the longest verbatim tail within N tokens."),
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
    repair: Annotated[
        bool,
        typer.Option("--repair", help="Repair tool pairing problems instead of refusing."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Summarize the older part of a transcript, keep a verbatim tail, write the result.

    Case facts and rules found in the summarized part are pinned in the system
    part; the tail never separates a tool call from its result. The output keeps
    the input's format: a Claude Code session (its window after the last compaction)
    is written as Claude Code JSONL (the original lines, then a compaction boundary,
    the summary and the tail, as Claude Code records its own compactions), which can
    be compacted again. --out may not be the input file.
    """

    def run() -> tuple[Compaction, str, str]:
        from ctxwise import get_counter, read_transcripts
        from ctxwise.compaction import compact

        if format not in FORMATS:
            raise UsageError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
        if (keep_tail_tokens is None) == (keep_tail_turns is None):
            raise UsageError("give exactly one of --keep-tail-tokens and --keep-tail-turns")
        if _same_file(transcript, out):
            raise UsageError(f"--out {out} is the input file; write the result somewhere else")
        ctr = get_counter(counter)
        chosen = _summarizer(summarizer, model, ctr)
        items = read_transcripts(transcript, format)  # type: ignore[arg-type]
        if not -len(items) <= index < len(items):
            raise UsageError(
                f"{transcript} holds {len(items)} transcript(s); --index {index} is out of range"
            )
        t = items[index]
        fmt = t.format or format
        if fmt == "claude-code":
            # what the model sees: the window after the session's last compaction
            # (Claude Code's own or an earlier ctxwise one); the history before it
            # stays in the file untouched
            t = t.live_window()
        result = compact(
            t,
            chosen,
            keep_tail_tokens=keep_tail_tokens,
            keep_tail_turns=keep_tail_turns,
            summary_tokens=summary_tokens,
            counter=ctr,
            repair=repair,
        )
        text, written_as = _output(result, fmt, transcript, index % len(items))
        _write_atomic(out, text)
        return result, fmt, written_as

    result, fmt, written_as = _guard(run)
    if as_json:
        _print_json(
            {
                "source": str(transcript),
                "format": fmt,
                "out": str(out),
                "written_as": written_as,
                **result.to_dict(),
            }
        )
        return
    if result.compacted:
        typer.echo(
            f"summarized {result.summarized_messages} message(s) before message "
            f"{result.cut_index}: {result.tokens_before:,} → {result.tokens_after:,} tokens "
            f"({result.counter}); summary {result.summary_tokens:,} tokens, verbatim tail "
            f"{result.tail_tokens:,} tokens"
        )
        if result.dropped_media:
            typer.echo(f"dropped {len(result.dropped_media)} image(s)/document(s)")
    else:
        typer.echo(f"nothing compacted: {result.reason}")
    typer.echo(f"wrote {out} ({written_as.replace(':', ' ')})")
