"""The ASGI app of ``ctxwise serve`` (extra ``server``): REST API, proxy, keys, limits.

Built on FastAPI (over Starlette, run by uvicorn). FastAPI because the REST API's
bodies are pydantic models already (ctxwise validates at its I/O boundaries with
pydantic), and FastAPI turns the same models into the validation of every request
and the OpenAPI document at ``/openapi.json``: one source for both, which plain
Starlette would have us write twice. The proxy routes read and write raw bytes
through the same app (Starlette's ``Request`` and ``StreamingResponse``).

The web inspector is mounted at ``/inspect`` (:mod:`ctxwise.server.inspect`; its
login form takes the same keys). Every route but ``/healthz``, ``/readyz`` and
``/openapi.json`` needs an API key
(:mod:`ctxwise.server.keys`), sent as ``x-ctxwise-key: cwk_…`` (or, on the REST
API, ``Authorization: Bearer cwk_…``); the key's tenant decides the only
partition the request can reach (:mod:`ctxwise.tenancy`). A body over
``max_body_bytes`` is refused with 413 before it is read whole. Errors come back
in the shape of the API the path belongs to (:mod:`ctxwise.server.shapes`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ctxwise.errors import MissingDependencyError

try:
    import anyio.to_thread
    import httpx
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as e:  # pragma: no cover - the extra is installed in the tests
    raise MissingDependencyError(
        e.name or "fastapi", "server", "ctxwise serve (the HTTP service)"
    ) from None

from ctxwise import __version__
from ctxwise.errors import (
    BackendError,
    CtxwiseError,
    HistoryRewoundError,
    SessionConflictError,
    UnknownSessionError,
    UsageError,
)
from ctxwise.server import rest
from ctxwise.server.engines import EnginePool
from ctxwise.server.inspect import ServiceSource, create_inspector
from ctxwise.server.keys import KeyStore
from ctxwise.server.proxy import include_proxy
from ctxwise.server.settings import ServeSettings
from ctxwise.server.shapes import api_of, error_body

__all__ = ["SETTINGS_ENV", "app_from_env", "create_app"]


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=headers)


def error_response(path: str, status: int, message: str, kind: str | None = None) -> JSONResponse:
    """The error response for ``path``'s API."""
    return _json(status, error_body(api_of(path), status, message, kind=kind))


def status_of(exc: CtxwiseError) -> int:
    """The HTTP status for a ctxwise error."""
    if isinstance(exc, UnknownSessionError):
        return 404
    if isinstance(exc, SessionConflictError | HistoryRewoundError):
        return 409
    if isinstance(exc, UsageError):
        return 400
    if isinstance(exc, BackendError):
        return 503
    return 500


class BodyLimit:
    """Refuse a request whose body is over ``limit`` bytes with 413, from its
    ``Content-Length`` or, when it is streamed, as soon as it passes the limit
    (the body is read before the app sees it, so nothing acts on part of one)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, receive, send, path)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(scope, receive, send, path)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        response = error_response(
            path, 413, f"the request body is over this service's limit of {self.limit} bytes"
        )
        await response(scope, receive, send)


def create_app(
    settings: ServeSettings | None = None,
    *,
    keys: KeyStore | None = None,
    pool: EnginePool | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    **objects: Any,
) -> FastAPI:
    """The service's ASGI app. ``keys`` and ``pool`` default to the ones
    ``settings.store`` names (closed with the app); ``transport`` replaces the
    upstream HTTP transport (tests answer with a fake provider); ``objects`` go to
    every tenant's Engine (a counter, a summarizer, …)."""
    cfg = settings if settings is not None else ServeSettings()
    own_keys = keys is None
    key_store = keys if keys is not None else KeyStore(cfg.store)
    try:
        engines = (
            pool
            if pool is not None
            else EnginePool(cfg.engine_config(), per_tenant=cfg.engines_per_tenant, **objects)
        )
    except BaseException:
        if own_keys:
            key_store.close()
        raise
    own_pool = pool is None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await app.state.upstream.aclose()
            if own_pool:
                await anyio.to_thread.run_sync(engines.close)
            if own_keys:
                key_store.close()

    app = FastAPI(
        title="ctxwise",
        version=__version__,
        summary="The context layer for LLM agents, as a service: a provider-compatible "
        "proxy and a REST API over the Engine, with a hard partition per tenant.",
        lifespan=lifespan,
    )
    app.state.settings = cfg
    app.state.keys = key_store
    app.state.pool = engines
    timeout = httpx.Timeout(cfg.upstream_timeout, connect=cfg.upstream_connect_timeout)
    app.state.upstream = httpx.AsyncClient(transport=transport, timeout=timeout)
    _handlers(app)
    _health(app)

    app.include_router(rest.router)
    include_proxy(app)
    app.mount("/inspect", create_inspector(ServiceSource(key_store, engines)))
    app.add_middleware(BodyLimit, limit=cfg.max_body_bytes)
    return app


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(CtxwiseError)
    async def ctxwise_error(request: Request, exc: CtxwiseError) -> JSONResponse:
        return error_response(request.url.path, status_of(exc), str(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')}"
            for e in exc.errors()[:5]
        ]
        return error_response(request.url.path, 400, "; ".join(problems) or "invalid request")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(request.url.path, exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # the text of an error ctxwise did not anticipate stays in the server's log
        # (uvicorn prints the traceback); the client gets the status and the shape
        return error_response(request.url.path, 500, "internal error in ctxwise")

    @app.exception_handler(json.JSONDecodeError)
    async def bad_json(request: Request, exc: json.JSONDecodeError) -> JSONResponse:
        return error_response(request.url.path, 400, f"the body is not valid JSON: {exc.msg}")


def _health(app: FastAPI) -> None:
    @app.get("/healthz", tags=["health"], summary="The process answers")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    @app.get("/readyz", tags=["health"], summary="The key store answers")
    async def readyz(request: Request) -> JSONResponse:
        keys: KeyStore = request.app.state.keys
        try:
            await anyio.to_thread.run_sync(keys.ping)
        except CtxwiseError as exc:
            return error_response(request.url.path, 503, f"not ready: {exc}")
        return _json(200, {"status": "ready"})


SETTINGS_ENV = "CTXWISE_SERVE_SETTINGS"
"""The environment variable through which ``ctxwise serve`` hands its settings (as
JSON) to each uvicorn worker process, which builds its app with :func:`app_from_env`."""


def app_from_env() -> FastAPI:
    """The app of one ``ctxwise serve`` worker: settings from :data:`SETTINGS_ENV`,
    read when the worker starts (never at import)."""
    import os

    raw = os.environ.get(SETTINGS_ENV)
    settings = ServeSettings.model_validate_json(raw) if raw else ServeSettings()
    return create_app(settings)
