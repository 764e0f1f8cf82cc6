"""`Engine`: one object runs the whole turn.

``engine.turn(session_id, new_messages)`` takes what is new since the last turn
(the user's message, or the model's reply and the tool results that answer it),
and returns the request to send now and a :class:`~ctxwise.trace.Trace` of every
decision. In order:

1. **append** the messages to the session (tool pairing checked against the
   history first: a result that answers no call is refused, nothing written);
   system messages join the session's system part instead of the history;
2. **update** case facts, standing rules and what the policy gates know (a tool
   result that satisfies a rule is recorded as a fact);
3. **route** the latest user message (once per message: a tool-result turn reuses
   its route) and choose the sources its label needs; a refusal or a label with no
   route falls back to the broader set, never a guess;
4. **budget**: the window holds ``budget - reserve`` tokens. The pinned parts (the
   system prompt, rules, case facts) come first; of the room they leave,
   ``context_share`` is kept for routed and recalled context and the rest is the
   history's room. Messages are counted as the render sends them
   (:class:`~ctxwise.formats.request.SentCounter`), and a window that still counts
   more as sent than its sections did one by one is assembled again with less
   room; stored counts from another counter or render are counted again;
5. **edit**: when the history passes ``clearing.trigger`` of its room, old tool
   results are cleared (the last ``keep_last`` stay); when it still does not fit,
   it is compacted to ``compaction.target`` of its room, keeping a verbatim tail
   and never splitting a tool pair. The originals are never lost: every message
   is in the session's log (the archive) before any edit is stored, and compacted
   turns are remembered, verbatim from the log, in long-term memory;
6. **gather** only the chosen sources, and recall memory (the built-in
   ``memory`` source: compacted turns of this session, by similarity);
7. **assemble** one window: the system part (the stable prefix first: this call's
   ``system`` prompt, the configured one and the session's; then the pinned rules
   and facts), the history as real message turns, and the routed and
   recalled sections as a context block in the latest user turn (or, with
   ``context = "system"``, after the stable system prefix);
8. **render** for Anthropic (cache breakpoints after the stable prefix and at the
   end of the shared history) or OpenAI, and **persist** the session, its log and
   the trace in one transaction.

Sessions carry a version. A commit applies only on the version it was computed
from; when another writer committed first, the turn is re-applied on the new
state (up to ``max_attempts``, 5 by default; ``Trace.attempts`` says how many it
took) or, with ``expected_version``, fails with
:class:`~ctxwise.errors.SessionConflictError`. Either way no turn is lost or
applied twice.

An Engine holds one connection per store and is meant for one thread; use one
Engine per thread or process (they may share the store: that is what the
version is for). :meth:`Engine.aturn` runs a turn in a worker thread for async
callers.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxwise._session_state import STATE_FORMAT, ToolIds, parse_state
from ctxwise.assembly import Budget, Section, SectionStatus, assemble
from ctxwise.compaction import Compaction, CompactionSettings, compact
from ctxwise.compaction.errors import CompactionBudgetError
from ctxwise.config import (
    BUILTIN_SOURCES,
    ENGINE_SECTIONS,
    EngineConfig,
    check_route_labels,
    load_config,
)
from ctxwise.editing import CONTEXT_MANAGEMENT_BETA, clear_tool_uses, context_management
from ctxwise.embeddings import HashingEmbedder
from ctxwise.errors import (
    ConfigError,
    FormatError,
    PairingError,
    PinnedOverflowError,
    SessionConflictError,
    UnansweredTurnWarning,
    UsageError,
)
from ctxwise.formats import anthropic, neutral, openai
from ctxwise.formats.inputs import TurnInput, decode_input
from ctxwise.formats.request import SentCounter, Window, render_anthropic, render_openai
from ctxwise.handoff.escalation import EscalationBrief, escalation_brief
from ctxwise.handoff.scoring import ChunkScorer
from ctxwise.handoff.select import DEFAULT_BUDGET as DEFAULT_HANDOFF_BUDGET
from ctxwise.handoff.select import Handoff, select_context
from ctxwise.memory.facts import CaseFacts, FactExtractor, Rules
from ctxwise.memory.longterm import LongTermMemory, check_preset_embedder
from ctxwise.memory.store import NamespaceNotFoundError, NewItem, Store, namespace_part
from ctxwise.memory.tiered import turn_items
from ctxwise.memory.urls import open_store, store_kind
from ctxwise.memory_tool import DirectoryMemory, MemoryTool, StoreMemory
from ctxwise.messages import (
    Message,
    ProblemKind,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    block_text,
    message_problem,
)
from ctxwise.orchestrator import Classifier
from ctxwise.pairing import problems as pairing_problems
from ctxwise.policy import Allowed, Blocked, PolicyGate, compile_rule
from ctxwise.routing.decision import RouteDecision
from ctxwise.sessions import (
    HistoryRow,
    SessionCommit,
    SessionStore,
    check_session_id,
    open_session_store,
)
from ctxwise.sources import Source, StaticSource
from ctxwise.summarize import ExtractiveSummarizer, Summarizer
from ctxwise.tokens import TokenCounter, get_counter
from ctxwise.tools.catalog import ToolCatalog, ToolDef
from ctxwise.tools.cursors import (
    FETCH_MORE,
    ResultStore,
    fetch_more_result,
    fetch_more_tool,
    page_text,
)
from ctxwise.tools.trim import trim
from ctxwise.trace import (
    ClearTrace,
    CompactionTrace,
    RouteTrace,
    SectionTrace,
    TokensTrace,
    ToolEventTrace,
    ToolsTrace,
    Trace,
)

__all__ = ["Engine", "TurnResult"]

MAX_ATTEMPTS = 5

MEMORY_TOOL = {"type": "memory_20250818", "name": "memory"}
"""Anthropic's memory tool, as a request names it."""


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The request to send (a provider request body), the trace of the turn, and
    the window it renders (the neutral form of exactly what is sent)."""

    request: dict[str, Any]
    trace: Trace
    window: Transcript
    headers: Mapping[str, str] = field(default_factory=dict)
    """HTTP headers the request needs (the context-management beta, when
    ``clearing.mode = "server"``)."""

    @property
    def version(self) -> int:
        return self.trace.version


def _storable(text: str) -> str:
    """``text`` with each lone surrogate (a broken emoji) as U+FFFD, which the
    long-term stores can index; the session log keeps the text as it was."""
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        return text
    return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)


def _latest_exchange(history: Sequence[Message]) -> int:
    """Where the latest exchange starts: the last message, or, when it (and the
    messages just before it) hold only tool results, the assistant message whose
    calls they answer. A compaction must keep it verbatim."""
    i = len(history) - 1
    while (
        i > 0
        and history[i].role == "user"
        and history[i].content
        and all(isinstance(b, ToolResultBlock) for b in history[i].content)
    ):
        i -= 1
    if i < len(history) - 1 and history[i].role == "assistant" and history[i].tool_uses:
        return i
    return len(history) - 1


@dataclass(slots=True)
class _Session:
    """A session's working state: what the store holds, materialized."""

    session_id: str
    version: int
    history: list[Message]
    tokens: list[int]
    origins: list[int | None]
    log_length: int
    facts: CaseFacts
    rules: Rules
    system: list[str]
    turns: int = 0
    compactions: int = 0
    clears: int = 0
    remembered: int = 0
    tool_ids: ToolIds = field(default_factory=ToolIds)
    route: dict[str, Any] | None = None
    gate_rules: list[dict[str, Any]] = field(default_factory=list)
    loaded_tools: list[tuple[str, str]] = field(default_factory=list)
    tool_events: list[dict[str, Any]] = field(default_factory=list)
    encoded: list[Any] | None = None
    """Each history message encoded for the render target (kept in memory only)."""
    counted_by: str | None = None
    """The counter and render that counted ``tokens`` (``SessionState.counted_by``)."""
    recalled: tuple[tuple[object, ...], tuple[Section, ...]] | None = None
    """The latest recall: what it depends on (the query, the first live log
    position, how much of the log memory holds) and its sections (kept in memory
    only): a turn that asks the same of the same memory reuses them."""

    def copy(self) -> _Session:
        return _Session(
            self.session_id,
            self.version,
            list(self.history),
            list(self.tokens),
            list(self.origins),
            self.log_length,
            CaseFacts.from_dict(self.facts.to_dict()),
            Rules.from_dict(self.rules.to_dict()),
            list(self.system),
            self.turns,
            self.compactions,
            self.clears,
            self.remembered,
            self.tool_ids.copy(),
            None if self.route is None else dict(self.route),
            [dict(r) for r in self.gate_rules],
            list(self.loaded_tools),
            [dict(e) for e in self.tool_events],
            None if self.encoded is None else list(self.encoded),
            self.counted_by,
            self.recalled,
        )

    def state(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "facts": self.facts.to_dict(),
            "rules": self.rules.to_dict(),
            "system": list(self.system),
            "turns": self.turns,
            "compactions": self.compactions,
            "clears": self.clears,
            "remembered": self.remembered,
            "route": self.route,
            "gate_rules": self.gate_rules,
            "loaded_tools": [list(k) for k in self.loaded_tools],
            "tool_events": self.tool_events,
            "counted_by": self.counted_by,
        }


def _unanswered(history: Sequence[Message], new: Sequence[Message]) -> bool:
    """Does a turn of ``new`` leave the previous request unanswered? The session ends
    with a user message (the last request asked the model about it) and ``new``
    begins with another user message, not with the model's reply."""
    last = next((m for m in reversed(history) if m.role != "system"), None)
    first = next((m for m in new if m.role != "system"), None)
    return (
        last is not None
        and first is not None
        and last.role == "user"
        and first.role == "user"
        and not any(isinstance(b, ToolResultBlock) for b in (*last.content, *first.content))
    )


class Engine:
    """Runs every turn of every session (see the module docstring).

    Build it from an :class:`~ctxwise.config.EngineConfig` (or
    :meth:`from_file`); objects given here replace what the config would build:
    ``counter``, ``router`` (anything with ``route(query)``), ``sources`` (added
    to the config's), ``summarizer``, ``gate``, ``sessions`` and ``memory`` (the
    session and long-term stores; by default both on the config's ``store`` URL),
    ``clock`` (for the trace's timings; ``time.perf_counter``).
    """

    def __init__(
        self,
        config: EngineConfig | None = None,
        *,
        counter: TokenCounter | None = None,
        router: Classifier | None = None,
        sources: Sequence[Source] = (),
        summarizer: Summarizer | None = None,
        gate: PolicyGate | None = None,
        sessions: SessionStore | None = None,
        memory: Store | None = None,
        clock: Callable[[], float] | None = None,
        max_attempts: int = MAX_ATTEMPTS,
        catalog: ToolCatalog | None = None,
        results: ResultStore | None = None,
        memory_tool: MemoryTool | None = None,
        now: Callable[[], float] | None = None,
    ) -> None:
        cfg = config if config is not None else EngineConfig()
        if not isinstance(cfg, EngineConfig):
            raise UsageError(f"config must be an EngineConfig, got {type(cfg).__name__}")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise UsageError(f"max_attempts must be a positive integer, got {max_attempts!r}")
        self.config = cfg
        if counter is not None and not all(
            callable(getattr(counter, m, None)) for m in ("count", "count_messages")
        ):
            raise UsageError(
                f"counter must be a TokenCounter, got {counter!r}; name one in the config "
                "(counter = 'char') or pass get_counter('char')"
            )
        if router is not None and not callable(getattr(router, "route", None)):
            raise UsageError(
                f"router must have a route(query) method (an IntentRouter, a "
                f"KeywordClassifier), got {router!r}"
            )
        self.counter: TokenCounter = counter if counter is not None else get_counter(cfg.counter)
        # messages are counted as the render sends them (framing per sent message)
        self._sent = SentCounter(self.counter, cfg.render)
        self._counted_by = f"{self.counter.name}/{cfg.render}"
        self.clock = clock if clock is not None else time.perf_counter
        self.max_attempts = max_attempts
        self.router = router if router is not None else self._build_router(cfg)
        self.sources: dict[str, Source] = {}
        for source in (*self._build_sources(cfg), *self._checked_sources(sources)):
            if source.name in self.sources or source.name in BUILTIN_SOURCES:
                raise UsageError(f"duplicate source name {source.name!r}")
            self.sources[source.name] = source
        # routes and the fallback may name sources given here in code, which the
        # config cannot know: they are checked now, against every source
        unknown = cfg.unknown_sources(set(self.sources) | set(BUILTIN_SOURCES))
        if unknown is not None:
            raise ConfigError("config", unknown)
        self.routes = {label: tuple(chosen) for label, chosen in cfg.routes.items()}
        self.fallback = (
            tuple(cfg.fallback) if cfg.fallback is not None else (*self.sources, *BUILTIN_SOURCES)
        )
        self.summarizer: Summarizer = (
            summarizer if summarizer is not None else ExtractiveSummarizer(self.counter)
        )
        self.gate = gate if gate is not None else self._build_gate(cfg)
        self.extractor = (
            None if cfg.facts.extractor == "none" else FactExtractor.preset(cfg.facts.extractor)
        )
        self.embedder = HashingEmbedder()
        try:  # the memory embeds with hashing: a preset fit to another embedder is refused
            check_preset_embedder(cfg.memory.preset, self.embedder.name)
        except UsageError as exc:
            raise ConfigError("config", f"memory.preset: {exc}") from None
        self.now = now if now is not None else time.time
        # what a bad config fails on is built before a store is opened: a refused
        # config creates no SQLite file and leaves no connection open
        url = cfg.store_url()
        store_kind(url)  # a bad URL fails before anything is opened
        self._system_file()  # read on every turn; a file it cannot read fails here
        self.catalog = catalog if catalog is not None else self._build_catalog(cfg)
        if catalog is not None and cfg.tools.always:
            catalog.set_always_loaded(cfg.tools.always)
        if self.catalog is None and cfg.tools.always:  # they were never sent
            raise ConfigError(
                "config",
                f"tools.always names {', '.join(cfg.tools.always)} but there is no tool "
                "catalog: set tools.catalog or pass catalog=ToolCatalog(...) to the Engine",
            )
        keys = self._cursor_keys(cfg) if results is None else None
        self.memory_tool = memory_tool
        if (
            memory_tool is None
            and cfg.memory_tool.enabled
            and cfg.memory_tool.backend == "directory"
        ):
            root = cfg.path(cfg.memory_tool.directory)
            try:
                self.memory_tool = MemoryTool(
                    DirectoryMemory(root), max_file_bytes=cfg.memory_tool.max_file_bytes
                )
            except UsageError as e:  # 'the memory root … is not a folder': name the key
                raise ConfigError(str(root), f"memory_tool.directory: {e}") from None
        self._own: list[Any] = []
        try:
            if sessions is None:
                sessions = open_session_store(url)
                self._own.append(sessions)
            self.sessions = sessions
            needs_store = (
                cfg.memory.recall
                or (
                    cfg.memory_tool.enabled
                    and cfg.memory_tool.backend == "store"
                    and not memory_tool
                )
                or (cfg.tool_results.store_over > 0 and results is None)
            )
            if memory is None and needs_store:
                memory = open_store(url, dim=self.embedder.dim)
                self._own.append(memory)
            self.memory = memory
            self.results = results if results is not None else self._build_results(cfg, keys)
        except BaseException:
            self.close()
            raise
        self._cache: dict[str, _Session] = {}
        one = [Message.text_message("user", "x")]
        self._overhead = 2 * self._sent.count_messages(one) - self._sent.count_messages(one * 2)
        self._encode: Callable[[Message], Any] = (
            anthropic.encode_message if cfg.render == "anthropic" else openai.encode_message
        )

    @classmethod
    def from_file(cls, path: str, **objects: Any) -> Engine:
        """An Engine from a ``ctxwise.toml`` (see :mod:`ctxwise.config`)."""
        return cls(load_config(path), **objects)

    # ---------------------------------------------------------------- building

    def _build_router(self, cfg: EngineConfig) -> Classifier | None:
        if cfg.router is None:
            return None
        if cfg.router.keywords is not None:
            from ctxwise.routing import KeywordClassifier

            try:
                return KeywordClassifier(list(cfg.router.keywords.items()), cfg.router.default)
            except UsageError as e:  # 'label 'a' has no keywords': name the key
                raise ConfigError("router.keywords", str(e)) from None
        from ctxwise.routing import IntentRouter

        assert cfg.router.file is not None
        path = cfg.path(cfg.router.file)
        try:
            router = IntentRouter.load(path)
        except FormatError as e:  # the file is named; say which key gave it
            raise ConfigError(e.source, f"router.file: {e.detail}") from None
        try:
            check_route_labels(cfg.routes, [intent.name for intent in router.intents])
        except ValueError as e:
            raise ConfigError(str(path), str(e)) from None
        return router

    def _build_sources(self, cfg: EngineConfig) -> list[Source]:
        from ctxwise._io import read_text_file

        out: list[Source] = []
        for name, spec in cfg.sources.items():
            text = (
                spec.text
                if spec.text is not None
                else read_text_file(
                    cfg.path(str(spec.file)), "a source file", _keyed(f"sources.{name}.file")
                )
            )
            out.append(
                StaticSource(
                    name,
                    text,
                    priority=spec.priority,
                    pinned=spec.pinned,
                    truncatable=spec.truncatable,
                    stable=spec.stable,
                    counter=self.counter,
                )
            )
        return out

    @staticmethod
    def _checked_sources(sources: object) -> list[Source]:
        """The sources given in code, refused now rather than on a turn: one that is
        no Source (a name, ``sections`` and ``cost_estimate``), has no name, or whose
        fixed section takes the name of one the Engine adds itself."""
        if isinstance(sources, str | bytes) or not isinstance(sources, Iterable):
            raise UsageError(f"sources must be a list of Source objects, got {sources!r}")
        out = list(sources)
        for source in out:
            if not isinstance(source, Source):
                raise UsageError(
                    f"sources: {source!r} is not a Source (it needs a name, sections() "
                    "and cost_estimate())"
                )
            if not isinstance(source.name, str) or not source.name:
                raise UsageError(f"sources: {source!r} needs a non-empty name")
            if isinstance(source, StaticSource) and source.section.name in ENGINE_SECTIONS:
                raise UsageError(
                    f"source name {source.name!r} is the name of a section the Engine adds "
                    f"itself ({', '.join(ENGINE_SECTIONS)}); choose another"
                )
        return out

    def _build_catalog(self, cfg: EngineConfig) -> ToolCatalog | None:
        if not cfg.tools.catalog:
            return None
        from ctxwise.embeddings import get_embedder

        name = cfg.tools.embedder
        if name.startswith("st:"):  # a model folder: relative to the config file too
            name = f"st:{cfg.path(name[3:])}"
        embedder = None if name == "none" else get_embedder(name)
        try:
            return ToolCatalog.load(
                cfg.path(cfg.tools.catalog),
                skip_invalid=cfg.tools.skip_invalid,
                always_loaded=cfg.tools.always,
                max_bytes=cfg.tools.max_catalog_bytes or None,
                embedder=embedder,
                counter=self.counter,
            )
        except FormatError as e:  # the file is named; say which key gave it
            where = e.source if e.line is None else f"{e.source}:{e.line}"
            raise ConfigError(where, f"tools.catalog: {e.detail}") from None

    def _cursor_keys(self, cfg: EngineConfig) -> tuple[bytes, list[bytes]] | None:
        """The cursor key and the previous ones from the environment (None when no
        result is stored); a ConfigError when one is missing or too short."""
        spec = cfg.tool_results
        if spec.store_over == 0:
            return None
        key = os.environ.get(spec.key_env, "")
        if len(key.encode()) < 16:
            raise ConfigError(
                "tool_results.key_env",
                f"store_over > 0 needs a cursor key of 16+ bytes in ${spec.key_env} "
                "(or pass results=ResultStore(...) to the Engine)",
            )
        previous = []
        for name in spec.previous_key_envs:
            old = os.environ.get(name, "")
            if len(old.encode()) < 16:
                raise ConfigError(
                    "tool_results.previous_key_envs",
                    f"${name} must hold a previous cursor key of 16+ bytes "
                    "(drop it from the list once its cursors have expired)",
                )
            previous.append(old.encode())
        return key.encode(), previous

    def _build_results(
        self, cfg: EngineConfig, keys: tuple[bytes, list[bytes]] | None
    ) -> ResultStore | None:
        if keys is None:
            return None
        spec = cfg.tool_results
        assert self.memory is not None
        return ResultStore(
            keys[0],
            previous_keys=keys[1],
            clock=self.now,
            ttl=spec.ttl,
            page_size=spec.page_size,
            store=self.memory,
            namespace=(cfg.memory.namespace, "tool_results"),
        )

    def _build_gate(self, cfg: EngineConfig) -> PolicyGate:
        import json

        rules: list[Any] = list(cfg.gates.rules)
        try:  # on their own: an error's index is the rule's in gates.rules
            PolicyGate.from_dict({"version": 1, "rules": rules})
        except FormatError as e:
            raise ConfigError("config", f"gates.{e.detail}") from None
        if cfg.gates.file:
            from ctxwise._io import read_text_file

            path = cfg.path(cfg.gates.file)
            text = read_text_file(path, "a gate file", _keyed("gates.file"))
            try:
                data = json.loads(text)
            except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
                raise ConfigError(str(path), f"gates.file: not valid JSON ({e})") from None
            try:
                rules = [*PolicyGate.from_dict(data).to_dict()["rules"], *rules]
            except FormatError as e:
                raise ConfigError(str(path), f"gates.file: {e.detail}") from None
        try:
            return PolicyGate.from_dict({"version": 1, "rules": rules})
        except FormatError as e:  # each part was checked: a name in both
            raise ConfigError(
                str(cfg.path(cfg.gates.file or "")),
                f"gates.rules and gates.file: {e.detail.split(': ', 1)[-1]}",
            ) from None

    def close(self) -> None:
        """Close the stores this Engine opened."""
        for store in self._own:
            store.close()
        self._own.clear()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- sessions

    def _load(self, session_id: str) -> _Session:
        version = self.sessions.version(session_id)
        cached = self._cache.get(session_id)
        if cached is not None and cached.version == version:
            return cached
        snap = self.sessions.load(session_id)
        # a stored state is validated (format, types); a new session starts empty
        st = parse_state(snap.state if snap.version else {"format": STATE_FORMAT}, session_id)
        session = _Session(
            session_id,
            snap.version,
            neutral.decode_messages([r.message for r in snap.history]),
            [r.tokens for r in snap.history],
            [r.origin for r in snap.history],
            snap.log_length,
            st.facts,
            st.rules,
            list(st.system),
            st.turns,
            st.compactions,
            st.clears,
            st.remembered,
            # the ids a state row held (written before the store kept them apart) move
            # to the store on the next commit
            ToolIds(sorted(snap.tool_ids), [i for i in st.tool_ids if i not in snap.tool_ids]),
            None if st.route is None else st.route.model_dump(),
            [dict(r) for r in st.gate_rules],
            [(str(a), str(b)) for a, b in st.loaded_tools],
            [dict(e) for e in st.tool_events],
            counted_by=st.counted_by,
        )
        self._cache[session_id] = session
        return session

    def session_messages(self, session_id: str) -> list[Message]:
        """The session's live history (what the next request renders, before context)."""
        check_session_id(session_id)
        self.sessions.require(session_id)
        return list(self._load(session_id).history)

    def facts(self, session_id: str) -> CaseFacts:
        """The session's case facts (a copy)."""
        check_session_id(session_id)
        self.sessions.require(session_id)
        return CaseFacts.from_dict(self._load(session_id).facts.to_dict())

    def rules(self, session_id: str) -> Rules:
        """The session's standing rules (a copy)."""
        check_session_id(session_id)
        self.sessions.require(session_id)
        return Rules.from_dict(self._load(session_id).rules.to_dict())

    def traces(self, session_id: str) -> list[Trace]:
        """Every turn's trace, in order."""
        check_session_id(session_id)
        self.sessions.require(session_id)
        return [
            Trace.from_stored(t, session_id=session_id) for t in self.sessions.traces(session_id)
        ]

    def handoff(
        self,
        session_id: str,
        task: str,
        budget: int = DEFAULT_HANDOFF_BUDGET,
        *,
        scorer: ChunkScorer | None = None,
    ) -> Handoff:
        """The transcript chunks a subagent given ``task`` needs, verbatim, under
        ``budget`` tokens (:func:`ctxwise.handoff.select_context`), chosen from the
        session's whole log: what compaction summarized is still there word for word."""
        check_session_id(session_id)
        self.sessions.require(session_id)
        log = neutral.decode_messages(self.sessions.log(session_id))
        return select_context(log, task, budget, scorer=scorer, counter=self.counter)

    def escalation_brief(self, session_id: str) -> EscalationBrief:
        """A brief for a person taking the case over (:func:`ctxwise.handoff.escalation_brief`):
        from the session's case facts and its whole log."""
        check_session_id(session_id)
        self.sessions.require(session_id)
        session = self._load(session_id)
        log = neutral.decode_messages(self.sessions.log(session_id))
        return escalation_brief(log, CaseFacts.from_dict(session.facts.to_dict()))

    # ---------------------------------------------------------------- tools

    def check_tool(
        self, session_id: str, name: str, tool_input: Mapping[str, Any] | None = None
    ) -> Allowed | Blocked:
        """May the model's call of tool ``name`` with ``tool_input`` run now? The
        policy gates decide from the session's case facts (fails closed: a rule
        that cannot be checked blocks)."""
        check_session_id(session_id)
        self.sessions.require(session_id)
        session = self._load(session_id)
        return self._gate(session).check(name, tool_input, session.facts)

    def record(self, session_id: str, new_messages: TurnInput) -> int:
        """Append messages without building a request: the model's final answer (so
        it joins the session), a tool call's result. ``new_messages`` takes what
        :meth:`turn` takes (an SDK response object as it came back, say); facts, rules
        and gates are updated as in :meth:`turn`. Returns the version."""
        messages = self._checked_input(new_messages)
        return self._commit_untraced(
            check_session_id(session_id), lambda work: self._append(work, messages)
        )

    def _commit_untraced(
        self, session_id: str, change: Callable[[_Session], list[dict[str, Any]]]
    ) -> int:
        """Apply ``change`` to a copy of the session (it returns the log rows of the
        messages it appended) and commit it without a turn; on a conflict, apply it
        again on the newer state. Returns the new version."""
        for attempt in range(self.max_attempts):
            base = self._load(session_id)
            work = base.copy()
            log = change(work)
            keep = len(base.history)
            commit = SessionCommit(
                work.state(), keep, self._rows(work, keep), log, tool_ids=work.tool_ids.unsaved()
            )
            try:
                work.version = self.sessions.commit(session_id, base.version, commit)
            except SessionConflictError:
                self._cache.pop(session_id, None)
                if attempt + 1 == self.max_attempts:
                    raise
                continue
            work.tool_ids.saved()
            self._cache[session_id] = work
            return work.version
        raise AssertionError("unreachable")  # pragma: no cover

    def run_tool(self, session_id: str, call: ToolUseBlock) -> ToolResultBlock | None:
        """Run ``call`` when it is one of ctxwise's own tools, and return its
        ``tool_result`` (send it with the next turn); ``None`` for any other tool
        (run it yourself, then pass its result through :meth:`tool_result`).

        ctxwise's tools: the catalog's ``tool_search`` (the tools it finds stay
        loaded for the session), ``fetch_more`` (the next page of a stored result,
        or an ``is_error`` result saying why the cursor was refused) and Anthropic's
        ``memory`` tool. Each call is recorded for the next turn's trace, except a
        refused one that must write nothing: a call whose input is not an object, or
        any refused call on a session that does not exist yet (it gets its
        ``is_error`` result and no session is created).
        """
        check_session_id(session_id)
        if not isinstance(call, ToolUseBlock):
            raise UsageError(f"call is a ToolUseBlock, got {type(call).__name__}")
        session = self._load(session_id)
        cat = self.catalog
        load: list[tuple[str, str]] = []
        if cat is not None and self.config.tools.mode == "client" and call.name == cat.search_name:
            outcome = cat.run_search(
                call.input,
                tool_use_id=call.id,
                loaded=self._loaded(session),
                provider=self.config.render,
            )
            block = outcome.block
            load = [t.key for t in outcome.found]
            event = ToolEventTrace(
                tool_use_id=call.id,
                name=call.name,
                kind="search",
                tokens_after=self.counter.count(block_text(block)),
                is_error=bool(block.is_error),
                found=[cat.wire_name(t) for t in outcome.found],
                detail=outcome.query if not block.is_error else block_text(block),
            )
        elif self.results is not None and call.name == FETCH_MORE:
            block = fetch_more_result(
                self.results, call.input, session_id=session_id, tool_use_id=call.id
            )
            event = ToolEventTrace(
                tool_use_id=call.id,
                name=call.name,
                kind="fetch_more",
                tokens_after=self.counter.count(block_text(block)),
                is_error=bool(block.is_error),
                detail=block_text(block)[:200] if block.is_error else "",
            )
        elif call.name == MEMORY_TOOL["name"] and self._memory_tool(session_id) is not None:
            tool = self._memory_tool(session_id)
            assert tool is not None
            result = tool.execute(call.input)
            block = ToolResultBlock(call.id, result.text, is_error=result.is_error)
            command = call.input.get("command") if isinstance(call.input, Mapping) else None
            event = ToolEventTrace(
                tool_use_id=call.id,
                name=call.name,
                kind="memory",
                tokens_after=self.counter.count(result.text),
                is_error=result.is_error,
                detail=str(command)[:40],
            )
        else:
            return None
        if block.is_error and (not isinstance(call.input, Mapping) or session.version == 0):
            # a malformed call, or a refused one on a session that does not exist yet,
            # writes nothing (no session is created for it)
            return block
        self._note(session_id, [event], load)
        return block

    def tool_result(
        self,
        session_id: str,
        call: ToolUseBlock,
        result: str | Mapping[str, Any] | Sequence[Any],
        *,
        is_error: bool = False,
    ) -> ToolResultBlock:
        """The ``tool_result`` the model gets for ``call`` (a tool you ran) whose
        output is ``result`` (text, or JSON data).

        With ``[tool_results.trim.TOOL]`` settings for the tool, the result is trimmed
        first (:func:`ctxwise.tools.trim`: allowlisted fields kept byte for byte,
        lists capped, a token cut). Then, when ``[tool_results] store_over`` is set
        and the result still counts more tokens, a JSON list (or a text, by lines)
        is stored and the model gets its first page with a cursor for the
        ``fetch_more`` tool; any other JSON is cut to ``store_over`` tokens. What was
        done is recorded for the next turn's trace. An error result is passed on
        unchanged. A text ``result`` is used as it is; anything else must be JSON
        data (a date, bytes or a set is a :class:`UsageError`, error result or not).
        A result of more than ``[tool_results] max_chars`` characters (as text, or
        as its JSON) is refused with a :class:`UsageError` naming the limit.
        """
        check_session_id(session_id)
        if not isinstance(call, ToolUseBlock):
            raise UsageError(f"call is a ToolUseBlock, got {type(call).__name__}")
        if isinstance(result, str):
            text = result
        else:
            try:
                text = json.dumps(result, ensure_ascii=False)
            except (TypeError, ValueError, RecursionError) as e:
                raise UsageError(
                    f"result is text or JSON data (a str, a mapping or a list), and this "
                    f"{type(result).__name__} is not JSON-serialisable: {e} "
                    "(convert it, e.g. str(value) or value.isoformat(), first)"
                ) from None
        most = self.config.tool_results.max_chars
        if most and len(text) > most:
            raise UsageError(
                f"the result of tool {call.name[:64]!r} is {len(text):,} characters, over "
                f"the limit of {most:,}; raise it with tool_results.max_chars"
            )
        if is_error:
            return ToolResultBlock(call.id, text, is_error=True)
        before = self.counter.count(text)
        events: list[ToolEventTrace] = []

        def note(
            kind: Literal["trimmed", "stored"], tokens_before: int, tokens_after: int, detail: str
        ) -> None:
            events.append(
                ToolEventTrace(
                    tool_use_id=call.id,
                    name=call.name,
                    kind=kind,
                    tokens_before=tokens_before,
                    tokens_after=tokens_after,
                    detail=detail,
                )
            )

        spec = self.config.tool_results.trim.get(call.name)
        if spec is not None:
            cut = trim(
                text,
                fields=spec.fields or None,
                max_items=spec.max_items or None,
                max_tokens=spec.max_tokens or None,
                counter=self.counter,
            )
            if cut.changed:
                text = cut.text
                note(
                    "trimmed",
                    before,
                    cut.tokens_after,
                    f"{len(cut.dropped_paths)} fields, {cut.dropped_items} items, "
                    f"{cut.dropped_keys} keys, {cut.dropped_chars} characters cut",
                )
        limit = self.config.tool_results.store_over
        if limit and self.results is not None and self.counter.count(text) > limit:
            was = self.counter.count(text)
            try:
                data: Any = json.loads(text)
            except (ValueError, RecursionError):  # not JSON, or nested past the decoder
                data = text.splitlines()
            if isinstance(data, list):
                result_id, page = self.results.put(data, session_id=session_id)
                text = page_text(page)
                note(
                    "stored",
                    was,
                    self.counter.count(text),
                    f"{result_id}: {len(page.items)} of {page.total} items shown",
                )
            else:
                cut = trim(text, max_tokens=limit, counter=self.counter)
                text = cut.text
                note("trimmed", was, cut.tokens_after, f"cut to {limit} tokens (nothing to page)")
        self._note(session_id, events)
        return ToolResultBlock(call.id, text, is_error=False)

    def _memory_tool(self, session_id: str) -> MemoryTool | None:
        if self.memory_tool is not None:
            return self.memory_tool
        cfg = self.config.memory_tool
        if not cfg.enabled or cfg.backend != "store" or self.memory is None:
            return None
        namespace = (self.config.memory.namespace, "memory_tool", namespace_part(session_id))
        return MemoryTool(StoreMemory(self.memory, namespace), max_file_bytes=cfg.max_file_bytes)

    def _loaded(self, session: _Session) -> list[ToolDef]:
        cat = self.catalog
        if cat is None:
            return []
        tools = (cat.get(key) for key in session.loaded_tools)
        return [t for t in tools if t is not None]

    def _load_tool(self, session: _Session, name: str) -> None:
        """A catalog tool the model called stays loaded for the session."""
        cat = self.catalog
        if cat is None or name == cat.search_name:
            return
        try:
            tool = cat.find(name)
        except UsageError:
            return
        if tool.key not in session.loaded_tools and not cat.is_always_loaded(tool):
            session.loaded_tools.append(tool.key)

    def _note(
        self,
        session_id: str,
        events: Sequence[ToolEventTrace],
        load: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Record tool events (and tools to load) in the session, for the next trace."""
        if not events and not load:
            return

        def change(work: _Session) -> list[dict[str, Any]]:
            work.tool_events.extend(e.model_dump(mode="json") for e in events)
            work.loaded_tools.extend(k for k in dict.fromkeys(load) if k not in work.loaded_tools)
            return []

        self._commit_untraced(session_id, change)

    def _tools(
        self, session: _Session, query: str | None
    ) -> tuple[list[dict[str, Any]] | None, ToolsTrace | None, int]:
        """This turn's tool definitions, their trace and their tokens."""
        cfg = self.config
        anthropic_render = cfg.render == "anthropic"
        own: list[dict[str, Any]] = []
        if self.results is not None:
            own.append(fetch_more_tool())
        if anthropic_render and self._memory_tool(session.session_id) is not None:
            own.append(dict(MEMORY_TOOL))
        cat = self.catalog
        if cat is None and not own:
            return None, None, 0
        own_rendered = own if anthropic_render else [_as_openai(d) for d in own]
        own_tokens = sum(self.counter.count(json.dumps(d, ensure_ascii=False)) for d in own)
        own_names = [str(d["name"]) for d in own]
        if cat is None:
            rendered = [dict(d) for d in own_rendered]
            if anthropic_render:
                rendered[-1]["cache_control"] = {"type": "ephemeral"}
            trace = ToolsTrace(
                mode="plain", sent=own_names, tokens=own_tokens, all_tokens=own_tokens
            )
            return rendered, trace, own_tokens
        if cfg.tools.mode == "server":
            turn = cat.for_turn(None, 0, search=False)
            body = cat.anthropic_tools(turn, mode="server", server_search=cfg.tools.server_search)
            search_def = body[len(turn.always)]
            tokens = turn.tokens + self.counter.count(json.dumps(search_def)) + own_tokens
            sent = [cat.wire_name(t) for t in turn.always]
            trace = ToolsTrace(
                mode="server",
                sent=[*sent, str(search_def["name"]), *own_names],
                deferred=len(cat) - len(turn.always),
                tokens=tokens,
                all_tokens=turn.all_tokens + own_tokens,
            )
            return [*own_rendered, *body], trace, tokens
        turn = cat.for_turn(query, cfg.tools.k, loaded=self._loaded(session))
        body = (
            cat.anthropic_tools(turn, mode="client") if anthropic_render else cat.openai_tools(turn)
        )
        tokens = turn.tokens + own_tokens
        sent = [cat.wire_name(t) for t in turn.sent]
        trace = ToolsTrace(
            mode="client",
            sent=[*sent, *([cat.search_name] if turn.search else []), *own_names],
            found=[cat.wire_name(h.tool) for h in turn.found],
            loaded=[cat.wire_name(t) for t in turn.loaded],
            deferred=len(cat) - len(turn.sent),
            tokens=tokens,
            all_tokens=turn.all_tokens + own_tokens,
        )
        return [*own_rendered, *body], trace, tokens

    # ---------------------------------------------------------------- the turn

    def turn(
        self,
        session_id: str,
        new_messages: TurnInput,
        *,
        expected_version: int | None = None,
        system: str | None = None,
        warn_unanswered: bool = True,
    ) -> TurnResult:
        """Append ``new_messages`` and build this turn's request (see the module
        docstring).

        ``new_messages``: what the loop has at hand, one item or a list — ctxwise
        :class:`~ctxwise.messages.Message` objects, a ``str`` (a user message), the
        official SDKs' responses as they come back (an Anthropic ``Message``, an OpenAI
        ``ChatCompletion`` or ``Response``, or their dicts), tool results
        (:class:`~ctxwise.messages.ToolResultBlock`, Anthropic ``tool_result`` blocks,
        ``function_call_output`` items; consecutive results are one user message) and
        message dicts of either provider (:func:`ctxwise.formats.inputs.decode_input`).
        Any other type is an :class:`~ctxwise.errors.UnsupportedInputError` naming the
        types taken. Pass the model's reply first, then what answers it: a turn that
        begins with a user message while the request the previous turn built was
        never answered gives an :class:`~ctxwise.errors.UnansweredTurnWarning` (the
        reply was dropped: record a final answer with :meth:`record`);
        ``warn_unanswered=False`` for a history that leaves replies out on purpose (a
        recorded transcript replayed, a framework run without a session).

        ``expected_version``: fail with ``SessionConflictError`` instead
        of re-applying when the session is not at that version (0: a new session; a
        non-negative int, else :class:`UsageError`). A malformed message (a role
        other than system/user/assistant, content that is not a tuple of blocks, a
        tool call whose input is not a JSON object, an empty tool id, …) is a
        :class:`UsageError` naming its index, raised before anything is written.

        ``system``: this call's system prompt (an agent framework's prompt of this
        call, which may change from call to call). It is pinned and counted in the
        budget like the other system texts (it is part of the ``system`` section of
        the trace), and it is not kept: the session's system texts (from ``system``
        messages) stay as they were, and the next turn passes its own prompt or none.
        It opens the ``system`` section, as given, before the configured prompt, the
        system file and the session's texts, joined to them by a blank line; one of
        those equal to it is not repeated. First, because a framework sends its prompt
        first: the text the Engine counts is then the very text an integration sends
        (a text put together in another order can count differently), and a prompt
        that stays the same from turn to turn keeps the whole system part a cached
        prefix, since the session's texts only grow at its end. A prompt that changes
        on every call makes the system part differ from its start: placed last it would
        keep a longer OpenAI prefix cached (the configured and session texts before
        it), no longer an Anthropic one (the system section is one text block, read
        whole at its breakpoint), and the integrations send it first anyway. ``None``,
        an empty or a blank string: no prompt; anything but a string is a
        :class:`UsageError`, raised before anything is written."""
        check_session_id(session_id)
        if system is not None and not isinstance(system, str):
            raise UsageError(
                f"system is this call's system prompt, a str or None, got {type(system).__name__}"
            )
        prompt = system if system is not None and system.strip() else None
        if expected_version is not None and (
            isinstance(expected_version, bool)
            or not isinstance(expected_version, int)
            or expected_version < 0
        ):
            raise UsageError(
                "expected_version is a non-negative integer (0: a new session) or None, "
                f"got {expected_version!r}"
            )
        messages = self._checked_input(new_messages)
        for attempt in range(1, self.max_attempts + 1):
            base = self._load(session_id)
            if expected_version is not None and base.version != expected_version:
                raise SessionConflictError(
                    session_id, expected=expected_version, found=base.version
                )
            unanswered = _unanswered(base.history, messages)
            work, change, result = self._apply(base, messages, attempt, prompt)
            try:
                work.version = self.sessions.commit(session_id, base.version, change)
            except SessionConflictError:
                self._cache.pop(session_id, None)
                if expected_version is not None or attempt == self.max_attempts:
                    raise
                continue
            work.tool_ids.saved()
            self._cache[session_id] = work
            if unanswered and warn_unanswered:  # said once committed: done as asked
                warnings.warn(UnansweredTurnWarning(session_id), stacklevel=2)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    async def aturn(
        self,
        session_id: str,
        new_messages: TurnInput,
        *,
        expected_version: int | None = None,
        system: str | None = None,
        warn_unanswered: bool = True,
    ) -> TurnResult:
        """:meth:`turn` in a worker thread."""
        return await asyncio.to_thread(
            self.turn,
            session_id,
            decode_input(new_messages),  # read here: a generator is not shared with the thread
            expected_version=expected_version,
            system=system,
            warn_unanswered=warn_unanswered,
        )

    # ---------------------------------------------------------------- steps

    @staticmethod
    def _checked_input(new_messages: Any) -> list[Message]:
        messages = decode_input(new_messages)
        for i, m in enumerate(messages):
            problem = message_problem(m)
            if problem is not None:
                raise UsageError(f"new_messages[{i}]: {problem}")
        return messages

    def _check_pairing(self, session: _Session, messages: Sequence[Message]) -> None:
        """Refuse messages whose tool results answer no call, calls that are never
        answered before the next assistant message, and reused ids."""
        history = session.history
        start = len(history)
        while start > 0 and history[start - 1].role != "assistant":
            start -= 1
        if start > 0:
            start -= 1  # from the last assistant message on
        probe = [*history[start:], *(m for m in messages if m.role != "system")]
        found = []
        for p in pairing_problems(Transcript(tuple(probe)), "loose"):
            pending_at_end = (
                p.kind is ProblemKind.UNANSWERED_USE and p.message_index == len(probe) - 1
            )
            if not pending_at_end:
                found.append(p)
        reused = [b.id for m in messages for b in m.tool_uses if b.id in session.tool_ids]
        if reused:
            from ctxwise.messages import PairingProblem

            found.extend(
                PairingProblem(ProblemKind.DUPLICATE_ID, i, len(history), "id used before")
                for i in reused
            )
        if found:
            raise PairingError(found, "loose", f"session {session.session_id!r}", repairable=False)

    def _append(self, session: _Session, messages: Sequence[Message]) -> list[dict[str, Any]]:
        """Append ``messages`` to the working session; returns their log rows."""
        self._check_pairing(session, messages)
        log = [neutral.encode_message(m) for m in messages]
        first = session.log_length
        gate = self._gate(session)
        calls = {b.id: (b.name, b.input) for m in session.history[-50:] for b in m.tool_uses}
        for i, m in enumerate(messages):
            position = first + i
            if m.role == "system":
                text = m.text.strip()
                if text and text not in session.system:
                    session.system.append(text)
                continue
            session.history.append(m)
            session.tokens.append(self._sent.count_messages([m]))
            session.origins.append(position)
            if session.encoded is not None:
                session.encoded.append(self._encode(m))
            for b in m.tool_uses:
                session.tool_ids.add(b.id)
                calls[b.id] = (b.name, b.input)
                self._load_tool(session, b.name)
            for r in m.tool_results:
                if r.tool_use_id in calls:
                    name, tool_input = calls[r.tool_use_id]
                    gate.observe(
                        name, tool_input, block_text(r), session.facts, is_error=bool(r.is_error)
                    )
        body = [m for m in messages if m.role != "system"]
        if self.extractor is not None and body:
            session.facts.update_from_messages(body, offset=first, extractor=self.extractor)
        if self.config.facts.rules and body:
            for text in session.rules.capture_messages(body, offset=first):
                self._compile(session, text)
        session.log_length += len(messages)
        return log

    def _joined(self, counts: Sequence[int]) -> int:
        """The tokens of messages counted one by one, as one request: each count
        carries the counter's per-request overhead once, the request only once."""
        return sum(counts) - self._overhead * (len(counts) - 1) if counts else 0

    def _gate(self, session: _Session) -> PolicyGate:
        """The configured gate plus the rules this session compiled from what was said."""
        if not session.gate_rules:
            return self.gate
        # the configured rules as they are (a custom PolicyRule has no dict form),
        # then the session's, which are stored as dicts
        stated = PolicyGate.from_dict({"version": 1, "rules": session.gate_rules})
        return PolicyGate([*self.gate, *stated])

    def _compile(self, session: _Session, text: str) -> None:
        """A stated rule as a gate rule of the session, when ``compile_rule`` reads it."""
        vocabulary = self.config.gates.vocabulary
        if not vocabulary:
            return
        taken = {r.name for r in self.gate} | {r["name"] for r in session.gate_rules}
        name = f"stated-{len(session.gate_rules) + 1}"
        while name in taken:
            name += "+"
        try:
            rule = compile_rule(
                text, vocabulary, id_fields=self.config.gates.id_fields or None, name=name
            )
        except UsageError:
            return  # a standing rule that is not a tool rule stays a pinned rule only
        session.gate_rules.append(rule.to_dict())

    def _rows(self, session: _Session, keep: int) -> list[HistoryRow]:
        return [
            HistoryRow(neutral.encode_message(m), t, o)
            for m, t, o in zip(
                session.history[keep:], session.tokens[keep:], session.origins[keep:], strict=True
            )
        ]

    def _route(self, session: _Session) -> tuple[RouteTrace, tuple[str, ...], str | None]:
        query = None
        index = None
        for i in range(len(session.history) - 1, -1, -1):
            m = session.history[i]
            if m.role == "user" and m.kind == "message" and m.text.strip():
                query, index = m.text, session.origins[i]
                break
        if self.router is None or query is None:
            reason = "no router" if self.router is None else "no user message"
            return RouteTrace(query=query, label=None, reason=reason), self.fallback, None
        memo = session.route
        if memo is not None and memo.get("origin") == index and index is not None:
            trace = RouteTrace.model_validate({**memo["trace"], "reused": True})
        else:
            decision: RouteDecision = self.router.route(query)
            top = sorted(decision.scores.items(), key=lambda kv: -kv[1])[:5]
            trace = RouteTrace(
                query=query,
                label=decision.label,
                reason=decision.reason.value,
                score=float(decision.score),
                scores={k: round(float(v), 6) for k, v in top},
            )
            session.route = {"origin": index, "trace": trace.model_dump(mode="json")}
        if trace.label is None:
            chosen, fallback = self.fallback, f"router refused ({trace.reason})"
        elif trace.label not in self.routes:
            chosen, fallback = self.fallback, f"no route for label {trace.label!r}"
        else:
            chosen, fallback = self.routes[trace.label], None
        return trace.model_copy(update={"fallback": fallback}), chosen, fallback

    def _pinned(self, session: _Session, prompt: str | None = None) -> list[tuple[Section, str]]:
        """The pinned sections: the system texts (this call's ``prompt`` first, see
        :meth:`turn`), the standing rules, the case facts."""
        out: list[tuple[Section, str]] = []
        texts = [s for s in (self.config.system, self._system_file(), *session.system) if s]
        if prompt is not None:
            same = prompt.strip()
            texts = [prompt, *(s for s in texts if s.strip() != same)]
        system = "\n\n".join(texts)
        if system:
            out.append((Section("system", system, 1000, pinned=True, stable=True), "(system)"))
        if len(session.rules):
            out.append((session.rules.section(), "(rules)"))
        if len(session.facts):
            out.append((session.facts.section(), "(facts)"))
        return out

    def _system_file(self) -> str:
        if not self.config.system_file:
            return ""
        from ctxwise._io import read_text_file

        return read_text_file(
            self.config.path(self.config.system_file), "a system file", _keyed("system_file")
        )

    def _namespace(self, session_id: str) -> tuple[str, ...]:
        return (self.config.memory.namespace, "session", namespace_part(session_id))

    def _remember(self, session: _Session, upto: int) -> int:
        """Put the session's log from ``session.remembered`` up to ``upto`` into
        long-term memory, one item per turn, verbatim; idempotent (ids are positions)."""
        if self.memory is None or upto <= session.remembered:
            return 0
        start = session.remembered
        raw = self.sessions.log(session.session_id, start, upto)  # that span, not the log
        originals = neutral.decode_messages(raw, start)
        body = [(start + i, m) for i, m in enumerate(originals) if m.role != "system"]
        if not body:
            session.remembered = upto
            return 0
        positions = [p for p, _ in body]
        items = []
        for item in turn_items([m for _, m in body]):
            position = positions[item.metadata["position"]]
            meta = {**item.metadata, "position": position}
            items.append(NewItem(_storable(item.text), meta, f"p{position}"))
        if items:
            LongTermMemory(
                self.memory,
                self._namespace(session.session_id),
                self.embedder,
                preset=self.config.memory.preset,
            ).remember_many(items)
        session.remembered = upto
        return len(items)

    def _recall(self, session: _Session, query: str | None) -> list[Section]:
        if self.memory is None or not query or not self.config.memory.recall:
            return []
        live = [o for o in session.origins if o is not None]
        first_live = min(live) if live else session.log_length
        # the session's memory changes only when a compaction remembers turns (the
        # log up to session.remembered is in it): a turn that routes the same query
        # with the same live history (a tool result's turn) reuses the last recall
        key = (query, first_live, session.remembered)
        if session.recalled is not None and session.recalled[0] == key:
            return list(session.recalled[1])
        found = self._recalled(self.memory, session, query, first_live)
        session.recalled = (key, tuple(found))
        return found

    def _recalled(
        self, store: Store, session: _Session, query: str, first_live: int
    ) -> list[Section]:
        memory = LongTermMemory(
            store,
            self._namespace(session.session_id),
            self.embedder,
            preset=self.config.memory.preset,
        )
        try:
            hits = memory.recall(query, k=self.config.memory.k * 2)
        except NamespaceNotFoundError:
            return []
        texts = [
            h.item.text
            for h in hits
            if int(h.item.metadata.get("position", first_live)) < first_live
        ][: self.config.memory.k]
        if not texts:
            return []
        body = "Recalled from earlier in this session:\n" + "\n\n".join(texts)
        return [Section("recalled", body, 60, truncatable=True)]

    def _edit(
        self, session: _Session, history_room: int, room: int
    ) -> tuple[ClearTrace | None, CompactionTrace | None, int]:
        """Clear, then compact, when the history is over its thresholds; returns the
        traces and the first history position that changed."""
        cfg = self.config
        changed_from = len(session.history)
        cleared = compacted = None
        total = self._joined(session.tokens)
        trigger = int(cfg.clearing.trigger * history_room)
        if cfg.clearing.enabled and cfg.clearing.mode == "local" and total > trigger:
            result = clear_tool_uses(
                Transcript(tuple(session.history)),
                trigger_tokens=0,
                keep_last=cfg.clearing.keep_last,
                exclude_tools=cfg.clearing.exclude_tools,
                counter=self._sent,
            )
            if result.applied and result.cleared:
                new = list(result.transcript.messages)
                first = next(
                    (
                        i
                        for i, (a, b) in enumerate(zip(session.history, new, strict=True))
                        if a != b
                    ),
                    len(new),
                )
                changed_from = min(changed_from, first)
                session.history = new
                for i in range(first, len(new)):
                    session.tokens[i] = self._sent.count_messages([new[i]])
                    if session.encoded is not None:
                        session.encoded[i] = self._encode(new[i])
                session.clears += 1
                cleared = ClearTrace(
                    tool_uses=result.cleared_tool_uses,
                    tokens_freed=total - self._joined(session.tokens),
                    trigger_tokens=trigger,
                )
                total = self._joined(session.tokens)
        if cfg.compaction.enabled and total > history_room:
            target = max(1, int(cfg.compaction.target * history_room))
            settings = CompactionSettings(
                extract=False, summary_tokens=cfg.compaction.summary_tokens
            )
            transcript = Transcript(tuple(session.history))
            latest = _latest_exchange(session.history)
            done: Compaction | None = None
            smallest: Compaction | None = None
            # the target first; then the history's whole room; then the room the
            # context share would have taken too (the context gets what is left).
            # A compaction that summarizes the latest exchange (the message the model
            # answers next, with the calls its results answer) is passed over for the
            # next room while one is left: the model would not see it otherwise
            for attempt_budget in (target, history_room, room):
                try:
                    done = compact(
                        transcript,
                        self.summarizer,
                        budget=attempt_budget,
                        settings=settings,
                        counter=self._sent,
                    )
                except CompactionBudgetError:
                    if attempt_budget == room and smallest is None:
                        raise
                    continue
                smallest = smallest if smallest is not None else done
                if not done.compacted or done.cut_index <= latest:
                    break
            else:  # the latest exchange alone is larger than any room: summarized
                done = smallest
            assert done is not None
            if done.compacted:
                cut = done.cut_index
                kept_origins = session.origins[cut:]
                summarized = [o for o in session.origins[:cut] if o is not None]
                remembered = self._remember(session, max(summarized) + 1) if summarized else 0
                new = list(done.transcript.messages)
                n_new = len(new) - len(kept_origins)
                session.history = new
                session.origins = [*([None] * n_new), *kept_origins]
                session.tokens = [self._sent.count_messages([m]) for m in new]
                session.encoded = None
                session.compactions += 1
                changed_from = 0
                compacted = CompactionTrace(
                    summarized_messages=done.summarized_messages,
                    tokens_before=total,
                    tokens_after=self._joined(session.tokens),
                    target_tokens=target,
                    remembered_items=remembered,
                )
        return cleared, compacted, changed_from

    def _apply(
        self, base: _Session, messages: Sequence[Message], attempt: int, prompt: str | None
    ) -> tuple[_Session, SessionCommit, TurnResult]:
        cfg = self.config
        clock = self.clock
        t0 = clock()
        timings: dict[str, float] = {}
        work = base.copy()
        recounted = work.counted_by != self._counted_by and bool(work.history)
        if recounted:
            # the stored counts came from another counter or render (or from before
            # it was recorded): count the history again, and store every record anew
            work.tokens = [self._sent.count_messages([m]) for m in work.history]
        work.counted_by = self._counted_by
        facts_before = {k: f.value for k, f in _facts_items(work.facts)}
        rules_before = len(work.rules)
        gates_before = len(work.gate_rules)
        log = self._append(work, messages)
        t1 = clock()
        timings["append"] = (t1 - t0) * 1000
        if not work.history:
            raise UsageError("there is nothing to send: the session has no messages yet")
        if work.history[-1].role == "assistant" and work.history[-1].tool_uses:
            raise UsageError(
                "the history ends with tool calls awaiting their results; pass the "
                "tool results with the next turn (or record them with Engine.record)"
            )
        route, chosen, _ = self._route(work)
        t2 = clock()
        timings["route"] = (t2 - t1) * 1000

        budget = Budget(cfg.budget, cfg.reserve)
        tool_defs, tools_trace, tool_tokens = self._tools(work, route.query)
        if tool_tokens >= budget.available:
            raise PinnedOverflowError(budget.available, tool_tokens, ["tool definitions"])
        available = budget.available - tool_tokens
        framing = self._sent.count_messages([Message.text_message("system", "")])
        pinned = self._pinned(work, prompt)
        pinned_tokens = sum(self.counter.count(s.content) for s, _ in pinned)
        room = available - framing - pinned_tokens
        if room <= 0:
            # the request's own framing is what must stay too (all of it, when
            # nothing is pinned)
            raise PinnedOverflowError(
                available,
                pinned_tokens + framing,
                [*(s.name for s, _ in pinned), "request framing"],
            )
        history_room = room - int(cfg.context_share * room)
        cleared, compacted, changed_from = self._edit(work, history_room, room)
        t3 = clock()
        timings["edit"] = (t3 - t2) * 1000

        gathered: list[tuple[Section, str]] = []
        for name in chosen:
            if name == "memory":
                gathered.extend((s, "memory") for s in self._recall(work, route.query))
            elif name in self.sources:
                gathered.extend(
                    (s, name) for s in self.sources[name].sections(route.query or "", {})
                )
        skipped = [n for n in (*self.sources, *BUILTIN_SOURCES) if n not in chosen]
        t4 = clock()
        timings["gather"] = (t4 - t3) * 1000

        history_tokens = self._joined(work.tokens)
        owner: dict[str, str] = {}
        sections = []
        for s, src in (*pinned, *gathered):
            if s.name in owner:
                raise UsageError(
                    f"section name {s.name!r} from {src!r} is used by {owner[s.name]!r}"
                )
            owner[s.name] = src
            sections.append(s)
        context_budget = available - framing - history_tokens
        if context_budget < pinned_tokens + 1:
            # what must stay: the pinned sections and the history (kept whole when
            # compaction is off, or when it could not shrink it further)
            must = [s.name for s, _ in pinned] + (["history"] if history_tokens else [])
            raise PinnedOverflowError(available, pinned_tokens + history_tokens, must)
        # the context block's tags cost a few tokens: keep room for them
        tags = self.counter.count("<context>\n\n</context>") + 1
        section_room = context_budget - tags
        for _ in range(_FIT_ATTEMPTS):
            assembly = assemble(
                sections,
                Budget(max(section_room, pinned_tokens + 1)),
                self.counter,
                order=cfg.order,
            )
            system_part: list[str] = []
            context_part: list[str] = []
            stable = 0
            placements: dict[str, str] = {}
            for s in assembly.sections:
                in_system = s.stable or s.pinned or cfg.context == "system"
                placements[s.name] = "system" if in_system else "context"
                if in_system:
                    system_part.append(s.content)
                    if s.stable and stable == len(system_part) - 1:
                        stable += 1
                else:
                    context_part.append(s.content)
            context_at = None
            if context_part:
                for i in range(len(work.history) - 1, -1, -1):
                    if work.history[i].role == "user":
                        context_at = i
                        break
                if context_at is None:  # no user turn: the context joins the system part
                    system_part.extend(context_part)
                    context_part = []
            window = Window(
                tuple(system_part),
                stable,
                tuple(work.history),
                "\n\n".join(context_part),
                context_at,
            )
            neutral_window = window.transcript()
            counts = list(work.tokens)
            if context_at is not None:
                counts[context_at] = self._sent.count_messages([window.with_context()[context_at]])
            if system_part:
                counts.insert(0, self._sent.count_messages(neutral_window.messages[:1]))
            total_tokens = self._joined(counts)
            over = total_tokens - available
            if over <= 0 or section_room <= pinned_tokens + 1:
                break
            # what is sent counts more than its sections did one by one (the
            # separators that join them; messages a render sends apart): the
            # sections get that much less room, and are assembled again
            section_room -= over
        if total_tokens > available:
            must = [s.name for s, _ in pinned] + (["history"] if history_tokens else [])
            raise PinnedOverflowError(available, total_tokens, must)
        if work.encoded is None:
            work.encoded = [self._encode(m) for m in work.history]
        t5 = clock()
        timings["assemble"] = (t5 - t4) * 1000
        headers: dict[str, str] = {}
        if cfg.render == "anthropic":
            server_edit = None
            if cfg.clearing.enabled and cfg.clearing.mode == "server":
                server_edit = context_management(
                    trigger_tokens=max(1, int(cfg.clearing.trigger * history_room)),
                    keep_last=cfg.clearing.keep_last,
                    exclude_tools=cfg.clearing.exclude_tools,
                )
                headers["anthropic-beta"] = CONTEXT_MANAGEMENT_BETA
            request = render_anthropic(
                window,
                model=cfg.model,
                max_tokens=cfg.max_tokens,
                encoded=work.encoded,
                context_management=server_edit,
            )
        else:
            request = render_openai(
                window, model=cfg.model, max_tokens=cfg.max_tokens, encoded=work.encoded
            )
        if tool_defs is not None:
            request["tools"] = tool_defs
        events = [ToolEventTrace.model_validate(e) for e in work.tool_events]
        work.tool_events = []
        t6 = clock()
        timings["render"] = (t6 - t5) * 1000
        timings["total"] = (t6 - t0) * 1000

        work.turns += 1
        system_tokens = sum(self.counter.count(s) for s in system_part)
        stable_tokens = sum(self.counter.count(s) for s in system_part[:stable])
        trace = Trace(
            session_id=work.session_id,
            turn=work.turns,
            version=base.version + 1,
            new_messages=len(messages),
            route=route,
            chosen=list(chosen),
            skipped=skipped,
            sections=[
                SectionTrace(
                    name=r.name,
                    source=owner[r.name],
                    placement="system"
                    if placements.get(r.name, "context") == "system"
                    else "context",
                    status=r.status.value,
                    tokens=r.tokens,
                    original_tokens=r.original_tokens,
                    reason=r.reason,
                    pinned=r.section.pinned,
                    stable=r.section.stable,
                )
                for r in assembly.reports
            ],
            cleared=cleared,
            compacted=compacted,
            facts_changed=sorted(
                k for k, f in _facts_items(work.facts) if facts_before.get(k) != f.value
            ),
            rules_added=[r.text for r in list(work.rules)[rules_before:]],
            gates_added=[r["name"] for r in work.gate_rules[gates_before:]],
            tokens=TokensTrace(
                budget=cfg.budget,
                available=budget.available,
                system=system_tokens,
                context=sum(
                    r.tokens
                    for r in assembly.reports
                    if placements.get(r.name) == "context" and r.status is not SectionStatus.DROPPED
                ),
                history=history_tokens,
                total=total_tokens + tool_tokens,
                stable_prefix=stable_tokens,
                history_room=history_room,
                tools=tool_tokens,
            ),
            tools=tools_trace,
            tool_events=events,
            timings_ms={k: round(v, 3) for k, v in timings.items()},
            attempts=attempt,
        )
        keep = 0 if recounted else min(changed_from, len(base.history))
        change = SessionCommit(
            work.state(),
            keep,
            self._rows(work, keep),
            log,
            trace.to_dict(),
            work.turns,
            work.tool_ids.unsaved(),
        )
        return work, change, TurnResult(request, trace, neutral_window, headers)


_FIT_ATTEMPTS = 4
"""Assemblies a turn tries before the window fits as sent (one is the rule)."""


def _keyed(key: str) -> Callable[[str, str], ConfigError]:
    """A ConfigError builder for a file the config names under ``key``: the file,
    then the key and what is wrong (``sources.faq.file: no such file``)."""

    def error(source: str, detail: str) -> ConfigError:
        return ConfigError(source, f"{key}: {detail}")

    return error


def _as_openai(tool: Mapping[str, Any]) -> dict[str, Any]:
    """An Anthropic custom tool definition as a Chat Completions function tool."""
    fn: dict[str, Any] = {"name": tool["name"]}
    if tool.get("description"):
        fn["description"] = tool["description"]
    fn["parameters"] = dict(tool["input_schema"])
    return {"type": "function", "function": fn}


def _facts_items(facts: CaseFacts) -> list[tuple[str, Any]]:
    return [(f.key, f) for f in facts]
