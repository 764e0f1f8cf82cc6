"""A session's turns in long-term memory, and the ``memory`` source that recalls them.

:class:`SessionMemory` keeps each turn of a session's log (one item per message,
a tool call with the results that answer it being one, as
:func:`~ctxwise.memory.tiered.turn_items` makes them), verbatim, under the
session's namespace; an item's id is its log position, so remembering a span
again changes nothing. The Engine remembers the turns a compaction took out of
the live history once the compaction is committed (an effect of the turn);
:class:`MemorySource` recalls them for the routed query.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctxwise.assembly import Section
from ctxwise.embeddings import Embedder
from ctxwise.errors import NamespaceNotFoundError
from ctxwise.memory.longterm import LongTermMemory
from ctxwise.memory.store import NewItem, Store
from ctxwise.memory.tiered import turn_items
from ctxwise.messages import Message

__all__ = ["MemorySource", "SessionMemory"]

_RECALLS_KEPT = 64
"""Recalls a :class:`MemorySource` keeps for reuse (one per session in use)."""


class SessionMemory:
    """The long-term memory of the sessions of one Engine: where each session's
    turns are kept (``namespace(session_id)``), with which embedder and preset."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        namespace: Callable[[str], tuple[str, ...]],
        *,
        preset: str = "neutral",
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.namespace = namespace
        self.preset = preset

    def _memory(self, session_id: str) -> LongTermMemory:
        return LongTermMemory(
            self.store, self.namespace(session_id), self.embedder, preset=self.preset
        )

    def remember(self, session_id: str, messages: Sequence[Message], first: int) -> int:
        """Keep ``messages`` (the log from position ``first``) as items; returns how many."""
        body = [(first + i, m) for i, m in enumerate(messages) if m.role != "system"]
        if not body:
            return 0
        positions = [p for p, _ in body]
        items = []
        for item in turn_items([m for _, m in body]):
            position = positions[item.metadata["position"]]
            meta = {**item.metadata, "position": position}
            items.append(NewItem(item.text, meta, f"p{position}"))  # storable: turn_items
        if items:
            self._memory(session_id).remember_many(items)
        return len(items)

    def recall(self, session_id: str, query: str, k: int, *, before: int) -> list[str]:
        """The texts of the ``k`` turns that best match ``query`` among those before
        log position ``before``."""
        return [text for _, text in self.recall_items(session_id, query, k, before=before)]

    def recall_items(
        self, session_id: str, query: str, k: int, *, before: int
    ) -> list[tuple[str, str]]:
        """:meth:`recall` with each turn's item id (``p`` and its log position)."""
        try:
            hits = self._memory(session_id).recall(query, k=k * 2)
        except NamespaceNotFoundError:
            return []
        return [
            (h.item.id, h.item.text)
            for h in hits
            if int(h.item.metadata.get("position", before)) < before
        ][:k]

    def item_text(self, session_id: str, item_id: str) -> str | None:
        """The text of the item ``item_id`` of the session's memory; ``None`` when it
        is not there (never remembered, or deleted)."""
        found = self.store.get_many(self.namespace(session_id), [item_id])
        return found[0].text if found else None


class MemorySource:
    """The built-in ``memory`` source: turns of this session that compaction took out
    of the live history, recalled by similarity to the routed query, as one
    truncatable ``recalled`` section. The latest recall of each session is kept:
    a turn that asks the same of the same memory (a tool result's turn) reuses it."""

    name = "memory"

    def __init__(self, memory: SessionMemory, *, k: int = 5) -> None:
        self.memory = memory
        self.k = k
        self._kept: dict[str, tuple[tuple[object, ...], tuple[Section, ...]]] = {}

    def sections(self, query: str, state: Mapping[str, Any]) -> Sequence[Section]:
        session_id = state.get("session_id")
        if not query or not isinstance(session_id, str):
            return ()
        before = int(state.get("first_live", 0))
        key = (query, before, int(state.get("remembered", 0)))
        kept = self._kept.get(session_id)
        if kept is not None and kept[0] == key:
            return kept[1]
        items = self.memory.recall_items(session_id, query, self.k, before=before)
        found: tuple[Section, ...] = ()
        if items:
            body = "Recalled from earlier in this session:\n" + "\n\n".join(t for _, t in items)
            refs = tuple(f"memory:{item_id}" for item_id, _ in items)
            found = (Section("recalled", body, 60, truncatable=True, refs=refs),)
        if len(self._kept) >= _RECALLS_KEPT and session_id not in self._kept:
            self._kept.pop(next(iter(self._kept)))
        self._kept[session_id] = (key, found)
        return found

    def cost_estimate(self, query: str, state: Mapping[str, Any]) -> int:
        return sum(len(s.content) // 4 for s in self.sections(query, state))

    def forget(self, session_id: str) -> None:
        """Drop the kept recall of ``session_id`` (its memory changed outside a turn)."""
        self._kept.pop(session_id, None)
