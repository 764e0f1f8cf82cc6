"""Where a compaction may cut a transcript.

A cut ``c`` splits the messages into a summarized range ``[start, c)`` and a
verbatim tail ``[c, n)``. It is *safe* when no tool call before ``c`` is answered
at or after ``c``: the tail then pairs on its own, and so does the summary (which
holds no tool blocks). That allows a cut between two steps of one tool loop, not
only before a user message: real agent runs are one user prompt followed by
hundreds of tool calls, and Claude Code itself compacts in the middle of a turn.
``c == n`` (everything summarized, no tail) is safe too.

Extended thinking adds one rule. While the last turn's tool loop runs (the
transcript ends with tool results), Anthropic wants that turn's first assistant
message to start with its thinking block ("a final assistant message must start
with a thinking block"); the summary is a user message, so a tail that started
inside the turn would open it with a later step that has no thinking of its own,
and every request with thinking enabled would be refused. So when that turn opens
with thinking, a cut inside it is safe only before an assistant message that
starts with thinking too (interleaved thinking), or at the very end (no tail).

The user's own messages are the task, so compaction treats them apart
(:func:`user_messages`): a *real* user message is a ``user`` message of kind
``"message"`` with some content and no tool result.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxwise.messages import (
    MediaBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
)

__all__ = [
    "SUMMARY_HEADER",
    "is_real_user",
    "is_summary",
    "safe_cut_points",
    "user_messages",
]

SUMMARY_HEADER = "[Earlier conversation, compacted; the messages after this one are verbatim]"
"""First line of a summary message; a later compaction recognises it."""
LEGACY_HEADERS = (
    "Summary of the earlier conversation (compacted; the messages after this one are verbatim):",
)
"""Headers earlier ctxwise versions wrote, still recognised."""


def starts_with_header(text: str) -> bool:
    return text.startswith(SUMMARY_HEADER) or text.startswith(LEGACY_HEADERS)


def system_prefix(messages: Sequence[Message]) -> int:
    """How many system messages lead the transcript."""
    s = 0
    while s < len(messages) and messages[s].role == "system":
        s += 1
    return s


def is_summary(msg: Message) -> bool:
    """A compaction summary: kind ``compact_summary``, or a user message whose first
    text block starts with a summary header ctxwise writes."""
    if msg.role != "user":
        return False
    if msg.kind == "compact_summary":
        return True
    first = next((b for b in msg.content if isinstance(b, TextBlock)), None)
    return first is not None and starts_with_header(first.text)


def is_real_user(msg: Message) -> bool:
    """A user speaking: kind ``message``, some content, and no tool result."""
    if msg.role != "user" or msg.kind != "message" or is_summary(msg):
        return False
    has_content = False
    for b in msg.content:
        if isinstance(b, ToolResultBlock):
            return False
        if (isinstance(b, TextBlock) and b.text.strip()) or isinstance(b, MediaBlock | OpaqueBlock):
            has_content = True
    return has_content


def head(messages: Sequence[Message]) -> tuple[int, int]:
    """``(s, start)``: the system prefix's length, and where new (not yet summarized)
    conversation starts (after a previous summary message, if one leads)."""
    s = system_prefix(messages)
    start = s + 1 if s < len(messages) and is_summary(messages[s]) else s
    return s, start


def user_messages(messages: Sequence[Message], lo: int = 0, hi: int | None = None) -> list[int]:
    """Indices of the real user messages in ``messages[lo:hi]``, ascending."""
    end = len(messages) if hi is None else hi
    return [i for i in range(lo, end) if is_real_user(messages[i])]


def _opens_with_thinking(msg: Message) -> bool:
    """The message's first block is thinking, past blank text (Claude Code records a
    ``"\\n\\n"`` text block before the thinking of a Claude 4 reply)."""
    first = next(
        (b for b in msg.content if not (isinstance(b, TextBlock) and not b.text.strip())), None
    )
    return isinstance(first, ThinkingBlock)


def _answers_tools(msg: Message) -> bool:
    """A user message of tool results (its first block is one): the turn goes on."""
    return msg.role == "user" and bool(msg.content) and isinstance(msg.content[0], ToolResultBlock)


def _thinking_turn(messages: Sequence[Message]) -> int | None:
    """The first assistant message of the last turn, when that turn is still in its
    tool loop (the transcript ends with tool results) and opens with a thinking
    block; else ``None``. A turn starts after a user message that is not tool results."""
    if not messages or not _answers_tools(messages[-1]):
        return None
    turn = len(messages) - 1
    while turn > 0 and not (
        messages[turn - 1].role == "user" and not _answers_tools(messages[turn - 1])
    ):
        turn -= 1
    first = next((i for i in range(turn, len(messages)) if messages[i].role == "assistant"), None)
    return first if first is not None and _opens_with_thinking(messages[first]) else None


def cuts(messages: Sequence[Message], start: int) -> list[int]:
    """Every safe cut ``c`` with ``start < c <= len(messages)``, ascending."""
    n = len(messages)
    opened = _thinking_turn(messages)
    # a call at i answered at j forbids every cut c with i < c <= j: +1 at i + 1 and
    # -1 at j + 1 (an unanswered call forbids every cut after it)
    diff = [0] * (n + 2)
    pending: dict[str, int] = {}
    for j, m in enumerate(messages):
        for b in m.content:
            if isinstance(b, ToolUseBlock):
                pending[b.id] = j
            elif isinstance(b, ToolResultBlock) and b.tool_use_id in pending:
                diff[pending.pop(b.tool_use_id) + 1] += 1
                diff[j + 1] -= 1
    for i in pending.values():
        diff[i + 1] += 1
    out: list[int] = []
    open_pairs = 0
    for c in range(n + 1):
        open_pairs += diff[c]
        if c > start and open_pairs == 0:
            if (
                opened is not None
                and opened < c < n
                and messages[c].role == "assistant"
                and not _opens_with_thinking(messages[c])
            ):
                continue  # the tail would open the running turn without its thinking
            out.append(c)
    return out


def safe_cut_points(transcript: Transcript) -> tuple[int, ...]:
    """Every index where a compaction's verbatim tail may start, ascending.

    ``c`` is safe when no tool_use before ``c`` is answered at or after ``c``, at
    least one message that is not a system message or a previous summary lies
    before it, and it does not open a running tool loop's turn without the
    thinking block that turn started with (see the module doc).
    ``len(transcript)`` (an empty tail) is included when safe. The transcript's
    live window is meant (a Claude Code file: :meth:`live_window`).
    """
    _, start = head(transcript.messages)
    return tuple(cuts(transcript.messages, start))
