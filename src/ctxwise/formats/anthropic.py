"""Anthropic Messages API codec and request rendering.

``decode_request`` / ``encode_request`` round-trip a request body losslessly:
fields ctxwise has no model for are kept in ``extra`` (blocks, messages) or
``Transcript.params`` (request level). ``decode_response`` / ``encode_response``
do the same for a response (``"type": "message"``).

``render_request`` turns an :class:`~ctxwise.assembly.Assembly` into a request:
stable sections first as system blocks with a ``cache_control`` breakpoint
after the last one, the other sections next, and the live task last.

Blocks read from OpenAI's formats (a transcript read there, rendered here) are
written in their Messages API form when there is a faithful one, and are a
:class:`~ctxwise.errors.UsageError` naming the part otherwise, so a request is
never sent with a part the API refuses (the rule every codec follows):

- a ``refusal`` part, and a Responses ``input_text`` / ``output_text`` part, is a
  ``text`` block (a refusal is what the assistant said);
- a ``file`` part (``input_file`` too) holding base64 data is a ``document`` (a PDF,
  its ``filename`` the title) or an ``image`` (an image type); one given by a
  ``file_url`` is a URL document; an ``image_url`` (``input_image``) given as a
  ``data:`` URL is a base64 image, a web URL stays a URL image;
- what has no Messages API form is refused: ``input_audio`` (the API takes no
  audio), a file or image given by an OpenAI ``file_id`` (an id of OpenAI's file
  store), data of another media type.

Thinking with no signature (a Responses API reasoning summary read by the OpenAI
Agents SDK integration, say) is encoded as it is, so the codec round-trips; the
request render, :func:`ctxwise.formats.request.render_anthropic`, leaves it out,
since the API takes back only the thinking it signed.

A block type neither format documents is written as it was read: ctxwise cannot
tell it is foreign, and a transcript read from this format is written back
byte for byte (every Anthropic block type, ``server_tool_use``,
``web_search_tool_result``, ``mcp_tool_use``, ``container_upload``, thinking with
its signature, … included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

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
    "decode_block",
    "decode_messages",
    "decode_request",
    "decode_response",
    "encode_block",
    "encode_message",
    "encode_messages",
    "encode_request",
    "encode_response",
    "render_request",
]

_SOURCE = "anthropic"


def _obj(value: Any, what: str, source: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise FormatError(source, f"{what} must be a JSON object, got {type(value).__name__}")
    return value


_NS = "anthropic"
_RESPONSE_NS = "anthropic-response"


def _rest(d: Mapping[str, Any], known: set[str]) -> dict[str, Any]:
    return keep(_NS, d, known)


def _own(extra: Mapping[str, Any]) -> dict[str, Any]:
    return own(_NS, extra)


def _field(d: Mapping[str, Any], key: str, kind: Any, what: str, source: str) -> Any:
    if key not in d:
        raise FormatError(source, f"{what} block is missing {key!r}")
    value = d[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise FormatError(source, f"{what} block: {key!r} has the wrong type")
    return value


def decode_block(raw: Any, source: str = _SOURCE) -> ContentBlock:
    """One content block from its JSON form; a malformed known block is a FormatError."""
    d = _obj(raw, "a content block", source)
    kind = d.get("type")
    if not isinstance(kind, str):
        raise FormatError(source, "content block has no 'type'")
    if kind == "text":
        return TextBlock(_field(d, "text", str, kind, source), _rest(d, {"type", "text"}))
    if kind == "tool_use":
        return ToolUseBlock(
            _field(d, "id", str, kind, source),
            _field(d, "name", str, kind, source),
            dict(_field(d, "input", Mapping, kind, source)),
            _rest(d, {"type", "id", "name", "input"}),
        )
    if kind == "tool_result":
        content = d.get("content", "")
        decoded: str | tuple[ContentBlock, ...]
        if isinstance(content, str):
            decoded = content
        elif isinstance(content, list):
            decoded = tuple(decode_block(b, source) for b in content)
        else:
            raise FormatError(source, "tool_result content must be a string or a list")
        extra = _rest(d, {"type", "tool_use_id", "content", "is_error"})
        if "content" not in d:
            extra[f"{_NS}._no_content"] = True
        is_error = d.get("is_error")
        if "is_error" in d and is_error is None:
            extra[f"{_NS}._null_is_error"] = True
        elif is_error is not None and not isinstance(is_error, bool):
            raise FormatError(source, "tool_result block: 'is_error' must be true or false")
        return ToolResultBlock(
            _field(d, "tool_use_id", str, kind, source), decoded, is_error, extra
        )
    if kind == "thinking":
        signature = d.get("signature")
        if signature is not None and not isinstance(signature, str):
            raise FormatError(source, "thinking block: 'signature' must be a string")
        extra = _rest(d, {"type", "thinking", "signature"})
        if "signature" in d and signature is None:
            extra[f"{_NS}._null_signature"] = True
        return ThinkingBlock(_field(d, "thinking", str, kind, source), signature, False, extra)
    if kind == "redacted_thinking":
        data = _field(d, "data", str, kind, source)
        return ThinkingBlock(data, None, True, _rest(d, {"type", "data"}))
    if kind == "image" or kind == "document":
        media: Literal["image", "document"] = "image" if kind == "image" else "document"
        source_ = dict(_field(d, "source", Mapping, kind, source))
        return MediaBlock(media, source_, _rest(d, {"type", "source"}))
    return OpaqueBlock(kind, dict(d))


def encode_block(block: ContentBlock) -> dict[str, Any]:
    """One content block in its JSON form."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text, **_own(block.extra)}
    if isinstance(block, ToolUseBlock):
        return {
            "type": "tool_use",
            "id": block.id,
            "name": block.name,
            "input": dict(block.input),
            **_own(block.extra),
        }
    if isinstance(block, ToolResultBlock):
        extra = _own(block.extra)
        out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
        if not extra.pop("_no_content", False) or block.content:
            out["content"] = (
                block.content
                if isinstance(block.content, str)
                else [encode_block(b) for b in block.content]
            )
        if block.is_error is not None:
            out["is_error"] = block.is_error
        elif extra.pop("_null_is_error", False):
            out["is_error"] = None
        out.update(extra)
        return out
    if isinstance(block, ThinkingBlock):
        if block.redacted:
            return {"type": "redacted_thinking", "data": block.thinking, **_own(block.extra)}
        extra = _own(block.extra)
        out = {"type": "thinking", "thinking": block.thinking}
        if block.signature is not None:
            out["signature"] = block.signature
        elif extra.pop("_null_signature", False):
            out["signature"] = None
        out.update(extra)
        return out
    if isinstance(block, MediaBlock):
        if _OPENAI_IMAGE in block.extra:  # an image_url part read from Chat Completions
            return encode_block(_image_from_url(block.source.get("url"), "an image_url part"))
        return {"type": block.media, "source": dict(block.source), **_own(block.extra)}
    if block.type in _OPENAI_TYPES:
        return encode_block(_from_openai(block))
    return dict(block.data)


_OPENAI_TYPES = frozenset(
    {
        # Chat Completions content parts (text is a TextBlock)
        "image_url",
        "input_audio",
        "file",
        "refusal",
        # Responses API input and output content
        "input_text",
        "input_image",
        "input_file",
        "output_text",
    }
)
"""Content part types of OpenAI's formats that the Messages API does not take:
:func:`encode_block` converts each (see the module docstring) or refuses it."""

_OPENAI_IMAGE = "openai.image_url"
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_DATA_URL = "data:"


def _no_form(what: str, why: str) -> UsageError:
    return UsageError(f"{what} has no Anthropic Messages form: {why}")


def _base64_media(data: str, filename: Any, what: str) -> MediaBlock:
    """A ``data:<type>;base64,<data>`` URL (or bare base64, a PDF by its filename)
    as a base64 document or image."""
    if data.startswith(_DATA_URL):
        header, sep, payload = data[len(_DATA_URL) :].partition(",")
        media_type, _, encoding = header.partition(";")
        if not sep or encoding != "base64":
            raise _no_form(what, "its data is not a base64 data: URL")
    elif isinstance(filename, str) and filename.lower().endswith(".pdf"):
        media_type, payload = "application/pdf", data
    else:
        raise _no_form(what, "its data names no media type (a data: URL or a .pdf filename)")
    source = {"type": "base64", "media_type": media_type, "data": payload}
    if media_type in _IMAGE_TYPES:
        return MediaBlock("image", source)
    if media_type == "application/pdf":
        title = {f"{_NS}.title": filename} if isinstance(filename, str) and filename else {}
        return MediaBlock("document", source, title)
    raise _no_form(what, f"{media_type!r} is neither a PDF nor a JPEG, PNG, GIF or WebP image")


def _image_from_url(url: Any, what: str) -> MediaBlock:
    if not isinstance(url, str) or not url:
        raise _no_form(what, "it has no URL")
    if url.startswith(_DATA_URL):
        image = _base64_media(url, None, what)
        if image.media != "image":
            raise _no_form(what, f"its data URL holds a {image.source['media_type']!r}")
        return image
    return MediaBlock("image", {"type": "url", "url": url})


def _file(spec: Mapping[str, Any], what: str) -> MediaBlock:
    data, url = spec.get("file_data"), spec.get("file_url")
    if isinstance(data, str) and data:
        return _base64_media(data, spec.get("filename"), what)
    if isinstance(url, str) and url:
        return MediaBlock("document", {"type": "url", "url": url})
    if spec.get("file_id") is not None:
        raise _no_form(what, "it is given by an OpenAI file_id, which Anthropic cannot read")
    raise _no_form(what, "it holds no file_data")


def _from_openai(block: OpaqueBlock) -> ContentBlock:
    """The Messages API block for a part read from an OpenAI format, or the
    :class:`~ctxwise.errors.UsageError` saying why there is none."""
    d, kind = block.data, block.type
    what = f"an OpenAI {kind!r} part"
    if kind in ("refusal", "input_text", "output_text"):
        text = d.get("refusal" if kind == "refusal" else "text")
        if not isinstance(text, str) or not text:
            raise _no_form(what, "it holds no text")
        return TextBlock(text)
    if kind == "file":
        spec = d.get("file")
        if not isinstance(spec, Mapping):
            raise _no_form(what, "it has no 'file' object")
        return _file(spec, what)
    if kind == "input_file":
        return _file(d, what)
    if kind == "input_image":
        if d.get("image_url") is None and d.get("file_id") is not None:
            raise _no_form(what, "it is given by an OpenAI file_id, which Anthropic cannot read")
        return _image_from_url(d.get("image_url"), what)
    if kind == "image_url":
        image = d.get("image_url")
        return _image_from_url(image.get("url") if isinstance(image, Mapping) else image, what)
    raise _no_form(what, "the Messages API takes no audio" if kind == "input_audio" else kind)


def _decode_message(raw: Any, index: int, source: str) -> Message:
    d = _obj(raw, f"message {index}", source)
    role = d.get("role")
    if role not in ("user", "assistant"):
        raise FormatError(
            source, f"message {index}: role must be 'user' or 'assistant', got {role!r}"
        )
    content = d.get("content")
    extra = _rest(d, {"role", "content"})
    if isinstance(content, str):
        return Message(role, (TextBlock(content),), plain=True, extra=extra)
    if not isinstance(content, list):
        raise FormatError(source, f"message {index}: content must be a string or a list of blocks")
    return Message(role, tuple(decode_block(b, source) for b in content), extra=extra)


def _encode_message(msg: Message) -> dict[str, Any]:
    if msg.role == "system":
        raise UsageError("system messages can only open an Anthropic request")
    only = msg.content[0] if len(msg.content) == 1 else None
    if msg.plain and isinstance(only, TextBlock) and not _own(only.extra):
        content: Any = only.text
    else:
        content = [encode_block(b) for b in msg.content]
    return {"role": msg.role, "content": content, **_own(msg.extra)}


def encode_message(message: Message) -> dict[str, Any]:
    """One conversation message (not a system message) as a Messages API message."""
    return _encode_message(message)


def _decode_system(system: Any, source: str) -> Message:
    if isinstance(system, str):
        return Message("system", (TextBlock(system),), plain=True)
    if isinstance(system, list):
        return Message("system", tuple(decode_block(b, source) for b in system))
    raise FormatError(source, "system must be a string or a list of text blocks")


def decode_messages(
    messages: Sequence[Any], system: Any = None, *, source: str = _SOURCE
) -> Transcript:
    """A transcript from a ``messages`` list (and an optional top-level ``system``)."""
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        raise FormatError(source, "messages must be a list")
    out: list[Message] = []
    if system is not None:
        out.append(_decode_system(system, source))
    out.extend(_decode_message(m, i, source) for i, m in enumerate(messages))
    return Transcript(tuple(out), source=source, format=_NS)


def encode_messages(transcript: Transcript) -> tuple[Any, list[dict[str, Any]]]:
    """``(system, messages)`` for a request; ``system`` is ``None`` when there is none.

    Leading system messages become the top-level ``system``; a system message
    after the first conversation message is a :class:`~ctxwise.errors.UsageError`.
    """
    msgs = list(transcript.messages)
    system_msgs: list[Message] = []
    while msgs and msgs[0].role == "system":
        system_msgs.append(msgs.pop(0))
    system: Any = None
    if len(system_msgs) == 1 and system_msgs[0].plain and len(system_msgs[0].content) == 1:
        only = system_msgs[0].content[0]
        system = only.text if isinstance(only, TextBlock) else [encode_block(only)]
    elif system_msgs:
        system = [encode_block(b) for m in system_msgs for b in m.content]
    return system, [_encode_message(m) for m in msgs]


def decode_request(payload: Any, *, source: str = _SOURCE) -> Transcript:
    """A transcript from a Messages API request body."""
    d = _obj(payload, "an Anthropic request", source)
    if "messages" not in d:
        raise FormatError(source, "an Anthropic request needs 'messages'")
    t = decode_messages(d["messages"], d.get("system"), source=source)
    # an explicit "system": null stays a param, so it is written back as it came
    params = {
        k: v for k, v in d.items() if k != "messages" and not (k == "system" and v is not None)
    }
    return Transcript(t.messages, params, source=source, format=_NS)


def encode_request(transcript: Transcript) -> dict[str, Any]:
    """A Messages API request body (``transcript.params`` supply model, max_tokens, …)."""
    system, messages = encode_messages(transcript)
    out: dict[str, Any] = dict(transcript.params) if transcript.format == _NS else {}
    if system is not None:
        out["system"] = system
    out["messages"] = messages
    return out


def decode_response(payload: Any, *, source: str = _SOURCE) -> Message:
    """The assistant message of a Messages API response (``"type": "message"``)."""
    d = _obj(payload, "an Anthropic response", source)
    if d.get("type") != "message" or d.get("role") != "assistant":
        raise FormatError(source, "an Anthropic response has type 'message' and role 'assistant'")
    content = d.get("content")
    if not isinstance(content, list):
        raise FormatError(source, "response content must be a list of blocks")
    # Response-only fields (model, stop_reason, usage, …) live in their own
    # namespace: the message can join the next request without carrying them.
    return Message(
        "assistant",
        tuple(decode_block(b, source) for b in content),
        id=d.get("id"),
        extra=keep(_RESPONSE_NS, d, {"type", "role", "content", "id"}),
    )


def encode_response(message: Message) -> dict[str, Any]:
    """A Messages API response body for an assistant message."""
    if message.role != "assistant":
        raise UsageError("only assistant messages encode as a response")
    out: dict[str, Any] = {"type": "message", "role": "assistant"}
    if message.id is not None:
        out["id"] = message.id
    out["content"] = [encode_block(b) for b in message.content]
    out.update(own(_RESPONSE_NS, message.extra))
    return out


def render_request(
    assembly: Assembly,
    task: str,
    *,
    model: str,
    max_tokens: int = 1024,
    cache_ttl: Literal["5m", "1h"] | None = None,
) -> dict[str, Any]:
    """A Messages API request for an assembled window.

    Stable sections (in window order) become ``system`` text blocks and the last
    one carries ``cache_control``, so every request that shares them hits the
    provider's prompt cache. Other sections follow as text blocks of the user
    message, and ``task`` is the last block.
    """
    if not task.strip():
        raise UsageError("task must not be empty: it is what the model is asked to do")
    stable = [s for s in assembly.sections if s.stable and s.content.strip()]
    live = [s for s in assembly.sections if not s.stable]
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    if stable:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": s.content} for s in stable]
        breakpoint_: dict[str, Any] = {"type": "ephemeral"}
        if cache_ttl is not None:
            breakpoint_["ttl"] = cache_ttl
        blocks[-1]["cache_control"] = breakpoint_
        body["system"] = blocks
    user = [{"type": "text", "text": s.content} for s in live if s.content.strip()]
    user.append({"type": "text", "text": task})
    body["messages"] = [{"role": "user", "content": user}]
    return body
