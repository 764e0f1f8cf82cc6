"""What every step of a turn may use: the Engine's configuration and the objects
built from it, in one frozen value the steps read and never change."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from ctxwise.config import BUILTIN_SOURCES, EngineConfig
from ctxwise.embeddings import Embedder, HashingEmbedder
from ctxwise.formats import anthropic, openai
from ctxwise.formats.request import SentCounter
from ctxwise.memory.facts import FactExtractor
from ctxwise.memory.store import Store
from ctxwise.memory_tool import MemoryTool
from ctxwise.messages import Message
from ctxwise.policy import PolicyGate
from ctxwise.prompt_cache import BlockMemo
from ctxwise.routing.decision import RouteDecision
from ctxwise.sources import Source
from ctxwise.summarize import ExtractiveSummarizer, Summarizer, summarize_range
from ctxwise.tokens import TokenCounter, get_counter
from ctxwise.tools.catalog import ToolCatalog
from ctxwise.tools.cursors import ResultStore

__all__ = ["Classifier", "LogReader", "OnceSummarizer", "TurnContext"]

LogReader = Callable[[str, int, int], Sequence[Mapping[str, Any]]]
"""Reads a session's log rows from ``start`` up to ``end`` (``SessionStore.log``)."""


@runtime_checkable
class Classifier(Protocol):
    """What the route step needs of a router: ``route(query) -> RouteDecision``
    (an :class:`~ctxwise.routing.IntentRouter`, a
    :class:`~ctxwise.routing.KeywordClassifier`)."""

    def route(self, query: str) -> RouteDecision: ...


@dataclass(frozen=True, slots=True)
class TurnContext:
    """The Engine's parts, as the steps see them. Build one with :meth:`create`
    (the Engine does); a test builds one from a config and no store at all."""

    config: EngineConfig
    counter: TokenCounter
    sent: SentCounter
    overhead: int
    """A request's own tokens, which a count of each message alone repeats."""
    encode: Callable[[Message], Any]
    summarizer: Summarizer
    gate: PolicyGate
    router: Classifier | None = None
    sources: Mapping[str, Source] = field(default_factory=dict)
    """Every source a route may choose, the built-in ``memory`` among them when
    long-term memory is recalled."""
    routes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    fallback: tuple[str, ...] = ()
    extractor: FactExtractor | None = None
    catalog: ToolCatalog | None = None
    results: ResultStore | None = None
    memory: Store | None = None
    embedder: Embedder = field(default_factory=HashingEmbedder)
    memory_tool: Callable[[str], MemoryTool | None] = lambda _session_id: None
    read_log: LogReader | None = None
    system_file: Callable[[], str] = lambda: ""
    block_memo: Callable[[str], BlockMemo] = lambda _session_id: BlockMemo()
    """A session's :class:`~ctxwise.prompt_cache.BlockMemo` (the Engine keeps one per
    session, so a request's blocks are found by identity; a fresh one is correct, slower)."""
    clock: Callable[[], float] = time.perf_counter

    @classmethod
    def create(
        cls,
        config: EngineConfig | None = None,
        *,
        counter: TokenCounter | None = None,
        summarizer: Summarizer | None = None,
        gate: PolicyGate | None = None,
        router: Classifier | None = None,
        sources: Sequence[Source] = (),
        memory: Store | None = None,
        embedder: Embedder | None = None,
        **parts: Any,
    ) -> TurnContext:
        """A context from ``config`` (the defaults when None) and the parts given;
        what is not given is what the config names or nothing."""
        cfg = config if config is not None else EngineConfig()
        count = counter if counter is not None else get_counter(cfg.counter, model=cfg.model)
        sent = SentCounter(count, cfg.render)
        one = [Message.text_message("user", "x")]
        overhead = 2 * sent.count_messages(one) - sent.count_messages(one * 2)
        named = {s.name: s for s in sources}
        fallback = (
            tuple(cfg.fallback)
            if cfg.fallback is not None
            else (*(n for n in named if n not in BUILTIN_SOURCES), *BUILTIN_SOURCES)
        )
        return cls(
            config=cfg,
            counter=count,
            sent=sent,
            overhead=overhead,
            encode=anthropic.encode_message if cfg.render == "anthropic" else openai.encode_message,
            summarizer=summarizer if summarizer is not None else ExtractiveSummarizer(count),
            gate=gate if gate is not None else PolicyGate([]),
            router=router,
            sources=named,
            routes={label: tuple(chosen) for label, chosen in cfg.routes.items()},
            fallback=fallback,
            memory=memory,
            embedder=embedder if embedder is not None else HashingEmbedder(),
            **parts,
        )

    def but(self, **changes: Any) -> TurnContext:
        return replace(self, **changes)

    def joined(self, counts: Sequence[int]) -> int:
        """The tokens of messages counted one by one, as one request: each count
        carries the counter's per-request overhead once, the request only once."""
        return sum(counts) - self.overhead * (len(counts) - 1) if counts else 0

    def count(self, message: Message) -> int:
        """A message's tokens as the render sends it."""
        return self.sent.count_messages([message])

    def gate_for(self, gate_rules: Sequence[Mapping[str, Any]]) -> PolicyGate:
        """The configured gate plus the rules a session compiled from what was said."""
        if not gate_rules:
            return self.gate
        # the configured rules as they are (a custom PolicyRule has no dict form),
        # then the session's, which are stored as dicts
        stated = PolicyGate.from_dict({"version": 1, "rules": [dict(r) for r in gate_rules]})
        return PolicyGate([*self.gate, *stated])

    def namespace(self, session_id: str) -> tuple[str, ...]:
        """The long-term memory namespace of a session's remembered turns."""
        from ctxwise.memory.store import namespace_part

        return (self.config.memory.namespace, "session", namespace_part(session_id))


class OnceSummarizer:
    """``summarizer``, called at most once for the same request: what it gave is
    given again for equal arguments. An Engine wraps its summarizer in one for each
    turn, so a turn applied again after a version conflict does not pay an LLM
    summarizer twice for the same turns."""

    def __init__(self, summarizer: Summarizer) -> None:
        self.summarizer = summarizer
        self._done: list[tuple[tuple[int, int, str, tuple[Message, ...]], str]] = []

    def summarize(
        self, previous: str, turns: Sequence[Message], budget: int, *, first_index: int = 0
    ) -> str:
        key = (budget, first_index, previous, tuple(turns))
        for done, summary in self._done:
            if done == key:
                return summary
        summary = summarize_range(self.summarizer, previous, turns, budget, first_index=first_index)
        self._done.append((key, summary))
        return summary
