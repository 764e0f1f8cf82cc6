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
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any, Literal

import anyio
import httpx
from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.background import BackgroundTask

from ctxwise.errors import UsageError
from ctxwise.formats import anthropic
from ctxwise.messages import Message, message_problem
from ctxwise.server.auth import tenant_of
from ctxwise.server.engines import EnginePool
from ctxwise.server.proxy._naming import SESSION_HEADER, derived_session
from ctxwise.server.proxy._pools import pool_for
from ctxwise.server.proxy._sse import MessageStream
from ctxwise.server.proxy._turns import ClientInputError, Prepared, fail_reason, prepare, record
from ctxwise.server.proxy._upstream import (
    UpstreamFailed,
    open_upstream,
    request_headers,
    response_headers,
)
from ctxwise.server.shapes import error_body
from ctxwise.sessions import check_session_id

__all__ = ["FAIL_OPEN_HEADER", "MessagesBody", "router"]

FAIL_OPEN_HEADER = "x-ctxwise-fail-open"
"""Set on an answer to a request ctxwise forwarded unchanged after failing itself."""

logger = logging.getLogger("ctxwise.server.proxy")


Tenant = Annotated[str, Depends(tenant_of)]
router = APIRouter(tags=["proxy"])


def _refuse(status: int, message: str) -> HTTPException:
    """An error the app answers in the Messages API's shape (the path's)."""
    return HTTPException(status, message)


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


async def _json_body(request: Request) -> tuple[bytes, dict[str, Any]]:
    raw = await request.body()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise _refuse(400, f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _refuse(400, "the body is a JSON object")
    return raw, data


def _checked(data: dict[str, Any]) -> MessagesBody:
    try:
        return MessagesBody.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')}"
            for e in exc.errors()[:5]
        ]
        raise _refuse(400, "; ".join(problems)) from None


def _clean(block: Any) -> Any:
    """A content block without its ``cache_control`` and ``null`` fields (nested in a
    tool result's content too)."""
    if not isinstance(block, dict):
        return block
    out = {k: v for k, v in block.items() if v is not None and k != "cache_control"}
    if out.get("type") == "tool_result" and isinstance(out.get("content"), list):
        out["content"] = [_clean(b) for b in out["content"]]
    return out


def decode_history(messages: list[Any]) -> list[Message]:
    """The request's messages as ctxwise messages (see the module docstring).

    Raises:
        ClientInputError: a message that does not decode.
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
        raise ClientInputError(str(exc)) from None
    for i, m in enumerate(history):
        problem = message_problem(m)
        if problem is not None:
            raise ClientInputError(f"messages.{i}: {problem}")
    return history


def system_text(system: str | list[_TextParam] | None) -> str | None:
    """The request's system prompt as one text (text blocks joined by a blank line)."""
    if system is None or isinstance(system, str):
        return system
    return "\n\n".join(b.text for b in system if b.text)


def merged(data: Mapping[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """The client's body with the Engine's ``system``, ``messages``, ``tools`` and
    ``context_management`` (module docstring)."""
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


def _session_of(request: Request, system: str | None, history: list[Message]) -> str:
    named = request.headers.get(SESSION_HEADER)
    if named is None:
        return derived_session("anthropic", system or "", history)
    try:
        return check_session_id(named)
    except UsageError as exc:
        raise _refuse(400, f"{SESSION_HEADER}: {exc}") from None


def _upstream_url(request: Request, path: str) -> str:
    base = str(request.app.state.settings.anthropic_upstream).rstrip("/")
    query = request.url.query
    return f"{base}{path}" + (f"?{query}" if query else "")


def _failed(exc: UpstreamFailed, headers: Mapping[str, str]) -> JSONResponse:
    body = error_body("anthropic", exc.status, exc.message)
    return JSONResponse(body, status_code=exc.status, headers=dict(headers))


async def _record(pool: EnginePool, tenant: str, session: str, message: dict[str, Any]) -> None:
    try:
        await pool.run(tenant, lambda e: record(e, session, message))
    except Exception as exc:  # the answer is sent: say so, change nothing
        reason = fail_reason(exc)
        logger.warning("proxy: the answer of session %r was not recorded: %s", session, reason)


@router.post("/v1/messages", summary="Anthropic Messages API, through the Engine")
async def messages(request: Request, tenant: Tenant) -> Response:
    raw, data = await _json_body(request)
    body = _checked(data)
    try:
        history = decode_history(data["messages"])
    except ClientInputError as exc:
        raise _refuse(400, exc.message) from None
    system = system_text(body.system)
    session = _session_of(request, system, history)
    pool = pool_for(request.app.state, "anthropic")
    tools = body.tools
    prepared: Prepared | None = None
    reason: str | None = None
    try:
        prepared = await pool.run(
            tenant, lambda e: prepare(e, session, history, system=system, tools=tools)
        )
    except ClientInputError as exc:
        raise _refuse(400, exc.message) from None
    except Exception as exc:  # ctxwise's own failure: fail open
        reason = fail_reason(exc)
        logger.warning("proxy: failing open for session %r: %s", session, reason)
    ours = {SESSION_HEADER: session}
    if prepared is None:
        content, extra = raw, {}
        ours[FAIL_OPEN_HEADER] = reason or "unknown"
    else:
        ours[SESSION_HEADER] = prepared.session
        content = json.dumps(
            merged(data, prepared.result.request), ensure_ascii=False, separators=(",", ":")
        ).encode("utf-8")
        extra = dict(prepared.headers)
    headers = request_headers(request.headers.items(), extra)
    client: httpx.AsyncClient = request.app.state.upstream
    try:
        upstream = await open_upstream(
            client, _upstream_url(request, "/v1/messages"), content, headers
        )
    except UpstreamFailed as exc:
        return _failed(exc, ours)
    target = None if prepared is None else (pool, tenant, prepared.session)
    kind = upstream.headers.get("content-type", "")
    if body.stream and upstream.status_code == 200 and kind.startswith("text/event-stream"):
        return _streamed(upstream, ours, target)
    return await _whole(upstream, ours, target)


async def _whole(
    upstream: httpx.Response,
    ours: Mapping[str, str],
    target: tuple[EnginePool, str, str] | None,
) -> Response:
    try:
        content = await upstream.aread()
    except httpx.TimeoutException:
        return _failed(UpstreamFailed(504, "the upstream's answer stopped coming"), ours)
    except httpx.HTTPError as exc:
        return _failed(
            UpstreamFailed(502, f"the upstream's answer broke ({type(exc).__name__})"), ours
        )
    finally:
        await upstream.aclose()
    task = None
    if target is not None and upstream.status_code == 200:
        try:
            answer = json.loads(content)
        except ValueError:
            answer = None
        if isinstance(answer, dict) and answer.get("type") == "message":
            task = BackgroundTask(_record, *target, answer)
    return Response(
        content,
        status_code=upstream.status_code,
        headers={**response_headers(upstream.headers), **ours},
        background=task,
    )


def _error_event(status: int, message: str) -> bytes:
    body = error_body("anthropic", status, message)
    return b"event: error\ndata: " + json.dumps(body).encode() + b"\n\n"


def _streamed(
    upstream: httpx.Response,
    ours: Mapping[str, str],
    target: tuple[EnginePool, str, str] | None,
) -> StreamingResponse:
    stream = MessageStream()
    ended = False

    async def relay() -> AsyncIterator[bytes]:
        nonlocal ended
        try:
            async for chunk in upstream.aiter_bytes():
                stream.feed(chunk)
                yield chunk
            ended = True
        except httpx.TimeoutException:
            yield _error_event(504, "the upstream stopped streaming (timeout)")
        except httpx.HTTPError as exc:
            yield _error_event(502, f"the upstream's stream broke ({type(exc).__name__})")
        finally:
            with anyio.CancelScope(shield=True):
                await upstream.aclose()

    async def after() -> None:
        message = stream.message
        if target is not None and ended and message is not None:
            await _record(*target, message)

    return StreamingResponse(
        relay(),
        status_code=upstream.status_code,
        headers={**response_headers(upstream.headers), **ours},
        background=BackgroundTask(after),
    )


@router.post("/v1/messages/count_tokens", summary="Anthropic token count, passed through")
async def count_tokens(request: Request, tenant: Tenant) -> Response:
    raw = await request.body()
    headers = request_headers(request.headers.items())
    client: httpx.AsyncClient = request.app.state.upstream
    url = _upstream_url(request, "/v1/messages/count_tokens")
    try:
        upstream = await open_upstream(client, url, raw, headers)
    except UpstreamFailed as exc:
        return _failed(exc, {})
    return await _whole(upstream, {}, None)
