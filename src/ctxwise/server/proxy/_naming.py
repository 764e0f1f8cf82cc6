"""Which session a proxied request belongs to, and what of its history is new.

A provider request carries the whole conversation. The proxy keeps one ctxwise
session per conversation, named:

- by the ``x-ctxwise-session`` header when the client sends one (any session id:
  a new id starts a new session, the id of one the tenant has continues it);
- else **derived** from the conversation's start, which every later request of it
  repeats: ``"<api>-"`` and a SHA-256 of the system text and the first user message
  (:func:`derived_session`). Two conversations that open with the same system text
  and the same first message share a session; name them with the header to keep them
  apart.

What is new is found by :meth:`Engine.sync <ctxwise.engine.Engine.sync>` with
:data:`PROXY_KEYS`: a message is keyed by its role and the content a client sends
back (:func:`message_key`): blocks without their ``extra`` fields (cache breakpoints
the client moves from request to request, citations, a response's usage and id), a
string content read as one text block, no empty text (``"content": ""`` and ``null``
alike), and a thinking block without its signature.
So the assistant message the proxy recorded from the upstream's response matches the
same message when the client sends it back in its next request.

A rewound or forked conversation (an earlier history sent again, an edited message,
a retry that differs) is not merged into the session: sync refuses it
(:class:`~ctxwise.errors.HistoryRewoundError`) and the request goes to a **fork
session** (:func:`fork_session`), named from the session it left and the history up
to the first message that differs. The next request of the fork repeats that
history, so it finds the same fork session and continues it; a fork of a fork goes
one level deeper, up to :data:`MAX_FORK_DEPTH`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ctxwise._sync import SyncKeys
from ctxwise.formats import neutral
from ctxwise.messages import (
    ContentBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
)

__all__ = [
    "MAX_FORK_DEPTH",
    "PROXY_KEYS",
    "SESSION_HEADER",
    "derived_session",
    "fork_session",
    "message_key",
]

SESSION_HEADER = "x-ctxwise-session"
"""The request header that names the session, and the response header that says
which session served the request (a fork session when the conversation forked)."""

MAX_FORK_DEPTH = 8
"""Forks of forks followed for one request; a deeper one is a ctxwise failure (the
request is forwarded unchanged)."""

_HASH = 32


def _bare(block: ContentBlock) -> ContentBlock:
    """``block`` as a client sends it back: no extra fields, no signature."""
    if isinstance(block, OpaqueBlock):
        return OpaqueBlock(
            block.type, {k: v for k, v in block.data.items() if k != "cache_control"}
        )
    if isinstance(block, ToolResultBlock):
        content = (
            block.content
            if isinstance(block.content, str)
            else tuple(_bare(b) for b in block.content)
        )
        return ToolResultBlock(block.tool_use_id, content, bool(block.is_error))
    if isinstance(block, ThinkingBlock):
        return ThinkingBlock(block.thinking, None, block.redacted)
    return replace(block, extra={})


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH]


def message_key(message: Message) -> str:
    """The sync key of ``message`` (see the module docstring)."""
    blocks = tuple(
        _bare(b) for b in message.content if not (isinstance(b, TextBlock) and not b.text)
    )
    bare = Message(message.role, blocks, kind=message.kind)
    return "p:" + _digest(neutral.encode_message(bare))


PROXY_KEYS = SyncKeys(lambda m: (message_key(m),))
"""The proxy's sync keys (one object: the Engine keeps a session's keys per object)."""


def derived_session(api: str, system: str, history: Sequence[Message]) -> str:
    """The session of a conversation without a session header: ``api``, then a hash
    of the system text and the first user message (none: of the system text alone)."""
    first = next((m for m in history if m.role == "user"), None)
    return f"{api}-" + _digest([system, None if first is None else message_key(first)])


def fork_session(session_id: str, history: Sequence[Message], at: int) -> str:
    """The fork of ``session_id`` that ``history`` starts, where its message ``at``
    is the latest the session holds (:class:`~ctxwise.errors.HistoryRewoundError`'s
    ``at``): named from the session and the history to the message after it."""
    keys = [message_key(m) for m in history[: at + 2]]
    stem = session_id[:150]
    return f"{stem}~{_digest([session_id, keys])[:16]}"
