"""The Claude Agent SDK integration: the callbacks called with payloads of the SDK's
documented shapes, then the SDK's bundled Claude Code CLI run end to end against a
loopback fake of Anthropic's Messages API (streaming SSE, as the CLI asks for).

No test reaches the internet: the CLI gets ``ANTHROPIC_BASE_URL`` on 127.0.0.1, a
temporary ``HOME`` / ``CLAUDE_CONFIG_DIR`` and the switches that turn off telemetry,
non-essential traffic and the auto-updater.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "claude_agent_sdk",
    reason="needs the claude-agent-sdk extra: pip install -e '.[claude-agent-sdk]'",
)

import claude_agent_sdk
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    ToolPermissionContext,
    create_sdk_mcp_server,
    query,
    tool,
)

from ctxwise.config import EngineConfig, GatesConfig
from ctxwise.engine import Engine
from ctxwise.errors import IntegrationError
from ctxwise.integrations.claude_agent_sdk import (
    FRAMEWORK,
    CtxwiseHooks,
    deny_message,
    mcp_tool_name,
)
from ctxwise.messages import Message
from ctxwise.policy import Blocked, Forbid, PolicyGate, RequireFact

USER = Message.text_message
CLI = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
VOCABULARY = {"refund": "issue_refund", "address check": "verify_address"}
STATED = "Do not refund order 4417 until the address check is done."


def _engine(tmp_path: Path, gate: PolicyGate | None = None, **cfg: Any) -> Engine:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = EngineConfig.model_validate(
        {"store": f"sqlite:///{tmp_path / 'ctxwise.db'}", "budget": 4000, **cfg}
    )
    return Engine(config, gate=gate if gate is not None else _gate())


def _gate() -> PolicyGate:
    return PolicyGate(
        [
            Forbid("no-shell", "Never run shell commands on the support host.", ("Bash",)),
            RequireFact(
                "address-first",
                "Verify the address before a refund.",
                ("issue_refund",),
                "address_check:{order_id}",
                satisfied_by="verify_address",
            ),
        ]
    )


def _ctx() -> ToolPermissionContext:
    return ToolPermissionContext(tool_use_id="toolu_1")


def _pre_tool_use(name: str, tool_input: Any, path: str = "/nope.jsonl") -> Any:
    """A PreToolUseHookInput as the CLI sends it."""
    return {
        "session_id": "cli-1",
        "transcript_path": path,
        "cwd": "/tmp",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": name,
        "tool_input": tool_input,
        "tool_use_id": "toolu_1",
    }


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _hook(callback: Callable[..., Any], payload: Any, tool_use_id: str | None = None) -> Any:
    """A hook callback called as the SDK calls it: (input, tool_use_id, HookContext)."""
    return asyncio.run(callback(payload, tool_use_id, {"signal": None}))


# -- can_use_tool --------------------------------------------------------------------


def test_can_use_tool_denies_a_gated_call_naming_the_rule(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        engine.record("s", [USER("user", "Please check my order 4417.")])
        hooks = CtxwiseHooks(engine, "s")
        denied = _run(hooks.can_use_tool("Bash", {"command": "ls"}, _ctx()))
        assert isinstance(denied, PermissionResultDeny)
        assert "'no-shell'" in denied.message
        assert "Never run shell commands on the support host." in denied.message
        assert denied.interrupt is False  # the model reads it and goes on
        gated = _run(hooks.can_use_tool("issue_refund", {"order_id": "4417"}, _ctx()))
        assert isinstance(gated, PermissionResultDeny) and "'address-first'" in gated.message
        assert "address_check:4417 is not recorded" in gated.message
        allowed = _run(hooks.can_use_tool("Read", {"file_path": "/tmp/x"}, _ctx()))
        assert isinstance(allowed, PermissionResultAllow) and allowed.updated_input is None


def test_a_session_the_engine_never_saw_is_checked_against_the_configured_gates(
    tmp_path: Path,
) -> None:
    with _engine(tmp_path) as engine:
        hooks = CtxwiseHooks(engine, "new-session")
        refund = _run(hooks.can_use_tool("issue_refund", {"order_id": "4417"}, _ctx()))
        assert isinstance(refund, PermissionResultDeny) and "'address-first'" in refund.message
        assert isinstance(_run(hooks.can_use_tool("Read", {}, _ctx())), PermissionResultAllow)


class _Broken:
    name = "broken"
    text = "A rule that raises."

    def check(self, tool_name: str, tool_input: Any, facts: Any) -> str | None:
        raise RuntimeError("lookup failed")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "broken"}


def test_a_gate_that_cannot_be_evaluated_fails_closed(tmp_path: Path) -> None:
    with _engine(tmp_path, gate=PolicyGate([_Broken()])) as engine:
        engine.record("s", [USER("user", "hello")])
        hooks = CtxwiseHooks(engine, "s")
        broken = _run(hooks.can_use_tool("Read", {}, _ctx()))
        assert isinstance(broken, PermissionResultDeny)
        assert "'broken'" in broken.message and "lookup failed" in broken.message
    with _engine(tmp_path / "b") as engine:
        hooks = CtxwiseHooks(engine, "s")
        # an input that is not an object: the gates cannot read it
        odd = _run(hooks.can_use_tool("Read", ["not", "a", "mapping"], _ctx()))  # type: ignore[arg-type]
        assert isinstance(odd, PermissionResultDeny) and "could not be evaluated" in odd.message
        out = _hook(hooks.pre_tool_use, _pre_tool_use("Read", []), "toolu_1")
        assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
        nameless = {k: v for k, v in _pre_tool_use("Read", {}).items() if k != "tool_name"}
        out = _hook(hooks.pre_tool_use, nameless, "toolu_1")
        assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert "no tool_name" in out["hookSpecificOutput"]["permissionDecisionReason"]


# -- PreToolUse ----------------------------------------------------------------------


def test_pre_tool_use_denies_a_gated_call_and_has_no_opinion_otherwise(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        hooks = CtxwiseHooks(engine, "s")
        out = _hook(hooks.pre_tool_use, _pre_tool_use("Bash", {"command": "rm -rf /"}), "t")
        blocked = engine.gate.check("Bash", {"command": "rm -rf /"})
        assert isinstance(blocked, Blocked)
        assert out == {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": deny_message(blocked),
            }
        }
        assert "'no-shell'" in deny_message(blocked) and blocked.reason in deny_message(blocked)
        # allowed: {} so can_use_tool and the CLI's own permission rules still apply
        assert _hook(hooks.pre_tool_use, _pre_tool_use("Read", {"file_path": "x"}), "t") == {}


def test_an_mcp_tool_is_gated_under_its_own_name(tmp_path: Path) -> None:
    assert mcp_tool_name("mcp__shop__issue_refund") == "issue_refund"
    assert mcp_tool_name("mcp__shop") is None and mcp_tool_name("Bash") is None
    with _engine(tmp_path) as engine:
        hooks = CtxwiseHooks(engine, "s")
        payload = _pre_tool_use("mcp__shop__issue_refund", {"order_id": "#4417"})
        out = _hook(hooks.pre_tool_use, payload, "t")
        assert "'address-first'" in out["hookSpecificOutput"]["permissionDecisionReason"]
        payload = _pre_tool_use("mcp__shop__lookup_order", {"order_id": "4417"})
        assert _hook(hooks.pre_tool_use, payload, "t") == {}


# -- recording: stated rules, prerequisite results -----------------------------------


def _post_tool_use(name: str, tool_input: dict[str, Any], response: Any, call_id: str) -> Any:
    return {
        "session_id": "cli-1",
        "transcript_path": "/nope.jsonl",
        "cwd": "/tmp",
        "hook_event_name": "PostToolUse",
        "tool_name": name,
        "tool_input": tool_input,
        "tool_response": response,
        "tool_use_id": call_id,
    }


def test_a_stated_rule_gates_until_the_prerequisite_result_is_recorded(tmp_path: Path) -> None:
    with _engine(
        tmp_path, gate=PolicyGate(), gates=GatesConfig(vocabulary=VOCABULARY).model_dump()
    ) as engine:
        hooks = CtxwiseHooks(engine, "s")
        prompt = {
            "session_id": "cli-1",
            "transcript_path": "/nope.jsonl",
            "cwd": "/tmp",
            "hook_event_name": "UserPromptSubmit",
            "prompt": STATED,
        }
        assert _hook(hooks.user_prompt_submit, prompt, None) == {}
        refund = _pre_tool_use("mcp__shop__issue_refund", {"order_id": "4417"})
        out = _hook(hooks.pre_tool_use, refund, "t")
        assert "'stated-1'" in out["hookSpecificOutput"]["permissionDecisionReason"]
        # a failed check does not satisfy it; the MCP result shape is a content list
        failed = [{"type": "text", "text": "address mismatch"}]
        verify = _post_tool_use("mcp__shop__verify_address", {"order_id": "4417"}, failed, "v1")
        _hook(hooks.post_tool_use, verify, "v1")
        assert "stated-1" in str(_hook(hooks.pre_tool_use, refund, "t"))
        ok = {"content": [{"type": "text", "text": "address verified"}]}
        verify = _post_tool_use("mcp__shop__verify_address", {"order_id": "4417"}, ok, "v2")
        _hook(hooks.post_tool_use, verify, "v2")
        assert _hook(hooks.pre_tool_use, refund, "t") == {}
        stop = {"hook_event_name": "Stop", "last_assistant_message": "Refunded order 4417."}
        _hook(hooks.stop, stop, None)
        history = engine.session_messages("s")
        assert [m.role for m in history] == [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        assert history[-1].text == "Refunded order 4417."
        assert engine.facts("s").get("verify_address:4417").value == "ok"  # type: ignore[union-attr]


def test_a_recording_that_fails_never_stops_the_cli(tmp_path: Path, caplog: Any) -> None:
    with _engine(tmp_path) as engine:
        hooks = CtxwiseHooks(engine, "s")
        call = _post_tool_use("Read", {"file_path": "x"}, {"file": "..."}, "r1")
        _hook(hooks.post_tool_use, call, "r1")
        assert _hook(hooks.post_tool_use, call, "r1") == {}  # id reused
        assert "could not record" in caplog.text
        assert len(engine.session_messages("s")) == 2  # the first pair only
        off = CtxwiseHooks(engine, "s", record=False)
        assert set(off.hooks()) == {"PreToolUse", "PreCompact", "SessionStart"}
        _hook(off.post_tool_use, _post_tool_use("Read", {}, "x", "r2"), "r2")
        assert len(engine.session_messages("s")) == 2


# -- PreCompact and SessionStart -------------------------------------------------------


def _cli_transcript(path: Path, text: str) -> Path:
    """A Claude Code session file with one user line of ``text``."""
    line = {
        "type": "user",
        "uuid": "u1",
        "parentUuid": None,
        "sessionId": "cli-1",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": text},
    }
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    return path


def test_pre_compact_gives_the_rules_and_facts_as_the_summary_instructions(
    tmp_path: Path,
) -> None:
    transcript = _cli_transcript(
        tmp_path / "cli.jsonl", "Always answer in French. My email is ana@example.com."
    )
    with _engine(tmp_path) as engine:
        engine.record("s", [USER("user", "Never call me before 9am. My order is 4417.")])
        hooks = CtxwiseHooks(engine, "s", archive_dir=tmp_path / "archive")
        payload = {
            "session_id": "cli-1",
            "transcript_path": str(transcript),
            "cwd": str(tmp_path),
            "hook_event_name": "PreCompact",
            "trigger": "auto",
            "custom_instructions": None,
        }
        out = _hook(hooks.pre_compact, payload, None)
        assert set(out) == {"systemMessage"}  # PreCompact has no hookSpecificOutput
        text = out["systemMessage"]
        assert text.startswith("Keep the following in the summary, word for word")
        assert "- Never call me before 9am." in text  # the session's rule
        assert "- Always answer in French." in text  # the CLI transcript's rule
        assert "ana@example.com" in text
        assert text.count("Rules:") == 1
        [copy] = hooks.archived
        assert copy.parent == tmp_path / "archive" / "cli-1"
        assert copy.read_bytes() == transcript.read_bytes()
        start = {**payload, "hook_event_name": "SessionStart", "source": "compact"}
        after = _hook(hooks.session_start, start, None)
        context = after["hookSpecificOutput"]["additionalContext"]
        assert after["hookSpecificOutput"]["hookEventName"] == "SessionStart"
        assert "- Never call me before 9am." in context and "- Always answer in French." in context
        assert _hook(hooks.session_start, {**start, "source": "startup"}, None) == {}
    with _engine(tmp_path / "empty") as engine:
        hooks = CtxwiseHooks(engine, "nothing-said")
        plain = {**payload, "transcript_path": str(tmp_path / "missing.jsonl")}
        assert _hook(hooks.pre_compact, plain, None) == {}
    # an archive that cannot be written: the rules still go to the summary
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the archive folder goes")
    with _engine(tmp_path / "blocked-engine") as engine:
        hooks = CtxwiseHooks(engine, "b", archive_dir=blocked)
        out = _hook(hooks.pre_compact, payload, None)
        assert "- Always answer in French." in out["systemMessage"]
        assert hooks.archived == []


# -- wiring and bad setup ----------------------------------------------------------------


def test_options_keep_the_callers_hooks_and_put_their_can_use_tool_behind_the_gates(
    tmp_path: Path,
) -> None:
    asked: list[str] = []

    async def theirs(name: str, tool_input: dict[str, Any], ctx: ToolPermissionContext) -> Any:
        asked.append(name)
        return PermissionResultDeny(message="theirs")

    async def mine(data: Any, tool_use_id: str | None, ctx: Any) -> Any:
        return {}

    with _engine(tmp_path) as engine:
        hooks = CtxwiseHooks(engine, "s")
        base = ClaudeAgentOptions(
            model="m", can_use_tool=theirs, hooks={"PreToolUse": [HookMatcher(hooks=[mine])]}
        )
        opts = hooks.options(base)
        assert opts.model == "m" and base.hooks is not None and len(base.hooks["PreToolUse"]) == 1
        assert opts.hooks is not None
        assert [m.hooks[0] for m in opts.hooks["PreToolUse"]] == [mine, hooks.pre_tool_use]
        assert opts.hooks["PreToolUse"][1].on_failure == "block"
        assert opts.can_use_tool is not None
        denied = _run(opts.can_use_tool("Bash", {}, _ctx()))
        assert "'no-shell'" in denied.message and asked == []
        assert _run(opts.can_use_tool("Read", {}, _ctx())).message == "theirs"
        assert asked == ["Read"]
        plain = hooks.options()
        assert plain.can_use_tool == hooks.can_use_tool


def test_bad_setup_is_an_integration_config_error(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        bad: list[tuple[Any, ...]] = [
            (object(), "s", {}),
            (engine, "", {}),
            (engine, "s", {"cap": 10}),
            (engine, "s", {"extractor": "poetry"}),
        ]
        for eng, sid, kw in bad:
            with pytest.raises(IntegrationError) as err:
                CtxwiseHooks(eng, sid, **kw)
            assert err.value.reason == "config" and err.value.framework == FRAMEWORK
        with pytest.raises(IntegrationError, match="ClaudeAgentOptions"):
            CtxwiseHooks(engine, "s").options({"model": "m"})  # type: ignore[arg-type]


def test_an_sdk_outside_the_supported_range_is_refused_at_import(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda d: "0.3.1" if d == "claude-agent-sdk" else real(d),
    )
    monkeypatch.delitem(sys.modules, "ctxwise.integrations.claude_agent_sdk")
    with pytest.raises(IntegrationError) as err:
        importlib.import_module("ctxwise.integrations.claude_agent_sdk")
    assert err.value.reason == "version" and err.value.supported == ">=0.2.189,<0.3"
    assert "0.3.1" in str(err.value) and ">=0.2.189,<0.3" in str(err.value)


# -- end to end: the bundled CLI against a loopback Messages API -------------------------

needs_cli = pytest.mark.skipif(not CLI.is_file(), reason=f"no bundled Claude Code CLI at {CLI}")

Reply = list[dict[str, Any]]


@dataclass
class FakeMessagesAPI:
    """POST /v1/messages like Anthropic's API (SSE when ``stream`` is set); ``respond``
    gets the request body and gives the assistant's content blocks."""

    respond: Callable[[dict[str, Any]], Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                api.paths.append(f"GET {self.path}")
                self.send_response(404)
                self.end_headers()

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                api.paths.append(f"POST {self.path}")
                if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
                    self._send("application/json", json.dumps({"input_tokens": 10}).encode())
                    return
                api.requests.append(body)
                content = api.respond(body)
                stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
                if body.get("stream"):
                    self._send("text/event-stream", _sse(content, stop))
                else:
                    self._send("application/json", json.dumps(_message(content, stop)).encode())

            def _send(self, kind: str, data: bytes) -> None:
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _message(content: Reply, stop: str | None) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _sse(content: Reply, stop: str) -> bytes:
    events: list[dict[str, Any]] = [{"type": "message_start", "message": _message([], None)}]
    for i, block in enumerate(content):
        start: dict[str, Any]
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append({"type": "content_block_start", "index": i, "content_block": start})
        events.append({"type": "content_block_delta", "index": i, "delta": delta})
        events.append({"type": "content_block_stop", "index": i})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        }
    )
    events.append({"type": "message_stop"})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


@contextmanager
def fake_api(respond: Callable[[dict[str, Any]], Reply]) -> Iterator[tuple[FakeMessagesAPI, str]]:
    api = FakeMessagesAPI(respond)
    server = ThreadingHTTPServer(("127.0.0.1", 0), api.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api, f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _cli_env(base_url: str, home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "test",
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


def _tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        b
        for m in body.get("messages", [])
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content)
    return str(content)


def _use(call_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _bash_then_finish(marker: Path) -> Callable[[dict[str, Any]], Reply]:
    def respond(body: dict[str, Any]) -> Reply:
        if not _tool_results(body):
            return [_use("toolu_bash", "Bash", command=f"touch {marker}", description="touch")]
        return [_text("I may not run shell commands here.")]

    return respond


async def _prompt(text: str) -> AsyncIterator[dict[str, Any]]:
    yield {
        "type": "user",
        "message": {"role": "user", "content": text},
        "parent_tool_use_id": None,
        "session_id": "default",
    }


async def _collect(options: ClaudeAgentOptions, text: str) -> list[Any]:
    return [m async for m in query(prompt=_prompt(text), options=options)]


def _check_deny_reached_the_model(api: FakeMessagesAPI, marker: Path) -> None:
    assert not marker.exists()  # the tool never ran
    assert len(api.requests) == 2
    [result] = _tool_results(api.requests[1])
    assert result["tool_use_id"] == "toolu_bash" and result.get("is_error") is True
    assert "'no-shell'" in _result_text(result)
    assert "Never run shell commands on the support host." in _result_text(result)


@needs_cli
def test_e2e_can_use_tool_keeps_a_gated_bash_call_from_running(tmp_path: Path) -> None:
    marker = tmp_path / "bash-ran"
    with _engine(tmp_path) as engine, fake_api(_bash_then_finish(marker)) as (api, url):
        hooks = CtxwiseHooks(engine, "s")
        options = ClaudeAgentOptions(
            can_use_tool=hooks.can_use_tool,  # alone: no hooks
            env=_cli_env(url, tmp_path / "home"),
            cwd=str(tmp_path),
            model="claude-sonnet-4-5",
        )
        messages = _run(_collect(options, "Please list the files."))
    _check_deny_reached_the_model(api, marker)
    assert isinstance(messages[-1], ResultMessage) and not messages[-1].is_error
    assert all(p.startswith("POST /v1/messages") for p in api.paths)


@needs_cli
def test_e2e_pre_tool_use_gates_a_call_the_permission_rules_allow(tmp_path: Path) -> None:
    # allowed_tools=["Bash"] approves Bash before can_use_tool is ever asked
    # (bypassPermissions would too, but the CLI refuses it when run as root)
    control = tmp_path / "control-ran"
    with fake_api(_bash_then_finish(control)) as (api, url):
        options = ClaudeAgentOptions(
            allowed_tools=["Bash"],
            env=_cli_env(url, tmp_path / "home"),
            cwd=str(tmp_path),
            model="claude-sonnet-4-5",
        )
        _run(_collect(options, "Please list the files."))
    assert control.exists()  # without ctxwise the call runs
    marker = tmp_path / "bash-ran"
    with _engine(tmp_path) as engine, fake_api(_bash_then_finish(marker)) as (api, url):
        hooks = CtxwiseHooks(engine, "s", record=False)
        options = ClaudeAgentOptions(
            hooks=hooks.hooks(),
            allowed_tools=["Bash"],
            env=_cli_env(url, tmp_path / "home"),
            cwd=str(tmp_path),
            model="claude-sonnet-4-5",
        )
        _run(_collect(options, "Please list the files."))
    _check_deny_reached_the_model(api, marker)


@needs_cli
def test_e2e_a_stated_rule_holds_a_custom_tool_until_its_prerequisite_ran(
    tmp_path: Path,
) -> None:
    ran: list[tuple[str, str]] = []

    @tool("verify_address", "Verify an order's address", {"order_id": str})
    async def verify_address(args: dict[str, Any]) -> dict[str, Any]:
        ran.append(("verify_address", args["order_id"]))
        return {"content": [{"type": "text", "text": "address verified"}]}

    @tool("issue_refund", "Refund an order", {"order_id": str})
    async def issue_refund(args: dict[str, Any]) -> dict[str, Any]:
        ran.append(("issue_refund", args["order_id"]))
        return {"content": [{"type": "text", "text": "refunded"}]}

    shop = create_sdk_mcp_server("shop", tools=[verify_address, issue_refund])
    script = [
        [_use("toolu_r1", "mcp__shop__issue_refund", order_id="4417")],
        [_use("toolu_v1", "mcp__shop__verify_address", order_id="4417")],
        [_use("toolu_r2", "mcp__shop__issue_refund", order_id="4417")],
        [_text("Order 4417 is refunded.")],
    ]

    def respond(body: dict[str, Any]) -> Reply:
        return script[min(len(_tool_results(body)), len(script) - 1)]

    gates = GatesConfig(vocabulary=VOCABULARY).model_dump()
    with (
        _engine(tmp_path, gate=PolicyGate(), gates=gates) as engine,
        fake_api(respond) as (api, url),
    ):
        hooks = CtxwiseHooks(engine, "case-4417")
        options = hooks.options(
            ClaudeAgentOptions(
                mcp_servers={"shop": shop},
                env=_cli_env(url, tmp_path / "home"),
                cwd=str(tmp_path),
                model="claude-sonnet-4-5",
            )
        )

        async def run() -> None:
            async with ClaudeSDKClient(options) as client:
                await client.query(f"{STATED} Please refund order 4417.")
                async for _ in client.receive_response():
                    pass

        _run(run())
        history = engine.session_messages("case-4417")
        facts = engine.facts("case-4417")
    assert ran == [("verify_address", "4417"), ("issue_refund", "4417")]
    assert len(api.requests) == 4
    first = _tool_results(api.requests[1])[0]
    assert first["tool_use_id"] == "toolu_r1" and first.get("is_error") is True
    assert "'stated-1'" in _result_text(first) and "address check" in _result_text(first)
    assert facts.get("verify_address:4417").value == "ok"  # type: ignore[union-attr]
    assert history[0].text.startswith(STATED)
    assert history[-1].text == "Order 4417 is refunded."


@needs_cli
def test_e2e_compaction_keeps_the_rules_and_facts(tmp_path: Path) -> None:
    summary_marker = "create a detailed summary of the conversation"

    def respond(body: dict[str, Any]) -> Reply:
        if summary_marker in json.dumps(body["messages"][-1]):
            return [_text("<analysis>a</analysis>\n<summary>1. Primary Request: help</summary>")]
        return [_text("Noted.")]

    with _engine(tmp_path) as engine, fake_api(respond) as (api, url):
        hooks = CtxwiseHooks(engine, "s", archive_dir=tmp_path / "archive")
        options = hooks.options(
            ClaudeAgentOptions(
                env=_cli_env(url, tmp_path / "home"),
                cwd=str(tmp_path),
                model="claude-sonnet-4-5",
                tools=[],
            )
        )

        async def run() -> None:
            async with ClaudeSDKClient(options) as client:
                for text in (
                    "Never call me before 9am. My email is ana@example.com.",
                    "/compact",
                    "What do you know about me?",
                ):
                    await client.query(text)
                    async for _ in client.receive_response():
                        pass

        _run(run())
    summary = [r for r in api.requests if summary_marker in json.dumps(r["messages"][-1])]
    assert len(summary) == 1
    instructions = json.dumps(summary[0]["messages"][-1])
    assert "Additional Instructions" in instructions
    assert "Keep the following in the summary, word for word" in instructions
    assert "Never call me before 9am." in instructions and "ana@example.com" in instructions
    after = api.requests[-1]  # the first request after the compaction
    assert "Noted." not in json.dumps(after["messages"])  # the history was replaced
    assert "standing rules and case facts from before the compaction" in json.dumps(after)
    assert "Never call me before 9am." in json.dumps(after["messages"])
    [copy] = hooks.archived
    assert "Never call me before 9am." in copy.read_text(encoding="utf-8")


@pytest.mark.parametrize("bad", [None, "ls", ["x"], 3])
def test_a_tool_input_that_is_not_an_object_is_denied(tmp_path: Path, bad: Any) -> None:
    with _engine(tmp_path) as engine:
        engine.record("s", [USER("user", "Please check my order 4417.")])
        for sid in ("s", "never-seen"):
            hooks = CtxwiseHooks(engine, sid)
            denied = _run(hooks.can_use_tool("Read", bad, _ctx()))
            assert isinstance(denied, PermissionResultDeny)
            assert "not an object" in denied.message and "Read was not run" in denied.message
            out = _hook(hooks.pre_tool_use, _pre_tool_use("Read", bad), "t")
            decision = out["hookSpecificOutput"]
            assert decision["permissionDecision"] == "deny"
            assert "not an object" in decision["permissionDecisionReason"]
        # a payload with no tool_input at all is still checked as {} (no arguments)
        hooks = CtxwiseHooks(engine, "s")
        payload = {k: v for k, v in _pre_tool_use("Read", {}).items() if k != "tool_input"}
        assert _hook(hooks.pre_tool_use, payload, "t") == {}


@pytest.mark.parametrize("bad", [None, "PreToolUse", ["tool_name"]])
def test_a_payload_that_is_not_an_object_is_refused_or_ignored(tmp_path: Path, bad: Any) -> None:
    """A hook input that is not a JSON object: the gate denies (fails closed), the
    other hooks answer {} and record nothing (an AttributeError before)."""
    with _engine(tmp_path) as engine:
        hooks = CtxwiseHooks(engine, "s")
        out = _hook(hooks.pre_tool_use, bad, "t")
        assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert "no tool_name" in out["hookSpecificOutput"]["permissionDecisionReason"]
        for callback in (
            hooks.user_prompt_submit,
            hooks.post_tool_use,
            hooks.stop,
            hooks.session_start,
        ):
            assert _hook(callback, bad, "t") == {}
        assert _hook(hooks.pre_compact, bad) == {}  # nothing to keep: no rules, no facts
        assert engine.sessions.version("s") == 0
