"""An escalation brief: what a human taking over a case must know, without the transcript.

:func:`escalation_brief` builds it from the case facts and the transcript, and
writes nothing a transcript does not say: every line is a fact ctxwise extracted
(with where it was stated) or a sentence quoted from a message (with its
position). Its parts:

- **customer**: the customer's ids and contact (``user_id``, ``email`` facts);
- **case**: every other case fact (order, reservation, flight, tracking ids,
  dates, statuses) and the **amounts**: ``amount`` facts, and amounts in message
  sentences about money that changed or is owed (``refund``, ``charge``, ``paid``,
  ``fee``, ``compensation``, ``credit``, ``balance``, ``total``, ``cost``), in
  order, each once however it is spelled (``$129``, ``$129.00`` and ``USD 129.00``
  are one amount, listed as first seen); prices in tool results and in list items (options offered)
  are not amounts of the case;
- **problem**: the customer's first message, quoted (what they came with);
- **cause**: sentences (not questions) that state a cause (``because``, ``due to``, ``caused
  by``, ``root cause``, ``the reason``, ``since the``), from the assistant's
  messages and the tool results, latest first; none found is said, not guessed;
- **tried**: every tool call in order, with its input and its outcome (ok, or the
  error's first line), and the calls the policy gates blocked;
- **recommended action**: the sentences that propose an action (``recommend``,
  ``should``, ``next step``, ``escalat``, ``please``, ``need to``, ``will need``,
  ``suggest``) in the latest assistant message that has any (none: said so); and
  the last customer message when no assistant reply follows it (the open
  question).

Facts come from the given :class:`~ctxwise.memory.facts.CaseFacts` (an Engine
session's, say), or are extracted here with the ``"support"`` preset.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from ctxwise.memory.facts import CaseFacts, FactExtractor
from ctxwise.messages import Message, TextBlock, Transcript, block_text

__all__ = ["Attempt", "EscalationBrief", "Quote", "escalation_brief"]

_CAUSE = re.compile(
    r"\b(because|due to|caused by|root cause|the reason|since the|as a result of)\b", re.I
)
_ACTION = re.compile(
    r"\b(recommend|should|next step|escalat|please|need to|will need|suggest)\w*", re.I
)
_MONEY = re.compile(
    r"\b(refund|charg|paid|pay|fee|compensat|credit|balance|total|cost|owe)\w*", re.I
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_AMOUNT = re.compile(
    r"(?:[$€£]\s?\d[\d,]*(?:\.\d{1,2})?|\b\d[\d,]*(?:\.\d{1,2})?\s?(?:USD|EUR|GBP|dollars)\b)"
)
_CURRENCY = {"$": "USD", "€": "EUR", "£": "GBP", "usd": "USD", "eur": "EUR", "gbp": "GBP"}
_CURRENCY["dollars"] = "USD"
_AMOUNT_PARTS = re.compile(
    r"^\s*([$€£]|(?:USD|EUR|GBP)\b)?\s?(\d[\d,]*(?:\.\d+)?)\s?(USD|EUR|GBP|dollars)?\s*$", re.I
)
_CUSTOMER_KEYS = ("user_id", "email")
_MAX_QUOTE = 400


@dataclass(frozen=True, slots=True)
class Quote:
    """A sentence (or message) quoted verbatim, with the message it is from."""

    text: str
    position: int
    role: str


@dataclass(frozen=True, slots=True)
class Attempt:
    """One tool call: its name, input, and outcome (``ok``, ``error`` or
    ``no result``), with the result's first line."""

    tool: str
    input: str
    outcome: str
    result: str
    position: int


@dataclass(frozen=True, slots=True)
class EscalationBrief:
    """See the module docstring; :meth:`render` writes it for a person."""

    customer: tuple[tuple[str, str], ...]
    case: tuple[tuple[str, str], ...]
    amounts: tuple[str, ...]
    problem: Quote | None
    cause: tuple[Quote, ...]
    tried: tuple[Attempt, ...]
    blocked: tuple[str, ...]
    recommended: tuple[Quote, ...]
    open_question: Quote | None

    def render(self) -> str:
        """The brief as Markdown."""

        def rows(pairs: Sequence[tuple[str, str]]) -> list[str]:
            return [f"- {k}: {v}" for k, v in pairs] or ["- (none stated)"]

        def quotes(items: Sequence[Quote]) -> list[str]:
            return [f"- {q.text} (message {q.position + 1}, {q.role})" for q in items]

        out = ["# Escalation brief", "", "## Customer", *rows(self.customer)]
        out += ["", "## Case", *rows(self.case)]
        out += ["", "## Amounts", *([f"- {a}" for a in self.amounts] or ["- (none stated)"])]
        out += ["", "## Problem"]
        out += quotes([self.problem]) if self.problem else ["- (no customer message)"]
        out += ["", "## Cause"]
        out += quotes(self.cause) or ["- (no message states a cause)"]
        out += ["", "## What was tried"]
        out += [
            f"{i}. {a.tool} {a.input} → {a.outcome}" + (f": {a.result}" if a.result else "")
            for i, a in enumerate(self.tried, 1)
        ] or ["- (no tool was called)"]
        out += [f"- blocked by policy: {b}" for b in self.blocked]
        out += ["", "## Recommended action"]
        out += quotes(self.recommended) or ["- (none proposed)"]
        if self.open_question is not None:
            out += ["", "## Open question from the customer", *quotes([self.open_question])]
        return "\n".join(out) + "\n"


def _amount_key(text: str) -> tuple[str, str]:
    """What an amount is, whatever its spelling: ``$120``, ``$120.00``, ``USD 120``,
    ``120 USD`` and ``120.00 dollars`` are one amount; text that is not an amount is
    itself."""
    m = _AMOUNT_PARTS.match(text)
    if m is None or (m.group(1) and m.group(3)) or not (m.group(1) or m.group(3)):
        return ("", " ".join(text.split()))
    currency = _CURRENCY[(m.group(1) or m.group(3)).lower()]
    return (currency, format(Decimal(m.group(2).replace(",", "")).normalize(), "f"))


def _distinct_amounts(amounts: Sequence[str]) -> tuple[str, ...]:
    """Each amount once, in first-seen order and spelling."""
    seen: dict[tuple[str, str], str] = {}
    for a in amounts:
        seen.setdefault(_amount_key(a), " ".join(a.split()))
    return tuple(seen.values())


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text.replace("\n", " ")) if s.strip()]


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_QUOTE else text[: _MAX_QUOTE - 1].rstrip() + "…"


def _own_text(m: Message) -> str:
    return "\n".join(b.text for b in m.content if isinstance(b, TextBlock)).strip()


def escalation_brief(
    transcript: Transcript | Sequence[Message],
    facts: CaseFacts | None = None,
    *,
    blocked: Sequence[str] = (),
) -> EscalationBrief:
    """The brief for ``transcript`` (see the module docstring). ``blocked``: what the
    policy gates refused (their reasons), as the caller recorded them."""
    messages = list(transcript.messages if isinstance(transcript, Transcript) else transcript)
    if facts is None:
        facts = CaseFacts()
        facts.update_from_messages(messages, extractor=FactExtractor.preset("support"))
    items = [(f.key, f.value) for f in facts]
    customer = tuple((k, v) for k, v in items if k in _CUSTOMER_KEYS)
    case = tuple((k, v) for k, v in items if k not in _CUSTOMER_KEYS and k != "amount")
    amounts = [v for k, v in items if k == "amount"]
    problem = None
    cause: list[Quote] = []
    tried: list[Attempt] = []
    calls: dict[str, int] = {}
    for pos, m in enumerate(messages):
        if m.role == "system":
            continue
        text = _own_text(m)
        if m.role == "user" and text and problem is None:
            problem = Quote(_clip(text), pos, "customer")
        for s in _sentences(text):
            if m.role == "assistant" and _CAUSE.search(s) and not s.endswith("?"):
                cause.append(Quote(_clip(s), pos, "assistant"))
        for line in text.splitlines():
            if _LIST_ITEM.match(line):
                continue  # a list of options, not what the case owes
            money = [s for s in _sentences(line) if _MONEY.search(s)]
            amounts += [a for s in money for a in _AMOUNT.findall(s)]
        for use in m.tool_uses:
            calls[use.id] = len(tried)
            shown = json.dumps(use.input, ensure_ascii=False, sort_keys=True)
            tried.append(Attempt(use.name, _clip(shown), "no result", "", pos))
        for result in m.tool_results:
            body = block_text(result).strip()
            for s in _sentences(body):
                if _CAUSE.search(s) and not s.endswith("?"):
                    cause.append(Quote(_clip(s), pos, "tool result"))
            at = calls.get(result.tool_use_id)
            if at is not None:
                first = body.splitlines()[0] if body else ""
                a = tried[at]
                outcome = "error" if result.is_error or body.lower().startswith("error") else "ok"
                tried[at] = Attempt(a.tool, a.input, outcome, _clip(first)[:160], a.position)
    replies = [(i, m) for i, m in enumerate(messages) if m.role == "assistant" and _own_text(m)]
    recommended: list[Quote] = []
    for at, reply in reversed(replies):
        picked = [s for s in _sentences(_own_text(reply)) if _ACTION.search(s)]
        if picked:
            recommended = [Quote(_clip(s), at, "assistant") for s in picked]
            break
    open_question = None
    users = [(i, m) for i, m in enumerate(messages) if m.role == "user" and _own_text(m)]
    if users and (not replies or users[-1][0] > replies[-1][0]):
        i, m = users[-1]
        open_question = Quote(_clip(_own_text(m)), i, "customer")
    return EscalationBrief(
        customer,
        case,
        _distinct_amounts(amounts),
        problem,
        tuple(reversed(cause)),
        tuple(tried),
        tuple(blocked),
        tuple(recommended),
        open_question,
    )
