"""ctxwise's own JSON form of the neutral message model, for what ctxwise persists.

Every block is an object tagged by ``type`` (``text``, ``tool_use``,
``tool_result``, ``thinking``, ``media``, ``opaque``) and every message an object
with ``role`` and ``content`` (a list of blocks), plus ``kind``, ``plain``,
``id``, ``timestamp`` and ``extra`` when they differ from their defaults. The
round trip is exact: ``decode_message(encode_message(m)) == m``, ``extra``
mappings included, so a session saved by the Engine renders for any provider
exactly as the messages it was given.

Unlike the provider codecs, this form is not meant to be sent anywhere: it is
the session store's and the archive's on-disk shape. Bad input raises
:class:`~ctxwise.errors.FormatError` naming the message and block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxwise.errors import FormatError
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

__all__ = ["decode_block", "decode_message", "decode_messages", "encode_block", "encode_message"]

_SOURCE = "ctxwise session"
_ROLES = ("system", "user", "assistant")
_KINDS = ("message", "compact_summary")


def encode_block(block: ContentBlock) -> dict[str, Any]:
    """One block as a JSON-ready object tagged by ``type``."""
    out: dict[str, Any]
    if isinstance(block, TextBlock):
        out = {"type": "text", "text": block.text}
    elif isinstance(block, ToolUseBlock):
        out = {"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)}
    elif isinstance(block, ToolResultBlock):
        content: Any = (
            block.content
            if isinstance(block.content, str)
            else [encode_block(b) for b in block.content]
        )
        out = {"type": "tool_result", "tool_use_id": block.tool_use_id, "content": content}
        if block.is_error is not None:
            out["is_error"] = block.is_error
    elif isinstance(block, ThinkingBlock):
        out = {"type": "thinking", "thinking": block.thinking}
        if block.signature is not None:
            out["signature"] = block.signature
        if block.redacted:
            out["redacted"] = True
    elif isinstance(block, MediaBlock):
        out = {"type": "media", "media": block.media, "source": dict(block.source)}
    else:
        return {"type": "opaque", "block_type": block.type, "data": dict(block.data)}
    if block.extra:
        out["extra"] = dict(block.extra)
    return out


def encode_message(message: Message) -> dict[str, Any]:
    """One message as a JSON-ready object (defaults left out)."""
    out: dict[str, Any] = {
        "role": message.role,
        "content": [encode_block(b) for b in message.content],
    }
    if message.kind != "message":
        out["kind"] = message.kind
    if message.plain:
        out["plain"] = True
    if message.id is not None:
        out["id"] = message.id
    if message.timestamp is not None:
        out["timestamp"] = message.timestamp
    if message.extra:
        out["extra"] = dict(message.extra)
    return out


def _get(raw: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = raw.get(key)
    if not isinstance(value, kind):
        raise FormatError(_SOURCE, f"{where}: {key!r} is missing or has the wrong type")
    return value


def _optional(raw: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = raw.get(key)
    if value is not None and not isinstance(value, kind):
        raise FormatError(_SOURCE, f"{where}: {key!r} has the wrong type")
    return value


def _extra(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    value = raw.get("extra", {})
    if not isinstance(value, dict):
        raise FormatError(_SOURCE, f"{where}: 'extra' must be an object")
    return value


def decode_block(raw: Any, where: str = "block") -> ContentBlock:
    """The block :func:`encode_block` wrote; :class:`FormatError` otherwise."""
    if not isinstance(raw, dict):
        raise FormatError(_SOURCE, f"{where}: a block must be an object")
    kind = raw.get("type")
    extra = _extra(raw, where)
    if kind == "text":
        return TextBlock(_get(raw, "text", str, where), extra)
    if kind == "tool_use":
        return ToolUseBlock(
            _get(raw, "id", str, where),
            _get(raw, "name", str, where),
            _get(raw, "input", dict, where),
            extra,
        )
    if kind == "tool_result":
        content = raw.get("content", "")
        if isinstance(content, list):
            content = tuple(decode_block(b, f"{where} part {i}") for i, b in enumerate(content))
        elif not isinstance(content, str):
            raise FormatError(_SOURCE, f"{where}: tool_result content must be text or a list")
        is_error = _optional(raw, "is_error", bool, where)
        return ToolResultBlock(_get(raw, "tool_use_id", str, where), content, is_error, extra)
    if kind == "thinking":
        return ThinkingBlock(
            _get(raw, "thinking", str, where),
            _optional(raw, "signature", str, where),
            bool(raw.get("redacted", False)),
            extra,
        )
    if kind == "media":
        media = raw.get("media")
        if media not in ("image", "document"):
            raise FormatError(_SOURCE, f"{where}: media must be 'image' or 'document'")
        return MediaBlock(media, _get(raw, "source", dict, where), extra)
    if kind == "opaque":
        return OpaqueBlock(_get(raw, "block_type", str, where), _get(raw, "data", dict, where))
    raise FormatError(_SOURCE, f"{where}: unknown block type {kind!r}")


def decode_message(raw: Any, index: int = 0) -> Message:
    """The message :func:`encode_message` wrote; :class:`FormatError` otherwise."""
    where = f"message {index}"
    if not isinstance(raw, dict):
        raise FormatError(_SOURCE, f"{where}: a message must be an object")
    role = raw.get("role")
    if role not in _ROLES:
        raise FormatError(_SOURCE, f"{where}: role must be one of {', '.join(_ROLES)}")
    kind = raw.get("kind", "message")
    if kind not in _KINDS:
        raise FormatError(_SOURCE, f"{where}: unknown kind {kind!r}")
    blocks = _get(raw, "content", list, where)
    return Message(
        role=role,
        content=tuple(decode_block(b, f"{where} block {i}") for i, b in enumerate(blocks)),
        kind=kind,
        plain=bool(raw.get("plain", False)),
        id=_optional(raw, "id", str, where),
        timestamp=_optional(raw, "timestamp", str, where),
        extra=_extra(raw, where),
    )


def decode_messages(raw: Sequence[Any], first: int = 0) -> list[Message]:
    """Messages :func:`encode_message` wrote, numbered from ``first`` in errors."""
    return [decode_message(m, first + i) for i, m in enumerate(raw)]
