"""OpenAI Agents SDK integration (extra ``openai-agents``): the window, the gates, the session.

Three pieces, each on one of the SDK's own extension points:

- :func:`call_model_input_filter` builds a :class:`ContextFilter` for
  ``RunConfig(call_model_input_filter=...)``. Before every model call it maps the
  SDK's input items (Responses API items) to ctxwise messages, runs the Engine's
  turn on what is new since the Engine last saw the conversation (old tool results
  cleared, history compacted under the budget, pinned facts and rules, routed
  sources) and hands the model the Engine's window: ``instructions`` is the
  agent's instructions of this call, then the window's system part (the pinned
  rules and facts), ``input`` its turns. The instructions of each call go to the
  Engine as the turn's ``system``, so the budget counts the very instructions sent,
  however they change between calls (a handoff, dynamic instructions); they are not
  kept in the session, and the model gets only the current ones. (A session recorded
  by an older ctxwise holds the first instructions it was given among its system
  texts: they are not sent, and are still counted when they differ from the current
  ones, which leaves the request that much under the budget.) Items the Engine kept come back as
  they were given (ids, statuses, raw argument strings); a ``function_call_output``
  is never sent without its ``function_call``. An item ctxwise cannot map raises
  :class:`~ctxwise.errors.IntegrationError` (reason ``"message"``) naming it,
  before anything is written; so does an input that starts where the session
  starts but leaves out turns the session has (items popped from the SDK session):
  a session only grows, and the model would get the turns that were taken out. A
  history read with a limit (``SessionSettings(limit=N)``: the last ``N`` items, the
  outputs whose calls the limit cut left out) is lined up with the end of the
  session; one that holds model-made items from the middle of the session and stops
  before its end is a rewind too, refused the same way.
- :func:`policy_guardrail` builds a ``ToolInputGuardrail`` over
  :meth:`Engine.check_tool <ctxwise.engine.Engine.check_tool>`: a blocked call
  never runs and the model gets, as the tool's output, which rule blocked it and
  why. A gate that cannot be evaluated (arguments that are not a JSON object, a
  store that fails) blocks too.
- :class:`CtxwiseSession` implements the SDK's ``Session`` protocol over a ctxwise
  memory store (SQLite by default, PostgreSQL with a ``postgresql://`` URL): one
  namespace per session, one store item per SDK item, stored as JSON in insertion
  order, so items round-trip exactly.

::

    engine = Engine(EngineConfig(budget=8000))
    run_config = RunConfig(call_model_input_filter=call_model_input_filter(engine, "user-42"))
    guard = policy_guardrail(engine, "user-42")
    refund = function_tool(issue_refund, tool_input_guardrails=[guard])
    session = CtxwiseSession("user-42", "sqlite:///agents.db")
    result = await Runner.run(agent, "Where is my order?", run_config=run_config, session=session)

The session id may also be a function of the run's context object (what
``Runner.run(..., context=...)`` was given), for one filter serving many users.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ctxwise._io import parse_json
from ctxwise.engine import SyncKeys
from ctxwise.errors import (
    FormatError,
    HistoryRewoundError,
    IntegrationError,
    SessionConflictError,
    UsageError,
)
from ctxwise.formats import responses
from ctxwise.formats.request import CONTEXT_CLOSE, CONTEXT_OPEN
from ctxwise.integrations._framework import require_framework, without_texts
from ctxwise.memory.facts import CaseFacts
from ctxwise.memory.sqlite import SQLiteStore
from ctxwise.memory.store import (
    MAX_TEXT_CHARS,
    MemoryItem,
    NewItem,
    Store,
    check_namespace,
    namespace_part,
)
from ctxwise.memory.urls import open_store
from ctxwise.messages import (
    Message,
    OpaqueBlock,
    TextBlock,
    ToolResultBlock,
    block_text,
)
from ctxwise.policy import Allowed, Blocked
from ctxwise.sessions import check_session_id
from ctxwise.tokens import TokenCounter, truncate_to_tokens

FRAMEWORK = "openai-agents"
SUPPORTED = ">=0.24,<0.25"

require_framework(FRAMEWORK, SUPPORTED, "openai-agents", "the OpenAI Agents SDK integration")

from agents import (  # noqa: E402 - after the version check, which names the extra
    Agent,
    ModelResponse,
    RunContextWrapper,
    RunHooks,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
)
from agents.memory import SessionSettings  # noqa: E402
from agents.memory.session_settings import resolve_session_limit  # noqa: E402
from agents.run_config import ModelInputData  # noqa: E402

if TYPE_CHECKING:
    from agents import TResponseInputItem
    from agents.run_config import CallModelData

    from ctxwise.engine import Engine, TurnResult

__all__ = [
    "ContextFilter",
    "CtxwiseSession",
    "SessionId",
    "call_model_input_filter",
    "item_key",
    "policy_guardrail",
    "to_items",
    "to_messages",
]

SessionId = str | Callable[[Any], str]
"""A session id, or a function of the run's context object returning one."""

EXTRA = responses.EXTRA
"""The key under which a block's ``extra`` keeps what its SDK item needs to come back."""


_locks: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_locks_guard = threading.Lock()


def _engine_lock(engine: Engine) -> threading.Lock:
    """One lock per Engine: an Engine is used by one thread at a time."""
    with _locks_guard:
        lock = _locks.get(engine)
        if lock is None:
            lock = _locks[engine] = threading.Lock()
        return lock


def _check_engine(engine: Any) -> None:
    from ctxwise.engine import Engine

    if not isinstance(engine, Engine):
        raise IntegrationError(
            FRAMEWORK, "config", f"engine must be a ctxwise Engine, got {type(engine).__name__}"
        )


def _resolve(session_id: SessionId, context: Any) -> str:
    sid = session_id(context) if callable(session_id) else session_id
    return check_session_id(sid)


# ------------------------------------------------------------------ the codec's errors
# The Responses items codec is ctxwise.formats.responses; here its FormatError is the
# integration's IntegrationError (reason "message"), as the SDK's users catch it.


def item_key(item: Any, index: int = 0) -> str:
    """What identifies an input item across model calls and runs: its content, not
    its ``id`` or ``status`` (the SDK may drop those between calls). Raises
    :class:`~ctxwise.errors.IntegrationError` for an item ctxwise cannot map."""
    try:
        return responses.item_key(item, index)
    except FormatError as exc:
        raise _unmapped(exc.detail) from None


def to_messages(
    items: Sequence[Any], *, start: int = 0, keys: Sequence[str] | None = None
) -> list[Message]:
    """Responses API input items as ctxwise messages
    (:func:`ctxwise.formats.responses.to_messages`); an item ctxwise cannot map is an
    :class:`~ctxwise.errors.IntegrationError` (reason ``"message"``)."""
    try:
        return responses.to_messages(items, start=start, keys=keys)
    except FormatError as exc:
        raise _unmapped(exc.detail) from None


def to_items(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """A window (ctxwise messages) as the SDK's model input
    (:func:`ctxwise.formats.responses.to_items`): the system messages' text as
    ``instructions`` (``None`` without any), the rest as input items. Content with no
    Responses form is an :class:`~ctxwise.errors.IntegrationError` (reason
    ``"message"``), never replaced in silence."""
    try:
        return responses.to_items(messages)
    except FormatError as exc:
        raise IntegrationError(FRAMEWORK, "message", exc.detail) from None


def _unmapped(detail: str) -> IntegrationError:
    return IntegrationError(FRAMEWORK, "message", f"{detail}; the input was left unchanged")


def _check_pairs(items: Sequence[Mapping[str, Any]]) -> None:
    calls: set[str] = set()
    for i, item in enumerate(items):
        if item.get("type") == "function_call":
            calls.add(str(item.get("call_id")))
        elif item.get("type") == "function_call_output" and item.get("call_id") not in calls:
            raise IntegrationError(
                FRAMEWORK,
                "message",
                f"the window would send function_call_output {item.get('call_id')!r} "
                f"(item {i}) without its function_call; nothing was sent",
            )


# ------------------------------------------------------------------ the filter


def _sync_keys(message: Message) -> list[str]:
    """The keys of the input items a message stands for (:func:`item_key`, kept in each
    block's mark; a stand-in of :func:`_units` holds its own)."""
    given = message.extra.get(_KEYS_EXTRA)
    if isinstance(given, list):
        return given
    keys: list[str] = []
    last = None
    for b in message.content:
        mark = responses.mark_of(b)
        if mark is not None and mark["seq"] != last:
            keys.append(str(mark["key"]))
            last = mark["seq"]
    return keys


_KEYS_EXTRA = "openai_agents.keys"
_KEYS = SyncKeys(_sync_keys)
"""How :meth:`Engine.sync` compares the SDK's input with the session: by item content
(the SDK may drop an item's ``id`` and ``status`` between calls)."""

_MODEL_MADE = frozenset({"function_call", "reasoning"})


def _units(items: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[Message]:
    """The input as :meth:`Engine.sync` compares it: one stand-in per item, holding its
    key, an assistant message for what only a model run makes (its messages, calls and
    reasoning) and a tool result for a call's output."""
    out = []
    for item, key in zip(items, keys, strict=True):
        kind = item.get("type") or "message"
        extra = {_KEYS_EXTRA: [key]}
        if kind == "function_call_output":
            result = ToolResultBlock(str(item.get("call_id")), "")
            out.append(Message("user", (result,), extra=extra))
        elif kind in _MODEL_MADE or item.get("role") == "assistant":
            out.append(Message("assistant", (), extra=extra))
        else:
            out.append(Message("user", (), extra=extra))
    return out


INSTRUCTIONS = "instructions"
"""Block mark of instructions an older ctxwise recorded (read from a log, never written)."""


class ContextFilter:
    """A ``call_model_input_filter``: the Engine's window for every model call (see
    the module docstring). ``last`` is the latest turn's
    :class:`~ctxwise.engine.TurnResult` (its ``trace`` says what was cleared,
    compacted, routed and pinned); ``last_cut`` the tokens cut from the end of that
    turn's context block, which goes out as an item of its own (see
    :func:`_fit_context`), to keep the request within the budget (``0`` mostly)."""

    def __init__(self, engine: Engine, session_id: SessionId) -> None:
        _check_engine(engine)
        if not callable(session_id):
            check_session_id(session_id)
        self.engine = engine
        self.session_id = session_id
        self.last: TurnResult | None = None
        self.last_cut = 0
        self._said: dict[str, set[str]] = {}

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        sid = _resolve(self.session_id, data.context)
        given = list(data.model_data.input)
        keys = [item_key(item, i) for i, item in enumerate(given)]
        instructions = data.model_data.instructions
        tools = _tool_definitions(data.agent)
        lock = _engine_lock(self.engine)

        def turn() -> tuple[str | None, list[dict[str, Any]]]:
            with lock:
                return self._turn(sid, given, keys, instructions, tools)

        text, items = await asyncio.to_thread(turn)
        return ModelInputData(input=cast("list[TResponseInputItem]", items), instructions=text)

    def _instructions(self, sid: str) -> set[str]:
        """The instructions an older ctxwise recorded in the session as system messages
        (they are now the turn's ``system``, never recorded), read from its log once:
        never sent."""
        said = self._said.get(sid)
        if said is None:
            said = self._said[sid] = set()
            if self.engine.sessions.version(sid):
                from ctxwise.formats import neutral

                for m in neutral.decode_messages(self.engine.sessions.log(sid)):
                    for b in m.content:
                        mark = b.extra.get(EXTRA) if not isinstance(b, OpaqueBlock) else None
                        instructions = isinstance(mark, Mapping) and mark.get(INSTRUCTIONS)
                        if instructions and isinstance(b, TextBlock):
                            said.add(b.text.strip())
        return said

    @property
    def hooks(self) -> RunHooks[Any]:
        """Run hooks (``Runner.run(..., hooks=flt.hooks)``) that record each model
        response in the Engine's session as it arrives. Needed when each run passes
        only its new input (no SDK session): the run's final answer is then never
        part of a later model call's input, and would be missing from the history."""
        return _RecordResponses(self)

    async def arecord(self, context: Any, items: Sequence[Any]) -> None:
        """Record model output ``items`` (as input items) in the Engine's session."""
        sid = _resolve(self.session_id, context)
        given = list(items)
        keys = [item_key(item, i) for i, item in enumerate(given)]
        lock = _engine_lock(self.engine)

        def record() -> None:
            with lock:
                if not given:
                    return
                held = self.engine.sync(sid, (), _KEYS).held  # numbers the items on
                self.engine.record(sid, to_messages(given, start=held, keys=keys))

        await asyncio.to_thread(record)

    def _turn(
        self,
        sid: str,
        given: list[Any],
        keys: list[str],
        instructions: str | None,
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> tuple[str | None, list[dict[str, Any]]]:
        prompt = instructions if instructions and instructions.strip() else None
        units = _units(given, keys)
        for attempt in range(1, self.engine.max_attempts + 1):
            try:
                found = self.engine.sync(sid, units, _KEYS)
            except HistoryRewoundError as exc:
                raise IntegrationError(
                    FRAMEWORK,
                    "message",
                    f"{exc}: the conversation was rewound (items popped from the SDK "
                    "session, or an earlier history passed)",
                ) from exc
            k = found.start
            new = to_messages(given[k:], start=found.held, keys=keys[k:])
            try:
                # the instructions of this call are counted as they are sent, and not
                # kept; what is new was worked out at this version: another writer's
                # commit in between changes it, so it is worked out again
                result = self.engine.turn(
                    sid,
                    new,
                    expected_version=found.version,
                    system=prompt,
                    tools=tools or None,  # the agent's function tools, counted
                    warn_unanswered=False,
                )
            except SessionConflictError:
                if attempt == self.engine.max_attempts:
                    raise
                continue
            break
        self.last = result
        text, items = to_items(result.window.messages)
        _check_pairs(items)
        items, self.last_cut = _fit_context(self.engine.counter, result, items)
        stale = [t for t in self._instructions(sid) if prompt is None or t != prompt.strip()]
        if prompt is not None or stale:
            # the window's system part opens with this call's instructions; those an
            # older ctxwise recorded in the session are taken out (none sent twice)
            system = [
                t
                for m in result.window.messages
                if m.role == "system"
                for t in (block_text(b) for b in m.content)
                if t
            ]
            rest = without_texts(system, [prompt or "", *sorted(stale)])
            text = "\n\n".join([*([prompt] if prompt else []), *rest]) or None
        return text, items


def _fit_context(
    counter: TokenCounter, result: TurnResult, items: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], int]:
    """``items`` within the budget, and the tokens cut from the context block.

    The Engine counts its context block inside the latest user turn (after the tool
    results of a tool-result turn, before the text of a text turn), but it goes out
    as an input item of its own: one more turn, whose overhead the Engine's count
    does not hold. When that overhead passes what the window left of the budget, the
    context block is cut at its end by the difference (a window at most that far
    from the budget); a block left with no room is not sent."""
    block = next(
        (
            b.text
            for m in result.window.messages
            if m.role == "user"
            for b in m.content
            if isinstance(b, TextBlock)
            and responses.mark_of(b) is None
            and b.text.startswith(CONTEXT_OPEN + "\n")
            and b.text.endswith("\n" + CONTEXT_CLOSE)
        ),
        None,
    )
    at = next(
        (
            i
            for i, it in enumerate(items)
            if block is not None and it.get("role") == "user" and it.get("content") == block
        ),
        None,
    )
    if block is None or at is None:
        return items, 0  # no context block, or it shares an item with the turn's text
    tokens = result.trace.tokens
    own = counter.count_messages([Message.text_message("user", block)])
    inside = counter.count(block)  # what the Engine counted for it
    over = tokens.total + own - inside - tokens.available
    if over <= 0:
        return items, 0
    inner = block[len(CONTEXT_OPEN) + 1 : -len(CONTEXT_CLOSE) - 1]
    wanted = inside - over
    room = counter.count(inner) - over
    while room > 0:
        cut = f"{CONTEXT_OPEN}\n{truncate_to_tokens(inner, room, counter)}\n{CONTEXT_CLOSE}"
        if counter.count(cut) <= wanted:
            return [*items[:at], {**items[at], "content": cut}, *items[at + 1 :]], (
                inside - counter.count(cut)
            )
        room -= 1
    return [*items[:at], *items[at + 1 :]], inside  # no room left for it: not sent


class _RecordResponses(RunHooks[Any]):
    def __init__(self, flt: ContextFilter) -> None:
        self.filter = flt

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        await self.filter.arecord(context.context, response.to_input_items())


def call_model_input_filter(engine: Engine, session_id: SessionId) -> ContextFilter:
    """A ``RunConfig(call_model_input_filter=...)`` that sends the model the Engine's
    window for session ``session_id`` (or ``session_id(context)``)."""
    return ContextFilter(engine, session_id)


# ------------------------------------------------------------------ the gates


def policy_guardrail(
    engine: Engine, session_id: SessionId, *, name: str = "ctxwise_policy"
) -> ToolInputGuardrail[Any]:
    """A ``ToolInputGuardrail`` that asks the Engine's policy gates before a function
    tool runs (``function_tool(..., tool_input_guardrails=[...])``).

    Allowed: the tool runs. Blocked: it does not; the model gets, as the tool's
    output, the rule's name and its reason. A call that cannot be checked (arguments
    that are not a JSON object, a store error, a bad session id) is blocked and the
    model is told why. ``output_info`` holds the decision (``Blocked.to_dict()``).
    A session the Engine has not seen yet is checked against the configured rules
    with no case facts (what its first turn would start from).
    """
    _check_engine(engine)
    lock = _engine_lock(engine)

    def check(sid: str, tool: str, tool_input: Mapping[str, Any]) -> Allowed | Blocked:
        with lock:
            if engine.sessions.version(sid) == 0:
                return engine.gate.check(tool, tool_input, CaseFacts())
            return engine.check_tool(sid, tool, tool_input)

    async def ctxwise_policy(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx = data.context
        tool = ctx.tool_name
        try:
            sid = _resolve(session_id, ctx.context)
            raw = ctx.tool_arguments or "{}"
            try:
                tool_input = parse_json(raw)
            except ValueError as exc:
                raise UsageError(f"its arguments are not JSON ({exc})") from None
            if not isinstance(tool_input, dict):
                raise UsageError(f"its arguments are a {type(tool_input).__name__}, not an object")
            decision = await asyncio.to_thread(check, sid, tool, tool_input)
        except Exception as exc:  # fail closed: what cannot be checked does not run
            return ToolGuardrailFunctionOutput.reject_content(
                f"Tool call {tool!r} was not run: the policy gate could not check it ({exc}).",
                output_info={"allowed": False, "tool": tool, "rule": None, "reason": str(exc)},
            )
        if isinstance(decision, Blocked):
            return ToolGuardrailFunctionOutput.reject_content(
                f"Tool call {tool!r} was blocked by rule {decision.rule.name!r}: {decision.reason}",
                output_info=decision.to_dict(),
            )
        return ToolGuardrailFunctionOutput.allow(output_info=decision.to_dict())

    return ToolInputGuardrail(guardrail_function=ctxwise_policy, name=name)


# ------------------------------------------------------------------ the session


DEFAULT_STORE = "sqlite:///ctxwise.db"


class CtxwiseSession:
    """The SDK's ``Session`` protocol over a ctxwise memory store.

    ``store`` is a store URL (``sqlite:///PATH``, ``postgresql://...``, ``memory``),
    a file path (a SQLite file), or a :class:`~ctxwise.memory.Store` (left open on
    :meth:`close`). Items live in the namespace ``(namespace, "openai_agents",
    session_id)``; each is one store item holding its JSON (split over several
    items, written together, when it passes the store's item size), so a
    session's items come back exactly, in order, and no session sees another's.
    ``schema`` and ``dim`` are passed to a PostgreSQL store (``dim`` is the store's
    embedding dimension; the Engine's hashing embedder's by default).

    Store calls run in a worker thread, one at a time per session object.
    """

    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        store: str | os.PathLike[str] | Store = DEFAULT_STORE,
        *,
        namespace: str = "ctxwise",
        schema: str = "ctxwise",
        dim: int | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = check_session_id(session_id)
        self.session_settings = (
            session_settings if session_settings is not None else SessionSettings()
        )
        self.namespace = check_namespace((namespace, EXTRA, namespace_part(session_id)))
        self._own = False
        if isinstance(store, Store):
            self.store = store
        elif isinstance(store, os.PathLike) or (
            isinstance(store, str) and "://" not in store and store != "memory"
        ):
            self.store = SQLiteStore(Path(store))
            self._own = True
        elif isinstance(store, str):
            if dim is None:
                from ctxwise.embeddings import HashingEmbedder

                dim = HashingEmbedder().dim
            self.store = open_store(store, dim=dim, schema=schema)
            self._own = True
        else:
            raise IntegrationError(
                FRAMEWORK,
                "config",
                f"store is a URL, a path or a Store, got {type(store).__name__}",
            )
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def for_engine(
        cls, engine: Engine, session_id: str, *, session_settings: SessionSettings | None = None
    ) -> CtxwiseSession:
        """A session on the Engine's own store (its memory store, or its ``store`` URL)."""
        store: str | Store = (
            engine.memory if engine.memory is not None else engine.config.store_url()
        )
        return cls(
            session_id,
            store,
            namespace=engine.config.memory.namespace,
            dim=engine.embedder.dim,
            session_settings=session_settings,
        )

    def close(self) -> None:
        """Close the store when this session opened it (the session cannot be used
        after that: :class:`~ctxwise.errors.IntegrationError`, reason ``"config"``)."""
        with self._lock:
            if self._own:
                self.store.close()
                self._own = False
                self._closed = True

    def __enter__(self) -> CtxwiseSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- sync core

    @staticmethod
    def _group(rows: Sequence[MemoryItem]) -> list[tuple[list[MemoryItem], Any]]:
        """Rows (oldest first) as (rows, item); a split item whose first parts are
        not among ``rows`` is left out."""
        out: list[tuple[list[MemoryItem], Any]] = []
        current: list[MemoryItem] = []
        for row in rows:
            part = row.metadata.get("part")
            if part is None:
                current = []
                out.append(([row], json.loads(row.text)))
                continue
            if part == 0:
                current = [row]
            elif current and current[-1].metadata.get("part") == part - 1:
                current.append(row)
            else:
                current = []
                continue
            if len(current) == row.metadata.get("parts"):
                out.append((current, json.loads("".join(r.text for r in current))))
                current = []
        return out

    def _get(self, limit: int | None) -> list[Any]:
        if limit is not None and limit == 0:
            return []
        if limit is None or limit < 0:
            rows = self.store.recent(self.namespace, self.store.count(self.namespace))
            return [item for _, item in self._group(rows)]
        window = limit
        while True:
            rows = self.store.recent(self.namespace, window)
            grouped = self._group(rows)
            if len(grouped) >= limit or len(rows) < window:
                return [item for _, item in grouped[-limit:]]
            window *= 2

    def _add(self, items: Sequence[Any]) -> None:
        new: list[NewItem] = []
        for i, item in enumerate(items):
            try:
                text = json.dumps(item)
            except (TypeError, ValueError) as exc:
                raise IntegrationError(
                    FRAMEWORK,
                    "message",
                    f"session item {i} cannot be stored as JSON ({exc}); nothing was written",
                ) from None
            if len(text) <= MAX_TEXT_CHARS:
                new.append(NewItem(text, index_text=""))
                continue
            chunks = [text[j : j + MAX_TEXT_CHARS] for j in range(0, len(text), MAX_TEXT_CHARS)]
            new.extend(
                NewItem(c, {"part": j, "parts": len(chunks)}, index_text="")
                for j, c in enumerate(chunks)
            )
        if new:
            self.store.put_many(self.namespace, new)

    def _pop(self) -> Any:
        window = 1
        while True:
            rows = self.store.recent(self.namespace, window)
            if not rows:
                return None
            grouped = self._group(rows)
            last = rows[-1]
            if grouped and grouped[-1][0][-1].id == last.id:
                group, item = grouped[-1]
            elif len(rows) < window:  # a damaged tail: parts without their start
                group, item = [last], None
            else:
                window = max(window * 2, int(last.metadata.get("parts", 1)))
                continue
            if self.store.delete(self.namespace, [r.id for r in group]):
                if item is None:
                    window = 1
                    continue
                return item
            window = 1

    def _clear(self) -> None:
        rows = self.store.recent(self.namespace, self.store.count(self.namespace))
        if rows:
            self.store.delete(self.namespace, [r.id for r in rows])

    def _locked(self, fn: Callable[..., Any], *args: Any) -> Any:
        with self._lock:
            if self._closed:
                raise IntegrationError(
                    FRAMEWORK,
                    "config",
                    f"CtxwiseSession {self.session_id!r} is closed; open a new one to use "
                    "its items",
                )
            return fn(*args)

    # ---------------------------------------------------------------- the protocol

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; the latest ``limit`` when given
        (default: ``session_settings.limit``)."""
        wanted = resolve_session_limit(limit, self.session_settings)
        items = await asyncio.to_thread(self._locked, self._get, wanted)
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` (all or none)."""
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
            raise IntegrationError(
                FRAMEWORK, "message", f"items is a {type(items).__name__}, not a list of items"
            )
        await asyncio.to_thread(self._locked, self._add, list(items))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the latest item (``None`` when the session is empty)."""
        return cast("TResponseInputItem | None", await asyncio.to_thread(self._locked, self._pop))

    async def clear_session(self) -> None:
        """Remove every item of this session (other sessions are untouched)."""
        await asyncio.to_thread(self._locked, self._clear)


def _tool_definitions(agent: Any) -> list[dict[str, Any]]:
    """The agent's function tools as Responses function definitions, for the Engine
    to count in the budget (the SDK sends them itself, beside the input); hosted
    tools (web search, file search, ...) have no schema here and are left out."""
    out: list[dict[str, Any]] = []
    for tool in getattr(agent, "tools", None) or ():
        schema = getattr(tool, "params_json_schema", None)
        name = getattr(tool, "name", None)
        if not isinstance(schema, Mapping) or not isinstance(name, str):
            continue
        body: dict[str, Any] = {"type": "function", "name": name, "parameters": dict(schema)}
        description = getattr(tool, "description", None)
        if isinstance(description, str) and description:
            body["description"] = description
        out.append(body)
    return out
