"""Sources: where sections come from.

A source has a name, gives sections for a query and the turn's state, and
estimates what it would cost (in tokens) before it is called. The orchestrator
calls only the sources a route chooses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ctxwise.assembly import Section
from ctxwise.errors import UsageError
from ctxwise.tokens import CharCounter, TokenCounter

__all__ = ["Source", "StaticSource"]


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
