"""`Trace`: what one Engine turn did and why, with tokens; persisted per turn.

A trace answers the questions users of context layers ask most: which route was
taken and how sure the router was, which sources were called and which were
skipped, what happened to every section (included, truncated, dropped, and
why), what was cleared or compacted, where the tokens went, how many of them
are the cache-stable prefix, and how long each step took. It is a pydantic
model, so it is stored and read back as validated JSON (``format`` 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxwise._schema import describe
from ctxwise.errors import FormatError

__all__ = [
    "TRACE_FORMAT",
    "CacheTrace",
    "CalibrationTrace",
    "ClearTrace",
    "CompactionTrace",
    "EditGateTrace",
    "FailOpenTrace",
    "LedgerTrace",
    "RouteTrace",
    "SectionTrace",
    "SummaryTrace",
    "TokensTrace",
    "ToolEventTrace",
    "ToolsTrace",
    "Trace",
]

TRACE_FORMAT = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RouteTrace(_Model):
    """The route decision: the query routed, the label (``None``: refused or no
    router), the router's reason, its best scores, and why the fallback sources
    were used (``None`` when the label's route was)."""

    query: str | None
    label: str | None
    reason: str
    score: float | None = None
    scores: dict[str, float] = Field(default_factory=dict)
    fallback: str | None = None
    reused: bool = False
    """True when the latest user message was already routed on an earlier turn."""


class SectionTrace(_Model):
    """One section's fate in the window."""

    name: str
    source: str
    placement: Literal["system", "context"]
    status: Literal["included", "truncated", "dropped"]
    tokens: int
    original_tokens: int
    reason: str
    pinned: bool
    stable: bool
    refs: list[str] = Field(default_factory=list)
    """Where the section's content came from, as ledger pointers (the memory items a
    recall holds: ``memory:p12``); empty when its source names none."""


class ClearTrace(_Model):
    tool_uses: int
    tokens_freed: int
    trigger_tokens: int


class CompactionTrace(_Model):
    summarized_messages: int
    tokens_before: int
    tokens_after: int
    target_tokens: int
    remembered_items: int
    summary: str | None = None
    """The summary this compaction wrote (a ledger's ``summary:TURN`` pointer resolves
    to it); ``None`` in traces written before it was kept."""


class SummaryTrace(_Model):
    """A summary in the history sent: where it sits and which log messages it stands
    for (positions ``first`` up to ``stop``, ``stop`` excluded)."""

    index: int
    first: int
    stop: int
    tokens: int


class LedgerTrace(_Model):
    """Where each message of the session's log is on this turn's request, kept compact
    enough to record on every turn: the log ranges the history sent holds (each
    ``[start, stop)``, in order), the summaries standing for the rest, the messages
    whose tool results this turn cleared (earlier turns' clears are in their traces),
    and where this request's history first differs from the previous request's.

    :mod:`ctxwise.ledger` turns the traces of a session and its log into the ledger
    itself: one entry per message, section and tool definition, with its fate, its
    reason, its tokens and a pointer to the original."""

    log_length: int
    window: list[tuple[int, int]]
    summaries: list[SummaryTrace] = Field(default_factory=list)
    cleared: list[tuple[int, int]] = Field(default_factory=list)
    cleared_ids: list[str] = Field(default_factory=list)
    """The tool calls whose results this turn cleared (a message holding several
    results may have some cleared and not others)."""
    first_change: int | None = None
    """The first history position (in the history sent) that differs from the previous
    request's; ``None`` when this request only appended to it."""


class ToolsTrace(_Model):
    """The tool definitions of the request: how they were sent (``mode``), the names
    whose full definitions are in the context (``sent``: always-loaded, then the
    session's ``loaded``, then this turn's ``found``, then the tools the caller gave
    the turn, then ctxwise's own tools), which of them the caller gave (``given``),
    how many stayed deferred, and their tokens (every definition sent, counted in
    the budget) against sending every definition."""

    mode: Literal["client", "server", "plain"]
    sent: list[str]
    given: list[str] = Field(default_factory=list)
    found: list[str] = Field(default_factory=list)
    loaded: list[str] = Field(default_factory=list)
    deferred: int = 0
    tokens: int
    all_tokens: int


class EditGateTrace(_Model):
    """Whether an edit paid for the cache re-write it causes (``costs.gate``): it
    would save ``saved_tokens`` on each of the ``horizon`` turns expected, worth
    ``saving`` (in base-input-token equivalents: tokens times their price over the
    base input price), and re-write ``rewrite_tokens`` from the edit point on, a
    ``cost`` of their write premium over a read. ``forced``: the history did not fit
    its room, so the edit ran whatever it cost (the hard budget always wins)."""

    edit: Literal["clear"]
    ran: bool
    forced: bool
    saved_tokens: int
    rewrite_tokens: int
    horizon: int
    saving: float
    cost: float


class CacheTrace(_Model):
    """What the request costs with the provider's prompt cache, as ctxwise expects
    it (:mod:`ctxwise.prompt_cache`): input tokens read from the cache (``read``),
    written to it (by lifetime), and ``uncached``; the input's money at ``model``'s
    prices (``None``: the model has no price, unknown, not zero) and what the same
    input would cost with no cache. ``first_change``: where the request first
    differs from the session's previous one (``tools[i]``, ``system[i]``,
    ``messages[i]``; ``None``: it only appended), and ``reason``: what changed it
    there (an edit this turn, or new facts, rules, tools or context)."""

    model: str
    read: int
    write_5m: int
    write_1h: int
    uncached: int
    input_usd: float | None
    uncached_usd: float | None
    first_change: str | None = None
    reason: str | None = None


class CalibrationTrace(_Model):
    """How the budget became a number of counted tokens, and what the session
    learned from the provider (:mod:`ctxwise.turn.calibrate`). The request was fit
    to ``limit`` counted tokens: ``available`` (the budget less the reserve, the
    provider's tokens) over ``factor × (1 + margin)``, where ``factor`` is the
    session's correction factor (the provider's prompt tokens per counted token)
    and ``margin`` the safety margin kept for ``counter``'s error. ``expected``:
    the request's counted total times ``factor``, what the provider is expected to
    count. When a response since the last turn carried usage: ``observed`` (the
    provider's prompt tokens of the request that produced it), ``estimate`` (that
    request's counted total) and ``ratio`` (observed / estimate, before any clamp);
    ``clamped``: the ratio was outside ``[MIN_FACTOR, MAX_FACTOR]`` (a usage that
    cannot be that request's, a zero or negative count among them) and the factor
    learned from the bound instead. ``calls``: responses the factor learned from."""

    counter: str
    factor: float
    margin: float
    limit: int
    expected: int | None = None
    calls: int = 0
    observed: int | None = None
    estimate: int | None = None
    ratio: float | None = None
    clamped: bool = False


class FailOpenTrace(_Model):
    """A request for the session that the proxy forwarded unchanged because ctxwise
    failed while building it (``reason``: the error, one line), on ``route`` (the
    API path); the provider got the client's request as sent, and the session
    caught up with its history on the next request."""

    route: str
    reason: str


class ToolEventTrace(_Model):
    """What ctxwise did with one tool call or result since the turn before:
    ``search`` (a tool_search call: ``found`` the tools it loaded), ``fetch_more`` (a
    page of a stored result), ``memory`` (a memory tool command), ``trimmed`` (a
    result cut by its trim settings) or ``stored`` (a result stored and paged, the
    model given the first page and a cursor). ``tokens_before`` / ``tokens_after``:
    of the result as the tool gave it and as the model gets it."""

    tool_use_id: str
    name: str
    kind: Literal["search", "fetch_more", "memory", "trimmed", "stored"]
    tokens_before: int = 0
    tokens_after: int = 0
    is_error: bool = False
    found: list[str] = Field(default_factory=list)
    detail: str = ""


class TokensTrace(_Model):
    """Where the window's tokens went, as the counter counts them. ``budget`` and
    ``available`` (budget less reserve) are the provider's tokens; ``total`` is the
    whole request counted, which must fit ``available`` once the session's
    correction factor and the safety margin are applied (``Trace.calibration``: the
    counted ``limit`` it was fit to, and the provider's ``expected`` count);
    ``stable_prefix`` is the part that is byte-identical across turns (the cached
    system prefix)."""

    budget: int
    available: int
    system: int
    context: int
    history: int
    total: int
    stable_prefix: int
    history_room: int
    tools: int = 0
    """Tokens of the tool definitions sent (part of ``total``)."""


class Trace(_Model):
    format: Literal[1] = 1
    session_id: str
    turn: int
    version: int
    """The session's version after this turn."""
    new_messages: int
    route: RouteTrace
    chosen: list[str]
    skipped: list[str]
    sections: list[SectionTrace]
    cleared: ClearTrace | None = None
    compacted: CompactionTrace | None = None
    facts_changed: list[str] = Field(default_factory=list)
    rules_added: list[str] = Field(default_factory=list)
    gates_added: list[str] = Field(default_factory=list)
    """Names of the policy rules compiled from rules stated this turn."""
    tokens: TokensTrace
    tools: ToolsTrace | None = None
    cache: CacheTrace | None = None
    calibration: CalibrationTrace | None = None
    edit_gate: EditGateTrace | None = None
    tool_events: list[ToolEventTrace] = Field(default_factory=list)
    """Tool calls ctxwise ran and results it trimmed or stored since the last turn."""
    fail_open: list[FailOpenTrace] = Field(default_factory=list)
    """Requests forwarded unchanged since the turn before (the proxy's fail-open)."""
    ledger: LedgerTrace | None = None
    """Where each log message is on this request (the ``ledger`` step; ``None`` when
    the step was removed)."""
    timings_ms: dict[str, float] = Field(default_factory=dict)
    attempts: int = 1
    """How many times the turn was applied: more than 1 when another writer
    committed to the session first and the turn was re-applied on its result."""

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_stored(cls, data: object, *, session_id: str) -> Trace:
        """A trace as a session store holds it. One that does not validate (written by
        another ctxwise version, or damaged) is a :class:`~ctxwise.errors.FormatError`
        whose source is ``session 'ID'`` and whose detail names the turn and field."""
        where = f"session {session_id!r}"
        turn = data.get("turn") if isinstance(data, Mapping) else None
        what = f"trace of turn {turn}" if isinstance(turn, int) else "a trace"
        if isinstance(data, Mapping) and data.get("format", TRACE_FORMAT) != TRACE_FORMAT:
            raise FormatError(
                where,
                f"{what}: unsupported trace format {data.get('format')!r} (this ctxwise reads "
                f"{TRACE_FORMAT}); it was written by another version",
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise FormatError(where, f"{what}: {describe(exc)}") from None
