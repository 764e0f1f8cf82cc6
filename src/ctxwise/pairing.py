"""Tool pairing: the checks every transcript edit must pass, and their repair.

A tool call and its result travel together: every ``tool_use`` is answered by
exactly one ``tool_result`` with its id, placed where the provider requires it.
Trimming or compaction that separates them produces a transcript the API rejects,
the most repeated bug of context managers. This module owns

- :func:`problems`: every pairing problem of a transcript (orphan results,
  unanswered calls, duplicate ids, misplaced results), checked in each compaction
  segment on its own (:meth:`~ctxwise.messages.Transcript.segments`): the API
  never sees two segments together, so ids may repeat across a boundary;
- :func:`repair_pairing`: the repair (drop orphans, answer unanswered calls with
  an error result, rename reused ids), segment by segment;
- :class:`PairingError`: a transcript refused for its problems.

The data types (:class:`~ctxwise.messages.PairingProblem`,
:class:`~ctxwise.messages.ProblemKind`, :data:`~ctxwise.messages.Placement`) and
the check itself (:meth:`~ctxwise.messages.Transcript.problems`) live with the
message model, so the bottom layer never imports this module; :func:`problems`
runs that check on a transcript or a plain list of messages.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import replace

from ctxwise.errors import PairingError, UsageError
from ctxwise.messages import (
    ContentBlock,
    Message,
    PairingProblem,
    Placement,
    ProblemKind,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    message_problem,
)

__all__ = [
    "MISSING_RESULT_TEXT",
    "PairingError",
    "placement_for",
    "problems",
    "repair_pairing",
]

MISSING_RESULT_TEXT = "[No result was recorded for this tool call.]"
"""The error result :func:`repair_pairing` gives a tool call that nothing answered."""
REPAIRED_MARK = "ctxwise.repaired"
"""``extra`` key on a block the repair renamed or added (never written to a provider)."""

_PLACEMENTS = ("loose", "anthropic", "openai")


def placement_for(transcript: Transcript, placement: Placement | None = None) -> Placement:
    """``placement`` when given, else the rule of the transcript's format: ``openai``
    for OpenAI, ``anthropic`` for Anthropic and Claude Code, ``loose`` otherwise."""
    if placement is not None:
        if placement not in _PLACEMENTS:
            raise UsageError(
                f"placement must be 'loose', 'anthropic' or 'openai', got {placement!r}"
            )
        return placement
    if transcript.format == "openai":
        return "openai"
    if transcript.format in ("anthropic", "claude-code"):
        return "anthropic"
    return "loose"


def refuse_malformed(transcript: Transcript) -> None:
    """Raise :class:`~ctxwise.errors.UsageError` naming the first message that is
    not a well-formed ctxwise :class:`Message` (:func:`~ctxwise.messages.message_problem`:
    a tool input that is not JSON data, an empty id, …), before an edit counts it."""
    for i, m in enumerate(transcript.messages):
        problem = (
            message_problem(m)
            if isinstance(m, Message)
            else f"a {type(m).__name__}, not a ctxwise Message"
        )
        if problem is not None:
            raise UsageError(f"message {i}: {problem}")


def problems(
    transcript: Transcript | Sequence[Message], placement: Placement = "loose"
) -> list[PairingProblem]:
    """Tool pairing problems, in message order (see :meth:`Transcript.problems` for
    the placement rules). A :class:`Transcript` is checked segment by segment; a
    plain sequence of messages is one segment."""
    if not isinstance(transcript, Transcript):
        transcript = Transcript(tuple(transcript))
    return transcript.problems(placement)


def repair_pairing(
    transcript: Transcript, *, placement: Placement | None = None
) -> tuple[Transcript, tuple[PairingProblem, ...]]:
    """The transcript with its tool pairing problems repaired, and the problems it had.

    - a reused tool_use id is renamed ``<id>_2`` (``_3``, … whichever is free),
      and so is the first later result that answers that call;
    - a result that answers no pending call (an orphan, or a second answer) is
      dropped, and a message left with no content is dropped with it;
    - a call nothing answers gets an error result (:data:`MISSING_RESULT_TEXT`),
      placed where ``placement`` wants it: first in the user message right after
      the call (a new user message when the next message is not one), or, for
      ``openai``, a tool message after the run of tool messages that follows it.

    Each compaction segment is repaired on its own, and the boundaries move with
    the messages. ``placement`` defaults to the transcript's format
    (:func:`placement_for`). Problems left after the repair (misplaced results)
    raise :class:`PairingError`.
    """
    rule = placement_for(transcript, placement)
    before = problems(transcript, rule)
    if not before:
        return transcript, ()
    fixed_segments = [_repair_segment(s.messages, rule) for s in transcript.segments()]
    messages: list[Message] = []
    starts: list[int] = []
    for seg in fixed_segments:
        starts.append(len(messages))
        messages.extend(seg)
    compactions = transcript.compactions
    if compactions:
        # each boundary moves to the new start of the segment it opened
        old_starts = transcript.segment_starts()
        moved = dict(zip(old_starts, starts, strict=True))
        compactions = tuple(
            replace(b, index=moved.get(b.index, len(messages) if b.index else 0))
            for b in compactions
        )
    fixed = replace(transcript, messages=tuple(messages), compactions=compactions)
    left = problems(fixed, rule)
    if left:
        raise PairingError(left, rule, transcript.source, repairable=False)
    return fixed, tuple(before)


def _repair_segment(messages: Sequence[Message], rule: Placement) -> list[Message]:
    msgs = _rename_and_drop(messages)
    missing: dict[int, list[str]] = {}
    for p in problems(msgs, "loose"):
        if p.kind is ProblemKind.UNANSWERED_USE:
            missing.setdefault(p.message_index, []).append(p.tool_use_id)
    for at in sorted(missing, reverse=True):
        _answer(msgs, at, missing[at], rule)
    return msgs


def _rename_and_drop(messages: Sequence[Message]) -> list[Message]:
    taken = {
        i
        for m in messages
        for b in m.content
        for i in (
            (b.id,)
            if isinstance(b, ToolUseBlock)
            else (b.tool_use_id,)
            if isinstance(b, ToolResultBlock)
            else ()
        )
    }
    issued: set[str] = set()
    pending: dict[str, deque[str]] = {}
    out: list[Message] = []
    for m in messages:
        blocks: list[ContentBlock] = []
        changed = False
        for b in m.content:
            if isinstance(b, ToolUseBlock):
                original = b.id
                if original in issued:
                    n = 2
                    while f"{original}_{n}" in taken:
                        n += 1
                    taken.add(f"{original}_{n}")
                    b = replace(
                        b, id=f"{original}_{n}", extra={**b.extra, REPAIRED_MARK: "renamed"}
                    )
                    changed = True
                issued.add(original)
                pending.setdefault(original, deque()).append(b.id)
                blocks.append(b)
            elif isinstance(b, ToolResultBlock):
                queue = pending.get(b.tool_use_id)
                if not queue:
                    changed = True  # an orphan, or a second answer: dropped
                    continue
                new_id = queue.popleft()
                if new_id != b.tool_use_id:
                    b = replace(b, tool_use_id=new_id, extra={**b.extra, REPAIRED_MARK: "renamed"})
                    changed = True
                blocks.append(b)
            else:
                blocks.append(b)
        if changed and not blocks:
            continue
        out.append(replace(m, content=tuple(blocks)) if changed else m)
    return out


def _answer(msgs: list[Message], at: int, ids: list[str], rule: Placement) -> None:
    # Chat Completions tool messages have no is_error: the text says it
    is_error = None if rule == "openai" else True
    results = tuple(
        ToolResultBlock(i, MISSING_RESULT_TEXT, is_error, {REPAIRED_MARK: "missing_result"})
        for i in ids
    )
    if rule == "openai":
        j = at + 1
        while (
            j < len(msgs)
            and msgs[j].role == "user"
            and msgs[j].content
            and all(isinstance(b, ToolResultBlock) for b in msgs[j].content)
        ):
            j += 1
        for k, r in enumerate(results):
            msgs.insert(j + k, Message("user", (r,), extra={"openai._role": "tool"}))
        return
    nxt = msgs[at + 1] if at + 1 < len(msgs) else None
    if nxt is not None and nxt.role == "user" and nxt.kind == "message":
        lead = 0
        while lead < len(nxt.content) and isinstance(nxt.content[lead], ToolResultBlock):
            lead += 1
        content = nxt.content[:lead] + results + nxt.content[lead:]
        msgs[at + 1] = replace(nxt, content=content, plain=False)
    else:
        msgs.insert(at + 1, Message("user", results))
