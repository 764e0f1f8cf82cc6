"""StoreRuns holds a run with the store's public lock, ``Store.exclusive``, and
still holds a run (against this process) over a store object without one."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from ctxwise.errors import RelayError
from ctxwise.memory import InMemoryStore, Store, StoreError
from ctxwise.relay import StoreRuns
from tests.relay.test_store_runs_lock import CHUNKS, relay_job


class _Recording(InMemoryStore):
    """An in-memory store that notes the name of every lock asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def exclusive(self, name: str, *, busy: Any = None) -> contextlib.AbstractContextManager[None]:
        self.names.append(name)
        return super().exclusive(name, busy=busy)


def test_a_run_is_held_with_the_stores_lock() -> None:
    store = _Recording()
    with StoreRuns(store).hold("job", create=True):
        pass
    with StoreRuns(store, prefix=("x",)).hold("job"), StoreRuns(store).hold("other"):
        pass
    assert len(store.names) == 3 and len(set(store.names)) == 3  # one lock per run
    name = store.names[0]
    # whoever holds the store's lock of the run (another process, for a shared
    # database) keeps every relay off it, and is told so
    with store.exclusive(name):
        with pytest.raises(RelayError, match="in use by another process") as info:
            relay_job(StoreRuns(store)).run("job")
        assert info.value.reason == "run"
    with (
        StoreRuns(store).hold("job"),
        pytest.raises(StoreError, match="held by another holder"),
        store.exclusive(name),
    ):
        pytest.fail("the store lent a lock a relay holds")
    result = relay_job(StoreRuns(store)).run("job")
    assert result.done and result.steps == CHUNKS


class _OlderStore:
    """A store object from before ``Store.exclusive``: not a Store subclass, and
    without the method (everything else is an in-memory store's)."""

    def __init__(self) -> None:
        self._inner = InMemoryStore()

    def __getattr__(self, name: str) -> Any:
        if name == "exclusive":
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_store_without_the_lock_is_held_against_this_process() -> None:
    old: Any = _OlderStore()
    assert not hasattr(old, "exclusive") and not isinstance(old, Store)
    runs = StoreRuns(old)
    with runs.hold("job", create=True), pytest.raises(RelayError, match="another relay"):
        relay_job(StoreRuns(old)).run("job")
    result = relay_job(runs).run("job")
    assert result.done and result.steps == CHUNKS
