"""The tools step: this turn's tool definitions, counted.

The tools the caller gave the turn (``Engine.turn(..., tools=...)``, any
provider's shape, :mod:`ctxwise.tools.given`) first, as given, then ctxwise's own
tools (``fetch_more`` when results are stored, Anthropic's memory tool when it is
on), then the catalog's: in ``client`` mode the always-loaded
tools, those the session loaded and those the routed query finds (with
``tool_search`` for the rest), in ``server`` mode the always-loaded tools and
Anthropic's server-side tool search. Every definition the request sends is
counted, and its tokens come out of the budget: a request never carries a
definition the budget did not see.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxwise.errors import UsageError
from ctxwise.tokens import TokenCounter
from ctxwise.tools.catalog import ToolCatalog, ToolDef
from ctxwise.tools.cursors import fetch_more_tool
from ctxwise.tools.given import NO_TOOLS, GivenTools, render_given
from ctxwise.trace import ToolsTrace
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import SessionView, ToolsPlan, TurnState

__all__ = ["MEMORY_TOOL", "as_openai", "loaded_tools", "plan_tools", "tools"]

MEMORY_TOOL = {"type": "memory_20250818", "name": "memory"}
"""Anthropic's memory tool, as a request names it."""


def as_openai(tool: Mapping[str, Any]) -> dict[str, Any]:
    """An Anthropic custom tool definition as a Chat Completions function tool."""
    fn: dict[str, Any] = {"name": tool["name"]}
    if tool.get("description"):
        fn["description"] = tool["description"]
    fn["parameters"] = dict(tool["input_schema"])
    return {"type": "function", "function": fn}


def loaded_tools(ctx: TurnContext, session: SessionView) -> list[ToolDef]:
    """The catalog tools the session loaded (searched for or called)."""
    cat = ctx.catalog
    if cat is None:
        return []
    found = (cat.get(key) for key in session.loaded_tools)
    return [t for t in found if t is not None]


def tools(state: TurnState, ctx: TurnContext) -> TurnState:
    return state.but(tools=plan_tools(ctx, state.session, state.query, state.given_tools))


def definition_tokens(counter: TokenCounter, definitions: Sequence[Mapping[str, Any]]) -> int:
    """The tokens of tool definitions as a request sends them (their JSON)."""
    return sum(counter.count(json.dumps(d, ensure_ascii=False)) for d in definitions)


def plan_tools(
    ctx: TurnContext,
    session: SessionView,
    query: str | None,
    given: GivenTools = NO_TOOLS,
) -> ToolsPlan:
    cfg = ctx.config
    anthropic_render = cfg.render == "anthropic"
    own: list[dict[str, Any]] = []
    if ctx.results is not None:
        own.append(fetch_more_tool())
    if anthropic_render and ctx.memory_tool(session.session_id) is not None:
        own.append(dict(MEMORY_TOOL))
    cat = ctx.catalog
    if cat is None and not own and not given:
        return ToolsPlan()
    own_names = [str(d["name"]) for d in own]
    if given:
        _check_names(given, own_names, cat)
    own_rendered = render_given(given, cfg.render) + [
        d if anthropic_render else as_openai(d) for d in own
    ]
    own_tokens = definition_tokens(ctx.counter, own_rendered)
    own_names = [*given.names, *own_names]
    if cat is None:
        rendered = [dict(d) for d in own_rendered]
        if anthropic_render:
            rendered[-1]["cache_control"] = {"type": "ephemeral"}
        trace = ToolsTrace(
            mode="plain",
            sent=own_names,
            given=list(given.names),
            tokens=own_tokens,
            all_tokens=own_tokens,
        )
        return ToolsPlan(tuple(rendered), trace, own_tokens)
    if cfg.tools.mode == "server":
        turn = cat.for_turn(None, 0, search=False)
        body = cat.anthropic_tools(turn, mode="server", server_search=cfg.tools.server_search)
        search_def = body[len(turn.always)]
        tokens = turn.tokens + ctx.counter.count(json.dumps(search_def)) + own_tokens
        sent = [cat.wire_name(t) for t in turn.always]
        trace = ToolsTrace(
            mode="server",
            sent=[*sent, str(search_def["name"]), *own_names],
            given=list(given.names),
            deferred=len(cat) - len(turn.always),
            tokens=tokens,
            all_tokens=turn.all_tokens + own_tokens,
        )
        return ToolsPlan((*own_rendered, *body), trace, tokens)
    turn = cat.for_turn(query, cfg.tools.k, loaded=loaded_tools(ctx, session))
    body = cat.anthropic_tools(turn, mode="client") if anthropic_render else cat.openai_tools(turn)
    tokens = turn.tokens + own_tokens
    sent = [cat.wire_name(t) for t in turn.sent]
    trace = ToolsTrace(
        mode="client",
        sent=[*sent, *([cat.search_name] if turn.search else []), *own_names],
        given=list(given.names),
        found=[cat.wire_name(h.tool) for h in turn.found],
        loaded=[cat.wire_name(t) for t in turn.loaded],
        deferred=len(cat) - len(turn.sent),
        tokens=tokens,
        all_tokens=turn.all_tokens + own_tokens,
    )
    return ToolsPlan((*own_rendered, *body), trace, tokens)


def _check_names(given: GivenTools, own: Sequence[str], catalog: ToolCatalog | None) -> None:
    """A tool given on the turn may not take the name of ctxwise's own tools or of a
    catalog tool (the model could not tell which one it calls)."""
    taken = set(own)
    if catalog is not None:
        taken.update(catalog.wire_name(t) for t in catalog)
        taken.add(catalog.search_name)
    clash = sorted(taken.intersection(given.names))
    if clash:
        raise UsageError(
            f"a tool given on the turn has the name of a tool ctxwise sends: {', '.join(clash)}"
        )
