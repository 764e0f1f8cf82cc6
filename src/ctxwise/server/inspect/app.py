"""The inspector's ASGI app: its pages, its login, and where it reads sessions from.

:func:`create_inspector` builds a Starlette app over a source of sessions, to be
mounted at ``/inspect``: :class:`ServiceSource` (behind ``ctxwise serve``: the
caller's tenant, from an API key kept in a cookie) or :class:`StoreSource` (one
local store, read-only, no keys). :func:`local_app` is the app ``ctxwise
inspect-ui`` serves: the inspector at ``/inspect`` over a :class:`StoreSource`.

Behind the service, a browser cannot send the ``x-ctxwise-key`` header, so the
login form posts the key once and the inspector keeps it in a cookie that is
HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it),
``Secure`` on https, and scoped to ``/inspect`` (the REST API and the proxy never
read it). The key is checked again on every request, so a revoked key stops
working at once; it is never logged, and it never appears in a URL. A session or
turn the tenant does not have is a 404, whether another tenant has it or not.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import parse_qs, urlencode

from ctxwise.errors import MissingDependencyError

try:
    import anyio.to_thread
    from jinja2 import Environment, PackageLoader, select_autoescape
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, RedirectResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
except ImportError as e:  # pragma: no cover - the extra is installed in the tests
    raise MissingDependencyError(
        e.name or "jinja2", "server", "the web inspector (ctxwise inspect-ui, /inspect)"
    ) from None

from ctxwise.engine import Engine
from ctxwise.errors import PointerError, UnknownSessionError, UnknownTurnError, UsageError
from ctxwise.ledger import FATES, LedgerReader
from ctxwise.memory.store import Store
from ctxwise.server.engines import EnginePool
from ctxwise.server.inspect import _svg, _views
from ctxwise.server.keys import KeyStore
from ctxwise.sessions import SessionStore

__all__ = [
    "COOKIE",
    "Access",
    "ServiceSource",
    "Source",
    "StoreSource",
    "create_inspector",
    "local_app",
]

COOKIE = "ctxwise_inspect"
"""The cookie that holds the API key behind the service (path ``/inspect``)."""

_T = TypeVar("_T")
_HERE = Path(__file__).parent


class Access(Protocol):
    """What a page reads, in a worker thread: the sessions and a session's ledgers."""

    def sessions(self) -> list[str]: ...

    def reader(self, session_id: str) -> LedgerReader: ...


class Source(Protocol):
    """Where the inspector reads sessions: ``login`` says whether it asks for a key."""

    login: bool

    async def tenant(self, key: str) -> str | None: ...

    async def run(self, who: str, fn: Callable[[Access], _T]) -> _T: ...


class _EngineAccess:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def sessions(self) -> list[str]:
        return self.engine.sessions.sessions()

    def reader(self, session_id: str) -> LedgerReader:
        return LedgerReader.for_engine(self.engine, session_id)


class ServiceSource:
    """The sessions of the tenant whose key the browser logged in with, read on
    that tenant's Engines (the service's pool)."""

    login = True

    def __init__(self, keys: KeyStore, pool: EnginePool) -> None:
        self.keys = keys
        self.pool = pool

    async def tenant(self, key: str) -> str | None:
        return await anyio.to_thread.run_sync(self.keys.authenticate, key)

    async def run(self, who: str, fn: Callable[[Access], _T]) -> _T:
        return await self.pool.run(who, lambda engine: fn(_EngineAccess(engine)))


class StoreSource:
    """One local store, opened to read: its session store, and its memory store when
    the file holds one (to resolve ``memory:`` and ``result:`` pointers). ``sessions``
    is the opened session store; ``memory`` may be ``None``. ``namespace`` is the
    first part of the memory namespaces the Engine wrote (``memory.namespace``)."""

    login = False

    def __init__(
        self, sessions: SessionStore, memory: Store | None = None, *, namespace: str = "ctxwise"
    ) -> None:
        self.store = sessions
        self.memory = memory
        self.namespace = namespace
        self._lock = threading.Lock()

    def sessions(self) -> list[str]:
        return self.store.sessions()

    def reader(self, session_id: str) -> LedgerReader:
        return LedgerReader.of_store(
            self.store, session_id, memory=self.memory, namespace=self.namespace
        )

    async def tenant(self, key: str) -> str | None:
        return ""

    def _call(self, fn: Callable[[Access], _T]) -> _T:
        with self._lock:
            return fn(self)

    async def run(self, who: str, fn: Callable[[Access], _T]) -> _T:
        return await anyio.to_thread.run_sync(self._call, fn)

    def close(self) -> None:
        try:
            self.store.close()
        finally:
            if self.memory is not None:
                self.memory.close()


# ------------------------------------------------------------------- rendering

_ENV = Environment(
    loader=PackageLoader("ctxwise.server.inspect", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters["num"] = lambda n: f"{n:,}" if isinstance(n, int) else "–"
_ENV.filters["usd"] = lambda x: f"${x:.4f}" if isinstance(x, float | int) else "–"

_HEADERS = {
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class _Page:
    """A page's links, relative to where the inspector is mounted."""

    def __init__(self, request: Request, login: bool) -> None:
        self.base = request.scope.get("root_path", "").rstrip("/")
        self.login = login

    def url(self, path: str, **query: Any) -> str:
        given = {k: v for k, v in query.items() if v is not None}
        return f"{self.base}/{path}" + (f"?{urlencode(given)}" if given else "")

    def session(self, session_id: str) -> str:
        return self.url("session", id=session_id)

    def turn(self, session_id: str, turn: int) -> str:
        return self.url("turn", session=session_id, turn=turn)


def _render(
    request: Request, login: bool, name: str, status: int = 200, **context: Any
) -> HTMLResponse:
    page = _Page(request, login)
    html = _ENV.get_template(name).render(page=page, **context)
    return HTMLResponse(html, status_code=status, headers=_HEADERS)


def _error(request: Request, login: bool, status: int, message: str) -> HTMLResponse:
    titles = {400: "Bad request", 401: "Not logged in", 404: "Not found"}
    return _render(
        request, login, "error.html", status, title=titles.get(status, "Error"), message=message
    )


# ------------------------------------------------------------------------ app


def create_inspector(source: Source) -> Starlette:
    """The inspector over ``source``, to be mounted at ``/inspect``."""
    login = source.login

    async def who(request: Request) -> str | Response:
        if not login:
            return ""
        key = request.cookies.get(COOKIE)
        if not key:
            return RedirectResponse(_Page(request, login).url("login"), status_code=303)
        tenant = await source.tenant(key)
        if tenant is None:
            response = _render(
                request,
                login,
                "login.html",
                401,
                message="the ctxwise API key is not valid (unknown or revoked)",
            )
            response.delete_cookie(COOKIE, path=_Page(request, login).base or "/")
            return response
        return tenant

    def page(
        build: Callable[[Request, Access], dict[str, Any] | Response], template: str
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            tenant = await who(request)
            if isinstance(tenant, Response):
                return tenant
            try:
                got = await source.run(tenant, lambda access: build(request, access))
            except (UnknownSessionError, UnknownTurnError) as e:
                return _error(request, login, 404, str(e))
            except PointerError as e:
                return _error(request, login, 400, str(e))
            except UsageError as e:
                return _error(request, login, 400, str(e))
            if isinstance(got, Response):
                return got
            return _render(request, login, template, **got)

        return endpoint

    async def login_form(request: Request) -> Response:
        if not login:
            return RedirectResponse(_Page(request, login).url(""), status_code=303)
        return _render(request, login, "login.html")

    async def login_post(request: Request) -> Response:
        page_ = _Page(request, login)
        if not login:
            return RedirectResponse(page_.url(""), status_code=303)
        body = (await request.body()).decode("utf-8", "replace")
        key = (parse_qs(body).get("key") or [""])[0].strip()
        tenant = await source.tenant(key) if key else None
        if tenant is None:
            message = (
                "the ctxwise API key is not valid (unknown or revoked)"
                if key
                else "no ctxwise API key: paste one (ctxwise keys create TENANT)"
            )
            return _render(request, login, "login.html", 401, message=message)
        response = RedirectResponse(page_.url(""), status_code=303)
        response.set_cookie(
            COOKIE,
            key,
            path=page_.base or "/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    async def logout(request: Request) -> Response:
        page_ = _Page(request, login)
        response = RedirectResponse(page_.url("login" if login else ""), status_code=303)
        response.delete_cookie(COOKIE, path=page_.base or "/")
        return response

    async def not_found(request: Request) -> Response:
        return _error(request, login, 404, f"no page at {request.url.path}")

    routes = [
        Route("/", page(_sessions_page, "sessions.html")),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login_post, methods=["POST"]),
        Route("/logout", logout, methods=["GET", "POST"]),
        Route("/session", page(_session_page, "session.html")),
        Route("/turn", page(_turn_page, "turn.html")),
        Route("/diff", page(_diff_page, "diff.html")),
        Route("/original", page(_original_page, "original.html")),
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
        Route("/{rest:path}", not_found, methods=["GET", "POST"]),
    ]
    return Starlette(routes=routes)


def _param(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if value is None or not value.strip():
        raise UsageError(f"the query parameter {name!r} is missing")
    return value


def _turn(request: Request, name: str, reader: LedgerReader, default: int | None) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        if default is None:
            raise UsageError(f"the query parameter {name!r} is missing")
        return default
    if not raw.strip().isdigit():
        raise UsageError(f"{name}={raw[:40]!r}: a turn is a whole number")
    turn = int(raw)
    reader.trace(turn)  # UnknownTurnError: 404
    return turn


def _reader(request: Request, access: Access, name: str, *, turns: bool = False) -> LedgerReader:
    """The session the query names (``turns``: it must have had a turn)."""
    reader = access.reader(_param(request, name))
    if turns and not reader.turns:
        raise UnknownTurnError(reader.session_id, 1, turns=0)
    return reader


def _sessions_page(request: Request, access: Access) -> dict[str, Any]:
    return {"sessions": access.sessions()}


def _session_page(request: Request, access: Access) -> dict[str, Any]:
    reader = _reader(request, access, "id")
    rows = _views.timeline(reader)
    page = _Page(request, False)
    costs = [r.cost for r in rows]
    return {
        "session_id": reader.session_id,
        "rows": rows,
        "svg": _svg.timeline_svg(rows, lambda t: page.turn(reader.session_id, t)),
        "cost": sum(c for c in costs if c is not None)
        if any(c is not None for c in costs)
        else None,
        "messages": len(reader.log),
    }


def _turn_page(request: Request, access: Access) -> dict[str, Any]:
    reader = _reader(request, access, "session", turns=True)
    turn = _turn(request, "turn", reader, reader.turns)
    ledger = reader.ledger(turn)
    trace = ledger.trace
    parts, detail = _views.parts(ledger, reader)
    rows = _views.rows(ledger, reader)
    tools = sorted({t for r in rows for t in r.entry.tools})
    cache_read = trace.cache.read if trace.cache is not None else None
    return {
        "session_id": reader.session_id,
        "turn": turn,
        "turns": reader.turns,
        "trace": trace,
        "ledger": ledger,
        "parts": parts,
        "detail": detail,
        "bar": _svg.bar_svg(
            parts,
            total=trace.tokens.total,
            available=trace.tokens.available,
            stable_prefix=trace.tokens.stable_prefix,
            cache_read=cache_read,
        ),
        "rows": rows,
        "fates": FATES,
        "tools": tools,
        "counts": ledger.counts(),
        "scores": _views.route_scores(trace),
    }


def _diff_page(request: Request, access: Access) -> dict[str, Any]:
    reader = _reader(request, access, "session", turns=True)
    after = _turn(request, "turn", reader, reader.turns)
    raw = request.query_params.get("before")
    before: int | None
    if raw in (None, ""):
        before = after - 1 if after > 1 else None
    elif raw == "none":
        before = None
    else:
        before = _turn(request, "before", reader, None)
    view = _views.diff_view(reader, before, after)
    return {
        "session_id": reader.session_id,
        "turn": after,
        "before": before,
        "turns": reader.turns,
        "view": view,
        "diff": view.diff,
    }


def _original_page(request: Request, access: Access) -> dict[str, Any]:
    reader = _reader(request, access, "session")
    pointer = _param(request, "pointer")
    turn = request.query_params.get("turn")
    return {
        "session_id": reader.session_id,
        "turn": int(turn) if turn is not None and turn.isdigit() else None,
        "original": reader.original(pointer),
    }


# ------------------------------------------------------------------ local app


def local_app(source: StoreSource) -> Starlette:
    """The app ``ctxwise inspect-ui`` serves: the inspector at ``/inspect`` over
    ``source`` (closed with the app), ``/`` sending the browser there."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(source.close)

    async def home(request: Request) -> Response:
        return RedirectResponse("/inspect/", status_code=307)

    return Starlette(
        routes=[Route("/", home), Mount("/inspect", create_inspector(source))],
        lifespan=lifespan,
    )
