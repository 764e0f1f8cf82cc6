"""pydantic-ai integration (extra ``pydantic-ai``): a capability that runs every model
request through a ctxwise :class:`~ctxwise.engine.Engine` and vetoes tool calls
the Engine's policy gates block.

    from pydantic_ai import Agent
    from ctxwise.integrations.pydantic_ai import CtxwiseCapability

    agent = Agent(model, capabilities=[CtxwiseCapability(engine, session_id="case-17")])

**History** (``before_model_request``, the hook pydantic-ai's own ``ProcessHistory``
uses): the messages the Engine has not seen yet (everything after the last message
this capability produced for the session) are mapped to ctxwise messages and given to
:meth:`Engine.aturn <ctxwise.engine.Engine.aturn>`, which clears old tool results,
compacts under the budget, pins rules and facts and adds routed sources. The Engine's
window is mapped back and replaces both the request's messages and the run's history
(``RunContext.messages``): the system part (system prompts, pinned rules and facts,
and the context when ``context = "system"``) is one ``SystemPromptPart`` at the start,
after the latest statement of each dynamic system prompt (``dynamic=True``), sent as
pydantic-ai refreshes it. Those statements, the request-scoped system prompts
(``scope="request"``, kept at the end of their request) and the request's instructions
(``Agent(instructions=...)``, static and dynamic, which pydantic-ai sends itself, after
the system prompts) are the turn's ``system``: the budget counts the prompts each
request sends, and they are not kept in the session. (A
session recorded by an older ctxwise holds the first statement of each dynamic prompt
among its system texts: it is not sent, and is still counted when it differs from the
latest, which leaves the request that much under the budget.)
Parts the Engine did not change come back as the very parts pydantic-ai gave (ids,
timestamps, usage and provider details kept, from the part's own serialized form);
changed ones (a cleared tool return, a compaction summary) are rebuilt.

Each message produced carries ``metadata["ctxwise"] = {"session": ..., "version":
...}``; that is how the next request tells what is new, so processing the capability's
own output again changes nothing, in this capability or in a new one on the same
Engine and session. A history from before what the session holds (an earlier run's
``message_history`` given again, "edit and resend") is an
:class:`~ctxwise.errors.IntegrationError`: a session only grows, and the model would
get the turns the history left behind.

A tool return whose call is no longer in the history (cut by a hand-trimmed
``message_history``, say) would be an orphan: pydantic-ai silently drops one, and the
model, never seeing the result, may call again and again. Here its content stays, as
text in the same user turn, and the model never gets an orphan.

A part ctxwise cannot map (files, audio, native tool parts, framework bookkeeping
parts) raises :class:`~ctxwise.errors.IntegrationError` (``reason="message"``) naming
it; the history is left unchanged and nothing is written to the session.

**Tool veto** (``before_tool_execute``): every call is checked with
:meth:`Engine.check_tool <ctxwise.engine.Engine.check_tool>` before it runs. A blocked
call does not run; the model gets a failed tool return (pydantic-ai's ``ToolFailed``,
which does not spend the tool's retries) quoting the rule. A gate that cannot be
evaluated (an unknown session, a broken store, a rule that raises) blocks too.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from ctxwise.engine import Engine, SyncKeys, TurnResult
from ctxwise.errors import (
    HistoryRewoundError,
    IntegrationError,
    MissingDependencyError,
    UnknownSessionError,
)
from ctxwise.integrations._framework import require_framework, without_texts
from ctxwise.messages import (
    Message,
    ProblemKind,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    block_text,
)
from ctxwise.policy import Blocked
from ctxwise.sessions import check_session_id

DISTRIBUTION = "pydantic-ai-slim"
SUPPORTED = ">=2.68,<3"
"""The pydantic-ai versions this module is tested with (the ``pydantic-ai`` extra)."""

VERSION = require_framework(DISTRIBUTION, SUPPORTED, "pydantic-ai", "the pydantic-ai integration")

try:
    import pydantic
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import ToolFailed, UserError
    from pydantic_ai.messages import (
        InstructionPart,
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelRequestPart,
        ModelResponse,
        ModelResponsePart,
        RetryFeedbackPart,
        RetryPromptPart,
        SystemPromptPart,
        TextContent,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.tools import RunContext
except ImportError as exc:  # pragma: no cover - exercised only with a broken install
    raise MissingDependencyError(
        DISTRIBUTION, "pydantic-ai", "the pydantic-ai integration"
    ) from exc

if TYPE_CHECKING:
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import ToolDefinition

__all__ = [
    "MARK",
    "SUPPORTED",
    "CtxwiseCapability",
    "from_pydantic_ai",
    "to_pydantic_ai",
]

MARK = "ctxwise"
"""The ``metadata`` key on every message the capability produces."""

_PART = "pydantic_ai.part"
_MESSAGE = "pydantic_ai.message"
_Outcome = Literal["success", "failed", "denied", "interrupted", "retried"]
_OUTCOMES: dict[str, _Outcome] = {
    o: o for o in ("success", "failed", "denied", "interrupted", "retried")
}
_ERROR_OUTCOMES = ("failed", "retried")

_request_parts: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ModelRequestPart)
_response_parts: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ModelResponsePart)


def _unmappable(what: str) -> IntegrationError:
    return IntegrationError(
        DISTRIBUTION,
        "message",
        f"ctxwise cannot map {what}; the history was left unchanged",
    )


# ---------------------------------------------------------------- pydantic-ai → ctxwise


def _dump_message(message: ModelMessage) -> dict[str, Any]:
    """A message's own fields (not its parts) in pydantic-ai's serialized form."""
    empty: ModelMessage
    if isinstance(message, ModelRequest):
        empty = replace(message, parts=[])
    else:
        empty = replace(message, parts=[])
    dumped: dict[str, Any] = ModelMessagesTypeAdapter.dump_python([empty], mode="json")[0]
    return dumped


def _user_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    texts = []
    for item in part.content:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, TextContent):
            texts.append(item.content)
        else:
            raise _unmappable(f"a UserPromptPart holding {type(item).__name__}")
    return "\n".join(texts)


def _request_block(part: Any) -> TextBlock | ToolResultBlock:
    """One request part (not a system prompt) as a ctxwise block."""
    if isinstance(part, UserPromptPart):
        return TextBlock(_user_text(part))
    if isinstance(part, ToolReturnPart):
        if part.files:
            kinds = ", ".join(sorted({type(f).__name__ for f in part.files}))
            raise _unmappable(f"a ToolReturnPart of {part.tool_name!r} holding files ({kinds})")
        text = part.content if isinstance(part.content, str) else part.model_response_str()
        return ToolResultBlock(part.tool_call_id, text, is_error=part.outcome in _ERROR_OUTCOMES)
    if isinstance(part, RetryPromptPart):  # deprecated in pydantic-ai, still met in histories
        if part.tool_name is not None:
            return ToolResultBlock(part.tool_call_id, part.model_response(), is_error=True)
        return TextBlock(part.model_response())
    if isinstance(part, RetryFeedbackPart):
        return TextBlock(part.model_response())
    raise _unmappable(f"a {type(part).__name__} ({getattr(part, 'part_kind', '?')!r})")


def _response_block(part: Any) -> TextBlock | ToolUseBlock | ThinkingBlock:
    if isinstance(part, TextPart):
        return TextBlock(part.content)
    if isinstance(part, ToolCallPart):
        return ToolUseBlock(part.tool_call_id, part.tool_name, part.args_as_dict())
    if isinstance(part, ThinkingPart):
        return ThinkingBlock(part.content, part.signature)
    raise _unmappable(f"a {type(part).__name__} ({getattr(part, 'part_kind', '?')!r})")


def _with_part(block: Any, dumped: dict[str, Any]) -> Any:
    return replace(block, extra={_PART: dumped})


def from_pydantic_ai(messages: Sequence[ModelMessage]) -> list[Message]:
    """pydantic-ai messages as ctxwise messages.

    A ``ModelRequest`` becomes one ``system`` message per system prompt and one
    ``user`` message holding its prompts (text blocks) and tool returns (tool results;
    ``failed`` and ``retried`` outcomes are errors); a ``ModelResponse`` becomes an
    ``assistant`` message of text, tool calls and thinking. Each block keeps its part's
    serialized form in ``extra`` so :func:`to_pydantic_ai` gives back the same part.

    Raises:
        IntegrationError: (reason ``"message"``) a part ctxwise cannot map, named.
    """
    out: list[Message] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            blocks: list[Any] = []
            for part in message.parts:
                dumped = _request_parts.dump_python(part, mode="json")
                if isinstance(part, SystemPromptPart):
                    out.append(Message("system", (_with_part(TextBlock(part.content), dumped),)))
                    continue
                blocks.append(_with_part(_request_block(part), dumped))
            if blocks:
                out.append(Message("user", tuple(blocks), extra={_MESSAGE: _dump_message(message)}))
        elif isinstance(message, ModelResponse):
            content = tuple(
                _with_part(_response_block(p), _response_parts.dump_python(p, mode="json"))
                for p in message.parts
            )
            out.append(Message("assistant", content, extra={_MESSAGE: _dump_message(message)}))
        else:
            raise _unmappable(f"a {type(message).__name__} message")
    return out


# ---------------------------------------------------------------- ctxwise → pydantic-ai


def _bare(block: Any) -> Any:
    return replace(block, extra={})


def _restored(block: Any, adapter: pydantic.TypeAdapter[Any], as_block: Any) -> Any | None:
    """The part ``block`` was made from, when the block still says what it said."""
    dumped = block.extra.get(_PART) if isinstance(block.extra, Mapping) else None
    if not isinstance(dumped, Mapping):
        return None
    try:
        part = adapter.validate_python(dict(dumped))
    except (pydantic.ValidationError, ValueError, TypeError):
        return None
    try:
        same = _bare(as_block(part)) == _bare(block)
    except IntegrationError:
        return None
    return part if same else None


def _result_text(block: ToolResultBlock) -> str:
    return block_text(block)


def _request_part(block: Any, tool_names: Mapping[str, str]) -> Any:
    if isinstance(block, TextBlock):
        part = _restored(block, _request_parts, _request_block)
        return part if part is not None else UserPromptPart(block.text)
    if isinstance(block, ToolResultBlock):
        part = _restored(block, _request_parts, _request_block)
        if part is not None:
            return part
        dumped = block.extra.get(_PART) if isinstance(block.extra, Mapping) else None
        original = dumped if isinstance(dumped, Mapping) else {}
        outcome = _OUTCOMES.get(str(original.get("outcome")))
        if outcome is None or (outcome in _ERROR_OUTCOMES) != bool(block.is_error):
            outcome = "failed" if block.is_error else "success"
        name = tool_names.get(block.tool_use_id) or str(original.get("tool_name") or "tool")
        return ToolReturnPart(
            tool_name=name,
            content=_result_text(block),
            tool_call_id=block.tool_use_id,
            outcome=outcome,
        )
    raise _unmappable(f"a {type(block).__name__} in a user message")


def _response_part(block: Any) -> Any:
    part = _restored(block, _response_parts, _response_block)
    if part is not None:
        return part
    if isinstance(block, TextBlock):
        return TextPart(block.text)
    if isinstance(block, ToolUseBlock):
        return ToolCallPart(block.name, dict(block.input), block.id)
    if isinstance(block, ThinkingBlock):
        return ThinkingPart(block.thinking, signature=block.signature)
    raise _unmappable(f"a {type(block).__name__} in an assistant message")


def _message_fields(message: Message, kind: str) -> ModelMessage | None:
    dumped = message.extra.get(_MESSAGE) if isinstance(message.extra, Mapping) else None
    if not isinstance(dumped, Mapping) or dumped.get("kind") != kind:
        return None
    try:
        restored: ModelMessage = ModelMessagesTypeAdapter.validate_python([dict(dumped)])[0]
    except (pydantic.ValidationError, ValueError, TypeError):
        return None
    return restored


def _system_parts(message: Message) -> list[Any]:
    """A system message as the system prompts it was read from, or as one new
    ``SystemPromptPart`` of its blocks joined by a blank line."""
    restored = [
        _restored(b, _request_parts, lambda p: TextBlock(p.content)) for b in message.content
    ]
    if restored and all(isinstance(p, SystemPromptPart) for p in restored):
        return restored
    text = "\n\n".join(t for t in (block_text(b) for b in message.content) if t)
    return [SystemPromptPart(text)] if text else []


def _tool_results_first(parts: list[Any]) -> list[Any]:
    return sorted(parts, key=lambda p: 0 if isinstance(p, ToolReturnPart) else 1)


def to_pydantic_ai(messages: Sequence[Message]) -> list[ModelMessage]:
    """ctxwise messages (an Engine window) as pydantic-ai messages.

    The ``system`` messages become one ``SystemPromptPart`` (their blocks joined by a
    blank line) at the start of the next request; ``user`` messages become requests
    (consecutive ones joined, tool returns first) and ``assistant`` messages responses.
    A block that still holds what its part held comes back as that part; any other is
    built anew (a cleared tool return keeps its tool name, call id and outcome).

    Raises:
        IntegrationError: (reason ``"message"``) a block pydantic-ai has no part for.
    """
    tool_names = {b.id: b.name for m in messages for b in m.content if isinstance(b, ToolUseBlock)}
    out: list[ModelMessage] = []
    system: list[Any] = []
    previous_user = False
    for m in messages:
        if m.role == "system":
            system.extend(_system_parts(m))
            continue
        if m.role == "assistant":
            if system:
                out.append(ModelRequest(parts=system))
                system = []
            parts = [_response_part(b) for b in m.content]
            base = _message_fields(m, "response")
            response = (
                replace(base, parts=parts)
                if isinstance(base, ModelResponse)
                else ModelResponse(parts=parts)
            )
            out.append(response)
            previous_user = False
            continue
        parts = [_request_part(b, tool_names) for b in m.content]
        if system:
            parts[:0] = system
            system = []
        last = out[-1] if out else None
        if previous_user and isinstance(last, ModelRequest):
            out[-1] = replace(last, parts=_tool_results_first([*last.parts, *parts]))
            continue
        base = _message_fields(m, "request")
        request = (
            replace(base, parts=_tool_results_first(parts))
            if isinstance(base, ModelRequest)
            else ModelRequest(parts=_tool_results_first(parts))
        )
        out.append(request)
        previous_user = True
    if system:
        out.append(ModelRequest(parts=system))
    return out


# ---------------------------------------------------------------- the capability


def _identity(dumped: Mapping[str, Any]) -> str:
    """What tells one message from another: its own fields (timestamp, run id, model,
    response id, ...) without its parts and the metadata ctxwise marks it with."""
    fields = {k: v for k, v in dumped.items() if k not in ("parts", "metadata")}
    return json.dumps(fields, sort_keys=True, default=str, ensure_ascii=False)


_KEYS = "pydantic_ai.keys"


def _tool_definitions(request_context: ModelRequestContext) -> list[dict[str, Any]]:
    """The function and output tools the request sends, as definitions the Engine
    counts in the budget (pydantic-ai sends them itself, beside the messages)."""
    params = request_context.model_request_parameters
    defs = [*params.function_tools, *params.output_tools]
    out = []
    for d in defs:
        body: dict[str, Any] = {"name": d.name, "input_schema": dict(d.parameters_json_schema)}
        if d.description:
            body["description"] = d.description
        out.append(body)
    return out


def _sync_keys(message: Message) -> list[str]:
    """What tells a message read from a pydantic-ai history apart (:func:`_identity`);
    none for one recorded another way."""
    given = message.extra.get(_KEYS)
    if isinstance(given, list):
        return given
    dumped = message.extra.get(_MESSAGE)
    return [_identity(dumped)] if isinstance(dumped, Mapping) else []


_SYNC_KEYS = SyncKeys(_sync_keys, ids=True)


def _marked(message: ModelMessage, session_id: str) -> bool:
    mark = (message.metadata or {}).get(MARK)
    return isinstance(mark, Mapping) and mark.get("session") == session_id


def _mark(message: ModelMessage, session_id: str, version: int) -> ModelMessage:
    metadata = {**(message.metadata or {}), MARK: {"session": session_id, "version": version}}
    return replace(message, metadata=metadata)


def _dynamic_prompts(messages: Sequence[ModelMessage]) -> list[SystemPromptPart]:
    """The latest statement of each dynamic system prompt (``dynamic_ref``) in
    ``messages``, in the order the prompts first appear."""
    latest: dict[str, SystemPromptPart] = {}
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, SystemPromptPart) and p.dynamic_ref and p.scope != "request":
                    latest[p.dynamic_ref] = p
    return list(latest.values())


def _dynamic_statements(message: Message) -> list[tuple[str, str]]:
    """``(dynamic_ref, text)`` of each dynamic system prompt a system message holds."""
    if message.role != "system":
        return []
    out = []
    for b in message.content:
        if not isinstance(b, TextBlock):
            continue
        dumped = b.extra.get(_PART)
        ref = dumped.get("dynamic_ref") if isinstance(dumped, Mapping) else None
        if isinstance(ref, str) and ref:
            out.append((ref, b.text.strip()))
    return out


def _request_scoped(messages: Sequence[ModelMessage]) -> tuple[list[ModelMessage], list[Any]]:
    """The messages without request-scoped system prompts, and those prompts. The
    statements of dynamic system prompts are taken out too, and not returned: the latest
    one of each (:func:`_dynamic_prompts`) is the turn's ``system``, never recorded."""
    kept: list[ModelMessage] = []
    scoped: list[Any] = []
    for m in messages:
        if isinstance(m, ModelRequest):
            dynamic = [
                p
                for p in m.parts
                if isinstance(p, SystemPromptPart) and p.dynamic_ref and p.scope != "request"
            ]
            if dynamic:
                rest = [p for p in m.parts if not any(p is d for d in dynamic)]
                m = replace(m, parts=rest)
                if not rest:
                    continue
            mine = [p for p in m.parts if isinstance(p, SystemPromptPart) and p.scope == "request"]
            if mine:
                scoped.extend(mine)
                rest = [p for p in m.parts if not any(p is s for s in mine)]
                if rest:
                    kept.append(replace(m, parts=rest))
                continue
        kept.append(m)
    return kept, scoped


def _instructions(request_context: ModelRequestContext) -> str | None:
    """The instructions this request sends: the parts of the request's instruction
    prefix (not those a loaded capability states in the history), as the model
    prepares them (which adds a prompted output's schema instructions), joined as
    pydantic-ai joins them. A model that cannot prepare the request (it raises on the
    actual call too) leaves the parts as the hooks see them."""
    params = request_context.model_request_parameters
    try:
        with warnings.catch_warnings():  # the model warns when it prepares the call itself
            warnings.simplefilter("ignore")
            _, params = request_context.model.prepare_request(
                request_context.model_settings, params
            )
    except UserError:
        params = request_context.model_request_parameters
    parts = [
        p for p in params.instruction_parts or () if params.instruction_visibility_of(p) == "prefix"
    ]
    return InstructionPart.join(parts)


def _orphans_as_text(
    history: Sequence[Message], new: list[Message]
) -> tuple[list[Message], list[str]]:
    """``new`` with every tool result that answers no call the model can see (its call
    cut from the history, answered already, or behind another assistant turn) turned
    into text in the same user turn, and the ids of those results."""
    start = len(history)
    while start > 0 and history[start - 1].role != "assistant":
        start -= 1
    if start > 0:
        start -= 1  # from the last assistant message on, as the Engine checks
    tail = list(history[start:])
    body = [i for i, m in enumerate(new) if m.role != "system"]
    probe = [*tail, *(new[i] for i in body)]
    bad: dict[int, set[str]] = {}
    for p in Transcript(tuple(probe)).problems("loose"):
        if p.kind is ProblemKind.UNANSWERED_USE or p.message_index < len(tail):
            continue
        at = body[p.message_index - len(tail)]
        if any(r.tool_use_id == p.tool_use_id for r in new[at].tool_results):
            bad.setdefault(at, set()).add(p.tool_use_id)
    if not bad:
        return new, []
    out = list(new)
    ids: list[str] = []
    for at, wrong in bad.items():
        kept: list[Any] = []
        texts: list[Any] = []
        for b in new[at].content:
            if isinstance(b, ToolResultBlock) and b.tool_use_id in wrong:
                dumped = b.extra.get(_PART) if isinstance(b.extra, Mapping) else None
                name = dumped.get("tool_name") if isinstance(dumped, Mapping) else None
                label = f"{name} call" if name else "tool call"
                texts.append(
                    TextBlock(
                        f"[Result of an earlier {label} (id {b.tool_use_id}) whose call is no "
                        f"longer in the history]\n{block_text(b)}"
                    )
                )
                ids.append(b.tool_use_id)
            else:
                kept.append(b)
        out[at] = replace(new[at], content=(*kept, *texts), plain=False)
    return out, ids


@dataclass(eq=False)
class CtxwiseCapability(AbstractCapability[Any]):
    """Runs each model request of a pydantic-ai agent through ``engine`` for the
    session ``session_id`` (``history``), and vetoes the tool calls its policy gates
    block (``gate``); see the module docstring.

    ``last_turn`` is the Engine's :class:`~ctxwise.engine.TurnResult` of the latest
    request (its ``trace`` says what was cleared, compacted, pinned and routed);
    ``last_orphans`` the ids of tool returns that request turned into text because
    their calls were gone.
    """

    engine: Engine
    session_id: str
    history: bool = True
    gate: bool = True
    last_turn: TurnResult | None = field(default=None, repr=False, compare=False)
    last_orphans: tuple[str, ...] = field(default=(), repr=False, compare=False)
    _dynamic: dict[str, list[str]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.engine, Engine):
            raise IntegrationError(
                DISTRIBUTION,
                "config",
                f"engine must be a ctxwise Engine, got {type(self.engine).__name__}",
            )
        try:
            check_session_id(self.session_id)
        except Exception as exc:
            raise IntegrationError(DISTRIBUTION, "config", str(exc)) from exc
        if not (self.history or self.gate):
            raise IntegrationError(
                DISTRIBUTION, "config", "history and gate are both off: the capability does nothing"
            )

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds an Engine: not part of an agent spec

    # ------------------------------------------------------------ history

    async def process(
        self,
        messages: Sequence[ModelMessage],
        *,
        instructions: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[ModelMessage]:
        """The messages to send instead of ``messages`` (see the module docstring);
        ``messages`` themselves when nothing in them is new to the session.
        ``instructions``: the instructions the request sends with them (pydantic-ai's
        ``instructions``, which are not in the messages), counted in the budget as part
        of the turn's ``system`` and left to pydantic-ai to send."""
        if instructions is not None and not isinstance(instructions, str):
            raise IntegrationError(
                DISTRIBUTION,
                "config",
                f"instructions must be a str or None, got {type(instructions).__name__}",
            )
        sid = self.session_id
        given: object = messages  # what a caller outside pydantic-ai may pass
        if not isinstance(given, Sequence):
            raise _unmappable(f"a {type(given).__name__} as the message history")
        for i, m in enumerate(given):
            if not isinstance(m, (ModelRequest, ModelResponse)):
                raise _unmappable(f"message {i}, a {type(m).__name__}")
        last = max((i for i, m in enumerate(messages) if _marked(m, sid)), default=-1)
        dynamic = _dynamic_prompts(messages)
        new_raw, scoped = _request_scoped(messages[last + 1 :])
        new = from_pydantic_ai(new_raw)  # raises before anything is written
        if not any(m.role != "system" for m in new):  # nothing new for the session
            return list(messages)
        if last >= 0:
            self._check_not_rewound(messages, last)
        try:
            history = self.engine.session_messages(sid)
        except UnknownSessionError:
            history = []
        new, orphans = _orphans_as_text(history, new)
        # the prompts of this request (the latest statement of each dynamic one, the
        # request-scoped ones, the instructions) are counted as the turn's system
        # prompt, not recorded; pydantic-ai sends the instructions after its prompts
        texts = [p.content for p in [*dynamic, *scoped] if p.content.strip()]
        if instructions and instructions.strip():
            texts.append(instructions)
        prompt = "\n\n".join(texts) or None
        result = await self.engine.aturn(
            sid, new, system=prompt, tools=tools, warn_unanswered=False
        )
        shown = list(result.window.messages)
        # statements an older ctxwise recorded in the session: never sent
        recorded = self._recorded_dynamic() if dynamic else {}
        stale = [t for ts in recorded.values() for t in ts if prompt is None or t != prompt.strip()]
        if (prompt is not None or stale) and shown and shown[0].role == "system":
            # the window's system part opens with the prompt; pydantic-ai's own parts
            # take its place: the dynamic ones first, the request-scoped ones last, the
            # instructions where pydantic-ai puts them
            kept = without_texts([block_text(b) for b in shown[0].content], [prompt or "", *stale])
            shown[0] = Message("system", tuple(TextBlock(t) for t in kept))
        window = to_pydantic_ai(shown)
        if dynamic:  # the dynamic prompts as they are now, first, as pydantic-ai sends them
            at = next((i for i, m in enumerate(window) if isinstance(m, ModelRequest)), None)
            if at is None:
                window.insert(0, ModelRequest(parts=list(dynamic)))
            else:
                first = window[at]
                assert isinstance(first, ModelRequest)
                window[at] = replace(first, parts=[*dynamic, *first.parts])
        version = result.version
        out = [_mark(m, sid, version) for m in window]
        if scoped and out and isinstance(out[-1], ModelRequest):
            final = out[-1]
            out[-1] = replace(final, parts=[*final.parts, *scoped])
        self.last_turn = result
        self.last_orphans = tuple(orphans)
        return out

    def _recorded_dynamic(self) -> dict[str, list[str]]:
        """The statements of dynamic system prompts the session's log holds, by
        ``dynamic_ref``: only an older ctxwise recorded them, so the log of a session
        is read for them once."""
        if self._dynamic is not None:
            return self._dynamic
        if not self.engine.sessions.version(self.session_id):
            return {}
        from ctxwise.formats import neutral

        out: dict[str, list[str]] = {}
        for m in neutral.decode_messages(self.engine.sessions.log(self.session_id)):
            for ref, text in _dynamic_statements(m):
                out.setdefault(ref, []).append(text)
        self._dynamic = out
        return out

    def _check_not_rewound(self, messages: Sequence[ModelMessage], last: int) -> None:
        """Refuse a history from before what the session holds (a ``message_history``
        of an earlier run given again: "edit and resend"), which would hand the model
        the turns the history no longer has (:meth:`Engine.sync`, by each message's own
        fields). Only asked when the session moved on since the history's latest mark;
        turns recorded in other ways (``Engine.record``, an MCP ``rules`` call) do not
        count, only those read from a pydantic-ai history."""
        mark = (messages[last].metadata or {}).get(MARK)
        version = mark.get("version") if isinstance(mark, Mapping) else None
        if not isinstance(version, int) or version >= self.engine.sessions.version(self.session_id):
            return
        units = [
            Message("user", (), extra={_KEYS: [_identity(_dump_message(m))]}) for m in messages
        ]
        try:
            self.engine.sync(self.session_id, units, _SYNC_KEYS)
        except HistoryRewoundError as exc:
            raise IntegrationError(
                DISTRIBUTION,
                "message",
                f"{exc} (an earlier run's message_history given again)",
            ) from exc

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        if not self.history:
            return request_context
        messages = await self.process(
            list(request_context.messages),
            instructions=_instructions(request_context),
            tools=_tool_definitions(request_context),
        )
        request_context.messages = list(messages)
        ctx.messages[:] = messages
        return request_context

    # ------------------------------------------------------------ tool veto

    async def before_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
    ) -> dict[str, Any]:
        if not self.gate:
            return args
        try:
            decision = self.engine.check_tool(self.session_id, call.tool_name, args)
        except Exception as exc:  # a gate that cannot be evaluated blocks
            raise ToolFailed(
                f"Blocked: the ctxwise policy gate could not be evaluated for "
                f"{call.tool_name!r} ({type(exc).__name__}: {exc}). The tool did not run."
            ) from exc
        if isinstance(decision, Blocked):
            raise ToolFailed(
                f"Blocked by policy rule {decision.rule.name!r}: "
                f"{decision.reason.rstrip().rstrip('.')}. The tool did not run."
            )
        return args
