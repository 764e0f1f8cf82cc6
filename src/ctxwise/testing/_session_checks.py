"""The :class:`~ctxwise.sessions.SessionStore` contract, as checks every backend runs."""

from __future__ import annotations

from collections.abc import Callable

from ctxwise.errors import SessionConflictError, UnknownSessionError, UsageError
from ctxwise.sessions.store import HistoryRow, SessionCommit, SessionStore
from ctxwise.testing._conformance import Capability, Check, Settings, overrides, raises

__all__ = ["SESSION_CHECKS", "detect_session_store"]

Make = Callable[[], SessionStore]


def _row(text: str, origin: int | None) -> HistoryRow:
    return HistoryRow({"role": "user", "content": [{"type": "text", "text": text}]}, 3, origin)


def _commit(keep: int, rows: list[HistoryRow], log: list[str], turn: int | None) -> SessionCommit:
    return SessionCommit(
        {"format": 1, "n": len(rows)},
        keep,
        rows,
        [{"role": "user", "content": [{"type": "text", "text": t}]} for t in log],
        {"turn": turn} if turn is not None else None,
        turn,
    )


def _texts(rows: list[dict[str, object]]) -> list[object]:
    return [m["content"][0]["text"] for m in rows]  # type: ignore[index]


def a_new_session_is_empty(make: Make, s: Settings) -> None:
    store = make()
    assert store.version("nobody") == 0
    snap = store.load("nobody")
    assert (snap.version, snap.history, snap.log_length, dict(snap.state)) == (0, (), 0, {})
    raises(UnknownSessionError, lambda: store.require("nobody"), "nobody")
    assert "nobody" not in store.sessions()


def commits_append_rewrite_and_version(make: Make, s: Settings) -> None:
    store = make()
    assert store.commit("s", 0, _commit(0, [_row("a", 0), _row("b", 1)], ["a", "b"], 1)) == 1
    assert store.commit("s", 1, _commit(2, [_row("c", 2)], ["c"], 2)) == 2
    snap = store.load("s")
    assert [r.message["content"][0]["text"] for r in snap.history] == ["a", "b", "c"]
    assert [r.origin for r in snap.history] == [0, 1, 2] and snap.log_length == 3
    # a compaction rewrites from position 0: a summary (no origin) and the tail
    assert store.commit("s", 2, _commit(0, [_row("summary", None), _row("c", 2)], [], 3)) == 3
    snap = store.load("s")
    assert snap.version == 3 and [r.origin for r in snap.history] == [None, 2]
    assert _texts(store.log("s")) == ["a", "b", "c"]
    assert store.traces("s") == [{"turn": 1}, {"turn": 2}, {"turn": 3}]
    assert store.sessions() == ["s"] and snap.state == {"format": 1, "n": 2}
    assert store.require("s") == 3


def a_stale_commit_writes_nothing(make: Make, s: Settings) -> None:
    store = make()
    store.commit("s", 0, _commit(0, [_row("a", 0)], ["a"], 1))
    err = raises(SessionConflictError, lambda: store.commit("s", 0, _commit(0, [], ["x"], 1)))
    assert isinstance(err, SessionConflictError) and (err.expected, err.found) == (0, 1)
    snap = store.load("s")
    assert snap.version == 1 and [r.message["content"][0]["text"] for r in snap.history] == ["a"]
    assert len(store.log("s")) == 1 and len(store.traces("s")) == 1


def text_survives_exactly(make: Make, s: Settings) -> None:
    store = make()
    odd = "Café naïve 東京 \x00 nul, emoji 🦀, quotes \" ' and \\ backslash"
    store.commit("s/1", 0, _commit(0, [_row(odd, 0)], [odd], 1))
    assert store.load("s/1").history[0].message["content"][0]["text"] == odd
    assert _texts(store.log("s/1")) == [odd]
    broken = "pasted \ud83d emoji, and 東京"
    store.commit("s/2", 0, _commit(0, [_row(broken, 0)], [broken], 1))
    assert make().load("s/2").history[0].message["content"][0]["text"] == broken
    assert _texts(make().log("s/2")) == [broken]


def tool_ids_are_added_and_kept_once(make: Make, s: Settings) -> None:
    store = make()
    odd = ["toolu_1", "call a/b", "nul \x00 id", "broken \ud83d", "東京"]
    store.commit("s", 0, SessionCommit({"format": 1}, 0, [], [], tool_ids=[*odd, "toolu_1"]))
    raises(  # a stale commit adds none
        SessionConflictError,
        lambda: store.commit("s", 0, SessionCommit({}, 0, [], [], tool_ids=["stale"])),
    )
    store.commit("s", 1, SessionCommit({"format": 1}, 0, [], [], tool_ids=["toolu_1", "t2"]))
    assert make().load("s").tool_ids == frozenset([*odd, "t2"])
    assert store.load("s").state == {"format": 1}
    assert store.load("other").tool_ids == frozenset()


def a_span_of_the_log_is_read_alone(make: Make, s: Settings) -> None:
    store = make()
    store.commit("s", 0, _commit(0, [], ["a", "b", "c", "d"], None))

    def texts(start: int = 0, stop: int | None = None) -> list[object]:
        return _texts(store.log("s", start, stop))

    assert texts() == texts(0, None) == ["a", "b", "c", "d"]
    assert (texts(1, 3), texts(3), texts(2, 2), texts(3, 1), texts(9)) == (
        ["b", "c"], ["d"], [], [], [],
    )  # fmt: skip
    assert texts(0, 2**70) == texts() and texts(2**70) == []  # past any integer SQL holds


def bad_calls_are_usage_errors(make: Make, s: Settings) -> None:
    store = make()
    for bad in ("", "   ", "x" * 201, "a\x00b"):
        raises(UsageError, lambda bad=bad: store.load(bad))  # type: ignore[misc]
    raises(UsageError, lambda: store.commit("bad\udc00", 0, _commit(0, [], ["x"], 1)), "surrogate")
    store.commit("s", 0, _commit(0, [], ["a"], None))
    raises(
        UsageError,
        lambda: store.commit("s", 1, SessionCommit({}, 0, [], [], tool_ids="t3")),
        "tool_ids are a list of strings",
    )
    for start, stop in ((-1, None), (0, -2), (True, None), (0, 1.5), ("1", None)):
        raises(UsageError, lambda a=start, b=stop: store.log("s", a, b), "non-negative integer")  # type: ignore[misc]
    assert store.version("s") == 1


def two_handles_on_one_database_see_each_other(make: Make, s: Settings) -> None:
    a, b = make(), make()
    a.commit("s", 0, _commit(0, [_row("a", 0)], ["a"], 1))
    assert b.version("s") == 1
    raises(SessionConflictError, lambda: b.commit("s", 0, _commit(0, [_row("b", 0)], ["b"], 1)))
    b.commit("s", 1, _commit(1, [_row("b", 1)], ["b"], 2))
    assert _texts(a.log("s")) == ["a", "b"]


def _check(fn: Callable[[Make, Settings], None], capability: Capability) -> Check[SessionStore]:
    return Check(fn.__name__, capability, fn, (fn.__doc__ or "").strip())


SESSION_CHECKS: tuple[Check[SessionStore], ...] = (
    *(
        _check(fn, Capability.CORE)
        for fn in (
            a_new_session_is_empty,
            commits_append_rewrite_and_version,
            a_stale_commit_writes_nothing,
            text_survives_exactly,
            tool_ids_are_added_and_kept_once,
            a_span_of_the_log_is_read_alone,
        )
    ),
    _check(bad_calls_are_usage_errors, Capability.VALIDATION),
    _check(two_handles_on_one_database_see_each_other, Capability.HANDLES),
)
"""Every check of the session store contract, in the order they run."""


def detect_session_store(store: SessionStore) -> frozenset[Capability]:
    """Core, validation and handles for every session store (close is not checked:
    the base's does nothing, and an in-memory store has nothing to release)."""
    found = {Capability.CORE, Capability.VALIDATION, Capability.HANDLES}
    if overrides(store, SessionStore, "close"):
        found.add(Capability.CLOSE)
    return frozenset(found)
