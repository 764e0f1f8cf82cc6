"""The REST API: every endpoint behind a key, every key held to its tenant's partition,
one error shape, 413 over the body limit (issue 31, items 3 and 4)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.conftest import Service

SESSION_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/sessions/s1", None),
    ("GET", "/v1/sessions/s1/messages", None),
    ("GET", "/v1/sessions/s1/traces", None),
    ("GET", "/v1/sessions/s1/traces/1", None),
    ("GET", "/v1/sessions/s1/usage", None),
    ("GET", "/v1/sessions/s1/ledger", None),
    ("GET", "/v1/sessions/s1/ledger?turn=1", None),
    ("GET", "/v1/sessions/s1/original?pointer=log:0", None),
    ("GET", "/v1/sessions/s1/find?text=4411", None),
    ("GET", "/v1/sessions/s1/facts", None),
    ("GET", "/v1/sessions/s1/rules", None),
    ("POST", "/v1/sessions/s1/rules", {"text": "Never issue refunds to anyone"}),
    ("POST", "/v1/sessions/s1/handoff", {"task": "find the order number", "budget": 500}),
    ("POST", "/v1/sessions/s1/tools/check", {"tool": "refund", "input": {"order": "4411"}}),
]
WRITE_ROUTES: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/v1/sessions/s1/turns", {"messages": ["hello"]}),
    ("POST", "/v1/sessions/s1/records", {"messages": ["hello"]}),
]
OTHER_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/sessions", None),
    ("POST", "/v1/memory/remember", {"text": "a note"}),
    ("POST", "/v1/memory/recall", {"query": "note"}),
]
ALL_ROUTES: list[tuple[str, str, Any]] = [*SESSION_ROUTES, *WRITE_ROUTES, *OTHER_ROUTES]

SECRET = "Order 4411 for Ada Lovelace, card ending 9921, ships to 12 Elm Street."


def _call(svc: Service, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
    return svc.client.request(method, path, json=body, headers=headers)


def _seed_a(svc: Service) -> None:
    r = _call(svc, "POST", "/v1/sessions/s1/turns", {"messages": [SECRET]}, svc.a())
    assert r.status_code == 200, r.text
    r = _call(
        svc, "POST", "/v1/sessions/s1/rules", {"text": "Always confirm the address."}, svc.a()
    )
    assert r.status_code == 200, r.text
    note = {"text": f"shared note: {SECRET}"}
    assert _call(svc, "POST", "/v1/memory/remember", note, svc.a()).status_code == 200
    note = {"text": f"session note: {SECRET}", "session": "s1"}
    assert _call(svc, "POST", "/v1/memory/remember", note, svc.a()).status_code == 200


def _a_state(svc: Service) -> tuple[Any, ...]:
    info = _call(svc, "GET", "/v1/sessions/s1", None, svc.a()).json()
    rules = _call(svc, "GET", "/v1/sessions/s1/rules", None, svc.a()).json()
    traces = _call(svc, "GET", "/v1/sessions/s1/traces", None, svc.a()).json()
    return info["version"], info["messages"], rules["rules"], len(traces["traces"])


@pytest.mark.parametrize(("method", "path", "body"), ALL_ROUTES)
def test_no_key_is_401_in_the_rest_shape(
    service: Service, method: str, path: str, body: Any
) -> None:
    r = _call(service, method, path, body, {})
    assert r.status_code == 401
    assert r.json()["error"]["type"] == "unauthorized"
    r = _call(service, method, path, body, {"x-ctxwise-key": "cwk_000000000000_" + "x" * 43})
    assert r.status_code == 401


@pytest.mark.parametrize(("method", "path", "body"), SESSION_ROUTES)
def test_another_tenants_key_cannot_read_or_change_a_session(
    service: Service, method: str, path: str, body: Any
) -> None:
    _seed_a(service)
    before = _a_state(service)
    r = _call(service, method, path, body, service.b())
    assert r.status_code == 404, r.text  # B has no session s1: A's is not there to find
    assert r.json()["error"]["type"] == "not_found"
    assert SECRET not in r.text and "4411" not in r.text
    assert _a_state(service) == before


@pytest.mark.parametrize(("method", "path", "body"), WRITE_ROUTES)
def test_another_tenants_write_makes_its_own_session(
    service: Service, method: str, path: str, body: Any
) -> None:
    _seed_a(service)
    before = _a_state(service)
    r = _call(service, method, path, body, service.b())
    assert r.status_code == 200, r.text
    assert SECRET not in r.text
    assert _a_state(service) == before
    b_messages = _call(service, "GET", "/v1/sessions/s1/messages", None, service.b()).json()
    assert SECRET not in str(b_messages)


def test_another_tenant_lists_and_recalls_nothing_of_a(service: Service) -> None:
    _seed_a(service)
    assert _call(service, "GET", "/v1/sessions", None, service.a()).json() == {"sessions": ["s1"]}
    assert _call(service, "GET", "/v1/sessions", None, service.b()).json() == {"sessions": []}
    for scope in (None, "s1"):
        body = {"query": "Lovelace order 4411", "session": scope}
        a = _call(service, "POST", "/v1/memory/recall", body, service.a()).json()
        b = _call(service, "POST", "/v1/memory/recall", body, service.b()).json()
        assert a["items"] and all("4411" in i["text"] for i in a["items"])
        assert b == {"items": []}


def test_a_revoked_key_is_refused_at_once(service: Service) -> None:
    _seed_a(service)
    info = service.keys.list(service.tenants[0])[0]
    service.keys.revoke(info.key_id)
    r = _call(service, "GET", "/v1/sessions", None, service.a())
    assert r.status_code == 401
    assert _call(service, "GET", "/v1/sessions", None, service.b()).status_code == 200


def test_a_bearer_key_works_on_the_rest_api(service: Service) -> None:
    r = service.client.get("/v1/sessions", headers={"authorization": f"Bearer {service.key_a}"})
    assert r.status_code == 200


def test_a_body_over_the_limit_is_413_and_stores_nothing(service: Service) -> None:
    big = {"messages": ["x" * (70 * 1024)]}
    r = _call(service, "POST", "/v1/sessions/s1/turns", big, service.a())
    assert r.status_code == 413
    assert r.json()["error"]["type"] == "request_too_large"
    assert _call(service, "GET", "/v1/sessions", None, service.a()).json() == {"sessions": []}


def test_bad_bodies_are_400_in_one_shape_and_store_nothing(service: Service) -> None:
    for body in ({"messages": 5}, {"messages": [], "extra": 1}, {"nothing": True}):
        r = _call(service, "POST", "/v1/sessions/s1/turns", body, service.a())
        assert r.status_code == 400, r.text
        assert set(r.json()) == {"error"} and r.json()["error"]["type"] == "invalid_request"
    r = service.client.post(
        "/v1/sessions/s1/turns",
        content=b"{not json",
        headers={**service.a(), "content-type": "application/json"},
    )
    assert r.status_code == 400
    bad = {"messages": [{"role": "wizard", "content": "hi"}]}
    assert _call(service, "POST", "/v1/sessions/s1/turns", bad, service.a()).status_code == 400
    assert _call(service, "GET", "/v1/sessions", None, service.a()).json() == {"sessions": []}


def test_a_turn_answers_with_the_request_and_its_trace(service: Service) -> None:
    r = _call(service, "POST", "/v1/sessions/s1/turns", {"messages": [SECRET]}, service.a())
    out = r.json()
    assert out["version"] == 1
    assert out["request"]["messages"][-1]["content"][0]["text"] == SECRET
    assert out["trace"]["turn"] == 1
    stale = {"messages": ["again"], "expected_version": 0}
    r = _call(service, "POST", "/v1/sessions/s1/turns", stale, service.a())
    assert r.status_code == 409 and r.json()["error"]["type"] == "conflict"


def test_health_readiness_and_openapi_need_no_key(service: Service) -> None:
    assert service.client.get("/healthz").json()["status"] == "ok"
    assert service.client.get("/readyz").json() == {"status": "ready"}
    spec = service.client.get("/openapi.json").json()
    paths = set(spec["paths"])
    assert {"/v1/sessions", "/v1/sessions/{session_id}/turns", "/v1/memory/recall"} <= paths
    assert all(p.startswith(("/v1/", "/healthz", "/readyz")) for p in paths)


def test_the_ledger_routes_read_a_turn_open_its_originals_and_find_text(
    service: Service,
) -> None:
    _seed_a(service)
    r = _call(service, "GET", "/v1/sessions/s1/ledger", None, service.a())
    assert r.status_code == 200, r.text
    ledger = r.json()
    assert ledger["turn"] == ledger["turns"] == 1
    (message,) = [e for e in ledger["entries"] if e["kind"] == "message"]
    assert message["fate"] == "sent" and message["pointer"] == "log:0"
    r = _call(service, "GET", "/v1/sessions/s1/original?pointer=log:0", None, service.a())
    assert SECRET in r.json()["text"] and r.json()["gone"] is None
    r = _call(service, "GET", "/v1/sessions/s1/original?pointer=log:9", None, service.a())
    assert r.status_code == 200 and r.json()["text"] is None and r.json()["gone"]
    r = _call(service, "GET", "/v1/sessions/s1/find?text=ada%20LOVELACE", None, service.a())
    hits = r.json()["hits"]
    assert [h["position"] for h in hits] == [0] and "Lovelace" in hits[0]["snippet"]
    r = _call(service, "GET", "/v1/sessions/s1/ledger?turn=7", None, service.a())
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found"
    r = _call(service, "GET", "/v1/sessions/s1/original?pointer=disk:/etc", None, service.a())
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request"
