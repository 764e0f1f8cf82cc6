"""One embedder setting, built: :class:`EmbedderSpec` (or ``[embedder]`` in
``ctxwise.toml``, :class:`ctxwise.config.EmbedderConfig`, which has the same
fields) and the short names the command line and router files use, both turned
into an :class:`Embedder` by :func:`build_embedder`."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Protocol

from ctxwise.embeddings._base import Embedder, resolve_threads
from ctxwise.errors import UsageError

KINDS = ("hashing", "minilm", "sentence-transformers", "fastembed", "model2vec", "endpoint")
"""The encoders ``kind`` names."""

FOLDER_KINDS = ("sentence-transformers", "fastembed", "model2vec")
LOCAL_KINDS = ("minilm", *FOLDER_KINDS)

NAMES = (
    "hashing, hashing:DIM, hashing:DIM:unigrams, minilm, st:MODEL_DIR, fastembed:MODEL@MODEL_DIR,"
    " model2vec:MODEL_DIR or endpoint:MODEL@BASE_URL"
)
"""The short names :func:`parse_embedder` reads, for messages and help texts."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class EmbedderSettings(Protocol):
    """What :func:`build_embedder` reads: :class:`EmbedderSpec` and
    :class:`ctxwise.config.EmbedderConfig` both have these fields (the config
    module's docstring says what each means)."""

    @property
    def kind(self) -> str: ...
    @property
    def dim(self) -> int: ...
    @property
    def bigrams(self) -> bool: ...
    @property
    def path(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def threads(self) -> int | None: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def base_url(self) -> str: ...
    @property
    def api_key_env(self) -> str: ...
    @property
    def api_key_header(self) -> str: ...
    @property
    def api_version(self) -> str: ...
    @property
    def request_dim(self) -> bool: ...
    @property
    def timeout(self) -> float: ...
    @property
    def retries(self) -> int: ...
    @property
    def cache(self) -> bool: ...
    @property
    def cache_path(self) -> str: ...


@dataclass(frozen=True, slots=True)
class EmbedderSpec:
    """Which encoder, and how to run it: the fields of ``[embedder]``, with its
    defaults but ``threads`` (None: the library's own thread count, as a short name
    gives; the config's default is 0, auto)."""

    kind: str = "hashing"
    dim: int = 0
    bigrams: bool = True
    path: str = ""
    model: str = ""
    threads: int | None = None
    batch_size: int = 64
    base_url: str = ""
    api_key_env: str = ""
    api_key_header: str = "authorization"
    api_version: str = ""
    request_dim: bool = False
    timeout: float = 30.0
    retries: int = 2
    cache: bool = False
    cache_path: str = ""

    @classmethod
    def of(cls, settings: EmbedderSettings) -> EmbedderSpec:
        """The spec holding ``settings``' fields (an :class:`EmbedderConfig`, say)."""
        if isinstance(settings, EmbedderSpec):
            return settings
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls)})


def parse_embedder(name: str) -> EmbedderSpec:
    """The spec a short name stands for (:data:`NAMES`); every embedder's ``name``
    is one. :class:`UsageError` for any other string."""

    def unknown(why: str = "") -> UsageError:
        return UsageError(f"unknown embedder {name!r}{why}; choose {NAMES}")

    if not isinstance(name, str):
        raise UsageError(f"an embedder name is a string, got {type(name).__name__}")
    kind, sep, rest = name.partition(":")
    if name == "hashing":
        return EmbedderSpec()
    if name == "minilm":
        return EmbedderSpec(kind="minilm")
    if not sep or not rest:
        raise unknown()
    if kind == "hashing":
        m = re.fullmatch(r"([0-9]+)(:unigrams)?", rest)
        if m is None:
            raise unknown()
        dim = int(m.group(1))
        if dim < 2:
            raise unknown(" (a hashing dimension is at least 2)")
        return EmbedderSpec(dim=dim, bigrams=m.group(2) is None)
    if kind in ("st", "sentence-transformers"):
        return EmbedderSpec(kind="sentence-transformers", path=rest)
    if kind == "model2vec":
        return EmbedderSpec(kind="model2vec", path=rest)
    if kind in ("fastembed", "endpoint"):
        model, at, where = rest.partition("@")
        if not (model and at and where):
            where_to = "a folder" if kind == "fastembed" else "a URL"
            raise unknown(f" ({kind} names a model and {where_to}: {kind}:MODEL@...)")
        if kind == "fastembed":
            return EmbedderSpec(kind="fastembed", model=model, path=where)
        return EmbedderSpec(kind="endpoint", model=model, base_url=where)
    raise unknown()


def check_embedder(settings: EmbedderSettings) -> None:
    """Refuse settings that cannot build, or keys that do not apply to the kind (a
    typo would pass silently): :class:`UsageError` naming the key."""
    s = EmbedderSpec.of(settings)
    if s.kind not in KINDS:
        raise UsageError(f"kind: unknown encoder {s.kind!r}; choose {', '.join(KINDS)}")
    kind = s.kind

    def only(key: str, value: object, default: object, kinds: tuple[str, ...]) -> None:
        if value != default and kind not in kinds:
            raise UsageError(f"{key} applies to kind {' or '.join(kinds)}, not {kind}")

    if s.kind == "hashing" and s.dim == 1:
        raise UsageError("dim: a hashing dimension is at least 2")
    if s.dim < 0:
        raise UsageError("dim: must be at least 0 (0: the encoder's own)")
    only("bigrams", s.bigrams, True, ("hashing",))
    only("path", s.path, "", FOLDER_KINDS)
    only("model", s.model, "", ("fastembed", "endpoint"))
    for key in ("base_url", "api_key_env", "api_version"):
        only(key, getattr(s, key), "", ("endpoint",))
    only("api_key_header", s.api_key_header, "authorization", ("endpoint",))
    only("request_dim", s.request_dim, False, ("endpoint",))
    if s.cache and kind == "hashing":
        raise UsageError("cache: hashing vectors are cheaper to make than to read; leave cache off")
    only("cache_path", s.cache_path, "", KINDS[1:])
    if s.cache_path and not s.cache:
        raise UsageError("cache_path: applies with cache = true")
    if kind in FOLDER_KINDS and not s.path:
        raise UsageError(f"path: kind {kind} loads a model folder: name it (nothing downloads)")
    if kind in ("fastembed", "endpoint") and not s.model:
        raise UsageError(
            "model: name the fastembed model the folder holds (e.g. BAAI/bge-small-en-v1.5)"
            if kind == "fastembed"
            else "model: name the endpoint's embedding model"
        )
    if kind == "endpoint":
        if not s.base_url:
            raise UsageError(
                "base_url: kind endpoint needs the API root (e.g. http://localhost:11434/v1);"
                " there is no default, so nothing is sent anywhere unasked"
            )
        from ctxwise.embeddings._endpoint import check_base_url

        try:
            check_base_url(s.base_url)
        except UsageError as exc:
            raise UsageError(f"base_url: {exc}") from None
        if s.api_key_env and not _ENV_NAME.fullmatch(s.api_key_env):
            raise UsageError(  # the value is not echoed: it may be the key itself
                "api_key_env: is not an environment variable name (letters, digits and _):"
                " name the variable that holds the key, not the key"
            )
        if s.api_key_header not in ("authorization", "api-key"):
            raise UsageError("api_key_header: authorization (Bearer) or api-key (Azure)")
        if s.request_dim and s.dim < 1:
            raise UsageError("request_dim: sends dim as dimensions; give dim too")
    if s.batch_size < 1:
        raise UsageError("batch_size: must be at least 1")
    if not s.timeout > 0 or s.retries < 0:
        raise UsageError("timeout must be above 0 and retries at least 0")
    try:
        resolve_threads(s.threads)
    except UsageError as exc:
        raise UsageError(f"threads: {exc}") from None


def _resolve(path: str, base_dir: str | Path | None) -> Path:
    p = Path(path)
    return p if p.is_absolute() or base_dir is None else Path(base_dir) / p


def embedder_name(settings: EmbedderSettings | str, *, base_dir: str | Path | None = None) -> str:
    """The ``name`` the embedder built from ``settings`` will have, without building
    it (what a recall preset is checked against): ``hashing:1024``, ``minilm``,
    ``st:DIR``, ``fastembed:MODEL@DIR``, ``model2vec:DIR``, ``endpoint:MODEL@URL``."""
    s = parse_embedder(settings) if isinstance(settings, str) else EmbedderSpec.of(settings)
    if s.kind == "hashing":
        return f"hashing:{s.dim or 1024}" + ("" if s.bigrams else ":unigrams")
    if s.kind == "minilm":
        return "minilm"
    if s.kind == "sentence-transformers":
        return f"st:{_resolve(s.path, base_dir)}"
    if s.kind == "fastembed":
        return f"fastembed:{s.model}@{_resolve(s.path, base_dir)}"
    if s.kind == "model2vec":
        return f"model2vec:{_resolve(s.path, base_dir)}"
    return f"endpoint:{s.model}@{s.base_url.rstrip('/')}"


def build_embedder(
    settings: EmbedderSettings | str,
    *,
    base_dir: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    transport: Any = None,
) -> Embedder:
    """The :class:`Embedder` that ``settings`` (an :class:`EmbedderSpec`, the
    ``[embedder]`` table, :class:`ctxwise.config.EmbedderConfig`, or a short name)
    describes. Relative ``path`` and ``cache_path`` resolve against ``base_dir``
    (the config file's folder). The endpoint's key is read from ``environ``
    (default: the process environment) now, under the name ``api_key_env`` gives.
    ``transport`` is an httpx transport for the endpoint (tests).

    Raises:
        UsageError: bad settings (the key named), a model folder that holds no model,
            an unset key variable.
        MissingDependencyError: the encoder's extra is not installed (the message
            names ``pip install -e '.[EXTRA]'``).
    """
    s = parse_embedder(settings) if isinstance(settings, str) else EmbedderSpec.of(settings)
    check_embedder(s)
    inner = _build(s, base_dir, os.environ if environ is None else environ, transport)
    if not s.cache:
        return inner
    from ctxwise.embedding_cache import CachedEmbedder, default_cache_path

    where = _resolve(s.cache_path, base_dir) if s.cache_path else default_cache_path(environ)
    return CachedEmbedder(inner, where)


def _build(
    s: EmbedderSpec,
    base_dir: str | Path | None,
    environ: Mapping[str, str],
    transport: Any,
) -> Embedder:
    if s.kind == "hashing":
        from ctxwise.embeddings._hashing import HashingEmbedder

        return HashingEmbedder(s.dim or 1024, bigrams=s.bigrams)
    if s.kind in ("minilm", "sentence-transformers"):
        from ctxwise.embeddings._local import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(
            None if s.kind == "minilm" else _resolve(s.path, base_dir),
            batch_size=s.batch_size,
            threads=s.threads,
            dim=s.dim,
        )
    if s.kind == "fastembed":
        from ctxwise.embeddings._local import FastEmbedEmbedder

        return FastEmbedEmbedder(
            s.model,
            _resolve(s.path, base_dir),
            batch_size=s.batch_size,
            threads=s.threads,
            dim=s.dim,
        )
    if s.kind == "model2vec":
        from ctxwise.embeddings._local import Model2VecEmbedder

        return Model2VecEmbedder(_resolve(s.path, base_dir), batch_size=s.batch_size, dim=s.dim)
    from ctxwise.embeddings._endpoint import EndpointEmbedder

    key = None
    if s.api_key_env:
        key = environ.get(s.api_key_env)
        if not key:
            raise UsageError(
                f"api_key_env: the environment variable {s.api_key_env} is not set (or is"
                " empty); set it to the endpoint's key, or leave api_key_env empty for a"
                " server that needs none"
            )
    return EndpointEmbedder(
        s.base_url,
        s.model,
        api_key=key,
        api_key_header=s.api_key_header,
        api_version=s.api_version,
        dim=s.dim,
        request_dim=s.request_dim,
        batch_size=s.batch_size,
        timeout=s.timeout,
        retries=s.retries,
        transport=transport,
    )
