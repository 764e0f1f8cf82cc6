"""What every proxy route shares: the body read, the Engine's turn or fail-open, the
upstream call, and the answer relayed back (whole, or streamed as it arrives) and
recorded in the session once it is complete.

A route decodes its provider's body into a :class:`Turn` (the session, the history,
the system text and tools), and :func:`relay` does the rest: it runs the turn on the
route's Engine pool (:mod:`~ctxwise.server.proxy._turns`), builds the upstream body
from the Engine's request (the route's ``merge``), or forwards the original body
unchanged when ctxwise fails (``x-ctxwise-fail-open``), and passes the upstream's
answer back. A stream is read by the route's :class:`Reader` as it passes; the
message it rebuilds, or the whole answer the route's ``answer`` accepts, is recorded
after the client has it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import httpx
from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from ctxwise.engine import TurnResult
from ctxwise.errors import ProxyInputError, UpstreamError
from ctxwise.messages import Message
from ctxwise.server.engines import EnginePool
from ctxwise.server.proxy._naming import SESSION_HEADER
from ctxwise.server.proxy._pools import Render, pool_for
from ctxwise.server.proxy._turns import Prepared, fail_reason, prepare, record
from ctxwise.server.proxy._upstream import (
    open_upstream,
    request_headers,
    response_headers,
)
from ctxwise.server.shapes import API, error_body

__all__ = ["FAIL_OPEN_HEADER", "Reader", "Route", "Turn", "json_body", "refuse", "relay"]

FAIL_OPEN_HEADER = "x-ctxwise-fail-open"
"""Set on an answer to a request ctxwise forwarded unchanged after failing itself."""

logger = logging.getLogger("ctxwise.server.proxy")


class Reader(Protocol):
    """Reads a stream as it passes; ``message`` is the answer to record once the
    stream completed, ``None`` before (or when it cannot be rebuilt)."""

    def feed(self, chunk: bytes) -> None: ...

    @property
    def message(self) -> dict[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class Route:
    """What differs from one provider's route to another's."""

    api: API
    render: Render
    path: str
    """The upstream path (``/v1/messages``)."""
    upstream: Callable[[Any], str]
    """The upstream's base URL, from the service's settings."""
    merge: Callable[[Mapping[str, Any], TurnResult], dict[str, Any]]
    """The client's body and the Engine's turn → the body to send."""
    answer: Callable[[Any], bool]
    """Is this whole (non-streamed) JSON answer one to record?"""
    reader: Callable[[], Reader]
    """A reader of the route's event stream."""
    error_event: Callable[[int, str], bytes]
    """The event that ends a stream the upstream broke off."""


@dataclass(frozen=True, slots=True)
class Turn:
    """A decoded request: its session, the model it names (its Engines count, budget
    and price at it: :mod:`~ctxwise.server.proxy._pools`), history, system text and
    tools, its body as JSON and as the client sent it, and whether it asked for a
    stream."""

    session: str
    model: str
    history: Sequence[Message]
    system: str | None
    tools: Sequence[Mapping[str, Any]] | None
    data: Mapping[str, Any]
    raw: bytes
    stream: bool


def refuse(status: int, message: str) -> HTTPException:
    """An error the app answers in the shape of the path's API."""
    return HTTPException(status, message)


async def json_body(request: Request) -> tuple[bytes, dict[str, Any]]:
    """The body as sent, and as a JSON object (else a 400)."""
    raw = await request.body()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise refuse(400, f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise refuse(400, "the body is a JSON object")
    return raw, data


def _failed(api: API, exc: UpstreamError, headers: Mapping[str, str]) -> JSONResponse:
    body = error_body(api, exc.status, exc.detail)
    return JSONResponse(body, status_code=exc.status, headers=dict(headers))


@dataclass(frozen=True, slots=True)
class _Target:
    pool: EnginePool
    tenant: str
    session: str
    history: Sequence[Message]

    async def record(self, message: dict[str, Any]) -> None:
        try:
            await self.pool.run(
                self.tenant, lambda e: record(e, self.session, self.history, message)
            )
        except Exception as exc:  # the answer is sent: say so, change nothing
            reason = fail_reason(exc)
            logger.warning(
                "proxy: the answer of session %r was not recorded: %s", self.session, reason
            )


async def _prepare(
    request: Request, tenant: str, route: Route, turn: Turn
) -> tuple[Prepared | None, EnginePool | None, str | None]:
    """The Engine's turn, or why ctxwise failed (the request then fails open)."""
    try:
        pool = pool_for(request.app.state, route.render, turn.model)
        prepared = await pool.run(
            tenant,
            lambda e: prepare(e, turn.session, turn.history, system=turn.system, tools=turn.tools),
        )
    except ProxyInputError as exc:
        raise refuse(400, exc.detail) from None
    except Exception as exc:  # ctxwise's own failure: fail open
        reason = fail_reason(exc)
        logger.warning("proxy: failing open for session %r: %s", turn.session, reason)
        await _note_fail_open(request, tenant, route, turn, reason)
        return None, None, reason
    return prepared, pool, None


async def _note_fail_open(
    request: Request, tenant: str, route: Route, turn: Turn, reason: str
) -> None:
    """Put the fail-open in the session, for its next turn's trace (best effort: the
    failure may be the store's, and then this fails too, which the log says)."""
    path = request.url.path
    try:
        pool = pool_for(request.app.state, route.render, turn.model)
        await pool.run(tenant, lambda e: e.note_fail_open(turn.session, route=path, reason=reason))
    except Exception as exc:
        logger.warning(
            "proxy: the fail-open of session %r was not noted: %s", turn.session, fail_reason(exc)
        )


async def relay(request: Request, tenant: str, route: Route, turn: Turn) -> Response:
    """Run the turn, send the request upstream, relay and record the answer."""
    prepared, pool, reason = await _prepare(request, tenant, route, turn)
    ours = {SESSION_HEADER: turn.session}
    target = None
    if prepared is None or pool is None:
        content, extra = turn.raw, {}
        ours[FAIL_OPEN_HEADER] = reason or "unknown"
    else:
        ours[SESSION_HEADER] = prepared.session
        body = route.merge(turn.data, prepared.result)
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        extra = dict(prepared.headers)
        target = _Target(pool, tenant, prepared.session, turn.history)
    return await forward(request, route, content, extra, ours, target, stream=turn.stream)


async def forward(
    request: Request,
    route: Route,
    content: bytes,
    extra: Mapping[str, str],
    ours: Mapping[str, str],
    target: _Target | None,
    *,
    stream: bool,
) -> Response:
    """Send ``content`` upstream and relay the answer (recorded into ``target``)."""
    base = str(route.upstream(request.app.state.settings)).rstrip("/")
    query = request.url.query
    url = f"{base}{route.path}" + (f"?{query}" if query else "")
    headers = request_headers(request.headers.items(), extra)
    client: httpx.AsyncClient = request.app.state.upstream
    try:
        upstream = await open_upstream(client, url, content, headers)
    except UpstreamError as exc:
        return _failed(route.api, exc, ours)
    kind = upstream.headers.get("content-type", "")
    if stream and upstream.status_code == 200 and kind.startswith("text/event-stream"):
        return _streamed(route, upstream, ours, target)
    return await _whole(route, upstream, ours, target)


async def _whole(
    route: Route, upstream: httpx.Response, ours: Mapping[str, str], target: _Target | None
) -> Response:
    try:
        content = await upstream.aread()
    except httpx.TimeoutException:
        return _failed(route.api, UpstreamError(504, "the upstream's answer stopped coming"), ours)
    except httpx.HTTPError as exc:
        broke = f"the upstream's answer broke ({type(exc).__name__})"
        return _failed(route.api, UpstreamError(502, broke), ours)
    finally:
        await upstream.aclose()
    task = None
    if target is not None and upstream.status_code == 200:
        try:
            answer = json.loads(content)
        except ValueError:
            answer = None
        if isinstance(answer, dict) and route.answer(answer):
            task = BackgroundTask(target.record, answer)
    return Response(
        content,
        status_code=upstream.status_code,
        headers={**response_headers(upstream.headers), **ours},
        background=task,
    )


def _streamed(
    route: Route, upstream: httpx.Response, ours: Mapping[str, str], target: _Target | None
) -> StreamingResponse:
    reader = route.reader()
    ended = False

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal ended
        try:
            async for chunk in upstream.aiter_bytes():
                reader.feed(chunk)
                yield chunk
            ended = True
        except httpx.TimeoutException:
            yield route.error_event(504, "the upstream stopped streaming (timeout)")
        except httpx.HTTPError as exc:
            yield route.error_event(502, f"the upstream's stream broke ({type(exc).__name__})")
        finally:
            with anyio.CancelScope(shield=True):
                await upstream.aclose()

    async def after() -> None:
        message = reader.message
        if target is not None and ended and message is not None:
            await target.record(message)

    return _Relayed(
        upstream,
        chunks(),
        status_code=upstream.status_code,
        headers={**response_headers(upstream.headers), **ours},
        background=BackgroundTask(after),
    )


class _Relayed(StreamingResponse):
    """A streamed answer that closes the upstream's response however it ends: a
    client that leaves before the first chunk never starts the stream's iterator,
    whose own ``finally`` would close it."""

    def __init__(self, upstream: httpx.Response, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.upstream = upstream

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self.upstream.aclose()
