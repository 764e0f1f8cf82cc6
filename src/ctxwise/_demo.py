"""The Northwind support session, driven through :class:`ctxwise.Engine` (``ctxwise demo``).

The script (:mod:`ctxwise._northwind`) is played twice on the same SQLite file,
by two Engines built from the same config:

- **ctxwise**: a keyword router sends each user message to the sources its label
  needs (chitchat loads one line of style, a code question loads the code and
  the tool docs, a recall question only memory), old tool results are cleared
  and the history compacted under the budget, compacted turns are recalled from
  memory, case facts and standing rules are pinned, and a policy gate holds the
  refund until the address check has passed;
- **kitchen sink**: the same config with no router (every source on every
  turn), no clearing, no compaction, no recall, and a budget that holds all of
  it: the unedited history plus every source, every turn;
- **newest first**, the same-budget baseline: what an agent without ctxwise sends
  at ctxwise's budget. Each kitchen-sink request (every source in the latest user
  turn, the unedited history) with the system prompt alone as its system part (no
  pinned facts or rules: those are ctxwise's), cut the common way: the newest
  messages that fit, a tool call with its results (:func:`newest_first`). It gets
  the same needs checks.

Each turn declares what the model must read in that turn's request; every one
is searched for in the text of the rendered request, so "every fact present
when it is needed" is checked, not claimed. Every tool call the scripted model
makes first goes through :meth:`Engine.check_tool`; a blocked call is answered
with an error result that carries the rule.

Only the public API of ctxwise is used. Nothing depends on the wall clock except
the traces' timings, which the report leaves out.

The end of the module keeps the reference routing scenario (:func:`routing_pipeline`),
which the orchestrator and LangGraph tests run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxwise import (
    Blocked,
    Engine,
    EngineConfig,
    KeywordClassifier,
    Message,
    Pipeline,
    PolicyGate,
    RequireFact,
    StaticSource,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Trace,
    UsageError,
    WordCounter,
)
from ctxwise._northwind import CODE, KB, RULE, SCRIPT, SESSION_ID, STYLE, SYSTEM, TOOL_DOCS, Call
from ctxwise.formats.request import CONTEXT_OPEN

__all__ = [
    "BUDGET",
    "HEAVY",
    "KITCHEN_SINK_BUDGET",
    "ROUTING_QUERIES",
    "DemoRun",
    "DemoTurn",
    "GateCheck",
    "NeedCheck",
    "demo_config",
    "kitchen_sink_config",
    "newest_first",
    "request_parts",
    "routing_pipeline",
    "run_demo",
]

BUDGET = 2_400
"""Tokens per request for the ctxwise run (char counter: 4 characters a token)."""
KITCHEN_SINK_BUDGET = 1_000_000
"""Enough for the kitchen sink to hold everything on every turn."""
KITCHEN_SINK_SESSION = SESSION_ID + "-kitchen-sink"
HEAVY = ("kb", "code", "tool_docs", "memory")
"""The sources a chitchat turn must not load."""

_ROUTER = {
    "code": ["code", "bug", "error", "exception", "keyerror", "traceback", "function", "script"],
    "recall": ["remind", "recall", "remember", "earlier"],
    "chitchat": ["thanks", "thank", "hi", "hello", "bye", "cool", "nice", "great", "star"],
}


def demo_config(store: str, budget: int = BUDGET) -> EngineConfig:
    """The ctxwise run's config: routes, sources, support facts, clearing and compaction."""
    return EngineConfig.model_validate(
        {
            "budget": budget,
            "counter": "char",  # as BUDGET says: 4 characters a token, no margin
            "safety_margin": 0,
            "store": store,
            "system": SYSTEM,
            "router": {"keywords": _ROUTER, "default": "case"},
            "routes": {
                "chitchat": ["style"],
                "code": ["code", "tool_docs"],
                "recall": ["memory"],
                "case": ["kb", "memory"],
            },
            "fallback": ["kb", "memory"],
            "sources": {
                "style": {"text": STYLE, "priority": 40},
                "kb": {"text": KB, "priority": 50},
                "code": {"text": CODE, "priority": 70},
                "tool_docs": {"text": TOOL_DOCS, "priority": 60},
            },
            "memory": {"k": 2},
            "facts": {"extractor": "support"},
            "clearing": {"keep_last": 1},
        }
    )


def kitchen_sink_config(config: EngineConfig) -> EngineConfig:
    """``config`` with every source on every turn and nothing edited away: no
    router, no clearing, no compaction, no recall, and room for all of it."""
    data = config.model_dump()
    data.update(
        budget=KITCHEN_SINK_BUDGET,
        router=None,
        routes={},
        fallback=None,
        memory={**data["memory"], "recall": False},
        clearing={**data["clearing"], "enabled": False},
        compaction={**data["compaction"], "enabled": False},
    )
    return EngineConfig.model_validate(data)


def _gate() -> PolicyGate:
    return PolicyGate(
        [
            RequireFact(
                "address-check-before-refund",
                RULE,
                ("issue_refund",),
                "address_check:{order_id}",
                satisfied_by="verify_address",
            )
        ]
    )


@dataclass(frozen=True, slots=True)
class NeedCheck:
    """One string the model needs on this turn, and the parts of the request that
    held it (``system``, ``context``, ``history``; empty: missing)."""

    text: str
    found_in: tuple[str, ...]

    @property
    def present(self) -> bool:
        return bool(self.found_in)


@dataclass(frozen=True, slots=True)
class GateCheck:
    """What :meth:`Engine.check_tool` said about a call before it ran."""

    tool: str
    input: dict[str, Any]
    allowed: bool
    reason: str


@dataclass(frozen=True, slots=True)
class DemoTurn:
    turn: int
    note: str
    trace: Trace
    needs: tuple[NeedCheck, ...]
    gate: tuple[GateCheck, ...]
    """The calls checked before this turn's messages were sent."""
    user: str | None = None
    """What the user said on this turn (``None``: a turn of tool results only)."""

    @property
    def ok(self) -> bool:
        return all(c.present for c in self.needs)

    def to_dict(self) -> dict[str, Any]:
        t = self.trace
        return {
            "turn": self.turn,
            "note": self.note,
            "user": self.user,
            "label": t.route.label,
            "route_reason": t.route.reason,
            "fallback": t.route.fallback,
            "chosen": list(t.chosen),
            "skipped": list(t.skipped),
            "sections": [
                {"name": s.name, "source": s.source, "status": s.status, "tokens": s.tokens}
                for s in t.sections
            ],
            "cleared": None if t.cleared is None else t.cleared.model_dump(mode="json"),
            "compacted": None if t.compacted is None else t.compacted.model_dump(mode="json"),
            "facts_changed": list(t.facts_changed),
            "rules_added": list(t.rules_added),
            "tokens": t.tokens.model_dump(mode="json"),
            "needs": [
                {"text": c.text, "present": c.present, "found_in": list(c.found_in)}
                for c in self.needs
            ],
            "gate": [
                {"tool": g.tool, "input": g.input, "allowed": g.allowed, "reason": g.reason}
                for g in self.gate
            ],
        }


@dataclass(frozen=True, slots=True)
class Baseline:
    """One turn of the same-budget baseline: the tokens it sent, the messages it
    dropped, and the needs checks on its request."""

    turn: int
    tokens: int
    dropped: int
    needs: tuple[NeedCheck, ...]

    @property
    def ok(self) -> bool:
        return all(c.present for c in self.needs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "tokens": self.tokens,
            "dropped_messages": self.dropped,
            "needs": [
                {"text": c.text, "present": c.present, "found_in": list(c.found_in)}
                for c in self.needs
            ],
        }


@dataclass(frozen=True, slots=True)
class DemoRun:
    """Both runs of the script, turn by turn."""

    budget: int
    turns: tuple[DemoTurn, ...]
    kitchen_sink: tuple[DemoTurn, ...]
    newest: tuple[Baseline, ...] = ()
    """The same-budget baseline's turns (:func:`newest_first` of the kitchen sink's)."""

    @property
    def total_tokens(self) -> int:
        return sum(t.trace.tokens.total for t in self.turns)

    @property
    def kitchen_sink_tokens(self) -> int:
        return sum(t.trace.tokens.total for t in self.kitchen_sink)

    @property
    def saving(self) -> float:
        """The share of the kitchen sink's input tokens ctxwise did not send."""
        sink = self.kitchen_sink_tokens
        return 1 - self.total_tokens / sink if sink else 0.0

    @property
    def ok(self) -> bool:
        """Every turn's request held everything the model needed then."""
        return all(t.ok for t in self.turns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "kitchen_sink_budget": KITCHEN_SINK_BUDGET,
            "turns": [t.to_dict() for t in self.turns],
            "kitchen_sink": [t.to_dict() for t in self.kitchen_sink],
            "totals": {
                "ctxwise_tokens": self.total_tokens,
                "kitchen_sink_tokens": self.kitchen_sink_tokens,
                "saving": round(self.saving, 4),
                "compactions": sum(t.trace.compacted is not None for t in self.turns),
                "clears": sum(t.trace.cleared is not None for t in self.turns),
            },
            "checks": {
                "needs_present": sum(c.present for t in self.turns for c in t.needs),
                "needs_total": sum(len(t.needs) for t in self.turns),
                "ok": self.ok,
            },
            "newest_first": {
                "budget": self.budget,
                "tokens": sum(b.tokens for b in self.newest),
                "needs_present": sum(c.present for b in self.newest for c in b.needs),
                "needs_total": sum(len(b.needs) for b in self.newest),
                "turns": [b.to_dict() for b in self.newest],
            },
        }


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def request_parts(request: dict[str, Any]) -> dict[str, str]:
    """The text of a rendered Anthropic request by part: ``system`` (the prompt,
    pinned rules and facts), ``context`` (the routed and recalled block in the
    latest user turn) and ``history`` (every other message string)."""
    context: list[str] = []
    history: list[str] = []
    for s in _strings(request.get("messages", [])):
        (context if s.startswith(CONTEXT_OPEN) else history).append(s)
    return {
        "system": "\n".join(_strings(request.get("system", []))),
        "context": "\n".join(context),
        "history": "\n".join(history),
    }


def _units(messages: list[Any]) -> list[list[Any]]:
    """Messages in the units a cut keeps or drops whole: a message, with the user
    messages of tool results that follow it (a call is never kept without its
    results, nor results without their call)."""
    units: list[list[Any]] = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        results = isinstance(content, list) and all(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        )
        if results and units:
            units[-1].append(m)
        else:
            units.append([m])
    return units


def newest_first(
    request: dict[str, Any], budget: int, count: Any, system: str
) -> tuple[dict[str, Any], int, int]:
    """``request`` cut to ``budget`` tokens the common way: ``system`` (the prompt) as
    its system part, then the newest messages that fit, a tool call with its results
    (``count`` counts a text). Returns ``(the cut request, its tokens, messages
    dropped)``."""

    def size(value: Any) -> int:
        return sum(int(count(text)) for text in _strings(value))

    head = [{"type": "text", "text": system}] if system else []
    used = size(head)
    kept: list[list[Any]] = []
    units = _units(list(request.get("messages", [])))
    for unit in reversed(units):
        cost = size(unit)
        if used + cost > budget:
            break
        kept.append(unit)
        used += cost
    messages = [m for unit in reversed(kept) for m in unit]
    dropped = sum(len(u) for u in units) - len(messages)
    return {**request, "system": head, "messages": messages}, used, dropped


def _needs(request: dict[str, Any], wanted: Sequence[str]) -> tuple[NeedCheck, ...]:
    parts = request_parts(request)
    return tuple(
        NeedCheck(n, tuple(part for part, text in parts.items() if n in text)) for n in wanted
    )


def _play(
    engine: Engine, session_id: str, cut_to: int | None = None
) -> tuple[tuple[DemoTurn, ...], tuple[Baseline, ...]]:
    if engine.sessions.version(session_id):
        raise UsageError(
            f"the store already holds session {session_id!r}: give --store a new file, "
            "or delete the old one"
        )
    out: list[DemoTurn] = []
    cuts: list[Baseline] = []
    calls = 0
    for number, step in enumerate(SCRIPT, start=1):
        messages: list[Message] = []
        checks: list[GateCheck] = []
        last_call = max((i for i, a in enumerate(step.model) if isinstance(a, Call)), default=-1)
        for i, action in enumerate(step.model):
            if not isinstance(action, Call):
                messages.append(Message("assistant", (TextBlock(action),)))
                continue
            calls += 1
            use = ToolUseBlock(f"toolu_{calls:04d}", action.tool, action.input)
            decision = engine.check_tool(session_id, action.tool, action.input)
            if isinstance(decision, Blocked):
                checks.append(GateCheck(action.tool, dict(action.input), False, decision.reason))
                result = ToolResultBlock(use.id, f"Blocked by policy: {decision.reason}", True)
            else:
                checks.append(GateCheck(action.tool, dict(action.input), True, ""))
                result = ToolResultBlock(use.id, action.output)
            messages += [Message("assistant", (use,)), Message("user", (result,))]
            if i < last_call:  # the next call is checked on facts that include this result
                engine.record(session_id, messages)
                messages = []
        if step.user is not None:
            messages.append(Message.text_message("user", step.user))
        turn = engine.turn(session_id, messages)
        needs = _needs(turn.request, step.needs)
        out.append(DemoTurn(number, step.note, turn.trace, needs, tuple(checks), step.user))
        if cut_to is not None:
            cut, tokens, dropped = newest_first(
                turn.request, cut_to, engine.counter.count, engine.config.system
            )
            cuts.append(Baseline(number, tokens, dropped, _needs(cut, step.needs)))
    return tuple(out), tuple(cuts)


def run_demo(store: str, budget: int = BUDGET) -> DemoRun:
    """Play the script on the store ``store`` (a store URL, or the path of a SQLite
    file): first as ctxwise, then as the kitchen sink (each its own session in the
    same store), whose requests cut newest-first to ``budget`` are the same-budget
    baseline."""
    url = store if "://" in store or store == "memory" else f"sqlite:///{Path(store).resolve()}"
    config = demo_config(url, budget)
    with Engine(config, gate=_gate()) as engine:
        turns, _ = _play(engine, SESSION_ID)
    with Engine(kitchen_sink_config(config), gate=_gate()) as engine:
        sink, newest = _play(engine, KITCHEN_SINK_SESSION, cut_to=budget)
    return DemoRun(budget, turns, sink, newest)


# -- the reference routing scenario ------------------------------------------

ROUTING_SOURCES = {
    "retrieval": (
        "Retrieved docs: The refund policy allows returns within 30 days. "
        "Shipping is free over fifty dollars. Support hours are 9 to 5. ",
        12,
    ),
    "memory": (
        "Long-term memory: user prefers terse answers, is on the Pro plan, lives in Berlin, "
        "asked about invoices twice before. ",
        8,
    ),
    "tools": (
        "Tool definitions: search(query) read_file(path) write_file(path,text) run_tests() "
        "git_diff() open_pr(title,body) list_dir(path). ",
        14,
    ),
    "code": (
        "Code context: def process(order): validate(order); charge(order.card); return "
        "Receipt(order.id)  # plus 200 lines of the surrounding module. ",
        16,
    ),
}
ROUTING_RULES = (
    (
        "coding",
        (
            "bug",
            "stack",
            "trace",
            "function",
            "code",
            "test",
            "error",
            "deploy",
            "refactor",
            "import",
            "exception",
            "fix",
        ),
    ),
    (
        "factual",
        ("what", "when", "how", "policy", "refund", "hours", "price", "where", "who", "does", "is"),
    ),
    (
        "chitchat",
        ("hi", "hey", "hello", "thanks", "thank", "lol", "cool", "nice", "ok", "okay", "bye"),
    ),
)
ROUTES = {"coding": ["code", "tools", "memory"], "factual": ["retrieval", "memory"], "chitchat": []}
ROUTING_QUERIES = (
    "What is your refund policy?",
    "Fix this stack trace in the deploy function",
    "hey thanks, that was nice",
    "When are your support hours?",
    "There is a bug in the test, the import throws an exception",
)


def routing_pipeline(sources: Sequence[Any] | None = None) -> Pipeline:
    """The reference scenario: four sources, a keyword classifier, a routes table,
    tokens = round(words × 1.3), budget 4,000. ``sources`` replaces the built-in
    ones (tests pass counting wrappers)."""
    counter = WordCounter()
    if sources is None:
        sources = [
            StaticSource(name, text * repeat, counter=counter)
            for name, (text, repeat) in ROUTING_SOURCES.items()
        ]
    router = KeywordClassifier(ROUTING_RULES, default="factual")
    return Pipeline(router, sources, ROUTES, 4000, counter)
