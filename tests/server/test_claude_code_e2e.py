"""Claude Code through ``ctxwise serve`` (issue 31, item 7): the Claude Agent SDK's
bundled CLI, with ``ANTHROPIC_BASE_URL`` pointing at a real ``ctxwise serve`` process,
which forwards to a loopback fake of the Messages API (:mod:`ctxwise.testing.upstream`).

The fake drives a session long enough for ctxwise to clear and then compact it: the
model reads one log file after another (each read a large tool result, each reply a
long text), and the fake checks every request it receives: every tool call answered
and every result answering a call, the rule stated at the start present, the request
within the budget as ctxwise's counter for the model counts it, and no ctxwise key
forwarded while the provider key is.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

claude_agent_sdk = pytest.importorskip(
    "claude_agent_sdk", reason="needs the claude-agent-sdk extra"
)

from ctxwise.formats.anthropic import decode_request  # noqa: E402
from ctxwise.pairing import problems  # noqa: E402
from ctxwise.server.keys import KeyStore  # noqa: E402
from ctxwise.testing.upstream import FakeUpstream, Reply  # noqa: E402
from ctxwise.tokens import counter_for_model  # noqa: E402

CLI = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
MODEL = "claude-sonnet-4-5"
BUDGET = 40_000
LOGS = 14
RULE = "Never delete anything in the logs folder."
PROVIDER_KEY = "sk-ant-test-not-a-real-key"


def _log_text(i: int) -> str:
    return "".join(
        f"{i}:{j} request served in {j % 97} ms from host web-{j % 7}\n" for j in range(220)
    )


def _read_next(work: Path) -> Any:
    def respond(body: Mapping[str, Any]) -> Reply:
        last = body["messages"][-1]
        content = last.get("content") if isinstance(last.get("content"), list) else []
        ids = [b["tool_use_id"] for b in content if b.get("type") == "tool_result"]
        n = int(ids[-1].rsplit("_", 1)[1]) + 1 if ids else 0
        if n >= LOGS:
            return [{"type": "text", "text": "All logs read: web-3 is the slowest host."}]
        thought = "I compare the latency lines of each host with the ones before. " * 40
        read = {"file_path": str(work / f"log{n}.txt")}
        return [
            {"type": "text", "text": f"Reading log {n}. {thought}"},
            {"type": "tool_use", "id": f"toolu_read_{n}", "name": "Read", "input": read},
        ]

    return respond


def _checks(body: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    transcript = decode_request(dict(body))
    found += [f"pairing: {p}" for p in problems(transcript.messages)]
    if RULE not in json.dumps(body):
        found.append("the stated rule is missing")
    counter = counter_for_model(MODEL)
    tokens = counter.count_messages(transcript.messages) + sum(
        counter.count(json.dumps(t, ensure_ascii=False)) for t in body.get("tools", [])
    )
    if tokens > BUDGET:
        found.append(f"{tokens} tokens over the budget of {BUDGET}")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _serve(store: str, upstream: str, config: Path, log: Path) -> Iterator[str]:
    port = _free_port()
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxwise", "serve", "--store", store, "--port", str(port),
             "--anthropic-upstream", upstream, "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):  # until it listens (bounded; no time is asserted)
                try:
                    if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    if proc.poll() is not None:
                        raise AssertionError(log.read_text()) from None
                    time.sleep(0.1)
            yield base
        finally:
            proc.terminate()
            proc.wait(timeout=60)


def _cli_env(base: str, key: str, home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {
        "ANTHROPIC_BASE_URL": base,
        "ANTHROPIC_API_KEY": PROVIDER_KEY,
        # how a Claude Code user names their ctxwise key and session (docs/server.md)
        "ANTHROPIC_CUSTOM_HEADERS": f"x-ctxwise-key: {key}\nx-ctxwise-session: cc-e2e",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "NO_PROXY": "127.0.0.1,localhost",
        "HTTP_PROXY": "",
        "HTTPS_PROXY": "",
    }


@pytest.mark.skipif(not CLI.is_file(), reason=f"no bundled Claude Code CLI at {CLI}")
def test_claude_code_through_ctxwise_serve_is_cleared_and_compacted(tmp_path: Path) -> None:
    work = tmp_path / "logs"
    work.mkdir()
    for i in range(LOGS):
        (work / f"log{i}.txt").write_text(_log_text(i))
    store = f"sqlite:///{tmp_path}/svc.db"
    with KeyStore(store) as keys:
        _, key = keys.create("team")
    config = tmp_path / "ctxwise.toml"
    config.write_text(
        f'model = "{MODEL}"\nbudget = {BUDGET}\n[compaction]\nsummary_tokens = 1500\n'
    )

    async def prompt() -> AsyncIterator[dict[str, Any]]:
        text = f"{RULE} Read every log in {work}, one by one, and tell me the slowest host."
        yield {
            "type": "user",
            "message": {"role": "user", "content": text},
            "parent_tool_use_id": None,
            "session_id": "default",
        }

    with (
        FakeUpstream(_read_next(work), check=_checks) as fake,
        _serve(store, fake.url, config, tmp_path / "serve.log") as base,
    ):
        options = claude_agent_sdk.ClaudeAgentOptions(
            env=_cli_env(base, key, tmp_path / "home"),
            cwd=str(work),
            model=MODEL,
            allowed_tools=["Read"],
        )

        async def run() -> list[Any]:
            return [m async for m in claude_agent_sdk.query(prompt=prompt(), options=options)]

        messages = asyncio.run(run())
        traces = httpx.get(
            f"{base}/v1/sessions/cc-e2e/traces", headers={"x-ctxwise-key": key}, timeout=30
        ).json()["traces"]

    result = messages[-1]
    assert isinstance(result, claude_agent_sdk.ResultMessage) and not result.is_error
    assert "web-3" in str(result.result)
    reads = [p for p in fake.paths if p == "/v1/messages"]
    assert len(reads) == LOGS + 1  # every read, then the answer: nothing failed open
    assert fake.problems == []  # pairs whole, the rule present, within the budget
    for headers in fake.headers:
        assert "x-ctxwise-key" not in headers and "x-ctxwise-session" not in headers
        assert PROVIDER_KEY in headers.get("x-api-key", "") + headers.get("authorization", "")
    assert any(t["cleared"] for t in traces), "ctxwise never cleared a tool result"
    assert any(t["compacted"] for t in traces), "ctxwise never compacted the session"
    assert all(t["tokens"]["total"] <= BUDGET for t in traces)
    # what Claude Code sent grew with every read; what went upstream did not
    sent = [len(json.dumps(b["messages"])) for b in fake.requests]
    assert sent[-1] < max(sent)
    log = (tmp_path / "serve.log").read_text()
    assert PROVIDER_KEY not in log and key not in log  # keys are never logged
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*.db*") if p.is_file())
    assert PROVIDER_KEY.encode() not in stored and key.encode() not in stored  # nor stored
