"""The OpenAI route of the proxy: ``POST /v1/chat/completions``, as the Chat
Completions API takes it, streaming (``data:`` chunks ending in ``data: [DONE]``)
and not.

As the Anthropic route (:mod:`ctxwise.server.proxy._anthropic`), on Engines that
render Chat Completions (:mod:`ctxwise.server.proxy._pools`): the body is checked
for the API's shape (a ``model``, a non-empty ``messages`` list of system,
developer, user, assistant, tool or function messages, ``tools`` a list), a
malformed one is the API's 400 (``{"error": {...}}``), nothing stored. The system
and developer messages are the turn's system text (joined by a blank line, in
order); the other messages are the history, synced into the session (named by
``x-ctxwise-session``, or ``openai-`` and a hash of the system text and the first
user message). What goes upstream is the client's body with ``messages`` (the
Engine's: its system message first) and ``tools`` from the Engine's request, every
other field (``model``, ``max_tokens`` or ``max_completion_tokens``, ``stream``,
``stream_options``, ``temperature``, ``tool_choice``, ``response_format``, …) as
the client sent it.

A ``chat.completion`` of one choice is recorded, whole or rebuilt from the stream
(:mod:`ctxwise.server.proxy._chunks`) once ``[DONE]`` arrives; its ``usage``
(``prompt_tokens``) calibrates the session. The stream's usage comes only when the
client asks for it (``stream_options: {"include_usage": true}``); without it the
answer is recorded with no usage and the factor stays as it was. Errors, fail-open
and a dropped stream are as on the Anthropic route, in the OpenAI error shape; a
stream the upstream breaks off ends with a ``data:`` chunk holding that error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from ctxwise.engine import TurnResult
from ctxwise.errors import ProxyInputError, UsageError
from ctxwise.formats import openai
from ctxwise.messages import Message, TextBlock
from ctxwise.server.auth import tenant_of
from ctxwise.server.proxy._anthropic import checked, checked_messages, session_of
from ctxwise.server.proxy._chunks import CompletionStream
from ctxwise.server.proxy._relay import Route, Turn, json_body, refuse, relay
from ctxwise.server.shapes import error_body

__all__ = ["ChatBody", "router"]

Tenant = Annotated[str, Depends(tenant_of)]
router = APIRouter(tags=["proxy"])

_SYSTEM = ("system", "developer")


class _ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None


class ChatBody(BaseModel):
    """What the proxy checks of a Chat Completions request (other fields pass as sent)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    messages: list[_ChatMessage] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    stream: bool | None = None


def decode_chat(messages: list[Any]) -> tuple[str | None, list[Message]]:
    """The system text (the system and developer messages' text, joined) and the
    history (every other message) of a Chat Completions ``messages`` list.

    Raises:
        ProxyInputError: a message that does not decode.
    """
    try:
        decoded = openai.decode_messages(messages, source="request").messages
    except UsageError as exc:
        raise ProxyInputError(str(exc)) from None
    texts = [
        "".join(b.text for b in m.content if isinstance(b, TextBlock))
        for m in decoded
        if m.role == "system"
    ]
    history = [m for m in decoded if m.role != "system"]
    system = "\n\n".join(t for t in texts if t) or None
    return system, checked_messages(history)


def merged(data: Mapping[str, Any], result: TurnResult) -> dict[str, Any]:
    """The client's body with the Engine's ``messages`` and ``tools``."""
    request = result.request
    out = dict(data)
    out["messages"] = request["messages"]
    if "tools" in request:
        out["tools"] = request["tools"]
    return out


def _answer(answer: Any) -> bool:
    choices = answer.get("choices")
    return (
        answer.get("object") == "chat.completion"
        and isinstance(choices, list)
        and len(choices) == 1
    )


def _error_event(status: int, message: str) -> bytes:
    return b"data: " + json.dumps(error_body("openai", status, message)).encode() + b"\n\n"


ROUTE = Route(
    api="openai",
    render="openai",
    path="/v1/chat/completions",
    upstream=lambda settings: settings.openai_upstream,
    merge=merged,
    answer=_answer,
    reader=CompletionStream,
    error_event=_error_event,
)


@router.post("/v1/chat/completions", summary="OpenAI Chat Completions, through the Engine")
async def chat_completions(request: Request, tenant: Tenant) -> Response:
    raw, data = await json_body(request)
    body: ChatBody = checked(ChatBody, data)
    try:
        system, history = decode_chat(data["messages"])
    except ProxyInputError as exc:
        raise refuse(400, exc.detail) from None
    if not history:
        raise refuse(400, "messages: no user or assistant message, only system text")
    session = session_of(request, "openai", system, history)
    turn = Turn(session, body.model, history, system, body.tools, data, raw, bool(body.stream))
    return await relay(request, tenant, ROUTE, turn)
