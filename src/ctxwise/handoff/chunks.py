"""A transcript cut into chunks a subagent can be handed verbatim.

:func:`chunk_transcript` makes one chunk of each of:

- a user message's own text (its tool results belong to their calls);
- an assistant reply's text (thinking is left out: it is the model's scratch work,
  not something it told anyone);
- a tool call together with its result: ``name {input as JSON}`` then ``→`` and
  the result's text, so a chunk never holds a call without what came back (images
  and documents are not carried: a result of only those reads ``(no text: 1
  image)``, not ``(no output)``);
- a compact summary a source recorded (Claude Code's ``isCompactSummary``).

System messages are not chunks: the subagent has its own. A chunk longer than
``max_chunk_tokens`` is split on paragraph boundaries (then lines, then within a
line), and every part names the chunk it came from (:attr:`Chunk.origin`,
:attr:`Chunk.part`). Every chunk keeps the positions of the messages it came from
and the first one's timestamp. The text of a chunk is the transcript's own text,
never rewritten.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias

from ctxwise.errors import UsageError
from ctxwise.messages import (
    MediaBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    block_text,
)
from ctxwise.tokens import TokenCounter

__all__ = ["DEFAULT_MAX_CHUNK_TOKENS", "Chunk", "ChunkKind", "chunk_transcript"]

DEFAULT_MAX_CHUNK_TOKENS = 2_000
"""Chunks longer than this are split into parts."""

ChunkKind: TypeAlias = Literal["user", "assistant", "tool", "summary"]


@dataclass(frozen=True, slots=True)
class Chunk:
    """One piece of a transcript. ``id`` is ``c{n}`` (``c{n}.{i}`` for part ``i``
    of a split chunk, whose ``origin`` is ``c{n}``); ``positions`` are the indexes
    of the transcript messages it came from; ``tool`` and ``tool_use_id`` name the
    tool and the call of a tool chunk; ``message_ids`` are the source messages' ids."""

    id: str
    kind: ChunkKind
    text: str
    positions: tuple[int, ...]
    tokens: int
    timestamp: str | None = None
    tool: str | None = None
    origin: str | None = None
    part: tuple[int, int] | None = None
    message_ids: tuple[str, ...] = field(default=(), compare=False)
    tool_use_id: str | None = None
    call: str | None = None
    """For a later part of a split tool chunk: the call its first part opens with
    (name and input, cut to ``CALL_CHARS``), so the part says what it is the output of."""

    @property
    def position(self) -> int:
        """Where the chunk starts in the transcript."""
        return self.positions[0]

    def header(self) -> str:
        """The line a handoff writes above the chunk: id, kind, where, when."""
        what = self.kind if self.tool is None else f"tool {self.tool}"
        where = f"message {self.position + 1}"
        part = "" if self.part is None else f", part {self.part[0]} of {self.part[1]}"
        of = "" if self.call is None else f" · of {self.call}"
        when = "" if self.timestamp is None else f" · {self.timestamp}"
        return f"[{self.id} · {what} · {where}{part}{of}{when}]"


def _own_text(message: Message) -> str:
    return "\n".join(b.text for b in message.content if isinstance(b, TextBlock)).strip()


def _media_only(result: ToolResultBlock) -> str:
    """What stands for a result without text that holds images or documents (a
    screenshot): they are not carried, but the call did return something."""
    if isinstance(result.content, str):
        return ""
    kinds = [b.media for b in result.content if isinstance(b, MediaBlock)]
    counts = {k: kinds.count(k) for k in dict.fromkeys(kinds)}
    shown = ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in counts.items())
    return f"(no text: {shown})" if shown else ""


CALL_CHARS = 60
"""How much of a call a later part's header shows."""


def _short(call: str) -> str:
    """A call's first line, cut to ``CALL_CHARS`` characters in its middle (``…``):
    the tool's name opens it and a path's file name ends it."""
    line = call.split("\n", 1)[0].strip()
    if len(line) <= CALL_CHARS:
        return line
    head = (CALL_CHARS - 1) * 2 // 5
    return line[:head] + "…" + line[len(line) - (CALL_CHARS - 1 - head) :]


def _call_text(name: str, tool_input: object) -> str:
    try:
        shown = json.dumps(tool_input, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        shown = str(tool_input)
    return f"{name} {shown}"


def chunk_transcript(
    transcript: Transcript | Sequence[Message],
    counter: TokenCounter,
    *,
    max_chunk_tokens: int = DEFAULT_MAX_CHUNK_TOKENS,
) -> list[Chunk]:
    """The chunks of ``transcript`` in the order they start (module docstring)."""
    if isinstance(max_chunk_tokens, bool) or not isinstance(max_chunk_tokens, int):
        raise UsageError(f"max_chunk_tokens must be an integer, got {max_chunk_tokens!r}")
    if max_chunk_tokens < 16:
        raise UsageError(f"max_chunk_tokens must be at least 16, got {max_chunk_tokens}")
    messages = transcript.messages if isinstance(transcript, Transcript) else tuple(transcript)
    drafts: list[_Draft] = []
    calls: dict[str, _Draft] = {}

    def add(
        kind: ChunkKind, text: str, pos: int, m: Message, use: ToolUseBlock | None = None
    ) -> _Draft:
        draft = _Draft(
            kind,
            [text],
            [pos],
            m.timestamp,
            None if use is None else use.name,
            None if use is None else use.id,
            [] if m.id is None else [m.id],
        )
        drafts.append(draft)
        return draft

    for pos, m in enumerate(messages):
        if m.role == "system":
            continue
        if m.kind == "compact_summary":
            if m.text.strip():
                add("summary", m.text.strip(), pos, m)
            continue
        if m.role == "assistant":
            if _own_text(m):
                add("assistant", _own_text(m), pos, m)
            for use in m.tool_uses:
                calls[use.id] = add("tool", _call_text(use.name, use.input), pos, m, use)
            continue
        for result in m.tool_results:
            text = block_text(result).strip() or _media_only(result)
            shown = f"→ error: {text}" if result.is_error else f"→ {text or '(no output)'}"
            call = calls.get(result.tool_use_id)
            if call is None:  # a result whose call is not in the transcript
                add("tool", shown, pos, m)
                continue
            call.texts.append(shown)
            if pos not in call.positions:
                call.positions.append(pos)
            if m.id is not None:
                call.message_ids.append(m.id)
        if _own_text(m):
            add("user", _own_text(m), pos, m)
    # sort() is stable: chunks starting at one message keep the order they were made
    drafts.sort(key=lambda d: d.positions[0])
    out: list[Chunk] = []
    for n, d in enumerate(drafts, 1):
        text = "\n".join(d.texts)
        chunk = Chunk(
            f"c{n}",
            d.kind,
            text,
            tuple(d.positions),
            counter.count(text),
            d.timestamp,
            d.tool,
            message_ids=tuple(d.message_ids),
            tool_use_id=d.tool_use_id,
        )
        if chunk.tokens <= max_chunk_tokens:
            out.append(chunk)
            continue
        parts = _split(text, max_chunk_tokens, counter)
        opens = _short(d.texts[0]) if d.kind == "tool" and d.tool is not None else None
        for i, part in enumerate(parts, 1):
            out.append(
                replace(
                    chunk,
                    id=f"{chunk.id}.{i}",
                    text=part,
                    tokens=counter.count(part),
                    origin=chunk.id,
                    part=(i, len(parts)),
                    call=opens if i > 1 else None,
                )
            )
    return out


@dataclass(slots=True)
class _Draft:
    kind: ChunkKind
    texts: list[str]
    positions: list[int]
    timestamp: str | None
    tool: str | None
    tool_use_id: str | None
    message_ids: list[str]


def _split(text: str, limit: int, counter: TokenCounter) -> list[str]:
    """``text`` in pieces of at most ``limit`` tokens, cut between paragraphs where
    it can, then between lines, then inside a line."""
    for sep in ("\n\n", "\n"):
        pieces = text.split(sep)
        if len(pieces) > 1:
            out: list[str] = []
            current = ""
            for piece in pieces:
                joined = piece if not current else current + sep + piece
                if counter.count(joined) <= limit:
                    current = joined
                    continue
                if current:
                    out.append(current)
                if counter.count(piece) <= limit:
                    current = piece
                else:
                    out.extend(_split(piece, limit, counter))
                    current = ""
            if current:
                out.append(current)
            return [p for p in out if p.strip()]
    return _cut(text, limit, counter)


def _cut(text: str, limit: int, counter: TokenCounter) -> list[str]:
    """A line too long for one part: the longest prefixes that fit, in turn."""
    out = []
    rest = text
    while rest:
        if counter.count(rest) <= limit:
            out.append(rest)
            break
        lo, hi = 1, len(rest)
        while lo < hi:  # the longest prefix within the limit
            mid = (lo + hi + 1) // 2
            if counter.count(rest[:mid]) <= limit:
                lo = mid
            else:
                hi = mid - 1
        cut = rest.rfind(" ", 0, lo)
        cut = lo if cut <= 0 else cut
        out.append(rest[:cut])
        rest = rest[cut:]
    return out
