"""The OpenAI Responses route of the proxy: ``POST /v1/responses``, streaming (typed
events ending in ``response.completed``) and not.

As the other routes (:mod:`ctxwise.server.proxy._relay`): the body is checked for
the API's shape (a ``model``; ``input`` a text or a list of items; ``instructions``
text; ``tools`` a list), a malformed one is the API's 400, nothing stored. The
``input`` is the history (a text is one user message; items are read by
:func:`ctxwise.formats.responses.to_messages`), ``instructions`` the turn's system
text, and the session is named by ``x-ctxwise-session`` or ``responses-`` and a hash
of the instructions and the first user message. The turn runs on the Engines that
render OpenAI requests; what goes upstream is the client's body with ``input`` and
``instructions`` written from the window the Engine built
(:func:`ctxwise.formats.responses.to_items`: the items the client sent come back as
they were, the Engine's edits applied), every other field (``model``, ``tools``,
``stream``, ``reasoning``, ``store``, ``max_output_tokens``, …) as sent. The
client's tools are sent as given (the Engine counts them in the budget).

A completed ``response`` (``status: "completed"``; in a stream, the one
``response.completed`` carries) is recorded, and its ``usage`` calibrates the
session.

A request that continues a conversation the provider keeps
(``previous_response_id``, ``conversation``) holds only its newest input: the
history is on the provider's side, out of the Engine's reach, so the request is
passed through unchanged, nothing recorded, with ``x-ctxwise-passthrough`` saying
why.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from ctxwise.engine import TurnResult
from ctxwise.errors import ProxyInputError, UsageError
from ctxwise.formats import responses
from ctxwise.messages import Message
from ctxwise.server.auth import tenant_of
from ctxwise.server.proxy._anthropic import checked, checked_messages, session_of
from ctxwise.server.proxy._events import ResponseEvents
from ctxwise.server.proxy._relay import Route, Turn, forward, json_body, refuse, relay
from ctxwise.server.shapes import error_type

__all__ = ["PASSTHROUGH_HEADER", "ResponsesBody", "router"]

PASSTHROUGH_HEADER = "x-ctxwise-passthrough"
"""Set on an answer to a request passed through unchanged by design (the history it
continues is kept by the provider)."""

Tenant = Annotated[str, Depends(tenant_of)]
router = APIRouter(tags=["proxy"])


class ResponsesBody(BaseModel):
    """What the proxy checks of a Responses API request (other fields pass as sent)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    stream: bool | None = None
    previous_response_id: str | None = None
    conversation: Any = None


def decode_input(value: str | list[Any]) -> list[Message]:
    """The request's ``input`` as ctxwise messages.

    Raises:
        ProxyInputError: an item that does not decode, or no input at all.
    """
    if isinstance(value, str):
        if not value:
            raise ProxyInputError("input: an empty text")
        return [Message.text_message("user", value)]
    if not value:
        raise ProxyInputError("input: an empty list")
    try:
        history = responses.to_messages(value)
    except (UsageError, KeyError, TypeError) as exc:
        raise ProxyInputError(f"input: {exc}") from None
    return checked_messages(history)


def merged(data: Mapping[str, Any], result: TurnResult) -> dict[str, Any]:
    """The client's body with ``input`` and ``instructions`` from the Engine's window."""
    instructions, items = responses.to_items(result.window.messages)
    out = dict(data)
    out["input"] = items
    if instructions:
        out["instructions"] = instructions
    else:
        out.pop("instructions", None)
    return out


def _answer(answer: Any) -> bool:
    return bool(answer.get("object") == "response" and answer.get("status") == "completed")


def _error_event(status: int, message: str) -> bytes:
    event = {"type": "error", "code": error_type("openai", status), "message": message}
    return b"event: error\ndata: " + json.dumps({**event, "param": None}).encode() + b"\n\n"


ROUTE = Route(
    api="openai",
    render="openai",
    path="/v1/responses",
    upstream=lambda settings: settings.openai_upstream,
    merge=merged,
    answer=_answer,
    reader=ResponseEvents,
    error_event=_error_event,
)


@router.post("/v1/responses", summary="OpenAI Responses API, through the Engine")
async def create_response(request: Request, tenant: Tenant) -> Response:
    raw, data = await json_body(request)
    body: ResponsesBody = checked(ResponsesBody, data)
    if body.previous_response_id is not None or body.conversation is not None:
        why = "previous_response_id" if body.previous_response_id is not None else "conversation"
        ours = {PASSTHROUGH_HEADER: f"the provider keeps this conversation ({why})"}
        return await forward(request, ROUTE, raw, {}, ours, None, stream=bool(body.stream))
    try:
        history = decode_input(body.input)
    except ProxyInputError as exc:
        raise refuse(400, exc.detail) from None
    session = session_of(request, "responses", body.instructions, history)
    turn = Turn(
        session, body.model, history, body.instructions, body.tools, data, raw, bool(body.stream)
    )
    return await relay(request, tenant, ROUTE, turn)
