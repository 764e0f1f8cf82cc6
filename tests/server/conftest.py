"""The service under test: a real app on a real store (a SQLite file, or PostgreSQL
when CTXWISE_PG_DSN is set), two tenants with a key each."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ctxwise.server.app import create_app
from ctxwise.server.keys import KeyStore
from ctxwise.server.settings import ServeSettings
from tests._stores import postgres_dsn


@dataclass
class Service:
    client: TestClient
    keys: KeyStore
    tenants: tuple[str, str]
    key_a: str
    key_b: str
    store: str

    def a(self) -> dict[str, str]:
        return {"x-ctxwise-key": self.key_a}

    def b(self) -> dict[str, str]:
        return {"x-ctxwise-key": self.key_b}


def _drop_schemas(dsn: str, tenants: tuple[str, ...]) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for t in tenants:
            conn.execute(f"DROP SCHEMA IF EXISTS ctxwise_t_{t} CASCADE")


@pytest.fixture(params=["sqlite", "postgres"])
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Service]:
    store = f"sqlite:///{tmp_path}/svc.db" if request.param == "sqlite" else postgres_dsn()
    tenants = (f"a{uuid.uuid4().hex[:10]}", f"b{uuid.uuid4().hex[:10]}")
    keys = KeyStore(store)
    _, key_a = keys.create(tenants[0], "a")
    _, key_b = keys.create(tenants[1], "b")
    settings = ServeSettings(store=store, max_body_bytes=64 * 1024)
    try:
        with TestClient(create_app(settings, keys=keys)) as client:
            yield Service(client, keys, tenants, key_a, key_b, store)
    finally:
        keys.close()
        if request.param == "postgres":
            _drop_schemas(os.environ["CTXWISE_PG_DSN"], tenants)


# the proxy on an Anthropic upstream (tests/server/test_proxy_anthropic.py), for
# every module that tests it; a module whose upstream answers another API
# overrides ``proxy`` with its own


@pytest.fixture(params=["sqlite", "postgres"])
def proxy(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    from tests.server.test_proxy_anthropic import make_proxy

    store = f"sqlite:///{tmp_path}/svc.db" if request.param == "sqlite" else postgres_dsn()
    made, close = make_proxy(store, tmp_path)
    try:
        yield made
    finally:
        close()


@pytest.fixture
def sqlite_proxy(tmp_path: Path) -> Iterator[Any]:
    from tests.server.test_proxy_anthropic import make_proxy

    made, close = make_proxy(f"sqlite:///{tmp_path}/svc.db", tmp_path)
    try:
        yield made
    finally:
        close()
