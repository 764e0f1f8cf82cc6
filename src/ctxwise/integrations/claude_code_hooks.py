"""Claude Code hooks: hand subagents their context, keep rules and facts through compaction.

Claude Code runs a hook command with a JSON payload on stdin and reads its stdout
(hooks reference, code.claude.com/docs/en/hooks). Every payload carries
``session_id``, ``transcript_path`` (the session's JSONL), ``cwd`` and
``hook_event_name``; the events used here add:

- ``PreToolUse`` (matcher ``Agent|Task``: the subagent tool is ``Agent`` now,
  ``Task`` is its old name): ``tool_name``, ``tool_input`` (``prompt``,
  ``description``, ``subagent_type``, ``model``, …) and ``tool_use_id``.
  :func:`subagent_context` answers ``hookSpecificOutput`` with ``permissionDecision:
  "allow"`` and ``updatedInput``: a copy of every field of ``tool_input`` whose
  ``prompt`` is :meth:`Handoff.render() <ctxwise.handoff.select.Handoff.render>`
  (the task, then the transcript chunks it needs). ``updatedInput`` replaces the
  whole input, so nothing is left out.
- ``SubagentStart``: ``agent_id`` and ``agent_type``. Some Claude Code versions
  ignore ``updatedInput`` for the subagent tool, so :func:`subagent_start` gives the
  same selection as ``hookSpecificOutput.additionalContext``, within that field's
  :data:`ADDITIONAL_CONTEXT_CAP` characters. Its task is the payload's ``prompt``
  when there is one, else the prompt of the latest ``Agent``/``Task`` call in the
  transcript (of the same ``subagent_type`` when ``agent_type`` is given).
- ``PreCompact``: ``trigger`` (``manual`` | ``auto``) and ``custom_instructions``.
  :func:`pre_compact` copies the transcript into the archive
  (``<archive>/<session_id>/<UTC timestamp>.jsonl``, never replacing a file; the
  oldest copies are removed to keep the archive within
  :data:`DEFAULT_ARCHIVE_MAX_BYTES`) and returns the standing rules and case facts
  the summary must keep; Claude Code appends a PreCompact hook's stdout to the
  compaction instructions.
- ``SessionStart``: ``source`` (``startup`` | ``resume`` | ``clear`` | ``compact``).
  With ``compact``, :func:`session_start` re-injects the rules and case facts as
  ``hookSpecificOutput.additionalContext``.

Rules and case facts are found the way the Engine finds them
(:meth:`Rules.capture_messages <ctxwise.memory.facts.Rules.capture_messages>` over
the user's messages, :meth:`CaseFacts.update_from_messages
<ctxwise.memory.facts.CaseFacts.update_from_messages>` with a
:class:`~ctxwise.memory.facts.FactExtractor` preset).

**A hook never blocks Claude Code on its own failure.** :func:`run_hook` runs a
handler under a deadline; a broken payload, an unreadable transcript, any
exception, or the deadline passing gives an empty stdout (for ``PreToolUse``: the
call goes through unchanged; for ``PreCompact``: the default instructions) and one
line in the hook log (:func:`hook_log_path`: ``$CTXWISE_HOOK_LOG``, else
``~/.ctxwise/hooks.log``); the command exits 0.

:func:`hook_settings` builds the ``settings.json`` snippet and
:func:`install_settings` merges it into a settings file, keeping every other key.

The archive lives in ``ctxwise.integrations._hook_archive`` and the settings in
``ctxwise.integrations._hook_settings``; every name is importable from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ctxwise._io import (
    parse_json,
)
from ctxwise.errors import FormatError, UsageError
from ctxwise.integrations._hook_archive import (
    Clock,
    archive_transcript,
    default_archive_dir,
    latest_archive,
    prune_archives,
    sweep_archive,
    utc_now,
)
from ctxwise.integrations._hook_settings import (
    DEFAULT_HOOK_TIMEOUT,
    HOOK_EVENTS,
    SUBAGENT_TOOLS,
    InstallResult,
    hook_settings,
    install_settings,
    merge_settings,
)
from ctxwise.messages import Message, ToolUseBlock, Transcript

if TYPE_CHECKING:
    from ctxwise.handoff.chunks import Chunk
    from ctxwise.handoff.scoring import ChunkScorer
    from ctxwise.handoff.select import Handoff
    from ctxwise.tokens import TokenCounter

__all__ = [
    "ADDITIONAL_CONTEXT_CAP",
    "CLEANUP_GRACE",
    "DEFAULT_ARCHIVE_MAX_BYTES",
    "DEFAULT_DEADLINE",
    "DEFAULT_HOOK_TIMEOUT",
    "HOOK_EVENTS",
    "SUBAGENT_TOOLS",
    "SUBAGENT_TRANSCRIPT_BYTES",
    "Clock",
    "HookPayload",
    "InstallResult",
    "PreCompactPayload",
    "PreCompactResult",
    "PreToolUsePayload",
    "SessionStartPayload",
    "SubagentStartPayload",
    "archive_transcript",
    "default_archive_dir",
    "hook_log_path",
    "hook_settings",
    "install_settings",
    "keep_instructions",
    "log_hook_failure",
    "merge_settings",
    "pre_compact",
    "prune_archives",
    "run_hook",
    "session_start",
    "standing_context",
    "subagent_context",
    "subagent_start",
]

ADDITIONAL_CONTEXT_CAP = 10_000
"""Characters of ``additionalContext`` Claude Code takes inline (longer output is
replaced by a preview and a file path)."""

DEFAULT_DEADLINE = 5.0
"""Seconds a hook works before it gives up and lets Claude Code go on unchanged."""

CLEANUP_GRACE = 1.0
"""Seconds a hook given a ``cancel`` event waits, once its deadline has passed, for
its work to stop and remove what it left half-written (the ``pre-compact`` copy's
temporary file) before the process exits."""

DEFAULT_ARCHIVE_MAX_BYTES = 2**30
"""The most bytes the ``pre-compact`` archive folder holds (1 GiB): after each copy,
the oldest copies (of any session) are removed until the folder is within it. The
copy just written, and any newer one, is never removed, so one transcript larger
than the cap is kept alone. ``hook pre-compact --archive-max-bytes`` changes it
(``0``: no cap)."""

SUBAGENT_TRANSCRIPT_BYTES = 12 * 2**20
"""How much of the end of a transcript the subagent hooks select from. Selection
takes time in proportion to the transcript, and a hook that passes its deadline
hands the subagent nothing; from a longer session they read the latest lines up to
this size (whole lines), and say so. ``benchmarks/bench_hooks.py`` times both hooks
on sessions longer than this."""

_CONTEXT_MARK = "<context note="


# -- payloads ---------------------------------------------------------------------


class HookPayload(BaseModel):
    """The fields every hook payload carries; any others are kept."""

    model_config = ConfigDict(extra="allow")

    session_id: str = ""
    transcript_path: str
    cwd: str | None = None
    hook_event_name: str | None = None
    permission_mode: str | None = None


class PreToolUsePayload(HookPayload):
    tool_name: str
    tool_input: dict[str, Any]
    tool_use_id: str | None = None


class SubagentStartPayload(HookPayload):
    agent_id: str | None = None
    agent_type: str | None = None
    prompt: str | None = None


class PreCompactPayload(HookPayload):
    trigger: str | None = None
    custom_instructions: str | None = None


class SessionStartPayload(HookPayload):
    source: str | None = None


_P = TypeVar("_P", bound=HookPayload)


def _parse(model: type[_P], payload: str | Mapping[str, Any], event: str) -> _P:
    """The payload, for a hook that answers ``event``: a payload naming another
    ``hook_event_name`` is refused (an answer naming ``event`` would be an error in
    Claude Code). One without the field is taken."""
    try:
        data = parse_json(payload) if isinstance(payload, str) else payload
    except json.JSONDecodeError as exc:
        raise FormatError("hook payload", f"not JSON ({exc})") from None
    except RecursionError:
        raise FormatError("hook payload", "JSON nested too deeply") from None
    if not isinstance(data, Mapping):
        raise FormatError("hook payload", f"not a JSON object but {type(data).__name__}")
    try:
        parsed = model.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "payload"
        raise FormatError("hook payload", f"{where}: {first['msg']}") from None
    if parsed.hook_event_name is not None and parsed.hook_event_name != event:
        raise FormatError(
            "hook payload",
            f"hook_event_name is {parsed.hook_event_name!r}; this hook answers {event} only"
            " (check the event it is registered under)",
        )
    return parsed


def _read(path: str | Path, *, tail: int | None = None) -> Transcript:
    """The Claude Code transcript at ``path`` (with ``tail``: only its lines in the
    last ``tail`` bytes when it is longer, see :func:`_read_tail`).

    Anything there but a regular file (a FIFO, a device) is refused before it is
    opened: opening a FIFO blocks until a writer comes, which would hold the hook
    until its deadline.

    The file is the live session, which Claude Code may be appending to as the hook
    reads it: a last line that has no newline yet and does not read is left out
    (every earlier line must still read).
    """
    from ctxwise.formats import read_transcript

    p = Path(path)
    if p.exists() and not p.is_file() and not p.is_dir():
        raise FormatError(str(p), "not a regular file")
    if tail is not None and p.is_file() and p.stat().st_size > tail:
        return _read_tail(p, tail)
    try:
        return read_transcript(p, "claude-code")
    except FormatError:
        complete = _complete_lines(p)
        if complete is None:
            raise
        from ctxwise.formats.claude_code import read_claude_code

        try:
            return read_claude_code(complete, source=str(p))
        except FormatError:
            pass
        raise


def _read_tail(path: Path, size: int) -> Transcript:
    """The lines that lie wholly in the last ``size`` bytes of ``path``: the line cut
    at the start is dropped, and so is a last line with no newline yet that does
    not read (Claude Code may be writing it)."""
    from ctxwise._io import decode_text
    from ctxwise.formats.claude_code import read_claude_code

    try:
        with path.open("rb") as f:
            f.seek(-size, os.SEEK_END)
            data = f.read()
    except OSError as e:
        raise FormatError(str(path), e.strerror or str(e)) from None
    data = data[data.find(b"\n") + 1 :]
    try:
        text, _ = decode_text(data)
    except ValueError as e:
        raise FormatError(str(path), f"the end of the transcript does not read: {e}") from None
    try:
        return read_claude_code(text, source=str(path))
    except FormatError:
        if not text.endswith("\n") and "\n" in text:
            return read_claude_code(text[: text.rfind("\n") + 1], source=str(path))
        raise


def _tail_note(path: str | Path, tail: int) -> str:
    """`` (from the last N MB of an M MB transcript)`` when the hooks read only the end."""
    try:
        size = Path(path).stat().st_size
    except OSError:
        return ""
    if size <= tail:
        return ""
    return f" (from the last {tail / 2**20:.0f} MB of a {size / 2**20:.0f} MB transcript)"


def _complete_lines(path: Path) -> str | None:
    """The UTF-8 text of ``path`` up to its last newline, or ``None`` when the file
    ends in a newline (nothing is half-written) or that text does not decode."""
    from ctxwise._io import decode_text
    from ctxwise.formats import MAX_TRANSCRIPT_BYTES

    try:
        if path.stat().st_size > MAX_TRANSCRIPT_BYTES:  # refused by the reader already
            return None
        data = path.read_bytes()
    except (OSError, ValueError):
        return None
    if data.endswith(b"\n"):
        return None
    try:
        text, encoding = decode_text(data[: data.rfind(b"\n") + 1])
    except ValueError:
        return None
    return text if encoding in (None, "UTF-8") else None


# -- subagents --------------------------------------------------------------------


class _ScoreOnce:
    """A :class:`~ctxwise.handoff.scoring.HybridScorer` that remembers its last
    scores, so trying smaller budgets on the same chunks does not score them again."""

    def __init__(self) -> None:
        from ctxwise.handoff.scoring import HybridScorer

        self._inner = HybridScorer()
        self._memo: tuple[tuple[str, tuple[str, ...]], list[float]] | None = None

    @property
    def name(self) -> str:
        return self._inner.name

    def score(self, task: str, chunks: Sequence[Chunk]) -> list[float]:
        key = (task, tuple(f"{c.id}\0{c.text}" for c in chunks))
        if self._memo is None or self._memo[0] != key:
            self._memo = (key, self._inner.score(task, chunks))
        return list(self._memo[1])


def _select(
    transcript: Transcript,
    task: str,
    budget: int,
    counter: TokenCounter | None,
    scorer: ChunkScorer | None = None,
) -> Handoff:
    from ctxwise.handoff.select import select_context

    return select_context(transcript, task, budget, counter=counter, scorer=scorer)


def subagent_context(
    payload: str | Mapping[str, Any],
    *,
    budget: int = 20_000,
    counter: TokenCounter | None = None,
    tail: int = SUBAGENT_TRANSCRIPT_BYTES,
) -> dict[str, Any] | None:
    """The ``PreToolUse`` answer for a subagent call, or ``None`` to let it through
    unchanged (another tool, no prompt, a prompt that already carries ctxwise's
    context, an empty transcript).

    ``updatedInput`` is every field of ``tool_input`` with ``prompt`` replaced by the
    handoff's render: the task first, then the chosen chunks in transcript order.

    Raises:
        FormatError: the payload is not a PreToolUse payload, or the transcript
            does not read.
    """
    p = _parse(PreToolUsePayload, payload, "PreToolUse")
    if p.tool_name not in SUBAGENT_TOOLS:
        return None
    prompt = p.tool_input.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip() or _CONTEXT_MARK in prompt:
        return None
    handoff = _select(_read(p.transcript_path, tail=tail), prompt, budget, counter)
    if not handoff.selected:
        return None
    updated = dict(p.tool_input)
    updated["prompt"] = handoff.render()
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": (
                f"ctxwise: {len(handoff.selected)} transcript chunks "
                f"({handoff.tokens:,} tokens) added to the subagent's prompt"
                + _tail_note(p.transcript_path, tail)
            ),
            "updatedInput": updated,
        }
    }


def _latest_subagent_prompt(messages: Sequence[Message], agent_type: str | None) -> str | None:
    """The prompt of the latest subagent call (of ``agent_type`` when it is given)."""
    for msg in reversed(messages):
        for block in reversed(msg.content):
            if not isinstance(block, ToolUseBlock) or block.name not in SUBAGENT_TOOLS:
                continue
            prompt = block.input.get("prompt")
            kind = block.input.get("subagent_type") or "general-purpose"
            if isinstance(prompt, str) and prompt.strip() and agent_type in (None, kind):
                return prompt
    return None


def _context_only(rendered: str, task: str) -> str:
    """The render without its leading task (the subagent already has its prompt)."""
    head = f"{task}\n\n"
    return rendered[len(head) :] if rendered.startswith(head) else rendered


def subagent_start(
    payload: str | Mapping[str, Any],
    *,
    budget: int = 20_000,
    counter: TokenCounter | None = None,
    cap: int = ADDITIONAL_CONTEXT_CAP,
    tail: int = SUBAGENT_TRANSCRIPT_BYTES,
) -> dict[str, Any] | None:
    """The ``SubagentStart`` answer: the selection as ``additionalContext`` of at most
    ``cap`` characters, or ``None`` (no task found, nothing selected, or not even one
    chunk fits the cap).

    The budget is shrunk until the rendered chunks fit ``cap``; chunks are never cut.

    Raises:
        FormatError: the payload is not a SubagentStart payload, or the transcript
            does not read.
    """
    p = _parse(SubagentStartPayload, payload, "SubagentStart")
    transcript = _read(p.transcript_path, tail=tail)
    task = p.prompt if p.prompt and p.prompt.strip() else None
    task = task or _latest_subagent_prompt(transcript.messages, p.agent_type)
    if task is None:
        return None
    lead = (
        "ctxwise: the parts of the parent conversation this task needs"
        + _tail_note(p.transcript_path, tail)
        + ".\n"
    )
    room = cap - len(lead)
    allowed = max(1, min(budget, room))
    scorer = _ScoreOnce()
    for _ in range(12):
        handoff = _select(transcript, task, allowed, counter, scorer)
        if not handoff.selected:
            return None
        text = _context_only(handoff.render(), handoff.task)
        if len(text) <= room:
            return {
                "hookSpecificOutput": {
                    "hookEventName": "SubagentStart",
                    "additionalContext": lead + text,
                }
            }
        smaller = int(allowed * room / len(text) * 0.9)
        if smaller >= allowed or smaller < 1:
            smaller = allowed // 2
        if smaller < 1:
            break
        allowed = smaller
    return None


# -- rules and case facts ---------------------------------------------------------


def standing_context(transcript: Transcript, *, extractor: str = "prose") -> tuple[str, str]:
    """The transcript's standing rules and case facts, rendered (``""`` when none).

    The same calls the Engine makes on a turn's messages: :meth:`Rules.capture_messages`
    over the non-system messages and :meth:`CaseFacts.update_from_messages` with the
    ``extractor`` preset (``prose`` | ``support``). A message those refuse (one
    text over :data:`~ctxwise.memory.facts.MAX_TEXT_CHARS`: a long paste) is left
    out rather than losing every other message's rules and facts.
    """
    from ctxwise.memory.facts import CaseFacts, FactExtractor, Rules

    preset = FactExtractor.preset(extractor)
    body = [m for m in transcript.messages if m.role != "system"]
    rules, facts = Rules(), CaseFacts()
    try:
        if body:
            rules.capture_messages(body)
            facts.update_from_messages(body, extractor=preset)
    except UsageError:  # one message at a time, skipping the ones refused
        rules, facts = Rules(), CaseFacts()
        for i, msg in enumerate(body):
            with contextlib.suppress(UsageError):
                rules.capture_messages([msg], offset=i)
            with contextlib.suppress(UsageError):
                facts.update_from_messages([msg], offset=i, extractor=preset)
    return rules.render(), facts.render()


def keep_instructions(rules: str, facts: str) -> str:
    """What the compaction summary must keep: ``""`` when there are no rules or facts."""
    parts = [x for x in (rules, facts) if x]
    if not parts:
        return ""
    head = (
        "Keep the following in the summary, word for word: the user's standing rules "
        "and the case facts of this session (found by ctxwise)."
    )
    return "\n\n".join([head, *parts]) + "\n"


def _capped(text: str, cap: int) -> str:
    """``text`` cut to whole lines within ``cap`` characters, saying how many went."""
    if len(text) <= cap:
        return text
    lines = text.splitlines()
    kept: list[str] = []
    used = 0
    for n, line in enumerate(lines):
        note = f"\n(ctxwise: {len(lines) - n} more lines left out to stay within {cap:,} chars)"
        if used + len(line) + 1 + len(note) > cap:
            return "\n".join(kept) + note
        kept.append(line)
        used += len(line) + 1
    return "\n".join(kept)  # pragma: no cover - the loop returns first


# -- compaction and session start ------------------------------------------------
@dataclass(frozen=True, slots=True)
class PreCompactResult:
    """Where the transcript was archived, and the text for the compaction
    instructions (``""`` when there are no rules or facts to keep).

    ``archive`` is None when the copy could not be written (a full disk, a
    read-only home, a file where the archive folder goes); ``archive_error`` then
    says why. The instructions are found all the same: the summary keeping the
    session's rules matters more than the copy."""

    archive: Path | None
    instructions: str
    trigger: str | None
    archive_error: str | None = None
    pruned: tuple[Path, ...] = ()
    """Older copies removed to keep the archive folder within its cap."""


def pre_compact(
    payload: str | Mapping[str, Any],
    *,
    archive_dir: str | Path | None = None,
    extractor: str = "prose",
    clock: Clock = utc_now,
    archive_max_bytes: int = DEFAULT_ARCHIVE_MAX_BYTES,
    cancel: threading.Event | None = None,
) -> PreCompactResult:
    """Archive the transcript, then find the rules and case facts the summary keeps.

    The archive is written first, so it exists even when the transcript does not
    parse. An archive that cannot be written (:class:`OSError`) does not stop the
    rules and facts from being found: the result has ``archive`` None and the
    reason in ``archive_error``. After a copy is written, the oldest copies are
    removed until the archive folder holds at most ``archive_max_bytes``
    (:func:`prune_archives`; ``0``: no cap); ``pruned`` lists them; temporary
    copies killed hooks left in any session's folder are removed once they are
    :data:`ctxwise._io.STALE_TEMP_AGE` old by ``clock``. ``cancel`` (set by
    :func:`run_hook` when the deadline passes) stops the copy, which then leaves no
    file, and the work after it.

    Raises:
        FormatError: the payload is not a PreCompact payload, or the transcript
            cannot be read.
    """
    p = _parse(PreCompactPayload, payload, "PreCompact")
    base = Path(archive_dir) if archive_dir is not None else default_archive_dir()
    if archive_max_bytes < 0:
        raise UsageError(f"archive_max_bytes must be 0 (no cap) or more, got {archive_max_bytes}")
    copy: Path | None = None
    problem: str | None = None
    pruned: list[Path] = []
    try:
        copy = archive_transcript(p.transcript_path, base, p.session_id, clock=clock, cancel=cancel)
    except OSError as exc:
        problem = f"archive not written to {base}: {exc.strerror or exc}"
    if copy is not None:
        pruned = prune_archives(base, archive_max_bytes, copy)
        sweep_archive(base, clock)
    if cancel is not None and cancel.is_set():
        return PreCompactResult(copy, "", p.trigger, problem, tuple(pruned))
    rules, facts = standing_context(_read(p.transcript_path), extractor=extractor)
    return PreCompactResult(
        copy, keep_instructions(rules, facts), p.trigger, problem, tuple(pruned)
    )


def session_start(
    payload: str | Mapping[str, Any],
    *,
    archive_dir: str | Path | None = None,
    extractor: str = "prose",
    cap: int = ADDITIONAL_CONTEXT_CAP,
) -> dict[str, Any] | None:
    """The ``SessionStart`` answer after a compaction: the rules and case facts as
    ``additionalContext`` (whole lines within ``cap`` characters), or ``None`` for
    another ``source`` or when there are none.

    They are read from ``transcript_path`` (Claude Code keeps the history before a
    compaction boundary in the file), or, when it is gone, from the session's latest
    archive.

    Raises:
        FormatError: the payload is not a SessionStart payload, or no transcript reads.
    """
    p = _parse(SessionStartPayload, payload, "SessionStart")
    if p.source != "compact":
        return None
    path = Path(p.transcript_path)
    if not path.is_file():
        base = Path(archive_dir) if archive_dir is not None else default_archive_dir()
        latest = latest_archive(base, p.session_id)
        if latest is None:
            raise FormatError(p.transcript_path, "no such transcript file and no archive")
        path = latest
    rules, facts = standing_context(_read(path), extractor=extractor)
    parts = [x for x in (rules, facts) if x]
    if not parts:
        return None
    head = "ctxwise: standing rules and case facts from before the compaction."
    return {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": _capped("\n\n".join([head, *parts]), cap),
        }
    }


# -- running a hook ---------------------------------------------------------------


def hook_log_path() -> Path:
    """``$CTXWISE_HOOK_LOG``, else ``~/.ctxwise/hooks.log``."""
    env = os.environ.get("CTXWISE_HOOK_LOG")
    return Path(env) if env else Path.home() / ".ctxwise" / "hooks.log"


def log_hook_failure(
    event: str, detail: str, *, log: Path | None = None, clock: Clock = utc_now
) -> None:
    """Append one line to the hook log; a log that cannot be written is skipped."""
    path = log if log is not None else hook_log_path()
    line = " ".join(detail.split())
    with contextlib.suppress(OSError, ValueError):
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8", errors="backslashreplace") as f:
            f.write(f"{clock().astimezone(UTC).isoformat()} {event}: {line}\n")


def run_hook(
    event: str,
    handler: Callable[[str], str],
    read_payload: Callable[[], str],
    *,
    deadline: float = DEFAULT_DEADLINE,
    log: Path | None = None,
    clock: Clock = utc_now,
    cancel: threading.Event | None = None,
    grace: float | None = None,
) -> str:
    """What the hook prints: ``handler(read_payload())``, or ``""`` on any failure.

    The handler runs in a daemon thread. When it raises, its error is logged and
    ``""`` returned. When it is still running after ``deadline`` seconds, a
    ``deadline`` line is logged and ``""`` returned: Claude Code goes on with the
    tool call, compaction or session unchanged, and the unfinished work is abandoned
    when the process exits. A handler that writes files is given ``cancel``: at the
    deadline it is set, and the hook waits up to ``grace`` seconds (default
    :data:`CLEANUP_GRACE`; less when the handler returns sooner) for the handler to
    stop and remove what it left half-written, so a ``pre-compact`` copy cut off
    this way leaves no temporary file; one a killed process left is swept by the
    next copy into that folder.
    """
    out: list[str] = []
    err: list[BaseException] = []

    def work() -> None:
        try:
            out.append(handler(read_payload()))
        except BaseException as exc:
            err.append(exc)

    thread = threading.Thread(target=work, name=f"ctxwise-hook-{event}", daemon=True)
    thread.start()
    thread.join(max(0.05, deadline))
    if thread.is_alive():
        if cancel is not None:
            cancel.set()
            thread.join(max(0.0, CLEANUP_GRACE if grace is None else grace))
        log_hook_failure(
            event, f"deadline of {deadline:g}s passed; left unchanged", log=log, clock=clock
        )
        return ""
    if err:
        exc = err[0]
        where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        at = f" at {Path(where[0].filename).name}:{where[0].lineno}" if where else ""
        log_hook_failure(
            event,
            f"{type(exc).__name__}: {exc}{at}; left unchanged",
            log=log,
            clock=clock,
        )
        return ""
    return out[0] if out else ""
