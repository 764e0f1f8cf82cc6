"""The Engine pool a proxy route runs on: one per request format.

A route needs Engines that render its provider's request (``render = "anthropic"``
for the Messages API, ``"openai"`` for Chat Completions). The service's pool
(``app.state.pool``, built from the service's config) serves the routes of its own
render; a route of the other render gets a pool built from the same config with
``render`` changed, made on first use and kept in ``app.state.proxy_pools``, on the
same store (the same tenants' partitions and sessions), closed with the app
(:func:`ctxwise.server.proxy.include_proxy`).
"""

from __future__ import annotations

import threading
from typing import Any, Literal

from ctxwise.config import EngineConfig
from ctxwise.server.engines import EnginePool

__all__ = ["close_pools", "pool_for"]

Render = Literal["anthropic", "openai"]
_lock = threading.Lock()


def pool_for(state: Any, render: Render) -> EnginePool:
    """The pool whose Engines render ``render`` (module docstring); ``state`` is the
    app's ``app.state``."""
    base: EnginePool = state.pool
    if base.config.render == render:
        return base
    with _lock:
        pools: dict[str, EnginePool] | None = getattr(state, "proxy_pools", None)
        if pools is None:
            pools = {}
            state.proxy_pools = pools
        pool = pools.get(render)
        if pool is None:
            cfg = base.config
            config = EngineConfig.model_validate(
                {**cfg.model_dump(), "render": render, "base_dir": cfg.base_dir}
            )
            pool = pools[render] = EnginePool(config, per_tenant=base.per_tenant, **base.objects)
        return pool


def close_pools(state: Any) -> None:
    """Close the pools :func:`pool_for` made."""
    pools: dict[str, EnginePool] = getattr(state, "proxy_pools", None) or {}
    for pool in pools.values():
        pool.close()
    pools.clear()
