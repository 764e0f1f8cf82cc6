"""The web inspector over HTTP (issue 32, item 3): behind ``ctxwise serve`` (the login
cookie, one tenant per key, 404 for another tenant's sessions) and over a local store
(``ctxwise inspect-ui``: read-only, a newer store refused); its pages, its bad input,
and the tokens by part adding up to the trace's total on every turn of a replayed
Claude Code session."""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient as StarletteClient

from ctxwise import EngineConfig
from ctxwise.cli._store import read_only_memory
from ctxwise.formats import read_transcript
from ctxwise.ledger import LedgerReader
from ctxwise.replay import replay
from ctxwise.server.inspect import COOKIE, StoreSource, local_app
from ctxwise.server.inspect._views import PARTS, parts
from ctxwise.sessions import open_session_store
from tests._cli import run
from tests.server.conftest import Service

SECRET_A = "Order 4411 for Ada Lovelace ships to 12 Elm Street."
SECRET_B = "Invoice 8812 for Grace Hopper is overdue."


# ------------------------------------------------------------------ the service


class Svc:
    """The shared service (SQLite and PostgreSQL) with one session of the same name
    under each tenant, and one more under B."""

    def __init__(self, service: Service) -> None:
        self.client = service.client
        self.keys = service.keys
        self.tenant_a = service.tenants[0]
        self.key_a = service.key_a
        self.key_b = service.key_b

    def login(self, key: str) -> Any:
        return self.client.post("/inspect/login", data={"key": key}, follow_redirects=False)


@pytest.fixture
def svc(service: Service) -> Svc:
    client = service.client
    for key, secret in ((service.key_a, SECRET_A), (service.key_b, SECRET_B)):
        for words in (secret, "and one more thing"):
            r = client.post(
                "/v1/sessions/shared-name/turns",
                json={"messages": [words]},
                headers={"x-ctxwise-key": key},
            )
            assert r.status_code == 200, r.text
    r = client.post(
        "/v1/sessions/only-b/turns",
        json={"messages": ["b alone"]},
        headers={"x-ctxwise-key": service.key_b},
    )
    assert r.status_code == 200, r.text
    return Svc(service)


def test_pages_need_a_login(svc: Svc) -> None:
    for path in ("/inspect/", "/inspect/session?id=shared-name", "/inspect/turn?session=x"):
        r = svc.client.get(path, follow_redirects=False)
        assert r.status_code == 303
        assert r.headers["location"] == "/inspect/login"
    form = svc.client.get("/inspect/login")
    assert form.status_code == 200
    assert 'name="key"' in form.text and 'type="password"' in form.text


def test_login_sets_a_strict_httponly_cookie_scoped_to_the_inspector(svc: Svc) -> None:
    r = svc.login(svc.key_a)
    assert r.status_code == 303
    assert r.headers["location"] == "/inspect/"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Path=/inspect" in cookie
    assert "Secure" not in cookie  # plain http here; https below
    page = svc.client.get("/inspect/")
    assert page.status_code == 200
    assert "shared-name" in page.text and "only-b" not in page.text
    assert svc.key_a not in page.text


def test_the_cookie_is_secure_on_https(svc: Svc) -> None:
    # the same app (not entered again: its lifespan belongs to the service's client)
    client = StarletteClient(svc.client.app, base_url="https://testserver")
    r = client.post("/inspect/login", data={"key": svc.key_a}, follow_redirects=False)
    assert r.status_code == 303
    assert "Secure" in r.headers["set-cookie"]


def test_a_wrong_or_revoked_key_is_refused_as_the_rest_api_refuses_it(
    svc: Svc, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    rest = svc.client.get("/v1/sessions", headers={"x-ctxwise-key": "cwk_wrong"})
    assert rest.status_code == 401
    for bad in ("cwk_wrong", "", "not a key at all"):
        r = svc.login(bad)
        assert r.status_code == 401
        assert "set-cookie" not in r.headers
        assert 'id="error-message"' in r.text
    # a key revoked after login stops working on the next page
    assert svc.login(svc.key_a).status_code == 303
    assert svc.client.get("/inspect/").status_code == 200
    kid = next(k.key_id for k in svc.keys.list(svc.tenant_a))
    svc.keys.revoke(kid)
    r = svc.client.get("/inspect/", follow_redirects=False)
    assert r.status_code == 401
    assert "unknown or revoked" in r.text
    assert COOKIE in r.headers.get("set-cookie", "")  # deleted
    assert svc.key_a not in caplog.text and svc.key_b not in caplog.text


def test_the_cookie_does_not_open_the_rest_api(svc: Svc) -> None:
    assert svc.login(svc.key_a).status_code == 303
    # the cookie is scoped to /inspect; sent by hand, the REST API still ignores it
    r = svc.client.get("/v1/sessions", headers={"cookie": f"{COOKIE}={svc.key_a}"})
    assert r.status_code == 401


def test_logout_forgets_the_key(svc: Svc) -> None:
    assert svc.login(svc.key_a).status_code == 303
    assert 'href="/inspect/logout"' in svc.client.get("/inspect/").text
    r = svc.client.get("/inspect/logout", follow_redirects=False)
    assert r.status_code == 303
    assert f'{COOKIE}=""' in r.headers["set-cookie"] or "Max-Age=0" in r.headers["set-cookie"]
    svc.client.cookies.clear()
    assert svc.client.get("/inspect/", follow_redirects=False).status_code == 303


def test_a_tenant_sees_only_its_own_sessions_and_turns(svc: Svc) -> None:
    assert svc.login(svc.key_a).status_code == 303
    mine = svc.client.get("/inspect/turn?session=shared-name&turn=1")
    assert mine.status_code == 200
    assert "Order 4411" in mine.text and "Invoice 8812" not in mine.text
    original = svc.client.get("/inspect/original?session=shared-name&pointer=log:0")
    assert original.status_code == 200 and "Order 4411" in original.text
    # B's session, its turns, its diff and its originals: 404, as if none existed
    for path in (
        "/inspect/session?id=only-b",
        "/inspect/turn?session=only-b&turn=1",
        "/inspect/diff?session=only-b&turn=1",
        "/inspect/original?session=only-b&pointer=log:0",
        "/inspect/session?id=no-such-session",
    ):
        r = svc.client.get(path)
        assert r.status_code == 404, path
        assert "b alone" not in r.text
    # the same name under B's key is B's session
    svc.client.cookies.clear()
    assert svc.login(svc.key_b).status_code == 303
    theirs = svc.client.get("/inspect/original?session=shared-name&pointer=log:0")
    assert "Invoice 8812" in theirs.text and "Order 4411" not in theirs.text


def test_a_session_without_turns_has_no_turn_page(svc: Svc) -> None:
    r = svc.client.post(
        "/v1/sessions/records-only/records",
        json={"messages": ["kept, never turned"]},
        headers={"x-ctxwise-key": svc.key_a},
    )
    assert r.status_code == 200, r.text
    assert svc.login(svc.key_a).status_code == 303
    assert svc.client.get("/inspect/session?id=records-only").status_code == 200
    for path in ("/inspect/turn?session=records-only", "/inspect/diff?session=records-only"):
        r = svc.client.get(path)
        assert r.status_code == 404 and "it has no turns yet" in r.text


def test_the_rest_of_the_service_is_unchanged(svc: Svc) -> None:
    assert svc.client.get("/healthz").status_code == 200
    r = svc.client.get("/v1/sessions", headers={"x-ctxwise-key": svc.key_a})
    assert r.json() == {"sessions": ["shared-name"]}


# ------------------------------------------------------------------ a local store


@pytest.fixture(scope="module")
def replayed(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Claude Code session replayed into a SQLite store at a budget that clears
    and compacts."""
    path = tmp_path_factory.mktemp("inspect") / "store.db"
    t = read_transcript(data_dir / "transcripts" / "claude_code" / "subagent.jsonl", "claude-code")
    config = EngineConfig(store=f"sqlite:///{path}", costs={"gate": False})
    replay(t, budget=20_000, config=config, session_id="cc", repair=True, cost=True)
    return path


@pytest.fixture
def local(replayed: Path) -> Iterator[StarletteClient]:
    url = f"sqlite:///{replayed}"
    with StarletteClient(
        local_app(StoreSource(open_session_store(url), read_only_memory(url, EngineConfig())[0]))
    ) as c:
        yield c


def _reader(path: Path) -> LedgerReader:
    sessions = open_session_store(f"sqlite:///{path}")
    try:
        return LedgerReader(sessions, "cc")
    finally:
        sessions.close()


def test_the_parts_add_up_to_the_trace_total_on_every_turn(replayed: Path) -> None:
    reader = _reader(replayed)
    assert reader.turns > 5
    seen = set()
    for turn in range(1, reader.turns + 1):
        ledger = reader.ledger(turn)
        got, detail = parts(ledger, reader)
        assert [p.key for p in got] == [k for k, _ in PARTS]
        assert all(p.tokens >= 0 for p in got)
        assert sum(p.tokens for p in got) == ledger.trace.tokens.total
        assert detail["history_trace"] == ledger.trace.tokens.history
        seen |= {p.key for p in got if p.tokens}
    # the session has a summary, recalled memory, tool results and rules
    assert {"summary", "memory", "results", "history", "rules"} <= seen


def test_local_pages_render_with_the_trace_numbers(local: StarletteClient, replayed: Path) -> None:
    reader = _reader(replayed)
    assert local.get("/", follow_redirects=False).status_code == 307
    home = local.get("/inspect/")
    assert home.status_code == 200 and "cc" in home.text
    assert "log out" not in home.text  # no keys here
    timeline = local.get("/inspect/session?id=cc")
    assert timeline.status_code == 200
    assert timeline.text.count('class="mark-compact"') == sum(
        t.compacted is not None for t in reader.traces
    )
    assert timeline.text.count('class="mark-clear"') == sum(
        t.cleared is not None for t in reader.traces
    )
    for t in reader.traces:
        assert f'data-turn="{t.turn}" data-sent="{t.tokens.total}"' in timeline.text
    last = reader.traces[-1]
    page = local.get(f"/inspect/turn?session=cc&turn={last.turn}")
    assert page.status_code == 200
    assert f'data-total="{last.tokens.total}"' in page.text
    drawn = [
        int(n)
        for n in re.findall(
            r'<rect class="part [^"]*" data-part="\w+" '
            r'data-tokens="(\d+)"',
            page.text,
        )
    ]
    assert sum(drawn) == last.tokens.total
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    # every ledger entry is a row, each message once
    assert page.text.count('<tr class="entry') == len(reader.ledger(last.turn).entries)
    # the latest turn by default
    assert f'data-total="{last.tokens.total}"' in local.get("/inspect/turn?session=cc").text


def test_the_diff_names_what_changed(local: StarletteClient, replayed: Path) -> None:
    reader = _reader(replayed)
    compacted = next(t.turn for t in reader.traces if t.compacted is not None)
    diff = reader.diff(compacted - 1, compacted)
    page = local.get(f"/inspect/diff?session=cc&turn={compacted}")
    assert page.status_code == 200
    assert f"{len(diff.left)} message(s) left it" in page.text
    for p in diff.left:
        assert f'data-position="{p}"' in page.text
    any_two = local.get(f"/inspect/diff?session=cc&turn={compacted}&before=1")
    assert any_two.status_code == 200 and "turn 1 → turn" in any_two.text
    from_nothing = local.get("/inspect/diff?session=cc&turn=1")
    assert "nothing → turn 1" in from_nothing.text


def test_bad_input_pages(local: StarletteClient) -> None:
    cases = {
        "/inspect/session?id=nope": 404,
        "/inspect/turn?session=cc&turn=999": 404,
        "/inspect/turn?session=cc&turn=0": 404,
        "/inspect/turn?session=cc&turn=two": 400,
        "/inspect/diff?session=cc&turn=2&before=999": 404,
        "/inspect/original?session=cc&pointer=log": 400,
        "/inspect/original?session=cc&pointer=nope:1": 400,
        "/inspect/original?session=cc&pointer=log:x": 400,
        "/inspect/original?session=cc": 400,
        "/inspect/session": 400,
        "/inspect/no/such/page": 404,
    }
    for path, status in cases.items():
        r = local.get(path)
        assert r.status_code == status, (path, r.text)
        assert r.headers["content-type"].startswith("text/html")
        assert 'id="error-message"' in r.text


def test_a_pointer_to_a_deleted_original_says_gone(local: StarletteClient) -> None:
    r = local.get("/inspect/original?session=cc&pointer=log:100000")
    assert r.status_code == 200
    assert 'id="gone"' in r.text and "the log holds" in r.text
    r = local.get("/inspect/original?session=cc&pointer=memory:no-such-item")
    assert r.status_code == 200 and "deleted from the memory store" in r.text
    r = local.get("/inspect/original?session=cc&pointer=summary:1")
    assert r.status_code == 200 and "did not compact" in r.text


def test_html_is_escaped(local: StarletteClient) -> None:
    r = local.get("/inspect/session?id=<script>alert(1)</script>")
    assert r.status_code == 404
    assert "<script>alert(1)</script>" not in r.text
    assert "&lt;script&gt;" in r.text


# ------------------------------------------------------------------ inspect-ui


def test_inspect_ui_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    missing = run("inspect-ui", "--store", tmp_path / "none.db")
    assert missing.exit_code == 2
    assert "does not exist" in missing.stderr
    assert not (tmp_path / "none.db").exists()
    plain = tmp_path / "plain.db"
    sqlite3.connect(plain).close()
    refused = run("inspect-ui", "--store", plain)
    assert refused.exit_code == 2 and "not a ctxwise store" in refused.stderr


def test_inspect_ui_refuses_a_newer_store_with_its_version(replayed: Path, tmp_path: Path) -> None:
    newer = tmp_path / "newer.db"
    with sqlite3.connect(replayed) as src, sqlite3.connect(newer) as dst:
        src.backup(dst)
    with sqlite3.connect(newer) as conn:
        (count,) = conn.execute("SELECT COUNT(*) FROM ctxwise_session_migrations").fetchone()
        conn.execute(
            "INSERT INTO ctxwise_session_migrations (name, position) VALUES (?, ?)",
            ("from_the_future", count + 1),
        )
    before = newer.read_bytes()
    r = run("inspect-ui", "--store", newer)
    assert r.exit_code == 2
    assert str(count + 1) in r.stderr and "newer" in r.stderr
    assert newer.read_bytes() == before


def test_inspect_ui_serves_the_store_read_only(
    replayed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    copy = tmp_path / "copy.db"
    with sqlite3.connect(replayed) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    served: dict[str, Any] = {}

    def fake_run(app: Any, **options: Any) -> None:
        served.update(options)
        with StarletteClient(app) as client:
            served["page"] = client.get("/inspect/session?id=cc").status_code

    monkeypatch.setattr(uvicorn, "run", fake_run)
    before = copy.read_bytes()
    r = run("inspect-ui", "--store", copy, "--port", "9999")
    assert r.exit_code == 0, r.stderr
    assert served == {"host": "127.0.0.1", "port": 9999, "log_level": "info", "page": 200}
    assert "read-only" in r.stderr
    assert copy.read_bytes() == before
