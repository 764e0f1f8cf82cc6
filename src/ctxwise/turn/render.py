"""The render step: the window as a provider request.

Anthropic (cache breakpoints after the stable prefix and at the end of the shared
history; with ``clearing.mode = "server"``, the context-management edit and its
beta header) or OpenAI Chat Completions; this turn's tool definitions beside it.
"""

from __future__ import annotations

from typing import Any

from ctxwise.editing import CONTEXT_MANAGEMENT_BETA, context_management
from ctxwise.formats.request import render_anthropic, render_openai
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import TurnState

__all__ = ["render"]


def render(state: TurnState, ctx: TurnContext) -> TurnState:
    cfg = ctx.config
    done, plan = state.assembled, state.budget
    assert done is not None and plan is not None, "the render step runs after assemble"
    encoded = state.session.encoded
    headers: dict[str, str] = {}
    request: dict[str, Any]
    if cfg.render == "anthropic":
        server_edit = None
        if cfg.clearing.enabled and cfg.clearing.mode == "server":
            server_edit = context_management(
                trigger_tokens=max(1, int(cfg.clearing.trigger * plan.history_room)),
                keep_last=cfg.clearing.keep_last,
                exclude_tools=cfg.clearing.exclude_tools,
            )
            headers["anthropic-beta"] = CONTEXT_MANAGEMENT_BETA
        request = render_anthropic(
            done.window,
            model=cfg.model,
            max_tokens=cfg.max_tokens,
            encoded=encoded,
            context_management=server_edit,
        )
    else:
        request = render_openai(
            done.window, model=cfg.model, max_tokens=cfg.max_tokens, encoded=encoded
        )
    if state.tools.definitions is not None:
        request["tools"] = [dict(d) for d in state.tools.definitions]
    return state.but(request=request, headers=headers)
