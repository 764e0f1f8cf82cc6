"""The options every ``eval`` command shares, and what they resolve to.

``--embedder``, ``--preset``, ``--embedding-cache`` / ``--no-embedding-cache``:
one spelling, one help text and one check for every command that embeds, so a
combination that cannot be honoured is refused the same way everywhere, with the
flag to add.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ctxwise.errors import MissingDependencyError, UsageError

if TYPE_CHECKING:
    from ctxwise.embedding_cache import CachedEmbedder
    from ctxwise.embeddings import Embedder

__all__ = [
    "EMBEDDER_HELP",
    "EmbedderOpt",
    "EmbeddingCacheOpt",
    "EvalEmbedder",
    "NoEmbeddingCacheOpt",
    "PresetOpt",
    "check_preset",
    "embedder_report",
    "open_embedder",
    "print_skipped",
    "resolve_embedder",
    "resolved_name",
]

EMBEDDER_HELP = (
    "hashing (offline, no model), hashing:DIM, minilm (the minilm extra), st:MODEL_DIR,"
    " fastembed:MODEL@DIR, model2vec:DIR, endpoint:MODEL@URL, or a"
    " ctxwise.toml whose \\[embedder] to use (docs/embedders.md); nothing downloads"
)
EmbedderOpt = Annotated[
    str | None,
    typer.Option(help=f"Embedder (hashing where one is needed): {EMBEDDER_HELP}."),
]
PresetOpt = Annotated[
    str,
    typer.Option(
        help="Recall preset: neutral (the default), dialogue, or dialogue-minilm (chosen"
        " for --embedder minilm, and refused with any other)."
    ),
]
EmbeddingCacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--embedding-cache",
        help="SQLite file of model vectors kept between runs (default:"
        " embeddings.sqlite in $CTXWISE_CACHE_DIR, $XDG_CACHE_HOME/ctxwise or"
        " ~/.cache/ctxwise). Hashing vectors are never cached: they are cheaper to make.",
    ),
]
NoEmbeddingCacheOpt = Annotated[
    bool,
    typer.Option("--no-embedding-cache", help="Encode every text afresh and keep nothing on disk."),
]


@dataclass
class EvalEmbedder:
    """The embedder an ``eval`` command runs, and the cache in front of it (None:
    hashing, or ``--no-embedding-cache``)."""

    embedder: Embedder
    cache: CachedEmbedder | None = None

    def report(self) -> dict[str, Any]:
        """``embedder`` and ``embedding_cache`` (``path``, ``hits``, ``misses``; None
        when off), for the command's output."""
        cache = self.cache
        return {
            "embedder": self.embedder.name,
            "embedding_cache": None
            if cache is None
            else {"path": str(cache.path), "hits": cache.hits, "misses": cache.misses},
        }

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()


def embedder_report(used: EvalEmbedder | None) -> dict[str, Any]:
    """``used.report()``, or the same keys as null for a command that embedded nothing."""
    return used.report() if used is not None else {"embedder": None, "embedding_cache": None}


def _config_file(name: str) -> Path | None:
    """``name`` as a ctxwise.toml whose ``[embedder]`` is meant, or None."""
    return Path(name) if name.endswith(".toml") else None


def resolved_name(name: str) -> str:
    """The ``name`` the embedder ``--embedder name`` gives will have (a config file:
    its ``[embedder]``'s), without building it."""
    from ctxwise.embeddings import embedder_name

    path = _config_file(name)
    if path is None:
        return name
    from ctxwise.config import load_config

    config = load_config(path)
    return embedder_name(config.embedder, base_dir=config.base_dir)


def resolve_embedder(name: str) -> Embedder:
    """The embedder ``--embedder name`` names: a short name (``get_embedder``), or a
    ``ctxwise.toml`` whose ``[embedder]`` is built (its paths relative to the file,
    its key read from the environment)."""
    from ctxwise.embeddings import build_embedder

    path = _config_file(name)
    if path is None:
        return build_embedder(name)
    from ctxwise.config import load_config

    config = load_config(path)
    return build_embedder(config.embedder, base_dir=config.base_dir)


def check_preset(preset: str, embedder: str) -> None:
    """Refuse an unknown preset, or one chosen for another embedder, naming the flag."""
    from ctxwise.memory.longterm import PRESET_EMBEDDERS, recall_settings

    recall_settings(preset)  # an unknown preset names the known ones
    wanted = PRESET_EMBEDDERS.get(preset)
    if wanted is not None and resolved_name(embedder) != wanted:
        raise UsageError(
            f"--preset {preset} was chosen for --embedder {wanted}, not {embedder}:"
            f" add --embedder {wanted}, or choose --preset neutral or dialogue"
        )


def open_embedder(
    name: str,
    *,
    cache: Path | None = None,
    no_cache: bool = False,
    flag_hint: str = "",
) -> EvalEmbedder:
    """The embedder ``name`` (:func:`resolve_embedder`), behind the embedding cache unless
    it is a hashing embedder or ``no_cache``. ``flag_hint`` is added to a missing
    extra's message (e.g. ``"or pass --embedder hashing"``).

    Raises:
        UsageError: ``--embedding-cache`` with ``--no-embedding-cache``; an unknown
            embedder; a missing extra (``MissingDependencyError``).
        OutputError: the cache file cannot be opened.
    """
    from ctxwise.embedding_cache import CachedEmbedder, default_cache_path
    from ctxwise.embeddings import HashingEmbedder

    if cache is not None and no_cache:
        raise UsageError("--embedding-cache and --no-embedding-cache: give one")
    try:
        embedder = resolve_embedder(name)
    except MissingDependencyError as exc:
        if not flag_hint:
            raise
        raise UsageError(f"{exc}; {flag_hint}") from None
    if isinstance(embedder, CachedEmbedder):  # a config file's [embedder] with cache = true
        if no_cache:
            embedder.close()
            return EvalEmbedder(embedder.inner)
        if cache is None:
            return EvalEmbedder(embedder, embedder)
        embedder.close()
        embedder = embedder.inner
    if no_cache or isinstance(embedder, HashingEmbedder):
        return EvalEmbedder(embedder)
    cached = CachedEmbedder(embedder, cache if cache is not None else default_cache_path())
    return EvalEmbedder(cached, cached)


def print_skipped(console: Any, result: dict[str, Any]) -> None:
    """One line for what an evaluation left out, and why (``--json`` lists each)."""
    if result.get("skipped"):
        reasons: dict[str, int] = {}
        for q in result.get("skipped_questions", []):
            why = q["reason"].split(":")[0]
            reasons[why] = reasons.get(why, 0) + 1
        console.print(
            f"skipped {result['skipped']} question(s): "
            + "; ".join(f"{n} because {why}" for why, n in reasons.items())
            + " (--json lists them)"
        )
    if result.get("excluded"):
        console.print(
            "left out by the loader: "
            + ", ".join(f"{n} question(s) of {what}" for what, n in result["excluded"].items())
        )
