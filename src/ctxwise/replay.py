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

With ``cost=True`` the report carries :class:`ReplayCost`: each turn's request as
the Engine's cost step charged it against the provider's prompt cache
(``trace.cache``: read, written, uncached) plus the recorded reply as output, the
money at the model's price, and, given ``recorded`` (what each recorded call was
billed, by the id of the assistant message it answered with), the recording's own
split and money beside each turn and in total.

Tool call ids a recording reuses across its compaction segments (Claude Code
copies the tail's calls into the next segment) are renamed ``<id>~N`` before the
replay, since one Engine session spans every segment (``renamed_ids``). Pairing
problems inside a segment are refused unless ``repair`` is set.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from ctxwise._schema import describe
from ctxwise.config import EngineConfig
from ctxwise.engine import Engine
from ctxwise.errors import PairingError, UsageError
from ctxwise.formats import anthropic, openai
from ctxwise.formats.usage import BilledCall, CallUsage, transcript_calls
from ctxwise.memory.facts import CaseFacts, FactExtractor, Rules
from ctxwise.memory.urls import store_kind
from ctxwise.messages import ContentBlock, Message, ToolResultBlock, ToolUseBlock, Transcript
from ctxwise.pairing import repair_pairing
from ctxwise.pricing import Price, TokenSplit, cost_usd, price_for
from ctxwise.sessions import check_session_id
from ctxwise.tokens import TokenCounter
from ctxwise.trace import Trace

__all__ = [
    "CalibrationRow",
    "ReplayCost",
    "ReplayReport",
    "TurnCost",
    "calibration_rows",
    "replay",
]


@dataclass(frozen=True, slots=True)
class TurnCost:
    """One replayed turn's tokens and money with the cache simulated, and what the
    recording's call for the same reply was billed (``None``: not recorded)."""

    turn: int
    split: TokenSplit
    usd: float | None
    first_change: str | None = None
    reason: str | None = None
    recorded: TokenSplit | None = None
    recorded_usd: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            **_split_dict(self.split),
            "usd": self.usd,
            "first_change": self.first_change,
            "reason": self.reason,
            "recorded": None if self.recorded is None else _split_dict(self.recorded),
            "recorded_usd": self.recorded_usd,
        }


@dataclass(frozen=True, slots=True)
class ReplayCost:
    """A replay's money: every turn (:class:`TurnCost`), the totals under ctxwise's
    policy with the cache simulated, and the recording's own (every billed call of
    the recording, ``recorded_calls`` of them; ``None`` when nothing was given).
    ``usd`` is ``None`` when ``model`` has no price (unknown, not zero)."""

    model: str
    turns: tuple[TurnCost, ...]
    total: TokenSplit
    usd: float | None
    cache_breaks: int
    """Turns whose request differs from the previous one before its end (an edit)."""
    recorded_total: TokenSplit | None = None
    recorded_usd: float | None = None
    recorded_calls: int = 0
    recorded_unpriced: int = 0
    """Recorded calls whose model has no price (left out of ``recorded_usd``)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "total": _split_dict(self.total),
            "usd": self.usd,
            "cache_breaks": self.cache_breaks,
            "recorded_total": None
            if self.recorded_total is None
            else _split_dict(self.recorded_total),
            "recorded_usd": self.recorded_usd,
            "recorded_calls": self.recorded_calls,
            "recorded_unpriced": self.recorded_unpriced,
            "turns": [t.to_dict() for t in self.turns],
        }


def _split_dict(split: TokenSplit) -> dict[str, int]:
    return {
        "uncached": split.uncached,
        "cache_read": split.cache_read,
        "cache_write_5m": split.cache_write_5m,
        "cache_write_1h": split.cache_write_1h,
        "output": split.output,
    }


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
    cost: ReplayCost | None = None

    @property
    def sent_ratio(self) -> float:
        return self.tokens_sent / self.tokens_full if self.tokens_full else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(replace(self, cost=None))
        out["problems"] = list(self.problems)
        out["sent_ratio"] = round(self.sent_ratio, 4)
        out["cost"] = None if self.cost is None else self.cost.to_dict()
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
    cost: bool = False,
    recorded: Sequence[BilledCall] = (),
) -> ReplayReport:
    """Drive ``transcript`` through an Engine and check every request (see the
    module docstring). ``config`` gives the Engine's settings (default: an
    in-memory store), with ``budget`` replacing its budget; or pass a built
    ``engine`` (its budget is used as it is). A store that outlives the call (the
    config's SQLite file, say) gets the session only when every turn ran: the
    turns run first on in-memory stores, so a failed replay leaves none of it.
    ``progress(done, total)`` is called after each turn the Engine runs (the dry
    run's turns count too); nothing is printed. ``cost``: price every turn (see the
    module docstring; the Engine's ``costs.track`` is turned on), beside the
    ``recorded`` calls when given."""
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
        if cost and not cfg.costs.track:
            cfg = cfg.model_copy(update={"costs": cfg.costs.model_copy(update={"track": True})})
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
    turn_costs: list[TurnCost] = []
    billed = {c.id: c for c in recorded}
    price = price_for(cfg.model, cfg.costs.prices)
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
            if cost:
                turn_costs.append(_turn_cost(trace, messages[i], count, overhead, billed, price))
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
        cost=_replay_cost(cfg.model, turn_costs, recorded, price, cfg.costs.prices)
        if cost
        else None,
    )


def _turn_cost(
    trace: Trace,
    reply: Message,
    count: TokenCounter,
    overhead: int,
    billed: Mapping[str, BilledCall],
    price: Price | None,
) -> TurnCost:
    cache = trace.cache
    if cache is None:  # a caller's own engine with costs.track off
        raise UsageError("replay(cost=True) needs the engine's costs.track on")
    call = billed.get(reply.id or "")
    # the reply's output: what the provider billed for it when the recording says
    output = call.split.output if call is not None else count.count_messages([reply]) - overhead
    split = TokenSplit(cache.uncached, cache.read, cache.write_5m, cache.write_1h, output)
    return TurnCost(
        trace.turn,
        split,
        cost_usd(split, price),
        cache.first_change,
        cache.reason,
        None if call is None else call.split,
        None if call is None else cost_usd(call.split, price_for(call.model)),
    )


def _replay_cost(
    model: str,
    turns: Sequence[TurnCost],
    recorded: Sequence[BilledCall],
    price: Price | None,
    prices: Mapping[str, Price],
) -> ReplayCost:
    total = sum((t.split for t in turns), TokenSplit())
    recorded_total = sum((c.split for c in recorded), TokenSplit()) if recorded else None
    recorded_usd: float | None = None
    unpriced = 0
    if recorded:
        recorded_usd = 0.0
        for c in recorded:
            usd = cost_usd(c.split, price_for(c.model, prices))
            if usd is None:
                unpriced += 1
            else:
                recorded_usd += usd
    return ReplayCost(
        model=model,
        turns=tuple(turns),
        total=total,
        # each request priced alone: a model priced by prompt length prices each one
        usd=None if price is None else sum(t.usd or 0.0 for t in turns),
        cache_breaks=sum(1 for t in turns if t.first_change is not None),
        recorded_total=recorded_total,
        recorded_usd=recorded_usd,
        recorded_calls=len(recorded),
        recorded_unpriced=unpriced,
    )


@dataclass(frozen=True, slots=True)
class CalibrationRow:
    """One recorded call replayed with the usage before it fed back: how many
    responses with usage the session had seen (``calls``), the provider's count of
    the Engine's request (``provider``) and the count the Engine expected
    (``expected``, its counted total times the session's factor)."""

    chain: int
    calls: int
    provider: int
    expected: int

    @property
    def error(self) -> float:
        """``|expected - provider| / provider``."""
        return abs(self.expected - self.provider) / self.provider


def _chains(t: Transcript) -> list[list[CallUsage]]:
    """The transcript's calls with a prompt count, split where the recording
    compacted or changed model (the recorded prompt no longer holds what came
    before)."""
    bounds = [b.index for b in t.compactions]
    chains: list[list[CallUsage]] = []
    for call in transcript_calls(t):
        if call.prompt_tokens is None:
            continue
        last = chains[-1][-1] if chains else None
        if (
            last is None
            or any(last.index < x <= call.index for x in bounds)
            or call.model != last.model
        ):
            chains.append([])
        chains[-1].append(call)
    return chains


def calibration_rows(
    transcript: Transcript, config: EngineConfig | None = None
) -> list[CalibrationRow]:
    """Each chain of ``transcript``'s recorded calls (its assistant messages' kept
    usage, :func:`ctxwise.formats.usage.transcript_calls`) replayed as an Engine
    session with online calibration: turn ``j`` sends what led to call ``j``, call
    ``j-1``'s response as an Anthropic ``Message`` carrying its usage first. The
    Engine edits nothing (it must send what the recording sent; ``config``'s counter,
    model and safety margin apply).

    The recorded prompts also hold what the transcript does not (Claude Code's
    system prompt and tool definitions, fixed within a chain): the provider's count
    of what the Engine sends is the recorded prompt less that prefix, taken as the
    chain's first prompt less the Engine's count of its first request; the usage fed
    back is that count."""
    base = config if config is not None else EngineConfig(store="memory")
    cfg = EngineConfig.model_validate(
        {
            **base.model_dump(),
            "store": "memory",
            "budget": 2_000_000,
            "reserve": 0,
            "clearing": {"enabled": False},
            "compaction": {"enabled": False},
            "facts": {"extractor": "none", "rules": False},
            "memory": {"recall": False},
            "costs": {"track": False},
        }
    )
    out: list[CalibrationRow] = []
    with Engine(cfg) as engine:
        for k, chain in enumerate(_chains(transcript)):
            start = max(
                (b.index for b in transcript.compactions if b.index <= chain[0].index), default=0
            )
            prefix = 0
            previous: CallUsage | None = None
            for j, call in enumerate(chain):
                assert call.prompt_tokens is not None
                new: list[object] = []
                for i in range(start if previous is None else previous.index, call.index):
                    m = transcript.messages[i]
                    if previous is not None and i == previous.index:
                        assert previous.prompt_tokens is not None
                        body = anthropic.encode_response(m)
                        body["usage"] = {"input_tokens": previous.prompt_tokens - prefix}
                        new.append(body)
                    else:
                        new.append(m)
                r = engine.turn(f"chain{k}", new, warn_unanswered=False)
                if j == 0:
                    prefix = call.prompt_tokens - r.trace.tokens.total
                c = r.trace.calibration
                if c is None or c.expected is None:
                    raise UsageError("calibration_rows needs the calibrate step in the turn")
                out.append(CalibrationRow(k, j, call.prompt_tokens - prefix, c.expected))
                previous = call
    return out
