"""Hand-built turn states and contexts: no store, no Engine."""

from __future__ import annotations

from typing import Any

from ctxwise.config import EngineConfig
from ctxwise.messages import Message, ToolResultBlock, ToolUseBlock
from ctxwise.sources import Source
from ctxwise.tokens import get_counter
from ctxwise.turn import SessionView, TurnContext, TurnState


def user(text: str) -> Message:
    return Message.text_message("user", text)


def assistant(text: str) -> Message:
    return Message.text_message("assistant", text)


def call(tool_id: str, name: str = "lookup", **args: Any) -> Message:
    return Message("assistant", (ToolUseBlock(tool_id, name, dict(args)),))


def result(tool_id: str, text: str) -> Message:
    return Message("user", (ToolResultBlock(tool_id, text),))


def context(sources: tuple[Source, ...] = (), **config: Any) -> TurnContext:
    """A context counting with char and, unless ``config`` says otherwise, no safety
    margin: the steps' arithmetic in whole characters ÷ 4."""
    config.setdefault("safety_margin", 0)
    return TurnContext.create(EngineConfig(**config), counter=get_counter("char"), sources=sources)


def state(
    *new: Message, session: SessionView | None = None, prompt: str | None = None
) -> TurnState:
    return TurnState.start(session or SessionView("s", 0), tuple(new), prompt=prompt)


def session_of(ctx: TurnContext, *messages: Message) -> SessionView:
    """A stored session holding ``messages``, as a load would give it."""
    from ctxwise.turn.append import append

    done = append(state(*messages), ctx)
    return done.session.but(version=1)
