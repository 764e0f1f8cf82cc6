"""Write a compaction back into a Claude Code session file, the way Claude Code does
(reached through :func:`ctxwise.compaction.write_back_compaction`).

Claude Code never rewrites a session log: when it compacts, it appends a
``system`` event with ``subtype: "compact_boundary"`` (``parentUuid: null``,
``logicalParentUuid`` pointing at the last event before it), then a ``user``
event with ``isCompactSummary: true`` holding the summary, and the conversation
continues from there. :func:`compacted_claude_code` does the same with a
:class:`~ctxwise.compaction.Compaction` of the session:

1. every original line, byte-identical (the history stays in the file);
2. a ``compact_boundary`` event: trigger ``"manual"``, ``preTokens`` = the
   compaction's ``tokens_before``, ``logicalParentUuid`` = the uuid of the last
   event, ``timestamp`` = the last event's timestamp (no wall clock), and the
   session fields (``sessionId``, ``cwd``, ``version``, ``gitBranch``,
   ``userType``, ``slug``) of the last event that has each;
3. a ``user`` event with ``isCompactSummary: true`` whose content is a list of
   text blocks: the pinned block (case facts and rules, when there are any;
   Claude Code files have no system part, so it leads the summary message as its
   own block) and then the summary text;
4. the verbatim tail: copies of the original ``user``/``assistant`` events from
   the one that holds the tail's first message onward (progress, snapshot and
   other bookkeeping events, old compaction boundaries, sidechain events and
   replayed copies of an event, which the reader reads once, stay out), each
   with a new deterministic uuid (:func:`uuid.uuid5` of the archive id
   or a sha256 of the summary, plus its position) and ``parentUuid`` re-linked
   into one chain that starts at the summary event.

Reading the result with :func:`~ctxwise.formats.claude_code.read_claude_code`
gives a transcript whose last compaction is the new boundary and whose live
window is the summary message followed by the tail messages, block for block.
That is checked on every call: when copies of the original events would not read
back as the tail (a tail repaired with ``repair=True``, events without uuids),
the tail is written as one event per message from the compacted transcript
instead (block extras that only ctxwise reads, such as the repair mark on an
added error result, are not written). A compaction that compacted nothing leaves the file as it was.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ctxwise._io import parse_json
from ctxwise.compaction.pinned import PINNED_KEY
from ctxwise.compaction.result import Compaction
from ctxwise.errors import ClaudeCodeWriteError
from ctxwise.formats.anthropic import decode_block, encode_block
from ctxwise.formats.claude_code import (
    _CHAIN_TYPES,
    PINNED_EVENT_KEY,
    _event_type,
    _is_local_command,
    _live_branch,
    read_claude_code_lines,
)
from ctxwise.messages import ContentBlock, Message, TextBlock

__all__ = ["ClaudeCodeWriteError", "compacted_claude_code"]

_SESSION_KEYS = ("userType", "cwd", "sessionId", "version", "gitBranch", "slug")
_LINK_KEYS = ("parentUuid", "logicalParentUuid", "sourceToolAssistantUUID")
_SURROGATE = re.compile("[\ud800-\udfff]")
_NAMESPACE = uuid.uuid5(
    uuid.NAMESPACE_URL, "https://github.com/ctxwise/ctxwise#claude-code-compact"
)


def _dump(event: Mapping[str, Any]) -> str:
    """One JSONL line, compact like Claude Code's, lone surrogates escaped (valid UTF-8)."""
    text = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _content(blocks: Sequence[ContentBlock], plain: bool) -> Any:
    if plain and len(blocks) == 1 and isinstance(blocks[0], TextBlock) and not blocks[0].extra:
        return blocks[0].text
    return [encode_block(b) for b in blocks]


def _written(blocks: Sequence[ContentBlock]) -> tuple[ContentBlock, ...]:
    """The blocks as JSON holds them (extras of other codecs, such as a repair mark, go)."""
    return tuple(decode_block(encode_block(b)) for b in blocks)


def _same(read: Sequence[Message], expected: Sequence[Message]) -> bool:
    return len(read) == len(expected) and all(
        x.role == y.role and x.kind == y.kind and x.content in (y.content, _written(y.content))
        for x, y in zip(read, expected, strict=True)
    )


def compacted_claude_code(text: str, result: Compaction, *, source: str = "claude-code") -> str:
    """The session file ``text`` with ``result`` appended as Claude Code records a compaction.

    ``result`` must be a compaction of ``read_claude_code(text)`` (``cut_index``
    and the tail refer to its messages). The original text is a prefix of the
    output, byte for byte (a missing final newline is added). When nothing was
    compacted, ``text`` is returned unchanged, unless pairing problems were
    repaired: an unchanged file would still hold them, so that raises
    :class:`ClaudeCodeWriteError`.
    """
    if not result.compacted:
        if result.repaired:
            raise ClaudeCodeWriteError(
                source,
                "nothing was compacted, so the repaired pairing problems cannot be written "
                "(keep a smaller tail to compact, or repair the session another way)",
                result.repaired,
            )
        return text
    messages = result.transcript.messages
    # the first conversation message carries the summary (or, when the budget held
    # only the task, the latest user message as it was)
    at = next((i for i, m in enumerate(messages) if m.role != "system"), None)
    if at is None or messages[at].role != "user":
        raise ClaudeCodeWriteError(source, "the compacted transcript has no summary message")
    pinned = [b for m in messages[:at] for b in m.content]
    summary_blocks = (*pinned, *messages[at].content)
    tail = messages[at + 1 :]
    pinned_data = next(
        (b.extra[PINNED_KEY] for b in pinned if isinstance(b, TextBlock) and PINNED_KEY in b.extra),
        None,
    )

    events: list[Mapping[str, Any]] = []
    for line in text.split("\n"):
        if line.strip():
            event = parse_json(line)
            if isinstance(event, Mapping):
                events.append(event)
    has_main = any(
        e.get("type") in ("user", "assistant") and not e.get("isSidechain") for e in events
    )
    # the conversation the model has (the reader reads no other branch of the tree)
    branch = _live_branch(events, has_main)
    if branch is not None:
        events = [
            e
            for i, e in enumerate(events)
            if i in branch.live or _event_type(e) not in _CHAIN_TYPES
        ]
    # the window that was compacted: the events after the last compaction boundary
    last_boundary = max(
        (
            i
            for i, e in enumerate(events)
            if e.get("type") == "system" and e.get("subtype") == "compact_boundary"
        ),
        default=-1,
    )
    convo = [
        e
        for e in events[last_boundary + 1 :]
        if (e.get("type") in ("user", "assistant") or _is_local_command(e))
        and not (has_main and e.get("isSidechain"))
    ]
    # a replayed copy of an event (same uuid) is read once: the tail copies it once
    firsts: set[str] = set()
    unique: list[Mapping[str, Any]] = []
    for e in convo:
        uid = e.get("uuid")
        if isinstance(uid, str):
            if uid in firsts:
                continue
            firsts.add(uid)
        unique.append(e)
    convo = unique
    # the boundary follows the conversation's leaf (the last entry of its branch)
    last_uuid = (
        branch.leaf
        if branch is not None and branch.leaf is not None
        else next((e["uuid"] for e in reversed(events) if isinstance(e.get("uuid"), str)), None)
    )
    timestamp = next(
        (e["timestamp"] for e in reversed(events) if isinstance(e.get("timestamp"), str)), None
    )
    common: dict[str, Any] = {}
    for key in _SESSION_KEYS:
        value = next((e[key] for e in reversed(events) if key in e), None)
        if value is not None:
            common[key] = value
    agent = next((e["agentId"] for e in reversed(convo) if "agentId" in e), None)
    if not has_main and agent is not None:
        common["agentId"] = agent

    seed = (
        result.archive_id
        or hashlib.sha256(
            f"{last_uuid}\x00{result.summary}".encode("utf-8", "surrogatepass")
        ).hexdigest()
    )

    def new_uuid(i: int) -> str:
        return str(uuid.uuid5(_NAMESPACE, f"{seed}:{i}"))

    boundary_uuid, summary_uuid = new_uuid(0), new_uuid(1)
    stamp = {"timestamp": timestamp} if timestamp is not None else {}
    boundary: dict[str, Any] = {
        "parentUuid": None,
        "logicalParentUuid": last_uuid,
        "isSidechain": not has_main,
        **common,
        "type": "system",
        "subtype": "compact_boundary",
        "content": "Conversation compacted",
        "isMeta": False,
        **stamp,
        "uuid": boundary_uuid,
        "level": "info",
        "compactMetadata": {"trigger": "manual", "preTokens": result.tokens_before},
    }
    summary_event: dict[str, Any] = {
        "parentUuid": boundary_uuid,
        "isSidechain": not has_main,
        **common,
        "type": "user",
        "message": {"role": "user", "content": _content(summary_blocks, False)},
        "isVisibleInTranscriptOnly": True,
        "isCompactSummary": True,
        "uuid": summary_uuid,
        **stamp,
    }
    if isinstance(pinned_data, Mapping):
        summary_event[PINNED_EVENT_KEY] = pinned_data
    expected = [Message("user", summary_blocks, kind="compact_summary"), *tail]

    def chain(raw: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        renamed: dict[str, str] = {}
        out: list[dict[str, Any]] = []
        parent = summary_uuid
        for i, e in enumerate(raw):
            new = new_uuid(i + 2)
            if isinstance(e.get("uuid"), str):
                renamed[e["uuid"]] = new
            copy = dict(e)
            for key in _LINK_KEYS:
                if isinstance(copy.get(key), str) and copy[key] in renamed:
                    copy[key] = renamed[copy[key]]
            copy["parentUuid"] = parent
            copy["uuid"] = new
            out.append(copy)
            parent = new
        return out

    first = tail[0].id if tail else None
    if tail and tail[0].role == "assistant":  # a cut inside a turn: the message id
        starts = [
            i
            for i, e in enumerate(convo)
            if e.get("type") == "assistant"
            and isinstance(e.get("message"), Mapping)
            and e["message"].get("id") == first
        ][:1]
    else:
        starts = [
            i
            for i, e in enumerate(convo)
            if e.get("type") != "assistant" and e.get("uuid") == first
        ]
    appended = chain(convo[starts[0] :]) if first is not None and len(starts) == 1 else None
    if appended is None or not _reads_back(appended, summary_event, expected, source):
        appended = chain([_synthesized(m, common, has_main, timestamp) for m in tail])
        if not _reads_back(appended, summary_event, expected, source):
            raise ClaudeCodeWriteError(source, "the tail does not read back as it was compacted")
    lines = [_dump(boundary), _dump(summary_event), *(_dump(e) for e in appended)]
    head = text if not text or text.endswith("\n") else text + "\n"
    return head + "\n".join(lines) + "\n"


def _reads_back(
    appended: Sequence[Mapping[str, Any]],
    summary_event: Mapping[str, Any],
    expected: Sequence[Message],
    source: str,
) -> bool:
    lines = [_dump(summary_event), *(_dump(e) for e in appended)]
    t, _ = read_claude_code_lines(lines, source=source)
    return _same(t.messages, expected)


def _synthesized(
    msg: Message, common: Mapping[str, Any], has_main: bool, timestamp: str | None
) -> dict[str, Any]:
    """One event for a message that no original event holds as it is (a repaired tail)."""
    body: dict[str, Any] = {"role": msg.role, "content": _content(msg.content, msg.plain)}
    if msg.role == "assistant" and msg.id is not None:
        body["id"] = msg.id
    event: dict[str, Any] = {
        "parentUuid": None,
        "isSidechain": not has_main,
        **common,
        "type": msg.role,
        "message": body,
    }
    if msg.kind == "compact_summary":
        event["isCompactSummary"] = True
    ts = msg.timestamp or timestamp
    if ts is not None:
        event["timestamp"] = ts
    return event
