"""The ledger (issue 32): the ``ledger`` step on hand-built states, and
:class:`~ctxwise.ledger.LedgerReader` on a real session: fates, pointers, originals
that are gone, diff and find, and its errors.

The must-show over every shared transcript is tests/test_ledger_replay.py.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise import Engine, EngineConfig, PointerError, UnknownTurnError
from ctxwise.errors import FormatError, UnknownSessionError
from ctxwise.formats import read_transcripts
from ctxwise.ledger import LedgerReader, message_text
from ctxwise.messages import Message, ToolUseBlock
from ctxwise.replay import replay
from ctxwise.sessions import open_session_store
from ctxwise.turn import SessionView
from ctxwise.turn.edit import edit
from ctxwise.turn.ledger import ledger, ranges
from tests.conftest import TAU
from tests.turn._build import assistant, context, session_of, state, user
from tests.turn.test_steps import _long, _through

# ----------------------------------------------------------------- the step


@given(st.sets(st.integers(min_value=0, max_value=200)))
def test_ranges_cover_exactly_the_positions_in_maximal_runs(positions: set[int]) -> None:
    runs = ranges(sorted(positions))
    assert {p for a, b in runs for p in range(a, b)} == positions
    assert all(a < b for a, b in runs)
    # maximal: two runs never touch
    assert all(runs[i][1] < runs[i + 1][0] for i in range(len(runs) - 1))


def test_the_step_records_the_window_as_ranges_and_places_each_summary() -> None:
    ctx = context()
    held = session_of(ctx, user("a"), assistant("b"), user("c"), assistant("d"), user("e"))
    summary = user("Summary of the conversation so far")
    # as after a compaction of positions 0-2 and a later one that left 4 out: the
    # summary stands for 0-2, nothing stands for 4
    session = held.but(
        history=(summary, held.history[3], held.history[4]),
        tokens=(7, *held.tokens[3:]),
        origins=(None, 3, 5),
        log_length=6,
    )
    done = ledger(state(session=session), ctx)
    record = done.ledger
    assert record is not None
    assert record.window == [(3, 4), (5, 6)]
    assert [(s.index, s.first, s.stop, s.tokens) for s in record.summaries] == [(0, 0, 3, 7)]
    assert record.log_length == 6
    assert record.cleared == [] and record.first_change is None


def test_the_step_records_what_a_clear_changed_and_where_the_history_first_differs() -> None:
    ctx = context(budget=4_000, costs={"gate": False}, compaction={"enabled": False})
    from ctxwise.turn.append import append
    from ctxwise.turn.budget import budget
    from ctxwise.turn.route import route
    from ctxwise.turn.tools import tools

    held = session_of(ctx, *_long(12))
    s = _through(state(user("and now?"), session=held), ctx, append, route, tools, budget)
    done = ledger(edit(s, ctx), ctx)
    assert done.cleared is not None and done.ledger is not None
    cleared = {p for a, b in done.ledger.cleared for p in range(a, b)}
    # exactly the messages whose content the clear replaced, by their log position
    changed = {
        o
        for o, before, after in zip(
            done.session.origins, s.session.history, done.session.history, strict=True
        )
        if before != after
    }
    assert cleared == changed and cleared
    assert done.ledger.first_change == done.changed_from
    assert done.ledger.window == [(0, done.session.log_length)]


def test_a_summary_at_the_end_stands_for_the_rest_of_the_log() -> None:
    ctx = context()
    session = SessionView("s", 1, history=(user("s"),), tokens=(3,), origins=(None,), log_length=4)
    record = ledger(state(session=session), ctx).ledger
    assert record is not None and record.window == []
    assert [(s.first, s.stop) for s in record.summaries] == [(0, 4)]


# ----------------------------------------------------------------- the reader


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Path]]:
    """A tau-bench trajectory replayed into a real SQLite store at a budget that
    clears and compacts it, the edit gate off."""
    if not TAU.is_file():
        pytest.skip(f"shared data not found at {TAU}")
    path = tmp_path_factory.mktemp("ledger") / "ledger.db"
    cfg = EngineConfig(store=f"sqlite:///{path}", budget=5_000, costs={"gate": False})
    with Engine(cfg) as engine:
        report = replay(read_transcripts(TAU)[3], budget=5_000, engine=engine, repair=True)
        assert report.compactions and report.clears
        yield engine, path


def test_every_fate_of_a_replayed_trajectory_has_its_reason_and_pointer(
    replayed: tuple[Engine, Path],
) -> None:
    engine, _ = replayed
    reader = LedgerReader.for_engine(engine, "replay")
    seen: set[str] = set()
    for turn in range(1, reader.turns + 1):
        for e in reader.ledger(turn).entries:
            seen.add(e.fate)
            assert e.reason
            if e.kind == "message":
                assert e.pointer == f"log:{e.position}"
    assert {"sent", "cleared", "summarized"} <= seen


def test_the_diff_names_what_entered_left_and_was_cleared(
    replayed: tuple[Engine, Path],
) -> None:
    engine, _ = replayed
    reader = LedgerReader.for_engine(engine, "replay")
    compacting = next(t.turn for t in reader.traces if t.compacted is not None)
    clearing = next(t.turn for t in reader.traces if t.cleared is not None)
    d = reader.ledger(compacting).diff
    assert d.before == compacting - 1 and d.left
    assert d.first_change == 0  # a compaction rewrites the history from its start
    before = reader.ledger(compacting - 1)
    after = reader.ledger(compacting)
    was = {e.position for e in before.messages if e.fate in ("sent", "cleared", "truncated")}
    now = {e.position for e in after.messages if e.fate in ("sent", "cleared", "truncated")}
    assert set(d.left) == was - now and set(d.entered) == now - was
    c = reader.diff(clearing - 1, clearing)
    assert c.cleared and c.first_change is not None
    # any two turns: the first differs from the last from its compaction on
    assert reader.diff(1, reader.turns).left


def test_find_says_where_a_text_is_now(replayed: tuple[Engine, Path]) -> None:
    engine, _ = replayed
    reader = LedgerReader.for_engine(engine, "replay")
    latest = reader.ledger()
    out = next(e for e in latest.messages if e.fate in ("summarized", "recalled"))
    assert out.position is not None
    text = reader.log[out.position].text or message_text(reader.log[out.position])
    needle = text.strip().splitlines()[0][:40]
    hits = reader.find(needle.upper())  # case-insensitive
    assert any(h.entry.position == out.position and h.entry.into for h in hits)
    assert all(needle.casefold() in h.snippet.casefold() for h in hits)
    assert reader.find("no such text anywhere, surely 7f3a") == []
    with pytest.raises(PointerError):
        reader.find("   ")


def test_pointers_that_point_at_nothing_are_gone_not_errors(
    replayed: tuple[Engine, Path],
) -> None:
    engine, _ = replayed
    reader = LedgerReader.for_engine(engine, "replay")
    assert reader.original(f"log:{len(reader.log)}").gone
    assert reader.original("summary:1").gone == "turn 1 did not compact"
    assert reader.original(f"summary:{reader.turns + 5}").gone
    assert reader.original("result:r0-none").gone
    recalled = [ref for t in reader.traces for s in t.sections for ref in s.refs]
    assert recalled, "the replay recalls compacted turns"
    ref = recalled[-1]
    assert reader.original(ref).text
    ns = engine._namespace("replay")
    assert engine.memory is not None
    assert engine.memory.delete(ns, [ref.split(":", 1)[1]]) == 1
    again = LedgerReader.for_engine(engine, "replay")
    gone = again.original(ref)
    assert gone.text is None and gone.gone == "deleted from the memory store"
    # the ledger that names it still reads
    assert again.ledger().entries


@pytest.mark.parametrize(
    "pointer", ["", "log", "log:", "log:x", "log:-1", "summary:two", "disk:/etc/passwd"]
)
def test_a_pointer_that_does_not_parse_is_a_pointer_error(
    replayed: tuple[Engine, Path], pointer: str
) -> None:
    engine, _ = replayed
    with pytest.raises(PointerError):
        LedgerReader.for_engine(engine, "replay").original(pointer)


def test_unknown_sessions_and_turns_are_usage_errors(replayed: tuple[Engine, Path]) -> None:
    engine, _ = replayed
    with pytest.raises(UnknownSessionError):
        LedgerReader.for_engine(engine, "nobody")
    reader = LedgerReader.for_engine(engine, "replay")
    for turn in (0, reader.turns + 1, -1):
        with pytest.raises(UnknownTurnError) as err:
            reader.ledger(turn)
        assert err.value.turns == reader.turns
    with pytest.raises(UnknownTurnError):
        reader.diff(1, reader.turns + 1)


def test_a_trace_from_a_newer_ctxwise_is_refused_with_its_version(
    replayed: tuple[Engine, Path], tmp_path: Path
) -> None:
    _, path = replayed
    copy = tmp_path / "newer.db"
    with sqlite3.connect(path) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    with sqlite3.connect(copy) as db:
        db.execute("UPDATE ctxwise_session_turns SET trace = json_set(trace, '$.format', 2)")
    sessions = open_session_store(f"sqlite:///{copy}")
    try:
        with pytest.raises(FormatError) as err:
            LedgerReader(sessions, "replay")
        assert "format 2" in str(err.value)
    finally:
        sessions.close()


def test_a_session_written_before_the_ledger_reads_with_no_ledger(tmp_path: Path) -> None:
    """Turns whose trace has no ledger record (the step removed, or an older
    ctxwise) are refused by turn, naming it, not misread."""
    with Engine(EngineConfig(store=f"sqlite:///{tmp_path / 'old.db'}")) as engine:
        engine.steps.remove("ledger")
        engine.turn("old", [user("hello")])
        reader = LedgerReader.for_engine(engine, "old")
        assert reader.trace(1).ledger is None
        with pytest.raises(UnknownTurnError) as err:
            reader.ledger(1)
        assert "no ledger" in str(err.value)


def test_a_stored_result_is_truncated_and_its_pointer_opens_the_whole_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool result stored behind a cursor (``tool_results.store_over``) is
    ``truncated`` in the ledger, its pointer opening the whole result while the store
    holds it; a session id that needs escaping in a namespace still resolves."""
    monkeypatch.setenv("CTXWISE_CURSOR_KEY", "a-key-of-at-least-16-bytes")
    cfg = EngineConfig.model_validate(
        {
            "store": f"sqlite:///{tmp_path / 'results.db'}",
            "tool_results": {"store_over": 50, "page_size": 5},
        }
    )
    sid = "shop/ada%1"
    orders = [{"order": 4400 + i, "status": "shipped"} for i in range(40)]
    with Engine(cfg) as engine:
        engine.turn(sid, [user("list my orders")])
        call = ToolUseBlock("t1", "list_orders", {})
        block = engine.tool_result(sid, call, orders)
        engine.turn(sid, [Message("assistant", (call,)), Message("user", (block,))])
        reader = LedgerReader.for_engine(engine, sid)
        (entry,) = [
            e for e in reader.ledger().messages if e.tools == ("list_orders",) and e.role == "user"
        ]
        assert entry.fate == "truncated" and entry.pointer is not None
        assert entry.pointer.startswith("result:")
        assert entry.tokens_before > entry.tokens_after
        whole = reader.original(entry.pointer).text
        assert whole is not None and '"order": 4439' in whole
        assert engine.results is not None
        assert engine.results.discard(entry.pointer.split(":", 1)[1], session_id=sid)
        gone = LedgerReader.for_engine(engine, sid).original(entry.pointer)
        assert gone.text is None and gone.gone == "deleted from the memory store"
