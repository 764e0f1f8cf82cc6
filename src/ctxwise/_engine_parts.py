"""How an :class:`~ctxwise.engine.Engine` builds its parts from an
:class:`~ctxwise.config.EngineConfig`: the router, the static sources, the policy
gate, the embedder, the tool catalog and the result store. Each refuses a bad
config with a :class:`~ctxwise.errors.ConfigError` naming the key, before any store
is opened."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from ctxwise.config import ENGINE_SECTIONS, EmbedderConfig, EngineConfig, check_route_labels
from ctxwise.embeddings import Embedder, build_embedder
from ctxwise.errors import ConfigError, FormatError, MissingDependencyError, UsageError
from ctxwise.memory.store import Store
from ctxwise.policy import PolicyGate
from ctxwise.sources import Source, StaticSource
from ctxwise.tokens import TokenCounter
from ctxwise.tools.catalog import ToolCatalog
from ctxwise.tools.cursors import ResultStore
from ctxwise.turn.context import Classifier

__all__ = [
    "build_catalog",
    "build_config_embedder",
    "build_gate",
    "build_results",
    "build_router",
    "build_sources",
    "checked_sources",
    "cursor_keys",
    "read_system_file",
]


def build_router(cfg: EngineConfig) -> Classifier | None:
    if cfg.router is None:
        return None
    if cfg.router.keywords is not None:
        from ctxwise.routing import KeywordClassifier

        try:
            return KeywordClassifier(list(cfg.router.keywords.items()), cfg.router.default)
        except UsageError as e:  # 'label 'a' has no keywords': name the key
            raise ConfigError("router.keywords", str(e)) from None
    from ctxwise.routing import IntentRouter

    assert cfg.router.file is not None
    path = cfg.path(cfg.router.file)
    try:
        router = IntentRouter.load(path)
    except FormatError as e:  # the file is named; say which key gave it
        raise ConfigError(e.source, f"router.file: {e.detail}") from None
    try:
        check_route_labels(cfg.routes, [intent.name for intent in router.intents])
    except ValueError as e:
        raise ConfigError(str(path), str(e)) from None
    return router


def build_sources(cfg: EngineConfig, counter: TokenCounter) -> list[Source]:
    from ctxwise._io import read_text_file

    out: list[Source] = []
    for name, spec in cfg.sources.items():
        text = (
            spec.text
            if spec.text is not None
            else read_text_file(
                cfg.path(str(spec.file)), "a source file", _keyed(f"sources.{name}.file")
            )
        )
        out.append(
            StaticSource(
                name,
                text,
                priority=spec.priority,
                pinned=spec.pinned,
                truncatable=spec.truncatable,
                stable=spec.stable,
                counter=counter,
            )
        )
    return out


def checked_sources(sources: object) -> list[Source]:
    """The sources given in code, refused now rather than on a turn: one that is
    no Source (a name, ``sections`` and ``cost_estimate``), has no name, or whose
    fixed section takes the name of one the Engine adds itself."""
    if isinstance(sources, str | bytes) or not isinstance(sources, Iterable):
        raise UsageError(f"sources must be a list of Source objects, got {sources!r}")
    out = list(sources)
    for source in out:
        if not isinstance(source, Source):
            raise UsageError(
                f"sources: {source!r} is not a Source (it needs a name, sections() "
                "and cost_estimate())"
            )
        if not isinstance(source.name, str) or not source.name:
            raise UsageError(f"sources: {source!r} needs a non-empty name")
        if isinstance(source, StaticSource) and source.section.name in ENGINE_SECTIONS:
            raise UsageError(
                f"source name {source.name!r} is the name of a section the Engine adds "
                f"itself ({', '.join(ENGINE_SECTIONS)}); choose another"
            )
    return out


def build_config_embedder(settings: EmbedderConfig, cfg: EngineConfig) -> Embedder:
    try:
        return build_embedder(settings, base_dir=cfg.base_dir)
    except MissingDependencyError:
        raise
    except UsageError as e:  # a model folder that holds no model, an unset key
        raise ConfigError("config", f"embedder: {e}") from None


def build_catalog(
    cfg: EngineConfig, counter: TokenCounter, engine_embedder: Embedder
) -> ToolCatalog | None:
    if not cfg.tools.catalog:
        return None
    # tool search ranks with tools.embedder (the older spelling) or the Engine's
    # embedder when it is a model: hashing vectors rank below BM25 alone there
    settings = cfg.tool_search_embedder()
    if cfg.tools.embedder != "none" and settings is not None:
        embedder: Embedder | None = build_config_embedder(settings, cfg)
    else:
        embedder = None if engine_embedder.name.startswith("hashing") else engine_embedder
    try:
        return ToolCatalog.load(
            cfg.path(cfg.tools.catalog),
            skip_invalid=cfg.tools.skip_invalid,
            always_loaded=cfg.tools.always,
            max_bytes=cfg.tools.max_catalog_bytes or None,
            embedder=embedder,
            counter=counter,
        )
    except FormatError as e:  # the file is named; say which key gave it
        where = e.source if e.line is None else f"{e.source}:{e.line}"
        raise ConfigError(where, f"tools.catalog: {e.detail}") from None


def cursor_keys(cfg: EngineConfig) -> tuple[bytes, list[bytes]] | None:
    """The cursor key and the previous ones from the environment (None when no
    result is stored); a ConfigError when one is missing or too short."""
    spec = cfg.tool_results
    if spec.store_over == 0:
        return None
    key = os.environ.get(spec.key_env, "")
    if len(key.encode()) < 16:
        raise ConfigError(
            "tool_results.key_env",
            f"store_over > 0 needs a cursor key of 16+ bytes in ${spec.key_env} "
            "(or pass results=ResultStore(...) to the Engine)",
        )
    previous = []
    for name in spec.previous_key_envs:
        old = os.environ.get(name, "")
        if len(old.encode()) < 16:
            raise ConfigError(
                "tool_results.previous_key_envs",
                f"${name} must hold a previous cursor key of 16+ bytes "
                "(drop it from the list once its cursors have expired)",
            )
        previous.append(old.encode())
    return key.encode(), previous


def build_results(
    cfg: EngineConfig,
    keys: tuple[bytes, list[bytes]] | None,
    memory: Store | None,
    now: Callable[[], float],
) -> ResultStore | None:
    if keys is None:
        return None
    spec = cfg.tool_results
    assert memory is not None
    return ResultStore(
        keys[0],
        previous_keys=keys[1],
        clock=now,
        ttl=spec.ttl,
        page_size=spec.page_size,
        store=memory,
        namespace=(cfg.memory.namespace, "tool_results"),
    )


def build_gate(cfg: EngineConfig) -> PolicyGate:
    rules: list[Any] = list(cfg.gates.rules)
    try:  # on their own: an error's index is the rule's in gates.rules
        PolicyGate.from_dict({"version": 1, "rules": rules})
    except FormatError as e:
        raise ConfigError("config", f"gates.{e.detail}") from None
    if cfg.gates.file:
        from ctxwise._io import read_text_file

        path = cfg.path(cfg.gates.file)
        text = read_text_file(path, "a gate file", _keyed("gates.file"))
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
            raise ConfigError(str(path), f"gates.file: not valid JSON ({e})") from None
        try:
            rules = [*PolicyGate.from_dict(data).to_dict()["rules"], *rules]
        except FormatError as e:
            raise ConfigError(str(path), f"gates.file: {e.detail}") from None
    try:
        return PolicyGate.from_dict({"version": 1, "rules": rules})
    except FormatError as e:  # each part was checked: a name in both
        raise ConfigError(
            str(cfg.path(cfg.gates.file or "")),
            f"gates.rules and gates.file: {e.detail.split(': ', 1)[-1]}",
        ) from None


def read_system_file(cfg: EngineConfig) -> str:
    """The text of ``system_file`` ("" when none is set)."""
    if not cfg.system_file:
        return ""
    from ctxwise._io import read_text_file

    return read_text_file(cfg.path(cfg.system_file), "a system file", _keyed("system_file"))


def _keyed(key: str) -> Callable[[str, str], ConfigError]:
    """A ConfigError builder for a file the config names under ``key``: the file,
    then the key and what is wrong (``sources.faq.file: no such file``)."""

    def error(source: str, detail: str) -> ConfigError:
        return ConfigError(source, f"{key}: {detail}")

    return error
