"""Who is calling: the API key on a request, and the one tenant it opens.

A key (:mod:`ctxwise.server.keys`) arrives as ``x-ctxwise-key: cwk_…`` on every
route, or as ``Authorization: Bearer cwk_…`` on the REST API (on the proxy routes
``Authorization`` and ``x-api-key`` carry the provider's key, which passes through).
The tenant it belongs to is the only partition the request can reach
(:mod:`ctxwise.tenancy`).
"""

from __future__ import annotations

import anyio.to_thread
from fastapi import HTTPException, Request

from ctxwise.server.keys import KeyStore
from ctxwise.server.shapes import api_of

__all__ = ["KEY_HEADER", "tenant_of"]

KEY_HEADER = "x-ctxwise-key"
"""The header that carries a ctxwise API key."""


async def tenant_of(request: Request) -> str:
    """The tenant of the request's API key (also set as ``request.state.tenant``);
    401 without an active key (missing, malformed, unknown or revoked)."""
    presented = request.headers.get(KEY_HEADER)
    if presented is None and api_of(request.url.path) == "rest":
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        presented = token.strip() if scheme.lower() == "bearer" else None
    if not presented:
        raise HTTPException(401, f"no ctxwise API key: send it as the {KEY_HEADER} header")
    keys: KeyStore = request.app.state.keys
    tenant = await anyio.to_thread.run_sync(keys.authenticate, presented)
    if tenant is None:
        raise HTTPException(401, "the ctxwise API key is not valid (unknown or revoked)")
    request.state.tenant = tenant
    return tenant
