"""The provider-compatible proxy: a client points its SDK at ctxwise instead of the
provider, and every request goes through the Engine on its way upstream.

- :mod:`~ctxwise.server.proxy._anthropic`: ``POST /v1/messages`` (streaming and
  not) and ``POST /v1/messages/count_tokens``;
- :mod:`~ctxwise.server.proxy._openai`: ``POST /v1/chat/completions`` (streaming
  and not); :mod:`~ctxwise.server.proxy._responses`: ``POST /v1/responses``;
- :mod:`~ctxwise.server.proxy._naming`: which session a request belongs to, and
  the sync keys that find what of its history is new;
- :mod:`~ctxwise.server.proxy._relay`: what every route shares: turn or fail open,
  forward, relay and record the answer;
- :mod:`~ctxwise.server.proxy._turns`: sync, fork and turn on the Engine; record
  the answer;
- :mod:`~ctxwise.server.proxy._upstream`: the upstream call, headers in and out;
- :mod:`~ctxwise.server.proxy._sse` and :mod:`~ctxwise.server.proxy._chunks`: a
  Messages API event stream and a Chat Completions stream, read as they pass
  (:mod:`~ctxwise.server.proxy._events`: a Responses API stream's final response);
- :mod:`~ctxwise.server.proxy._pools`: the Engine pool of each request format and
  model.

:func:`include_proxy` adds the routes to the service's app (docs/server.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, FastAPI

from ctxwise.server.proxy import _anthropic, _openai, _responses
from ctxwise.server.proxy._naming import SESSION_HEADER
from ctxwise.server.proxy._pools import close_pools
from ctxwise.server.proxy._relay import FAIL_OPEN_HEADER

__all__ = ["FAIL_OPEN_HEADER", "SESSION_HEADER", "include_proxy", "router"]

router = APIRouter()
router.include_router(_anthropic.router)
router.include_router(_openai.router)
router.include_router(_responses.router)


def include_proxy(app: FastAPI) -> None:
    """Add the proxy's routes to ``app`` (built by
    :func:`ctxwise.server.app.create_app`), and close the Engine pools they make when
    the app shuts down."""
    app.include_router(router)
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        try:
            async with inner(a) as state:
                yield state
        finally:
            await anyio.to_thread.run_sync(close_pools, app.state)

    app.router.lifespan_context = lifespan
