"""``--embedder`` takes every short name and a ctxwise.toml whose ``[embedder]`` to use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxwise.cli._eval import check_preset, open_embedder, resolve_embedder, resolved_name
from ctxwise.embedding_cache import CachedEmbedder
from ctxwise.errors import ConfigError, UsageError

from ._cli import assert_usage_error, ok_json, run
from .test_embeddings_build import _tiny_model2vec

TOOLS = [
    {
        "name": "refund_order",
        "description": "Give the customer their money back for an order.",
        "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
    },
    {
        "name": "forecast",
        "description": "Tell whether rain or sunny weather is coming.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
]


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(TOOLS), encoding="utf-8")
    return path


def test_a_name_and_a_config_file_give_the_same_search(tmp_path: Path, catalog: Path) -> None:
    folder = _tiny_model2vec(tmp_path / "potion")
    config = tmp_path / "ctxwise.toml"
    config.write_text('[embedder]\nkind = "model2vec"\npath = "potion"\n', encoding="utf-8")
    args = ("tools", "search", catalog, "-q", "money", "-k", "2")
    by_name = ok_json(*args, "--embedder", f"model2vec:{folder}")
    by_file = ok_json(*args, "--embedder", config)
    assert by_name == by_file
    assert by_name["hits"][0]["name"] == "refund_order"
    assert by_name["hits"][0]["vector_rank"] == 1
    assert resolved_name(str(config)) == f"model2vec:{folder}"


def test_a_bad_config_file_is_one_usage_error_line(tmp_path: Path, catalog: Path) -> None:
    config = tmp_path / "ctxwise.toml"
    config.write_text('[embedder]\nkind = "model2vec"\n', encoding="utf-8")
    result = run("tools", "search", catalog, "-q", "money", "--embedder", config)
    assert_usage_error(result, "embedder: path: kind model2vec loads a model folder")
    result = run("tools", "search", catalog, "-q", "money", "--embedder", "word2vec")
    assert_usage_error(result, "unknown embedder 'word2vec'")


def test_the_preset_is_checked_against_the_config_files_embedder(tmp_path: Path) -> None:
    hashing = tmp_path / "hashing.toml"
    hashing.write_text('[embedder]\nkind = "hashing"\n', encoding="utf-8")
    with pytest.raises(
        UsageError, match="--preset dialogue-minilm was chosen for --embedder minilm"
    ):
        check_preset("dialogue-minilm", str(hashing))
    minilm = tmp_path / "minilm.toml"
    minilm.write_text('[embedder]\nkind = "minilm"\n', encoding="utf-8")
    check_preset("dialogue-minilm", str(minilm))
    with pytest.raises(ConfigError, match="no such file"):
        resolve_embedder(str(tmp_path / "missing.toml"))


def test_a_config_files_cache_is_the_commands_cache(tmp_path: Path) -> None:
    _tiny_model2vec(tmp_path / "potion")
    config = tmp_path / "ctxwise.toml"
    config.write_text(
        '[embedder]\nkind = "model2vec"\npath = "potion"\ncache = true\ncache_path = "v.sqlite"\n',
        encoding="utf-8",
    )
    used = open_embedder(str(config))
    assert isinstance(used.embedder, CachedEmbedder) and used.cache is used.embedder
    assert used.report()["embedding_cache"]["path"] == str(tmp_path / "v.sqlite")
    used.close()
    off = open_embedder(str(config), no_cache=True)
    assert off.cache is None and not isinstance(off.embedder, CachedEmbedder)
    elsewhere = open_embedder(str(config), cache=tmp_path / "other.sqlite")
    assert elsewhere.cache is not None and elsewhere.cache.path == tmp_path / "other.sqlite"
    elsewhere.close()
