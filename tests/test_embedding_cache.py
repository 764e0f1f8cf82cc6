"""The persistent embedding cache: vectors kept by model and text, read back bit for bit."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ctxwise import CachedEmbedder
from ctxwise.embedding_cache import bypassing, default_cache_dir, default_cache_path, model_key
from ctxwise.embeddings import HashingEmbedder, Vectors
from ctxwise.errors import OutputError, UsageError


class Counting:
    """The hashing embedder's vectors, plus a little of the call's size (as an
    encoder's batch changes its float noise), counting every text it embeds."""

    def __init__(self, name: str = "counting", dim: int = 32) -> None:
        self.name = name
        self.dim = dim
        self.inner = HashingEmbedder(dim)
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(list(texts))
        return self.inner.embed(texts) + np.float32(1e-3 * len(texts))


TEXTS = ["refund my order", "where is my parcel", "refund my order", "", "naïve 🙂 \ud800"]


def test_a_second_run_reads_every_vector_back_bit_for_bit(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "embeddings.sqlite"  # the folder is made
    first = Counting()
    with CachedEmbedder(first, path) as cached:
        got = cached.embed(TEXTS)
        assert cached.misses == 4 and cached.hits == 0
    # the model saw each distinct text once, in one call
    assert first.calls == [["refund my order", "where is my parcel", "", "naïve 🙂 \ud800"]]
    assert got.dtype == np.float32 and got.shape == (5, 32)
    np.testing.assert_array_equal(got[0], got[2])

    again = Counting()
    with CachedEmbedder(again, path) as cached:
        # another order and batch: the very vectors of the first run, not re-encoded
        back = cached.embed(list(reversed(TEXTS)))
        assert again.calls == [] and cached.hits == 4 and cached.misses == 0
    assert back.tobytes() == got[::-1].tobytes()
    # only what is new goes to the model
    with CachedEmbedder(again, path) as cached:
        cached.embed(["where is my parcel", "cancel the plan"])
    assert again.calls == [["cancel the plan"]]


def test_models_do_not_share_vectors(tmp_path: Path) -> None:
    path = tmp_path / "e.sqlite"
    with CachedEmbedder(Counting("a"), path) as cached:
        cached.embed(["hello"])
    other = Counting("b")
    with CachedEmbedder(other, path) as cached:
        cached.embed(["hello"])
        assert cached.misses == 1
    assert other.calls == [["hello"]]
    wider = Counting("a", dim=48)  # same name, another dimension: another model
    assert model_key(wider) != model_key(Counting("a"))

    class Fingerprinted(Counting):
        fingerprint = "a:32:0123456789abcdef"

    assert model_key(Fingerprinted("a")) == "a:32:0123456789abcdef"


def test_the_file_holds_no_text(tmp_path: Path) -> None:
    path = tmp_path / "e.sqlite"
    with CachedEmbedder(Counting(), path) as cached:
        cached.embed(["the secret plan"])
    assert b"secret" not in path.read_bytes()
    with sqlite3.connect(path) as conn:
        ((key,),) = conn.execute("SELECT text_key FROM vectors").fetchall()
    assert len(key) == 32  # a SHA-256


def test_bypassing_embeds_afresh_and_keeps_nothing(tmp_path: Path) -> None:
    inner = Counting()
    with CachedEmbedder(inner, tmp_path / "e.sqlite") as cached:
        cached.embed(["timed"])
        with bypassing(cached):
            cached.embed(["timed", "untimed"])
            assert cached.bypass
        assert not cached.bypass
        cached.embed(["untimed"])  # not kept while bypassed: embedded now
    assert inner.calls == [["timed"], ["timed", "untimed"], ["untimed"]]
    with bypassing(inner):  # anything else: left as it is
        inner.embed(["x"])


def test_a_file_that_is_not_a_cache_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database, and not to be overwritten\n" * 100)
    before = path.read_bytes()
    with pytest.raises(OutputError, match="embedding cache"):
        CachedEmbedder(Counting(), path)
    assert path.read_bytes() == before
    with pytest.raises(OutputError):
        CachedEmbedder(Counting(), tmp_path / "notes.txt" / "below-a-file.sqlite")
    with pytest.raises(UsageError):
        CachedEmbedder("minilm", tmp_path / "e.sqlite")  # type: ignore[arg-type]


def test_default_location_follows_the_environment(tmp_path: Path) -> None:
    assert default_cache_dir({"CTXWISE_CACHE_DIR": str(tmp_path)}) == tmp_path
    xdg = {"XDG_CACHE_HOME": str(tmp_path)}
    assert default_cache_dir(xdg) == tmp_path / "ctxwise"
    assert default_cache_path(xdg) == tmp_path / "ctxwise" / "embeddings.sqlite"
    assert default_cache_dir({}) == Path.home() / ".cache" / "ctxwise"
