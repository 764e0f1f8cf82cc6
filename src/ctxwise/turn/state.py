"""The values a turn passes from step to step: the session as loaded, and the
:class:`TurnState` each step reads and returns a new copy of.

Both are frozen: a step never changes what it was given, it returns
``dataclasses.replace(state, ...)`` (:meth:`TurnState.but`). The session's case
facts and rules are objects with methods that change them; a step that changes
them works on copies (:meth:`SessionView.facts_copy`), so the loaded session, which
a retry starts from again, stays as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ctxwise._session_state import (
    STATE_FORMAT,
    CacheMemo,
    CalibrationMemo,
    RouteMemo,
    SessionState,
    ToolIds,
)
from ctxwise.assembly import Assembly, Section
from ctxwise.formats.request import Window
from ctxwise.memory.facts import CaseFacts, Rules
from ctxwise.messages import Message, Transcript
from ctxwise.tools.given import NO_TOOLS, GivenTools
from ctxwise.trace import (
    CacheTrace,
    CalibrationTrace,
    ClearTrace,
    CompactionTrace,
    EditGateTrace,
    FailOpenTrace,
    LedgerTrace,
    RouteTrace,
    ToolEventTrace,
    ToolsTrace,
    Trace,
)

__all__ = ["Assembled", "BudgetPlan", "Remember", "SessionView", "ToolsPlan", "TurnState"]


@dataclass(frozen=True, slots=True)
class SessionView:
    """A session as the store holds it, materialized: its live history (with each
    message's tokens as sent and its position in the log, ``None`` for a summary),
    its log's length, and its state row (:class:`~ctxwise._session_state.SessionState`)
    in typed form."""

    session_id: str
    version: int
    history: tuple[Message, ...] = ()
    tokens: tuple[int, ...] = ()
    origins: tuple[int | None, ...] = ()
    log_length: int = 0
    facts: CaseFacts = field(default_factory=CaseFacts)
    rules: Rules = field(default_factory=Rules)
    system: tuple[str, ...] = ()
    turns: int = 0
    compactions: int = 0
    clears: int = 0
    remembered: int = 0
    """How much of the log long-term memory holds (positions below it)."""
    tool_ids: ToolIds = field(default_factory=ToolIds)
    route: RouteMemo | None = None
    gate_rules: tuple[Mapping[str, Any], ...] = ()
    loaded_tools: tuple[tuple[str, str], ...] = ()
    tool_events: tuple[ToolEventTrace, ...] = ()
    """Tool calls ctxwise ran and results it trimmed or stored since the last turn."""
    fail_open: tuple[FailOpenTrace, ...] = ()
    """Requests the proxy forwarded unchanged since the last turn."""
    encoded: tuple[Any, ...] | None = None
    """Each history message encoded for the render target (kept in memory only)."""
    counted_by: str | None = None
    """The counter and render that counted ``tokens`` (``SessionState.counted_by``)."""
    prompt_cache: CacheMemo | None = None
    """The provider's prompt cache after the session's latest request (the cost step)."""
    calibration: CalibrationMemo | None = None
    """The session's online calibration (the calibrate step)."""

    @classmethod
    def from_state(
        cls,
        session_id: str,
        version: int,
        state: SessionState,
        *,
        history: tuple[Message, ...] = (),
        tokens: tuple[int, ...] = (),
        origins: tuple[int | None, ...] = (),
        log_length: int = 0,
        tool_ids: ToolIds | None = None,
    ) -> SessionView:
        return cls(
            session_id,
            version,
            history,
            tokens,
            origins,
            log_length,
            state.facts,
            state.rules,
            tuple(state.system),
            state.turns,
            state.compactions,
            state.clears,
            state.remembered,
            tool_ids if tool_ids is not None else ToolIds(state.tool_ids),
            state.route,
            tuple(state.gate_rules),
            tuple((str(a), str(b)) for a, b in state.loaded_tools),
            tuple(ToolEventTrace.model_validate(e) for e in state.tool_events),
            fail_open=tuple(FailOpenTrace.model_validate(e) for e in state.fail_open),
            counted_by=state.counted_by,
            prompt_cache=state.prompt_cache,
            calibration=state.calibration,
        )

    def but(self, **changes: Any) -> SessionView:
        """A copy with ``changes``."""
        return replace(self, **changes)

    def facts_copy(self) -> CaseFacts:
        return CaseFacts.from_dict(self.facts.to_dict())

    def rules_copy(self) -> Rules:
        return Rules.from_dict(self.rules.to_dict())

    def state(self) -> dict[str, Any]:
        """The state row a commit writes (read back by ``parse_state``)."""
        return {
            "format": STATE_FORMAT,
            "facts": self.facts.to_dict(),
            "rules": self.rules.to_dict(),
            "system": list(self.system),
            "turns": self.turns,
            "compactions": self.compactions,
            "clears": self.clears,
            "remembered": self.remembered,
            "route": None if self.route is None else self.route.model_dump(mode="json"),
            "gate_rules": [dict(r) for r in self.gate_rules],
            "loaded_tools": [list(k) for k in self.loaded_tools],
            "tool_events": [e.model_dump(mode="json") for e in self.tool_events],
            "fail_open": [e.model_dump(mode="json") for e in self.fail_open],
            "counted_by": self.counted_by,
            "prompt_cache": None
            if self.prompt_cache is None
            else self.prompt_cache.model_dump(mode="json"),
            "calibration": None
            if self.calibration is None
            else self.calibration.model_dump(mode="json"),
        }

    def first_live(self) -> int:
        """The first log position the live history holds (the log's length when it
        holds none): what memory recall must come from before."""
        live = [o for o in self.origins if o is not None]
        return min(live) if live else self.log_length


@dataclass(frozen=True, slots=True)
class BudgetPlan:
    """How the budget splits: ``available`` (budget - reserve, the provider's
    tokens) is ``limit`` counted tokens (``available / (factor × (1 + margin))``, see
    :mod:`ctxwise.turn.budget`); that less the tool definitions is ``window``; less
    the request framing and the pinned sections it is ``room``; ``history_room`` is
    the part of it left after the context share."""

    available: int
    window: int
    framing: int
    pinned: tuple[tuple[Section, str], ...]
    pinned_tokens: int
    room: int
    history_room: int
    limit: int | None = None
    """Counted tokens the request may hold (``None``: ``available``)."""
    factor: float = 1.0
    """The session's correction factor: provider tokens per counted token."""
    margin: float = 0.0
    """The safety margin kept for the counter's error."""


@dataclass(frozen=True, slots=True)
class ToolsPlan:
    """This turn's tool definitions (as the render sends them), their trace and tokens."""

    definitions: tuple[dict[str, Any], ...] | None = None
    trace: ToolsTrace | None = None
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class Assembled:
    """The window that fits as sent, and what the trace says of it."""

    assembly: Assembly
    window: Window
    transcript: Transcript
    owners: Mapping[str, str]
    placements: Mapping[str, str]
    total_tokens: int
    history_tokens: int


@dataclass(frozen=True, slots=True)
class Remember:
    """An effect: put the session's log from ``start`` up to ``upto`` into long-term
    memory (idempotent: an item's id is its position)."""

    session_id: str
    start: int
    upto: int


@dataclass(frozen=True, slots=True)
class TurnState:
    """Everything a turn knows, step by step. ``base`` is the session as loaded (the
    commit is applied on its version); ``session`` is the working session the steps
    change by copy; the rest is what each step adds, ``None`` until it has run."""

    base: SessionView
    session: SessionView
    new: tuple[Message, ...]
    prompt: str | None = None
    attempt: int = 1
    started: float = 0.0
    given_tools: GivenTools = NO_TOOLS
    """The tool definitions the caller gave this turn (sent, counted, traced)."""
    log: tuple[dict[str, Any], ...] = ()
    """The log rows of the messages this turn appends."""
    recounted: bool = False
    """The stored tokens were counted by another counter or render: all recounted."""
    facts_changed: tuple[str, ...] = ()
    rules_added: tuple[str, ...] = ()
    gates_added: tuple[str, ...] = ()
    route: RouteTrace | None = None
    chosen: tuple[str, ...] = ()
    fallback: str | None = None
    budget: BudgetPlan | None = None
    tools: ToolsPlan = ToolsPlan()
    cleared: ClearTrace | None = None
    edit_gate: EditGateTrace | None = None
    """Whether clearing paid for its cache re-write (``costs.gate``)."""
    compacted: CompactionTrace | None = None
    changed_from: int | None = None
    """The first history position this turn changed (None: only appended)."""
    cleared_positions: tuple[int, ...] = ()
    """The log positions of the messages whose tool results this turn cleared."""
    cleared_ids: tuple[str, ...] = ()
    """The tool call ids whose results this turn cleared."""
    ledger: LedgerTrace | None = None
    """Where each log message is on this turn's request (the ledger step)."""
    gathered: tuple[tuple[Section, str], ...] = ()
    skipped: tuple[str, ...] = ()
    assembled: Assembled | None = None
    request: Mapping[str, Any] | None = None
    cache: CacheTrace | None = None
    """What the request costs with the provider's prompt cache (the cost step)."""
    calibration: CalibrationTrace | None = None
    """How the budget was turned into counted tokens (the budget and calibrate steps)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    trace: Trace | None = None
    effects: tuple[Remember, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def start(
        cls,
        base: SessionView,
        new: tuple[Message, ...],
        *,
        prompt: str | None = None,
        attempt: int = 1,
        started: float = 0.0,
        tools: GivenTools = NO_TOOLS,
    ) -> TurnState:
        return cls(base, base, new, prompt, attempt, started, tools)

    def but(self, **changes: Any) -> TurnState:
        """A copy with ``changes``."""
        return replace(self, **changes)

    def timed(self, step: str, ms: float) -> TurnState:
        return replace(self, timings={**self.timings, step: ms})

    @property
    def query(self) -> str | None:
        """The routed query (the latest user message's text), once routed."""
        return None if self.route is None else self.route.query
