"""An Engine on one tenant's partition, owning the stores it opened.

Everything that serves a tenant (the service, the MCP server) builds its Engine
here, so the only stores it can reach are that tenant's (:mod:`ctxwise.tenancy`).
"""

from __future__ import annotations

from typing import Any

from ctxwise.config import EngineConfig
from ctxwise.embeddings import build_embedder
from ctxwise.engine import Engine
from ctxwise.errors import ConfigError, MissingDependencyError, UsageError
from ctxwise.tenancy import Partition, check_tenant, open_partition, partition

__all__ = ["TenantEngine"]


class TenantEngine:
    """``engine``: an :class:`~ctxwise.Engine` built from ``config`` whose session
    and memory stores are ``tenant``'s partition of ``config.store``; :meth:`close`
    closes the Engine and both stores. ``objects`` go to the Engine (a counter, a
    summarizer, …), except ``sessions`` and ``memory``, which the tenant decides."""

    def __init__(self, config: EngineConfig, tenant: str, **objects: Any) -> None:
        self.tenant = check_tenant(tenant)
        if "sessions" in objects or "memory" in objects:
            raise UsageError("a tenant's Engine opens its own stores: pass no sessions or memory")
        embedder = objects.pop("embedder", None)
        if embedder is None:
            try:
                embedder = build_embedder(config.embedder, base_dir=config.base_dir)
            except MissingDependencyError:
                raise
            except UsageError as e:
                raise ConfigError("config", f"embedder: {e}") from None
        self.partition: Partition = partition(config.store_url(), self.tenant)
        self.sessions, self.memory = open_partition(self.partition, dim=embedder.dim)
        try:
            self.engine = Engine(
                config, sessions=self.sessions, memory=self.memory, embedder=embedder, **objects
            )
        except BaseException:
            self.sessions.close()
            self.memory.close()
            raise

    def close(self) -> None:
        """Close the Engine (waiting for its last effects), then the tenant's stores."""
        try:
            self.engine.close()
        finally:
            self.sessions.close()
            self.memory.close()

    def __enter__(self) -> TenantEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
