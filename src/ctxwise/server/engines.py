"""Each tenant's Engines in one worker: a small pool, each Engine used by one thread.

An :class:`~ctxwise.Engine` holds its own store connections and is meant for one
thread at a time. A request borrows one of its tenant's Engines for the length of
one call, in a worker thread (the event loop never waits on a store); the pool
makes up to ``per_tenant`` of them, on first use, and a request that finds all of
them busy waits for one. Turns on one session serialize in the session store
(its per-session lock), so two Engines of a tenant may serve one session.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread

from ctxwise.config import EngineConfig
from ctxwise.engine import Engine
from ctxwise.server.tenants import TenantEngine

__all__ = ["EnginePool"]

_T = TypeVar("_T")


class _Tenant:
    def __init__(self) -> None:
        self.idle: queue.LifoQueue[TenantEngine] = queue.LifoQueue()
        self.made: list[TenantEngine] = []
        self.count = 0  # made, or being made


class EnginePool:
    """Up to ``per_tenant`` Engines per tenant, built from ``config`` on the tenant's
    partition (``objects`` go to every Engine: a counter, a summarizer, …)."""

    def __init__(self, config: EngineConfig, *, per_tenant: int = 4, **objects: Any) -> None:
        self.config = config
        self.per_tenant = per_tenant
        self.objects = objects
        self._lock = threading.Lock()
        self._tenants: dict[str, _Tenant] = {}
        self._closed = False

    def _borrow(self, tenant: str) -> TenantEngine:
        with self._lock:
            if self._closed:
                raise RuntimeError("the engine pool is closed")
            slot = self._tenants.setdefault(tenant, _Tenant())
            try:
                return slot.idle.get_nowait()
            except queue.Empty:
                make = slot.count < self.per_tenant
                slot.count += make
        if not make:
            return slot.idle.get()
        try:
            engine = TenantEngine(self.config, tenant, **self.objects)
        except BaseException:
            with self._lock:
                slot.count -= 1
            raise
        with self._lock:
            slot.made.append(engine)
        return engine

    def call(self, tenant: str, fn: Callable[[Engine], _T]) -> _T:
        """``fn(engine)`` on one of ``tenant``'s Engines, in this thread."""
        held = self._borrow(tenant)
        try:
            return fn(held.engine)
        finally:
            self._tenants[tenant].idle.put(held)

    async def run(self, tenant: str, fn: Callable[[Engine], _T]) -> _T:
        """``fn(engine)`` on one of ``tenant``'s Engines, in a worker thread."""
        return await anyio.to_thread.run_sync(self.call, tenant, fn)

    def close(self) -> None:
        """Close every Engine the pool made (each waits for its last effects)."""
        with self._lock:
            self._closed = True
            made = [e for slot in self._tenants.values() for e in slot.made]
            self._tenants.clear()
        for engine in made:
            engine.close()
