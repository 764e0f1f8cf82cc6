"""The agent-loop examples (examples/anthropic_agent.py, examples/openai_agent.py),
run end to end against a mocked provider API: the providers cannot be reached from CI.

Each handler plays one scripted conversation: the model asks for ``issue_refund``
first (the gate must block it: the tool never runs and the next request answers the
call with an error naming the rule), then ``verify_address``, then ``issue_refund``
again (allowed now, and run), then answers. The payloads are shaped as the Messages
API and Chat Completions document them; every request the SDK sent is checked for a
valid shape (turns alternate, every tool call answered with its id in the next turn,
the system prompt present). Sockets are closed off, so nothing reaches a network.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests._http import mock_client, response

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
RULE = "refund-after-address-check"
QUESTION = "Order 4417 arrived broken, my postcode is 94107. Please refund it."


def load_example(name: str) -> ModuleType:
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a real connection fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a test tried to reach the network: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


class Spies:
    """The example's own tools, each call recorded before it runs."""

    def __init__(self, tools: dict[str, Callable[..., Any]]) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.tools = {name: self._wrap(name, fn) for name, fn in tools.items()}

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def spy(**kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            return fn(**kwargs)

        return spy


def scripted(sdk: str, replies: list[dict[str, Any]], path: str) -> tuple[Any, list[Any]]:
    """A handler answering each request with the next reply; returns (handler, bodies)."""
    bodies: list[dict[str, Any]] = []
    it: Iterator[dict[str, Any]] = iter(replies)

    def handler(request: Any) -> Any:
        assert request.method == "POST"
        assert request.url.path == path
        bodies.append(json.loads(request.content))
        try:
            return response(sdk, 200, next(it))
        except StopIteration:
            raise AssertionError("the agent sent more requests than the script has") from None

    return handler, bodies


# ---------------------------------------------------------------------- Anthropic


def anthropic_message(
    n: int, content: list[dict[str, Any]], stop_reason: str, model: str = "claude-sonnet-5-5"
) -> dict[str, Any]:
    """A Messages API response body, as the API reference documents it."""
    return {
        "id": f"msg_01Scripted{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 420 + 60 * n, "output_tokens": 40},
    }


def anthropic_tool_use(
    n: int, call_id: str, name: str, tool_input: dict[str, Any], say: str
) -> dict[str, Any]:
    return anthropic_message(
        n,
        [
            {"type": "text", "text": say},
            {"type": "tool_use", "id": call_id, "name": name, "input": tool_input},
        ],
        "tool_use",
    )


ANTHROPIC_SCRIPT = [
    anthropic_tool_use(
        1,
        "toolu_01RefundFirst",
        "issue_refund",
        {"order_id": "4417", "reason": "arrived broken"},
        "I'll refund order 4417 now.",
    ),
    anthropic_tool_use(
        2,
        "toolu_02Verify",
        "verify_address",
        {"order_id": "4417", "postcode": "94107"},
        "I need to verify the address first.",
    ),
    anthropic_tool_use(
        3,
        "toolu_03RefundAgain",
        "issue_refund",
        {"order_id": "4417", "reason": "arrived broken"},
        "The address is verified; issuing the refund.",
    ),
    anthropic_message(
        4,
        [{"type": "text", "text": "Order 4417 has been refunded in full (129.00 USD)."}],
        "end_turn",
    ),
]


def anthropic_client(handler: Any) -> Any:
    sdk = pytest.importorskip("anthropic")
    return sdk.Anthropic(
        api_key="test-key", max_retries=0, http_client=mock_client("anthropic", handler)
    )


def check_anthropic_shape(body: dict[str, Any], module: ModuleType) -> None:
    """A valid Messages API request: the system prompt, alternating turns, tool pairs."""
    assert body["model"] == module.MODEL
    assert isinstance(body["max_tokens"], int) and body["max_tokens"] > 0
    assert [t["name"] for t in body["tools"]] == ["lookup_order", "verify_address", "issue_refund"]
    system = body["system"]
    text = system if isinstance(system, str) else "".join(b["text"] for b in system)
    assert module.SYSTEM_PROMPT in text
    messages = body["messages"]
    assert messages[0]["role"] == "user"
    for i, m in enumerate(messages):
        assert m["role"] == ("user" if i % 2 == 0 else "assistant"), f"message {i} out of turn"
    assert messages[-1]["role"] == "user"
    for i, m in enumerate(messages):
        blocks = m["content"] if isinstance(m["content"], list) else []
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        if m["role"] == "assistant" and uses:
            following = messages[i + 1]["content"]
            answered = [b["tool_use_id"] for b in following if b["type"] == "tool_result"]
            assert answered == uses, f"message {i}: tool_use ids {uses} answered by {answered}"
            # tool results come first in the user turn, as the API requires
            assert [b["type"] for b in following[: len(uses)]] == ["tool_result"] * len(uses)
        if m["role"] == "user" and i > 0:
            results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
            previous = [b["id"] for b in messages[i - 1]["content"] if b["type"] == "tool_use"]
            assert set(results) <= set(previous), f"message {i}: an orphan tool_result"


def anthropic_result(body: dict[str, Any], call_id: str) -> dict[str, Any]:
    last = body["messages"][-1]
    (found,) = [b for b in last["content"] if b.get("tool_use_id") == call_id]
    return found


def result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


class TestAnthropicAgent:
    def test_gate_blocks_refund_until_the_address_is_verified(self, tmp_path: Path) -> None:
        module = load_example("anthropic_agent")
        handler, bodies = scripted("anthropic", ANTHROPIC_SCRIPT, "/v1/messages")
        spies = Spies(module.TOOLS)
        lines: list[str] = []
        run = module.run(
            QUESTION,
            client=anthropic_client(handler),
            store_dir=tmp_path,
            tools=spies.tools,
            log=lines.append,
        )

        assert run.stopped == "answer"
        assert run.answer == "Order 4417 has been refunded in full (129.00 USD)."
        assert run.iterations == 4
        assert len(bodies) == 4
        # the first issue_refund never ran; verify_address and the second one did
        assert spies.calls == [
            ("verify_address", {"order_id": "4417", "postcode": "94107"}),
            ("issue_refund", {"order_id": "4417", "reason": "arrived broken"}),
        ]
        assert [(c.name, c.status) for c in run.calls] == [
            ("issue_refund", "blocked"),
            ("verify_address", "ran"),
            ("issue_refund", "ran"),
        ]
        for body in bodies:
            check_anthropic_shape(body, module)
        (first,) = bodies[0]["messages"]
        assert QUESTION in json.dumps(first["content"])

        blocked = anthropic_result(bodies[1], "toolu_01RefundFirst")
        assert blocked["is_error"] is True
        assert RULE in result_text(blocked)
        assert module.REFUND_RULE.text in result_text(blocked)
        verified = anthropic_result(bodies[2], "toolu_02Verify")
        assert verified.get("is_error") in (None, False)
        assert json.loads(result_text(verified))["status"] == "verified"
        refunded = anthropic_result(bodies[3], "toolu_03RefundAgain")
        assert refunded.get("is_error") in (None, False)
        assert json.loads(result_text(refunded))["status"] == "refunded"

        # each request carries the model's previous reply as the API returned it
        for body, reply in zip(bodies[1:], ANTHROPIC_SCRIPT, strict=False):
            sent = body["messages"][-2]["content"]
            expected = [
                {k: v for k, v in b.items() if k != "cache_control"} for b in reply["content"]
            ]
            assert [{k: v for k, v in b.items() if k != "cache_control"} for b in sent] == (
                expected
            )
        assert any("[blocked] issue_refund" in line for line in lines)

        # the session persisted in the SQLite file, the final answer included
        assert (tmp_path / "ctxwise.db").is_file()
        with module.build_engine(tmp_path) as engine:
            history = engine.session_messages("support")
            assert history[-1].role == "assistant"
            assert history[-1].text == run.answer
            assert engine.facts("support").get("address_check:4417").value == "ok"

    def test_stops_after_max_iterations(self, tmp_path: Path) -> None:
        module = load_example("anthropic_agent")
        script = [
            anthropic_tool_use(
                n, f"toolu_{n:02d}Lookup", "lookup_order", {"order_id": "5120"}, "Checking."
            )
            for n in range(1, 4)
        ]
        handler, bodies = scripted("anthropic", script, "/v1/messages")
        run = module.run(
            "Where is order 5120?",
            client=anthropic_client(handler),
            store_dir=tmp_path,
            max_iterations=3,
            log=None,
        )
        assert run.stopped == "max_iterations"
        assert run.answer == ""
        assert len(bodies) == 3
        assert [c.ran for c in run.calls] == [True, True, True]
        for body in bodies:
            check_anthropic_shape(body, module)
        with module.build_engine(tmp_path) as engine:
            last = engine.session_messages("support")[-1]
            assert [r.tool_use_id for r in last.tool_results] == ["toolu_03Lookup"]


# ---------------------------------------------------------------------- OpenAI


def openai_completion(n: int, message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    """A Chat Completions response body, as the API reference documents it."""
    return {
        "id": f"chatcmpl-Scripted{n:04d}",
        "object": "chat.completion",
        "created": 1764590400 + n,
        "model": "gpt-5.5-2026-04-23",
        "choices": [
            {
                "index": 0,
                "message": {"refusal": None, "annotations": [], **message},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {"prompt_tokens": 380 + 60 * n, "completion_tokens": 30, "total_tokens": 440},
        "service_tier": "default",
        "system_fingerprint": None,
    }


def openai_tool_call(n: int, call_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(tool_input)},
    }
    return openai_completion(
        n, {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    )


OPENAI_SCRIPT = [
    openai_tool_call(
        1, "call_01RefundFirst", "issue_refund", {"order_id": "4417", "reason": "arrived broken"}
    ),
    openai_tool_call(
        2, "call_02Verify", "verify_address", {"order_id": "4417", "postcode": "94107"}
    ),
    openai_tool_call(
        3, "call_03RefundAgain", "issue_refund", {"order_id": "4417", "reason": "arrived broken"}
    ),
    openai_completion(
        4,
        {"role": "assistant", "content": "Order 4417 has been refunded in full (129.00 USD)."},
        "stop",
    ),
]


def openai_client(handler: Any) -> Any:
    sdk = pytest.importorskip("openai")
    return sdk.OpenAI(api_key="test-key", max_retries=0, http_client=mock_client("openai", handler))


def check_openai_shape(body: dict[str, Any], module: ModuleType) -> None:
    """A valid Chat Completions request: the system message first, then user and
    assistant turns, every assistant ``tool_calls`` answered by one ``tool`` message
    per call id, in order, right after it."""
    assert body["model"] == module.MODEL
    assert isinstance(body["max_completion_tokens"], int) and body["max_completion_tokens"] > 0
    assert "max_tokens" not in body
    names = [t["function"]["name"] for t in body["tools"]]
    assert names == ["lookup_order", "verify_address", "issue_refund"]
    messages = body["messages"]
    assert messages[0]["role"] == "system"
    assert module.SYSTEM_PROMPT in messages[0]["content"]
    assert messages[1]["role"] == "user"
    assert all(m["role"] != "system" for m in messages[1:])
    i = 1
    while i < len(messages):
        m = messages[i]
        assert m["role"] in ("user", "assistant"), f"message {i}: unexpected {m['role']!r}"
        if m["role"] == "assistant":
            assert messages[i - 1]["role"] in ("user", "tool"), f"message {i} out of turn"
            calls = m.get("tool_calls") or []
            for call in calls:
                assert call["type"] == "function"
                assert isinstance(call["function"]["arguments"], str)  # JSON, as a string
            answers = messages[i + 1 : i + 1 + len(calls)]
            assert [a["role"] for a in answers] == ["tool"] * len(calls)
            assert [a["tool_call_id"] for a in answers] == [c["id"] for c in calls]
            i += 1 + len(calls)
            continue
        assert i == 1 or messages[i - 1]["role"] in ("assistant", "tool")
        i += 1
    last = messages[-1]
    assert last["role"] in ("user", "tool"), "a request ends with the user's or a tool's turn"


def openai_tool_answer(body: dict[str, Any], call_id: str) -> str:
    (found,) = [m for m in body["messages"] if m.get("tool_call_id") == call_id]
    content = found["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


class TestOpenAIAgent:
    def test_gate_blocks_refund_until_the_address_is_verified(self, tmp_path: Path) -> None:
        module = load_example("openai_agent")
        handler, bodies = scripted("openai", OPENAI_SCRIPT, "/v1/chat/completions")
        spies = Spies(module.TOOLS)
        lines: list[str] = []
        run = module.run(
            QUESTION,
            client=openai_client(handler),
            store_dir=tmp_path,
            tools=spies.tools,
            log=lines.append,
        )

        assert run.stopped == "answer"
        assert run.answer == "Order 4417 has been refunded in full (129.00 USD)."
        assert run.iterations == 4
        assert len(bodies) == 4
        assert spies.calls == [
            ("verify_address", {"order_id": "4417", "postcode": "94107"}),
            ("issue_refund", {"order_id": "4417", "reason": "arrived broken"}),
        ]
        assert [(c.name, c.status) for c in run.calls] == [
            ("issue_refund", "blocked"),
            ("verify_address", "ran"),
            ("issue_refund", "ran"),
        ]
        for body in bodies:
            check_openai_shape(body, module)
        assert [m["role"] for m in bodies[0]["messages"]] == ["system", "user"]
        assert QUESTION in json.dumps(bodies[0]["messages"][1]["content"])

        blocked = openai_tool_answer(bodies[1], "call_01RefundFirst")
        assert RULE in blocked
        assert module.REFUND_RULE.text in blocked
        assert json.loads(openai_tool_answer(bodies[2], "call_02Verify"))["status"] == "verified"
        for body in bodies[1:]:  # the model's arguments went back as JSON objects
            for m in body["messages"]:
                for call in m.get("tool_calls") or []:
                    assert isinstance(json.loads(call["function"]["arguments"]), dict)
        refunded = json.loads(openai_tool_answer(bodies[3], "call_03RefundAgain"))
        assert refunded["status"] == "refunded"

        # each request carries the model's previous tool calls as the API returned them
        for body, reply in zip(bodies[1:], OPENAI_SCRIPT, strict=False):
            sent = [m for m in body["messages"] if m["role"] == "assistant"][-1]
            expected = reply["choices"][0]["message"]["tool_calls"]
            assert sent["tool_calls"] == expected
            assert "refusal" not in sent and "annotations" not in sent  # response-only fields
        assert any("[blocked] issue_refund" in line for line in lines)

        with module.build_engine(tmp_path) as engine:
            history = engine.session_messages("support")
            assert history[-1].role == "assistant"
            assert history[-1].text == run.answer
            assert engine.facts("support").get("address_check:4417").value == "ok"

    def test_invalid_arguments_are_blocked_not_run(self, tmp_path: Path) -> None:
        """Arguments that are not a JSON object leave the gate nothing to check:
        it fails closed, and the tool does not run."""
        module = load_example("openai_agent")
        broken = openai_tool_call(1, "call_01Broken", "issue_refund", {})
        broken["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"order_'
        final = openai_completion(
            2, {"role": "assistant", "content": "Which order should I refund?"}, "stop"
        )
        handler, bodies = scripted("openai", [broken, final], "/v1/chat/completions")
        spies = Spies(module.TOOLS)
        run = module.run(
            "Refund my order.",
            client=openai_client(handler),
            store_dir=tmp_path,
            tools=spies.tools,
            log=None,
        )
        assert run.answer == "Which order should I refund?"
        assert spies.calls == []
        assert RULE in openai_tool_answer(bodies[1], "call_01Broken")
        for body in bodies:
            check_openai_shape(body, module)
        # the malformed arguments go back to the model byte for byte
        (sent,) = [m for m in bodies[1]["messages"] if m["role"] == "assistant"]
        assert sent["tool_calls"][0]["function"]["arguments"] == '{"order_'


# ---------------------------------------------------------------------- injection


@pytest.mark.parametrize(
    ("example", "sdk", "key", "path", "reply"),
    [
        (
            "anthropic_agent",
            "anthropic",
            "ANTHROPIC_API_KEY",
            "/v1/messages",
            anthropic_message(1, [{"type": "text", "text": "It is delivered."}], "end_turn"),
        ),
        (
            "openai_agent",
            "openai",
            "OPENAI_API_KEY",
            "/v1/chat/completions",
            openai_completion(1, {"role": "assistant", "content": "It is delivered."}, "stop"),
        ),
    ],
)
def test_base_url_and_http_client_reach_the_sdk(
    example: str,
    sdk: str,
    key: str,
    path: str,
    reply: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without ``client``, the example builds the SDK's client from ``base_url`` and
    ``http_client`` (the key from the environment, as the SDK reads it)."""
    pytest.importorskip(sdk)
    module = load_example(example)
    monkeypatch.setenv(key, "test-key")
    seen: list[Any] = []

    def handler(request: Any) -> Any:
        seen.append(request)
        return response(sdk, 200, reply)

    run = module.run(
        "Where is order 5120?",
        base_url="https://llm-gateway.example.test/v1"
        if sdk == "openai"
        else "https://llm-gateway.example.test",
        http_client=mock_client(sdk, handler),
        store_dir=tmp_path,
        log=None,
    )
    assert run.answer == "It is delivered."
    (request,) = seen
    assert request.url.host == "llm-gateway.example.test"
    assert request.url.path == path
    sent_key = request.headers.get("x-api-key") or request.headers.get("authorization", "")
    assert sent_key.removeprefix("Bearer ") == "test-key"
