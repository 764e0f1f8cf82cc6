"""A neutral model of chat messages, content blocks and transcripts.

Provider codecs (:mod:`ctxwise.formats`) translate to and from this model. It
follows the Anthropic shape (tool results are blocks inside a ``user`` message)
because that shape can express every OpenAI Chat Completions message too.

Every block and message has an ``extra`` mapping: keys a codec read but the
neutral model has no field for (``cache_control``, ``citations``, a tool call's
raw argument string, …). Only the codec that wrote them reads them back; they
exist so a round trip through ctxwise loses nothing.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Literal, TypeAlias

from ctxwise.errors import UsageError

__all__ = [
    "CompactBoundary",
    "ContentBlock",
    "MediaBlock",
    "Message",
    "MessageKind",
    "OpaqueBlock",
    "PairingProblem",
    "Placement",
    "ProblemKind",
    "Role",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "Transcript",
    "block_text",
    "check_messages",
    "message_problem",
]

Role: TypeAlias = Literal["system", "user", "assistant"]
MessageKind: TypeAlias = Literal["message", "compact_summary"]

_EMPTY: Mapping[str, Any] = {}


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Plain text."""

    text: str
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    """The model asks for a tool call."""

    id: str
    name: str
    input: Mapping[str, Any]
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    """The result of a tool call, answering the ``ToolUseBlock`` with ``tool_use_id``.

    ``content`` is a string or a tuple of blocks (text, images), as providers allow.
    ``is_error`` is ``None`` when the source did not say.
    """

    tool_use_id: str
    content: str | tuple[ContentBlock, ...] = ""
    is_error: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """Extended thinking. ``redacted`` blocks carry opaque ``thinking`` data."""

    thinking: str
    signature: str | None = None
    redacted: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MediaBlock:
    """A reference to an image or a document (base64, URL or file id in ``source``)."""

    media: Literal["image", "document"]
    source: Mapping[str, Any]
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OpaqueBlock:
    """A block type ctxwise does not model (server tools, search results, …), kept as is."""

    type: str
    data: Mapping[str, Any]


ContentBlock: TypeAlias = (
    TextBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | MediaBlock | OpaqueBlock
)


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation.

    ``plain`` records that the source gave the content as a bare string rather
    than a list of blocks, so codecs can write it back the same way.
    ``kind`` marks a compaction summary (a user message that replaces history).
    """

    role: Role
    content: tuple[ContentBlock, ...]
    kind: MessageKind = "message"
    plain: bool = False
    id: str | None = None
    timestamp: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def text_message(cls, role: Role, text: str) -> Message:
        """A message holding one text block, written as a plain string."""
        return cls(role=role, content=(TextBlock(text),), plain=True)

    @property
    def text(self) -> str:
        """The concatenated text blocks (no tool payloads, no thinking)."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolUseBlock))

    @property
    def tool_results(self) -> tuple[ToolResultBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolResultBlock))


@dataclass(frozen=True, slots=True)
class CompactBoundary:
    """Where a compaction cut the conversation: messages before ``index`` were summarized."""

    index: int
    trigger: str | None = None
    pre_tokens: int | None = None
    timestamp: str | None = None


class ProblemKind(StrEnum):
    ORPHAN_RESULT = "orphan_result"
    """A tool_result whose tool_use_id no earlier tool_use issued."""
    UNANSWERED_USE = "unanswered_use"
    """A tool_use that no tool_result answers."""
    DUPLICATE_ID = "duplicate_id"
    """A tool_use id issued twice, or a tool_use answered twice."""
    MISPLACED_RESULT = "misplaced_result"
    """A tool_result that is not where the provider requires it."""


@dataclass(frozen=True, slots=True)
class PairingProblem:
    kind: ProblemKind
    tool_use_id: str
    message_index: int
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "tool_use_id": self.tool_use_id,
            "message_index": self.message_index,
            "detail": self.detail,
        }


Placement: TypeAlias = Literal["loose", "anthropic", "openai"]


@dataclass(frozen=True, slots=True)
class Transcript:
    """An ordered conversation plus what a codec needs to write it back.

    ``params`` holds request-level fields other than the messages (model,
    max_tokens, tools, …) in the shape of ``format``, the format the transcript
    was read from (other codecs ignore them). ``compactions`` lists the compaction boundaries a
    source recorded (Claude Code's ``compact_boundary`` events).
    """

    messages: tuple[Message, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    compactions: tuple[CompactBoundary, ...] = ()
    source: str | None = None
    format: str | None = None

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def live_window(self) -> Transcript:
        """The messages after the last compaction: what the model saw at the end."""
        if not self.compactions:
            return self
        start = self.compactions[-1].index
        return Transcript(self.messages[start:], self.params, (), self.source, self.format)

    def segments(self) -> tuple[Transcript, ...]:
        """The transcript cut at its compaction boundaries: one window per segment.

        A segment is what the model saw between two compactions; the API never sees
        two segments at once, so tool ids may repeat across a boundary (a
        compaction that keeps a verbatim tail copies its tool calls). A transcript
        without boundaries is one segment. An empty segment (a boundary at index 0,
        or two boundaries in a row) is left out.
        """
        cuts = sorted({b.index for b in self.compactions if 0 < b.index < len(self.messages)})
        if not cuts:
            return (Transcript(self.messages, self.params, (), self.source, self.format),)
        bounds = [0, *cuts, len(self.messages)]
        return tuple(
            Transcript(self.messages[a:b], self.params, (), self.source, self.format)
            for a, b in itertools.pairwise(bounds)
            if b > a
        )

    def segment_starts(self) -> tuple[int, ...]:
        """The index of each segment's first message (see :meth:`segments`)."""
        cuts = sorted({b.index for b in self.compactions if 0 < b.index < len(self.messages)})
        return (0, *cuts) if self.messages else ()

    def tool_names(self) -> dict[str, str]:
        """tool_use id → tool name, for every tool_use in the transcript."""
        return {
            b.id: b.name for m in self.messages for b in m.content if isinstance(b, ToolUseBlock)
        }

    def problems(self, placement: Placement = "loose") -> list[PairingProblem]:
        """Tool pairing problems, in message order, checked in each segment on its own
        (:meth:`segments`; message indices are this transcript's).

        Always reported: orphan results, unanswered uses, duplicate ids.
        Placement rules for ``MISPLACED_RESULT``:

        - ``loose``: a result must come after its call and before the next
          assistant message (the rule every provider shares);
        - ``anthropic``: every result for an assistant message must be in the very
          next message, a ``user`` message, with tool_result blocks before any other;
        - ``openai``: results must be in the run of tool-result-only messages that
          directly follows the assistant message (``role: "tool"`` messages).
        """
        if not self.compactions:
            return _pairing_problems(self.messages, placement)
        out: list[PairingProblem] = []
        for start, segment in zip(self.segment_starts(), self.segments(), strict=True):
            out.extend(
                replace(p, message_index=p.message_index + start)
                for p in _pairing_problems(segment.messages, placement)
            )
        return out


_ROLES = ("system", "user", "assistant")


def _json_problem(value: Any) -> str | None:
    """Why ``value`` is not JSON data (``None`` when it is)."""
    try:
        json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as e:
        return str(e)
    return None


def _block_problem(block: Any, where: str) -> str | None:
    """What is wrong with one content block, or ``None``. (The dataclasses check
    nothing, so every field is read as ``Any``.)"""
    b: Any = block
    if isinstance(block, TextBlock):
        if not isinstance(b.text, str):
            return f"{where} is a TextBlock whose text is a {type(b.text).__name__}, not a str"
    elif isinstance(block, ToolUseBlock):
        if not isinstance(b.id, str) or not b.id:
            return f"{where} is a ToolUseBlock with an empty or non-string id ({b.id!r})"
        if not isinstance(b.name, str) or not b.name:
            return f"{where} is a ToolUseBlock with an empty or non-string name ({b.name!r})"
        if not isinstance(b.input, Mapping):
            return (
                f"{where} is a ToolUseBlock whose input is a {type(b.input).__name__}, "
                "not a mapping (use {} for no arguments)"
            )
        problem = _json_problem(dict(b.input))
        if problem is not None:
            return f"{where} is a ToolUseBlock whose input is not JSON data: {problem}"
    elif isinstance(block, ToolResultBlock):
        if not isinstance(b.tool_use_id, str) or not b.tool_use_id:
            return (
                f"{where} is a ToolResultBlock with an empty or non-string tool_use_id "
                f"({b.tool_use_id!r})"
            )
        if b.is_error is not None and not isinstance(b.is_error, bool):
            return f"{where} is a ToolResultBlock whose is_error is not a bool or None"
        if isinstance(b.content, tuple):
            for j, inner in enumerate(b.content):
                problem = _block_problem(inner, f"{where}.content[{j}]")
                if problem is not None:
                    return problem
        elif not isinstance(b.content, str):
            return (
                f"{where} is a ToolResultBlock whose content is a "
                f"{type(b.content).__name__}, not a str or a tuple of blocks"
            )
    elif isinstance(block, ThinkingBlock):
        if not isinstance(b.thinking, str):
            return f"{where} is a ThinkingBlock whose thinking is not a str"
    elif isinstance(block, MediaBlock):
        if not isinstance(b.source, Mapping):
            return f"{where} is a MediaBlock whose source is not a mapping"
    elif isinstance(block, OpaqueBlock):
        if not isinstance(b.data, Mapping):
            return f"{where} is an OpaqueBlock whose data is not a mapping"
    else:
        return f"{where} is a {type(block).__name__}, not a ctxwise content block"
    return None


def message_problem(message: Message) -> str | None:
    """What is wrong with a message's fields, or ``None``: the dataclasses check
    nothing, so a message built by hand can hold a role outside :data:`Role`, content
    that is not a tuple of blocks, a tool input that is not JSON data, empty ids, …
    (the Engine refuses such a message before anything is written)."""
    m: Any = message
    if m.role not in _ROLES:
        return f"role {m.role!r} is not one of {', '.join(_ROLES)}"
    if not isinstance(m.content, tuple):
        return (
            f"content is a {type(m.content).__name__}, not a tuple of blocks "
            "(use Message.text_message(role, text) for text)"
        )
    for j, block in enumerate(m.content):
        problem = _block_problem(block, f"content[{j}]")
        if problem is not None:
            return problem
    return None


def check_messages(value: object, name: str = "messages") -> None:
    """A :class:`~ctxwise.errors.UsageError` unless ``value`` is a sequence of
    :class:`Message` (not one message, a string, or dicts); ``name`` is the
    argument's name in the message."""
    if isinstance(value, str | Message) or not isinstance(value, Sequence):
        raise UsageError(f"{name} are a sequence of Message, got {type(value).__name__}")
    for i, m in enumerate(value):
        if not isinstance(m, Message):
            raise UsageError(f"{name}[{i}] is not a Message: {type(m).__name__}")


def block_text(block: ContentBlock) -> str:
    """The text a tokenizer sees for one block (tool inputs as compact JSON)."""
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ToolUseBlock):
        return block.name + " " + json.dumps(block.input, ensure_ascii=False, separators=(",", ":"))
    if isinstance(block, ToolResultBlock):
        if isinstance(block.content, str):
            return block.content
        return "\n".join(block_text(b) for b in block.content)
    if isinstance(block, ThinkingBlock):
        return block.thinking
    if isinstance(block, MediaBlock):
        return ""
    return json.dumps(block.data, ensure_ascii=False, separators=(",", ":"))


def _pairing_problems(messages: Sequence[Message], placement: Placement) -> list[PairingProblem]:
    problems: list[PairingProblem] = []
    seen: dict[str, int] = {}  # tool_use id -> message index of its first use
    pending: dict[str, int] = {}  # unanswered tool_use id -> message index
    last_assistant = -1
    for i, msg in enumerate(messages):
        if msg.role == "assistant":
            last_assistant = i
        for b in msg.content:
            if isinstance(b, ToolUseBlock):
                if b.id in seen:
                    problems.append(
                        PairingProblem(
                            ProblemKind.DUPLICATE_ID,
                            b.id,
                            i,
                            f"tool_use id issued again (first in message {seen[b.id]})",
                        )
                    )
                else:
                    seen[b.id] = i
                pending[b.id] = i
            elif isinstance(b, ToolResultBlock):
                tid = b.tool_use_id
                if tid in pending:
                    why = _misplaced(messages, pending.pop(tid), i, last_assistant, placement)
                    if why:
                        problems.append(PairingProblem(ProblemKind.MISPLACED_RESULT, tid, i, why))
                elif tid in seen:
                    problems.append(
                        PairingProblem(
                            ProblemKind.DUPLICATE_ID, tid, i, "tool_use answered more than once"
                        )
                    )
                else:
                    problems.append(
                        PairingProblem(
                            ProblemKind.ORPHAN_RESULT, tid, i, "no earlier tool_use has this id"
                        )
                    )
    for tid, at in pending.items():
        problems.append(
            PairingProblem(ProblemKind.UNANSWERED_USE, tid, at, "no tool_result answers it")
        )
    problems.sort(key=lambda p: p.message_index)
    return problems


def _misplaced(
    messages: Sequence[Message], use_at: int, result_at: int, last_assistant: int, rule: Placement
) -> str:
    use_role = messages[use_at].role
    msg = messages[result_at]
    if use_role != "assistant":
        return f"its tool_use is in a {use_role} message, not an assistant message"
    if result_at == use_at:
        return "result is in the same message as its call"
    if msg.role != "user":
        return f"a tool_result belongs in a user message, not a {msg.role} message"
    if use_at != last_assistant:
        return f"an assistant message (index {last_assistant}) comes between call and result"
    if rule == "loose":
        return ""
    if rule == "anthropic":
        if result_at != use_at + 1:
            return "result is not in the message directly after its call"
        kinds = [isinstance(b, ToolResultBlock) for b in msg.content]
        if kinds != sorted(kinds, reverse=True):
            return "tool_result blocks must come before other content in the message"
        return ""
    # openai: every message between the call and this one holds tool results only
    for j in range(use_at + 1, result_at + 1):
        between = messages[j]
        if not between.content or not all(isinstance(b, ToolResultBlock) for b in between.content):
            return "a non-tool message comes between the call and its result"
    return ""
