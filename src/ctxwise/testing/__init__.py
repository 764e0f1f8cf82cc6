"""Test code for users of ctxwise: the store conformance suites and test doubles.

Run the memory store contract on your own :class:`~ctxwise.memory.Store` (and the
session store contract on a :class:`~ctxwise.sessions.SessionStore`) without a test
runner::

    from ctxwise.testing import validate_store

    report = validate_store(MyStore)   # a fresh, empty store per check
    print(report.summary())
    report.assert_ok()

or as pytest tests, by subclassing :class:`ctxwise.testing.suite.StoreConformance`
(extra ``testing``). A backend is either a callable returning a new, empty store
(each check gets one) or one returning a context manager that yields ``make``, a
function opening handles on one fresh database (so the checks that need two handles
on the same data run). Capabilities the backend's class does not show are skipped
(:class:`Capability`); ``skip`` leaves out others by name.

Beside them: :class:`FakeChatModel` (scripted replies, counted calls, Anthropic and
OpenAI response bodies) and :class:`FakeEmbedder` (deterministic vectors); and in
:mod:`ctxwise.testing.upstream`, a loopback fake of the providers' HTTP APIs
(Anthropic Messages and OpenAI Chat Completions, streamed or not) for testing a
proxy or a client end to end.

Nothing here is imported by ``import ctxwise``; pytest is needed only by
:mod:`ctxwise.testing.suite`.
"""

from __future__ import annotations

from ctxwise.memory.store import Store
from ctxwise.sessions.store import SessionStore
from ctxwise.testing._conformance import (
    Backend,
    Capability,
    Check,
    CheckResult,
    ConformanceReport,
    Settings,
    run_checks,
)
from ctxwise.testing._session_checks import SESSION_CHECKS, detect_session_store
from ctxwise.testing._store_checks import ASYNC_TWINS, STORE_CHECKS, detect_store
from ctxwise.testing.fakes import ChatCall, FakeChatModel, FakeEmbedder

__all__ = [
    "ASYNC_TWINS",
    "SESSION_CHECKS",
    "STORE_CHECKS",
    "Backend",
    "Capability",
    "ChatCall",
    "Check",
    "CheckResult",
    "ConformanceReport",
    "FakeChatModel",
    "FakeEmbedder",
    "Settings",
    "detect_session_store",
    "detect_store",
    "validate_session_store",
    "validate_store",
]


def validate_store(
    backend: Backend,
    *,
    name: str | None = None,
    skip: frozenset[str] | set[str] = frozenset(),
    dim: int = 64,
) -> ConformanceReport:
    """Run every memory store check on ``backend`` (a fresh one per check) and
    report; nothing is raised for a failing check (see
    :meth:`ConformanceReport.assert_ok`). ``dim`` is the vector dimension the checks
    write; ``skip`` names capabilities or checks to leave out."""
    return run_checks(
        name or str(getattr(backend, "__name__", type(backend).__name__)),
        backend,
        Store,  # type: ignore[type-abstract]
        STORE_CHECKS,
        detect_store,
        skip=frozenset(skip),
        settings=Settings(dim=dim),
    )


def validate_session_store(
    backend: Backend,
    *,
    name: str | None = None,
    skip: frozenset[str] | set[str] = frozenset(),
) -> ConformanceReport:
    """Run every session store check on ``backend`` (a fresh one per check) and report."""
    return run_checks(
        name or str(getattr(backend, "__name__", type(backend).__name__)),
        backend,
        SessionStore,  # type: ignore[type-abstract]
        SESSION_CHECKS,
        detect_session_store,
        skip=frozenset(skip),
    )
