"""Replaying a recorded session through the Engine, and checking every request.

:func:`replay` feeds a recorded conversation to an :class:`~ctxwise.Engine`
message by message: before each assistant message it calls
:meth:`~ctxwise.Engine.turn` with everything new since the last turn (the user
message, or the previous reply and its tool results), so the Engine builds the
request the recorded model would have been sent, then the recorded reply is
passed on with the next turn. Each request is checked independently of the
Engine's own bookkeeping:

- ``over_budget_turns``: requests whose tokens (the counter over the request's
  neutral form) exceed ``budget - reserve``;
- ``invalid_requests``: requests that do not decode as the render target's
  request, have no message, do not start with a user turn, or have a tool
  pairing problem under the provider's placement rules;
- ``pinned_missing``: case facts and standing rules that were stated before the
  turn (found again here by the same extractors, over the recording's text) but
  are not verbatim in the request's system part, counted per request and item.

``tokens_sent`` adds up the requests; ``tokens_full`` adds up the unedited
history each turn would otherwise have sent (system part included). ``p50_ms``
and ``p99_ms`` are the per-turn overhead of ``Engine.turn`` (no model calls).

Tool call ids a recording reuses across its compaction segments (Claude Code
copies the tail's calls into the next segment) are renamed ``<id>~N`` before the
replay, since one Engine session spans every segment (``renamed_ids``). Pairing
problems inside a segment are refused unless ``repair`` is set.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from ctxwise._schema import describe
from ctxwise.config import EngineConfig
from ctxwise.engine import Engine
from ctxwise.errors import PairingError, UsageError
from ctxwise.formats import anthropic, openai
from ctxwise.memory.facts import CaseFacts, FactExtractor, Rules
from ctxwise.memory.urls import store_kind
from ctxwise.messages import ContentBlock, Message, ToolResultBlock, ToolUseBlock, Transcript
from ctxwise.pairing import repair_pairing
from ctxwise.sessions import check_session_id
from ctxwise.tokens import TokenCounter

__all__ = ["ReplayReport", "replay"]


@dataclass(frozen=True, slots=True)
class ReplayReport:
    source: str | None
    messages: int
    budget: int
    available: int
    turns: int
    max_window_tokens: int
    over_budget_turns: int
    invalid_requests: int
    pinned_missing: int
    compactions: int
    clears: int
    tokens_sent: int
    tokens_full: int
    p50_ms: float
    p99_ms: float
    repaired: int = 0
    renamed_ids: int = 0
    problems: tuple[str, ...] = field(default_factory=tuple)
    """The first few invalid requests and missing pins, described."""

    @property
    def sent_ratio(self) -> float:
        return self.tokens_sent / self.tokens_full if self.tokens_full else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["problems"] = list(self.problems)
        out["sent_ratio"] = round(self.sent_ratio, 4)
        return out


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _rename_reused_ids(t: Transcript) -> tuple[list[Message], int]:
    """Give every tool call of a later segment that reuses an earlier segment's id a
    fresh id (and its results with it)."""
    starts = set(t.segment_starts()[1:])
    seen: set[str] = set()
    segment_ids: set[str] = set()
    renames: dict[str, str] = {}
    renamed = 0
    out: list[Message] = []
    for i, m in enumerate(t.messages):
        if i in starts:
            seen |= segment_ids
            segment_ids = set()
            renames = {}
        blocks: list[ContentBlock] = []
        changed = False
        for b in m.content:
            if isinstance(b, ToolUseBlock):
                new_id = b.id
                if b.id in seen:
                    n = 2
                    while f"{b.id}~{n}" in seen or f"{b.id}~{n}" in segment_ids:
                        n += 1
                    new_id = renames[b.id] = f"{b.id}~{n}"
                    renamed += 1
                segment_ids.add(new_id)
                if new_id != b.id:
                    b = replace(b, id=new_id)
                    changed = True
            elif isinstance(b, ToolResultBlock) and b.tool_use_id in renames:
                b = replace(b, tool_use_id=renames[b.tool_use_id])
                changed = True
            blocks.append(b)
        out.append(replace(m, content=tuple(blocks)) if changed else m)
    return out, renamed


def _system_text(request: dict[str, Any], render: str) -> str:
    if render == "anthropic":
        system = request.get("system") or []
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
    msgs = request.get("messages") or []
    return "\n".join(
        m.get("content", "") for m in msgs if m.get("role") == "system" and isinstance(m, dict)
    )


def _request_problem(request: dict[str, Any], render: str) -> str | None:
    try:
        decoded = (
            anthropic.decode_request(request)
            if render == "anthropic"
            else openai.decode_request(request)
        )
    except UsageError as exc:
        return f"does not decode: {exc}"
    turns = [m for m in decoded.messages if m.role != "system"]
    if not turns:
        return "no message"
    if turns[0].role != "user":
        return f"starts with a {turns[0].role} message"
    found = decoded.problems("anthropic" if render == "anthropic" else "openai")
    if found:
        p = found[0]
        return f"{len(found)} pairing problem(s), first: {p.kind.value} {p.tool_use_id}"
    return None


def _turns(messages: Sequence[Message]) -> Iterator[tuple[int, int, Sequence[Message]]]:
    """``(i, last, new)`` for each turn: before assistant message ``i`` (one that follows a
    message other than a system one), the messages ``new`` since the last turn's ``last``."""
    last = 0
    spoken = False  # a non-system message came before this one
    for i, m in enumerate(messages):
        before, spoken = spoken, spoken or m.role != "system"
        if m.role != "assistant" or not before:
            continue
        yield i, last, messages[last:i]
        last = i


def replay(
    transcript: Transcript,
    *,
    budget: int,
    config: EngineConfig | None = None,
    counter: TokenCounter | None = None,
    repair: bool = False,
    session_id: str = "replay",
    clock: Callable[[], float] | None = None,
    engine: Engine | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Drive ``transcript`` through an Engine and check every request (see the
    module docstring). ``config`` gives the Engine's settings (default: an
    in-memory store), with ``budget`` replacing its budget; or pass a built
    ``engine`` (its budget is used as it is). A store that outlives the call (the
    config's SQLite file, say) gets the session only when every turn ran: the
    turns run first on in-memory stores, so a failed replay leaves none of it.
    ``progress(done, total)`` is called after each turn the Engine runs (the dry
    run's turns count too); nothing is printed."""
    if not isinstance(transcript, Transcript):
        raise UsageError(f"replay() takes a Transcript, got {type(transcript).__name__}")
    tick = clock if clock is not None else time.perf_counter
    repaired = 0
    t = transcript
    if repair:
        t, fixed = repair_pairing(t)
        repaired = len(fixed)
    else:
        found = t.problems("loose")
        if found:
            raise PairingError(found, "loose", t.source)
    messages, renamed = _rename_reused_ids(t)
    own = engine is None
    if engine is None:
        base = config if config is not None else EngineConfig(store="memory")
        cfg = base.model_copy(update={"budget": budget})
        try:  # re-check reserve < budget; base_dir is no key, so it is passed on by hand
            cfg = EngineConfig.model_validate({**cfg.model_dump(), "base_dir": base.base_dir})
        except ValidationError as e:
            raise UsageError(f"budget {budget:,} with this config: {describe(e)}") from None
        engine = Engine(cfg, counter=counter)
    if engine.sessions.version(check_session_id(session_id)):
        if own:
            engine.close()
        raise UsageError(
            f"session {session_id!r} already exists in the store: a replay starts a new "
            "session (choose another session id, or a new store)"
        )
    cfg = engine.config
    render = cfg.render
    count = engine.counter
    extractor = None if cfg.facts.extractor == "none" else FactExtractor.preset(cfg.facts.extractor)
    facts, rules = CaseFacts(), Rules()
    stats = {"turns": 0, "over": 0, "invalid": 0, "missing": 0, "comp": 0, "clear": 0}
    max_window = sent = full = 0
    one = [Message.text_message("user", "x")]
    overhead = 2 * count.count_messages(one) - count.count_messages(one * 2)
    prefix = [0]
    for x in messages:
        prefix.append(prefix[-1] + count.count_messages([x]))
    times: list[float] = []
    problems: list[str] = []
    dry_run = own and store_kind(cfg.store) != "memory"
    work = sum(1 for _ in _turns(messages)) * (2 if dry_run else 1)
    done = 0

    def advance() -> None:
        nonlocal done
        if progress is not None:
            done += 1
            progress(done, work)

    if progress is not None:
        progress(0, work)
    try:
        if dry_run:
            # a store that outlives the call gets the session only if every turn runs:
            # the turns run first on in-memory stores, so one that fails (a budget too
            # small for what a later turn must keep) leaves no partial session behind
            with Engine(cfg.model_copy(update={"store": "memory"}), counter=counter) as dry:
                for _, _, new in _turns(messages):
                    dry.turn(session_id, new, warn_unanswered=False)
                    advance()
        for i, last, new in _turns(messages):
            body = [x for x in new if x.role != "system"]
            if extractor is not None and body:
                facts.update_from_messages(body, offset=last, extractor=extractor)
            if cfg.facts.rules and body:
                rules.capture_messages(body, offset=last)
            start = tick()
            result = engine.turn(session_id, new, warn_unanswered=False)
            times.append((tick() - start) * 1000)
            trace = result.trace
            stats["turns"] += 1
            total = trace.tokens.total
            max_window = max(max_window, total)
            sent += total
            full += prefix[i] - overhead * (i - 1)  # the unedited history, as one request
            if total > trace.tokens.available:
                stats["over"] += 1
                problems.append(f"turn {trace.turn}: {total} tokens > {trace.tokens.available}")
            bad = _request_problem(result.request, render)
            if bad is not None:
                stats["invalid"] += 1
                problems.append(f"turn {trace.turn}: invalid request: {bad}")
            system = _system_text(result.request, render)
            expected = [f"- {f.key}: {' '.join(f.value.split())}" for f in facts]
            expected += [f"- {' '.join(r.text.split())}" for r in rules]
            for line in expected:
                if line not in system:
                    stats["missing"] += 1
                    problems.append(f"turn {trace.turn}: pinned item missing: {line[:80]}")
            stats["comp"] += trace.compacted is not None
            stats["clear"] += trace.cleared is not None
            advance()
    finally:
        if own:
            engine.close()
    return ReplayReport(
        source=transcript.source,
        messages=len(messages),
        budget=cfg.budget,
        available=cfg.budget - cfg.reserve,
        turns=stats["turns"],
        max_window_tokens=max_window,
        over_budget_turns=stats["over"],
        invalid_requests=stats["invalid"],
        pinned_missing=stats["missing"],
        compactions=stats["comp"],
        clears=stats["clear"],
        tokens_sent=sent,
        tokens_full=full,
        p50_ms=round(_percentile(times, 0.5), 3),
        p99_ms=round(_percentile(times, 0.99), 3),
        repaired=repaired,
        renamed_ids=renamed,
        problems=tuple(problems[:10]),
    )
