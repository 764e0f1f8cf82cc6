"""The Northwind support session behind ``ctxwise demo``: scripted data only.

A support engineer works one case with an agent: Dana Whitfield's order 4417
went to her old address. Over twelve turns the session has small talk, a code
question, a supervisor's rule, a question about something said at the start
(long since compacted out of the window), and a refund the policy gate holds
until the address check has run.

Only the model is scripted: its replies and tool calls are fixed, and every tool
returns a fixed result, so a run is deterministic. Each turn declares what the
model must be able to read in that turn's request (``needs``); the demo checks
every one against the rendered request. :mod:`ctxwise._demo` drives the script
through :class:`ctxwise.Engine`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CODE",
    "KB",
    "REFUND",
    "RULE",
    "SCRIPT",
    "SESSION_ID",
    "STANDING_RULE",
    "STYLE",
    "SYSTEM",
    "TOOL_DOCS",
    "Call",
    "ScriptTurn",
]

SESSION_ID = "northwind-4417"
SYSTEM = (
    "You are a support agent for Northwind Traders, working with a support engineer. Use the "
    "tools to look things up; never promise what a tool has not confirmed. Quote order numbers "
    "exactly."
)
RULE = "Do not refund order 4417 until the address check is done."
"""The supervisor's words: a standing rule in every later window, and a gate rule."""
STANDING_RULE = "Please never call Dana before 9am, she works night shifts."
"""The engineer's note: a standing rule the model must see on every later turn."""
REFUND = ("issue_refund", {"order_id": "4417"})
"""The call the policy gate holds until ``verify_address`` has passed."""


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

_CUSTOMER = {
    "customer_id": "C-20931",
    "name": "Dana Whitfield",
    "email": "dana.whitfield@example.com",
    "since": "2019-04-11",
    "tier": "gold",
    "delivery_note": "If Dana is out, neighbour Mrs. Okafor at 504 Alder St takes in her parcels.",
}

# -- the sources: what a route may load ---------------------------------------

STYLE = "Small talk: answer in one friendly sentence and steer back to the case."
"""The light source: all a chitchat turn needs."""

KB = "\n\n".join(
    f"Policy RF-{100 + i}: When a parcel is delivered to an address the customer changed after "
    f"checkout, confirm the change date against the order date, open a carrier trace (form "
    f"CT-{20 + i}) and wait up to {3 + i} business days before offering a replacement or a "
    "refund. Refunds go to the original payment method; gift cards are refunded as store credit."
    for i in range(6)
)
"""The support knowledge base (refund and delivery policy)."""

CODE = '''# northwind/support/address.py
def verify_address(order_id: str, db: Database) -> AddressCheck:
    """Compare the order's ship_to with the customer's address on the order date."""
    order = db.orders[order_id]
    history = db.address_history(order["customer_id"])
    on_date = [a for a in history if a["from"] <= order["placed"]][-1]
    shipped_to = order["shipping"]["ship_to"]   # KeyError: orders keep ship_to at top level
    status = "ok" if normalize(shipped_to) == normalize(on_date["address"]) else "mismatch"
    return AddressCheck(order_id, status, shipped_to, on_date["address"])


def normalize(address: str) -> str:
    return " ".join(address.lower().replace(",", " ").split())


# northwind/support/refunds.py
def issue_refund(order_id: str, db: Database, gateway: Gateway) -> Refund:
    payment = db.payments[order_id]
    if payment["refunded"]:
        raise AlreadyRefunded(order_id)
    return gateway.refund(payment["charge_id"], payment["captured"])
'''
"""The code snippet source: the support tooling the engineer asks about."""

TOOL_DOCS = "\n".join(
    (
        "Tools available to the support agent:",
        "- lookup_order(order_id): the order as JSON (items, payment, ship_to, carrier, "
        "tracking_number).",
        "- get_customer(customer_id): the customer's record (contact, tier, delivery note).",
        "- track_shipment(tracking_number): carrier scan events, newest last.",
        "- get_address_history(customer_id): every address with the date it took effect.",
        "- search_kb(query): policy paragraphs from the support knowledge base.",
        "- open_carrier_trace(tracking_number, form): opens a trace with the carrier; returns "
        "trace_id and eta_days.",
        "- verify_address(order_id): runs northwind/support/address.py; status is ok when the "
        "order shipped to the address the customer had on the order date.",
        "- issue_refund(order_id): refunds the captured amount to the original payment method. "
        "Gated: the address check must have passed.",
        "Every tool returns JSON; on failure the JSON has status 'error' and a message.",
    )
)
"""The tool-docs source."""

# -- the script ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call the scripted model makes, and what the tool returns when the
    policy gate lets it run."""

    tool: str
    input: dict[str, Any]
    output: str


@dataclass(frozen=True, slots=True)
class ScriptTurn:
    """One turn: what the model did after the previous request (replies and tool
    calls, in order), then the engineer's next message (either part may be
    empty), and the strings the model must see in this turn's request."""

    model: tuple[Call | str, ...] = ()
    user: str | None = None
    needs: tuple[str, ...] = ()
    note: str = ""


SCRIPT: tuple[ScriptTurn, ...] = (
    ScriptTurn(
        user=(
            "New case. Dana Whitfield (dana.whitfield@example.com) says order 4417, placed on "
            "2026-11-02, never arrived."
        ),
        needs=("4417", "dana.whitfield@example.com", "2026-11-02"),
        note="case facts",
    ),
    ScriptTurn(
        model=(
            Call("lookup_order", {"order_id": "4417"}, _json(_ORDER)),
            Call("get_customer", {"customer_id": "C-20931"}, _json(_CUSTOMER)),
            Call(
                "track_shipment",
                {"tracking_number": "1Z999AA10123456784"},
                _json({"status": "delivered", "delivered": "2026-11-14", "events": _events(24, 4)}),
            ),
            "UPS shows order 4417 delivered on 2026-11-14 to 18 Harbor Rd, Portland: the address "
            "on the order, which may be her old one.",
        ),
        user=STANDING_RULE,
        needs=("4417", STANDING_RULE),
        note="standing rule",
    ),
    ScriptTurn(
        model=("Noted: no calls to Dana before 9am.",),
        user="Thanks, you're a star! Hope your day is going well.",
        needs=("4417", STANDING_RULE),
        note="chitchat",
    ),
    ScriptTurn(
        model=("It is going well, thank you. Back to order 4417?",),
        user=(
            "Quick code question: verify_address raises KeyError: 'shipping' on this order. "
            "What is wrong in the code?"
        ),
        needs=('order["shipping"]["ship_to"]', "verify_address(order_id)", "4417"),
        note="code question",
    ),
    ScriptTurn(
        model=(
            "verify_address reads order['shipping']['ship_to'], but orders keep ship_to at the "
            "top level: read order['ship_to'] instead.",
            Call(
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
            Call("search_kb", {"query": "parcel delivered to previous address"}, KB),
            "She changed her address on 2026-11-03, the day after the order.",
        ),
        user="So the parcel went to her old address. What does our policy say?",
        needs=("4417", "2026-11-03", STANDING_RULE),
        note="policy question",
    ),
    ScriptTurn(
        model=(
            "Policy RF-100: confirm the change date, open a carrier trace, then refund.",
            Call(
                "open_carrier_trace",
                {"tracking_number": "1Z999AA10123456784", "form": "CT-20"},
                _json({"trace_id": "TR-77120", "opened": "2026-11-16", "eta_days": 3}),
            ),
            *(
                Call(
                    "track_shipment",
                    {"tracking_number": "1Z999AA10123456784"},
                    _json({"status": "delivered", "events": _events(30, 4 + k)}),
                )
                for k in range(2)
            ),
            "Carrier trace TR-77120 is open; UPS still reports the parcel delivered.",
        ),
        user="This is Marta Olsen, the support supervisor, joining the case. " + RULE,
        needs=("4417", RULE, STANDING_RULE),
        note="supervisor's rule",
    ),
    ScriptTurn(
        model=("Understood, Marta. No refund for order 4417 before the address check.",),
        user="Remind me: who takes in Dana's parcels when she is out?",
        needs=("Okafor", "4417", RULE),
        note="memory recall",
    ),
    ScriptTurn(
        model=("Her neighbour, Mrs. Okafor at 504 Alder St, takes them in.",),
        user="Dana is upset. Refund order 4417 now, the full $84.20.",
        needs=("4417", RULE),
        note="refund asked",
    ),
    ScriptTurn(
        model=(Call(*REFUND, _json({"status": "refunded", "refund_id": "R-5531"})),),
        needs=("Blocked by policy", RULE),
        note="refund blocked",
    ),
    ScriptTurn(
        model=(
            Call(
                "verify_address",
                {"order_id": "4417"},
                _json({"order_id": "4417", "status": "ok", "address": "502 Alder St"}),
            ),
        ),
        needs=('"status": "ok"', RULE),
        note="address check",
    ),
    ScriptTurn(
        model=(
            Call(
                *REFUND,
                _json({"status": "refunded", "refund_id": "R-5531", "amount": "84.20 USD"}),
            ),
        ),
        needs=("R-5531", "4417"),
        note="refund runs",
    ),
    ScriptTurn(
        model=("Refund R-5531 of 84.20 USD for order 4417 is on its way to Dana's card.",),
        user="Great, thanks a lot! Bye.",
        needs=("4417", STANDING_RULE),
        note="chitchat",
    ),
)
