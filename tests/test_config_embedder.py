"""``[embedder]`` in ctxwise.toml: strict like every section, a preset refused with
the wrong embedder, and the rule between it and the older ``[tools] embedder``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxwise.config import (
    PRESET_EMBEDDERS,
    EmbedderConfig,
    EngineConfig,
    config_from_dict,
    load_config,
)
from ctxwise.embeddings import HashingEmbedder, build_embedder, embedder_name
from ctxwise.errors import ConfigError


def test_the_default_is_the_offline_hashing_embedder() -> None:
    config = config_from_dict({})
    assert config.embedder == EmbedderConfig()
    built = build_embedder(config.embedder, base_dir=config.base_dir)
    assert isinstance(built, HashingEmbedder) and built.name == "hashing:1024"
    assert config.tool_search_embedder() is None  # BM25 alone, as before


def test_a_file_section_is_read_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ctxwise.toml"
    path.write_text(
        '[embedder]\nkind = "model2vec"\npath = "models/potion"\nthreads = 2\n', encoding="utf-8"
    )
    config = load_config(path)
    assert config.embedder.kind == "model2vec" and config.embedder.threads == 2
    assert embedder_name(config.embedder, base_dir=config.base_dir) == (
        f"model2vec:{tmp_path.resolve() / 'models' / 'potion'}"
    )


@pytest.mark.parametrize(
    ("embedder", "message"),
    [
        ({"kind": "word2vec"}, r"embedder\.kind: Input should be 'hashing'"),
        ({"knd": "minilm"}, r"embedder\.knd: unknown key"),
        ({"threads": "2"}, r"embedder\.threads: Input should be a valid integer"),
        ({"threads": -1}, r"embedder\.threads: Input should be greater than or equal to 0"),
        ({"kind": "minilm", "path": "x"}, r"embedder: path applies to kind sentence-transformers"),
        ({"kind": "fastembed", "path": "x"}, "embedder: model: name the fastembed model"),
        ({"kind": "endpoint", "model": "m"}, "embedder: base_url: kind endpoint needs"),
        (
            {"kind": "endpoint", "model": "m", "base_url": "https://k:sk-123@x.test/v1"},
            "embedder: base_url: base_url holds credentials",
        ),
        ({"cache": True}, "embedder: cache: hashing vectors"),
        ({"timeout": 0}, r"embedder\.timeout: Input should be greater than 0"),
    ],
)
def test_a_bad_embedder_section_is_a_config_error_naming_the_key(
    embedder: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        config_from_dict({"embedder": embedder})
    assert "sk-123" not in str(info.value)


def test_built_in_code_a_bad_section_is_a_config_error_too() -> None:
    with pytest.raises(ConfigError, match="EmbedderConfig: path: kind model2vec loads"):
        EmbedderConfig(kind="model2vec")


def test_dialogue_minilm_is_refused_with_hashing_and_taken_with_minilm() -> None:
    with pytest.raises(
        ConfigError,
        match=r"memory\.preset: recall preset 'dialogue-minilm' was chosen for the minilm"
        r" embedder, not hashing:1024: set \[embedder\] kind = 'minilm'",
    ):
        config_from_dict({"memory": {"preset": "dialogue-minilm"}})
    with pytest.raises(ConfigError, match="not model2vec:"):
        config_from_dict(
            {
                "memory": {"preset": "dialogue-minilm"},
                "embedder": {"kind": "model2vec", "path": "m"},
            }
        )
    config = config_from_dict(
        {"memory": {"preset": "dialogue-minilm"}, "embedder": {"kind": "minilm"}}
    )
    assert config.memory.preset == "dialogue-minilm"
    for preset in ("neutral", "dialogue"):  # fit to no embedder: taken with any
        config_from_dict({"memory": {"preset": preset}, "embedder": {"kind": "minilm"}})


def test_the_config_knows_the_presets_memory_fits_to_one_embedder() -> None:
    # config sits below memory, so it holds a copy of the table: the two stay equal,
    # and refuse the same pairs
    from ctxwise.errors import UsageError
    from ctxwise.memory.longterm import PRESET_EMBEDDERS as MEMORY_TABLE
    from ctxwise.memory.longterm import check_preset_embedder

    assert dict(MEMORY_TABLE) == PRESET_EMBEDDERS
    for preset, wanted in PRESET_EMBEDDERS.items():
        check_preset_embedder(preset, wanted)
        with pytest.raises(UsageError):
            check_preset_embedder(preset, "hashing:1024")


def test_tools_embedder_alone_is_the_older_spelling_of_tool_search_vectors() -> None:
    config = config_from_dict({"tools": {"embedder": "st:models/mini"}}, base_dir="/cfg")
    chosen = config.tool_search_embedder()
    assert chosen is not None
    assert (chosen.kind, chosen.path, chosen.threads) == ("sentence-transformers", "models/mini", 0)
    assert embedder_name(chosen, base_dir=config.base_dir) == "st:/cfg/models/mini"
    assert config.embedder == EmbedderConfig()  # memory keeps the default


def test_tool_search_follows_a_model_embedder_but_not_hashing() -> None:
    minilm = config_from_dict({"embedder": {"kind": "minilm"}})
    assert minilm.tool_search_embedder() == minilm.embedder
    hashing = config_from_dict({"embedder": {"kind": "hashing", "dim": 256}})
    assert hashing.tool_search_embedder() is None


def test_tools_embedder_beside_a_non_default_embedder_is_refused_naming_embedder() -> None:
    with pytest.raises(
        ConfigError,
        match=r"tools\.embedder = 'minilm' and \[embedder\] both name an embedder: give it"
        r" once, in \[embedder\]",
    ):
        config_from_dict({"tools": {"embedder": "minilm"}, "embedder": {"kind": "minilm"}})
    # the default [embedder] written out (a dumped config read back) is no conflict
    config = config_from_dict({"tools": {"embedder": "minilm"}, "embedder": {"kind": "hashing"}})
    assert config.tool_search_embedder() == EmbedderConfig(kind="minilm")


def test_a_dumped_config_reads_back_the_same() -> None:
    config = config_from_dict(
        {"embedder": {"kind": "endpoint", "model": "m", "base_url": "http://localhost:8000/v1"}}
    )
    again = config_from_dict(config.model_dump())
    assert again == config
    assert again.tool_search_embedder() == config.embedder


def test_engine_config_built_in_code_takes_an_embedder_section() -> None:
    config = EngineConfig(embedder=EmbedderConfig(kind="minilm", threads=1))
    assert config.embedder.threads == 1
    with pytest.raises(ConfigError, match=r"memory\.preset"):
        EngineConfig(memory={"preset": "dialogue-minilm"})  # type: ignore[arg-type]
