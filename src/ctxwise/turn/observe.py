"""The observe step: what this turn's messages tell the session.

- a tool result that satisfies a policy rule's condition is recorded as a case fact
  (:meth:`PolicyGate.observe <ctxwise.policy.PolicyGate.observe>`);
- case facts are extracted from the messages (``[facts] extractor``), never from
  harness text (the extractor's own rule);
- standing rules stated in them are captured (``[facts] rules``) and, when
  ``[gates] vocabulary`` reads one as a tool rule, compiled into a gate rule of
  the session;
- a catalog tool the model called stays loaded for the session.

The facts and rules are changed on copies: the loaded session stays as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxwise.errors import UsageError
from ctxwise.messages import block_text
from ctxwise.policy import compile_rule
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import TurnState

__all__ = ["observe"]

_CALLS_LOOKBACK = 50
"""How many earlier messages a tool result's call is looked for in."""


def observe(state: TurnState, ctx: TurnContext) -> TurnState:
    """Update facts, rules, gate rules and loaded tools from ``state.new``."""
    session = state.session
    body = [m for m in state.new if m.role != "system"]
    if not body:
        return state
    facts, rules = session.facts_copy(), session.rules_copy()
    gate_rules = list(session.gate_rules)
    gate = ctx.gate_for(gate_rules)
    before = {f.key: f.value for f in facts}
    rules_before = len(rules)
    first = state.base.log_length
    earlier = session.history[: len(session.history) - len(body)][-_CALLS_LOOKBACK:]
    calls = {b.id: (b.name, b.input) for m in earlier for b in m.tool_uses}
    loaded = list(session.loaded_tools)
    for m in body:
        for b in m.tool_uses:
            calls[b.id] = (b.name, b.input)
            _load_tool(ctx, loaded, b.name)
        for r in m.tool_results:
            if r.tool_use_id in calls:
                name, tool_input = calls[r.tool_use_id]
                gate.observe(name, tool_input, block_text(r), facts, is_error=bool(r.is_error))
    if ctx.extractor is not None:
        facts.update_from_messages(body, offset=first, extractor=ctx.extractor)
    added: list[str] = []
    if ctx.config.facts.rules:
        for text in rules.capture_messages(body, offset=first):
            rule = _compiled(ctx, gate_rules, text)
            if rule is not None:
                gate_rules.append(rule)
                added.append(str(rule["name"]))
    return state.but(
        session=session.but(
            facts=facts,
            rules=rules,
            gate_rules=tuple(gate_rules),
            loaded_tools=tuple(loaded),
        ),
        facts_changed=tuple(
            sorted({*state.facts_changed, *(f.key for f in facts if before.get(f.key) != f.value)})
        ),
        rules_added=(*state.rules_added, *(r.text for r in list(rules)[rules_before:])),
        gates_added=(*state.gates_added, *added),
    )


def _load_tool(ctx: TurnContext, loaded: list[tuple[str, str]], name: str) -> None:
    """A catalog tool the model called stays loaded for the session."""
    cat = ctx.catalog
    if cat is None or name == cat.search_name:
        return
    try:
        tool = cat.find(name)
    except UsageError:
        return
    if tool.key not in loaded and not cat.is_always_loaded(tool):
        loaded.append(tool.key)


def _compiled(
    ctx: TurnContext, gate_rules: list[Mapping[str, Any]], text: str
) -> dict[str, Any] | None:
    """A stated rule as a gate rule of the session, when ``compile_rule`` reads it."""
    vocabulary = ctx.config.gates.vocabulary
    if not vocabulary:
        return None
    taken = {r.name for r in ctx.gate} | {str(r["name"]) for r in gate_rules}
    name = f"stated-{len(gate_rules) + 1}"
    while name in taken:
        name += "+"
    try:
        rule = compile_rule(
            text, vocabulary, id_fields=ctx.config.gates.id_fields or None, name=name
        )
    except UsageError:
        return None  # a standing rule that is not a tool rule stays a pinned rule only
    return rule.to_dict()
