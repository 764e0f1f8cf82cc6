"""The Engine's persisted session state (format 1) as a pydantic model.

What ``_Session.state()`` in :mod:`ctxwise.engine` writes into a session
store's state row::

    {"format": 1, "facts": {CaseFacts.to_dict()}, "rules": {Rules.to_dict()},
     "system": [str, ...], "turns": int, "compactions": int, "clears": int,
     "remembered": int, "tool_ids": [str, ...],
     "route": null | {"origin": int | null, "trace": {RouteTrace as JSON}},
     "gate_rules": [PolicyRule.to_dict(), ...],
     "loaded_tools": [[server, name], ...],
     "tool_events": [ToolEventTrace as JSON, ...]}

:func:`parse_state` reads it: every key but ``format`` may be absent (its
default is what a fresh session holds), unknown keys and wrong types are
refused, and ``facts`` / ``rules`` are read by
:meth:`CaseFacts.from_dict <ctxwise.memory.facts.CaseFacts.from_dict>` and
:meth:`Rules.from_dict <ctxwise.memory.facts.Rules.from_dict>`, so they are
checked exactly as anywhere else. The route memo's ``trace`` stays a mapping
(the Engine validates it as a ``RouteTrace`` when it reuses it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, NonNegativeInt, ValidationError

from ctxwise._schema import PersistedModel, as_dict, describe, versions
from ctxwise.errors import FormatError
from ctxwise.memory.facts import CaseFacts, Rules

__all__ = ["STATE_FORMAT", "RouteMemo", "SessionState", "parse_state"]

STATE_FORMAT: Literal[1] = 1


def _read(reader: Any) -> BeforeValidator:
    """A field read by an owner's ``from_dict`` (its ``FormatError`` detail kept)."""

    def check(value: object) -> object:
        if isinstance(value, CaseFacts | Rules):
            return value
        try:
            return reader(value)
        except FormatError as exc:
            raise ValueError(exc.detail) from None

    return BeforeValidator(check)


class RouteMemo(PersistedModel):
    """The latest route decision and the history position of the message it routed."""

    origin: int | None
    trace: dict[str, Any]


class SessionState(PersistedModel):
    """A session's state row, read. ``facts`` and ``rules`` are new objects the
    caller owns (the model is frozen; they are not)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    format: Annotated[Literal[1], versions(STATE_FORMAT, what="state format")]
    facts: Annotated[CaseFacts, _read(CaseFacts.from_dict)] = Field(default_factory=CaseFacts)
    rules: Annotated[Rules, _read(Rules.from_dict)] = Field(default_factory=Rules)
    system: list[str] = Field(default_factory=list)
    turns: NonNegativeInt = 0
    compactions: NonNegativeInt = 0
    clears: NonNegativeInt = 0
    remembered: NonNegativeInt = 0
    tool_ids: list[str] = Field(default_factory=list)
    route: RouteMemo | None = None
    gate_rules: list[dict[str, Any]] = Field(default_factory=list)
    """Policy rules compiled from rules stated in this session (``PolicyRule.to_dict``)."""
    loaded_tools: list[tuple[str, str]] = Field(default_factory=list)
    """Catalog tools the session loaded (searched for or called), as (server, name)."""
    tool_events: list[dict[str, Any]] = Field(default_factory=list)
    """Tool events since the last turn, for its trace (``ToolEventTrace`` as JSON)."""
    counted_by: str | None = None
    """The token counter and render that counted the history's stored per-message
    tokens (``NAME/RENDER``); None in sessions written before it was recorded."""


def parse_state(data: Mapping[str, Any], session_id: str) -> SessionState:
    """``data`` (a session store's state row) as a :class:`SessionState`.

    An empty mapping (what a store holds for a session never written, version 0)
    is a fresh state. Anything malformed is a :class:`~ctxwise.errors.FormatError`
    whose source is ``session 'ID'`` and whose detail names the field, e.g.
    ``format: unsupported state format 2 (this ctxwise reads 1)`` or
    ``facts: facts[1].value: Input should be a valid string``.
    """
    where = f"session {session_id!r}"
    if not isinstance(data, Mapping):
        raise FormatError(where, f"state: expected a mapping, got {type(data).__name__}")
    if not data:
        return SessionState(format=STATE_FORMAT)
    try:
        return SessionState.model_validate(as_dict(data))
    except ValidationError as exc:
        raise FormatError(where, describe(exc)) from None
