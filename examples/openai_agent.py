"""A real agent loop on OpenAI Chat Completions, with ctxwise deciding the context.

    pip install -e '.[openai]'
    export OPENAI_API_KEY=sk-...
    python examples/openai_agent.py "Where is my order 4417?"
    python examples/openai_agent.py --store ./agent-data --session alice \\
        "Order 4417 arrived broken, postcode 94107. Please refund it."

What each iteration does:

1. ``engine.turn(session, new_messages)`` appends what is new (the question, or the
   model's reply and the tool results answering it) and returns ``result.request``:
   the Chat Completions body (model, max_completion_tokens, messages with the
   system message first) for this turn;
2. the official SDK sends it, with the tool definitions of this script;
3. the SDK's response object goes back to the Engine as it is (``engine.turn`` and
   ``engine.record`` take it; ``decode_input`` reads it here to find the tool calls);
4. every tool call (``tool_calls``, arguments parsed from JSON) is put to
   ``engine.check_tool`` *before* it runs. The gate here (a ``RequireFact`` rule)
   lets ``issue_refund`` run only once ``verify_address`` has confirmed that order's
   address; a blocked call is not run and is answered with a ``tool`` message naming
   the rule (Chat Completions has no error flag, so the text says so);
5. the reply and the tool results are the next turn's new messages. The loop ends on
   a reply without tool calls (the answer) or after ``max_iterations`` requests.

The Engine records ``verify_address``'s outcome as a case fact when its result is
appended, so the rule is checked in code against the session's state, not left to
the model's memory of the instructions. Sessions, traces and memory live in one
SQLite file (``--store DIR``, a temporary folder by default); the same ``--session``
with the same ``--store`` continues a conversation.

Tests run :func:`run` with ``client=openai.OpenAI(http_client=...)`` on a mock
transport; ``base_url`` / ``http_client`` are passed to the SDK client otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxwise import (
    Blocked,
    Engine,
    EngineConfig,
    PolicyGate,
    RequireFact,
    ToolResultBlock,
)
from ctxwise.formats.inputs import decode_input

MODEL = "gpt-5.5"

SYSTEM_PROMPT = """\
You are the support agent of Northwind Outfitters. Answer in two or three sentences.
Use the tools: lookup_order for an order's status; verify_address before any refund,
with the postcode the customer gives; issue_refund only after the address is verified.
If the customer has not given a postcode, ask for it instead of guessing."""

# ------------------------------------------------------------------ the local tools

ORDERS: dict[str, dict[str, Any]] = {
    "4417": {
        "order_id": "4417",
        "status": "delivered",
        "items": ["trail tent (2p)"],
        "total": "129.00 USD",
        "postcode": "94107",
    },
    "5120": {
        "order_id": "5120",
        "status": "in transit",
        "items": ["down jacket"],
        "total": "89.50 USD",
        "postcode": "10001",
    },
}


def lookup_order(order_id: str) -> dict[str, Any]:
    """An order's status and items (the postcode stays private)."""
    order = ORDERS.get(str(order_id).lstrip("#"))
    if order is None:
        return {"status": "not found", "order_id": order_id}
    return {k: v for k, v in order.items() if k != "postcode"}


def verify_address(order_id: str, postcode: str) -> dict[str, Any]:
    """Does ``postcode`` match the order's shipping address?"""
    order = ORDERS.get(str(order_id).lstrip("#"))
    if order is None:
        return {"status": "not found", "order_id": order_id}
    ok = str(postcode).strip() == order["postcode"]
    return {"status": "verified" if ok else "mismatch", "order_id": order_id}


def issue_refund(order_id: str, reason: str = "") -> dict[str, Any]:
    """Refund the order in full."""
    order = ORDERS.get(str(order_id).lstrip("#"))
    if order is None:
        return {"status": "not found", "order_id": order_id}
    return {"status": "refunded", "order_id": order_id, "amount": order["total"], "reason": reason}


TOOLS: dict[str, Callable[..., dict[str, Any]]] = {
    "lookup_order": lookup_order,
    "verify_address": verify_address,
    "issue_refund": issue_refund,
}

# The tool definitions the model sees (Chat Completions: function tools, JSON Schema).
TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look up an order's status, items and total by its order id.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string", "description": "e.g. 4417"}},
                "required": ["order_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "verify_address",
            "description": "Check the postcode the customer gives against the order's address.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}, "postcode": {"type": "string"}},
                "required": ["order_id", "postcode"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "issue_refund",
            "description": "Refund an order in full. Needs a verified address first.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}, "reason": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    },
]

REFUND_RULE = RequireFact(
    name="refund-after-address-check",
    text="Do not issue a refund until verify_address has confirmed the order's address",
    tools=("issue_refund",),
    fact="address_check:{order_id}",
    satisfied_by="verify_address",
)

# ------------------------------------------------------------------ the engine


def build_engine(store_dir: str | Path, *, model: str = MODEL) -> Engine:
    """An Engine on one SQLite file in ``store_dir``, with the refund gate."""
    path = Path(store_dir).resolve() / "ctxwise.db"
    config = EngineConfig(
        model=model,
        render="openai",
        max_tokens=1024,
        budget=30_000,
        store=f"sqlite:///{path}",
        system=SYSTEM_PROMPT,
    )
    return Engine(config, gate=PolicyGate([REFUND_RULE]))


# ------------------------------------------------------------------ the loop


@dataclass
class ToolCall:
    """One tool call the model asked for, and what happened to it."""

    name: str
    input: dict[str, Any]
    status: str
    """``ran``, ``failed`` (it ran and raised), ``blocked`` (by the gate) or ``unknown``."""
    result: str

    @property
    def ran(self) -> bool:
        return self.status in ("ran", "failed")


@dataclass
class AgentRun:
    answer: str
    """The final text (empty when the loop stopped at ``max_iterations``)."""
    stopped: str
    """``"answer"`` or ``"max_iterations"``."""
    iterations: int
    calls: list[ToolCall] = field(default_factory=list)
    session: str = ""


def call_tool(
    engine: Engine,
    session: str,
    name: str,
    tool_input: dict[str, Any],
    tools: Mapping[str, Callable[..., dict[str, Any]]],
) -> tuple[str, str]:
    """Gate, then run one tool call: ``(status, result text)`` (see :class:`ToolCall`)."""
    decision = engine.check_tool(session, name, tool_input)
    if isinstance(decision, Blocked):  # the call does not run; the model is told why
        return "blocked", f"Blocked by policy rule {decision.rule.name!r}: {decision.reason}"
    function = tools.get(name)
    if function is None:
        return "unknown", f"Unknown tool {name!r}"
    try:
        output = function(**tool_input)
    except Exception as exc:  # the model sees the failure and may retry
        return "failed", f"{name} failed: {type(exc).__name__}: {exc}"
    return "ran", json.dumps(output)


def run(
    question: str,
    *,
    client: Any = None,
    base_url: str | None = None,
    http_client: Any = None,
    store_dir: str | Path | None = None,
    session: str = "support",
    model: str = MODEL,
    max_iterations: int = 8,
    tools: Mapping[str, Callable[..., dict[str, Any]]] = TOOLS,
    log: Callable[[str], None] | None = print,
) -> AgentRun:
    """Answer ``question`` with the tools, every call gated by the Engine."""
    if client is None:
        import openai  # extra: pip install -e '.[openai]'

        client = openai.OpenAI(base_url=base_url, http_client=http_client)
    if max_iterations < 1:
        raise ValueError(f"max_iterations must be at least 1, got {max_iterations}")
    say = log or (lambda _line: None)
    with ExitStack() as stack:
        if store_dir is None:
            store_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="ctxwise-agent-"))
        with build_engine(store_dir, model=model) as engine:
            new_messages: list[object] = [question]
            calls: list[ToolCall] = []
            for iteration in range(1, max_iterations + 1):
                result = engine.turn(session, new_messages)
                response = client.chat.completions.create(**result.request, tools=TOOL_SCHEMAS)
                # the response as a ctxwise Message, read as engine.turn reads it
                (reply,) = decode_input(response)
                if not reply.tool_uses:
                    engine.record(session, response)  # the answer joins the session
                    say(reply.text)
                    return AgentRun(reply.text, "answer", iteration, calls, session)
                results = []
                for use in reply.tool_uses:
                    tool_input = dict(use.input)
                    status, text = call_tool(engine, session, use.name, tool_input, tools)
                    calls.append(ToolCall(use.name, tool_input, status, text))
                    say(f"[{status}] {use.name}({tool_input}) -> {text}")
                    results.append(ToolResultBlock(use.id, text, is_error=status != "ran"))
                new_messages = [response, *results]  # the SDK's object, then the results
            # Out of iterations: keep the last reply and its results in the session.
            engine.record(session, new_messages)
            say(f"(stopped after {max_iterations} requests without a final answer)")
            return AgentRun("", "max_iterations", max_iterations, calls, session)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question")
    parser.add_argument("--store", help="folder for the SQLite file (default: a temporary one)")
    parser.add_argument("--session", default="support", help="session id (default: support)")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--max-iterations", type=int, default=8)
    parser.add_argument("--base-url", help="the API's base URL (default: the SDK's)")
    args = parser.parse_args(argv)
    outcome = run(
        args.question,
        base_url=args.base_url,
        store_dir=args.store,
        session=args.session,
        model=args.model,
        max_iterations=args.max_iterations,
    )
    return 0 if outcome.stopped == "answer" else 1


if __name__ == "__main__":
    sys.exit(main())
