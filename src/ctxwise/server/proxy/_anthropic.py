"""The Anthropic routes of the proxy: ``POST /v1/messages`` and ``POST
/v1/messages/count_tokens``, as the Messages API takes them.

``/v1/messages``: the body is checked for the Messages API's shape (a ``model``, a
positive ``max_tokens``, a non-empty ``messages`` list of user and assistant
messages, ``system`` text or text blocks, ``tools`` a list); a malformed one is the
API's own 400 (``invalid_request_error``), nothing stored and nothing sent upstream.
The history is decoded (the client's ``cache_control`` marks taken off its messages:
the Engine sets the breakpoints of the request it sends), synced into the session
(:mod:`ctxwise.server.proxy._naming`), and the Engine's turn runs on what is new
(:mod:`ctxwise.server.proxy._turns`), with the client's ``system`` text and ``tools``.
The request sent upstream is the client's body with ``system``, ``messages`` and
``tools`` (and ``context_management``, when the Engine's config clears server-side)
taken from the Engine's request, every other field (``model``, ``max_tokens``,
``stream``, ``temperature``, ``tool_choice``, ``thinking``, ``metadata``,
``stop_sequences``, …) as the client sent it; the Engine's headers
(``anthropic-beta``) join the client's.

The answer comes back as the upstream sent it, status and body bytes, streamed as
they arrive when the client asked for a stream. A whole ``message`` answer (status
200) is then recorded in the session (:meth:`Engine.record
<ctxwise.engine.Engine.record>`): the model's reply joins the session and its usage
calibrates the session's token count and cost (:mod:`ctxwise.turn.calibrate`). A
stream is read as it passes (:mod:`ctxwise.server.proxy._sse`) and recorded once the
upstream ends it with ``message_stop``; a stream the client drops before its end,
or one the upstream ends with an ``error`` event or cuts short, is recorded not at
all (the session then ends with the request's last message, and the client's next
request, holding whatever it kept of the answer, brings the session up to date).

Errors: an upstream error response (4xx, 5xx) comes back as it is; an upstream that
does not answer in time is a 504 ``timeout_error``, one that cannot be reached a 502
``api_error``, both in the Messages API's shape; a stream the upstream stops
answering midway ends with an ``error`` event of that shape. When ctxwise itself
fails while building the request (anything the Engine raises that is not the
client's malformed input), the original body is forwarded unchanged (fail open),
the response says so in ``x-ctxwise-fail-open: <reason>``, a warning is logged
(the session and the reason, never a header) and nothing is recorded: the next
request's sync appends what this one brought. Every answer names the session that
served it in ``x-ctxwise-session``.

``/v1/messages/count_tokens`` is passed through unchanged (only the ctxwise key is
checked and removed): the count is of the request as the client would send it.
Counting the request the Engine would send instead would need the session's next
turn, which a count does not make, and the client reads the count to decide on its
own compaction, for which the unedited count is the safe one (never lower than
what the proxy sends).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxwise.engine import TurnResult
from ctxwise.errors import ProxyInputError, UsageError
from ctxwise.formats import anthropic
from ctxwise.messages import Message, message_problem
from ctxwise.server.auth import tenant_of
from ctxwise.server.proxy._naming import SESSION_HEADER, derived_session
from ctxwise.server.proxy._relay import Route, Turn, forward, json_body, refuse, relay
from ctxwise.server.proxy._sse import MessageStream
from ctxwise.server.shapes import error_body
from ctxwise.sessions import check_session_id

__all__ = ["MessagesBody", "router"]

Tenant = Annotated[str, Depends(tenant_of)]
router = APIRouter(tags=["proxy"])


class _MessageParam(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["user", "assistant"]
    content: str | list[dict[str, Any]]


class _TextParam(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["text"]
    text: str


class MessagesBody(BaseModel):
    """What the proxy checks of a Messages API request (other fields pass as sent)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    max_tokens: int = Field(ge=1)
    messages: list[_MessageParam] = Field(min_length=1)
    system: str | list[_TextParam] | None = None
    tools: list[dict[str, Any]] | None = None
    stream: bool | None = None


def checked(model: type[BaseModel], data: dict[str, Any]) -> Any:
    """``data`` validated by ``model``, else a 400 naming the first problems."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')}"
            for e in exc.errors()[:5]
        ]
        raise refuse(400, "; ".join(problems)) from None


def _clean(block: Any) -> Any:
    """A content block without its ``cache_control`` and ``null`` fields (nested in a
    tool result's content too)."""
    if not isinstance(block, dict):
        return block
    out = {k: v for k, v in block.items() if v is not None and k != "cache_control"}
    if out.get("type") == "tool_result" and isinstance(out.get("content"), list):
        out["content"] = [_clean(b) for b in out["content"]]
    return out


def checked_messages(history: list[Message]) -> list[Message]:
    """``history``, or a :class:`ProxyInputError` naming a malformed message."""
    for i, m in enumerate(history):
        problem = message_problem(m)
        if problem is not None:
            raise ProxyInputError(f"messages.{i}: {problem}")
    return history


def decode_history(messages: list[Any]) -> list[Message]:
    """The request's messages as ctxwise messages (see the module docstring).

    Raises:
        ProxyInputError: a message that does not decode.
    """
    cleaned = [
        {**m, "content": [_clean(b) for b in m["content"]]}
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        else m
        for m in messages
    ]
    try:
        history = list(anthropic.decode_messages(cleaned, source="request").messages)
    except UsageError as exc:
        raise ProxyInputError(str(exc)) from None
    return checked_messages(history)


def system_text(system: str | list[_TextParam] | None) -> str | None:
    """The request's system prompt as one text (text blocks joined by a blank line)."""
    if system is None or isinstance(system, str):
        return system
    return "\n\n".join(b.text for b in system if b.text)


def merged(data: Mapping[str, Any], result: TurnResult) -> dict[str, Any]:
    """The client's body with the Engine's ``system``, ``messages``, ``tools`` and
    ``context_management`` (module docstring)."""
    request = result.request
    out = dict(data)
    out["messages"] = request["messages"]
    for key in ("system", "tools"):
        if key in request:
            out[key] = request[key]
        elif key == "system":
            out.pop(key, None)
    if "context_management" in request:
        out["context_management"] = request["context_management"]
    return out


def session_of(request: Request, api: str, system: str | None, history: list[Message]) -> str:
    """The session the header names, else the one derived from the conversation."""
    named = request.headers.get(SESSION_HEADER)
    if named is None:
        return derived_session(api, system or "", history)
    try:
        return check_session_id(named)
    except UsageError as exc:
        raise refuse(400, f"{SESSION_HEADER}: {exc}") from None


def _error_event(status: int, message: str) -> bytes:
    body = error_body("anthropic", status, message)
    return b"event: error\ndata: " + json.dumps(body).encode() + b"\n\n"


ROUTE = Route(
    api="anthropic",
    render="anthropic",
    path="/v1/messages",
    upstream=lambda settings: settings.anthropic_upstream,
    merge=merged,
    answer=lambda answer: answer.get("type") == "message",
    reader=MessageStream,
    error_event=_error_event,
)


@router.post("/v1/messages", summary="Anthropic Messages API, through the Engine")
async def messages(request: Request, tenant: Tenant) -> Response:
    raw, data = await json_body(request)
    body: MessagesBody = checked(MessagesBody, data)
    try:
        history = decode_history(data["messages"])
    except ProxyInputError as exc:
        raise refuse(400, exc.detail) from None
    system = system_text(body.system)
    session = session_of(request, "anthropic", system, history)
    turn = Turn(session, body.model, history, system, body.tools, data, raw, bool(body.stream))
    return await relay(request, tenant, ROUTE, turn)


COUNT_ROUTE = Route(
    api="anthropic",
    render="anthropic",
    path="/v1/messages/count_tokens",
    upstream=lambda settings: settings.anthropic_upstream,
    merge=merged,
    answer=lambda answer: False,
    reader=MessageStream,
    error_event=_error_event,
)


@router.post("/v1/messages/count_tokens", summary="Anthropic token count, passed through")
async def count_tokens(request: Request, tenant: Tenant) -> Response:
    raw = await request.body()
    return await forward(request, COUNT_ROUTE, raw, {}, {}, None, stream=False)
