"""``ctxwise mcp`` driven by the official SDK's own stdio client.

One server process serves the whole module: the fixture starts
``python -m ctxwise.cli mcp --config … --db … --root …`` through
``mcp.client.stdio``, runs every call below over one ``ClientSession`` (good
calls, then bad arguments, then a good call again to show the server still
answers) and the tests check what came back. The session the tools read (facts,
rules, a trace) was written beforehand by a real Engine on the same tenant's
partition (``default``), under the stored id ``default/case-1`` that the client's
``case-1`` maps to. The attack cases are in ``test_mcp_confinement.py``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="needs the mcp extra: pip install -e '.[mcp]'")

from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from ctxwise.config import load_config
from ctxwise.integrations.mcp_server import TOOLS, TRACE_URI, session_key
from ctxwise.messages import Message
from ctxwise.server.tenants import TenantEngine
from tests.conftest import TRANSCRIPTS

SUBAGENT = TRANSCRIPTS / "claude_code" / "subagent.jsonl"
SHORT = TRANSCRIPTS / "claude_code" / "short.jsonl"

CONFIG = """
[facts]
extractor = "prose"

[gates]
vocabulary = { refund = "issue_refund", "address check" = "verify_address" }

[[gates.rules]]
kind = "forbid"
name = "no-account-deletion"
text = "Never delete a customer account"
tools = ["delete_account"]
"""

USER = (
    "Hi, I'm Ann Lee. You can reach me at ann.lee@example.com. The parcel should "
    "arrive on 2024-03-02. Never call me before 9am."
)
RULE = "Do not refund order 4417 until the address check is done."


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _data(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, _text(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def _scenario(tmp: Path, config: Path) -> dict[str, Any]:
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "ctxwise.cli",
            "mcp",
            "--config",
            str(config),
            "--db",
            str(tmp / "ctxwise.db"),
            "--root",
            str(tmp),
            "--root",
            str(SHORT.parent),
        ],
        cwd=str(tmp),
    )
    out: dict[str, Any] = {}
    with (tmp / "server.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as client,
        ):
            out["init"] = await client.initialize()
            out["tools"] = await client.list_tools()
            out["templates"] = await client.list_resource_templates()

            async def call(key: str, name: str, args: dict[str, Any]) -> None:
                out[key] = await client.call_tool(name, args)

            await call(
                "remember1",
                "remember",
                {"text": "The staging database password rotates every Tuesday at noon."},
            )
            await call(
                "remember2",
                "remember",
                {"text": "Ann prefers e-mail over phone calls.", "session": "case-1"},
            )
            await call("recall", "recall", {"query": "when does the password rotate?"})
            await call(
                "recall_session",
                "recall",
                {"query": "phone or e-mail?", "k": 3, "session": "case-1"},
            )
            await call("recall_other", "recall", {"query": "password", "session": "case-2"})
            await call("facts", "facts", {"session": "case-1"})
            await call("rules", "rules", {"session": "case-1"})
            await call("rules_add", "rules", {"session": "case-1", "add": RULE})
            await call(
                "blocked",
                "check_tool",
                {"session": "case-1", "tool": "issue_refund", "input": {"order_id": "4417"}},
            )
            await call(
                "allowed",
                "check_tool",
                {"session": "case-1", "tool": "issue_refund", "input": {"order_id": "5120"}},
            )
            await call(
                "forbidden",
                "check_tool",
                {"session": "case-1", "tool": "delete_account", "input": {}},
            )
            await call(
                "select_file",
                "select_context",
                {
                    "transcript": str(SUBAGENT),
                    "budget": 3000,
                    "task": "Which files did the subagent read and what did it find?",
                },
            )
            await call(
                "select_session",
                "select_context",
                {"session": "case-1", "task": "How should we contact Ann?", "budget": 2000},
            )
            await call(
                "compact",
                "compact",
                {
                    "transcript": str(SHORT),
                    "budget": 4000,
                    "out": str(tmp / "compacted.jsonl"),
                    "include_transcript": True,
                },
            )
            await call("compact_dry", "compact", {"transcript": str(SHORT), "budget": 4000})
            out["trace"] = await client.read_resource(TRACE_URI.format(session_id="case-1"))

            # bad arguments: each a tool error, the server keeps answering
            await call("bad_type", "recall", {"query": "password", "k": "lots"})
            await call("bad_bool_k", "recall", {"query": "password", "k": True})
            await call("bad_missing", "facts", {})
            await call("bad_session", "facts", {"session": "no-such-session"})
            await call(
                "bad_check_session",
                "check_tool",
                {"session": "no-such-session", "tool": "x", "input": {}},
            )
            await call(
                "bad_input",
                "check_tool",
                {"session": "case-1", "tool": "issue_refund", "input": [1, 2]},
            )
            await call(
                "bad_file",
                "select_context",
                {"transcript": str(tmp / "missing.jsonl"), "task": "anything"},
            )
            await call(
                "bad_budget",
                "select_context",
                {"transcript": str(SUBAGENT), "task": "anything", "budget": 0},
            )
            await call(
                "bad_both",
                "select_context",
                {"transcript": str(SUBAGENT), "session": "case-1", "task": "x"},
            )
            await call("bad_compact_budget", "compact", {"transcript": str(SHORT), "budget": 0})
            await call("bad_compact_tiny", "compact", {"transcript": str(SHORT), "budget": 5})
            await call(
                "bad_compact_stdout",
                "compact",
                {"transcript": str(SHORT), "budget": 4000, "out": "-"},
            )
            await call(
                "bad_compact_same",
                "compact",
                {"transcript": str(SHORT), "budget": 4000, "out": str(SHORT)},
            )
            await call(
                "bad_facts_kind",
                "compact",
                {"transcript": str(SHORT), "budget": 4000, "facts": "everything"},
            )
            await call("bad_rule", "rules", {"session": "case-1", "add": "hello there"})
            await call("bad_empty_text", "remember", {"text": "   "})
            await call("bad_unknown_arg", "recall", {"query": "password", "kk": 3})
            await call("bad_tool", "no_such_tool", {})
            try:
                await client.read_resource(TRACE_URI.format(session_id="no-such-session"))
            except MCPError as exc:
                out["bad_trace"] = exc
            await call("after", "recall", {"query": "staging database password"})
    out["log"] = (tmp / "server.log").read_text()
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("mcp")
    config = tmp / "ctxwise.toml"
    config.write_text(CONFIG)
    cfg = load_config(config).model_copy(update={"store": f"sqlite:///{tmp / 'ctxwise.db'}"})
    with TenantEngine(cfg, "default") as owner:
        owner.engine.turn(session_key("default", "case-1"), [Message.text_message("user", USER)])
    results = asyncio.run(_scenario(tmp, config))
    results["tmp"] = tmp
    return results


def test_initialize_and_tools_list_with_schemas(served: dict[str, Any]) -> None:
    init = served["init"]
    assert init.server_info.name == "ctxwise"
    assert init.capabilities.tools is not None
    tools = {t.name: t for t in served["tools"].tools}
    assert list(tools) == list(TOOLS)
    for tool in tools.values():
        assert tool.description
        assert tool.input_schema["type"] == "object"
    assert tools["recall"].input_schema["required"] == ["query"]
    assert tools["recall"].input_schema["properties"]["k"]["type"] == "integer"
    assert tools["select_context"].input_schema["properties"]["budget"]["minimum"] == 1
    assert tools["compact"].input_schema["required"] == ["transcript", "budget"]
    assert tools["check_tool"].input_schema["properties"]["input"]["type"] == "object"
    assert sorted(tools["check_tool"].input_schema["required"]) == ["input", "session", "tool"]
    templates = [t.uri_template for t in served["templates"].resource_templates]
    assert templates == [TRACE_URI]


def test_remember_then_recall(served: dict[str, Any]) -> None:
    first = _data(served["remember1"])
    assert first["namespace"] == ["ctxwise", "notes", "default", "shared"] and first["id"]
    hits = _data(served["recall"])["items"]
    assert hits[0]["text"] == "The staging database password rotates every Tuesday at noon."
    assert hits[0]["id"] == first["id"]
    assert hits[0]["score"] > 0
    # the session scope holds only what was remembered for it
    assert _data(served["remember2"])["namespace"] == [
        "ctxwise",
        "notes",
        "default",
        "session",
        "case-1",
    ]
    scoped = _data(served["recall_session"])
    assert [h["text"] for h in scoped["items"]] == ["Ann prefers e-mail over phone calls."]
    assert _data(served["recall_other"])["items"] == []
    # and the server still answers after every bad call
    assert _data(served["after"])["items"][0]["id"] == first["id"]


def test_facts_and_rules(served: dict[str, Any]) -> None:
    facts = {f["key"]: f["value"] for f in _data(served["facts"])["facts"]}
    assert "ann.lee@example.com" in json.dumps(facts)
    assert "2024-03-02" in json.dumps(facts)
    rules = [r["text"] for r in _data(served["rules"])["rules"]]
    assert rules == ["Never call me before 9am."]
    added = _data(served["rules_add"])
    assert added["added"] == [RULE]
    assert [r["text"] for r in added["rules"]] == ["Never call me before 9am.", RULE]


def test_check_tool_blocked_and_allowed(served: dict[str, Any]) -> None:
    blocked = _data(served["blocked"])
    assert blocked["allowed"] is False
    assert blocked["tool"] == "issue_refund"
    assert blocked["rule_text"] == RULE
    assert "verify_address:4417 is not recorded" in blocked["reason"]
    allowed = _data(served["allowed"])
    assert allowed["allowed"] is True
    forbidden = _data(served["forbidden"])
    assert forbidden["allowed"] is False
    assert forbidden["rule"] == "no-account-deletion"
    assert forbidden["reason"] == "Never delete a customer account"


def test_select_context(served: dict[str, Any]) -> None:
    picked = _data(served["select_file"])
    report = picked["report"]
    assert report["budget"] == 3000
    assert 0 < report["tokens"] <= 3000
    assert picked["prompt"].startswith("Which files did the subagent read")
    session = _data(served["select_session"])
    assert "ann.lee@example.com" in session["prompt"]


def test_compact_writes_only_when_asked(served: dict[str, Any]) -> None:
    tmp: Path = served["tmp"]
    written = _data(served["compact"])
    assert written["tokens_after"] <= 4000
    assert written["out"] == str(tmp / "compacted.jsonl")
    assert (tmp / "compacted.jsonl").read_text() == written["transcript"]
    dry = _data(served["compact_dry"])
    assert dry["out"] is None and "transcript" not in dry
    assert dry["tokens_after"] == written["tokens_after"]
    assert sorted(p.name for p in tmp.glob("*.jsonl")) == ["compacted.jsonl"]


def test_trace_resource(served: dict[str, Any]) -> None:
    contents = served["trace"].contents
    assert len(contents) == 1
    assert contents[0].mime_type == "application/json"
    trace = json.loads(contents[0].text)
    assert trace["turn"] == 1
    assert trace["session_id"] == "default/case-1"  # the stored id
    assert trace["tokens"]["total"] <= trace["tokens"]["available"]
    assert "no-such-session" in str(served["bad_trace"])


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("bad_type", "k"),
        ("bad_bool_k", "k"),
        ("bad_missing", "session"),
        ("bad_session", "no-such-session"),
        ("bad_check_session", "no-such-session"),
        ("bad_input", "input"),
        ("bad_file", "missing.jsonl"),
        ("bad_budget", "budget"),
        ("bad_both", "exactly one of"),
        ("bad_compact_budget", "budget"),
        ("bad_compact_tiny", "budget 5 tokens is too small"),
        ("bad_compact_stdout", "standard output"),
        ("bad_compact_same", "short.jsonl: exists: only a new file is written"),
        ("bad_facts_kind", "'prose', 'support' or 'none'"),
        ("bad_rule", "not a standing rule"),
        ("bad_empty_text", "nothing to remember"),
        ("bad_unknown_arg", "unknown argument(s) 'kk'; recall takes query, k, session"),
        ("bad_tool", "no_such_tool"),
    ],
)
def test_bad_arguments_are_tool_errors(served: dict[str, Any], key: str, says: str) -> None:
    result = served[key]
    assert result.is_error, _text(result)
    assert says in _text(result)


def test_bad_calls_crash_nothing(served: dict[str, Any]) -> None:
    # every failure was anticipated: logged at INFO (a crash in a tool is logged at
    # ERROR with its traceback)
    log = served["log"]
    assert "INFO" in log and "rejected arguments" in " ".join(log.split())
    assert "ERROR" not in log and "Traceback" not in log
    rules = [r["text"] for r in _data(served["rules_add"])["rules"]]
    assert "hello there" not in rules


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--config", "missing.toml"], "missing.toml: no such file"),
        (["--db", "mysql://host/db"], "mysql"),
    ],
)
def test_a_bad_setup_fails_before_serving(tmp_path: Path, args: list[str], says: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", "mcp", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert run.returncode == 2
    assert run.stdout == ""
    assert says in run.stderr and len(run.stderr.strip().splitlines()) == 1


UNPARSEABLE = {
    "lone surrogate": b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "\\ud800"}}',
    "deep nesting": b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": '
    + b"[" * 100_000
    + b"]" * 100_000
    + b"}}",
    "batch array": b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]',
    "cut short": b'{"jsonrpc": "2.0", "id": 1, "method": "pi',
}


def test_an_unparseable_line_is_not_answered_but_the_next_request_is(tmp_path: Path) -> None:
    # the mcp SDK's stdio transport drops a line that does not validate as one
    # JSON-RPC message, without the -32700 / -32600 reply JSON-RPC asks for (mcp
    # 2.3): a client waiting on that request's id needs its own timeout (docs:
    # integrations/mcp.md, "Errors"). The server itself stays up and answers the
    # next request. An error reply, should the SDK send one, is accepted.
    from tests._children import child_line

    child = subprocess.Popen(
        [sys.executable, "-m", "ctxwise.cli", "mcp", "--store", "memory"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert child.stdin is not None and child.stdout is not None

    def send(line: bytes) -> None:
        assert child.stdin is not None
        child.stdin.write(line + b"\n")
        child.stdin.flush()

    def reply() -> dict[str, Any]:
        text = child_line(child)  # type: ignore[arg-type]
        assert text, "the server closed its output"
        data: dict[str, Any] = json.loads(text)
        return data

    try:
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        }
        send(json.dumps(init).encode())
        assert reply()["id"] == 0
        send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        for n, (name, line) in enumerate(UNPARSEABLE.items(), start=100):
            send(line)
            send(json.dumps({"jsonrpc": "2.0", "id": n, "method": "ping"}).encode())
            got = reply()
            while got.get("id") != n:  # only an error reply may come before the ping's
                assert "error" in got, (name, got)
                got = reply()
            assert got == {"jsonrpc": "2.0", "id": n, "result": {}}, name
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()
        child.stdin.close()
        child.stdout.close()
