"""``ctxwise keys`` and ``ctxwise serve``: keys made, listed and revoked from the
command line; a real uvicorn process answering with them; bad options refused
with one line and exit 2 before anything listens."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests._cli import assert_usage_error, ok_json, run


def test_keys_create_list_revoke(tmp_path: Path) -> None:
    store = tmp_path / "svc.db"
    made = ok_json("keys", "create", "acme", "--store", store, "--label", "ci")
    assert made["tenant"] == "acme" and made["key"].startswith(f"cwk_{made['key_id']}_")
    plain = run("keys", "create", "beta", "--store", store)
    assert plain.exit_code == 0 and plain.stdout.strip().startswith("cwk_")
    assert "shown once" in plain.stderr
    listed = ok_json("keys", "list", "--store", store)["keys"]
    assert [k["tenant"] for k in listed] == ["acme", "beta"]
    assert all("key" not in k for k in listed)  # never a secret
    assert made["key"] not in run("keys", "list", "--store", store).stdout
    assert ok_json("keys", "list", "--store", store, "--tenant", "beta")["keys"][0]["label"] == ""
    revoked = run("keys", "revoke", made["key_id"], "--store", store)
    assert revoked.exit_code == 0 and "revoked" in revoked.stderr
    assert ok_json("keys", "list", "--store", store, "--tenant", "acme")["keys"][0]["revoked_at"]


def test_keys_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    store = tmp_path / "svc.db"
    assert_usage_error(run("keys", "create", "Not/A/Tenant", "--store", store), "tenant name")
    assert_usage_error(run("keys", "revoke", "0123456789ab", "--store", store), "no key")
    assert_usage_error(
        run("keys", "create", "acme", "--store", tmp_path / "missing" / "x.db"), "does not exist"
    )


def test_serve_refuses_bad_options_before_listening(tmp_path: Path) -> None:
    store = tmp_path / "svc.db"
    assert_usage_error(run("serve", "--store", store, "--workers", "2"), "PostgreSQL")
    assert_usage_error(run("serve", "--store", store, "--config", tmp_path / "no.toml"), "no.toml")
    assert_usage_error(run("serve", "--store", store, "--port", "70000"), "--port")
    assert_usage_error(run("serve", "--store", "mysql://x"), "scheme")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, key: str | None = None) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(url, headers={"x-ctxwise-key": key} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_serve_runs_uvicorn_with_the_keys_of_its_store(tmp_path: Path) -> None:
    store = tmp_path / "svc.db"
    key = ok_json("keys", "create", "acme", "--store", store)["key"]
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxwise", "serve", "--store", str(store), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):  # until it listens (bounded; no timing is asserted)
            try:
                status, body = _get(f"{base}/healthz")
                break
            except OSError:
                if proc.poll() is not None:
                    raise AssertionError(proc.stderr.read().decode()) from None  # type: ignore[union-attr]
                time.sleep(0.1)
        assert status == 200 and body["status"] == "ok"
        assert _get(f"{base}/v1/sessions")[0] == 401
        assert _get(f"{base}/v1/sessions", key) == (200, {"sessions": []})
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert (tmp_path / "svc.tenants" / "acme.db").is_file()  # the tenant's own partition
