"""A long scripted agent session, for replay checks and benchmarks (not API).

:func:`scripted_session` writes ``turns`` rounds of a support-and-coding agent:
a user message, an assistant tool call, its result, and the assistant's reply.
Tool results take their sizes from ``sizes`` (pass the real sessions' tool
result sizes, in characters) in a seeded order, so the session is as heavy as the
real ones; every tenth user message states a case fact (an order number, an
e-mail address, a date) and every 25th a standing rule, so a replay can check
that each stays pinned after compaction. No wall clock: timestamps count from a
fixed start by one minute per message.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Transcript

__all__ = ["scripted_session"]

_TOOLS = ("Bash", "Read", "Grep", "lookup_order")
_RULES = (
    "Never deploy on Fridays.",
    "Always run the tests before a commit.",
    "From now on, answer in short bullet points.",
    "Never share a customer's phone number.",
    "Always CC support-leads@example.com on refunds.",
    "Don't ever force-push to main.",
    "Remember that I am on call until 18:00.",
    "Going forward, log every refund in the ledger.",
)
_WORDS = [
    "order",
    "shipped",
    "invoice",
    "refund",
    "carrier",
    "parcel",
    "address",
    "warehouse",
    "status",
    "tracking",
    "build",
    "test",
    "module",
    "function",
    "error",
    "warning",
    "passed",
    "failed",
    "config",
    "deploy",
    "branch",
    "commit",
    "review",
    "latency",
    "request",
    "response",
    "cache",
    "token",
    "window",
    "budget",
    "summary",
]


def _filler(rng: random.Random, chars: int) -> str:
    lines: list[str] = []
    total = 0
    n = 0
    while total < chars:
        n += 1
        line = f"{n:5d}  " + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14)))
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)[:chars]


def scripted_session(turns: int, sizes: Sequence[int], *, seed: int = 0) -> Transcript:
    """``turns`` rounds (see the module docstring); ``sizes`` must not be empty."""
    if turns < 1:
        raise ValueError("turns must be at least 1")
    if not sizes:
        raise ValueError("sizes must hold at least one tool result size")
    rng = random.Random(seed)
    pool = [max(1, int(s)) for s in sizes]
    messages: list[Message] = []
    minute = 0

    def stamp() -> str:
        nonlocal minute
        minute += 1
        return f"2026-01-05T{9 + minute // 60 % 12:02d}:{minute % 60:02d}:00Z"

    for i in range(turns):
        order = 4000 + i * 7 % 997
        ask = f"Step {i + 1}: please check the status of order {order}"
        if i % 10 == 0:
            ask += (
                f". My order number is {order}, my email is customer{i}@example.com and "
                f"the delivery was due on 2026-02-{i % 27 + 1:02d}"
            )
        if i % 25 == 0:
            ask += ". " + _RULES[(i // 25) % len(_RULES)]
        text = ask if ask.endswith(".") else ask + "."
        messages.append(Message("user", (TextBlock(text),), timestamp=stamp()))
        tool = _TOOLS[i % len(_TOOLS)]
        call_id = f"toolu_{seed}_{i:04d}"
        messages.append(
            Message(
                "assistant",
                (
                    TextBlock(f"Looking into order {order} with {tool}."),
                    ToolUseBlock(call_id, tool, {"order_id": str(order), "step": i + 1}),
                ),
                timestamp=stamp(),
            )
        )
        result = _filler(rng, rng.choice(pool))
        messages.append(Message("user", (ToolResultBlock(call_id, result),), timestamp=stamp()))
        messages.append(
            Message(
                "assistant",
                (TextBlock(f"Order {order}: step {i + 1} checked; nothing blocks it."),),
                timestamp=stamp(),
            )
        )
    return Transcript(tuple(messages), source=f"scripted-{turns}-turns-seed-{seed}")
