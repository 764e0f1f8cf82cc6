"""LangChain v1 integration (extra ``langchain``): :class:`CtxwiseMiddleware`.

An ``AgentMiddleware`` for ``langchain.agents.create_agent(model, tools,
middleware=[...])``; the agent ``create_agent`` returns is a compiled LangGraph
graph, so the same middleware serves LangGraph graphs (with any checkpointer).

- ``wrap_model_call`` / ``awrap_model_call``: the request's messages are mapped
  to ctxwise messages and run through :meth:`ctxwise.Engine.turn` (clearing,
  compaction under the budget, pinned facts and rules, routed sources); the
  Engine's window is mapped back and the model gets it through
  ``request.override(messages=..., system_message=...)``: the request's own system
  message first, as given, then the window's system part (pinned rules and facts).
  The request's system prompt is given to the Engine as the turn's ``system`` on
  every call, so the budget counts the very prompt sent, a dynamic prompt that
  changes from call to call included, and it is not kept in the session. (A
  session recorded by an older ctxwise holds the first prompt it was given among
  its system texts: it is not sent, and is still counted, which leaves the request
  that much under the budget.) Only the messages new
  since the session's last turn are given to the Engine (:meth:`ctxwise.Engine.sync`;
  each LangChain message is known by its ``id``, which LangGraph gives every message in the state;
  a message without one by a hash of its content). A run of consecutive
  ``AIMessage``\\ s whose tool calls are still unanswered is one assistant turn
  (how parallel calls are sometimes stored), and so are the ``ToolMessage``\\ s
  that answer it: the model gets them as one ``AIMessage`` and its results.
- ``persist=True``: when a turn cleared or compacted the history, the edited
  history (not the per-turn context) replaces the graph state's ``messages``
  through an ``ExtendedModelResponse`` command (``RemoveMessage`` of all, then
  the history and the model's reply), so the checkpoint stays small too.
- ``wrap_tool_call`` / ``awrap_tool_call``: :meth:`ctxwise.Engine.check_tool`
  decides before a tool runs; a ``Blocked`` call gets an error ``ToolMessage``
  naming the rule (``status="error"``, the call's ``tool_call_id``) and the tool
  never runs. A gate that cannot be evaluated blocks (fails closed).

The session is the one given as ``session_id``, else the LangGraph thread id.
A message the Engine refuses (an orphan tool result, a call never answered) is
an error before the model is called: the model is never handed an orphan. So is
a thread that was rewound (a run from an earlier checkpoint, messages taken out
with ``RemoveMessage``) while its session holds the later turns: a session only
grows, and the model would get the turns the thread left behind; a fork runs
under a session of its own.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxwise.engine import Engine, SyncKeys, TurnResult
from ctxwise.errors import HistoryRewoundError, IntegrationError, SessionConflictError
from ctxwise.formats import neutral
from ctxwise.integrations._framework import require_framework, without_texts
from ctxwise.messages import (
    ContentBlock,
    MediaBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ctxwise.policy import Blocked

SUPPORTED = ">=1.5,<2"
require_framework("langchain", SUPPORTED, "langchain", "the LangChain middleware")

from langchain.agents.middleware import (  # noqa: E402
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware.types import ToolCallRequest  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES  # noqa: E402
from langgraph.types import Command  # noqa: E402

__all__ = ["CtxwiseMiddleware", "from_langchain", "to_langchain"]

FRAMEWORK = "langchain"
_IDS = "langchain_ids"
"""Neutral ``extra`` key: the LangChain message keys one neutral message stands for."""
_PROMPT = "langchain_system_prompt"
"""Neutral ``extra`` key: the system message is a request's system prompt (how an older
ctxwise recorded the first one; read from a session's log, never written now)."""


# ---------------------------------------------------------------- mapping


def _key(message: BaseMessage) -> str:
    """How a LangChain message is known: its id, else a hash of its content."""
    if message.id:
        return str(message.id)
    body = json.dumps(
        [type(message).__name__, message.model_dump(exclude={"id"})],
        sort_keys=True,
        default=str,
        ensure_ascii=False,
    )
    return "h:" + hashlib.sha256(body.encode()).hexdigest()[:32]


def _parts(content: str | list[str | dict[str, Any]], where: str) -> list[ContentBlock]:
    """A LangChain ``content`` as neutral blocks (text; any other part kept as is)."""
    if isinstance(content, str):
        return [TextBlock(content)] if content else []
    out: list[ContentBlock] = []
    for i, part in enumerate(content):
        if isinstance(part, str):
            out.append(TextBlock(part))
        elif isinstance(part, dict) and part.get("type") == "text":
            out.append(TextBlock(str(part.get("text", ""))))
        elif isinstance(part, dict) and part.get("type") in ("tool_use", "tool_call"):
            continue  # the message's tool_calls carry the call
        elif isinstance(part, dict) and isinstance(part.get("type"), str):
            out.append(OpaqueBlock(str(part["type"]), dict(part)))
        else:
            raise IntegrationError(
                FRAMEWORK,
                "message",
                f"{where}: content part {i} ({type(part).__name__}) cannot be mapped",
            )
    return out


def _tool_result(message: ToolMessage, where: str) -> ToolResultBlock:
    blocks = _parts(message.content, where)
    content: str | tuple[ContentBlock, ...]
    if all(isinstance(b, TextBlock) for b in blocks):
        content = "".join(b.text for b in blocks if isinstance(b, TextBlock))
    else:
        content = tuple(blocks)
    return ToolResultBlock(
        message.tool_call_id, content, is_error=True if message.status == "error" else None
    )


def _neutral(message: Message, keys: list[str]) -> Message:
    return Message(
        message.role,
        message.content,
        plain=message.plain,
        id=keys[0],
        extra={_IDS: list(keys)},
    )


def from_langchain(messages: Sequence[BaseMessage]) -> list[Message]:
    """LangChain messages as ctxwise messages (each remembers the LangChain
    messages it stands for in ``extra["langchain_ids"]``).

    ``HumanMessage`` → a user message; ``AIMessage`` → an assistant message with
    its ``tool_calls`` as tool-use blocks (consecutive ``AIMessage``\\ s with
    unanswered calls join into one); ``ToolMessage``\\ s → tool-result blocks of
    one user message (a ``HumanMessage`` right after them joins it, as Anthropic's
    API reads it); ``SystemMessage`` → a system message. Non-text content parts
    are kept as opaque blocks.

    Raises:
        IntegrationError: (reason ``"message"``) a message type ctxwise cannot map
            (``ChatMessage``, ``FunctionMessage``, ``RemoveMessage``, ...), named.
    """
    out: list[Message] = []
    keys: list[list[str]] = []
    pending = False  # the last assistant turn has calls not yet answered
    in_results = False  # the last user turn holds tool results
    for i, m in enumerate(messages):
        where = f"message {i} ({type(m).__name__})"
        key = _key(m)
        if isinstance(m, SystemMessage):
            out.append(Message("system", tuple(_parts(m.content, where))))
            keys.append([key])
            pending = in_results = False
        elif isinstance(m, AIMessage):
            blocks = _parts(m.content, where)
            blocks += [
                ToolUseBlock(str(c["id"]), c["name"], dict(c["args"]))
                for c in m.tool_calls
                if c.get("id") is not None
            ]
            if any(c.get("id") is None for c in m.tool_calls):
                raise IntegrationError(FRAMEWORK, "message", f"{where}: a tool call has no id")
            if pending and out and out[-1].role == "assistant":
                out[-1] = Message("assistant", (*out[-1].content, *blocks))
                keys[-1].append(key)
            else:
                plain = isinstance(m.content, str) and not m.tool_calls
                out.append(Message("assistant", tuple(blocks), plain=plain))
                keys.append([key])
            pending = bool(m.tool_calls) or (pending and not m.tool_calls)
            in_results = False
        elif isinstance(m, ToolMessage):
            result = _tool_result(m, where)
            if in_results and out:
                out[-1] = Message("user", (*out[-1].content, result))
                keys[-1].append(key)
            else:
                out.append(Message("user", (result,)))
                keys.append([key])
            in_results = True
            pending = False
        elif isinstance(m, HumanMessage):
            blocks = _parts(m.content, where)
            if in_results and out:
                out[-1] = Message("user", (*out[-1].content, *blocks))
                keys[-1].append(key)
            else:
                out.append(Message("user", tuple(blocks), plain=isinstance(m.content, str)))
                keys.append([key])
            in_results = pending = False
        else:
            raise IntegrationError(
                FRAMEWORK,
                "message",
                f"{where}: ctxwise cannot map a {type(m).__name__}; the history is unchanged",
            )
    return [_neutral(m, k) for m, k in zip(out, keys, strict=True)]


def _lc_thinking(block: ThinkingBlock) -> dict[str, Any]:
    """A thinking block as the content part Anthropic's API takes back (its signature
    kept: a thinking block without one is refused)."""
    if block.redacted:
        return {"type": "redacted_thinking", "data": block.thinking}
    part: dict[str, Any] = {"type": "thinking", "thinking": block.thinking}
    if block.signature is not None:
        part["signature"] = block.signature
    return part


def _lc_media(block: MediaBlock) -> dict[str, Any]:
    """An image or document as a LangChain standard content block (``type`` image or
    file; base64 data, a URL or a file id)."""
    source = block.source
    kind = "image" if block.media == "image" else "file"
    if source.get("type") == "base64":
        part = {"type": kind, "base64": source.get("data"), "mime_type": source.get("media_type")}
    elif source.get("type") == "url":
        part = {"type": kind, "url": source.get("url")}
    elif source.get("type") == "file":
        part = {"type": kind, "file_id": source.get("file_id")}
    elif source.get("type") == "text":
        part = {"type": "text-plain", "text": source.get("data"), "mime_type": "text/plain"}
    else:
        raise IntegrationError(
            FRAMEWORK,
            "message",
            f"a {block.media} given by {source.get('type')!r} has no LangChain content block",
        )
    return {k: v for k, v in part.items() if v is not None}


def _lc_content(blocks: Sequence[ContentBlock], plain: bool) -> str | list[str | dict[str, Any]]:
    if plain and all(isinstance(b, TextBlock) for b in blocks) and len(blocks) <= 1:
        return blocks[0].text if blocks and isinstance(blocks[0], TextBlock) else ""
    out: list[str | dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, TextBlock):
            out.append({"type": "text", "text": b.text})
        elif isinstance(b, OpaqueBlock):
            out.append(dict(b.data))
        elif isinstance(b, ThinkingBlock):
            out.append(_lc_thinking(b))
        elif isinstance(b, MediaBlock):
            out.append(_lc_media(b))
        else:  # pragma: no cover - tool blocks are taken out by the callers
            raise IntegrationError(
                FRAMEWORK, "message", f"a {type(b).__name__} has no LangChain content part"
            )
    if len(out) == 1 and isinstance(out[0], dict) and out[0].get("type") == "text" and plain:
        return str(out[0]["text"])
    return out


def to_langchain(messages: Sequence[Message]) -> list[BaseMessage]:
    """ctxwise messages as LangChain messages (the inverse of :func:`from_langchain`;
    a compaction summary is a ``HumanMessage``). A message keeps the id of the
    first LangChain message it stands for; a ``ToolMessage`` is named after the
    call it answers. Images and documents become LangChain standard content
    blocks; thinking keeps its signature.

    Raises:
        IntegrationError: (reason ``"message"``) a block LangChain has no content
            part for (a document given in a way only Anthropic reads), named.
    """
    names = {b.id: b.name for m in messages for b in m.tool_uses}
    return _to_langchain(messages, names)


def _to_langchain(messages: Sequence[Message], names: Mapping[str, str]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for m in messages:
        ids = list(m.extra.get(_IDS) or ([m.id] if m.id else []))
        first = ids[0] if ids else None
        if m.role == "system":
            out.append(SystemMessage(content=_lc_content(m.content, True), id=first))
        elif m.role == "assistant":
            calls = [
                {"name": b.name, "args": dict(b.input), "id": b.id, "type": "tool_call"}
                for b in m.tool_uses
            ]
            rest: list[ContentBlock] = [b for b in m.content if not isinstance(b, ToolUseBlock)]
            out.append(
                AIMessage(
                    content=_lc_content(rest, m.plain or not rest),
                    tool_calls=calls,
                    id=first,
                )
            )
        else:
            results = m.tool_results
            taken = iter(ids)
            for r in results:
                content: str | list[str | dict[str, Any]] = (
                    r.content if isinstance(r.content, str) else _lc_content(r.content, False)
                )
                out.append(
                    ToolMessage(
                        content=content,
                        tool_call_id=r.tool_use_id,
                        status="error" if r.is_error else "success",
                        id=next(taken, None),
                        name=names.get(r.tool_use_id),
                    )
                )
            rest = [b for b in m.content if not isinstance(b, ToolResultBlock)]
            if rest or not results:
                extra = {"lc_source": "ctxwise"} if m.kind == "compact_summary" else {}
                out.append(
                    HumanMessage(
                        content=_lc_content(rest, m.plain),
                        id=next(taken, None) if results else first,
                        additional_kwargs=extra,
                    )
                )
    return out


# ---------------------------------------------------------------- the middleware


def _prompt_text(message: SystemMessage | None) -> str | None:
    """A request's system prompt as the Engine counts it (``None``: none, or blank)."""
    if message is None or not message.text.strip():
        return None
    return message.text


def _sync_keys(message: Message) -> tuple[str, ...]:
    """The keys of the LangChain messages a neutral message stands for (none for a
    system prompt an older ctxwise recorded)."""
    return tuple(str(k) for k in message.extra.get(_IDS, ()))


_KEYS = SyncKeys(_sync_keys, ids=True)
"""How :meth:`Engine.sync` compares a graph's messages with the session's: by id."""


def _units(messages: Sequence[BaseMessage]) -> list[Message]:
    """The history as :meth:`Engine.sync` compares it: one message per LangChain message
    (the neutral form groups some), holding only its key."""
    return [Message(_role(m), (), extra={_IDS: [_key(m)]}) for m in messages]


def _role(message: BaseMessage) -> Literal["system", "user", "assistant"]:
    if isinstance(message, AIMessage):
        return "assistant"
    return "system" if isinstance(message, SystemMessage) else "user"


@dataclass(slots=True)
class _Known:
    """What this middleware knows of a session: the LangChain messages behind each
    neutral message it mapped, by the neutral message's id."""

    originals: dict[str, tuple[Message, list[BaseMessage]]]
    prompts: list[str]
    """The request system prompts an older ctxwise recorded in the session (see
    :meth:`CtxwiseMiddleware._recorded_prompts`)."""
    """The request system prompts the session's log holds: those an older ctxwise
    recorded as system messages (the prompt is now the turn's ``system``, never
    recorded). They are never sent: this call's prompt stands in their place."""


class CtxwiseMiddleware(AgentMiddleware):
    """ctxwise as a LangChain agent middleware (see the module docstring).

    ``engine``: the :class:`~ctxwise.Engine` (its config sets the budget, clearing,
    compaction, rules, facts, sources and gates). ``session_id``: one session for
    every run; by default the LangGraph thread id names the session.
    ``persist``: write a cleared or compacted history back into the graph state.
    ``gate_tools``: check every tool call with :meth:`Engine.check_tool`.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        session_id: str | None = None,
        persist: bool = False,
        gate_tools: bool = True,
    ) -> None:
        super().__init__()
        if not isinstance(engine, Engine):
            raise IntegrationError(
                FRAMEWORK, "config", f"engine must be a ctxwise Engine, got {type(engine).__name__}"
            )
        if session_id is not None and (not isinstance(session_id, str) or not session_id.strip()):
            raise IntegrationError(FRAMEWORK, "config", "session_id must be a non-empty string")
        self.engine = engine
        self.session_id = session_id
        self.persist = persist
        self.gate_tools = gate_tools
        self.last: TurnResult | None = None
        """The last turn's result (its ``trace`` says what was cleared, compacted, kept)."""
        self._known: dict[str, _Known] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------ sessions

    def _session(self, runtime: Any) -> str:
        if self.session_id is not None:
            return self.session_id
        info = getattr(runtime, "execution_info", None)
        thread = getattr(info, "thread_id", None)
        if not thread:
            config = getattr(runtime, "config", None)
            if config is None:
                from langgraph.config import get_config

                try:
                    config = get_config()
                except RuntimeError:
                    config = None
            thread = ((config or {}).get("configurable") or {}).get("thread_id")
        if not thread:
            raise IntegrationError(
                FRAMEWORK,
                "config",
                "no session: give CtxwiseMiddleware(session_id=...) or run the graph with "
                "a checkpointer and config={'configurable': {'thread_id': ...}}",
            )
        return str(thread)

    def _known_for(self, session_id: str) -> _Known:
        known = self._known.get(session_id)
        if known is None:
            known = self._known[session_id] = _Known({}, self._recorded_prompts(session_id))
        return known

    def _recorded_prompts(self, session_id: str) -> list[str]:
        """The request system prompts an older ctxwise recorded in the session as system
        messages (the prompt is now the turn's ``system``, never recorded), read once:
        they are never sent, this call's prompt stands in their place."""
        prompts: list[str] = []
        if self.engine.sessions.version(session_id):
            for m in neutral.decode_messages(self.engine.sessions.log(session_id)):
                # a request's system prompt, not a SystemMessage of the history
                if m.role == "system" and (m.extra.get(_PROMPT) or not m.extra.get(_IDS)):
                    prompts.append(m.text.strip())
        return prompts

    def _new(
        self, session_id: str, messages: Sequence[BaseMessage]
    ) -> tuple[int, list[BaseMessage]]:
        """The session's version and the messages it has not had yet (:meth:`Engine.sync`,
        by LangChain message id). A thread that was rewound (run from an earlier
        checkpoint, messages taken out with ``RemoveMessage``) while the session holds
        the later turns is refused: the model would get the turns the thread left behind."""
        try:
            found = self.engine.sync(session_id, _units(messages), _KEYS)
        except HistoryRewoundError as exc:
            raise IntegrationError(
                FRAMEWORK,
                "message",
                f"{exc}: the thread was rewound (run from an earlier checkpoint, or messages "
                "removed); give the fork a new thread_id, or CtxwiseMiddleware(session_id=...)",
            ) from exc
        return found.version, list(messages[found.start :])

    # ------------------------------------------------------------ the model call

    def prepare(self, request: ModelRequest) -> tuple[ModelRequest, TurnResult]:
        """The request with the Engine's window: its messages and system message.

        Raises:
            IntegrationError: a message type that cannot be mapped (nothing recorded).
            PairingError: the new messages hold an orphan tool result or a call
                never answered (the Engine refuses them; nothing recorded).
        """
        with self._lock:
            session_id = self._session(request.runtime)
            for attempt in range(1, self.engine.max_attempts + 1):
                known = self._known_for(session_id)
                version, new = self._new(session_id, request.messages)
                mapped = from_langchain(new)
                prompt = _prompt_text(request.system_message)
                try:
                    # what is new was worked out at this version: another writer's
                    # commit in between changes it, so the turn is worked out again
                    result = self.engine.turn(
                        session_id,
                        mapped,
                        expected_version=version,
                        system=prompt,
                        tools=_tool_definitions(request),  # counted in the budget
                        warn_unanswered=False,  # the framework's history is what it is
                    )
                except SessionConflictError:
                    if attempt == self.engine.max_attempts:
                        raise
                    continue
                break
            by_key = {_key(m): m for m in new}
            for m in mapped:
                ids = [str(k) for k in m.extra.get(_IDS, ())]
                if m.role == "system" or not ids:
                    continue
                known.originals[ids[0]] = (m, [by_key[k] for k in ids if k in by_key])
            self.last = result
            system, messages = self._window(known, result.window.messages, request.system_message)
        return request.override(messages=messages, system_message=system), result

    def _window(
        self, known: _Known, window: Sequence[Message], given: SystemMessage | None = None
    ) -> tuple[SystemMessage | None, list[AnyMessage]]:
        """The window as the request's system message and messages. The request's own
        system message comes first, as it was given (its content blocks, cache marks
        included), where the window holds its text (the turn's ``system``, which the
        Engine puts first); the prompts an older ctxwise recorded are taken out."""
        parts: list[str] = []
        body = list(window)
        if body and body[0].role == "system":
            parts = [b.text for b in body[0].content if isinstance(b, TextBlock)]
            body = body[1:]
        prompt = _prompt_text(given)
        stale = [p for p in known.prompts if prompt is None or p != prompt.strip()]
        parts = without_texts(parts, [prompt or "", *stale])
        if given is not None and prompt is not None:
            if isinstance(given.content, str):
                content: str | list[str | dict[str, Any]] = "\n\n".join([given.content, *parts])
            else:
                content = [*given.content, *({"type": "text", "text": p} for p in parts)]
            return given.model_copy(update={"content": content}), self._lc(known, body)
        if not parts:
            return None, self._lc(known, body)
        content = parts[0] if len(parts) == 1 else [{"type": "text", "text": p} for p in parts]
        return SystemMessage(content=content), self._lc(known, body)

    @staticmethod
    def _lc(known: _Known, messages: Sequence[Message]) -> list[AnyMessage]:
        """The window as LangChain messages: each message the Engine left as it was
        is the very message given; an edited one is rebuilt, a ``ToolMessage``
        keeping its original's name, artifact and metadata (only its content was
        cleared)."""
        names = {b.id: b.name for m in messages for b in m.tool_uses}
        out: list[AnyMessage] = []
        for m in messages:
            hit = known.originals.get(m.id) if m.id else None
            if hit is not None and hit[0] == m and len(hit[1]) == 1:
                out.append(hit[1][0])  # type: ignore[arg-type]
                continue
            given = {o.id: o for o in hit[1]} if hit is not None else {}
            for rebuilt in _to_langchain([m], names):
                original = given.get(rebuilt.id)
                if isinstance(rebuilt, ToolMessage) and isinstance(original, ToolMessage):
                    rebuilt = rebuilt.model_copy(
                        update={
                            "name": original.name or rebuilt.name,
                            "artifact": original.artifact,
                            "additional_kwargs": dict(original.additional_kwargs),
                            "response_metadata": dict(original.response_metadata),
                        }
                    )
                out.append(rebuilt)  # type: ignore[arg-type]
        return out

    def _persisted(
        self,
        request: ModelRequest,
        result: TurnResult,
        response: ModelResponse,
    ) -> ExtendedModelResponse | ModelResponse:
        trace = result.trace
        if not self.persist or (trace.compacted is None and not trace.cleared):
            return response
        session_id = self._session(request.runtime)
        with self._lock:
            known = self._known_for(session_id)
            history = self._lc(known, self.engine.session_messages(session_id))
            turn = trace.turn
            for i, m in enumerate(history):
                if m.id is None:  # a message ctxwise wrote (a summary)
                    m.id = f"ctxwise:{session_id}:{turn}:{i}"
        reply: list[BaseMessage] = []
        for i, r in enumerate(response.result):
            if r.id is None:
                r = r.model_copy(update={"id": f"ctxwise:{session_id}:{turn}:reply:{i}"})
            reply.append(r)
        kept = ModelResponse(result=reply, structured_response=response.structured_response)
        update = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *history, *reply]
        return ExtendedModelResponse(
            model_response=kept, command=Command(update={"messages": update})
        )

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | ExtendedModelResponse:
        edited, result = self.prepare(request)
        return self._persisted(request, result, handler(edited))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | ExtendedModelResponse:
        edited, result = await asyncio.to_thread(self.prepare, request)
        response = await handler(edited)
        return await asyncio.to_thread(self._persisted, request, result, response)

    # ------------------------------------------------------------ tool calls

    def blocked(self, request: ToolCallRequest) -> ToolMessage | None:
        """The error ``ToolMessage`` for a call the gates refuse (``None``: it may run).
        A gate that cannot be evaluated refuses, saying why."""
        call = request.tool_call
        name = str(call.get("name"))
        call_id = str(call.get("id"))
        try:
            session_id = self._session(request.runtime)
            with self._lock:
                decision = self.engine.check_tool(session_id, name, dict(call.get("args") or {}))
        except Exception as exc:  # fail closed: a gate that cannot be evaluated blocks
            return ToolMessage(
                content=(
                    f"Tool call {name!r} was not run: ctxwise could not evaluate the policy "
                    f"gates ({type(exc).__name__}: {exc}); it fails closed."
                ),
                tool_call_id=call_id,
                name=name,
                status="error",
            )
        if isinstance(decision, Blocked):
            return ToolMessage(
                content=(
                    f"Tool call {name!r} was blocked by rule {decision.rule.name!r}: "
                    f"{decision.reason}"
                ),
                tool_call_id=call_id,
                name=name,
                status="error",
            )
        return None

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        refused = self.blocked(request) if self.gate_tools else None
        return refused if refused is not None else handler(request)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        refused = await asyncio.to_thread(self.blocked, request) if self.gate_tools else None
        return refused if refused is not None else await handler(request)


def _tool_definitions(request: ModelRequest) -> list[dict[str, Any]]:
    """The tools the model request binds, as definitions the Engine counts in the
    budget (LangChain sends them itself, beside the messages): a ``BaseTool`` in
    OpenAI's function shape, a provider's tool dict as it is."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    out: list[dict[str, Any]] = []
    for tool in request.tools or ():
        out.append(dict(tool) if isinstance(tool, Mapping) else convert_to_openai_tool(tool))
    return out
