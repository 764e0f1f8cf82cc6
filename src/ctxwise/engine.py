"""`Engine`: one object runs the whole turn.

``engine.turn(session_id, new_messages)`` takes what is new since the last turn
(the user's message, or the model's reply and the tool results that answer it),
and returns the request to send now and a :class:`~ctxwise.trace.Trace` of every
decision. It loads the session, runs the turn's steps (:mod:`ctxwise.turn`:
append, observe, route, tools, budget, edit, gather, assemble, render, trace; each
a function of a frozen :class:`~ctxwise.turn.TurnState`, listed in
:attr:`Engine.steps`, which a caller may change), commits what they built in one
transaction, then runs the turn's effects (remembering the turns a compaction
took out, on a worker thread that the Engine's next call waits for). What each
step does is in its module and in docs/engine.md ("One turn").

Sessions carry a version, and writers of one session take turns. A turn holds
the session's write lock (:meth:`ctxwise.sessions.SessionStore.lock`: a lock
file beside a SQLite database, an advisory lock on PostgreSQL, a thread lock in
memory) from its load to its commit, so a second writer of the session, in this
process or another, waits for the first instead of failing; a wait longer than
``lock_timeout`` (:data:`DEFAULT_LOCK_TIMEOUT`) is a
:class:`~ctxwise.errors.SessionBusyError`, nothing written. The lock is let go
when the turn ends, by an error too, and the turn's effects run after it.

Every commit still applies only on the version it was computed from: a writer
that does not lock (a call with ``expected_version``, a store whose lock other
processes do not see) can still commit first, and the turn is then re-applied on
the new state, after a jittered pause that doubles from try to try (up to
``max_attempts``, :data:`MAX_ATTEMPTS` by default; ``Trace.attempts`` says how
many it took). A caller that gives ``expected_version`` does not wait for the
lock: its turn fails with :class:`~ctxwise.errors.SessionConflictError` when the
session is not at that version, as it fails when another writer commits first.
Either way no turn is lost or applied twice.

An Engine holds one connection per store (a PostgreSQL session store one more
for session locks) and is meant for one thread; use one Engine per thread or
process (they may share the store: that is what the lock and the version are
for). :meth:`Engine.aturn` runs a turn in a worker thread for async
callers.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxwise import _engine_tools, _sync
from ctxwise._engine_parts import (
    build_catalog,
    build_config_embedder,
    build_gate,
    build_results,
    build_router,
    build_sources,
    checked_sources,
    cursor_keys,
    read_system_file,
)
from ctxwise._session_state import STATE_FORMAT, ToolIds, parse_state
from ctxwise._sync import SyncKeys, SyncResult
from ctxwise.config import (
    BUILTIN_SOURCES,
    EngineConfig,
    load_config,
)
from ctxwise.embeddings import Embedder
from ctxwise.errors import (
    ConfigError,
    SessionConflictError,
    UnansweredTurnWarning,
    UsageError,
)
from ctxwise.formats import neutral
from ctxwise.formats.inputs import TurnInput, decode_input
from ctxwise.handoff.escalation import EscalationBrief, escalation_brief
from ctxwise.handoff.scoring import ChunkScorer
from ctxwise.handoff.select import DEFAULT_BUDGET as DEFAULT_HANDOFF_BUDGET
from ctxwise.handoff.select import Handoff, select_context
from ctxwise.memory.facts import CaseFacts, FactExtractor, Rules
from ctxwise.memory.longterm import check_preset_embedder
from ctxwise.memory.source import MemorySource, SessionMemory
from ctxwise.memory.store import Store, namespace_part
from ctxwise.memory.urls import open_store, store_kind
from ctxwise.memory_tool import DirectoryMemory, MemoryTool
from ctxwise.messages import (
    Message,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    message_problem,
)
from ctxwise.policy import Allowed, Blocked, PolicyGate
from ctxwise.prompt_cache import BlockMemo
from ctxwise.sessions import (
    HistoryRow,
    SessionCommit,
    SessionStore,
    check_session_id,
    open_session_store,
)
from ctxwise.sessions.store import DEFAULT_LOCK_TIMEOUT, check_timeout
from ctxwise.sources import Source
from ctxwise.summarize import ExtractiveSummarizer, Summarizer
from ctxwise.tokens import TokenCounter, get_counter
from ctxwise.tools.catalog import ToolCatalog
from ctxwise.tools.cursors import ResultStore
from ctxwise.tools.given import read_tools
from ctxwise.trace import FailOpenTrace, ToolEventTrace, Trace
from ctxwise.turn import (
    Classifier,
    Remember,
    SessionView,
    Step,
    Steps,
    TurnContext,
    TurnState,
    default_steps,
    record_steps,
)
from ctxwise.turn.context import OnceSummarizer
from ctxwise.turn.effects import pending, remember

__all__ = ["Engine", "SyncKeys", "SyncResult", "TurnResult"]

MAX_ATTEMPTS = 5
"""Tries of a turn whose commit found the session moved on (see the module docstring)."""

BACKOFF_FIRST = 0.002
BACKOFF_MAX = 0.1
"""The pause before a turn's next try, in seconds, is drawn uniformly below a cap
that doubles from the first of these to the last (full jitter): writers that
collided once do not collide again in step."""


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

    @classmethod
    def of(cls, state: TurnState) -> TurnResult:
        assert state.trace is not None and state.assembled is not None
        assert state.request is not None
        return cls(dict(state.request), state.trace, state.assembled.transcript, state.headers)


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


def _prompt(system: object) -> str | None:
    """This call's system prompt, checked (None for none)."""
    if system is not None and not isinstance(system, str):
        raise UsageError(
            f"system is this call's system prompt, a str or None, got {type(system).__name__}"
        )
    return system if system is not None and system.strip() else None


def _expected(expected_version: object) -> int | None:
    if expected_version is not None and (
        isinstance(expected_version, bool)
        or not isinstance(expected_version, int)
        or expected_version < 0
    ):
        raise UsageError(
            "expected_version is a non-negative integer (0: a new session) or None, "
            f"got {expected_version!r}"
        )
    return expected_version


class Engine:
    """Runs every turn of every session (see the module docstring).

    Build it from an :class:`~ctxwise.config.EngineConfig` (or
    :meth:`from_file`); objects given here replace what the config would build:
    ``counter``, ``router`` (anything with ``route(query)``), ``sources`` (added
    to the config's), ``summarizer``, ``gate``, ``sessions`` and ``memory`` (the
    session and long-term stores; by default both on the config's ``store`` URL),
    ``clock`` (for the trace's timings; ``time.perf_counter``), ``embedder``
    (what long-term memory embeds with; hashing by default) and ``steps`` (the
    steps of a turn, :func:`ctxwise.turn.default_steps` by default; change them
    later through :attr:`steps`).

    Writers of one session (see the module docstring): ``lock_timeout`` is how
    long, in seconds, a turn waits for the session's lock before a
    :class:`~ctxwise.errors.SessionBusyError` (:data:`DEFAULT_LOCK_TIMEOUT`; 0: one
    try); ``max_attempts`` how many times a turn is tried when another writer
    committed first; ``rng`` draws the jittered pauses between those tries and
    ``sleep`` waits them out (a fresh ``random.Random()`` and ``time.sleep`` by
    default: jitter seeded alike in every process would pause writers in step;
    pass ``random.Random(seed)`` and your own ``sleep`` for a run that repeats).
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
        embedder: Embedder | None = None,
        steps: Iterable[Step] | None = None,
        effects: Literal["background", "inline"] = "background",
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        cfg = config if config is not None else EngineConfig()
        if not isinstance(cfg, EngineConfig):
            raise UsageError(f"config must be an EngineConfig, got {type(cfg).__name__}")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise UsageError(f"max_attempts must be a positive integer, got {max_attempts!r}")
        self.lock_timeout = check_timeout(lock_timeout)
        if rng is not None and not isinstance(rng, random.Random):
            raise UsageError(f"rng must be a random.Random, got {rng!r}")
        if sleep is not None and not callable(sleep):
            raise UsageError(f"sleep must be a function of seconds, got {sleep!r}")
        self._rng = rng if rng is not None else random.Random()
        self._sleep = sleep if sleep is not None else time.sleep
        self.config = cfg
        if effects not in ("background", "inline"):
            raise UsageError(f"effects is 'background' or 'inline', got {effects!r}")
        self.effects = effects
        self._worker: ThreadPoolExecutor | None = None
        self._running: (
            tuple[SessionView, Sequence[Remember], Future[BaseException | None]] | None
        ) = None
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
        self.counter: TokenCounter = (
            counter if counter is not None else get_counter(cfg.counter, model=cfg.model)
        )
        self.clock = clock if clock is not None else time.perf_counter
        self.max_attempts = max_attempts
        self.router = router if router is not None else build_router(cfg)
        self.sources: dict[str, Source] = {}
        for source in (*build_sources(cfg, self.counter), *checked_sources(sources)):
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
        self.gate = gate if gate is not None else build_gate(cfg)
        self.extractor = (
            None if cfg.facts.extractor == "none" else FactExtractor.preset(cfg.facts.extractor)
        )
        if embedder is not None and not (
            callable(getattr(embedder, "embed", None))
            and isinstance(getattr(embedder, "dim", None), int)
        ):
            raise UsageError(
                f"embedder must be an Embedder (embed(texts) and dim), got {embedder!r}"
            )
        self.embedder: Embedder = (
            embedder if embedder is not None else build_config_embedder(cfg.embedder, cfg)
        )
        try:  # a preset fit to another embedder than the memory's is refused
            check_preset_embedder(cfg.memory.preset, self.embedder.name)
        except UsageError as exc:
            raise ConfigError("config", f"memory.preset: {exc}") from None
        self.now = now if now is not None else time.time
        # what a bad config fails on is built before a store is opened: a refused
        # config creates no SQLite file and leaves no connection open
        url = cfg.store_url()
        store_kind(url)  # a bad URL fails before anything is opened
        self._system_file()  # read on every turn; a file it cannot read fails here
        self.catalog = (
            catalog if catalog is not None else build_catalog(cfg, self.counter, self.embedder)
        )
        if catalog is not None and cfg.tools.always:
            catalog.set_always_loaded(cfg.tools.always)
        if self.catalog is None and cfg.tools.always:  # they were never sent
            raise ConfigError(
                "config",
                f"tools.always names {', '.join(cfg.tools.always)} but there is no tool "
                "catalog: set tools.catalog or pass catalog=ToolCatalog(...) to the Engine",
            )
        keys = cursor_keys(cfg) if results is None else None
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
            self.results = (
                results if results is not None else build_results(cfg, keys, memory, self.now)
            )
        except BaseException:
            self.close()
            raise
        self._cache: dict[str, SessionView] = {}
        # each session's request blocks by identity (the cost step), kept beside the
        # session views whose encoded messages the requests share
        self._block_memos: dict[str, BlockMemo] = {}
        self.steps = Steps(default_steps() if steps is None else steps)
        self._record = Steps(record_steps())
        self._ctx = self._context()

    @classmethod
    def from_file(cls, path: str, **objects: Any) -> Engine:
        """An Engine from a ``ctxwise.toml`` (see :mod:`ctxwise.config`)."""
        return cls(load_config(path), **objects)

    # ---------------------------------------------------------------- building

    def close(self) -> None:
        """Wait for the last turn's effects, then close the stores this Engine opened."""
        try:
            self.wait()
        finally:
            if self._worker is not None:
                self._worker.shutdown()
                self._worker = None
        for store in self._own:
            store.close()
        self._own.clear()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _context(self) -> TurnContext:
        """What the steps use: this Engine's parts."""
        cfg = self.config
        sources: list[Source] = list(self.sources.values())
        if self.memory is not None and cfg.memory.recall:
            memory = SessionMemory(
                self.memory, self.embedder, self._namespace, preset=cfg.memory.preset
            )
            sources.append(MemorySource(memory, k=cfg.memory.k))
        return TurnContext.create(
            cfg,
            counter=self.counter,
            summarizer=self.summarizer,
            gate=self.gate,
            router=self.router,
            sources=sources,
            memory=self.memory,
            embedder=self.embedder,
            extractor=self.extractor,
            catalog=self.catalog,
            results=self.results,
            memory_tool=self._memory_tool,
            read_log=self.sessions.log,
            system_file=self._system_file,
            block_memo=self._block_memo,
            clock=self.clock,
        ).but(fallback=self.fallback)

    def _block_memo(self, session_id: str) -> BlockMemo:
        memo = self._block_memos.get(session_id)
        if memo is None:
            memo = self._block_memos[session_id] = BlockMemo()
        return memo

    def _namespace(self, session_id: str) -> tuple[str, ...]:
        return (self.config.memory.namespace, "session", namespace_part(session_id))

    def _system_file(self) -> str:
        return read_system_file(self.config)

    # ---------------------------------------------------------------- sessions

    def _load(self, session_id: str) -> SessionView:
        self.wait()
        version = self.sessions.version(session_id)
        cached = self._cache.get(session_id)
        if cached is not None and cached.version == version:
            return cached
        snap = self.sessions.load(session_id)
        # a stored state is validated (format, types); a new session starts empty
        st = parse_state(snap.state if snap.version else {"format": STATE_FORMAT}, session_id)
        session = SessionView.from_state(
            session_id,
            snap.version,
            st,
            history=tuple(neutral.decode_messages([r.message for r in snap.history])),
            tokens=tuple(r.tokens for r in snap.history),
            origins=tuple(r.origin for r in snap.history),
            log_length=snap.log_length,
            # the ids a state row held (written before the store kept them apart) move
            # to the store on the next commit
            tool_ids=ToolIds(
                sorted(snap.tool_ids), [i for i in st.tool_ids if i not in snap.tool_ids]
            ),
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
        self.wait()
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
        self.wait()
        check_session_id(session_id)
        self.sessions.require(session_id)
        log = neutral.decode_messages(self.sessions.log(session_id))
        return select_context(log, task, budget, scorer=scorer, counter=self.counter)

    def escalation_brief(self, session_id: str) -> EscalationBrief:
        """A brief for a person taking the case over (:func:`ctxwise.handoff.escalation_brief`):
        from the session's case facts and its whole log."""
        self.wait()
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
        return self._ctx.gate_for(session.gate_rules).check(name, tool_input, session.facts)

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
        return _engine_tools.run_tool(self, session_id, call)

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
        return _engine_tools.tool_result(self, session_id, call, result, is_error=is_error)

    def _memory_tool(self, session_id: str) -> MemoryTool | None:
        return _engine_tools.memory_tool_for(self, session_id)

    # ---------------------------------------------------------------- the turn

    def turn(
        self,
        session_id: str,
        new_messages: TurnInput,
        *,
        expected_version: int | None = None,
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
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
        :class:`UsageError`, raised before anything is written.

        ``tools``: the loop's own tool definitions for this call, in any provider's
        shape (Anthropic, OpenAI Chat Completions or Responses, MCP; built-in tools
        such as ``web_search_20250305`` verbatim, :mod:`ctxwise.tools.given`). They go
        into ``result.request["tools"]`` in the render's shape, first and in the order
        given (a stable, cached prefix), are counted in the budget and listed in
        ``trace.tools``: pass them here, not beside the request, so the budget sees
        them. A bad definition, or one named like a tool ctxwise sends, is a
        :class:`~ctxwise.errors.ToolCatalogError` or :class:`UsageError`, raised before
        anything is written."""
        check_session_id(session_id)
        prompt, expected = _prompt(system), _expected(expected_version)
        given = read_tools(tools)
        messages = tuple(self._checked_input(new_messages))
        ctx = self._ctx.but(summarizer=OnceSummarizer(self.summarizer))  # once per turn

        def build(attempt: int) -> TurnState:
            base = self._load(session_id)
            if expected is not None and base.version != expected:
                raise SessionConflictError(session_id, expected=expected, found=base.version)
            start = TurnState.start(
                base, messages, prompt=prompt, attempt=attempt, started=self.clock(), tools=given
            )
            return self.steps.run(start, ctx)

        state = self._apply(session_id, build, expected=expected)
        if warn_unanswered and _unanswered(state.base.history, messages):  # said once done
            warnings.warn(UnansweredTurnWarning(session_id), stacklevel=2)
        return TurnResult.of(state)

    def sync(
        self, session_id: str, full_history: Sequence[Message], keys: SyncKeys | None = None
    ) -> SyncResult:
        """What of ``full_history`` (a framework's whole conversation) the session has not
        had yet, compared by ``keys``; a rewound or forked one is a
        :class:`~ctxwise.errors.HistoryRewoundError`, nothing recorded (:mod:`ctxwise._sync`)."""
        return _sync.sync(self, session_id, full_history, keys)

    async def aturn(
        self,
        session_id: str,
        new_messages: TurnInput,
        *,
        expected_version: int | None = None,
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        warn_unanswered: bool = True,
    ) -> TurnResult:
        """:meth:`turn` in a worker thread."""
        return await asyncio.to_thread(
            self.turn,
            session_id,
            decode_input(new_messages),  # read here: a generator is not shared with the thread
            expected_version=expected_version,
            system=system,
            tools=tools,
            warn_unanswered=warn_unanswered,
        )

    # ---------------------------------------------------------------- commits

    @staticmethod
    def _checked_input(new_messages: Any) -> list[Message]:
        messages = decode_input(new_messages)
        for i, m in enumerate(messages):
            problem = message_problem(m)
            if problem is not None:
                raise UsageError(f"new_messages[{i}]: {problem}")
        return messages

    def _apply(
        self,
        session_id: str,
        build: Callable[[int], TurnState],
        *,
        expected: int | None = None,
    ) -> TurnState:
        """Build the session's change (``build(attempt)``: load, then steps) and commit
        it, under the session's lock unless the caller gave ``expected`` (the version
        it must be at: no waiting); a commit that finds the session moved on is built
        again on the newer state after a jittered pause, up to ``max_attempts``
        tries. The committed session's effects run once the lock is let go."""
        self.wait()  # the last turn's effects, before the lock: other writers need not wait
        with self._session_lock(session_id, wait=expected is None):
            for attempt in range(1, self.max_attempts + 1):
                state = build(attempt)
                try:
                    committed = self._commit(state)
                except SessionConflictError:
                    if expected is not None or attempt == self.max_attempts:
                        raise
                    self._back_off(attempt)
                    continue
                break
        self._effects(committed)
        return state

    def _session_lock(
        self, session_id: str, *, wait: bool
    ) -> contextlib.AbstractContextManager[None]:
        """The session's write lock (:meth:`SessionStore.lock`), or nothing when the
        caller must not wait for it."""
        if not wait:
            return contextlib.nullcontext()
        return self.sessions.lock(session_id, timeout=self.lock_timeout)

    def _back_off(self, attempt: int) -> None:
        """Pause before try ``attempt + 1``: a uniform draw below a cap that doubles
        with each try (:data:`BACKOFF_FIRST` to :data:`BACKOFF_MAX`)."""
        cap = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (attempt - 1))
        self._sleep(self._rng.uniform(0.0, cap))

    def _commit(self, state: TurnState) -> SessionView:
        """Commit what ``state`` built on the version it was loaded at; the committed
        session (whose effects the caller runs), or a :class:`SessionConflictError`
        (nothing written) when another writer committed first."""
        base, work = state.base, state.session
        keep = (
            0
            if state.recounted
            else min(
                len(base.history) if state.changed_from is None else state.changed_from,
                len(base.history),
            )
        )
        rows = [
            HistoryRow(neutral.encode_message(m), t, o)
            for m, t, o in zip(
                work.history[keep:], work.tokens[keep:], work.origins[keep:], strict=True
            )
        ]
        commit = SessionCommit(
            work.state(),
            keep,
            rows,
            list(state.log),
            None if state.trace is None else state.trace.to_dict(),
            work.turns if state.trace is not None else None,
            work.tool_ids.unsaved(),
        )
        try:
            version = self.sessions.commit(work.session_id, base.version, commit)
        except SessionConflictError:
            self._cache.pop(work.session_id, None)
            self._block_memos.pop(work.session_id, None)
            raise
        work.tool_ids.saved()
        work = work.but(version=version)
        self._cache[work.session_id] = work
        return work

    def _effects(self, session: SessionView) -> None:
        """Run what a committed session still needs done outside its store (the
        turns compaction took out, into long-term memory): now, or, with
        ``effects="background"``, on a worker thread that the Engine's next call
        waits for (:meth:`wait`). The session in hand then says so, and its next
        commit stores it. An effect that failed is run again by the next turn that
        recalls, which raises its error (a turn that committed does not)."""
        effects = pending(self._ctx, session)
        if not effects:
            return
        if self.effects == "inline":
            self._ran(session, effects, self._run_effects(effects))
            return
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="ctxwise-effects")
        self._running = (session, effects, self._worker.submit(self._run_effects, effects))

    def _run_effects(self, effects: Sequence[Remember]) -> BaseException | None:
        try:
            for effect in effects:
                remember(self._ctx, effect)
        except Exception as exc:  # run again, and raised, by the next turn that recalls
            return exc
        return None

    def _ran(
        self, session: SessionView, effects: Sequence[Remember], error: BaseException | None
    ) -> None:
        if error is not None:  # the session says it is not done: run again later
            return
        done = session.but(remembered=max(e.upto for e in effects))
        if self._cache.get(session.session_id) is session:
            self._cache[session.session_id] = done

    def wait(self) -> None:
        """Wait for the effects of the last turn (with ``effects="background"``).
        Every call of this Engine that reads a session waits first; call this
        before reading its ``memory`` store yourself."""
        running, self._running = self._running, None
        if running is not None:
            session, effects, future = running
            self._ran(session, effects, future.result())

    def record(self, session_id: str, new_messages: TurnInput) -> int:
        """Append messages without building a request: the model's final answer (so
        it joins the session), a tool call's result. ``new_messages`` takes what
        :meth:`turn` takes (an SDK response object as it came back, say); facts, rules
        and gates are updated as in :meth:`turn`. Returns the version."""
        messages = tuple(self._checked_input(new_messages))
        return self._update(
            check_session_id(session_id),
            lambda state: self._record.run(state.but(new=messages), self._ctx),
        )

    def _update(self, session_id: str, change: Callable[[TurnState], TurnState]) -> int:
        """Apply ``change`` to the session and commit it without a turn, as a turn
        commits (under the session's lock, built again on a conflict). Returns the
        new version."""
        self._apply(session_id, lambda _: change(TurnState.start(self._load(session_id), ())))
        return self._cache[session_id].version

    def note_fail_open(self, session_id: str, *, route: str, reason: str) -> None:
        """Record that a request for the session went to the provider unchanged
        because ctxwise failed while building it (the proxy's fail-open): the next
        turn's trace lists it in ``fail_open``. ``route``: the API path; ``reason``:
        the error, one line. A session that does not exist yet is created by it."""
        check_session_id(session_id)
        event = FailOpenTrace(route=str(route)[:200], reason=str(reason)[:500])

        def change(state: TurnState) -> TurnState:
            work = state.session
            return state.but(session=work.but(fail_open=(*work.fail_open, event)))

        self._update(session_id, change)

    def _note(
        self,
        session_id: str,
        events: Sequence[ToolEventTrace],
        load: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Record tool events (and tools to load) in the session, for the next trace."""
        if not events and not load:
            return

        def change(state: TurnState) -> TurnState:
            work = state.session
            loaded = [
                *work.loaded_tools,
                *(k for k in dict.fromkeys(load) if k not in work.loaded_tools),
            ]
            return state.but(
                session=work.but(
                    tool_events=(*work.tool_events, *events),
                    loaded_tools=tuple(loaded),
                )
            )

        self._update(session_id, change)
