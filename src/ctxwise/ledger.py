"""The ledger: what happened on a turn to every message, section and tool definition,
and where each original is now.

Each turn records a small :class:`~ctxwise.trace.LedgerTrace` (the ``ledger`` step:
the log ranges its history sent, the summaries standing for the rest, what it
cleared). :class:`LedgerReader` reads a session's traces and log once and turns
them into the ledger of any turn: one :class:`LedgerEntry` per message of the log
(every message exactly once), per section of the context and for the tool
definitions, each with its fate, the reason, its tokens before and after, and a
pointer to the original that :meth:`LedgerReader.original` resolves:

=========  =============================================================
fate       meaning
=========  =============================================================
sent       in the request verbatim
truncated  a tool result trimmed or stored before it entered the log
           (message), or a section cut to fit
cleared    in the request, its tool results replaced by a placeholder
summarized out of the request, stood for by a summary
recalled   summarized, and recalled from long-term memory on this turn
deferred   tool definitions behind tool search
dropped    a section left out; a message no summary stands for
=========  =============================================================

Pointers are strings: ``log:N`` (the message at log position ``N``, as the session
was given it), ``summary:T`` (the summary turn ``T``'s compaction wrote),
``memory:ID`` (an item of the session's long-term memory) and ``result:ID`` (a tool
result stored behind a cursor). One that points at something deleted resolves to
an :class:`Original` that says it is gone, never to an error.

:meth:`LedgerReader.diff` compares two turns' requests (what entered, what left,
where the history first differs, so where the provider's cache breaks), and
:meth:`LedgerReader.find` answers "where is this text now?".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ctxwise.editing import DEFAULT_PLACEHOLDER
from ctxwise.errors import PointerError, UnknownTurnError
from ctxwise.formats import neutral
from ctxwise.memory.store import Store, namespace_part
from ctxwise.memory.tiered import turn_spans
from ctxwise.messages import Message, ToolResultBlock, ToolUseBlock, block_text
from ctxwise.sessions import SessionStore
from ctxwise.sessions.store import check_session_id
from ctxwise.tokens import TokenCounter
from ctxwise.tokens.models import counter_for_model
from ctxwise.trace import LedgerTrace, Trace

__all__ = [
    "FATES",
    "Fate",
    "Found",
    "Ledger",
    "LedgerDiff",
    "LedgerEntry",
    "LedgerReader",
    "Original",
    "message_text",
]

Fate = Literal["sent", "truncated", "cleared", "summarized", "recalled", "deferred", "dropped"]
FATES: tuple[Fate, ...] = (
    "sent",
    "truncated",
    "cleared",
    "summarized",
    "recalled",
    "deferred",
    "dropped",
)

Kind = Literal["message", "summary", "section", "tools"]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One message, summary, section or set of tool definitions, and its fate.

    ``position`` is a message's log position; ``name`` a section's or summary's
    name, or the tool definitions' names; ``into`` the summary a summarized message
    went into; ``refs`` the memory items a recalled message or section came from."""

    kind: Kind
    fate: Fate
    reason: str
    tokens_before: int
    tokens_after: int
    pointer: str | None = None
    position: int | None = None
    role: str | None = None
    tools: tuple[str, ...] = ()
    name: str | None = None
    into: str | None = None
    refs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["tools"] = list(self.tools)
        out["refs"] = list(self.refs)
        return out


@dataclass(frozen=True, slots=True)
class LedgerDiff:
    """What changed from turn ``before``'s request to turn ``after``'s.

    ``entered`` and ``left`` are log positions of messages that came into or went out
    of the request (verbatim or cleared); ``cleared`` those cleared between the two;
    ``sections_*`` sections by name; ``first_change`` the first history position of
    ``after``'s request that differs from ``before``'s (``None``: it only appended),
    ``first_change_log`` that message's log position (``None`` for a summary), and
    ``cache`` where the cost step found the request first differs from the provider's
    cached prefix (system, tools or a message)."""

    before: int | None
    after: int
    entered: tuple[int, ...]
    left: tuple[int, ...]
    cleared: tuple[int, ...]
    sections_entered: tuple[str, ...]
    sections_left: tuple[str, ...]
    first_change: int | None
    first_change_log: int | None
    cache: str | None

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


@dataclass(frozen=True, slots=True)
class Ledger:
    """The ledger of one turn: its entries (messages in log order, then summaries,
    sections and tool definitions), the diff from the turn before, and the turn's
    trace."""

    session_id: str
    turn: int
    entries: tuple[LedgerEntry, ...]
    diff: LedgerDiff
    trace: Trace

    @property
    def messages(self) -> tuple[LedgerEntry, ...]:
        return tuple(e for e in self.entries if e.kind == "message")

    def counts(self) -> dict[str, int]:
        """How many entries of each fate (messages only)."""
        out: dict[str, int] = dict.fromkeys(FATES, 0)
        for e in self.messages:
            out[e.fate] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "turn": self.turn,
            "counts": self.counts(),
            "diff": self.diff.to_dict(),
            "entries": [e.to_dict() for e in self.entries],
        }


@dataclass(frozen=True, slots=True)
class Original:
    """What a pointer points at: its ``text``, or why it is ``gone``."""

    pointer: str
    text: str | None
    gone: str | None = None


@dataclass(frozen=True, slots=True)
class Found:
    """Where a text is on a turn: in the message at ``position`` (its ledger entry)
    or in a summary (``summary``), with a ``snippet`` around it."""

    entry: LedgerEntry
    snippet: str

    def to_dict(self) -> dict[str, Any]:
        return {"snippet": self.snippet, **self.entry.to_dict()}


def message_text(message: Message) -> str:
    """A message as a person reads it: its role, then each block (a tool call as its
    name and JSON input, a result with the call it answers)."""
    lines = [f"{message.role}:"]
    for b in message.content:
        if isinstance(b, ToolUseBlock):
            lines.append(f"[tool call {b.name} {b.id}] {block_text(b)[len(b.name) + 1 :]}")
        elif isinstance(b, ToolResultBlock):
            error = " error" if b.is_error else ""
            lines.append(f"[tool result{error} for {b.tool_use_id}] {block_text(b)}")
        else:
            text = block_text(b)
            if text:
                lines.append(text)
    return "\n".join(lines)


def _positions(spans: Iterable[tuple[int, int]]) -> set[int]:
    return {p for a, b in spans for p in range(a, b)}


class LedgerReader:
    """A session's ledgers, read from its session store (and, to resolve memory and
    stored-result pointers, the memory store the Engine kept them in).

    ``memory_namespace`` and ``results_namespace`` say where the Engine keeps a
    session's memory items and stored results (:meth:`for_engine` takes them from
    the Engine); ``counter`` counts the originals (default: the counter for the
    model the traces priced, else for Claude). The session's traces and log are read
    once, when the reader is made."""

    def __init__(
        self,
        sessions: SessionStore,
        session_id: str,
        *,
        memory: Store | None = None,
        memory_namespace: Callable[[str], tuple[str, ...]] | None = None,
        results_namespace: Callable[[str], tuple[str, ...]] | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        check_session_id(session_id)
        sessions.require(session_id)
        self.session_id = session_id
        self.memory = memory
        self._memory_ns = memory_namespace
        self._results_ns = results_namespace
        self.traces: list[Trace] = [
            Trace.from_stored(t, session_id=session_id) for t in sessions.traces(session_id)
        ]
        rows = sessions.log(session_id)
        self.log: list[Message] = list(neutral.decode_messages(rows))
        model = next((t.cache.model for t in reversed(self.traces) if t.cache), None)
        self.counter = counter if counter is not None else counter_for_model(model or "claude")
        self._tokens: dict[int, int] = {}
        self._spans = turn_spans(self.log)
        self._calls = {b.id: b.name for m in self.log for b in m.tool_uses}
        self._trimmed = {
            e.tool_use_id: (t.turn, e)
            for t in self.traces
            for e in t.tool_events
            if e.kind in ("trimmed", "stored")
        }

    @classmethod
    def of_store(
        cls,
        sessions: SessionStore,
        session_id: str,
        *,
        memory: Store | None = None,
        namespace: str = "ctxwise",
        counter: TokenCounter | None = None,
    ) -> LedgerReader:
        """The reader of ``session_id`` in stores an Engine wrote, its memory items
        and stored results under the namespaces the Engine gives them (``namespace``
        is its ``[memory] namespace``)."""
        return cls(
            sessions,
            session_id,
            memory=memory,
            memory_namespace=lambda s: (namespace, "session", namespace_part(s)),
            results_namespace=lambda s: (namespace, "tool_results", namespace_part(s)),
            counter=counter,
        )

    @classmethod
    def for_engine(cls, engine: Any, session_id: str) -> LedgerReader:
        """The reader of ``session_id`` in ``engine`` (an :class:`~ctxwise.Engine`):
        its stores, namespaces and counter."""
        engine.wait()
        return cls.of_store(
            engine.sessions,
            session_id,
            memory=engine.memory,
            namespace=engine.config.memory.namespace,
            counter=engine.counter,
        )

    # ------------------------------------------------------------------- turns

    @property
    def turns(self) -> int:
        return len(self.traces)

    def trace(self, turn: int) -> Trace:
        """The trace of ``turn`` (1 is the first); :class:`UnknownTurnError` when the
        session never had it, or its trace has no ledger record (written before the
        ledger, or with the ``ledger`` step removed)."""
        if isinstance(turn, bool) or not isinstance(turn, int) or not 1 <= turn <= self.turns:
            raise UnknownTurnError(self.session_id, turn, turns=self.turns)
        return self.traces[turn - 1]

    def _record(self, turn: int) -> LedgerTrace:
        record = self.trace(turn).ledger
        if record is None:
            raise UnknownTurnError(
                self.session_id,
                turn,
                turns=self.turns,
                detail="has no ledger: its trace was written without the ledger step "
                "(removed from engine.steps, or by a ctxwise before it)",
            )
        return record

    def _tokens_of(self, position: int) -> int:
        got = self._tokens.get(position)
        if got is None:
            got = self._tokens[position] = self.counter.count_messages([self.log[position]])
        return got

    def _cleared_by(self, turn: int) -> tuple[set[int], set[str]]:
        """The log positions whose tool results the turns up to ``turn`` cleared, and
        the tool call ids of those results."""
        positions: set[int] = set()
        ids: set[str] = set()
        for t in self.traces[:turn]:
            if t.ledger is not None:
                positions |= _positions(t.ledger.cleared)
                ids.update(t.ledger.cleared_ids)
        return positions, ids

    def _summary_turns(self, turn: int, record: LedgerTrace) -> list[int | None]:
        """The turn whose compaction wrote each summary of ``record`` (the latest
        compactions up to ``turn``, the last summary the latest one)."""
        wrote = [t.turn for t in self.traces[:turn] if t.compacted is not None]
        n = len(record.summaries)
        found: list[int | None] = list(wrote[-n:]) if n else []
        return [None] * (n - len(found)) + found

    # ------------------------------------------------------------------ ledger

    def ledger(self, turn: int | None = None) -> Ledger:
        """The ledger of ``turn`` (default: the latest)."""
        turn = self.turns if turn is None else turn
        record = self._record(turn)
        trace = self.trace(turn)
        window = _positions(record.window)
        cleared, cleared_ids = self._cleared_by(turn)
        cleared &= window
        recalled = self._recalled(trace)
        summary_turns = self._summary_turns(turn, record)
        owner: dict[int, str] = {}
        summaries: list[LedgerEntry] = []
        for s, wrote in zip(record.summaries, summary_turns, strict=True):
            pointer = f"summary:{wrote}" if wrote is not None else None
            name = f"summary of log {s.first}..{s.stop - 1}"
            for p in range(s.first, s.stop):
                owner[p] = pointer or name
            summaries.append(
                LedgerEntry(
                    kind="summary",
                    fate="sent",
                    reason=f"stands for {s.stop - s.first} message(s) compacted"
                    + (f" on turn {wrote}" if wrote is not None else ""),
                    tokens_before=sum(
                        self._tokens_of(p)
                        for p in range(s.first, s.stop)
                        if self.log[p].role != "system"
                    ),
                    tokens_after=s.tokens,
                    pointer=pointer,
                    name=name,
                )
            )
        entries = [
            self._message(p, window, (cleared, cleared_ids), recalled, owner)
            for p in range(record.log_length)
        ]
        return Ledger(
            session_id=self.session_id,
            turn=turn,
            entries=(*entries, *summaries, *self._sections(trace), *self._tools(trace)),
            diff=self.diff(turn - 1 if turn > 1 else None, turn),
            trace=trace,
        )

    def _recalled(self, trace: Trace) -> dict[int, str]:
        """The log positions the recalled memory items of ``trace`` hold, by item."""
        out: dict[int, str] = {}
        for s in trace.sections:
            if s.status == "dropped":
                continue
            for ref in s.refs:
                kind, _, ident = ref.partition(":")
                if kind != "memory" or not ident.startswith("p") or not ident[1:].isdigit():
                    continue
                start = int(ident[1:])
                stop = next((b for a, b in self._spans if a == start), start + 1)
                for p in range(start, min(stop, len(self.log))):
                    out[p] = ref
        return out

    def _message(
        self,
        p: int,
        window: set[int],
        cleared_by: tuple[set[int], set[str]],
        recalled: dict[int, str],
        owner: dict[int, str],
    ) -> LedgerEntry:
        m = self.log[p]
        called = [b.name for b in m.tool_uses]
        answered = [self._calls.get(b.tool_use_id, "?") for b in m.tool_results]
        tools = tuple(dict.fromkeys(called + answered))
        before = self._tokens_of(p)

        def made(**fields: Any) -> LedgerEntry:
            return LedgerEntry(kind="message", position=p, role=m.role, tools=tools, **fields)

        pointer = f"log:{p}"
        if m.role == "system":
            return made(
                fate="sent",
                reason="a system message: its text is in the system prompt of every request",
                tokens_before=before,
                tokens_after=before,
                pointer=pointer,
            )
        if p in window:
            cleared, cleared_ids = cleared_by
            if p in cleared:
                results = [b.tool_use_id for b in m.tool_results]
                # every result when the trace names no ids (one written before it did)
                ids = {i for i in results if i in cleared_ids} or set(results)
                some = (
                    f"{len(ids)} of its {len(results)} tool results were"
                    if len(ids) < len(results)
                    else "its tool results were"
                )
                after = self.counter.count_messages([_cleared(m, ids)])
                return made(
                    fate="cleared",
                    reason=f"{some} cleared: older tool uses than the ones kept, with "
                    "the history over the clearing trigger",
                    tokens_before=before,
                    tokens_after=min(before, after),
                    pointer=pointer,
                )
            trimmed = [
                self._trimmed[b.tool_use_id]
                for b in m.tool_results
                if b.tool_use_id in self._trimmed
            ]
            if trimmed:
                _, event = trimmed[0]
                stored = event.kind == "stored"
                result_id = event.detail.split(":", 1)[0] if stored else ""
                return made(
                    fate="truncated",
                    reason=(
                        f"{event.name}'s result was stored and paged ({event.detail}); "
                        "the rest is behind the fetch_more cursor"
                        if stored
                        else f"{event.name}'s result was trimmed before it was logged "
                        f"({event.detail}); the cut part was not kept"
                    ),
                    tokens_before=max(before, event.tokens_before),
                    tokens_after=before,
                    pointer=f"result:{result_id}" if stored and result_id else pointer,
                )
            return made(
                fate="sent",
                reason="in the history sent, verbatim",
                tokens_before=before,
                tokens_after=before,
                pointer=pointer,
            )
        into = owner.get(p)
        if into is None:
            return made(
                fate="dropped",
                reason="not in the history sent, and no summary stands for it",
                tokens_before=before,
                tokens_after=0,
                pointer=pointer,
            )
        ref = recalled.get(p)
        if ref is not None:
            return made(
                fate="recalled",
                reason=f"compacted into {into}, and recalled from memory ({ref}) "
                "for this turn's query",
                tokens_before=before,
                tokens_after=0,
                pointer=pointer,
                into=into,
                refs=(ref,),
            )
        return made(
            fate="summarized",
            reason=f"compacted: the history no longer fit its room; {into} stands for it",
            tokens_before=before,
            tokens_after=0,
            pointer=pointer,
            into=into,
        )

    @staticmethod
    def _sections(trace: Trace) -> list[LedgerEntry]:
        fate: dict[str, Fate] = {"included": "sent", "truncated": "truncated", "dropped": "dropped"}
        return [
            LedgerEntry(
                kind="section",
                fate=fate[s.status],
                reason=s.reason,
                tokens_before=s.original_tokens,
                tokens_after=s.tokens if s.status != "dropped" else 0,
                name=s.name,
                refs=tuple(s.refs),
                tools=(),
                role=s.placement,
            )
            for s in trace.sections
        ]

    @staticmethod
    def _tools(trace: Trace) -> list[LedgerEntry]:
        tools = trace.tools
        if tools is None:
            return []
        out = []
        if tools.sent:
            out.append(
                LedgerEntry(
                    kind="tools",
                    fate="sent",
                    reason=f"{len(tools.sent)} tool definition(s) sent ({tools.mode})",
                    tokens_before=tools.tokens,
                    tokens_after=tools.tokens,
                    name=", ".join(tools.sent),
                    tools=tuple(tools.sent),
                )
            )
        if tools.deferred:
            out.append(
                LedgerEntry(
                    kind="tools",
                    fate="deferred",
                    reason=f"{tools.deferred} catalog tool(s) behind tool search, "
                    "loaded when the model searches for them",
                    tokens_before=max(0, tools.all_tokens - tools.tokens),
                    tokens_after=0,
                    name=f"{tools.deferred} deferred tool(s)",
                )
            )
        return out

    # -------------------------------------------------------------------- diff

    def diff(self, before: int | None, after: int) -> LedgerDiff:
        """What changed from turn ``before``'s request to turn ``after``'s
        (``before`` ``None``: from nothing)."""
        now = self._record(after)
        then = self._record(before) if before is not None else None
        was = _positions(then.window) if then is not None else set()
        is_ = _positions(now.window)
        lo = before if before is not None else 0
        cleared: set[int] = set()
        for t in self.traces[lo:after]:
            if t.ledger is not None:
                cleared |= _positions(t.ledger.cleared)
        sections_now = self._included(self.trace(after))
        sections_then = self._included(self.trace(before)) if before is not None else []
        first = now.first_change if before == after - 1 else None
        if before is not None and before != after - 1:
            first = self._first_difference(then, now)
        first_log = None
        if first is not None:
            first_log = _origin_at(now, first)
        cache = self.trace(after).cache
        return LedgerDiff(
            before=before,
            after=after,
            entered=tuple(sorted(is_ - was)),
            left=tuple(sorted(was - is_)),
            cleared=tuple(sorted(cleared & is_)),
            sections_entered=tuple(n for n in sections_now if n not in sections_then),
            sections_left=tuple(n for n in sections_then if n not in sections_now),
            first_change=first,
            first_change_log=first_log,
            cache=cache.first_change if cache is not None else None,
        )

    @staticmethod
    def _included(trace: Trace | None) -> list[str]:
        if trace is None:
            return []
        return [s.name for s in trace.sections if s.status != "dropped"]

    def _first_difference(self, then: LedgerTrace | None, now: LedgerTrace) -> int | None:
        """The first history position where two turns' histories differ by their
        messages' log positions (a later clear in between shows in ``cleared``)."""
        a = _origins(then) if then is not None else []
        b = _origins(now)
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return i
        return None if len(b) >= len(a) else len(b)

    # ------------------------------------------------------------------ originals

    def original(self, pointer: str) -> Original:
        """The original a pointer points at (see the module docstring); one that is
        gone says so. :class:`PointerError` when ``pointer`` does not parse."""
        if not isinstance(pointer, str):
            raise PointerError(repr(pointer), "a pointer is a string such as log:12")
        kind, sep, ident = pointer.partition(":")
        if not sep or not ident:
            raise PointerError(pointer, "expected KIND:ID (log, summary, memory or result)")
        if kind == "log":
            p = _whole(pointer, ident, "a log position")
            if p >= len(self.log):
                return Original(pointer, None, f"the log holds {len(self.log)} message(s)")
            return Original(pointer, message_text(self.log[p]))
        if kind == "summary":
            t = _whole(pointer, ident, "a turn number")
            if not 1 <= t <= self.turns:
                return Original(pointer, None, f"the session has no turn {t}")
            compacted = self.traces[t - 1].compacted
            if compacted is None:
                return Original(pointer, None, f"turn {t} did not compact")
            if compacted.summary is None:
                return Original(pointer, None, f"turn {t}'s trace predates kept summaries")
            return Original(pointer, compacted.summary)
        if kind in ("memory", "result"):
            space = self._memory_ns if kind == "memory" else self._results_ns
            if self.memory is None or space is None:
                return Original(pointer, None, "no memory store was given to read it from")
            found = self.memory.get_many(space(self.session_id), [ident])
            if not found:
                return Original(pointer, None, "deleted from the memory store")
            return Original(pointer, found[0].text)
        raise PointerError(pointer, f"unknown kind {kind!r} (log, summary, memory or result)")

    # ---------------------------------------------------------------------- find

    def find(self, text: str, turn: int | None = None) -> list[Found]:
        """Every message of the log (and summary of ``turn``) that holds ``text``
        (case-insensitive), with its ledger entry on ``turn`` (default: the latest)."""
        needle = text.casefold()
        if not needle.strip():
            raise PointerError(text, "give a text to find")
        ledger = self.ledger(turn)
        by_position = {e.position: e for e in ledger.messages}
        out: list[Found] = []
        for p, m in enumerate(self.log):
            body = message_text(m)
            at = body.casefold().find(needle)
            if at >= 0:
                out.append(Found(by_position[p], _snippet(body, at, len(needle))))
        for e in ledger.entries:
            if e.kind == "summary" and e.pointer is not None:
                body = self.original(e.pointer).text or ""
                at = body.casefold().find(needle)
                if at >= 0:
                    out.append(Found(e, _snippet(body, at, len(needle))))
        return out


def _whole(pointer: str, ident: str, what: str) -> int:
    if not ident.isdigit():
        raise PointerError(pointer, f"{what} is a whole number")
    return int(ident)


def _snippet(body: str, at: int, n: int, width: int = 60) -> str:
    start = max(0, at - width // 2)
    text = body[start : at + n + width // 2].replace("\n", " ")
    return ("…" if start else "") + text + ("…" if at + n + width // 2 < len(body) else "")


def _cleared(m: Message, ids: set[str]) -> Message:
    """``m`` with the content of the results of the calls ``ids`` replaced by the
    placeholder the Engine's clearing writes."""
    return Message(
        role=m.role,
        content=tuple(
            ToolResultBlock(b.tool_use_id, DEFAULT_PLACEHOLDER, is_error=b.is_error)
            if isinstance(b, ToolResultBlock) and b.tool_use_id in ids
            else b
            for b in m.content
        ),
    )


def _origins(record: LedgerTrace) -> list[int | None]:
    """The log position of each history message of ``record`` (``None``: a summary)."""
    at_summary = {s.index for s in record.summaries}
    positions = iter(p for a, b in record.window for p in range(a, b))
    size = sum(b - a for a, b in record.window) + len(at_summary)
    return [None if i in at_summary else next(positions, None) for i in range(size)]


def _origin_at(record: LedgerTrace, index: int) -> int | None:
    origins = _origins(record)
    return origins[index] if 0 <= index < len(origins) else None
