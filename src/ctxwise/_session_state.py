"""The Engine's persisted session state (format 1) as a pydantic model.

What ``_Session.state()`` in :mod:`ctxwise.engine` writes into a session
store's state row::

    {"format": 1, "facts": {CaseFacts.to_dict()}, "rules": {Rules.to_dict()},
     "system": [str, ...], "turns": int, "compactions": int, "clears": int,
     "remembered": int,
     "route": null | {"origin": int | null, "trace": {RouteTrace as JSON}},
     "gate_rules": [PolicyRule.to_dict(), ...],
     "loaded_tools": [[server, name], ...],
     "tool_events": [ToolEventTrace as JSON, ...],
     "fail_open": [FailOpenTrace as JSON, ...],
     "prompt_cache": null | {"written": [digest, ...]},
     "calibration": null | {CalibrationMemo as JSON}}

:func:`parse_state` reads it: every key but ``format`` may be absent (its
default is what a fresh session holds), unknown keys and wrong types are
refused, and ``facts`` / ``rules`` are read by
:meth:`CaseFacts.from_dict <ctxwise.memory.facts.CaseFacts.from_dict>` and
:meth:`Rules.from_dict <ctxwise.memory.facts.Rules.from_dict>`, so they are
checked exactly as anywhere else. The route memo's ``trace`` stays a mapping
(the Engine validates it as a ``RouteTrace`` when it reuses it).

The session's tool call ids are not in the state row: the store keeps them one
row each (``SessionCommit.tool_ids``), so a turn writes its new ids, not all of
them. A state written before then may still hold ``"tool_ids": [str, ...]``: they
are read, and moved to the store's rows by the session's next commit
(:class:`ToolIds`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, NonNegativeInt, ValidationError

from ctxwise._schema import PersistedModel, as_dict, describe, versions
from ctxwise.errors import FormatError
from ctxwise.memory.facts import CaseFacts, Rules

__all__ = [
    "STATE_FORMAT",
    "CacheMemo",
    "CalibrationMemo",
    "RouteMemo",
    "SessionState",
    "ToolIds",
    "parse_state",
]

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


class CacheMemo(PersistedModel):
    """The provider's prompt cache as the session's requests left it
    (:class:`ctxwise.prompt_cache.PromptCache`): the digests of the prefixes
    written, at most four, so the row does not grow with the session."""

    written: list[str] = Field(default_factory=list, max_length=64)


class CalibrationMemo(PersistedModel):
    """The session's online calibration (:mod:`ctxwise.turn.calibrate`), a constant
    size: ``factor`` (the provider's prompt tokens per counted token, learned from
    ``calls`` responses that carried usage), the counted tokens of the session's
    latest request (``estimate``, ``None`` once a response's usage was compared with
    it), and the latest comparison (the provider's ``observed`` tokens, the
    estimate they were ``compared`` with, whether the ratio was ``clamped``), kept
    until a turn's trace reports it."""

    factor: float = Field(default=1.0, ge=0.25, le=4.0, allow_inf_nan=False)
    calls: NonNegativeInt = 0
    estimate: NonNegativeInt | None = None
    observed: int | None = None
    compared: NonNegativeInt | None = None
    clamped: bool = False


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
    """Tool call ids, in a state written before the store kept them apart."""
    route: RouteMemo | None = None
    gate_rules: list[dict[str, Any]] = Field(default_factory=list)
    """Policy rules compiled from rules stated in this session (``PolicyRule.to_dict``)."""
    loaded_tools: list[tuple[str, str]] = Field(default_factory=list)
    """Catalog tools the session loaded (searched for or called), as (server, name)."""
    tool_events: list[dict[str, Any]] = Field(default_factory=list)
    """Tool events since the last turn, for its trace (``ToolEventTrace`` as JSON)."""
    fail_open: list[dict[str, Any]] = Field(default_factory=list)
    """Requests the proxy forwarded unchanged since the last turn (``FailOpenTrace``)."""
    counted_by: str | None = None
    """The token counter and render that counted the history's stored per-message
    tokens (``NAME/RENDER``); None in sessions written before it was recorded."""
    prompt_cache: CacheMemo | None = None
    """What the provider's cache holds after the session's latest request."""
    calibration: CalibrationMemo | None = None
    """The session's correction factor and the estimate of its latest request."""


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


class ToolIds:
    """Every tool call id a session used (a reused one is refused): a set that only
    grows, whose copies share what they hold.

    A turn works on a copy of the session, so copying must not cost the whole set:
    a copy sees the first ``len`` ids of a shared list, and an id it adds is
    appended to that list, unless another copy appended first (a turn applied
    again after a conflict or an error), in which case it takes a list of its own.
    :meth:`unsaved` lists the ids added since :meth:`saved`: what the next commit
    writes to the store (``SessionCommit.tool_ids``), never the ones before."""

    __slots__ = ("_at", "_ids", "_n", "_saved")

    def __init__(self, stored: Iterable[str] = (), unsaved: Iterable[str] = ()) -> None:
        self._ids: list[str] = []
        self._at: dict[str, int] = {}
        self._n = 0
        for tool_id in stored:
            self.add(tool_id)
        self._saved = self._n
        for tool_id in unsaved:
            self.add(tool_id)

    def __contains__(self, tool_id: object) -> bool:
        return isinstance(tool_id, str) and self._at.get(tool_id, self._n) < self._n

    def __len__(self) -> int:
        return self._n

    def add(self, tool_id: str) -> None:
        if tool_id in self:
            return
        if self._n != len(self._ids):  # another copy appended after this one's ids
            self._ids = self._ids[: self._n]
            self._at = {t: i for i, t in enumerate(self._ids)}
        self._at[tool_id] = self._n
        self._ids.append(tool_id)
        self._n += 1

    def copy(self) -> ToolIds:
        """A copy that shares the ids held so far (no id is copied)."""
        new = ToolIds.__new__(ToolIds)
        new._ids, new._at, new._n, new._saved = self._ids, self._at, self._n, self._saved
        return new

    def unsaved(self) -> list[str]:
        """The ids added since the last :meth:`saved` (or since loading)."""
        return self._ids[self._saved : self._n]

    def saved(self) -> None:
        """The ids held so far are in the store."""
        self._saved = self._n
