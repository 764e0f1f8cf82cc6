"""What the inspector's pages show, computed from a :class:`~ctxwise.ledger.LedgerReader`
(no HTTP here): a turn's tokens by part, the timeline across turns, a diff named
message by message.

The inspector never computes its own view of a window: every number is the
trace's or the ledger's. Where the two count the same thing differently (the
trace counts the history sent as one joined request, the ledger message by
message), the difference is its own part, ``framing/other``, never spread over
the others.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxwise.errors import UnknownTurnError
from ctxwise.ledger import Ledger, LedgerDiff, LedgerEntry, LedgerReader, message_text
from ctxwise.trace import Trace

__all__ = [
    "PARTS",
    "DiffItem",
    "DiffView",
    "Part",
    "Row",
    "TimelineRow",
    "diff_view",
    "parts",
    "preview",
    "route_scores",
    "rows",
    "timeline",
]

PARTS: tuple[tuple[str, str], ...] = (
    ("tools", "tool definitions"),
    ("system", "system and pinned"),
    ("rules", "rules and facts"),
    ("sources", "routed sources"),
    ("memory", "recalled memory"),
    ("summary", "summary"),
    ("history", "history"),
    ("results", "tool results"),
    ("other", "framing/other"),
)
"""Each part of a request's tokens (key, label), in the order the request reads."""

_SENT = ("sent", "cleared", "truncated")


@dataclass(frozen=True, slots=True)
class Part:
    key: str
    label: str
    tokens: int


def _section_part(name: str, source: str, pinned: bool, refs: list[str]) -> str:
    if source in ("(rules)", "(facts)"):
        return "rules"
    if source == "(system)" or pinned:
        return "system"
    if source == "memory" or any(r.startswith("memory:") for r in refs):
        return "memory"
    return "sources"


def parts(ledger: Ledger, reader: LedgerReader) -> tuple[tuple[Part, ...], dict[str, int]]:
    """The turn's tokens by part, adding up to ``trace.tokens.total`` exactly, and
    the numbers ``framing/other`` is made of.

    Sections come from the trace (each by its source: the system text and pinned
    sections, rules and facts, recalled memory, the routed sources), the tool
    definitions and the summaries' tokens too. The rest of the trace's history
    count is split by the ledger: messages holding tool results, and the others.
    ``framing/other`` is what is left of the total: the request's own framing, and
    the difference between the trace's joined count of the history and the
    ledger's message-by-message counts (each message's tokens after its fate)."""
    trace = ledger.trace
    tokens = trace.tokens
    got = dict.fromkeys((k for k, _ in PARTS), 0)
    for s in trace.sections:
        if s.status != "dropped":
            got[_section_part(s.name, s.source, s.pinned, s.refs)] += s.tokens
    got["tools"] = tokens.tools
    record = trace.ledger
    summary = sum(s.tokens for s in record.summaries) if record is not None else 0
    results = messages = 0
    for e in ledger.messages:
        if e.fate in _SENT and e.position is not None:
            if reader.log[e.position].tool_results:
                results += e.tokens_after
            else:
                messages += e.tokens_after
    room = max(0, tokens.history - summary)
    got["summary"] = min(summary, tokens.history)
    got["results"] = min(results, room)
    got["history"] = min(messages, room - got["results"])
    counted = sum(v for k, v in got.items() if k != "other")
    got["other"] = max(0, tokens.total - counted)
    if counted > tokens.total:  # never drawn past the total: take it from the history
        got["history"] = max(0, got["history"] - (counted - tokens.total))
    sections = sum(got[k] for k in ("system", "rules", "sources", "memory"))
    detail = {
        "framing": tokens.total - tokens.system - tokens.context - tokens.history - tokens.tools,
        "history_trace": tokens.history,
        "history_ledger": summary + results + messages,
        "sections_trace": tokens.system + tokens.context,
        "sections": sections,
    }
    return tuple(Part(k, label, got[k]) for k, label in PARTS), detail


@dataclass(frozen=True, slots=True)
class TimelineRow:
    turn: int
    sent: int
    available: int
    full: int | None
    """The full history: the ledger's tokens before, summed over the log's messages
    (``None``: the turn's trace has no ledger record)."""
    cache_read: int
    cache_write: int
    uncached: int
    cost: float | None
    cleared: int | None
    compacted: int | None
    route: str


def _full(reader: LedgerReader, turn: int) -> int | None:
    try:
        ledger = reader.ledger(turn)
    except UnknownTurnError:
        return None
    return sum(e.tokens_before for e in ledger.messages)


def timeline(reader: LedgerReader) -> list[TimelineRow]:
    """One row per turn: tokens sent (the trace's total), the full history (the
    ledger's), the cache's reads and writes and the input's cost (the trace's
    ``cache``), and what clearing and compaction did."""
    out = []
    for t in reader.traces:
        c = t.cache
        out.append(
            TimelineRow(
                turn=t.turn,
                sent=t.tokens.total,
                available=t.tokens.available,
                full=_full(reader, t.turn),
                cache_read=c.read if c else 0,
                cache_write=(c.write_5m + c.write_1h) if c else 0,
                uncached=c.uncached if c else 0,
                cost=c.input_usd if c else None,
                cleared=t.cleared.tool_uses if t.cleared else None,
                compacted=t.compacted.summarized_messages if t.compacted else None,
                route=t.route.label or f"({t.route.reason})",
            )
        )
    return out


def preview(text: str, width: int = 160) -> str:
    """``text`` on one line, cut at ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@dataclass(frozen=True, slots=True)
class Row:
    """A ledger entry as the table shows it."""

    entry: LedgerEntry
    label: str
    preview: str


def rows(ledger: Ledger, reader: LedgerReader) -> list[Row]:
    out = []
    for e in ledger.entries:
        if e.kind == "message" and e.position is not None:
            label = f"#{e.position}"
            text = preview(message_text(reader.log[e.position]))
        else:
            label = e.kind
            text = e.name or ""
        out.append(Row(e, label, text))
    return out


@dataclass(frozen=True, slots=True)
class DiffItem:
    position: int
    role: str
    tools: tuple[str, ...]
    tokens: int
    preview: str


@dataclass(frozen=True, slots=True)
class DiffView:
    diff: LedgerDiff
    entered: list[DiffItem]
    left: list[DiffItem]
    cleared: list[DiffItem]


def diff_view(reader: LedgerReader, before: int | None, after: int) -> DiffView:
    diff = reader.diff(before, after)
    ledger = reader.ledger(after)
    by_position = {e.position: e for e in ledger.messages}

    def item(p: int, *, gone: bool = False) -> DiffItem:
        e = by_position.get(p)
        m = reader.log[p]
        return DiffItem(
            position=p,
            role=m.role,
            tools=e.tools if e is not None else (),
            tokens=0 if e is None else e.tokens_before if gone else e.tokens_after,
            preview=preview(message_text(m), 120),
        )

    return DiffView(
        diff=diff,
        entered=[item(p) for p in diff.entered],
        left=[item(p, gone=True) for p in diff.left],
        cleared=[item(p) for p in diff.cleared],
    )


def route_scores(trace: Trace) -> list[tuple[str, float]]:
    """The route's scores, best first."""
    return sorted(trace.route.scores.items(), key=lambda kv: (-kv[1], kv[0]))
