"""The conformance suites as pytest test classes (extra ``testing``: pytest).

Subclass one in a test module and give it a fixture that opens handles on one fresh
backing database per test::

    import pytest
    from ctxwise.testing.suite import StoreConformance

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def make_store(self, tmp_path):
            yield lambda: MyStore(tmp_path / "data")

Every check is one test, named after it; a check whose capability the backend
lacks (or that ``skip`` names) is skipped, saying why. ``settings`` sets the vector
dimension the checks write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from ctxwise.errors import MissingDependencyError
from ctxwise.memory.store import Store
from ctxwise.sessions.store import SessionStore
from ctxwise.testing._conformance import Check, Settings, skip_reason
from ctxwise.testing._session_checks import SESSION_CHECKS, detect_session_store
from ctxwise.testing._store_checks import STORE_CHECKS, detect_store

try:
    import pytest
except ImportError as e:  # pragma: no cover - exercised without the extra
    raise MissingDependencyError("pytest", "testing", "the pytest conformance classes") from e

__all__ = ["SessionStoreConformance", "StoreConformance"]


class StoreConformance:
    """The memory store contract; needs a ``make_store`` fixture (a function that
    opens another handle on the test's database)."""

    skip: ClassVar[frozenset[str]] = frozenset()
    """Capability values or check names to skip (``{"ranking"}``)."""
    settings: ClassVar[Settings] = Settings()

    @pytest.mark.parametrize("check", STORE_CHECKS, ids=lambda c: c.name)
    def test_store_conforms(self, check: Check[Store], make_store: Callable[[], Store]) -> None:
        reason = skip_reason(check, detect_store(make_store()), self.skip)
        if reason is not None:
            pytest.skip(reason)
        check.run(make_store, self.settings)


class SessionStoreConformance:
    """The session store contract; needs a ``make_sessions`` fixture (a function
    that opens another handle on the test's database)."""

    skip: ClassVar[frozenset[str]] = frozenset()
    settings: ClassVar[Settings] = Settings()

    @pytest.mark.parametrize("check", SESSION_CHECKS, ids=lambda c: c.name)
    def test_session_store_conforms(
        self, check: Check[SessionStore], make_sessions: Callable[[], SessionStore]
    ) -> None:
        reason = skip_reason(check, detect_session_store(make_sessions()), self.skip)
        if reason is not None:
            pytest.skip(reason)
        check.run(make_sessions, self.settings)
