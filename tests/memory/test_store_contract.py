"""The store contract, against every backend: the suite ctxwise ships as
:mod:`ctxwise.testing` (so a third-party store runs the same checks), over the
``make_store`` fixture of ``conftest.py`` (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import numpy as np
import pytest

from ctxwise.embeddings import HashingEmbedder
from ctxwise.testing.suite import StoreConformance
from tests.memory.conftest import DIM


class TestStoreContract(StoreConformance):
    """Every check of :data:`ctxwise.testing.STORE_CHECKS`, on every backend."""


def test_vectors_are_float32_unit() -> None:
    v = HashingEmbedder(DIM).embed(["abc"])[0]
    assert v.dtype == np.float32 and float(np.linalg.norm(v)) == pytest.approx(1.0)
