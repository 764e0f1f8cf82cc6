"""Reader for Claude Code session transcripts (JSONL, one event a line).

What becomes a message:

- ``user`` and ``assistant`` events carry an Anthropic ``message``. Claude Code
  writes one event per content block of a streamed response, all with the same
  ``message.id``, and may interleave the tool results of that response between
  them. The reader rebuilds the API's view: one assistant message per
  ``message.id`` and one user message holding the tool results that answer it.
- A ``user`` event with ``isCompactSummary`` becomes a message of kind
  ``compact_summary``.
- A ``system`` event with ``subtype: "compact_boundary"`` becomes a
  :class:`~ctxwise.messages.CompactBoundary` on the transcript.
- A ``system`` event with ``subtype: "microcompact_boundary"`` records that
  Claude Code cleared old tool results in what it sends (the file keeps them):
  the results its ``microcompactMetadata.compactedToolIds`` name, in the same
  compaction segment, read as Claude Code sends them, ``[Old tool result content
  cleared]`` (counted in :attr:`ClaudeCodeReadReport.microcompacted`).
- A ``system`` event with ``subtype: "local_command"`` (a slash command such as
  ``/model`` or ``/cost`` and its output, ``<command-name>/model</command-name>…``
  and ``<local-command-stdout>…</local-command-stdout>``) becomes a ``user``
  message holding its ``content`` as it is, tags included: Claude Code sends these
  to the model as user text (``normalizeMessagesForAPI`` turns them into user
  messages "so the model can reference previous command output in later turns").

A ``user``, ``assistant`` or ``local_command`` event whose ``uuid`` an earlier one in the same
compaction segment has is a copy Claude Code appended again (reopening a session
in the IDE replays its entries): it is read once, as Claude Code loads entries by
uuid, and counted as ``duplicate``.

Only the conversation the model has is read. A session file is a tree: every
entry has a ``uuid`` and a ``parentUuid``, and when the user rewinds (double Esc,
``/rewind``, editing an earlier prompt) or a request is retried, the abandoned
branch stays in the file and the new one starts from an earlier parent. Claude
Code resumes from the newest entry that is not a subagent's and walks
``parentUuid`` back to the root (``buildConversationChain``); the reader does the
same, then reads the entries on that chain in file order. The events of other
branches are counted as ``off_branch``. In detail:

- the entries of the tree are the ``user``, ``assistant``, ``system`` and
  ``attachment`` events (in a main session file, not the ``isSidechain`` ones);
  older Claude Code versions put ``progress`` events in the chain, and a link to
  one stands for a link to its parent, as Claude Code bridges them;
- the leaf is the last entry in the file that is not a replayed copy (Claude
  Code takes the newest ``timestamp``; in the files it writes the two agree, and
  file order also holds for a file ctxwise compacted, whose copied tail keeps its
  original timestamps, and needs no clock);
- a ``compact_boundary`` has ``parentUuid: null``; the walk goes on through its
  ``logicalParentUuid``, so the history before a compaction is read too (as a
  :class:`~ctxwise.messages.CompactBoundary`; Claude Code's own walk stops there);
- the parallel tool calls of one response are separate assistant events with the
  same ``message.id``, each tool result a child of its own call, so one chain
  misses some of them: every assistant event with the ``message.id`` of one on
  the chain, and every tool result answering an assistant event on the chain, is
  on it too (Claude Code's ``recoverOrphanedParallelToolResults``);
- an entry whose ``parentUuid`` (or a boundary's ``logicalParentUuid``) names no
  entry of the file (Claude Code sometimes writes such links, a subagent's file
  starts with links into its parent session, hand-edited files lose lines)
  continues the walk at the closest earlier entry in the file not yet on it,
  rather than ending it and losing what came before (Claude Code stops there);
  such links are counted in :attr:`ClaudeCodeReadReport.unresolved_links`;
- an entry without a ``parentUuid`` key follows the entry before it in the file;
  an entry without a ``uuid`` is on the chain when its parent is; a loop in the
  links ends the walk;
- a file without any ``uuid`` (older or hand-written transcripts) is read in
  file order, every event, as are the entries of a file the walk reaches all of.

``summary`` events and their ``leafUuid`` are not used: they title the
conversation ending at that leaf, which may be in another session's file.

Skipped (counted in :attr:`ClaudeCodeReadReport.skipped`): ``progress``,
``file-history-snapshot``, ``queue-operation`` and other bookkeeping events,
``system`` events other than compaction boundaries and local commands (hook
summaries, turn durations), the events on an abandoned branch (``off_branch``),
and the API errors Claude Code records as assistant events
(``isApiErrorMessage`` with model ``<synthetic>``: "API Error: 529 Overloaded",
a usage limit notice), which the model never sees.

Writing: ctxwise does not generate sessions from scratch (the events carry uuids,
parent links, cwd, version and UI state it has no model for). It writes edits
back: :func:`patch_claude_code` takes the original JSONL text and the edited
transcript read from it and rewrites only the events whose tool blocks changed
(on the branch read; the lines of other branches stay as they are).

The event graph (types, the branch walk, boundaries, microcompaction) lives in
``ctxwise.formats._claude_code_events``.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxwise._io import parse_json
from ctxwise.errors import FormatError
from ctxwise.formats._claude_code_events import (
    _CHAIN_TYPES as _CHAIN_TYPES,
)
from ctxwise.formats._claude_code_events import (
    _as_sent,
    _is_boundary,
    _microcompacted_ids,
    _segments,
    _text,
)
from ctxwise.formats._claude_code_events import (
    _event_type as _event_type,
)
from ctxwise.formats._claude_code_events import (
    _is_local_command as _is_local_command,
)
from ctxwise.formats._claude_code_events import (
    _live_branch as _live_branch,
)
from ctxwise.formats._extra import keep
from ctxwise.formats.anthropic import decode_block, encode_block
from ctxwise.messages import (
    CompactBoundary,
    ContentBlock,
    Message,
    MessageKind,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    block_text,
)

__all__ = [
    "PINNED_EVENT_KEY",
    "ClaudeCodeReadReport",
    "patch_claude_code",
    "read_claude_code",
    "read_claude_code_lines",
]


PINNED_EVENT_KEY = "ctxwisePinned"
"""Key of a summary event ctxwise wrote that holds the pinned facts and rules as
data (the reader puts it in the summary message's ``extra["ctxwise.pinned"]``)."""


@dataclass(slots=True)
class ClaudeCodeReadReport:
    """What the reader did with each event type."""

    events: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    microcompacted: int = 0
    """Tool results read as cleared because a ``microcompact_boundary`` names them."""
    unresolved_links: int = 0
    """Links of the conversation read (``parentUuid``, a boundary's
    ``logicalParentUuid``) that name no entry of the file: the walk went on at the
    closest earlier entry (see the module docstring)."""


def read_claude_code(text: str, *, source: str = "claude-code") -> Transcript:
    """A transcript from the full text of a Claude Code JSONL file."""
    # JSONL lines end in "\n" only: str.splitlines would also split on U+2028,
    # U+2029 and U+0085, which JSON strings may hold raw.
    transcript, _ = read_claude_code_lines(text.split("\n"), source=source)
    return transcript


def _parse_line(line: str, lineno: int, source: str) -> Mapping[str, Any]:
    try:
        event = parse_json(line)
    except RecursionError:
        raise FormatError(source, "JSON nested too deeply", line=lineno) from None
    except json.JSONDecodeError as exc:
        # a line that does not end its object was most likely cut short
        cut = "" if line.rstrip().endswith("}") else "; the line may be truncated"
        raise FormatError(source, f"invalid JSON ({exc.msg}){cut}", line=lineno) from None
    if not isinstance(event, Mapping):
        raise FormatError(source, "each line must be a JSON object", line=lineno)
    return event


def read_claude_code_lines(
    lines: Iterable[str], *, source: str = "claude-code"
) -> tuple[Transcript, ClaudeCodeReadReport]:
    """A transcript and a read report from JSONL lines (blank lines ignored)."""
    report = ClaudeCodeReadReport()
    out: list[Message] = []
    boundaries: list[CompactBoundary] = []
    open_assistant: int | None = None  # index in out of the assistant message being built
    open_results: int | None = None  # index in out of the user message collecting its results
    events = [
        (lineno, _parse_line(line, lineno, source))
        for lineno, line in enumerate(lines, start=1)
        if line.strip()
    ]
    # Older Claude Code versions wrote subagent (sidechain) events into the main
    # session file; they are not part of the main conversation. A subagent's own
    # file holds sidechain events only, and those are its conversation.
    has_main = any(
        e.get("type") in ("user", "assistant") and not e.get("isSidechain") for _, e in events
    )
    report.events = len(events)
    branch = _live_branch([e for _, e in events], has_main)
    if branch is not None:
        report.unresolved_links = branch.unresolved
        kept = []
        for i, (lineno, event) in enumerate(events):
            if has_main and event.get("isSidechain") and event.get("type") in ("user", "assistant"):
                report.skipped["sidechain"] += 1
            elif _event_type(event) in _CHAIN_TYPES and i not in branch.live:
                report.skipped["off_branch"] += 1
            else:
                kept.append((lineno, event))
        events = kept
    cleared_in = _segments(events)
    seen_uuids: set[str] = set()  # of the user and assistant events in this segment
    for (lineno, event), cleared in zip(events, cleared_in, strict=True):
        etype = _event_type(event)
        if has_main and event.get("isSidechain") and etype in ("user", "assistant"):
            report.skipped["sidechain"] += 1
            continue
        if etype == "system" and event.get("subtype") == "compact_boundary":
            meta = event.get("compactMetadata") or {}
            pre = meta.get("preTokens") if isinstance(meta, Mapping) else None
            boundaries.append(
                CompactBoundary(
                    index=len(out),
                    trigger=_text(meta.get("trigger")) if isinstance(meta, Mapping) else None,
                    pre_tokens=_count(pre),
                    timestamp=_text(event.get("timestamp")),
                )
            )
            open_assistant = open_results = None
            seen_uuids.clear()
            continue
        if _is_local_command(event):
            _read_local_command(event, lineno, source, out, seen_uuids, report)
            open_assistant = open_results = None
            continue
        if etype not in ("user", "assistant"):
            report.skipped[
                str(etype) if etype != "system" else f"system:{event.get('subtype')}"
            ] += 1
            continue
        raw = event.get("message")
        if not isinstance(raw, Mapping) or "content" not in raw:
            raise FormatError(source, f"{etype} event without a message", line=lineno)
        if _synthetic_error(event):
            report.skipped["api_error"] += 1
            continue
        uid = event.get("uuid")
        if isinstance(uid, str):
            if uid in seen_uuids:  # a replayed copy (see the module docstring)
                report.skipped["duplicate"] += 1
                continue
            seen_uuids.add(uid)
        blocks = _blocks(raw["content"], source, lineno)
        if cleared and etype == "user":
            sent = tuple(_as_sent(b, cleared) for b in blocks)
            report.microcompacted += sum(1 for a, b in zip(blocks, sent, strict=True) if a != b)
            blocks = sent
        if etype == "assistant":
            mid = _text(raw.get("id"))
            same_stream = (
                mid is not None and mid == out[open_assistant].id
                if open_assistant is not None
                else False
            )
            # without ids, only directly consecutive assistant events are one message
            no_ids = mid is None and open_assistant == len(out) - 1 and out[-1].id is None
            if open_assistant is not None and (same_stream or no_ids):
                prev = out[open_assistant]
                out[open_assistant] = Message(
                    "assistant",
                    prev.content + blocks,
                    id=prev.id,
                    timestamp=prev.timestamp,
                    extra=prev.extra,
                )
                continue
            out.append(
                Message(
                    "assistant",
                    blocks,
                    id=mid,
                    timestamp=_text(event.get("timestamp")),
                    extra=keep("claude_code", raw, {"role", "content", "id"}),
                )
            )
            open_assistant = len(out) - 1
            open_results = None
            continue
        # user event
        # an event that answers the open tool calls (results, possibly with a note
        # after them) belongs to the one user message the API saw
        answers = bool(blocks) and isinstance(blocks[0], ToolResultBlock)
        if answers and open_results is not None:
            prev = out[open_results]
            out[open_results] = Message(
                "user", prev.content + blocks, id=prev.id, timestamp=prev.timestamp
            )
            continue
        plain = isinstance(raw["content"], str)
        kind: MessageKind = "compact_summary" if event.get("isCompactSummary") else "message"
        pinned = event.get(PINNED_EVENT_KEY) if kind == "compact_summary" else None
        out.append(
            Message(
                "user",
                blocks,
                kind=kind,
                plain=plain,
                id=_text(event.get("uuid")),
                timestamp=_text(event.get("timestamp")),
                extra={"ctxwise.pinned": pinned} if isinstance(pinned, Mapping) else {},
            )
        )
        if answers and open_assistant is not None:
            open_results = len(out) - 1
        else:
            open_assistant = open_results = None
    return (
        Transcript(tuple(out), compactions=tuple(boundaries), source=source, format="claude-code"),
        report,
    )


def _read_local_command(
    event: Mapping[str, Any],
    lineno: int,
    source: str,
    out: list[Message],
    seen_uuids: set[str],
    report: ClaudeCodeReadReport,
) -> None:
    """A slash command's echo or output, as the user message Claude Code sends for it."""
    uid = event.get("uuid")
    if isinstance(uid, str):
        if uid in seen_uuids:
            report.skipped["duplicate"] += 1
            return
        seen_uuids.add(uid)
    content = event.get("content")
    if not isinstance(content, str | list):
        raise FormatError(source, "local_command event without a content", line=lineno)
    out.append(
        Message(
            "user",
            _blocks(content, source, lineno),
            plain=isinstance(content, str),
            id=_text(uid),
            timestamp=_text(event.get("timestamp")),
        )
    )


_SYNTHETIC_MODEL = "<synthetic>"
"""The ``message.model`` of the assistant events Claude Code writes itself."""


def _synthetic_error(event: Mapping[str, Any]) -> bool:
    """An API error (overload, rate limit, ...) Claude Code recorded as an assistant
    event (``isApiErrorMessage`` and model ``<synthetic>``): shown to the user,
    never sent to the model (Claude Code's ``normalizeMessagesForAPI`` drops it)."""
    raw = event.get("message")
    return (
        event.get("type") == "assistant"
        and event.get("isApiErrorMessage") is True
        and isinstance(raw, Mapping)
        and raw.get("model") == _SYNTHETIC_MODEL
    )


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value)


def _blocks(content: Any, source: str, lineno: int) -> tuple[ContentBlock, ...]:
    if isinstance(content, str):
        return (TextBlock(content),)
    if not isinstance(content, list):
        raise FormatError(source, "message content must be a string or a list", line=lineno)
    try:
        return tuple(decode_block(b, source) for b in content)
    except FormatError as exc:
        raise FormatError(source, exc.detail, line=lineno) from None


# --------------------------------------------------------------------------- writing edits back

_MARK_PREFIX = "ctxwise."
"""``extra`` keys ctxwise's own edits set (``ctxwise.cleared``, ``ctxwise.repaired``):
bookkeeping that is never written into a session (the API rejects unknown keys)."""


def patch_claude_code(text: str, transcript: Transcript, *, source: str = "claude-code") -> str:
    """The session ``text`` with the tool blocks that ``transcript`` changed written back.

    ``transcript`` is an edit of ``read_claude_code(text)`` (or of its
    :meth:`~ctxwise.messages.Transcript.live_window`), such as
    ``clear_tool_uses(...).transcript``. Blocks are matched by id, not position:
    a ``tool_use`` by ``id``, a ``tool_result`` by ``tool_use_id``, within each
    compaction segment (the lines between two ``compact_boundary`` events, matched
    to the transcript's segments in order; a live window is the last one), so a
    tail that a compaction copied, whose ids repeat those before its boundary, is
    patched in its own segment.

    - A block whose edited form differs gets the edited fields (a cleared
      result's ``content``, a cleared call's ``input``); its other keys and
      their order stay.
    - An event whose ``tool_result`` blocks all changed has its top-level
      ``toolUseResult`` (Claude Code's structured copy of the tool output, as
      large as the result itself) replaced by the new result text, the
      placeholder. It is replaced rather than removed: Claude Code writes a
      plain string there itself when a tool fails, so readers of the session
      already handle that shape, and the key still marks the event as a tool
      answer.
    - Only changed events are re-serialized, with
      ``json.dumps(event, ensure_ascii=False, separators=(",", ":"))`` (or
      ``ensure_ascii=True`` for an event holding a lone surrogate, which UTF-8
      cannot encode); every other line, blank lines, progress, snapshot and
      sidechain events included, is byte-identical, and so is the trailing newline.

    Only the cleared results' events are rewritten (and, with ``clear_inputs``,
    their calls'), every other line is byte-identical, and a long session's file
    shrinks substantially. Since the output is read back to check it, this takes
    longer than one read of the file. (No benchmark script measures this function
    yet; ``benchmarks/bench_editing.py`` measures the clearing itself.)

    The result is read back and compared with ``transcript`` (ignoring ctxwise's
    own ``ctxwise.*`` marks); a transcript that differs in anything else (a
    repaired one, messages added or dropped, text changed) raises
    :class:`~ctxwise.errors.FormatError`, as does a tool id that ``text`` lacks
    or holds twice. Nothing invalid is returned.
    """
    lines = text.split("\n")
    events = {
        lineno: _parse_line(line, lineno + 1, source)
        for lineno, line in enumerate(lines)
        if line.strip()
    }
    has_main = any(
        e.get("type") in ("user", "assistant") and not e.get("isSidechain") for e in events.values()
    )
    # the events the reader reads: those of the conversation the model has
    numbered = list(events.items())
    branch = _live_branch([e for _, e in numbered], has_main)
    if branch is not None:
        events = {
            i: e
            for n, (i, e) in enumerate(numbered)
            if n in branch.live or _event_type(e) not in _CHAIN_TYPES
        }
    # One compaction segment at a time: the API never sees two, so a tool id may
    # repeat across a boundary (a compacted tail copies its calls), never within one.
    boundaries = [i for i, e in events.items() if _is_boundary(e)]
    line_ranges = list(
        zip([-1, *boundaries], [*boundaries, len(lines)], strict=True)
    )  # (after this line, before that one)
    if transcript.compactions:
        starts = [b.index for b in transcript.compactions]
        if len(starts) != len(boundaries):
            raise FormatError(
                source,
                f"the transcript has {len(starts)} compaction boundaries, the session "
                f"{len(boundaries)}; it was not read from this text",
            )
        bounds = [0, *starts, len(transcript.messages)]
        pieces = [transcript.messages[a:b] for a, b in itertools.pairwise(bounds)]
    else:  # the live window: the segment after the last boundary
        pieces = [()] * (len(line_ranges) - 1) + [transcript.messages]
    for (lo, hi), piece in zip(line_ranges, pieces, strict=True):
        _patch_segment(lines, events, lo, hi, piece, has_main, source)
    out = "\n".join(lines)
    _check_round_trip(out, transcript, source)
    return out


def _patch_segment(
    lines: list[str],
    events: Mapping[int, Mapping[str, Any]],
    lo: int,
    hi: int,
    messages: Sequence[Message],
    has_main: bool,
    source: str,
) -> None:
    """Write the tool blocks of ``messages`` back into the events on lines ``(lo, hi)``."""
    cleared = _microcompacted_ids(e for i, e in events.items() if lo < i < hi)
    uses: dict[str, ToolUseBlock] = {}
    results: dict[str, ToolResultBlock] = {}
    for m in messages:
        for b in m.content:
            if isinstance(b, ToolUseBlock):
                if b.id in uses:
                    raise FormatError(source, f"the transcript holds tool_use id {b.id!r} twice")
                uses[b.id] = b
            elif isinstance(b, ToolResultBlock):
                if b.tool_use_id in results:
                    raise FormatError(
                        source, f"the transcript holds two tool_results for {b.tool_use_id!r}"
                    )
                results[b.tool_use_id] = b
    seen: set[tuple[str, str]] = set()
    firsts: set[str] = set()  # uuids of the events read (the first of their copies)
    written: set[tuple[str, str]] = set()  # blocks rewritten in those events
    for lineno in range(lo + 1, hi):
        event = events.get(lineno)
        if event is None or event.get("type") not in ("user", "assistant"):
            continue
        if has_main and event.get("isSidechain"):
            continue
        uid = event.get("uuid")
        copy = isinstance(uid, str) and uid in firsts
        if isinstance(uid, str) and not _synthetic_error(event):
            firsts.add(uid)
        raw = event.get("message")
        if not isinstance(raw, Mapping):
            continue
        content = raw.get("content")
        if not isinstance(content, list):
            continue
        if copy:
            # a replayed copy the reader skipped gets the edits its first copy got
            # (and no other), so whichever copy a reader keeps holds them
            patched = _patch_blocks(
                content,
                {k: v for k, v in uses.items() if ("tool_use", k) in written},
                {k: v for k, v in results.items() if ("tool_result", k) in written},
                set(),
                cleared,
                source,
                lineno + 1,
            )
        else:
            patched = _patch_blocks(content, uses, results, seen, cleared, source, lineno + 1)
        if patched is None:
            continue
        new_content, changed_results = patched
        if not copy:
            written.update(
                _block_key(b) for a, b in zip(content, new_content, strict=True) if a is not b
            )
        new_event = dict(event)
        new_event["message"] = {**raw, "content": new_content}
        n_results = sum(
            1 for b in content if isinstance(b, Mapping) and b.get("type") == "tool_result"
        )
        if changed_results and len(changed_results) == n_results and "toolUseResult" in event:
            new_event["toolUseResult"] = "\n".join(block_text(r) for r in changed_results)
        line = _dump(new_event)
        lines[lineno] = line + "\r" if lines[lineno].endswith("\r") else line
    missing = [i for i in uses if ("tool_use", i) not in seen]
    missing += [i for i in results if ("tool_result", i) not in seen]
    if missing:
        raise FormatError(
            source,
            f"tool id {missing[0]!r} of the transcript is not in the session "
            f"({len(missing)} missing); the transcript was not read from this text, or "
            "was repaired (a repaired session cannot be written back as JSONL)",
        )


def _block_key(block: Mapping[str, Any]) -> tuple[str, str]:
    kind = str(block.get("type"))
    return kind, str(block.get("id") if kind == "tool_use" else block.get("tool_use_id"))


def _patch_blocks(
    content: list[Any],
    uses: Mapping[str, ToolUseBlock],
    results: Mapping[str, ToolResultBlock],
    seen: set[tuple[str, str]],
    cleared: frozenset[str],
    source: str,
    lineno: int,
) -> tuple[list[Any], list[ToolResultBlock]] | None:
    """The event's content with edited blocks written in, and the results that
    changed; ``None`` when nothing changed."""
    new_content: list[Any] | None = None
    changed_results: list[ToolResultBlock] = []
    for i, b in enumerate(content):
        if not isinstance(b, Mapping):
            continue
        kind = b.get("type")
        key = b.get("id") if kind == "tool_use" else b.get("tool_use_id")
        if kind not in ("tool_use", "tool_result") or not isinstance(key, str):
            continue
        new = uses.get(key) if kind == "tool_use" else results.get(key)
        if new is None:
            continue
        if (kind, key) in seen:
            raise FormatError(
                source,
                f"the session holds {kind} {key!r} twice; cannot tell which to rewrite",
                line=lineno,
            )
        seen.add((kind, key))
        try:
            old = _as_sent(decode_block(b, source), cleared)  # as the reader read it
        except FormatError as exc:
            raise FormatError(source, exc.detail, line=lineno) from None
        if _unmarked(old) == _unmarked(new):
            continue
        encoded = encode_block(new)
        block = {k: encoded[k] for k in b if k in encoded}  # the original key order
        block.update(encoded)
        if _unmarked(decode_block(block, source)) != _unmarked(new):
            raise FormatError(
                source, f"the edited {kind} {key!r} cannot be written as its JSON", line=lineno
            )
        if new_content is None:
            new_content = list(content)
        new_content[i] = block
        if isinstance(new, ToolResultBlock):
            changed_results.append(new)
    return None if new_content is None else (new_content, changed_results)


def _dump(event: Mapping[str, Any]) -> str:
    line = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a truncated emoji): keep it escaped
        line = json.dumps(event, ensure_ascii=True, separators=(",", ":"))
    return line


def _unmarked(block: ContentBlock) -> ContentBlock:
    """The block without ctxwise's own ``ctxwise.*`` extra keys."""
    if isinstance(block, ToolUseBlock | ToolResultBlock) and any(
        k.startswith(_MARK_PREFIX) for k in block.extra
    ):
        extra = {k: v for k, v in block.extra.items() if not k.startswith(_MARK_PREFIX)}
        if isinstance(block, ToolUseBlock):
            return ToolUseBlock(block.id, block.name, block.input, extra)
        return ToolResultBlock(block.tool_use_id, block.content, block.is_error, extra)
    return block


def _plain_messages(messages: Iterable[Message]) -> list[Message]:
    return [
        Message(
            m.role,
            tuple(_unmarked(b) for b in m.content),
            m.kind,
            m.plain,
            m.id,
            m.timestamp,
            m.extra,
        )
        for m in messages
    ]


def _check_round_trip(out: str, transcript: Transcript, source: str) -> None:
    back = read_claude_code(out, source=source)
    # a transcript without the session's compaction boundaries is its live window
    if back.compactions and not transcript.compactions:
        back = back.live_window()
    want = _plain_messages(transcript.messages)
    got = _plain_messages(back.messages)
    if want == got:
        return
    at = next((i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b), None)
    where = (
        f"message {at} differs"
        if at is not None
        else f"the session has {len(got)} messages, the transcript {len(want)}"
    )
    raise FormatError(
        source,
        f"the transcript differs from the session beyond its tool blocks ({where}); only "
        "edits of tool_result content and tool_use input can be written back as JSONL",
    )
