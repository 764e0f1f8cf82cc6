"""OpenAI Chat Completions codec and request rendering.

Mapping to the neutral model:

- ``system`` / ``developer`` messages → ``system`` messages (``developer`` kept in extra);
- an assistant message's ``tool_calls`` → :class:`ToolUseBlock` (arguments parsed as
  JSON; the raw string is kept so it is written back byte for byte); a custom tool
  call (``"type": "custom"``, free text in ``custom.input``) has the input
  ``{"input": text}``, written back as that text;
- each ``role: "tool"`` message → a ``user`` message holding one
  :class:`ToolResultBlock`; a user message of tool results only is written back as
  ``tool`` messages;
- the deprecated ``function_call`` of an assistant message → a :class:`ToolUseBlock`
  with the id ``function_call_<message index>`` (the format gives it none), and a
  ``role: "function"`` message → a :class:`ToolResultBlock` answering the latest
  such call before it; both are written back in their legacy form.

Chat Completions has no thinking blocks and no ``is_error``; encoding a transcript
that has them drops them (Anthropic → OpenAI is lossy there, by the format:
thinking is the model's private reasoning, which Chat Completions is never sent).
An assistant message that held only thinking (and blank text, as Claude Code
records before it) is left out of the messages, as ``clear_thinking`` removes
it: without its thinking it would be ``content: null`` with no ``tool_calls``,
which the API refuses (an assistant message's content is "required unless
``tool_calls`` or ``function_call`` is specified"). Chat Completions asks no
alternation of roles, so the messages around it are sent as they are.

Blocks read from the Anthropic format (a transcript read there, rendered here) are
written in their Chat Completions form when there is a faithful one, as a visible
text placeholder when they record a provider's own machinery, and are a
:class:`~ctxwise.errors.UsageError` when they are content the user gave that has
no form here, so a request is never sent with a part the API refuses:

- text-like blocks are ``text`` parts: a ``search_result`` (its title, source and
  texts), a ``compaction`` block's summary, a document given as text or as text
  content blocks (under its title); an image is an ``image_url`` (base64 as a
  ``data:`` URL), a base64 PDF a ``file`` part;
- the blocks of Anthropic's server-run tools and services (``server_tool_use``,
  ``web_search_tool_result`` and every other ``*_tool_result``, ``mcp_tool_use``,
  ``mcp_tool_result``, ``container_upload``, ``tool_reference``, …) have no Chat
  Completions form: each becomes a ``text`` part saying which block was left out
  (:data:`LEFT_OUT`), so the model sees that something happened there and no
  request carries the block;
- a document given by URL or by an Anthropic file id, an image given by a file id,
  are refused (the user's content is never silently replaced).

A block type neither format documents is written as it was read: ctxwise cannot
tell it is foreign, and a transcript read from this format is written back byte
for byte (``input_audio``, ``file`` and ``refusal`` parts included).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ctxwise._io import parse_json
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
    "LEFT_OUT",
    "decode_messages",
    "decode_request",
    "decode_response",
    "encode_message",
    "encode_messages",
    "encode_request",
    "encode_response",
    "render_request",
]

_SOURCE = "openai"


_NS = "openai"
_RESPONSE_NS = "openai-response"


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


LEFT_OUT = "[{block} left out: Chat Completions has no form for it]"
"""The text part that stands for an Anthropic block with no Chat Completions form
(``{block}`` is its type, and the tool's name when it has one:
``server_tool_use (web_search)``)."""

_ANTHROPIC_TYPES = frozenset(
    {
        # Messages API content blocks, requests and responses (text, image, document,
        # thinking, tool_use and tool_result have neutral blocks of their own)
        "search_result",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "advisor_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "mcp_tool_listing",
        "container_upload",
        "compaction",
        "tool_reference",
        "tool_addition",
        "tool_removal",
        "browser_state",
        "fallback",
    }
)


def _anthropic_block(kind: str) -> bool:
    """An Anthropic block type: a documented one, or one named as its server tools
    are (no Chat Completions part type ends so)."""
    return (
        kind in _ANTHROPIC_TYPES
        or kind.endswith(("_tool_use", "_tool_result"))
        or kind.startswith("mcp_")
    )


def _texts(blocks: Any) -> list[str] | None:
    """The texts of a list of ``text`` blocks (JSON), or None when it holds another."""
    if not isinstance(blocks, list):
        return None
    texts = [
        b.get("text") if isinstance(b, Mapping) and b.get("type") == "text" else None
        for b in blocks
    ]
    return [t for t in texts if isinstance(t, str)] if None not in texts else None


def _titled(title: Any, body: str) -> str:
    return f"{title}\n\n{body}" if isinstance(title, str) and title else body


def _native(block: ContentBlock, left_out: str = LEFT_OUT) -> ContentBlock:
    """``block`` as Chat Completions can carry it (see the module docstring): a
    text-like Anthropic block as text, one with no Chat Completions form as the
    ``left_out`` placeholder (the Responses API bridge names its own API there),
    any other block as it is."""
    if isinstance(block, MediaBlock) and block.media == "document":
        if block.source.get("type") == "content":
            texts = _texts(block.source.get("content"))
            if texts is not None:
                title = own("anthropic", block.extra).get("title")
                return TextBlock(_titled(title, "\n\n".join(texts)))
        return block
    if not isinstance(block, OpaqueBlock) or not _anthropic_block(block.type):
        return block
    d = block.data
    if block.type == "search_result":
        texts = _texts(d.get("content"))
        if texts is not None:
            source = d.get("source")
            head = "\n".join(x for x in (d.get("title"), source) if isinstance(x, str) and x)
            return TextBlock("\n\n".join(x for x in (head, *texts) if x))
    if block.type == "compaction" and isinstance(d.get("content"), str) and d["content"]:
        return TextBlock(d["content"])  # the summary of what came before
    name = d.get("name")
    what = f"{block.type} ({name})" if isinstance(name, str) and name else block.type
    return TextBlock(left_out.format(block=what))


def _natives(blocks: tuple[ContentBlock, ...]) -> tuple[ContentBlock, ...]:
    """:func:`_native` over ``blocks`` (the same tuple when nothing changes)."""
    out = tuple(_native(b) for b in blocks)
    return blocks if out == blocks else out


def _encode_part(block: ContentBlock) -> dict[str, Any]:
    native = _native(block)
    if native is not block:
        return _encode_part(native)
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text, **_own(block.extra)}
    if isinstance(block, MediaBlock) and block.media == "image":
        extra = _own(block.extra)
        image = dict(extra.pop("image_url", {}))
        url = block.source.get("url")
        if url is None and block.source.get("type") == "base64":
            url = f"data:{block.source.get('media_type')};base64,{block.source.get('data')}"
        if not isinstance(url, str):
            raise UsageError(
                f"an image given by {block.source.get('type')!r} has no Chat Completions "
                "form (images given by URL or as base64 data do)"
            )
        return {"type": "image_url", "image_url": {"url": url, **image}, **extra}
    if isinstance(block, MediaBlock) and block.source.get("type") == "base64":
        # a base64 document (PDF) is a Chat Completions "file" part
        data = f"data:{block.source.get('media_type')};base64,{block.source.get('data')}"
        file: dict[str, Any] = {"file_data": data}
        if "title" in own("anthropic", block.extra):
            file["filename"] = own("anthropic", block.extra)["title"]
        return {"type": "file", "file": file}
    if isinstance(block, MediaBlock) and block.source.get("type") == "text":
        # a plain-text document is its text (under its title, when it has one)
        title = own("anthropic", block.extra).get("title")
        body = str(block.source.get("data", ""))
        return {"type": "text", "text": f"{title}\n\n{body}" if title else body}
    if isinstance(block, OpaqueBlock):
        return dict(block.data)
    if isinstance(block, MediaBlock):
        raise UsageError(
            f"a {block.media} given by {block.source.get('type')!r} has no Chat Completions "
            "form (images, base64 documents and text documents do)"
        )
    raise UsageError(f"{type(block).__name__} cannot be a Chat Completions content part")


def _decode_content(content: Any, index: int, source: str) -> tuple[tuple[ContentBlock, ...], bool]:
    if content is None:
        return (), False
    if isinstance(content, str):
        return (TextBlock(content),), True
    if isinstance(content, list):
        return tuple(_decode_part(p, source) for p in content), False
    raise FormatError(source, f"message {index}: content must be a string, a list or null")


_ABSENT = object()


def _content_form(raw: Mapping[str, Any], extra: dict[str, Any]) -> None:
    """Record a content that holds no part (absent, null or []), to write it back as is."""
    if "content" not in raw:
        extra[_mark("_content")] = "absent"
    elif raw["content"] is None:
        extra[_mark("_content")] = "null"
    elif raw["content"] == []:
        extra[_mark("_content")] = "empty_list"


def _no_parts(form: Any, default: Any) -> Any:
    return {"absent": _ABSENT, "null": None, "empty_list": []}.get(form, default)


def _decode_custom_call(raw: Mapping[str, Any], index: int, source: str) -> ToolUseBlock:
    custom = raw.get("custom")
    if (
        not isinstance(raw.get("id"), str)
        or not isinstance(custom, Mapping)
        or not isinstance(custom.get("name"), str)
        or not isinstance(custom.get("input"), str)
    ):
        raise FormatError(
            source,
            f"message {index}: a custom tool call needs 'id' and a 'custom' object "
            "with string 'name' and 'input'",
        )
    extra: dict[str, Any] = _rest(raw, {"id", "custom"})
    custom_extra = {k: v for k, v in custom.items() if k not in ("name", "input")}
    if custom_extra:
        extra[_mark("_custom_extra")] = custom_extra
    return ToolUseBlock(raw["id"], custom["name"], {"input": custom["input"]}, extra)


def _encode_custom_call(block: ToolUseBlock, extra: dict[str, Any]) -> dict[str, Any]:
    value = block.input.get("input")
    if set(block.input) == {"input"} and isinstance(value, str):
        text = value
    else:  # an input edited into another shape (cleared to {}, say)
        text = json.dumps(dict(block.input), ensure_ascii=False) if block.input else ""
    custom_extra = extra.pop("_custom_extra", {})
    return {"id": block.id, "custom": {"name": block.name, "input": text, **custom_extra}, **extra}


def _decode_tool_call(raw: Any, index: int, source: str) -> ToolUseBlock:
    if isinstance(raw, Mapping) and raw.get("type") == "custom":
        return _decode_custom_call(raw, index, source)
    if not isinstance(raw, Mapping) or not isinstance(raw.get("function"), Mapping):
        raise FormatError(source, f"message {index}: a tool call needs a 'function' object")
    fn = raw["function"]
    if not isinstance(raw.get("id"), str) or not isinstance(fn.get("name"), str):
        raise FormatError(source, f"message {index}: a tool call needs 'id' and 'function.name'")
    args = fn.get("arguments", "")
    if not isinstance(args, str):
        raise FormatError(source, f"message {index}: tool call arguments must be a JSON string")
    extra: dict[str, Any] = _rest(raw, {"id", "function"})
    fn_extra = {k: v for k, v in fn.items() if k not in ("name", "arguments")}
    if fn_extra:
        extra[_mark("_function_extra")] = fn_extra
    try:
        parsed: Any = parse_json(args) if args.strip() else {}
    except (json.JSONDecodeError, RecursionError):
        parsed = None
    # Models sometimes emit invalid or non-object arguments: input is then {} and
    # the raw string is kept so it is written back exactly.
    extra[_mark("_arguments")] = args
    return ToolUseBlock(raw["id"], fn["name"], parsed if isinstance(parsed, dict) else {}, extra)


def _encode_tool_call(block: ToolUseBlock) -> dict[str, Any]:
    extra = _own(block.extra)
    if extra.get("type") == "custom":
        return _encode_custom_call(block, extra)
    read_here = "_arguments" in extra  # a call this codec read keeps the shape it had
    raw = extra.pop("_arguments", None)
    fn_extra = extra.pop("_function_extra", {})
    arguments = json.dumps(dict(block.input), ensure_ascii=False)
    if isinstance(raw, str):
        try:
            parsed: Any = parse_json(raw) if raw.strip() else {}
        except (json.JSONDecodeError, RecursionError):
            parsed = None
        if parsed == dict(block.input) or (not isinstance(parsed, dict) and not block.input):
            arguments = raw
    # Chat Completions requires "type" on a tool call ("Missing required parameter:
    # 'messages[i].tool_calls[0].type'"); a call from another format has none
    kind = {} if read_here else {"type": "function"}
    return {
        "id": block.id,
        **kind,
        "function": {"name": block.name, "arguments": arguments, **fn_extra},
        **extra,
    }


def _decode_message(raw: Any, index: int, source: str) -> Message:
    if not isinstance(raw, Mapping):
        raise FormatError(source, f"message {index} must be a JSON object")
    role = raw.get("role")
    if role in ("system", "developer", "user"):
        blocks, plain = _decode_content(raw.get("content"), index, source)
        extra = _rest(raw, {"role", "content"})
        _content_form(raw, extra)
        if role == "developer":
            extra[_mark("_role")] = "developer"
        return Message("user" if role == "user" else "system", blocks, plain=plain, extra=extra)
    if role == "assistant":
        extra = _rest(raw, {"role", "content", "tool_calls"})
        _content_form(raw, extra)
        blocks, plain = _decode_content(raw.get("content"), index, source)
        if raw.get("function_call") is not None:
            del extra[_mark("function_call")]
            blocks = (*blocks, _decode_function_call(raw["function_call"], index, source))
        calls = raw.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise FormatError(source, f"message {index}: tool_calls must be a list")
            blocks = blocks + tuple(_decode_tool_call(c, index, source) for c in calls)
            if not calls:
                extra[_mark("_empty_tool_calls")] = True
        elif "tool_calls" in raw:
            extra[_mark("_null_tool_calls")] = True
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
    if role == "function":
        content = raw.get("content")
        if content is not None and not isinstance(content, str):
            raise FormatError(source, f"message {index}: function content must be a string")
        if not isinstance(raw.get("name"), str):
            raise FormatError(source, f"message {index}: a function message needs 'name'")
        extra = _rest(raw, {"role", "content"})
        extra[_mark("_function")] = True
        if content is None:
            extra[_mark("_content")] = "null" if "content" in raw else "absent"
        # answers the latest function_call before it (decode_messages sets the id)
        block = ToolResultBlock(_function_call_id(None), content or "", None, extra)
        return Message("user", (block,), extra={_mark("_role"): "function"})
    raise FormatError(source, f"message {index}: unknown role {role!r}")


def _function_call_id(index: int | None) -> str:
    """The id a legacy ``function_call`` gets (it has none): its message's index."""
    return f"function_call_{index if index is not None else 'unanswered'}"


def _decode_function_call(raw: Any, index: int, source: str) -> ToolUseBlock:
    if (
        not isinstance(raw, Mapping)
        or not isinstance(raw.get("name"), str)
        or not isinstance(raw.get("arguments", ""), str)
    ):
        raise FormatError(
            source,
            f"message {index}: function_call needs a string 'name' and 'arguments'",
        )
    call = _decode_tool_call({"id": _function_call_id(index), "function": raw}, index, source)
    return ToolUseBlock(call.id, call.name, call.input, {**call.extra, _mark("_function"): True})


def _answer_function_calls(msgs: Sequence[Message]) -> tuple[Message, ...]:
    """Legacy ``function`` messages answer the latest ``function_call`` before them."""
    out: list[Message] = []
    call: str | None = None
    for m in msgs:
        for b in m.content:
            if isinstance(b, ToolUseBlock) and b.extra.get(_mark("_function")):
                call = b.id
        first = m.content[0] if len(m.content) == 1 else None
        if isinstance(first, ToolResultBlock) and first.extra.get(_mark("_function")):
            if call is not None:
                m = Message(
                    m.role,
                    (ToolResultBlock(call, first.content, None, first.extra),),
                    extra=m.extra,
                )
            call = None
        out.append(m)
    return tuple(out)


def _text_content(blocks: Sequence[ContentBlock], plain: bool, form: Any, default: Any) -> Any:
    parts = [b for b in blocks if not isinstance(b, ToolUseBlock | ThinkingBlock | ToolResultBlock)]
    if not parts:
        return _no_parts(form, default)
    if plain and len(parts) == 1 and isinstance(parts[0], TextBlock) and not _own(parts[0].extra):
        return parts[0].text
    return [_encode_part(b) for b in parts]


def _with_content(out: dict[str, Any], content: Any) -> dict[str, Any]:
    if content is not _ABSENT:
        out["content"] = content
    return out


def _encode_message(msg: Message) -> list[dict[str, Any]]:
    native = _natives(msg.content)
    if native is not msg.content:
        msg = replace(msg, content=native)
    extra = _own(msg.extra)
    role_hint = extra.pop("_role", None)
    form = extra.pop("_content", None)
    if msg.role == "system":
        content = _text_content(msg.content, msg.plain, form, "")
        return [{**_with_content({"role": role_hint or "system"}, content), **extra}]
    if msg.role == "assistant":
        empty_calls = extra.pop("_empty_tool_calls", False)
        null_calls = extra.pop("_null_tool_calls", False)
        out = _with_content(
            {"role": "assistant"}, _text_content(msg.content, msg.plain, form, None)
        )
        uses = [b for b in msg.content if isinstance(b, ToolUseBlock)]
        legacy = [b for b in uses if _own(b.extra).get("_function")]
        calls = [_encode_tool_call(b) for b in uses if b not in legacy]
        if legacy:
            fn = _encode_tool_call(legacy[-1])["function"]
            out["function_call"] = fn
        if calls or empty_calls:
            out["tool_calls"] = calls
        elif null_calls:
            out["tool_calls"] = None
        out.update(extra)
        return [out]
    # user: tool results become tool messages, the rest one user message
    results = [b for b in msg.content if isinstance(b, ToolResultBlock)]
    out_msgs: list[dict[str, Any]] = []
    moved: list[ContentBlock] = []  # parts of foreign results a tool message cannot hold
    for r in results:
        texts, media = _split_result(r, role_hint)
        moved.extend(media)
        content_value: Any = texts if isinstance(texts, str) else [_encode_part(b) for b in texts]
        if media and not texts:  # every part moved: an empty tool message answers the call
            content_value = ""
        r_extra = _own(r.extra)
        if r_extra.pop("_function", False):
            fn_form = r_extra.pop("_content", None)
            fn_msg = {"role": "function", **r_extra}
            if content_value == "":  # null or absent when read, and not edited since
                content_value = _no_parts(fn_form, content_value)
            out_msgs.append(_with_content(fn_msg, content_value))
            continue
        out_msgs.append(
            {
                "role": "tool",
                "tool_call_id": r.tool_use_id,
                "content": content_value,
                **_own(r.extra),
            }
        )
    others = [*moved, *(b for b in msg.content if not isinstance(b, ToolResultBlock))]
    if others or not results:
        content = _text_content(others, msg.plain and not moved, form, "")
        out_msgs.append({**_with_content({"role": "user"}, content), **extra})
    return out_msgs


def _split_result(
    result: ToolResultBlock, role_hint: Any
) -> tuple[str | tuple[ContentBlock, ...], tuple[ContentBlock, ...]]:
    """A tool result's content for its ``tool`` message, and the parts that go to
    the user message after it instead.

    A ``tool`` message holds text only (``string | ChatCompletionContentPartText[]``):
    the images, documents and other parts of a result from another format (an
    Anthropic ``tool_result`` with an image, Claude Code reading a screenshot) go
    to the user message that follows. A result read from Chat Completions is
    written as it was read."""
    if role_hint is not None or isinstance(result.content, str):
        return result.content, ()
    content = _natives(result.content)  # a search result is text here
    texts = tuple(b for b in content if isinstance(b, TextBlock))
    return texts, tuple(b for b in content if not isinstance(b, TextBlock))


def _left_out(message: Message) -> bool:
    """An assistant message of thinking and, besides it, blank text at most: it has
    no Chat Completions form (see the module docstring)."""
    return (
        message.role == "assistant"
        and any(isinstance(b, ThinkingBlock) for b in message.content)
        and all(
            isinstance(b, ThinkingBlock) or (isinstance(b, TextBlock) and not b.text.strip())
            for b in message.content
        )
    )


def encode_message(message: Message) -> list[dict[str, Any]]:
    """One message as Chat Completions messages (a user message holding tool
    results becomes one ``tool`` message per result, then the rest; an assistant
    message of thinking only becomes none)."""
    return [] if _left_out(message) else _encode_message(message)


def decode_messages(messages: Sequence[Any], *, source: str = _SOURCE) -> Transcript:
    """A transcript from a Chat Completions ``messages`` list."""
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        raise FormatError(source, "messages must be a list")
    msgs = _answer_function_calls([_decode_message(m, i, source) for i, m in enumerate(messages)])
    return Transcript(msgs, source=source, format=_NS)


def encode_messages(transcript: Transcript) -> list[dict[str, Any]]:
    """A Chat Completions ``messages`` list."""
    return [out for m in transcript.messages for out in encode_message(m)]


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

    Response-only fields (id, model, usage, finish_reason, refusal, …) are kept
    in their own namespace, so :func:`encode_response` writes the same body back
    while the message can join the next request without them.
    """
    if not isinstance(payload, Mapping) or payload.get("object") != "chat.completion":
        raise FormatError(source, "a Chat Completions response has object 'chat.completion'")
    choices = payload.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], Mapping):
        raise FormatError(source, "expected exactly one choice in the response")
    choice = choices[0]
    raw = choice.get("message")
    msg = _decode_message(raw, 0, source)
    if msg.role != "assistant" or not isinstance(raw, Mapping):
        raise FormatError(source, "a response's message must have role 'assistant'")
    markers = {k: v for k, v in msg.extra.items() if k.startswith(_mark("_"))}
    response = {
        "response": {k: v for k, v in payload.items() if k not in ("choices", "id")},
        "choice": {k: v for k, v in choice.items() if k != "message"},
        # a legacy function_call is a block of the message, not a response field
        "message": {
            k: v
            for k, v in raw.items()
            if k not in ("role", "content", "tool_calls")
            and not (k == "function_call" and v is not None)
        },
    }
    extra = {**markers, **{f"{_RESPONSE_NS}.{k}": v for k, v in response.items()}}
    return Message(msg.role, msg.content, plain=msg.plain, id=payload.get("id"), extra=extra)


def encode_response(message: Message) -> dict[str, Any]:
    """A ``chat.completion`` response body for an assistant message."""
    if message.role != "assistant":
        raise UsageError("only assistant messages encode as a response")
    parts = own(_RESPONSE_NS, message.extra)
    body = _encode_message(message)[0]
    body.update(parts.get("message", {}))
    out: dict[str, Any] = {}
    if message.id is not None:
        out["id"] = message.id
    out.update(parts.get("response", {"object": "chat.completion"}))
    out["choices"] = [{**parts.get("choice", {"index": 0}), "message": body}]
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
