"""What a turn reads and writes does not grow with the session (issue 33).

A turn that does not compact must do no work proportional to the session's whole
log: it writes the rows it adds (not every tool id the session used), reads no log
row, and asks the memory store once per query and memory state (a tool result's
turn routes the same user message as the turn before it). A compaction reads the
span of the log it remembers, not the log. These tests count the work, never time
it (``benchmarks/bench_engine.py`` times it: the long-session rows).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from ctxwise._session_state import ToolIds
from ctxwise.config import EngineConfig
from ctxwise.engine import Engine, TurnResult
from ctxwise.errors import PairingError, UsageError
from ctxwise.memory.source import MemorySource
from ctxwise.memory.store import InMemoryStore, MemoryItem
from ctxwise.messages import Message, ToolResultBlock, ToolUseBlock
from ctxwise.sessions import (
    InMemorySessionStore,
    SessionCommit,
    SessionSnapshot,
    SessionStore,
    SQLiteSessionStore,
)
from ctxwise.sessions.store import dumps

USER = Message.text_message
WORDS = ("order", "refund", "parcel", "carrier", "invoice", "address", "ledger", "tracking")


class RecordingStore(SessionStore):
    """A session store that keeps what each commit wrote and each log read asked."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        self.commits: list[SessionCommit] = []
        self.log_reads: list[tuple[int, int | None, int]] = []

    def version(self, session_id: str) -> int:
        return self.inner.version(session_id)

    def load(self, session_id: str) -> SessionSnapshot:
        return self.inner.load(session_id)

    def commit(self, session_id: str, expected_version: int, change: SessionCommit) -> int:
        version = self.inner.commit(session_id, expected_version, change)
        self.commits.append(change)
        return version

    def traces(self, session_id: str) -> list[dict[str, Any]]:
        return self.inner.traces(session_id)

    def log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        rows = self.inner.log(session_id, start, stop)
        self.log_reads.append((start, stop, len(rows)))
        return rows

    def sessions(self) -> list[str]:
        return self.inner.sessions()

    def close(self) -> None:
        self.inner.close()


class CountingMemory(InMemoryStore):
    """The in-memory long-term store, counting its searches."""

    def __init__(self) -> None:
        super().__init__()
        self.searches = 0

    def lexical_search(
        self,
        namespace: Sequence[str],
        query: str,
        k: int,
        filters: Mapping[str, Any] | None = None,
    ) -> list[tuple[MemoryItem, float]]:
        self.searches += 1
        return super().lexical_search(namespace, query, k, filters)


def agent_loop(rounds: int, calls: int = 3, size: int = 600) -> Iterator[list[Message]]:
    """An agent's turns, as ``Engine.turn`` takes them: a user question, then each
    tool call with its result, then the answer with the next question. Every call
    has a new id; results are ``size`` characters of words that vary by call."""
    yield [USER("user", f"Question 0: where is order 4400 and its refund? {WORDS[0]}")]
    for r in range(rounds):
        for j in range(calls):
            n = r * calls + j
            call = ToolUseBlock(f"call-{r}-{j}", "lookup", {"order": 4400 + n})
            text = " ".join(WORDS[(n * 7 + k) % len(WORDS)] + str(k % 13) for k in range(size // 9))
            yield [
                Message("assistant", (call,)),
                Message("user", (ToolResultBlock(call.id, text),)),
            ]
        ask = f"Question {r + 1}: and order {4401 + r}, was the {WORDS[r % len(WORDS)]} sent?"
        yield [USER("assistant", f"Answer {r}: order {4400 + r} is on its way."), USER("user", ask)]


def _engine(sessions: SessionStore, budget: int, memory: InMemoryStore | None = None) -> Engine:
    config = EngineConfig(store="memory", budget=budget, system="You are the support agent.")
    return Engine(
        config, sessions=sessions, memory=memory if memory is not None else InMemoryStore()
    )


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RecordingStore]:
    inner = InMemorySessionStore() if request.param == "memory" else None
    recording = RecordingStore(inner or SQLiteSessionStore(tmp_path / "s.db"))
    yield recording
    recording.close()


def test_a_turn_writes_what_it_adds_not_the_session(store: RecordingStore) -> None:
    with _engine(store, budget=1_000_000) as engine:  # nothing is edited
        turns = list(agent_loop(40))
        for new in turns:
            engine.turn("s", new)
    assert len(store.commits) == len(turns)
    history = 0
    for new, change in zip(turns, store.commits, strict=True):
        # the history rows, log rows and tool ids of this turn's messages, no more
        assert (change.keep, len(change.history), len(change.log)) == (history, len(new), len(new))
        assert list(change.tool_ids) == [b.id for m in new for b in m.tool_uses]
        history += len(new)
    # the state row holds no list that grows with the turns: it had every tool id
    first, last = store.commits[10].state, store.commits[-1].state
    assert "tool_ids" not in last
    for key, value in last.items():
        if isinstance(value, list | dict):
            assert len(value) == len(first[key]), key
    assert len(dumps(dict(last))) - len(dumps(dict(first))) <= 4  # a counter's digits
    assert store.load("s").tool_ids == {b.id for new in turns for m in new for b in m.tool_uses}


def test_only_a_compaction_reads_the_log_and_only_what_it_remembers(
    store: RecordingStore,
) -> None:
    compactions = 0
    with _engine(store, budget=3_000) as engine:
        for new in agent_loop(60):
            reads = len(store.log_reads)
            result = engine.turn("s", new)
            engine.wait()  # the compaction's effect remembers after the commit
            if result.trace.compacted is None:
                assert len(store.log_reads) == reads  # no log row is read
            else:
                compactions += 1
        # the session in hand: its store holds it from the session's next commit
        remembered = engine._load("s").remembered
    assert compactions >= 3
    # each log row read once, by the compaction that remembered it: the whole log was
    # read on every compaction, so the rows read grew with the square of its length
    spans = [(start, stop) for start, stop, _ in store.log_reads]
    assert spans and spans[0][0] == 0 and spans[-1][1] == remembered
    assert all(stop == start for (_, stop), (start, _) in pairwise(spans))
    assert sum(n for _, _, n in store.log_reads) == remembered


def test_recall_searches_once_per_query_and_memory(tmp_path: Path) -> None:
    memory = CountingMemory()
    store = RecordingStore(InMemorySessionStore())
    searched: list[tuple[int, bool, bool]] = []
    with _engine(store, budget=3_000, memory=memory) as engine:
        for new in agent_loop(60):
            before = memory.searches
            result = engine.turn("s", new)
            asked = any(m.role == "user" and m.text.strip() for m in new)
            searched.append((memory.searches - before, asked, result.trace.compacted is not None))
            engine.wait()
    first = next(i for i, (n, _, _) in enumerate(searched) if n)  # once memory holds turns
    later = searched[first:]
    assert later and sum(n for n, _, _ in later) < len(later) // 2
    for (n, asked, compacted), (_, _, before) in zip(later[1:], later, strict=False):
        # a search only for a new question, a live history that changed (compacted)
        # or a memory that changed (a compaction's turns are remembered after its
        # commit: the turn after it recalls them); one search each
        assert n <= 1
        assert n == 0 or asked or compacted or before


def _without_memo(engine: Engine) -> Engine:
    """``engine`` recalling anew on every turn, as before the memo."""
    source = engine._ctx.sources["memory"]
    assert isinstance(source, MemorySource)
    sections = source.sections

    def fresh(query: str, state: Any) -> Any:
        source.forget(state["session_id"])
        return sections(query, state)

    source.sections = fresh  # type: ignore[method-assign]
    return engine


def test_the_recall_memo_changes_no_request() -> None:
    with (
        _engine(InMemorySessionStore(), budget=3_000) as engine,
        _without_memo(_engine(InMemorySessionStore(), budget=3_000)) as plain,
    ):
        recalled = 0
        for new in agent_loop(60):
            a: TurnResult = engine.turn("s", new)
            b: TurnResult = plain.turn("s", new)
            assert a.request == b.request
            recalled += any(s.name == "recalled" for s in a.trace.sections)
    assert recalled >= 10  # the memo was put to work


def test_a_failed_turn_leaves_no_tool_id_behind() -> None:
    call = ToolUseBlock("t1", "lookup", {"order": 1})
    with _engine(InMemorySessionStore(), budget=100_000) as engine:
        engine.turn("s", [USER("user", "where is order 1?")])
        with pytest.raises(UsageError, match="awaiting their results"):
            engine.turn("s", [Message("assistant", (call,))])  # appended, never committed
        # the id the failed turn held is free; then used, it is refused
        engine.turn(
            "s", [Message("assistant", (call,)), Message("user", (ToolResultBlock("t1", "ok"),))]
        )
        with pytest.raises(PairingError, match="id used before"):
            engine.turn(
                "s",
                [Message("assistant", (call,)), Message("user", (ToolResultBlock("t1", "ok"),))],
            )
        assert engine.sessions.load("s").tool_ids == {"t1"}


def test_ids_a_state_row_held_move_to_the_store_on_the_next_commit(tmp_path: Path) -> None:
    # a session written before the store kept tool ids apart: the ids are in the
    # state row, the file has no tool id table (its migration not yet run)
    path = tmp_path / "old.db"
    with Engine(EngineConfig(store=f"sqlite:///{path}", budget=100_000)) as engine:
        for new in agent_loop(1, calls=2):
            engine.turn("s", new)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DROP TABLE ctxwise_session_tool_ids")
        conn.execute("DELETE FROM ctxwise_session_migrations WHERE name = '002_session_tool_ids'")
        conn.execute(
            "UPDATE ctxwise_sessions SET state = json_set(state, '$.tool_ids', "
            'json(\'["call-0-0", "call-0-1"]\'))'
        )
    conn.close()
    reused = ToolUseBlock("call-0-1", "lookup", {})
    with Engine(EngineConfig(store=f"sqlite:///{path}", budget=100_000)) as engine:
        with pytest.raises(PairingError, match="id used before"):
            engine.turn(
                "s",
                [
                    Message("assistant", (reused,)),
                    Message("user", (ToolResultBlock("call-0-1", "x"),)),
                ],
            )
        fresh = ToolUseBlock("call-1-0", "lookup", {})
        engine.turn(
            "s",
            [Message("assistant", (fresh,)), Message("user", (ToolResultBlock("call-1-0", "y"),))],
        )
        snap = engine.sessions.load("s")
    assert "tool_ids" not in snap.state
    assert snap.tool_ids == {"call-0-0", "call-0-1", "call-1-0"}


def test_tool_id_copies_share_until_one_appends_after_another() -> None:
    base = ToolIds(["a", "b"], ["c"])
    assert ("a" in base, "c" in base, "d" in base, len(base)) == (True, True, False, 3)
    assert base.unsaved() == ["c"]
    one, two = base.copy(), base.copy()
    one.add("d")
    one.add("a")  # held: nothing added
    assert ("d" in one, "d" in base, "d" in two) == (True, False, False)
    two.add("e")  # one appended first: two takes its own list
    assert ("e" in two, "e" in one, "d" in two) == (True, False, False)
    assert (one.unsaved(), two.unsaved(), base.unsaved()) == (["c", "d"], ["c", "e"], ["c"])
    one.saved()
    assert (one.unsaved(), base.unsaved()) == ([], ["c"])
    one.add("f")
    assert one.unsaved() == ["f"] and "f" not in base and "f" not in two
