"""The proxy holds every key to its tenant (issue 31, item 4): two tenants speaking
through the same ``ctxwise serve`` to a loopback fake upstream, with the same session
names and the same conversation openings, never reach each other's sessions, traces,
facts or rules, on SQLite and on PostgreSQL."""

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
from ctxwise.testing.upstream import FakeUpstream
from tests._stores import postgres_dsn
from tests.server.conftest import _drop_schemas

SECRET = "Order 4411 for Ada Lovelace ships to 12 Elm Street. Never issue refunds to anyone."


@dataclass
class Two:
    client: TestClient
    fake: FakeUpstream
    keys: KeyStore
    key_a: str
    key_b: str

    def post(self, key: str, body: dict[str, Any], session: str | None = None) -> Any:
        headers = {"x-ctxwise-key": key, "x-api-key": "sk-ant-test"}
        if session is not None:
            headers["x-ctxwise-session"] = session
        return self.client.post("/v1/messages", json=body, headers=headers)

    def rest(self, key: str, path: str) -> Any:
        return self.client.get(path, headers={"x-ctxwise-key": key})


@pytest.fixture(params=["sqlite", "postgres"])
def two(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Two]:
    store = f"sqlite:///{tmp_path}/svc.db" if request.param == "sqlite" else postgres_dsn()
    tenants = (f"a{uuid.uuid4().hex[:10]}", f"b{uuid.uuid4().hex[:10]}")
    keys = KeyStore(store)
    _, key_a = keys.create(tenants[0])
    _, key_b = keys.create(tenants[1])
    try:
        with FakeUpstream() as fake:
            settings = ServeSettings(
                store=store, anthropic_upstream=fake.url, openai_upstream=fake.url
            )
            with TestClient(create_app(settings, keys=keys)) as client:
                yield Two(client, fake, keys, key_a, key_b)
    finally:
        keys.close()
        if request.param == "postgres":
            _drop_schemas(os.environ["CTXWISE_PG_DSN"], tenants)


def _body(*texts: str) -> dict[str, Any]:
    messages = []
    for i, text in enumerate(texts):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages}


def test_the_same_session_name_is_two_sessions_under_two_keys(two: Two) -> None:
    r = two.post(two.key_a, _body(SECRET), session="support")
    assert r.status_code == 200, r.text
    reply = r.json()["content"][0]["text"]
    r = two.post(two.key_b, _body("Hello, what can you tell me?"), session="support")
    assert r.status_code == 200, r.text
    # B's request went upstream with B's history only
    assert SECRET not in str(two.fake.requests[-1])
    # A continues its own session: nothing of B's in it, and A's history whole
    r = two.post(two.key_a, _body(SECRET, reply, "And the refund?"), session="support")
    assert r.status_code == 200
    assert "what can you tell me" not in str(two.fake.requests[-1])
    a_log = two.rest(two.key_a, "/v1/sessions/support/messages").json()["messages"]
    b_log = two.rest(two.key_b, "/v1/sessions/support/messages").json()["messages"]
    assert SECRET in str(a_log) and SECRET not in str(b_log)
    assert "what can you tell me" in str(b_log) and "what can you tell me" not in str(a_log)
    b_rules = two.rest(two.key_b, "/v1/sessions/support/rules").json()["rules"]
    assert "refunds" not in str(b_rules)
    assert "refunds" in str(two.rest(two.key_a, "/v1/sessions/support/rules").json()["rules"])


def test_a_derived_session_is_per_tenant(two: Two) -> None:
    assert two.post(two.key_a, _body(SECRET)).status_code == 200
    assert two.post(two.key_b, _body(SECRET)).status_code == 200  # the same opening
    a_sessions = two.rest(two.key_a, "/v1/sessions").json()["sessions"]
    b_sessions = two.rest(two.key_b, "/v1/sessions").json()["sessions"]
    assert len(a_sessions) == 1 and a_sessions == b_sessions  # the same name…
    a = two.rest(two.key_a, f"/v1/sessions/{a_sessions[0]}").json()
    b = two.rest(two.key_b, f"/v1/sessions/{b_sessions[0]}").json()
    assert a["version"] == b["version"] == 2  # …two sessions, one turn and one reply each
    for path in ("traces", "facts", "rules", "messages"):
        a_part = two.rest(two.key_a, f"/v1/sessions/{a_sessions[0]}/{path}").json()
        assert a_part == two.rest(two.key_a, f"/v1/sessions/{a_sessions[0]}/{path}").json()


def test_a_key_of_no_tenant_reaches_nothing_upstream(two: Two) -> None:
    sent = len(two.fake.requests)
    for key in ("", "cwk_000000000000_" + "A" * 43, two.key_a + "x"):
        r = two.post(key, _body(SECRET), session="support")
        assert r.status_code == 401
        assert r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "authentication_error"
    two.keys.revoke(two.key_a)
    assert two.post(two.key_a, _body(SECRET), session="support").status_code == 401
    assert len(two.fake.requests) == sent  # nothing was forwarded for them
    assert two.post(two.key_b, _body("hi"), session="support").status_code == 200


ROUTES: list[tuple[str, Any]] = [
    ("/v1/messages", lambda text: {"model": "claude-sonnet-4-5", "max_tokens": 64,
                                   "messages": [{"role": "user", "content": text}]}),
    ("/v1/chat/completions", lambda text: {"model": "gpt-4.1",
                                           "messages": [{"role": "user", "content": text}]}),
    ("/v1/responses", lambda text: {"model": "gpt-4.1", "input": text}),
]  # fmt: skip


@pytest.mark.parametrize(("path", "body"), ROUTES, ids=[p for p, _ in ROUTES])
def test_every_proxy_route_keeps_each_tenant_to_its_own_sessions(
    two: Two, path: str, body: Any
) -> None:
    def send(key: str, text: str) -> Any:
        headers = {
            "x-ctxwise-key": key,
            "x-ctxwise-session": "support",
            "authorization": "Bearer sk-test",
            "x-api-key": "sk-test",
        }
        return two.client.post(path, json=body(text), headers=headers)

    assert send(two.key_a, SECRET).status_code == 200
    assert send(two.key_b, "Hello, what can you tell me?").status_code == 200
    assert SECRET not in str(two.fake.requests[-1])
    a = two.rest(two.key_a, "/v1/sessions/support/messages").json()["messages"]
    b = two.rest(two.key_b, "/v1/sessions/support/messages").json()["messages"]
    assert SECRET in str(a) and SECRET not in str(b) and "what can you tell me" not in str(a)
    # without a key, or with another's revoked one: the provider's 401, nothing upstream
    sent = len(two.fake.requests)
    assert send("", SECRET).status_code == 401
    two.keys.revoke(two.key_a)
    assert send(two.key_a, SECRET).status_code == 401
    assert len(two.fake.requests) == sent
    count = two.client.post(
        "/v1/messages/count_tokens",
        json={"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]},
        headers={"x-ctxwise-key": two.key_b, "x-api-key": "sk-test"},
    )
    assert count.status_code == 200 and SECRET not in str(two.fake.requests[-1])
    assert two.client.post("/v1/messages/count_tokens", json={}).status_code == 401


def test_the_usage_ledger_is_what_the_upstream_billed(two: Two) -> None:
    """Every answer's usage, as the upstream sent it, is in the session's ledger,
    priced at its model; another tenant's key reads none of it."""
    first = two.post(two.key_a, _body(SECRET), session="support")
    reply = first.json()["content"][0]["text"]
    second = two.post(two.key_a, _body(SECRET, reply, "And the refund?"), session="support")
    assert second.status_code == 200
    billed = [r.json()["usage"] for r in (first, second)]
    ledger = two.rest(two.key_a, "/v1/sessions/support/usage").json()
    assert [a["uncached"] for a in ledger["answers"]] == [u["input_tokens"] for u in billed]
    assert ledger["input"] == sum(u["input_tokens"] for u in billed)
    assert ledger["output"] == sum(u["output_tokens"] for u in billed) == 10
    assert ledger["unpriced"] == 0 and ledger["without_usage"] == 0
    expected = sum(a["cost_usd"] for a in ledger["answers"])
    assert ledger["cost_usd"] == pytest.approx(expected) and expected > 0
    assert two.rest(two.key_b, "/v1/sessions/support/usage").status_code == 404
