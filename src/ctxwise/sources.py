"""Sources: where sections come from.

A source has a name, gives sections for a query and the turn's context, and
estimates what it would cost (in tokens) before it is called. A turn calls only
the sources a route chooses.

The context a source gets is a :class:`SourceContext`: typed fields (the
session, the turn, where the live history starts in the session's log), and,
for a source written against the older ``Mapping`` form, the same fields by key
(``state["session_id"]``). :class:`~ctxwise.orchestrator.Pipeline` passes the
mapping its caller gives.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol, runtime_checkable

from ctxwise.assembly import Section
from ctxwise.errors import UsageError
from ctxwise.tokens import CharCounter, TokenCounter

__all__ = ["Source", "SourceContext", "StaticSource"]


@dataclass(frozen=True, slots=True)
class SourceContext(Mapping[str, Any]):
    """What a source knows of the turn it gives sections to (also readable by key)."""

    session_id: str | None = None
    turn: int = 0
    """The turn being built (1 for a session's first)."""
    first_live: int = 0
    """The first log position the live history holds: what a source that recalls
    the session's earlier turns must come from before."""
    remembered: int = 0
    """How much of the session's log long-term memory holds."""

    def __getitem__(self, key: str) -> Any:
        if key not in _CONTEXT_KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_CONTEXT_KEYS)

    def __len__(self) -> int:
        return len(_CONTEXT_KEYS)


_CONTEXT_KEYS = tuple(f.name for f in fields(SourceContext))


@runtime_checkable
class Source(Protocol):
    """Anything that can contribute sections to a turn."""

    @property
    def name(self) -> str: ...

    def sections(self, query: str, state: Mapping[str, Any]) -> Sequence[Section]: ...

    def cost_estimate(self, query: str, state: Mapping[str, Any]) -> int:
        """Tokens the source's sections would take, without producing them."""
        ...


class StaticSource:
    """A source with fixed text: one section, the same on every turn."""

    def __init__(
        self,
        name: str,
        text: str,
        *,
        priority: float = 0,
        pinned: bool = False,
        truncatable: bool = False,
        stable: bool = False,
        counter: TokenCounter | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise UsageError(f"a source needs a name (a non-empty string), got {name!r}")
        if counter is not None and not all(
            callable(getattr(counter, m, None)) for m in ("count", "count_messages")
        ):
            # a str has .count: counter="char" counted 'char'.count(text), so 0 tokens
            raise UsageError(
                f"source {name!r}: counter must be a TokenCounter, got {counter!r}; "
                "get_counter('char') gives one"
            )
        self._name = name
        self.section = Section(name, text, priority, pinned, truncatable, stable)
        self._counter = counter if counter is not None else CharCounter()
        self._cost = self._counter.count(text)

    @property
    def name(self) -> str:
        return self._name

    def sections(self, query: str, state: Mapping[str, Any]) -> Sequence[Section]:
        return (self.section,)

    def cost_estimate(self, query: str, state: Mapping[str, Any]) -> int:
        return self._cost

    def __repr__(self) -> str:
        return f"StaticSource({self._name!r}, {self._cost} tokens)"
