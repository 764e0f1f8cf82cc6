"""The machinery of the conformance suites: checks, capabilities, the report.

A check is a plain function of a *handle factory* (``make()`` opens another handle
on one backing database, fresh for the check) and the suite's settings. It needs
no test runner: :func:`run_checks` runs checks and reports, and
:mod:`ctxwise.testing.suite` runs the same checks as pytest tests.
"""

from __future__ import annotations

import contextlib
import re
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, TypeVar

S = TypeVar("S")


class Capability(StrEnum):
    """What a check exercises. A backend that does not offer one skips its checks:
    detected ones by looking at the class (an overridden method), declared ones by
    the caller's ``skip``."""

    CORE = "core"
    """Writes, reads, namespaces or sessions, versions: every backend."""
    LEXICAL = "lexical"
    """Lexical search."""
    VECTOR = "vector"
    """Vector search by cosine similarity."""
    FILTERS = "filters"
    """Metadata filters compared as JSON values."""
    VALIDATION = "validation"
    """Bad input refused with :class:`~ctxwise.errors.UsageError`, writing nothing."""
    RANKING = "ranking"
    """The same BM25 scores and order as the reference :class:`~ctxwise.memory.InMemoryStore`."""
    HANDLES = "handles"
    """A second handle on the same data sees what the first committed."""
    CLOSE = "close"
    """A closed store refuses every call (detected: ``close`` is overridden)."""
    LOCKS = "locks"
    """Named exclusive locks (:meth:`~ctxwise.memory.Store.exclusive`)."""
    ASYNC = "async"
    """The async twins (``aput_many``, ``alexical_search``, ...) give what their
    sync methods give, and several may run at once (detected: the store's twins
    are coroutine functions, as the base's are)."""


@dataclass(frozen=True, slots=True)
class Settings:
    """What a suite is run with: the vector dimension the backend takes."""

    dim: int = 64


@dataclass(frozen=True, slots=True)
class Check(Generic[S]):
    """One conformance check: ``run(make, settings)`` raises (an ``AssertionError``
    or any other exception) when the backend does not conform."""

    name: str
    capability: Capability
    run: Callable[[Callable[[], S], Settings], None]
    doc: str = ""


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check's outcome: ``passed``, ``failed`` (with ``detail``) or ``skipped``
    (with the reason)."""

    name: str
    capability: Capability
    outcome: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ConformanceReport:
    """Every check's result, for the backend named ``backend``."""

    backend: str
    results: tuple[CheckResult, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> list[CheckResult]:
        return [r for r in self.results if r.outcome == "passed"]

    @property
    def failed(self) -> list[CheckResult]:
        return [r for r in self.results if r.outcome == "failed"]

    @property
    def skipped(self) -> list[CheckResult]:
        return [r for r in self.results if r.outcome == "skipped"]

    @property
    def ok(self) -> bool:
        """No check failed (skipped ones are capabilities the backend lacks)."""
        return not self.failed

    def summary(self) -> str:
        """One line per capability: passed, failed and skipped counts; then each
        failure's first line."""
        lines = [f"{self.backend}: {len(self.passed)} passed, {len(self.failed)} failed, "
                 f"{len(self.skipped)} skipped"]  # fmt: skip
        for capability in Capability:
            mine = [r for r in self.results if r.capability is capability]
            if mine:
                counts = {o: sum(r.outcome == o for r in mine) for o in ("passed", "failed")}
                skipped = len(mine) - sum(counts.values())
                lines.append(
                    f"  {capability.value}: {counts['passed']} passed, {counts['failed']} failed"
                    + (f", {skipped} skipped" if skipped else "")
                )
        lines += [f"  FAILED {r.name}: {r.detail.splitlines()[0]}" for r in self.failed]
        return "\n".join(lines)

    def assert_ok(self) -> None:
        """Raise ``AssertionError`` with the summary when a check failed (for a test)."""
        if not self.ok:
            raise AssertionError(self.summary())


def raises(
    kind: type[BaseException] | tuple[type[BaseException], ...],
    call: Callable[[], object],
    match: str | None = None,
) -> BaseException:
    """The exception ``call()`` raised, which must be a ``kind`` whose message
    matches ``match`` (a regular expression, searched); else ``AssertionError``."""
    try:
        call()
    except kind as exc:
        if match is not None and not re.search(match, str(exc)):
            raise AssertionError(f"{exc!r} does not match {match!r}") from exc
        return exc
    raise AssertionError(f"{call} raised no {kind}")


def close_enough(got: Sequence[float], want: Sequence[float], rel: float, abs_: float) -> bool:
    """Every pair within ``rel`` (relative) or ``abs_`` (absolute) of each other."""
    return len(got) == len(want) and all(
        abs(g - w) <= max(rel * abs(w), abs_) for g, w in zip(got, want, strict=True)
    )


Backend = Callable[[], Any]
"""What the runners take: a callable that makes a fresh, empty backend. It returns
either a store (each call a new, empty one: its handles are that store itself) or a
context manager yielding ``make``, a function that opens handles on one fresh
backing database, cleaned up when the context ends."""


@contextlib.contextmanager
def handles(backend: Backend, kind: type[S]) -> Iterator[Callable[[], S]]:
    """``make`` for one check, from either form of :data:`Backend`."""
    made = backend()
    if isinstance(made, kind):
        try:
            yield lambda: made
        finally:
            closing = getattr(made, "close", None)
            if callable(closing):
                closing()
        return
    if not isinstance(made, AbstractContextManager):
        raise TypeError(
            f"a backend returns a {kind.__name__} or a context manager of a handle factory, "
            f"got {type(made).__name__}"
        )
    with made as make:
        yield make


def skip_reason(
    check: Check[Any], detected: frozenset[Capability], skip: frozenset[str]
) -> str | None:
    """Why ``check`` does not run on this backend, or None."""
    if check.capability.value in skip or check.name in skip:
        return f"{check.capability.value} skipped by the caller"
    if check.capability not in detected:
        return f"the backend does not offer {check.capability.value}"
    return None


def run_checks(
    name: str,
    backend: Backend,
    kind: type[S],
    checks: Sequence[Check[S]],
    detect: Callable[[S], frozenset[Capability]],
    *,
    skip: frozenset[str] = frozenset(),
    settings: Settings = Settings(),
) -> ConformanceReport:
    """Run every check on a fresh backend of its own; a failure is recorded, never
    raised, so the report names every check that fails."""
    results: list[CheckResult] = []
    for check in checks:
        try:
            with handles(backend, kind) as make:
                reason = skip_reason(check, detect(make()), skip)
                if reason is not None:
                    results.append(CheckResult(check.name, check.capability, "skipped", reason))
                    continue
                check.run(make, settings)
        except Exception as exc:  # a non-conformance, reported with its check
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            results.append(CheckResult(check.name, check.capability, "failed", detail))
        else:
            results.append(CheckResult(check.name, check.capability, "passed"))
    return ConformanceReport(name, tuple(results))


def overrides(instance: object, base: type, method: str) -> bool:
    """Whether ``instance``'s class defines ``method`` itself, not as ``base`` does."""
    return getattr(type(instance), method, None) is not getattr(base, method, None)
