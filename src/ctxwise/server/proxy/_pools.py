"""The Engine pool a proxy request runs on: one per request format and model.

A request is counted, budgeted and priced at the model it names: its Engines need
that ``model`` (the ``"auto"`` counter, the safety margin, the cost step's and the
edit gate's prices follow it) and its route's ``render`` (``"anthropic"`` for the
Messages API, ``"openai"`` for Chat Completions and Responses). The service's pool
(``app.state.pool``, built from the service's config) serves the requests whose
render and model are its config's; any other pair gets a pool built from the same
config with ``render`` and ``model`` replaced, made on first use and kept in
``app.state.proxy_pools``, on the same store (the same tenants' partitions and
sessions), closed with the app (:func:`ctxwise.server.proxy.include_proxy`). The
REST routes keep the config's model.

A worker makes pools for at most :data:`MAX_MODELS` models besides the config's
own: the model a request names is the client's to choose, and each pool holds its
tenants' Engines. A request for yet another model, or for one no Engine could be
configured with (a name that is not printable text, or too long to be one), is
still served, on the pool of the config's model (the upstream decides what models
exist; only the counting is approximate), and the first time a worker sees such a
model it logs one warning line naming it (for a bounded number of names, then one
line saying later ones go unlogged, so a flood of names stays bounded in memory
and in the log).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Literal

from ctxwise.config import EngineConfig
from ctxwise.errors import ConfigError
from ctxwise.server.engines import EnginePool

__all__ = ["MAX_MODELS", "close_pools", "pool_for"]

Render = Literal["anthropic", "openai"]

MAX_MODELS = 16
"""How many models besides the config's own a worker makes Engine pools for (a pool
for each render the model is asked in); past it, a new model is counted at the
config's model (module docstring)."""

_MAX_NAME = 256
"""The longest model name a pool is made for (Bedrock ARNs included)."""

_MAX_WARNED = 256
"""How many models past the bound a worker names in a warning, each once."""

_SHOWN = 100
"""How much of a model name a warning line shows."""

_lock = threading.Lock()
logger = logging.getLogger("ctxwise.server.proxy")


def pool_for(state: Any, render: Render, model: str) -> EnginePool:
    """The pool whose Engines render ``render`` and count for ``model`` (module
    docstring); ``state`` is the app's ``app.state``."""
    base: EnginePool = state.pool
    cfg = base.config
    if cfg.render == render and cfg.model == model:
        return base
    with _lock:
        pools: dict[tuple[str, str], EnginePool] | None = getattr(state, "proxy_pools", None)
        if pools is None:
            pools = {}
            state.proxy_pools = pools
        pool = pools.get((render, model))
        if pool is not None:
            return pool
        config = _config(cfg, render, model) if _admitted(pools, cfg, model) else None
        if config is None:
            _warn(state, cfg, model)
            model = cfg.model
            if cfg.render == render:
                return base
            pool = pools.get((render, model))
            if pool is not None:
                return pool
            config = _replaced(cfg, render, model)
        pool = pools[(render, model)] = EnginePool(
            config, per_tenant=base.per_tenant, **base.objects
        )
        return pool


def _admitted(pools: dict[tuple[str, str], EnginePool], cfg: EngineConfig, model: str) -> bool:
    """May ``model`` have a pool of its own: a name an Engine can be configured with,
    the config's model, one that has a pool already, or one more under the bound."""
    if model == cfg.model:
        return True
    if not (0 < len(model) <= _MAX_NAME and model.isprintable() and model == model.strip()):
        return False
    models = {m for _, m in pools if m != cfg.model}
    return model in models or len(models) < MAX_MODELS


def _replaced(cfg: EngineConfig, render: Render, model: str) -> EngineConfig:
    return EngineConfig.model_validate(
        {**cfg.model_dump(), "render": render, "model": model, "base_dir": cfg.base_dir}
    )


def _config(cfg: EngineConfig, render: Render, model: str) -> EngineConfig | None:
    """The config with ``render`` and ``model`` replaced; ``None`` when ``model`` is
    not one it validates with (the config's own model then serves it). A config that
    does not take ``render`` raises, as for the config's own model."""
    rendered = cfg if cfg.render == render else _replaced(cfg, render, cfg.model)
    if model == cfg.model:
        return rendered
    try:
        return _replaced(rendered, render, model)
    except ConfigError:
        return None


def _warn(state: Any, cfg: EngineConfig, model: str) -> None:
    """One warning line the first time a model is counted at the config's model."""
    warned: set[str] | None = getattr(state, "proxy_models_warned", None)
    if warned is None:
        warned = state.proxy_models_warned = set()
    if model in warned:
        return
    if len(warned) >= _MAX_WARNED:
        if not getattr(state, "proxy_models_unlogged", False):
            state.proxy_models_unlogged = True
            logger.warning(
                "proxy: %d models were named in a warning; later ones are counted and"
                " priced at %r unlogged",
                _MAX_WARNED,
                cfg.model,
            )
        return
    warned.add(model)
    shown = model if len(model) <= _SHOWN else model[:_SHOWN] + "…"
    logger.warning(
        "proxy: model %r gets no Engines of its own (past %d models, or not a name one"
        " can be configured with); it is counted and priced at %r",
        shown,
        MAX_MODELS,
        cfg.model,
    )


def close_pools(state: Any) -> None:
    """Close the pools :func:`pool_for` made."""
    pools: dict[tuple[str, str], EnginePool] = getattr(state, "proxy_pools", None) or {}
    for pool in pools.values():
        pool.close()
    pools.clear()
