"""One contract suite for every store backend: memory, sqlite, postgres.

The PostgreSQL backend runs against the server named by ``CTXWISE_PG_DSN`` (which
``.ci/run`` starts on a local unix socket); without it those cases skip, saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctxwise.memory import Store
from tests._stores import store_factory

DIM = 64
BACKENDS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """A factory of stores that share one backing database for the test."""
    with store_factory(request.param, tmp_path, dim=DIM) as factory:
        yield factory
