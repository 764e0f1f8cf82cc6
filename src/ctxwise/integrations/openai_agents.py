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
import hashlib
import json
import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeGuard, cast

from ctxwise.errors import IntegrationError, UsageError
from ctxwise.formats import openai as openai_codec
from ctxwise.formats._extra import own
from ctxwise.formats.request import CONTEXT_CLOSE, CONTEXT_OPEN
from ctxwise.integrations._framework import require_framework, without_texts
from ctxwise.memory.facts import CaseFacts
from ctxwise.memory.sqlite import SQLiteStore
from ctxwise.memory.store import MAX_TEXT_CHARS, MemoryItem, NewItem, Store, check_namespace
from ctxwise.memory.urls import open_store
from ctxwise.messages import (
    ContentBlock,
    MediaBlock,
    Message,
    OpaqueBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
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

EXTRA = "openai_agents"
"""The key under which a block's ``extra`` keeps what its SDK item needs to come back."""

_TEXT_PARTS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
_MEDIA_PARTS: dict[str, Literal["image", "document"]] = {
    "input_image": "image",
    "input_file": "document",
}
_ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}

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


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _unmapped(detail: str) -> IntegrationError:
    return IntegrationError(FRAMEWORK, "message", f"{detail}; the input was left unchanged")


# ------------------------------------------------------------------ items → messages


def _item_type(item: Any, index: int) -> str:
    if not isinstance(item, Mapping):
        raise _unmapped(f"input item {index} is a {type(item).__name__}, not a Responses API item")
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    if not isinstance(kind, str):
        raise _unmapped(f"input item {index} has no type")
    return kind


def _parts(content: Any, where: str, allowed_text: Sequence[str]) -> list[Mapping[str, Any]]:
    if not isinstance(content, list):
        raise _unmapped(f"{where}: content is a {type(content).__name__}, not text or a list")
    out = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if isinstance(kind, str) and kind in allowed_text:
            field = _TEXT_PARTS[kind]
            if not isinstance(part.get(field), str):
                raise _unmapped(f"{where}: content part {j} ({kind}) has no {field} string")
        elif kind not in _MEDIA_PARTS:
            raise _unmapped(f"{where}: content part type {kind!r} (part {j}) is not supported")
        out.append(part)
    return out


def item_key(item: Any, index: int = 0) -> str:
    """What identifies an input item across model calls and runs: its content, not
    its ``id`` or ``status`` (the SDK may drop those between calls). Raises
    :class:`~ctxwise.errors.IntegrationError` for an item ctxwise cannot map."""
    kind = _item_type(item, index)
    where = f"input item {index} ({kind})"
    if kind == "message":
        role = item.get("role")
        if role not in _ROLES:
            raise _unmapped(f"{where}: role {role!r} is not supported")
        content = item.get("content")
        if isinstance(content, str):
            body: Any = content
        else:
            body = [
                (p["type"], p[_TEXT_PARTS[p["type"]]])
                if p["type"] in _TEXT_PARTS
                else {k: v for k, v in p.items() if k != "id"}
                for p in _parts(content, where, tuple(_TEXT_PARTS))
            ]
        key: Any = ["message", role, body]
    elif kind == "function_call":
        for field in ("call_id", "name", "arguments"):
            if not isinstance(item.get(field), str):
                raise _unmapped(f"{where}: {field} is not a string")
        key = ["function_call", item["call_id"], item["name"], item["arguments"]]
    elif kind == "function_call_output":
        if not isinstance(item.get("call_id"), str):
            raise _unmapped(f"{where}: call_id is not a string")
        output = item.get("output")
        if not isinstance(output, str):
            _parts(output, where, ("input_text",))
        key = ["function_call_output", item["call_id"], output]
    elif kind == "reasoning":
        key = ["reasoning", {k: v for k, v in item.items() if k not in ("id", "status")}]
    else:
        raise _unmapped(f"input item {index}: item type {kind!r} is not supported")
    return hashlib.sha256(_dumps(key).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _mark(seq: int, key: str, item: Mapping[str, Any], part: Any = None) -> dict[str, Any]:
    return {EXTRA: {"seq": seq, "key": key, "item": dict(item), "part": part}}


def _message_blocks(item: Mapping[str, Any], seq: int, key: str) -> list[ContentBlock]:
    shell = {k: v for k, v in item.items() if k != "content"}
    content = item["content"]
    if isinstance(content, str):
        return [TextBlock(content, _mark(seq, key, shell, "plain"))]
    if not content:
        return [TextBlock("", _mark(seq, key, shell, "empty"))]
    blocks: list[ContentBlock] = []
    for part in content:
        kind = part["type"]
        if kind in _TEXT_PARTS:
            field = _TEXT_PARTS[kind]
            rest = {k: v for k, v in part.items() if k != field}
            blocks.append(TextBlock(part[field], _mark(seq, key, shell, rest)))
        else:
            blocks.append(MediaBlock(_MEDIA_PARTS[kind], dict(part), _mark(seq, key, shell)))
    return blocks


def _output_content(output: Any) -> str | tuple[ContentBlock, ...]:
    if isinstance(output, str):
        return output
    blocks: list[ContentBlock] = []
    for part in output:
        if part["type"] == "input_text":
            rest = {k: v for k, v in part.items() if k != "text"}
            blocks.append(TextBlock(part["text"], {EXTRA: {"part": rest}}))
        else:
            blocks.append(MediaBlock(_MEDIA_PARTS[part["type"]], dict(part)))
    return tuple(blocks)


def _loads(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _arguments(raw: str) -> dict[str, Any]:
    """A call's input: its arguments when they are a JSON object, else ``{}`` (the
    raw string stays with the item and is sent back as it was)."""
    parsed = _loads(raw)
    return parsed if isinstance(parsed, dict) else {}


def to_messages(
    items: Sequence[Any], *, start: int = 0, keys: Sequence[str] | None = None
) -> list[Message]:
    """Responses API input items as ctxwise messages: a user or system message per
    message item; an assistant message per run of assistant text, reasoning and
    ``function_call`` items; a user message of tool results per run of
    ``function_call_output`` items. Each block remembers its item (``extra``), so
    :func:`to_items` gives the items back. ``start`` numbers the items."""
    keys = list(keys) if keys is not None else [item_key(it, i) for i, it in enumerate(items)]
    out: list[Message] = []
    run_role: str | None = None  # "assistant" or "tools" while a run is open
    blocks: list[ContentBlock] = []

    def close() -> None:
        nonlocal run_role, blocks
        if run_role is not None and blocks:
            out.append(Message("assistant" if run_role == "assistant" else "user", tuple(blocks)))
        run_role, blocks = None, []

    for i, item in enumerate(items):
        seq, key = start + i, keys[i]
        kind = _item_type(item, i)
        if kind == "message" and _ROLES[item["role"]] != "assistant":
            close()
            out.append(Message(_ROLES[item["role"]], tuple(_message_blocks(item, seq, key))))
            continue
        wanted = "tools" if kind == "function_call_output" else "assistant"
        if run_role != wanted:
            close()
            run_role = wanted
        if kind == "message":
            blocks.extend(_message_blocks(item, seq, key))
        elif kind == "function_call":
            shell = dict(item)
            arguments = _arguments(item["arguments"])
            blocks.append(
                ToolUseBlock(item["call_id"], item["name"], arguments, _mark(seq, key, shell))
            )
        elif kind == "function_call_output":
            shell = {k: v for k, v in item.items() if k != "output"}
            blocks.append(
                ToolResultBlock(
                    item["call_id"], _output_content(item["output"]), None, _mark(seq, key, shell)
                )
            )
        else:  # reasoning
            summary = item.get("summary")
            text = "\n".join(
                s["text"]
                for s in summary or []
                if isinstance(s, Mapping) and isinstance(s.get("text"), str)
            )
            blocks.append(ThinkingBlock(text, None, False, _mark(seq, key, dict(item))))
    close()
    return out


# ------------------------------------------------------------------ messages → items


def _mark_of(block: ContentBlock) -> Mapping[str, Any] | None:
    if isinstance(block, OpaqueBlock):
        return None
    mark = block.extra.get(EXTRA)
    return mark if isinstance(mark, Mapping) and "seq" in mark else None


def _part_back(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, MediaBlock):
        return dict(block.source)
    if isinstance(block, TextBlock):
        mark = block.extra.get(EXTRA)
        rest = mark.get("part") if isinstance(mark, Mapping) else None
        if isinstance(rest, Mapping):
            field = _TEXT_PARTS.get(str(rest.get("type")), "text")
            return {**rest, field: block.text}
        return {"type": "input_text", "text": block.text}
    return {"type": "input_text", "text": block_text(block)}


def _known_item(group: Sequence[ContentBlock]) -> dict[str, Any]:
    """The SDK item a group of blocks (one ``seq``) came from, with the Engine's edits."""
    first = group[0]
    mark = _mark_of(first)
    assert mark is not None
    shell = dict(mark["item"])
    if isinstance(first, ToolUseBlock):
        raw = shell.get("arguments")
        same = isinstance(raw, str) and _arguments(raw) == dict(first.input)
        shell.update(
            call_id=first.id,
            name=first.name,
            arguments=raw if same else json.dumps(dict(first.input), ensure_ascii=False),
        )
        return shell
    if isinstance(first, ToolResultBlock):
        content = first.content
        output: Any = content if isinstance(content, str) else [_part_back(b) for b in content]
        shell.update(call_id=first.tool_use_id, output=output)
        return shell
    if isinstance(first, ThinkingBlock):
        return shell
    if mark.get("part") == "plain" and len(group) == 1 and isinstance(first, TextBlock):
        shell["content"] = first.text
    elif mark.get("part") == "empty" and len(group) == 1:
        shell["content"] = []
    else:
        shell["content"] = [_part_back(b) for b in group]
    return shell


def _media_part(block: MediaBlock) -> dict[str, Any]:
    """An image or document as a Responses API input part."""
    source = block.source
    kind = source.get("type")
    if kind == "text":
        return {"type": "input_text", "text": str(source.get("data", ""))}
    if kind == "base64":
        data = f"data:{source.get('media_type')};base64,{source.get('data')}"
    elif kind == "url":
        data = str(source.get("url"))
    else:
        why = (
            " (an id of Anthropic's file store, which OpenAI cannot read)" if kind == "file" else ""
        )
        raise IntegrationError(
            FRAMEWORK,
            "message",
            f"a {block.media} given by {kind!r}{why} has no Responses API input part",
        )
    if block.media == "image":
        detail = own("openai", block.extra).get("image_url", {}).get("detail", "auto")
        part: dict[str, Any] = {"type": "input_image", "detail": detail}
        key = "image_url"
    else:
        part = {"type": "input_file"}
        key = "file_data" if kind == "base64" else "file_url"
    part[key] = data
    title = own("anthropic", block.extra).get("title")
    if block.media == "document" and isinstance(title, str) and title:
        part["filename"] = title
    return part


_LEFT_OUT = "[{block} left out: the Responses API has no form for it]"
"""The text that stands for a block of another provider with no Responses API form."""

_RESPONSES_ITEMS = frozenset(
    {"mcp_call", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response"}
)
"""Responses API item types named as Anthropic's MCP blocks are (``mcp_*``): an
opaque block of one is an item given by hand, and is sent as it is."""


def _responses_form(block: ContentBlock) -> ContentBlock:
    """``block`` (from another source) as Responses API input can carry it, by the
    rule of the codecs (:mod:`ctxwise.formats.openai`): an Anthropic search result,
    compaction summary or document of text blocks as text; an Anthropic block of a
    server-run tool or service (``server_tool_use``, ``web_search_tool_result``,
    ``mcp_tool_use``, ``container_upload``, …) as a text saying it was left out
    (:data:`_LEFT_OUT`), since no request may carry it; a Chat Completions refusal as
    the text it is. Content the user gave that has no Responses form (Chat
    Completions audio) is an :class:`~ctxwise.errors.IntegrationError`."""
    if isinstance(block, OpaqueBlock):
        if block.type in _RESPONSES_ITEMS:
            return block
        if block.type == "refusal" and isinstance(block.data.get("refusal"), str):
            return TextBlock(block.data["refusal"])
        if block.type == "input_audio":
            raise IntegrationError(
                FRAMEWORK,
                "message",
                "an input_audio part has no Responses API input part "
                "(message input takes text, images and files)",
            )
    return openai_codec._native(block, _LEFT_OUT)


def _chat_file_part(block: OpaqueBlock) -> dict[str, Any]:
    """A Chat Completions ``file`` part as a Responses ``input_file`` part (the same
    fields: ``file_data``, ``file_id`` — an OpenAI file id —, ``filename``)."""
    spec = block.data.get("file")
    fields = spec if isinstance(spec, Mapping) else {}
    part = {"type": "input_file"}
    part.update({k: fields[k] for k in ("file_data", "file_id", "filename") if k in fields})
    return part


def _output(result: ToolResultBlock) -> str | list[dict[str, Any]]:
    """A ``function_call_output``'s output for a result from another source: its
    text, or (when it holds an image or a file, an Anthropic tool result with a
    screenshot, say) its text, image and file parts, which the output takes."""
    if isinstance(result.content, str):
        return result.content
    blocks = [_responses_form(b) for b in result.content]
    if not any(isinstance(b, MediaBlock) or _is_chat_file(b) for b in blocks):
        return "\n".join(block_text(b) for b in blocks)
    parts: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, MediaBlock):
            parts.append(_media_part(b))
        elif _is_chat_file(b):
            parts.append(_chat_file_part(b))
        elif block_text(b):
            parts.append({"type": "input_text", "text": block_text(b)})
    return parts


def _is_chat_file(block: ContentBlock) -> TypeGuard[OpaqueBlock]:
    return isinstance(block, OpaqueBlock) and block.type == "file"


def _fresh_items(role: str, group: Sequence[ContentBlock]) -> list[dict[str, Any]]:
    """Items for blocks ctxwise wrote (a summary, the context block) or that did not
    come from an SDK item (messages from another source given to :func:`to_items`):
    each block in its Responses form (:func:`_responses_form`), thinking left out (a
    reasoning item cannot be made up: it is the Responses API's own, given by id)."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    media: list[dict[str, Any]] = []

    def flush() -> None:
        if media:
            if role != "user":
                raise IntegrationError(
                    FRAMEWORK, "message", f"an {role} message cannot hold an image or a file"
                )
            parts = [{"type": "input_text", "text": t} for t in texts]
            out.append({"role": role, "content": [*parts, *media]})
        elif texts:
            out.append({"role": role, "content": "\n\n".join(texts)})
        texts.clear()
        media.clear()

    for b in map(_responses_form, group):
        if isinstance(b, ToolUseBlock):
            flush()
            arguments = json.dumps(dict(b.input), ensure_ascii=False)
            out.append(
                {"type": "function_call", "call_id": b.id, "name": b.name, "arguments": arguments}
            )
        elif isinstance(b, ToolResultBlock):
            flush()
            out.append(
                {"type": "function_call_output", "call_id": b.tool_use_id, "output": _output(b)}
            )
        elif isinstance(b, ThinkingBlock):
            continue  # a reasoning item cannot be made up
        elif isinstance(b, MediaBlock) or _is_chat_file(b):
            if texts and not media:  # the text before the image stays before it
                media.extend({"type": "input_text", "text": t} for t in texts)
                texts.clear()
            media.append(_media_part(b) if isinstance(b, MediaBlock) else _chat_file_part(b))
        elif isinstance(b, OpaqueBlock) and isinstance(b.data.get("type"), str):
            flush()
            out.append(dict(b.data))
        elif block_text(b):
            if media:
                media.append({"type": "input_text", "text": block_text(b)})
            else:
                texts.append(block_text(b))
    flush()
    return out


def to_items(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """A window (ctxwise messages) as the SDK's model input: the system messages'
    text as ``instructions`` (``None`` without any), the rest as input items.
    Blocks that came from an item give it back as it was given, edits applied.

    Messages from another source (a transcript read from the Anthropic or Chat
    Completions format) give only items the Responses API takes: Anthropic's
    search results, compaction summaries and documents of text blocks are text;
    its server-run tool and service blocks (``server_tool_use``,
    ``web_search_tool_result``, ``mcp_tool_use``, ``container_upload``, …) are a
    text saying which block was left out; thinking is not sent (a reasoning item
    cannot be made up); images and files in a tool result stay in its output; a
    Chat Completions refusal is text and its ``file`` part an ``input_file``.
    Content the user gave that has no Responses form (a file or image given by an
    Anthropic file id, audio) raises :class:`~ctxwise.errors.IntegrationError`
    (reason ``"message"``), never replaced in silence."""
    system: list[str] = []
    items: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            system.extend(t for t in (block_text(b) for b in m.content) if t)
            continue
        i = 0
        blocks = m.content
        while i < len(blocks):
            mark = _mark_of(blocks[i])
            j = i + 1
            if mark is not None:
                while j < len(blocks):
                    nxt = _mark_of(blocks[j])
                    if nxt is None or nxt["seq"] != mark["seq"]:
                        break
                    j += 1
                items.append(_known_item(blocks[i:j]))
            else:
                while j < len(blocks) and _mark_of(blocks[j]) is None:
                    j += 1
                items.extend(_fresh_items(m.role, blocks[i:j]))
            i = j
    return ("\n\n".join(system) if system else None), items


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


def _matches(recorded: Sequence[str], given: Sequence[str]) -> tuple[int, int, int]:
    """``(overlap, earlier, start)``: the longest run that ends ``recorded`` and starts
    ``given``, and the longest start of ``given`` found in ``recorded`` ending before
    its last item, at ``recorded[start:]`` (one prefix function over both)."""
    if not recorded or not given:
        return 0, 0, 0
    if len(given) >= len(recorded) and list(given[: len(recorded)]) == list(recorded):
        return len(recorded), 0, 0
    seq: list[str | None] = [*given, None, *recorded]
    pi = [0] * len(seq)
    for i in range(1, len(seq)):
        k = pi[i - 1]
        while k and seq[i] != seq[k]:
            k = pi[k - 1]
        if seq[i] == seq[k]:
            k += 1
        pi[i] = k
    base = len(given) + 1
    earlier, end = 0, 0
    for i in range(base, len(seq) - 1):
        if pi[i] > earlier:
            earlier, end = pi[i], i - base + 1
    return pi[-1], earlier, end - earlier


_DROPPABLE = frozenset({"function_call", "function_call_output", "reasoning"})
"""Kinds of item the SDK leaves out of a session's history it hands the model: an
output whose call a ``limit`` cut off, a call without its output, the reasoning
before such a call."""
_MODEL_MADE = frozenset({"message:assistant", *_DROPPABLE})
"""Kinds of item only a model run makes: given again, they are history, never a new
input that happens to repeat an earlier one."""


def _kind(item: Mapping[str, Any]) -> str:
    """``message:<role>`` or the item's type."""
    kind = item.get("type")
    if kind is None or kind == "message":
        return f"message:{item.get('role')}"
    return str(kind)


def _aligned(
    recorded: Sequence[str], kinds: Sequence[str], given: Sequence[str]
) -> tuple[int, int, bool]:
    """How a ``given`` input that starts inside ``recorded`` lines up with it, as a
    session history read with a ``limit`` does (its start cut, and the items the SDK
    leaves out of it, :data:`_DROPPABLE`, missing): ``(matched, left, made)``, the
    given items matched in order, the recorded items after the last of them that are
    not droppable (``0``: the input reaches the end of ``recorded``, everything after
    ``matched`` is new), and whether a matched item is one only a model run makes.
    The start that reaches the end with the most items wins, else the one that
    matches most."""
    best = (0, len(recorded), False)
    for start in range(len(recorded) - 1, -1, -1):
        if recorded[start] != given[0]:
            continue
        i, p, made = 0, start, False
        while i < len(given) and p < len(recorded):
            if recorded[p] == given[i]:
                made = made or kinds[p] in _MODEL_MADE
                i, p = i + 1, p + 1
            elif kinds[p] in _DROPPABLE:
                p += 1
            else:
                break
        left = sum(1 for q in range(p, len(recorded)) if kinds[q] not in _DROPPABLE)
        if (left == 0, i) > (best[1] == 0, best[0]):
            best = (i, left, made)
    return best


def _overlap(recorded: Sequence[str], given: Sequence[str]) -> int:
    """The longest run that ends ``recorded`` and starts ``given`` (prefix function)."""
    return _matches(recorded, given)[0]


@dataclass(slots=True)
class _Seen:
    version: int
    keys: list[str]
    kinds: list[str]
    """The kind of each recorded item (:func:`_kind`), by ``keys``."""
    instructions: set[str]
    """The instructions an older ctxwise recorded in the session as system messages
    (they are now the turn's ``system``, never recorded): never sent."""


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
        self._seen: dict[str, _Seen] = {}

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        sid = _resolve(self.session_id, data.context)
        given = list(data.model_data.input)
        keys = [item_key(item, i) for i, item in enumerate(given)]
        instructions = data.model_data.instructions
        lock = _engine_lock(self.engine)

        def turn() -> tuple[str | None, list[dict[str, Any]]]:
            with lock:
                return self._turn(sid, given, keys, instructions)

        text, items = await asyncio.to_thread(turn)
        return ModelInputData(input=cast("list[TResponseInputItem]", items), instructions=text)

    def _recorded(self, sid: str) -> _Seen:
        version = self.engine.sessions.version(sid)
        seen = self._seen.get(sid)
        if seen is not None and seen.version == version:
            return seen
        keys: list[str] = []
        kinds: list[str] = []
        said: set[str] = set()
        last_seq = None
        if version:
            from ctxwise.formats import neutral

            for m in neutral.decode_messages(self.engine.sessions.log(sid)):
                for b in m.content:
                    mark = b.extra.get(EXTRA) if not isinstance(b, OpaqueBlock) else None
                    if not isinstance(mark, Mapping):
                        continue
                    if mark.get(INSTRUCTIONS) and isinstance(b, TextBlock):
                        said.add(b.text.strip())
                    elif "seq" in mark and mark["seq"] != last_seq:
                        keys.append(str(mark["key"]))
                        shell = mark.get("item")
                        kinds.append(_kind(shell) if isinstance(shell, Mapping) else "")
                        last_seq = mark["seq"]
        seen = _Seen(version, keys, kinds, said)
        self._seen[sid] = seen
        return seen

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
                seen = self._recorded(sid)
                if not given:
                    return
                version = self.engine.record(
                    sid, to_messages(given, start=len(seen.keys), keys=keys)
                )
                kinds = [*seen.kinds, *(_kind(item) for item in given)]
                self._seen[sid] = _Seen(version, [*seen.keys, *keys], kinds, seen.instructions)

        await asyncio.to_thread(record)

    def _turn(
        self, sid: str, given: list[Any], keys: list[str], instructions: str | None
    ) -> tuple[str | None, list[dict[str, Any]]]:
        seen = self._recorded(sid)
        k, earlier, at = _matches(seen.keys, keys)
        limited = False
        if earlier > k:
            # the input starts inside the session, but not on a run that ends it: a
            # history read with a limit (its start cut, items the SDK leaves out of it
            # missing), or a rewound conversation
            matched, left, made = _aligned(seen.keys, seen.kinds, keys)
            if left == 0:  # the limited history reaches the session's end
                k, limited = matched, True
            elif at > 0 and made:
                raise IntegrationError(
                    FRAMEWORK,
                    "message",
                    f"the input starts with {matched} item(s) from the middle of session "
                    f"{sid!r} (a history read with a limit), but the session has {left} "
                    "later item(s) the input does not: the conversation was rewound (items "
                    "popped from the SDK session, or an earlier history passed). A ctxwise "
                    "session only grows, so the model would get the turns that were taken "
                    "out; run the rewound conversation under a new session id. Nothing was "
                    "recorded",
                )
        if not limited and at == 0 and earlier > k and (earlier >= 2 or len(keys) > earlier):
            # the input starts where the session starts, but leaves out turns the
            # session has after that: the conversation was rewound (items popped)
            raise IntegrationError(
                FRAMEWORK,
                "message",
                f"the input starts with the first {earlier} item(s) of session {sid!r}, "
                f"but the session has {len(seen.keys) - earlier} later "
                "item(s) the input does not: the conversation was rewound (items popped "
                "from the SDK session, or an earlier history passed). A ctxwise session "
                "only grows, so the model would get the turns that were taken out; run the "
                "rewound conversation under a new session id. Nothing was recorded",
            )
        new = to_messages(given[k:], start=len(seen.keys), keys=keys[k:])
        prompt = instructions if instructions and instructions.strip() else None
        # the instructions of this call are counted as they are sent, and not kept
        result = self.engine.turn(sid, new, system=prompt)
        self.last = result
        kinds = [*seen.kinds, *(_kind(item) for item in given[k:])]
        self._seen[sid] = _Seen(result.version, [*seen.keys, *keys[k:]], kinds, seen.instructions)
        text, items = to_items(result.window.messages)
        _check_pairs(items)
        items, self.last_cut = _fit_context(self.engine.counter, result, items)
        stale = [t for t in seen.instructions if prompt is None or t != prompt.strip()]
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
            and _mark_of(b) is None
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
                tool_input = json.loads(raw)
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


def _namespace_part(session_id: str) -> str:
    return session_id.replace("%", "%25").replace("/", "%2F")


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
        self.namespace = check_namespace((namespace, EXTRA, _namespace_part(session_id)))
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
