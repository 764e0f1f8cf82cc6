"""OpenAI Chat Completions codec and request rendering.

Mapping to the neutral model:

- ``system`` / ``developer`` messages → ``system`` messages (``developer`` kept in extra);
- an assistant message's ``tool_calls`` → :class:`ToolUseBlock` (arguments parsed as
  JSON; the raw string is kept so it is written back byte for byte);
- each ``role: "tool"`` message → a ``user`` message holding one
  :class:`ToolResultBlock`; a user message of tool results only is written back as
  ``tool`` messages.

Chat Completions has no thinking blocks and no ``is_error``; encoding a transcript
that has them drops them (Anthropic → OpenAI is lossy there, by the format).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxwise.errors import FormatError, UsageError
from ctxwise.formats._extra import keep, own
from ctxwise.messages import (
    ContentBlock,
    MediaBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
)

if TYPE_CHECKING:
    from ctxwise.assembly import Assembly

__all__ = [
    "decode_messages",
    "decode_request",
    "decode_response",
    "encode_messages",
    "encode_request",
    "encode_response",
    "render_request",
]

_SOURCE = "openai"


_NS = "openai"


def _rest(d: Mapping[str, Any], known: set[str]) -> dict[str, Any]:
    return keep(_NS, d, known)


def _own(extra: Mapping[str, Any]) -> dict[str, Any]:
    return own(_NS, extra)


def _mark(name: str) -> str:
    return f"{_NS}.{name}"


def _decode_part(raw: Any, source: str) -> ContentBlock:
    if not isinstance(raw, Mapping):
        raise FormatError(source, "a content part must be a JSON object")
    kind = raw.get("type")
    if kind == "text" and isinstance(raw.get("text"), str):
        return TextBlock(raw["text"], _rest(raw, {"type", "text"}))
    if kind == "image_url" and isinstance(raw.get("image_url"), Mapping):
        image = dict(raw["image_url"])
        source_ = {"type": "url", "url": image.pop("url", "")}
        return MediaBlock(
            "image", source_, {_mark("image_url"): image, **_rest(raw, {"type", "image_url"})}
        )
    if not isinstance(kind, str):
        raise FormatError(source, "a content part has no 'type'")
    return OpaqueBlock(kind, dict(raw))


def _encode_part(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text, **_own(block.extra)}
    if isinstance(block, MediaBlock) and block.media == "image":
        extra = _own(block.extra)
        image = dict(extra.pop("image_url", {}))
        url = block.source.get("url")
        if url is None and block.source.get("type") == "base64":
            url = f"data:{block.source.get('media_type')};base64,{block.source.get('data')}"
        return {"type": "image_url", "image_url": {"url": url, **image}, **extra}
    if isinstance(block, MediaBlock) and block.source.get("type") == "base64":
        # a base64 document (PDF) is a Chat Completions "file" part
        data = f"data:{block.source.get('media_type')};base64,{block.source.get('data')}"
        file: dict[str, Any] = {"file_data": data}
        if "title" in own("anthropic", block.extra):
            file["filename"] = own("anthropic", block.extra)["title"]
        return {"type": "file", "file": file}
    if isinstance(block, OpaqueBlock):
        return dict(block.data)
    raise UsageError(f"{type(block).__name__} cannot be a Chat Completions content part")


def _decode_content(content: Any, index: int, source: str) -> tuple[tuple[ContentBlock, ...], bool]:
    if content is None:
        return (), False
    if isinstance(content, str):
        return (TextBlock(content),), True
    if isinstance(content, list):
        return tuple(_decode_part(p, source) for p in content), False
    raise FormatError(source, f"message {index}: content must be a string, a list or null")


def _decode_tool_call(raw: Any, index: int, source: str) -> ToolUseBlock:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("function"), Mapping):
        raise FormatError(source, f"message {index}: a tool call needs a 'function' object")
    fn = raw["function"]
    args = fn.get("arguments", "")
    extra: dict[str, Any] = _rest(raw, {"id", "function"})
    fn_extra = {k: v for k, v in fn.items() if k not in ("name", "arguments")}
    if fn_extra:
        extra[_mark("_function_extra")] = fn_extra
    parsed: Any
    try:
        parsed = json.loads(args) if isinstance(args, str) and args.strip() else {}
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        parsed = {}
    extra[_mark("_arguments")] = args
    if "id" not in raw or "name" not in fn:
        raise FormatError(source, f"message {index}: a tool call needs 'id' and 'function.name'")
    return ToolUseBlock(str(raw["id"]), str(fn["name"]), parsed, extra)


def _encode_tool_call(block: ToolUseBlock) -> dict[str, Any]:
    extra = _own(block.extra)
    raw = extra.pop("_arguments", None)
    fn_extra = extra.pop("_function_extra", {})
    arguments = json.dumps(dict(block.input), ensure_ascii=False)
    if isinstance(raw, str):
        try:
            same = json.loads(raw) == dict(block.input) if raw.strip() else not block.input
        except json.JSONDecodeError:
            same = not block.input
        if same:
            arguments = raw
    return {
        "id": block.id,
        "function": {"name": block.name, "arguments": arguments, **fn_extra},
        **extra,
    }


def _decode_message(raw: Any, index: int, source: str) -> Message:
    if not isinstance(raw, Mapping):
        raise FormatError(source, f"message {index} must be a JSON object")
    role = raw.get("role")
    if role in ("system", "developer"):
        blocks, plain = _decode_content(raw.get("content"), index, source)
        extra = _rest(raw, {"role", "content"})
        if role == "developer":
            extra[_mark("_role")] = "developer"
        return Message("system", blocks, plain=plain, extra=extra)
    if role == "user":
        blocks, plain = _decode_content(raw.get("content"), index, source)
        return Message("user", blocks, plain=plain, extra=_rest(raw, {"role", "content"}))
    if role == "assistant":
        extra = _rest(raw, {"role", "content", "tool_calls"})
        if "content" not in raw:
            extra[_mark("_no_content")] = True
        blocks, plain = _decode_content(raw.get("content"), index, source)
        calls = raw.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise FormatError(source, f"message {index}: tool_calls must be a list")
            blocks = blocks + tuple(_decode_tool_call(c, index, source) for c in calls)
            if not calls:
                extra[_mark("_empty_tool_calls")] = True
        return Message("assistant", blocks, plain=plain, extra=extra)
    if role == "tool":
        if "tool_call_id" not in raw:
            raise FormatError(source, f"message {index}: a tool message needs 'tool_call_id'")
        content = raw.get("content")
        result: str | tuple[ContentBlock, ...]
        if isinstance(content, str):
            result = content
        elif isinstance(content, list):
            result = tuple(_decode_part(p, source) for p in content)
        else:
            raise FormatError(source, f"message {index}: tool content must be a string or a list")
        block = ToolResultBlock(
            str(raw["tool_call_id"]), result, None, _rest(raw, {"role", "tool_call_id", "content"})
        )
        return Message("user", (block,), extra={_mark("_role"): "tool"})
    raise FormatError(source, f"message {index}: unknown role {role!r}")


def _text_content(blocks: Sequence[ContentBlock], plain: bool) -> Any:
    parts = [b for b in blocks if not isinstance(b, ToolUseBlock | ThinkingBlock | ToolResultBlock)]
    if plain and len(parts) == 1 and isinstance(parts[0], TextBlock) and not _own(parts[0].extra):
        return parts[0].text
    if not parts:
        return None
    return [_encode_part(b) for b in parts]


def _encode_message(msg: Message) -> list[dict[str, Any]]:
    extra = _own(msg.extra)
    role_hint = extra.pop("_role", None)
    if msg.role == "system":
        return [
            {
                "role": role_hint or "system",
                "content": _text_content(msg.content, msg.plain) or "",
                **extra,
            }
        ]
    if msg.role == "assistant":
        no_content = extra.pop("_no_content", False)
        empty_calls = extra.pop("_empty_tool_calls", False)
        out: dict[str, Any] = {"role": "assistant"}
        content = _text_content(msg.content, msg.plain)
        if not (no_content and content is None):
            out["content"] = content
        calls = [_encode_tool_call(b) for b in msg.content if isinstance(b, ToolUseBlock)]
        if calls or empty_calls:
            out["tool_calls"] = calls
        out.update(extra)
        return [out]
    # user: tool results become tool messages, the rest one user message
    results = [b for b in msg.content if isinstance(b, ToolResultBlock)]
    out_msgs: list[dict[str, Any]] = []
    for r in results:
        content_value: Any = (
            r.content if isinstance(r.content, str) else [_encode_part(b) for b in r.content]
        )
        out_msgs.append(
            {
                "role": "tool",
                "tool_call_id": r.tool_use_id,
                "content": content_value,
                **_own(r.extra),
            }
        )
    others = [b for b in msg.content if not isinstance(b, ToolResultBlock)]
    if others or not results:
        content = _text_content(others, msg.plain)
        out_msgs.append(
            {"role": "user", "content": content if content is not None else "", **extra}
        )
    return out_msgs


def decode_messages(messages: Sequence[Any], *, source: str = _SOURCE) -> Transcript:
    """A transcript from a Chat Completions ``messages`` list."""
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        raise FormatError(source, "messages must be a list")
    msgs = tuple(_decode_message(m, i, source) for i, m in enumerate(messages))
    return Transcript(msgs, source=source, format=_NS)


def encode_messages(transcript: Transcript) -> list[dict[str, Any]]:
    """A Chat Completions ``messages`` list."""
    return [out for m in transcript.messages for out in _encode_message(m)]


def decode_request(payload: Any, *, source: str = _SOURCE) -> Transcript:
    """A transcript from a Chat Completions request body."""
    if not isinstance(payload, Mapping) or "messages" not in payload:
        raise FormatError(source, "a Chat Completions request is an object with 'messages'")
    t = decode_messages(payload["messages"], source=source)
    params = {k: v for k, v in payload.items() if k != "messages"}
    return Transcript(t.messages, params, source=source, format=_NS)


def encode_request(transcript: Transcript) -> dict[str, Any]:
    """A Chat Completions request body (``transcript.params`` supply model, tools, …)."""
    params = dict(transcript.params) if transcript.format == _NS else {}
    return {**params, "messages": encode_messages(transcript)}


def decode_response(payload: Any, *, source: str = _SOURCE) -> Message:
    """The first choice's message of a ``chat.completion`` response.

    Response-level fields (id, model, usage, finish_reason, …) are kept in ``extra``
    so :func:`encode_response` writes the same body back.
    """
    if not isinstance(payload, Mapping) or payload.get("object") != "chat.completion":
        raise FormatError(source, "a Chat Completions response has object 'chat.completion'")
    choices = payload.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], Mapping):
        raise FormatError(source, "expected exactly one choice in the response")
    choice = choices[0]
    msg = _decode_message(choice.get("message"), 0, source)
    extra = dict(msg.extra)
    extra[_mark("_response")] = {k: v for k, v in payload.items() if k not in ("choices", "id")}
    extra[_mark("_choice")] = {k: v for k, v in choice.items() if k != "message"}
    return Message(msg.role, msg.content, plain=msg.plain, id=payload.get("id"), extra=extra)


def encode_response(message: Message) -> dict[str, Any]:
    """A ``chat.completion`` response body for an assistant message."""
    if message.role != "assistant":
        raise UsageError("only assistant messages encode as a response")
    extra = dict(message.extra)
    response = dict(extra.pop(_mark("_response"), {"object": "chat.completion"}))
    choice = dict(extra.pop(_mark("_choice"), {"index": 0}))
    body = _encode_message(Message("assistant", message.content, plain=message.plain, extra=extra))[
        0
    ]
    out: dict[str, Any] = {}
    if message.id is not None:
        out["id"] = message.id
    out.update(response)
    out["choices"] = [{**choice, "message": body}]
    return out


def render_request(assembly: Assembly, task: str, *, model: str) -> dict[str, Any]:
    """A Chat Completions request for an assembled window.

    Stable sections form the system message, so the prompt prefix is identical
    across turns and OpenAI's automatic prefix caching applies; the other
    sections and then the task form the user message.
    """
    if not task.strip():
        raise UsageError("task must not be empty: it is what the model is asked to do")
    stable = [s.content for s in assembly.sections if s.stable and s.content]
    live = [s.content for s in assembly.sections if not s.stable and s.content]
    messages: list[dict[str, Any]] = []
    if stable:
        messages.append({"role": "system", "content": "\n\n".join(stable)})
    messages.append({"role": "user", "content": "\n\n".join([*live, task])})
    return {"model": model, "messages": messages}
