"""API keys: shown once, stored as a digest, held to one tenant, revocable
(ctxwise.server.keys), on every backend."""

from __future__ import annotations

import hashlib
import itertools
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxwise.errors import UsageError
from ctxwise.server.keys import KEY_FORMAT, KeyStore
from tests._stores import postgres_dsn


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def keys(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeyStore]:
    url = {"memory": "memory", "sqlite": f"sqlite:///{tmp_path}/k.db"}.get(request.param)
    counter = itertools.count()
    store = KeyStore(
        url if url is not None else postgres_dsn(),
        token_bytes=lambda n: bytes([next(counter) % 256]) * n,
        clock=lambda: 1000.0,
    )
    yield store
    if request.param == "postgres":  # the control schema is shared: remove this run's keys
        for k in store.list():
            if k.tenant in ("acme", "beta"):
                store._write("DELETE FROM ctxwise_api_keys WHERE key_id = ?", (k.key_id,))
    store.close()


def test_a_key_authenticates_its_tenant_only(keys: KeyStore) -> None:
    info, plain = keys.create("acme", "ci runner")
    _, other = keys.create("beta")
    assert KEY_FORMAT.fullmatch(plain)
    assert keys.authenticate(plain) == "acme"
    assert keys.authenticate(other) == "beta"
    assert info.active and info.label == "ci runner" and info.key_id in plain
    # a right id with a wrong secret, a malformed key, nothing: all refused alike
    wrong = plain[:-1] + ("A" if plain[-1] != "A" else "B")
    for bad in (wrong, plain + "x", "", None, "Bearer " + plain, plain.upper()):
        assert keys.authenticate(bad) is None


def test_revoked_keys_never_authenticate_and_stay_listed(keys: KeyStore) -> None:
    info, plain = keys.create("acme")
    revoked = keys.revoke(info.key_id)
    assert revoked.revoked_at == 1000.0 and not revoked.active
    assert keys.authenticate(plain) is None
    assert keys.revoke(plain).revoked_at == 1000.0  # a whole key names it too; idempotent
    assert [k.key_id for k in keys.list("acme")] == [info.key_id]
    with pytest.raises(UsageError, match="no key"):
        keys.revoke("0123456789ab")
    with pytest.raises(UsageError, match="bad key id"):
        keys.revoke("../etc")


def test_bad_tenants_and_labels_are_refused(keys: KeyStore) -> None:
    for tenant in ("Acme", "", "a/b"):
        with pytest.raises(UsageError, match="tenant name"):
            keys.create(tenant)
    with pytest.raises(UsageError, match="label"):
        keys.create("acme", "x" * 201)


def test_only_a_digest_of_the_secret_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with KeyStore(f"sqlite:///{path}") as store:
        _, plain = store.create("acme")
    secret = plain.split("_", 2)[2]
    raw = path.read_bytes() + b"".join(
        p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("k.db-")
    )
    assert secret.encode() not in raw and plain.encode() not in raw
    with sqlite3.connect(path) as conn:
        (digest,) = conn.execute("SELECT digest FROM ctxwise_api_keys").fetchone()
    assert digest == hashlib.sha256(secret.encode()).hexdigest()
    with KeyStore(f"sqlite:///{path}") as reopened:  # kept across processes and restarts
        assert reopened.authenticate(plain) == "acme"
