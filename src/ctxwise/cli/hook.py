"""CLI commands Claude Code runs as hooks: ``ctxwise hook <event>``, and ``hook install``.

Each event command reads the hook payload (JSON) on stdin and prints what Claude
Code reads back (see :mod:`ctxwise.integrations.claude_code_hooks`):

- ``subagent-context`` (``PreToolUse``, matcher ``Agent|Task``): JSON with
  ``hookSpecificOutput.updatedInput``, every field of the tool input kept and the
  prompt replaced by the task followed by the transcript chunks it needs;
- ``subagent-start`` (``SubagentStart``): JSON with the same selection as
  ``additionalContext`` (at most 10,000 characters);
- ``pre-compact`` (``PreCompact``): archives the transcript (the archive folder
  kept within ``--archive-max-bytes``, oldest copies removed first) and prints, as
  plain text, the standing rules and case facts the summary must keep;
- ``session-start`` (``SessionStart``, matcher ``compact``): JSON with the rules
  and case facts as ``additionalContext``.

They never block Claude Code on their own failure: a broken payload, a missing
transcript, a payload over :data:`MAX_PAYLOAD_BYTES` (its read stops there), any
error or the ``--deadline`` passing prints nothing, writes one line
to the hook log (``$CTXWISE_HOOK_LOG``, else ``~/.ctxwise/hooks.log``) and exits 0
(a bad option on their command line too). ``hook install`` writes the settings
snippet into ``.claude/settings.json`` (``--project``, the default) or
``~/.claude/settings.json`` (``--user``), keeping every other key; a settings file
that is not valid JSON is refused with exit code 2 and left as it is.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ctxwise._io import format_size
from ctxwise.cli._util import _guard
from ctxwise.errors import FormatError

__all__ = ["MAX_PAYLOAD_BYTES", "hook_app", "is_hook_run", "log_bad_command_line"]

MAX_PAYLOAD_BYTES = 16 * 2**20
"""The largest hook payload read on stdin (16 MiB): Claude Code's payloads name the
transcript rather than hold it, so a larger one is not Claude Code's, and reading
stops one chunk past the limit instead of taking the whole stream into memory."""

hook_app = typer.Typer(
    help="Claude Code hooks: subagent context, rules and facts kept through compaction.",
    no_args_is_help=True,
)

BudgetOpt = Annotated[int, typer.Option(help="Tokens of transcript the subagent gets.")]
CounterOpt = Annotated[str, typer.Option(help="char | word | tiktoken (or tiktoken:ENCODING).")]
DeadlineOpt = Annotated[
    float,
    typer.Option(help="Seconds before the hook gives up and leaves everything unchanged."),
]
ArchiveOpt = Annotated[
    Path | None,
    typer.Option("--archive", help="Archive folder (default ~/.ctxwise/archive)."),
]
ArchiveMaxOpt = Annotated[
    str,
    typer.Option(
        "--archive-max-bytes",
        metavar="SIZE",
        help="The most the archive folder holds; the oldest copies go first (bytes, or "
        "with KB, MB, GB, KiB, MiB, GiB; 0: no cap).",
    ),
]


class Extractor(StrEnum):
    prose = "prose"
    support = "support"


ExtractorOpt = Annotated[
    Extractor, typer.Option(help="Case-fact extractor preset, as in the Engine's config.")
]


def _stdin() -> str:
    # Claude Code writes the payload in UTF-8 whatever the locale says: read bytes, or
    # a Latin-1 locale turns every non-ASCII character of the tool input into
    # mojibake that updatedInput would hand back (a leading BOM is dropped)
    # The file descriptor, not sys.stdin.buffer: a read still blocked there when the
    # deadline passes would hold the buffer's lock, and the interpreter aborts at exit
    # (exit code 134) trying to take it.
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # a replaced sys.stdin (tests)
        text = sys.stdin.read(MAX_PAYLOAD_BYTES + 1)
        if len(text) > MAX_PAYLOAD_BYTES:
            raise _too_large() from None
        return text
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(fd, 1 << 20):
        total += len(chunk)
        if total > MAX_PAYLOAD_BYTES:
            raise _too_large()
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8-sig")


def _too_large() -> FormatError:
    return FormatError("hook payload", f"over the limit of {format_size(MAX_PAYLOAD_BYTES)}")


def _json(data: object) -> str:
    # allow_nan=False: NaN and Infinity are not JSON, Claude Code could not read them
    # (a tool input holding 1e400 parses as inf); ValueError lets the call through
    return "" if data is None else json.dumps(data, allow_nan=False) + "\n"


def _run(
    event: str,
    handler: Callable[[str], str],
    deadline: float,
    cancel: threading.Event | None = None,
) -> None:
    from ctxwise.integrations.claude_code_hooks import run_hook

    text = run_hook(event, handler, _stdin, deadline=deadline, cancel=cancel)
    if text:  # UTF-8, as Claude Code reads it (lone surrogates escaped)
        data = text.encode("utf-8", errors="backslashreplace")
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is None:
            sys.stdout.write(data.decode("utf-8"))
        else:
            sys.stdout.flush()
            buffer.write(data)
        sys.stdout.flush()


@hook_app.command("subagent-context")
def subagent_context_cmd(
    budget: BudgetOpt = 20_000,
    counter: CounterOpt = "char",
    deadline: DeadlineOpt = 5.0,
) -> None:
    """PreToolUse on Agent|Task: the subagent's prompt with the context it needs."""

    def handle(payload: str) -> str:
        from ctxwise.integrations.claude_code_hooks import subagent_context
        from ctxwise.tokens import get_counter

        return _json(subagent_context(payload, budget=budget, counter=get_counter(counter)))

    _run("subagent-context", handle, deadline)


@hook_app.command("subagent-start")
def subagent_start_cmd(
    budget: BudgetOpt = 20_000,
    counter: CounterOpt = "char",
    deadline: DeadlineOpt = 5.0,
) -> None:
    """SubagentStart: the same selection as additionalContext (10,000 chars at most)."""

    def handle(payload: str) -> str:
        from ctxwise.integrations.claude_code_hooks import subagent_start
        from ctxwise.tokens import get_counter

        return _json(subagent_start(payload, budget=budget, counter=get_counter(counter)))

    _run("subagent-start", handle, deadline)


@hook_app.command("pre-compact")
def pre_compact_cmd(
    archive: ArchiveOpt = None,
    extractor: ExtractorOpt = Extractor.prose,
    deadline: DeadlineOpt = 5.0,
    archive_max_bytes: ArchiveMaxOpt = "1GiB",
) -> None:
    """PreCompact: archive the transcript; print the rules and facts the summary keeps."""
    cancel = threading.Event()  # set at the deadline: the copy stops and leaves no file

    def handle(payload: str) -> str:
        from ctxwise.cli._util import parse_size
        from ctxwise.integrations.claude_code_hooks import log_hook_failure, pre_compact

        cap = archive_max_bytes.strip()
        most = 0 if cap == "0" else parse_size(cap, "--archive-max-bytes")
        result = pre_compact(
            payload,
            archive_dir=archive,
            extractor=extractor.value,
            archive_max_bytes=most,
            cancel=cancel,
        )
        if result.archive_error is not None:  # the rules still go to the summary
            log_hook_failure("pre-compact", result.archive_error)
        return result.instructions

    _run("pre-compact", handle, deadline, cancel)


@hook_app.command("session-start")
def session_start_cmd(
    archive: ArchiveOpt = None,
    extractor: ExtractorOpt = Extractor.prose,
    deadline: DeadlineOpt = 5.0,
) -> None:
    """SessionStart after a compaction: the rules and facts again, as additionalContext."""

    def handle(payload: str) -> str:
        from ctxwise.integrations.claude_code_hooks import session_start

        return _json(session_start(payload, archive_dir=archive, extractor=extractor.value))

    _run("session-start", handle, deadline)


class Via(StrEnum):
    pre_tool_use = "pre-tool-use"
    subagent_start = "subagent-start"


@hook_app.command("install")
def install_cmd(
    project: Annotated[
        bool,
        typer.Option(
            "--project/--user",
            help="Write .claude/settings.json here (default), or ~/.claude/settings.json.",
        ),
    ] = True,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the merged settings; write nothing.")
    ] = False,
    command: Annotated[
        str, typer.Option(help="How Claude Code runs ctxwise (a path, `uvx ctxwise`, …).")
    ] = "ctxwise",
    subagent: Annotated[
        Via,
        typer.Option(
            help="Give subagents their context by updatedInput on PreToolUse, or by "
            "additionalContext on SubagentStart (for versions that ignore updatedInput)."
        ),
    ] = Via.pre_tool_use,
    timeout: Annotated[int, typer.Option(help="Each hook's timeout in Claude Code (s).")] = 30,
) -> None:
    """Register the hooks in Claude Code's settings, keeping everything else there."""
    from ctxwise.errors import UsageError
    from ctxwise.integrations.claude_code_hooks import hook_settings, install_settings

    def run() -> object:
        if timeout < 1:
            raise UsageError("--timeout must be 1 or more")
        base = Path.cwd() if project else Path.home()
        snippet = hook_settings(command, subagent=subagent.value, timeout=timeout)
        return install_settings(base / ".claude" / "settings.json", snippet, dry_run=dry_run)

    result = _guard(run)
    from ctxwise.integrations.claude_code_hooks import InstallResult

    assert isinstance(result, InstallResult)
    if dry_run:
        sys.stdout.write(result.text)
        what = f"would change {', '.join(result.added)}" if result.added else "nothing to change"
        typer.echo(f"{result.path}: {what} (dry run, nothing written)", err=True)
    elif result.written:
        typer.echo(f"{result.path}: hooks set for {', '.join(result.added)}", err=True)
    else:
        typer.echo(f"{result.path}: the hooks are already there; nothing changed", err=True)


def is_hook_run(args: Sequence[str]) -> bool:
    """Whether ``args`` run one of the hook events (not ``install``)."""
    from ctxwise.integrations.claude_code_hooks import HOOK_EVENTS

    return len(args) >= 2 and args[0] == "hook" and args[1] in HOOK_EVENTS


def log_bad_command_line(args: Sequence[str], message: str) -> None:
    """Log a hook's command-line error (the hook then exits 0 and changes nothing)."""
    from ctxwise.integrations.claude_code_hooks import log_hook_failure

    log_hook_failure(args[1], f"bad command line ({' '.join(args)}): {message}; left unchanged")
