"""Policy gates on inputs the first tests did not try (QA, stop 25)."""

from __future__ import annotations

import pytest

from ctxwise import CaseFacts
from ctxwise.policy import PolicyGate, compile_rule, tool_outcome

RULE = "Do not refund order 4417 until the address check is done"
VOCAB = {"refund": "issue_refund", "address check": "address_check"}


@pytest.mark.parametrize(
    "result",
    [
        "Address could not be verified",
        "The address was not confirmed by the carrier",
        "Refund not approved",
        "Postcode is not valid",
        "Verification wasn't successful",
        "Verification wasn\u2019t successful",
        "The check has not yet been completed",
        "Address cannot be verified",
        "This address is no longer valid",
        '{"status": "could not be verified"}',
    ],
)
def test_a_negated_success_word_does_not_satisfy_a_rule(result: str) -> None:
    assert tool_outcome(result) == "failed"
    gate, facts = PolicyGate([compile_rule(RULE, VOCAB)]), CaseFacts()
    gate.observe("address_check", {"order_id": "4417"}, result, facts)
    assert not gate.check("issue_refund", {"order_id": "4417"}, facts)


@pytest.mark.parametrize(
    "result",
    ["Address verified successfully", "Address check passed. Not a PO box.", "confirmed"],
)
def test_success_without_a_negation_still_satisfies(result: str) -> None:
    assert tool_outcome(result) == "ok"
