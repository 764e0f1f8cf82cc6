"""The Northwind scenario: a rule stated once survives compaction and is enforced in code.

A support agent works on order 4417 for Northwind Traders. At step 12 a
supervisor says "Do not refund order 4417 until the address check is done". The
conversation keeps growing with tool output; at step 24 it is compacted. At step
25 the (scripted) model proposes ``issue_refund(order_id="4417")``: the policy
gate blocks it and quotes the rule. At step 26 the model runs
``address_check(order_id="4417")``, which returns ok; at step 27 the refund is
allowed.

Every part is the library's own: :class:`~ctxwise.memory.Rules` captures the
supervisor's sentence from the user turn, :func:`~ctxwise.policy.compile_rule`
turns it into a :class:`~ctxwise.policy.RequireFact` rule in a
:class:`~ctxwise.policy.PolicyGate`, :class:`~ctxwise.memory.CaseFacts` collects the
order's facts from every message and tool result (the ``"support"`` extractor preset:
order ids, amounts and statuses are domain facts the default prose extractor leaves
out), :func:`~ctxwise.compaction.compact` archives the
transcript to a store and replaces the older range with a summary while the rules
and facts move to the system part, and the window sent at every later step is
rendered as an Anthropic request, where the rule is checked verbatim.

Only the model is scripted: its tool calls are fixed, so the run is deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxwise.compaction import Compaction, compact
from ctxwise.formats import anthropic as anthropic_format
from ctxwise.memory.facts import CaseFacts, FactExtractor, Rules
from ctxwise.memory.store import InMemoryStore, Store
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Transcript
from ctxwise.policy import Blocked, PolicyGate, compile_rule
from ctxwise.tokens import CharCounter, TokenCounter

__all__ = [
    "RULE",
    "SUPERVISOR_STEP",
    "TOOL_VOCABULARY",
    "NorthwindRun",
    "NorthwindStep",
    "run_northwind",
]

SYSTEM = (
    "You are a support agent for Northwind Traders. Use the tools to look things up; "
    "never promise what a tool has not confirmed. Quote order numbers exactly."
)
RULE = "Do not refund order 4417 until the address check is done."
"""The supervisor's words, which must reach the model verbatim at every later step."""
SUPERVISOR_STEP = 12
COMPACTION_STEP = 24
TOOL_VOCABULARY = {
    "refund": "issue_refund",
    "address check": "address_check",
}
"""Phrases a stated rule may use → the agent's tool names (for :func:`compile_rule`)."""
# the scenario opts into every kind, tool results included: order ids and statuses
_SUPPORT_FACTS = FactExtractor.preset("support")


def _json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True)


def _events(n: int, start_day: int) -> list[dict[str, str]]:
    places = ["Tacoma WA", "Seattle WA", "Portland OR", "Salem OR", "Eugene OR"]
    return [
        {
            "at": f"2026-11-{start_day + i // 3:02d}T{8 + (i * 5) % 10:02d}:15:00Z",
            "location": places[i % len(places)],
            "status": ["in transit", "arrived at facility", "departed facility"][i % 3],
            "scan_id": f"SC-{880100 + i * 37}",
        }
        for i in range(n)
    ]


_ORDER = {
    "order_id": "4417",
    "customer_id": "C-20931",
    "placed": "2026-11-02",
    "status": "delivered",
    "total": "84.20 USD",
    "payment": {"method": "visa", "last4": "4242", "captured": "84.20 USD"},
    "items": [
        {"sku": "NW-TEA-0113", "name": "Ceramic teapot, 1.2 l", "qty": 1, "price": "46.00 USD"},
        {"sku": "NW-CUP-0207", "name": "Stoneware cup", "qty": 2, "price": "14.60 USD"},
        {"sku": "NW-SHP-STD", "name": "Standard shipping", "qty": 1, "price": "9.00 USD"},
    ],
    "ship_to": "18 Harbor Rd, Portland, OR 97209",
    "carrier": "UPS",
    "tracking_number": "1Z999AA10123456784",
}


def _script() -> list[tuple[str, Any]]:
    """The scripted steps: ("user", text) or ("call", (tool, input, result)) or
    ("say", text) for an assistant reply. Steps are numbered from 1."""
    return [
        (
            "user",
            "Hi, this is Dana Whitfield, customer C-20931. My order 4417 never arrived. "
            "It was placed on November 2 and I paid $84.20.",
        ),
        ("call", ("lookup_order", {"order_id": "4417"}, _json(_ORDER))),
        (
            "call",
            (
                "get_customer",
                {"customer_id": "C-20931"},
                _json(
                    {
                        "customer_id": "C-20931",
                        "name": "Dana Whitfield",
                        "email": "dana.whitfield@example.com",
                        "since": "2019-04-11",
                        "tier": "gold",
                        "address": "502 Alder St, Apt 3, Portland, OR 97205",
                        "address_updated": "2026-11-03",
                    }
                ),
            ),
        ),
        (
            "call",
            (
                "track_shipment",
                {"tracking_number": "1Z999AA10123456784"},
                _json({"status": "delivered", "delivered": "2026-11-14", "events": _events(24, 4)}),
            ),
        ),
        (
            "say",
            "UPS shows order 4417 delivered on 2026-11-14 to 18 Harbor Rd, Portland. "
            "Is that your address?",
        ),
        (
            "user",
            "That's my old address! I changed it to 502 Alder St on November 3, the day after "
            "I ordered. I want a refund of $84.20.",
        ),
        (
            "call",
            (
                "get_address_history",
                {"customer_id": "C-20931"},
                _json(
                    [
                        {"address": "18 Harbor Rd, Portland, OR 97209", "from": "2019-04-11"},
                        {
                            "address": "502 Alder St, Apt 3, Portland, OR 97205",
                            "from": "2026-11-03",
                        },
                    ]
                ),
            ),
        ),
        (
            "call",
            (
                "search_kb",
                {"query": "refund parcel delivered to previous address"},
                "\n\n".join(
                    f"Policy RF-{100 + i}: When a parcel is delivered to an address the customer "
                    f"changed after checkout, confirm the change date against the order date, "
                    f"open a carrier trace (form CT-{20 + i}) and wait up to {3 + i} business days "
                    "before offering a replacement or a refund. Refunds of gift cards go to the "
                    "original card."
                    for i in range(8)
                ),
            ),
        ),
        (
            "say",
            "Our policy is to confirm the address change and open a carrier trace before a refund "
            "or a replacement. I have started that.",
        ),
        ("user", "Please just refund me, it's been two weeks."),
        (
            "call",
            (
                "lookup_payment",
                {"order_id": "4417"},
                _json({"order_id": "4417", "captured": "84.20 USD", "refundable": "84.20 USD"}),
            ),
        ),
        (
            "user",
            "This is Marta Olsen, the support supervisor, joining the case. " + RULE,
        ),
        ("say", "Understood, Marta. I will not refund order 4417 before the address check."),
        (
            "call",
            (
                "open_carrier_trace",
                {"tracking_number": "1Z999AA10123456784", "form": "CT-20"},
                _json({"trace_id": "TR-77120", "opened": "2026-11-16", "eta_days": 3}),
            ),
        ),
        *[
            (
                "call",
                (
                    "track_shipment",
                    {"tracking_number": "1Z999AA10123456784"},
                    _json({"status": "delivered", "events": _events(30, 4 + k)}),
                ),
            )
            for k in range(3)
        ],
        ("user", "Any news? Can you at least send a replacement teapot?"),
        (
            "call",
            (
                "check_inventory",
                {"sku": "NW-TEA-0113"},
                _json({"sku": "NW-TEA-0113", "in_stock": 37, "warehouse": "PDX-2"}),
            ),
        ),
        ("say", "The teapot NW-TEA-0113 is in stock (37 in PDX-2); a replacement is possible."),
        ("user", "I'd rather have the money back, thanks."),
        (
            "call",
            (
                "list_open_tickets",
                {"customer_id": "C-20931"},
                _json(
                    [
                        {"ticket": f"T-{5300 + i}", "topic": "order 4417", "opened": "2026-11-15"}
                        for i in range(12)
                    ]
                ),
            ),
        ),
        ("say", "I have consolidated your tickets under T-5300."),
        # step 24 is the compaction; steps 25-27 follow it
    ]


@dataclass(frozen=True, slots=True)
class NorthwindStep:
    """One step: who acted, what happened, and the transcript size after it."""

    step: int
    actor: Literal["user", "agent", "tool", "gate", "ctxwise"]
    event: str
    tokens: int
    allowed: bool | None = None


@dataclass(frozen=True, slots=True)
class NorthwindRun:
    """The whole run: every step, the compaction, the gate's decisions and the
    final transcript. ``rule_in_window`` lists, for every step after the compaction,
    whether the rendered request carried the rule verbatim."""

    steps: tuple[NorthwindStep, ...]
    compaction: Compaction
    transcript: Transcript
    rules: Rules
    facts: CaseFacts
    gate: PolicyGate
    rule_in_window: tuple[bool, ...]
    blocked_reason: str
    messages_before_compaction: int
    store: Store = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": [
                {
                    "step": s.step,
                    "actor": s.actor,
                    "event": s.event,
                    "tokens": s.tokens,
                    **({} if s.allowed is None else {"allowed": s.allowed}),
                }
                for s in self.steps
            ],
            "compaction": {
                k: v
                for k, v in self.compaction.to_dict().items()
                if k not in ("summary", "facts", "rules")
            },
            "rules": [r.text for r in self.rules],
            "facts": {f.key: f.value for f in self.facts},
            "gate": self.gate.to_dict(),
            "blocked_reason": self.blocked_reason,
            "rule_in_window_after_compaction": all(self.rule_in_window),
        }


def _window_text(t: Transcript) -> str:
    """Everything the model would read: the rendered Anthropic request as JSON."""
    return json.dumps(anthropic_format.encode_request(t), ensure_ascii=False)


def run_northwind(
    *,
    counter: TokenCounter | None = None,
    store: Store | None = None,
    keep_tail_tokens: int = 1_500,
    summary_tokens: int = 600,
    on_step: Callable[[NorthwindStep], None] | None = None,
) -> NorthwindRun:
    """Play the scenario; see the module doc. ``store`` receives the archive
    (default: a fresh :class:`InMemoryStore`)."""
    ctr = counter if counter is not None else CharCounter()
    archive = store if store is not None else InMemoryStore()
    messages: list[Message] = [Message.text_message("system", SYSTEM)]
    facts, rules, gate = CaseFacts(), Rules(), PolicyGate()
    steps: list[NorthwindStep] = []
    next_id = 0

    def record(step: int, actor: Any, event: str, allowed: bool | None = None) -> None:
        s = NorthwindStep(step, actor, event, ctr.count_messages(messages), allowed)
        steps.append(s)
        if on_step is not None:
            on_step(s)

    def observe(new: Sequence[Message]) -> None:
        offset = len(messages) - len(new)
        facts.update_from_messages(new, offset=offset, extractor=_SUPPORT_FACTS)
        for text in rules.capture_messages(new, offset=offset):
            gate.add(compile_rule(text, TOOL_VOCABULARY))

    def call(step: int, tool: str, tool_input: dict[str, Any], run: Callable[[], str]) -> bool:
        nonlocal next_id
        next_id += 1
        use = ToolUseBlock(f"toolu_{next_id:04d}", tool, tool_input)
        messages.append(Message("assistant", (use,)))
        decision = gate.check(tool, tool_input, facts)
        if isinstance(decision, Blocked):
            result = ToolResultBlock(use.id, f"Blocked by policy: {decision.reason}", True)
            messages.append(Message("user", (result,)))
            observe(messages[-2:])
            record(step, "gate", f"{tool}({_args(tool_input)}) blocked: {decision.reason}", False)
            return False
        output = run()
        messages.append(Message("user", (ToolResultBlock(use.id, output),)))
        observe(messages[-2:])
        gate.observe(tool, tool_input, output, facts)
        record(step, "tool", f"{tool}({_args(tool_input)})", True)
        return True

    for step, (kind, payload) in enumerate(_script(), start=1):
        if kind == "user":
            messages.append(Message.text_message("user", payload))
            observe(messages[-1:])
            record(step, "user", payload)
        elif kind == "say":
            messages.append(Message("assistant", (TextBlock(payload),)))
            observe(messages[-1:])
            record(step, "agent", payload)
        else:
            tool, tool_input, output = payload
            call(step, tool, tool_input, _returns(output))

    # step 24: the window is compacted; rules and facts move to the system part
    messages.append(Message.text_message("user", "Is my refund coming? Please check again."))
    observe(messages[-1:])
    before = Transcript(tuple(messages), format="anthropic")
    result = compact(
        before,
        keep_tail_tokens=keep_tail_tokens,
        summary_tokens=summary_tokens,
        facts=facts,
        rules=rules,
        store=archive,
        counter=ctr,
    )
    messages[:] = list(result.transcript.messages)
    record(
        COMPACTION_STEP,
        "ctxwise",
        f"compacted {result.tokens_before:,} → {result.tokens_after:,} tokens: "
        f"{result.summarized_messages} messages summarized, archive {result.archive_id}",
    )
    in_window = [RULE in _window_text(result.transcript)]

    # step 25: the model proposes the refund; the gate blocks it with the rule
    refund = {"order_id": "4417", "amount": "84.20"}
    call(25, "issue_refund", refund, lambda: "refund issued")
    blocked_reason = steps[-1].event
    in_window.append(RULE in _window_text(Transcript(tuple(messages))))
    # step 26: the address check passes
    call(
        26,
        "address_check",
        {"order_id": "4417"},
        lambda: _json({"order_id": "4417", "status": "ok", "address": "502 Alder St"}),
    )
    in_window.append(RULE in _window_text(Transcript(tuple(messages))))
    # step 27: the refund is allowed now
    call(
        27,
        "issue_refund",
        refund,
        lambda: _json({"status": "refunded", "refund_id": "R-5531", "amount": "84.20 USD"}),
    )
    in_window.append(RULE in _window_text(Transcript(tuple(messages))))
    return NorthwindRun(
        steps=tuple(steps),
        compaction=result,
        transcript=Transcript(tuple(messages), format="anthropic"),
        rules=rules,
        facts=facts,
        gate=gate,
        rule_in_window=tuple(in_window),
        blocked_reason=blocked_reason,
        messages_before_compaction=len(before.messages),
        store=archive,
    )


def _returns(output: str) -> Callable[[], str]:
    return lambda: output


def _args(tool_input: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in tool_input.items())
