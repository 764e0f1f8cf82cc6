"""The event graph of a Claude Code session file: event types, the live branch
(the chain of parent links from the leaf the session resumes), compaction boundaries
and microcompaction (see :mod:`ctxwise.formats.claude_code`, which reads and patches
files with it)."""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxwise.messages import (
    ContentBlock,
    ToolResultBlock,
)

__all__: list[str] = []


_MICROCOMPACT_CLEARED = "[Old tool result content cleared]"
"""What Claude Code sends in place of a tool result its microcompaction cleared."""


def _event_type(event: Mapping[str, Any]) -> str | None:
    """An event's ``type``; ``None`` when it has none or one that is not a string
    (an object or a list: such an event is read as one without a type, skipped)."""
    etype = event.get("type")
    return etype if isinstance(etype, str) else None


def _is_boundary(event: Mapping[str, Any]) -> bool:
    return event.get("type") == "system" and event.get("subtype") == "compact_boundary"


def _is_local_command(event: Mapping[str, Any]) -> bool:
    return event.get("type") == "system" and event.get("subtype") == "local_command"


_CHAIN_TYPES = frozenset({"user", "assistant", "system", "attachment"})
"""The events Claude Code keeps in its tree of entries (``isTranscriptMessage``)."""

_BROKEN = "\x00broken"
"""The parent of an entry whose link is not a uuid (it names no entry)."""


@dataclass(frozen=True, slots=True)
class _Branch:
    """The conversation the model has, in a session file that is a tree."""

    live: frozenset[int]
    """Positions (in the event sequence walked) of the entries on it, replayed
    copies included; events of other kinds (progress, snapshots) are not listed."""
    leaf: str | None
    """The ``uuid`` of its last entry (``None`` when that entry has none)."""
    unresolved: int
    """Links that named no entry of the file (the walk went on in file order)."""


def _has_tool_result(event: Mapping[str, Any]) -> bool:
    raw = event.get("message")
    content = raw.get("content") if isinstance(raw, Mapping) else None
    return isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content
    )


def _live_branch(events: Sequence[Mapping[str, Any]], has_main: bool) -> _Branch | None:
    """The entries on the branch from the session's leaf back to its root (the
    rules are in the module docstring); ``None`` for a file without uuids, which
    is read in file order."""
    if not any(isinstance(e.get("uuid"), str) for e in events):
        return None
    bridge: dict[str, str | None] = {}  # a legacy progress entry -> the parent it stands for
    keys: list[str] = []  # the entries, in the order of their first line
    order: dict[str, int] = {}  # entry -> its index in keys
    parent: dict[str, str | None] = {}
    first: dict[str, Mapping[str, Any]] = {}  # entry -> its first event
    at: dict[int, str] = {}  # position -> entry
    previous: str | None = None

    def bridged(link: Any) -> str | None:
        if link is None:
            return None
        if not isinstance(link, str):
            return _BROKEN
        return bridge.get(link, link)

    for i, e in enumerate(events):
        etype, uid = _event_type(e), e.get("uuid")
        if etype == "progress" and isinstance(uid, str):
            bridge[uid] = bridged(e.get("parentUuid"))
            continue
        if etype not in _CHAIN_TYPES or (has_main and e.get("isSidechain")):
            continue
        key = uid if isinstance(uid, str) else f"\x00line {i}"
        at[i] = key
        if key not in parent:  # a replayed copy keeps its first event's place and link
            if "parentUuid" not in e:
                link = previous
            elif e["parentUuid"] is None and _is_boundary(e):
                link = bridged(e.get("logicalParentUuid"))
            else:
                link = bridged(e["parentUuid"])
            parent[key], order[key], first[key] = link, len(keys), e
            keys.append(key)
        previous = key
    if not keys:
        return None
    on: set[str] = set()
    # below[j] leads down to the closest entry at or before index j not on the chain
    # (j itself when it is not; path-halved as it is followed, so the walk stays
    # linear however the links jump: a scan over the entries already on it made a
    # crafted file of 8,000 entries take seconds)
    below = list(range(len(keys)))

    def free_at_or_before(j: int) -> int:
        while j >= 0 and below[j] != j:
            below[j] = below[below[j]] if below[j] >= 0 else -1
            j = below[j]
        return j

    unresolved = 0
    current: str | None = keys[-1]
    while current is not None and current not in on:  # a loop ends the walk
        on.add(current)
        below[order[current]] = order[current] - 1
        link = parent[current]
        if link is None or link in parent:
            current = link
            continue
        unresolved += 1  # a link to no entry: go on at the closest earlier entry
        j = free_at_or_before(order[current] - 1)
        current = keys[j] if j >= 0 else None
    # the parallel calls of a response on the chain, and the results answering them
    responses = {
        _text(first[k]["message"].get("id"))
        for k in on
        if first[k].get("type") == "assistant" and isinstance(first[k].get("message"), Mapping)
    } - {None}
    for k in keys:
        e = first[k]
        raw = e.get("message")
        if (
            k not in on
            and e.get("type") == "assistant"
            and isinstance(raw, Mapping)
            and _text(raw.get("id")) in responses
        ):
            on.add(k)
    for k in keys:  # in file order, so an entry attached to an added one follows it
        link = parent[k]
        if k in on or link not in on or link is None:
            continue
        answers = first[k].get("type") == "user" and first[link].get("type") == "assistant"
        if (answers and _has_tool_result(first[k])) or k.startswith("\x00"):
            on.add(k)
    leaf = keys[-1]
    return _Branch(
        frozenset(i for i, k in at.items() if k in on),
        None if leaf.startswith("\x00") else leaf,
        unresolved,
    )


def _microcompacted_ids(events: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The tool ids the ``microcompact_boundary`` events among ``events`` cleared."""
    ids: set[str] = set()
    for e in events:
        if e.get("type") != "system" or e.get("subtype") != "microcompact_boundary":
            continue
        meta = e.get("microcompactMetadata")
        listed = meta.get("compactedToolIds") if isinstance(meta, Mapping) else None
        if isinstance(listed, list):
            ids.update(i for i in listed if isinstance(i, str))
    return frozenset(ids)


def _as_sent(block: ContentBlock, cleared: frozenset[str]) -> ContentBlock:
    """A tool result as Claude Code sends it: cleared when a microcompaction named it."""
    if isinstance(block, ToolResultBlock) and block.tool_use_id in cleared:
        return ToolResultBlock(
            block.tool_use_id, _MICROCOMPACT_CLEARED, block.is_error, block.extra
        )
    return block


def _segments(events: Sequence[tuple[int, Mapping[str, Any]]]) -> list[frozenset[str]]:
    """For each event, the tool ids microcompacted in its compaction segment."""
    out: list[frozenset[str]] = []
    segment: list[Mapping[str, Any]] = []

    def close() -> None:
        out.extend([_microcompacted_ids(segment)] * len(segment))
        segment.clear()

    for _, e in events:
        if _is_boundary(e):
            close()
            out.append(frozenset())
        else:
            segment.append(e)
    close()
    return out


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
