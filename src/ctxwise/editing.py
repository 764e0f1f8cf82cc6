"""Clearing old tool results and thinking: context edits done on the client.

The two edits follow Anthropic's server-side context editing strategies (beta
header ``context-management-2025-06-27``), so a transcript edited here is what
the API would have sent the model, and :func:`context_management` renders the
same parameters as the request block for callers who prefer the API to do it:

- :func:`clear_tool_uses` ≈ ``clear_tool_uses_20250919``. Nothing happens while
  the transcript counts ``trigger_tokens`` or fewer. Past the trigger, the
  results of the oldest tool uses are replaced by a placeholder that tells the
  model the result was removed; the ``tool_use`` block and its id stay, so every
  call is still answered. The last ``keep_last`` tool uses (counted over all
  tool uses, excluded tools included) keep their results. Tools named in
  ``exclude_tools`` are never cleared. ``clear_inputs`` also replaces the
  cleared calls' ``input`` by ``{}``. When the edit would free fewer than
  ``clear_at_least`` tokens it does nothing: clearing changes the prompt
  prefix, so the provider's prompt cache misses on the next request and the
  cached prefix is written again, and a small saving does not pay for that.
- :func:`clear_thinking` ≈ ``clear_thinking_20251015``. Thinking blocks of older
  assistant turns are removed; the most recent ``keep_turns`` turns that hold
  thinking keep theirs. A turn is every assistant message from one user message
  to the next (tool results do not end a turn). ``keep_turns`` is at least 1:
  while a tool-use loop runs, the API requires the last assistant turn's
  thinking blocks back complete and unmodified (the API's own default keeps
  exactly that one turn).

Two choices differ from the API, and say so in their results: a result whose
text is no larger than the placeholder is left alone (clearing it would grow
the window and lose the result), and a result already cleared (it carries the
placeholder, or ctxwise's ``ctxwise.cleared`` mark) is neither cleared again nor
counted again, so both functions are idempotent.

Both refuse a transcript with tool pairing problems (orphan results, unanswered
calls, reused ids: :class:`PairingError` lists them), since an edit must never
emit an invalid transcript, and one holding a message that is not well formed (a
tool input that is not JSON data, an empty id: a
:class:`~ctxwise.errors.UsageError` naming the message). With ``repair=True`` they first run
:func:`repair_pairing`: orphan and second results are dropped, unanswered calls
get an error result saying no result was recorded, and a reused tool_use id is
renamed ``<id>_2`` (``_3``, …) together with the result that answers it.
Misplaced results cannot be repaired and are still refused. An empty transcript
is not an error: the result is a no-op with ``reason="empty"``.

Tokens are counted with the given counter (default :class:`~ctxwise.tokens.CharCounter`),
so the trigger is an estimate of the API's ``input_tokens``. On long Claude Code
sessions, clearing old tool results frees most of the tokens (more with
``clear_inputs=True``) and is fast; ``benchmarks/bench_editing.py`` measures both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

from ctxwise.errors import EditParameterError
from ctxwise.messages import (
    ContentBlock,
    Message,
    PairingProblem,
    Placement,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
)
from ctxwise.pairing import (
    MISSING_RESULT_TEXT,
    PairingError,
    placement_for,
    refuse_malformed,
    repair_pairing,
)
from ctxwise.tokens import CharCounter, TokenCounter

__all__ = [
    "CLEAR_THINKING",
    "CLEAR_TOOL_USES",
    "CONTEXT_MANAGEMENT_BETA",
    "DEFAULT_PLACEHOLDER",
    "MISSING_RESULT_TEXT",
    "ClearedItem",
    "EditParameterError",
    "EditResult",
    "PairingError",
    "clear_thinking",
    "clear_tool_uses",
    "context_management",
    "repair_pairing",
]

CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
"""The ``anthropic-beta`` header value that enables ``context_management``."""
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"

DEFAULT_PLACEHOLDER = (
    "[Tool result cleared to save context. Call the tool again if you need this output.]"
)
"""What a cleared tool result says instead of its content."""

CLEARED_MARK = "ctxwise.cleared"
"""``extra`` key on a block ctxwise cleared (``"tool_result"`` or ``"tool_input"``).
No codec writes it, so it never reaches a provider."""

Reason: TypeAlias = Literal[
    "empty", "below_trigger", "nothing_to_clear", "below_clear_at_least", "keep_all"
]
ItemKind: TypeAlias = Literal["tool_result", "tool_input", "thinking"]


@dataclass(frozen=True, slots=True)
class ClearedItem:
    """One block an edit cleared.

    ``message_index`` is the index in the transcript the edit started from (the
    input, or the repaired input when ``repair=True`` changed it): for a
    tool_result, the message holding the result; for a tool_input, the
    assistant message holding the call. ``tokens`` is what clearing it freed
    (for thinking, the block's text; a message left empty and removed also
    frees the counter's per-message overhead, which no item carries).
    """

    kind: ItemKind
    message_index: int
    tokens: int
    tool_use_id: str | None = None
    tool_name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message_index": self.message_index,
            "tool_use_id": self.tool_use_id,
            "tool_name": self.tool_name,
            "tokens": self.tokens,
        }


@dataclass(frozen=True, slots=True)
class EditResult:
    """What an edit did: the new transcript, what was cleared, and the tokens.

    When ``applied`` is false the transcript is the input (after repair, when
    one was asked for), ``cleared`` is empty, and ``reason`` says why:
    ``empty``, ``below_trigger``, ``nothing_to_clear``, ``below_clear_at_least``
    or ``keep_all``; ``detail`` says it in a sentence. ``repaired`` lists the
    pairing problems :func:`repair_pairing` fixed first.
    """

    strategy: Literal["clear_tool_uses", "clear_thinking"]
    transcript: Transcript
    cleared: tuple[ClearedItem, ...]
    tokens_before: int
    tokens_after: int
    applied: bool
    reason: Reason | None
    detail: str
    counter: str
    repaired: tuple[PairingProblem, ...] = ()

    @property
    def tokens_freed(self) -> int:
        return self.tokens_before - self.tokens_after

    @property
    def cleared_tool_uses(self) -> int:
        """Tool results cleared (the API reports the same count as ``cleared_tool_uses``)."""
        return sum(1 for i in self.cleared if i.kind == "tool_result")

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "applied": self.applied,
            "reason": self.reason,
            "detail": self.detail,
            "counter": self.counter,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_freed": self.tokens_freed,
            "cleared_tool_uses": self.cleared_tool_uses,
            "cleared": [i.to_dict() for i in self.cleared],
            "repaired": [p.to_dict() for p in self.repaired],
        }


# --------------------------------------------------------------------------- parameters


def _count(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EditParameterError(name, value, "must be a whole number")
    if value < minimum:
        raise EditParameterError(name, value, f"must be {minimum} or more")
    return value


def _names(name: str, value: object) -> frozenset[str]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise EditParameterError(name, value, "must be a list of tool names, not one string")
    names = list(value)
    for n in names:
        if not isinstance(n, str) or not n:
            raise EditParameterError(name, value, "every tool name must be a non-empty string")
    return frozenset(names)


def _input_names(value: object) -> frozenset[str] | None:
    """``None`` = clear every cleared call's input; a set = only these tools'."""
    if value is True:
        return None
    if value is False:
        return frozenset()
    return _names("clear_inputs", value)


def _placement_for(t: Transcript, placement: Placement | None) -> Placement:
    if placement is not None and placement not in ("loose", "anthropic", "openai"):
        raise EditParameterError("placement", placement, "must be 'loose', 'anthropic' or 'openai'")
    return placement_for(t, placement)


def _checked(
    transcript: Transcript, placement: Placement | None, repair: bool
) -> tuple[Transcript, tuple[PairingProblem, ...]]:
    if not isinstance(transcript, Transcript):
        raise EditParameterError("transcript", type(transcript).__name__, "must be a Transcript")
    refuse_malformed(transcript)
    rule = _placement_for(transcript, placement)
    if repair:
        return repair_pairing(transcript, placement=rule)
    problems = transcript.problems(rule)
    if problems:
        raise PairingError(problems, rule, transcript.source)
    return transcript, ()


# --------------------------------------------------------------------------- tokens


def _tokens(counter: TokenCounter, block: ContentBlock) -> int:
    """A block's tokens: the per-message overhead cancels out of every difference."""
    return counter.count_messages((Message("user", (block,)),))


def _with_blocks(t: Transcript, changes: dict[tuple[int, int], ContentBlock | None]) -> Transcript:
    """``t`` with block ``(message, block)`` replaced (``None``: removed); emptied messages go."""
    by_message: dict[int, dict[int, ContentBlock | None]] = {}
    for (mi, bi), b in changes.items():
        by_message.setdefault(mi, {})[bi] = b
    msgs: list[Message] = []
    for mi, m in enumerate(t.messages):
        edits = by_message.get(mi)
        if edits is None:
            msgs.append(m)
            continue
        content = tuple(
            nb
            for bi, b in enumerate(m.content)
            for nb in ((edits[bi],) if bi in edits else (b,))
            if nb is not None
        )
        if content:
            msgs.append(replace(m, content=content))
    return replace(t, messages=tuple(msgs))


def _noop(
    strategy: Literal["clear_tool_uses", "clear_thinking"],
    t: Transcript,
    tokens: int,
    reason: Reason,
    detail: str,
    counter: TokenCounter,
    repaired: tuple[PairingProblem, ...],
) -> EditResult:
    return EditResult(
        strategy, t, (), tokens, tokens, False, reason, detail, counter.name, repaired
    )


# --------------------------------------------------------------------------- clear_tool_uses


def _is_cleared(block: ToolResultBlock, placeholder: str) -> bool:
    if block.extra.get(CLEARED_MARK):
        return True
    return isinstance(block.content, str) and block.content in (placeholder, DEFAULT_PLACEHOLDER)


def _cleared_result(block: ToolResultBlock, placeholder: str) -> ToolResultBlock:
    extra = {k: v for k, v in block.extra.items() if k != "anthropic._no_content"}
    extra[CLEARED_MARK] = "tool_result"
    return ToolResultBlock(block.tool_use_id, placeholder, block.is_error, extra)


def _cleared_use(block: ToolUseBlock) -> ToolUseBlock:
    # the raw OpenAI argument string would be written back instead of {} when it
    # does not parse: it goes with the input
    extra = dict(block.extra)
    if "openai._arguments" in extra:
        extra["openai._arguments"] = "{}"
    extra[CLEARED_MARK] = "tool_input"
    return ToolUseBlock(block.id, block.name, {}, extra)


def clear_tool_uses(
    transcript: Transcript,
    *,
    trigger_tokens: int,
    keep_last: int = 3,
    clear_at_least: int = 0,
    exclude_tools: Iterable[str] = (),
    clear_inputs: bool | Sequence[str] = False,
    placeholder: str = DEFAULT_PLACEHOLDER,
    counter: TokenCounter | None = None,
    repair: bool = False,
    placement: Placement | None = None,
) -> EditResult:
    """Replace the results of old tool uses by ``placeholder`` (Anthropic's
    ``clear_tool_uses_20250919``, done locally).

    - ``trigger_tokens``: nothing happens while the transcript counts this many
      tokens or fewer (0: always clear);
    - ``keep_last``: the last this-many tool uses keep their results;
    - ``clear_at_least``: when the edit would free fewer tokens than this, the
      transcript is left as it is (``reason="below_clear_at_least"``);
    - ``exclude_tools``: tool names whose results are never cleared;
    - ``clear_inputs``: ``True`` also replaces every cleared call's input by
      ``{}``; a list of tool names does so for those tools only;
    - ``repair`` / ``placement``: see :func:`repair_pairing`.

    The tool_use blocks and ids stay, so the result pairs exactly as the input
    did. See the module docstring for the two ways this differs from the API.
    """
    trigger = _count("trigger_tokens", trigger_tokens, 0)
    keep = _count("keep_last", keep_last, 0)
    at_least = _count("clear_at_least", clear_at_least, 0)
    excluded = _names("exclude_tools", exclude_tools)
    inputs_for = _input_names(clear_inputs)
    if not isinstance(placeholder, str) or not placeholder.strip():
        raise EditParameterError("placeholder", placeholder, "must be a non-empty string")
    ctr = CharCounter() if counter is None else counter
    t, repaired = _checked(transcript, placement, repair)

    def noop(reason: Reason, detail: str, tokens: int) -> EditResult:
        return _noop("clear_tool_uses", t, tokens, reason, detail, ctr, repaired)

    if not t.messages:
        return noop("empty", "the transcript is empty", 0)
    before = ctr.count_messages(t.messages)
    if before <= trigger:
        return noop(
            "below_trigger",
            f"the transcript counts {before:,} tokens, not more than the trigger {trigger:,}",
            before,
        )
    uses: list[tuple[int, int, ToolUseBlock]] = []
    # a call's result, by the call's position: ids may repeat across compaction
    # segments (a compacted tail copies its calls), never within one
    results: dict[tuple[int, int], tuple[int, int]] = {}
    starts = set(t.segment_starts())
    pending: dict[str, tuple[int, int]] = {}
    for mi, m in enumerate(t.messages):
        if mi in starts:
            pending = {}
        for bi, b in enumerate(m.content):
            if isinstance(b, ToolUseBlock):
                uses.append((mi, bi, b))
                pending[b.id] = (mi, bi)
            elif isinstance(b, ToolResultBlock) and b.tool_use_id in pending:
                results[pending.pop(b.tool_use_id)] = (mi, bi)
    older = uses[: max(0, len(uses) - keep)]
    changes: dict[tuple[int, int], ContentBlock | None] = {}
    items: list[ClearedItem] = []
    skipped = {"excluded": 0, "already cleared": 0, "no larger than the placeholder": 0}
    placeholder_tokens = _tokens(ctr, ToolResultBlock("", placeholder))
    for mi, bi, use in older:
        if use.name in excluded:
            skipped["excluded"] += 1
            continue
        loc = results.get((mi, bi))
        if loc is None:  # unanswered: only a transcript checked under no rule has one
            continue
        result = t.messages[loc[0]].content[loc[1]]
        assert isinstance(result, ToolResultBlock)
        if _is_cleared(result, placeholder):
            skipped["already cleared"] += 1
        else:
            freed = _tokens(ctr, result) - placeholder_tokens
            if freed > 0:
                changes[loc] = _cleared_result(result, placeholder)
                items.append(ClearedItem("tool_result", loc[0], freed, use.id, use.name))
            else:
                skipped["no larger than the placeholder"] += 1
        cleared_now = loc in changes or _is_cleared(result, placeholder)
        if (
            cleared_now
            and use.input
            and (inputs_for is None or use.name in inputs_for)
            and not use.extra.get(CLEARED_MARK)
        ):
            new_use = _cleared_use(use)
            freed = _tokens(ctr, use) - _tokens(ctr, new_use)
            if freed > 0:
                changes[(mi, bi)] = new_use
                items.append(ClearedItem("tool_input", mi, freed, use.id, use.name))
    left = ", ".join(f"{n} {why}" for why, n in skipped.items() if n)
    if not items:
        return noop(
            "nothing_to_clear",
            f"no tool result older than the last {keep} tool use(s) is left to clear"
            + (f" ({left})" if left else ""),
            before,
        )
    edited = _with_blocks(t, changes)
    after = ctr.count_messages(edited.messages)
    if before - after < at_least:
        return noop(
            "below_clear_at_least",
            f"clearing would free {before - after:,} tokens, fewer than clear_at_least="
            f"{at_least:,}; clearing invalidates the provider's prompt cache, so the "
            "transcript is left unchanged",
            before,
        )
    n = sum(1 for i in items if i.kind == "tool_result")
    detail = f"cleared {n} tool result(s), keeping the last {keep} tool use(s)"
    if len(items) > n:
        detail += f" and {len(items) - n} tool input(s)"
    if left:
        detail += f"; left {left}"
    return EditResult(
        "clear_tool_uses",
        edited,
        tuple(items),
        before,
        after,
        True,
        None,
        detail,
        ctr.name,
        repaired,
    )


# --------------------------------------------------------------------------- clear_thinking


def _turns(messages: Sequence[Message]) -> list[int]:
    """For each message, the number of the assistant turn it belongs to (-1: none).

    A turn starts at the first assistant message after a user message that is not
    an answer to tool calls (its first block is not a tool_result)."""
    out: list[int] = []
    turn = -1
    open_turn = False
    for m in messages:
        if m.role == "assistant":
            if not open_turn:
                turn += 1
                open_turn = True
            out.append(turn)
            continue
        if m.role == "user" and not (m.content and isinstance(m.content[0], ToolResultBlock)):
            open_turn = False
        out.append(-1)
    return out


def clear_thinking(
    transcript: Transcript,
    keep_turns: int | Literal["all"] = 1,
    *,
    counter: TokenCounter | None = None,
    repair: bool = False,
    placement: Placement | None = None,
) -> EditResult:
    """Remove the thinking blocks of older assistant turns (Anthropic's
    ``clear_thinking_20251015``, done locally).

    The most recent ``keep_turns`` assistant turns that hold thinking keep all of
    theirs (redacted thinking included); ``"all"`` keeps everything. An
    assistant message that held only thinking (and blank text) is removed. ``keep_turns`` must be
    1 or more: during tool use the API requires the last assistant turn's
    thinking back unmodified. There is no trigger, as in the API.
    """
    if keep_turns != "all":
        _count("keep_turns", keep_turns, 1)
    ctr = CharCounter() if counter is None else counter
    t, repaired = _checked(transcript, placement, repair)

    def noop(reason: Reason, detail: str, tokens: int) -> EditResult:
        return _noop("clear_thinking", t, tokens, reason, detail, ctr, repaired)

    if not t.messages:
        return noop("empty", "the transcript is empty", 0)
    before = ctr.count_messages(t.messages)
    if keep_turns == "all":
        return noop("keep_all", "keep_turns='all' keeps every thinking block", before)
    turn_of = _turns(t.messages)
    with_thinking: list[int] = []
    for mi, m in enumerate(t.messages):
        has_thinking = any(isinstance(b, ThinkingBlock) for b in m.content)
        if turn_of[mi] >= 0 and has_thinking and turn_of[mi] not in with_thinking[-1:]:
            with_thinking.append(turn_of[mi])
    kept = set(with_thinking[-keep_turns:])
    changes: dict[tuple[int, int], ContentBlock | None] = {}
    items: list[ClearedItem] = []
    for mi, m in enumerate(t.messages):
        if turn_of[mi] < 0 or turn_of[mi] in kept:
            continue
        for bi, b in enumerate(m.content):
            if isinstance(b, ThinkingBlock):
                changes[(mi, bi)] = None
                items.append(ClearedItem("thinking", mi, ctr.count(b.thinking)))
        rest = [b for b in m.content if not isinstance(b, ThinkingBlock)]
        if len(rest) < len(m.content) and all(
            isinstance(b, TextBlock) and not b.text.strip() for b in rest
        ):
            # blank text is all that is left (Claude Code records "\n\n" before the
            # thinking), and the API refuses a whitespace-only text block: it goes too
            for bi in range(len(m.content)):
                changes[(mi, bi)] = None
    if not items:
        return noop(
            "nothing_to_clear",
            f"no thinking outside the last {keep_turns} assistant turn(s) with thinking",
            before,
        )
    edited = _with_blocks(t, changes)
    after = ctr.count_messages(edited.messages)
    dropped = len(t.messages) - len(edited.messages)
    detail = (
        f"removed {len(items)} thinking block(s) from {len(with_thinking) - len(kept)} "
        f"older turn(s), keeping the last {len(kept)}"
    )
    if dropped:
        detail += f"; {dropped} message(s) that held only thinking were removed"
    return EditResult(
        "clear_thinking",
        edited,
        tuple(items),
        before,
        after,
        True,
        None,
        detail,
        ctr.name,
        repaired,
    )


# --------------------------------------------------------------------------- server side


def context_management(
    *,
    trigger_tokens: int | None = None,
    trigger_tool_uses: int | None = None,
    keep_last: int = 3,
    clear_at_least: int = 0,
    exclude_tools: Iterable[str] = (),
    clear_inputs: bool | Sequence[str] = False,
    keep_thinking_turns: int | Literal["all"] | None = None,
) -> dict[str, Any]:
    """The Messages API ``context_management`` block for the same edits, done server-side.

    Send it as the request's ``context_management`` field with the
    ``anthropic-beta: context-management-2025-06-27`` header
    (:data:`CONTEXT_MANAGEMENT_BETA`). The ``clear_tool_uses_20250919`` edit gets
    ``trigger`` (``input_tokens`` or ``tool_uses``; omitted when neither is given,
    so the API's default of 100,000 input tokens applies), ``keep`` (``tool_uses``),
    ``clear_at_least`` (``input_tokens``, omitted when 0), ``exclude_tools`` and
    ``clear_tool_inputs`` (omitted when empty or false). ``keep_thinking_turns``
    adds a ``clear_thinking_20251015`` edit, listed first as the API requires when
    both are used. The API has no custom placeholder and clears results no matter
    how small; the local functions differ there (see the module docstring).
    """
    if trigger_tokens is not None and trigger_tool_uses is not None:
        raise EditParameterError(
            "trigger_tool_uses",
            trigger_tool_uses,
            "give trigger_tokens or trigger_tool_uses, not both",
        )
    edit: dict[str, Any] = {"type": CLEAR_TOOL_USES}
    if trigger_tokens is not None:
        edit["trigger"] = {
            "type": "input_tokens",
            "value": _count("trigger_tokens", trigger_tokens, 1),
        }
    elif trigger_tool_uses is not None:
        edit["trigger"] = {
            "type": "tool_uses",
            "value": _count("trigger_tool_uses", trigger_tool_uses, 1),
        }
    edit["keep"] = {"type": "tool_uses", "value": _count("keep_last", keep_last, 0)}
    if _count("clear_at_least", clear_at_least, 0):
        edit["clear_at_least"] = {"type": "input_tokens", "value": clear_at_least}
    excluded = _names("exclude_tools", exclude_tools)
    if excluded:
        edit["exclude_tools"] = sorted(excluded)
    inputs_for = _input_names(clear_inputs)
    if inputs_for is None:
        edit["clear_tool_inputs"] = True
    elif inputs_for:
        edit["clear_tool_inputs"] = sorted(inputs_for)
    edits: list[dict[str, Any]] = []
    if keep_thinking_turns is not None:
        keep: Any = (
            "all"
            if keep_thinking_turns == "all"
            else {
                "type": "thinking_turns",
                "value": _count("keep_thinking_turns", keep_thinking_turns, 1),
            }
        )
        edits.append({"type": CLEAR_THINKING, "keep": keep})
    edits.append(edit)
    return {"edits": edits}
