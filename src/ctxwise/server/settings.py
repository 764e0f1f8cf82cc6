"""What ``ctxwise serve`` runs with: one pydantic model, every default documented.

The Engine's own settings (budget, counter, model, compaction, costs…) come from
a ``ctxwise.toml`` (:mod:`ctxwise.config`) given as ``config``; its ``store`` is
replaced by ``store`` here, which holds the API keys and every tenant's partition
(:mod:`ctxwise.tenancy`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ctxwise.config import EngineConfig, load_config

__all__ = ["ServeSettings"]


class ServeSettings(BaseModel):
    """The service's settings (``ctxwise serve`` options map one to one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    store: str = "sqlite:///ctxwise.db"
    """Keys and tenants' data: ``sqlite:///PATH`` (one worker, one host) or
    ``postgresql://…`` (several workers or hosts); ``memory`` for tests."""
    config: Path | None = None
    """A ``ctxwise.toml`` for every tenant's Engine (its ``store`` is ignored)."""
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    workers: int = Field(default=1, ge=1, le=64)
    max_body_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    """Requests with a larger body get 413 (the Messages API's own limit by default)."""
    engines_per_tenant: int = Field(default=4, ge=1, le=64)
    """Engines (each with its own store connections) one worker keeps per tenant."""
    anthropic_upstream: str = "https://api.anthropic.com"
    openai_upstream: str = "https://api.openai.com"
    upstream_timeout: float = Field(default=600.0, gt=0)
    """Seconds to wait for the upstream's response (or its next streamed bytes)."""
    upstream_connect_timeout: float = Field(default=10.0, gt=0)

    def engine_config(self) -> EngineConfig:
        """The Engine config for every tenant (``config``'s, or every default), with
        ``store`` set to this service's store."""
        cfg = load_config(self.config) if self.config is not None else EngineConfig()
        return cfg.model_copy(update={"store": self.store})
