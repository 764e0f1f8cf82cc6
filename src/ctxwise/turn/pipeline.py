"""The ``Step`` protocol and :class:`Steps`, the ordered list a turn runs.

A step is anything with a ``name`` that takes the turn's state and context and
returns the next state: ``step(state, ctx) -> TurnState``. :class:`Steps` runs
them in order, times each (the trace's ``timings_ms``), and turns an exception
that is not one of ctxwise's own into a :class:`~ctxwise.errors.StepError` naming
the step. Nothing a step does is committed until every step has run.

Users change the list as they would a middleware stack: :meth:`Steps.insert`
(before or after a named step), :meth:`Steps.replace`, :meth:`Steps.wrap` (a
function that takes a step and returns one that calls it), :meth:`Steps.remove`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ctxwise.errors import CtxwiseError, StepError, UsageError
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import TurnState

__all__ = ["FunctionStep", "Step", "Steps", "step"]


@runtime_checkable
class Step(Protocol):
    """One stage of a turn: reads the state, returns the next one."""

    @property
    def name(self) -> str: ...

    def __call__(self, state: TurnState, ctx: TurnContext) -> TurnState: ...


@dataclass(frozen=True, slots=True)
class FunctionStep:
    """A step made of a function (see :func:`step`)."""

    name: str
    run: Callable[[TurnState, TurnContext], TurnState]

    def __call__(self, state: TurnState, ctx: TurnContext) -> TurnState:
        return self.run(state, ctx)


def step(name: str) -> Callable[[Callable[[TurnState, TurnContext], TurnState]], FunctionStep]:
    """Make a function a step named ``name``::

    @step("audit")
    def audit(state, ctx):
        return state
    """
    _check_name(name)

    def make(fn: Callable[[TurnState, TurnContext], TurnState]) -> FunctionStep:
        return FunctionStep(name, fn)

    return make


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise UsageError(f"a step needs a name (a non-empty string), got {name!r}")
    return name


def _checked(item: object) -> Step:
    if not isinstance(item, Step) or not callable(item):
        raise UsageError(
            f"{item!r} is not a step: it needs a name and a __call__(state, ctx) "
            "that returns the next TurnState (ctxwise.turn.step makes one of a function)"
        )
    _check_name(item.name)
    return item


class Steps:
    """The steps of a turn, in order; names are unique."""

    def __init__(self, steps: Iterable[Step] = ()) -> None:
        self._steps: list[Step] = []
        for s in steps:
            self._add(len(self._steps), s)

    def __iter__(self) -> Iterator[Step]:
        return iter(list(self._steps))

    def __len__(self) -> int:
        return len(self._steps)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self._steps]

    def __repr__(self) -> str:
        return f"Steps({' -> '.join(self.names)})"

    def _index(self, name: str) -> int:
        for i, s in enumerate(self._steps):
            if s.name == name:
                return i
        raise UsageError(f"no step named {name!r} (the steps: {', '.join(self.names)})")

    def _add(self, at: int, item: object) -> None:
        checked = _checked(item)
        if checked.name in self.names:
            raise UsageError(f"there is already a step named {checked.name!r}")
        self._steps.insert(at, checked)

    def insert(self, item: Step, *, before: str | None = None, after: str | None = None) -> None:
        """Insert ``item`` before or after the step named (exactly one of them)."""
        if (before is None) == (after is None):
            raise UsageError("insert a step with exactly one of before= or after=")
        at = self._index(before) if before is not None else self._index(str(after)) + 1
        self._add(at, item)

    def append(self, item: Step) -> None:
        self._add(len(self._steps), item)

    def replace(self, name: str, item: Step) -> None:
        """Put ``item`` where the step ``name`` was."""
        at = self._index(name)
        old = self._steps.pop(at)
        try:
            self._add(at, item)
        except UsageError:
            self._steps.insert(at, old)
            raise

    def remove(self, name: str) -> Step:
        return self._steps.pop(self._index(name))

    def wrap(self, name: str, wrapper: Callable[[Step], Step]) -> None:
        """Replace the step ``name`` by ``wrapper(step)``, which keeps its name."""
        inner = self._steps[self._index(name)]
        outer = _checked(wrapper(inner))
        if outer.name != inner.name:
            outer = FunctionStep(inner.name, outer)
        self._steps[self._index(name)] = outer

    def run(self, state: TurnState, ctx: TurnContext) -> TurnState:
        """Run every step in order, each timed into ``state.timings``."""
        clock = ctx.clock
        for s in self._steps:
            t = clock()
            try:
                out = s(state, ctx)
            except CtxwiseError:
                raise
            except Exception as exc:
                raise StepError(s.name, f"{type(exc).__name__}: {exc}") from exc
            if not isinstance(out, TurnState):
                raise StepError(s.name, f"returned {type(out).__name__}, not a TurnState")
            state = out.timed(s.name, (clock() - t) * 1000)
        return state
