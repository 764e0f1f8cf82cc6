"""Tenants are partitions of the store, not filters (ctxwise.tenancy, ctxwise.server.tenants):
each tenant's sessions, memory and lexical statistics live in a file or a schema of
their own, on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise.config import EngineConfig
from ctxwise.errors import StoreURLError, UsageError
from ctxwise.memory.store import NewItem
from ctxwise.server.tenants import TenantEngine
from ctxwise.tenancy import TENANT_NAME, check_tenant, open_partition, partition
from tests._stores import postgres_dsn


def test_partition_of_a_sqlite_store_is_a_file_per_tenant() -> None:
    p = partition("sqlite:///var/ctx/ctxwise.db", "acme")
    assert p.url == "sqlite:///var/ctx/ctxwise.tenants/acme.db"
    assert partition("sqlite:////abs/store", "b2").url == "sqlite:////abs/store.tenants/b2.db"
    assert partition("sqlite://", "acme").url == "sqlite://"


def test_partition_of_a_postgres_store_is_a_schema_per_tenant() -> None:
    p = partition("postgresql://u@h/db", "acme")
    assert (p.url, p.schema) == ("postgresql://u@h/db", "ctxwise_t_acme")


@pytest.mark.parametrize(
    "bad", ["", "Acme", "a-b", "../x", "a/b", "_x", "x" * 33, "é", "a b", None, 5]
)
def test_a_bad_tenant_name_is_refused(bad: object) -> None:
    with pytest.raises(UsageError, match="tenant name"):
        check_tenant(bad)


@given(st.text(max_size=40))
def test_a_valid_tenant_name_is_a_plain_file_name_and_identifier(name: str) -> None:
    try:
        checked = check_tenant(name)
    except UsageError:
        assert not TENANT_NAME.fullmatch(name)
        return
    assert checked == name and "/" not in name and "." not in name
    assert ("ctxwise_t_" + name).isidentifier() and len("ctxwise_t_" + name) <= 63


def test_bad_urls_and_uris_are_refused() -> None:
    with pytest.raises(StoreURLError):
        partition("mysql://x", "acme")
    with pytest.raises(UsageError, match="plain SQLite path"):
        partition("sqlite:///file:x.db?mode=ro", "acme")


def test_the_tenant_folder_is_owner_only_and_a_symlinked_one_is_refused(tmp_path: Path) -> None:
    sessions, memory = open_partition(partition(f"sqlite:///{tmp_path}/ctx.db", "acme"), dim=8)
    sessions.close()
    memory.close()
    folder = tmp_path / "ctx.tenants"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "b.tenants").symlink_to(elsewhere)
    with pytest.raises(UsageError, match="symlink"):
        open_partition(partition(f"sqlite:///{tmp_path}/b.db", "acme"), dim=8)
    assert list(elsewhere.iterdir()) == []


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/ctxwise.db"
        return
    yield postgres_dsn()


@pytest.fixture
def tenants() -> Iterator[tuple[str, str]]:
    """Two tenant names no other test uses; their PostgreSQL schemas are dropped after."""
    names = (f"a{uuid.uuid4().hex[:10]}", f"b{uuid.uuid4().hex[:10]}")
    yield names
    dsn = os.environ.get("CTXWISE_PG_DSN")
    if dsn:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            for name in names:
                conn.execute(f"DROP SCHEMA IF EXISTS ctxwise_t_{name} CASCADE")


def test_one_tenants_sessions_are_not_another_tenants(
    store_url: str, tenants: tuple[str, str]
) -> None:
    cfg = EngineConfig(store=store_url)
    a_name, b_name = tenants
    with TenantEngine(cfg, a_name) as a, TenantEngine(cfg, b_name) as b:
        a.engine.turn("s1", "My order 4411 never arrived. Never issue refunds by mail.")
        assert a.engine.sessions.sessions() == ["s1"]
        assert b.engine.sessions.sessions() == []
        assert b.engine.sessions.version("s1") == 0
        assert b.engine.sessions.traces("s1") == []
        assert b.engine.sessions.log("s1") == []
        b.engine.turn("s1", "hello")  # the same id in B is B's own session
        assert a.engine.sessions.version("s1") == 1
        assert [m["content"][0]["text"] for m in a.engine.sessions.log("s1")] == [
            "My order 4411 never arrived. Never issue refunds by mail."
        ]


def test_lexical_statistics_are_per_tenant(store_url: str, tenants: tuple[str, str]) -> None:
    """A's BM25 scores are the same whatever B stores: document frequencies are per
    partition, so B's documents cannot shift (or reveal themselves through) A's ranks."""
    a_part, b_part = (partition(store_url, t) for t in tenants)
    a_sessions, a_mem = open_partition(a_part, dim=8)
    b_sessions, b_mem = open_partition(b_part, dim=8)
    try:
        ns = ("notes",)
        a_mem.put_many(ns, [NewItem("refund policy for damaged parcels"), NewItem("shipping")])
        before = [(i.text, s) for i, s in a_mem.lexical_search(ns, "refund parcels", 5)]
        b_mem.put_many(ns, [NewItem(f"refund refund note {i}") for i in range(40)])
        after = [(i.text, s) for i, s in a_mem.lexical_search(ns, "refund parcels", 5)]
        assert before == after and before
        assert [i.text for i, _ in b_mem.lexical_search(ns, "parcels", 5)] == []
        assert a_mem.count(ns) == 2 and b_mem.count(ns) == 40
    finally:
        for s in (a_sessions, a_mem, b_sessions, b_mem):
            s.close()


def test_a_tenant_engine_opens_its_own_stores_only(tmp_path: Path) -> None:
    from ctxwise.sessions import InMemorySessionStore

    with pytest.raises(UsageError, match="opens its own stores"):
        TenantEngine(
            EngineConfig(store=f"sqlite:///{tmp_path}/x.db"),
            "acme",
            sessions=InMemorySessionStore(),
        )
    assert not (tmp_path / "x.db").exists()
