"""The OpenAI Responses API's items as ctxwise messages, and back.

:func:`to_messages` reads Responses API input items (what the OpenAI Agents SDK
passes a model, a ``Response``'s ``output``, ``function_call_output`` items) as
ctxwise messages: a user or system message per message item; an assistant message
per run of assistant text, reasoning and ``function_call`` items; a user message of
tool results per run of ``function_call_output`` items. Each block remembers the
item it came from (under :data:`EXTRA` in its ``extra``), so :func:`to_items` gives
the items back as they were given, the Engine's edits applied; blocks from another
source (an Anthropic or Chat Completions transcript, text ctxwise wrote) become the
items the Responses API takes, by the rule of :mod:`ctxwise.formats.openai`.

:func:`item_key` identifies an item by its content (not its ``id`` or ``status``),
which the OpenAI Agents SDK integration uses to line a call's input up with the
session. An item or part that has no mapping is a :class:`~ctxwise.errors.FormatError`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeGuard

from ctxwise._io import parse_json
from ctxwise.errors import FormatError
from ctxwise.formats import openai as openai_codec
from ctxwise.formats._extra import own
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

__all__ = ["EXTRA", "item_key", "mark_of", "to_items", "to_messages"]

_SOURCE = "<responses>"

EXTRA = "openai_agents"
"""The key under which a block's ``extra`` keeps what its item needs to come back
(the name of the integration that first wrote it, kept for the sessions it stored)."""

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


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _unmapped(detail: str) -> FormatError:
    return FormatError(_SOURCE, detail)


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
    :class:`~ctxwise.errors.FormatError` for an item ctxwise cannot map."""
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
        return parse_json(raw)
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


def mark_of(block: ContentBlock) -> Mapping[str, Any] | None:
    """The item mark :func:`to_messages` left on ``block`` (``None`` for a block that
    did not come from an item)."""
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
    mark = mark_of(first)
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
        raise FormatError(
            _SOURCE,
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
    Completions audio) is a :class:`~ctxwise.errors.FormatError`."""
    if isinstance(block, OpaqueBlock):
        if block.type in _RESPONSES_ITEMS:
            return block
        if block.type == "refusal" and isinstance(block.data.get("refusal"), str):
            return TextBlock(block.data["refusal"])
        if block.type == "input_audio":
            raise FormatError(
                _SOURCE,
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
                raise FormatError(_SOURCE, f"an {role} message cannot hold an image or a file")
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
    Anthropic file id, audio) raises :class:`~ctxwise.errors.FormatError`,
    never replaced in silence."""
    system: list[str] = []
    items: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            system.extend(t for t in (block_text(b) for b in m.content) if t)
            continue
        i = 0
        blocks = m.content
        while i < len(blocks):
            mark = mark_of(blocks[i])
            j = i + 1
            if mark is not None:
                while j < len(blocks):
                    nxt = mark_of(blocks[j])
                    if nxt is None or nxt["seq"] != mark["seq"]:
                        break
                    j += 1
                items.append(_known_item(blocks[i:j]))
            else:
                while j < len(blocks) and mark_of(blocks[j]) is None:
                    j += 1
                items.extend(_fresh_items(m.role, blocks[i:j]))
            i = j
    return ("\n\n".join(system) if system else None), items
