"""The ledger's must-show (issue 32): on every turn of a replay of every shared Claude
Code session and 20 tau-bench trajectories, every message of the log is in the
ledger exactly once, its fate is what the request really held, and every pointer
resolves to the original.

The truth is taken from the turn itself: a step inserted after ``ledger`` keeps
the history the request was built from (each message with the log position it came
from, ``None`` for a summary). The ledger is read back afterwards from the store
alone (:class:`~ctxwise.ledger.LedgerReader`), as ``ctxwise explain`` and the
inspector read it, and checked against that truth:

- a message the request held verbatim is ``sent`` (or ``truncated``, a result
  trimmed before it was logged) and equals the log's original;
- a message the request held with its tool results replaced is ``cleared``;
- a message the request did not hold is ``summarized`` or ``recalled``, ``into`` a
  summary the request held, and that pointer resolves to the summary's text; none
  is ``dropped`` (every compaction leaves a summary);
- each summary entry stands for exactly the log messages missing before the next
  one the request held.

The configurations make every edit happen: the Claude Code sessions at a budget of
30,000 with the edit gate off (so clears run as soon as the history passes the
trigger), the tau-bench trajectories at 75% of what each one holds (counted by
characters), at least 3,500 (the shortest then fit whole). A trajectory that
outgrows its budget must have compacted, and the longest session must have cleared
and compacted, so a configuration that stopped editing fails rather than passes
with nothing checked.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from ctxwise import Engine, EngineConfig
from ctxwise.formats import read_transcripts
from ctxwise.ledger import LedgerReader, message_text
from ctxwise.messages import Message, Transcript
from ctxwise.replay import replay
from ctxwise.tokens import CharCounter
from ctxwise.trace import LedgerTrace
from ctxwise.turn import TurnContext, TurnState, step
from tests.conftest import TAU, claude_code_files

TAU_TRAJECTORIES = 20


@dataclass(frozen=True)
class Seen:
    """What one turn's request was built from."""

    history: tuple[Message, ...]
    origins: tuple[int | None, ...]
    ledger: LedgerTrace
    system: str


@contextmanager
def _replayed(
    tmp_path: Path, transcript: Transcript, budget: int, **config: object
) -> Iterator[tuple[LedgerReader, list[Seen]]]:
    seen: list[Seen] = []

    @step("truth")
    def truth(state: TurnState, ctx: TurnContext) -> TurnState:
        assert state.ledger is not None and state.assembled is not None
        system = "\n".join(state.assembled.window.system)
        seen.append(Seen(state.session.history, state.session.origins, state.ledger, system))
        return state

    cfg = EngineConfig.model_validate(
        {"store": f"sqlite:///{tmp_path / 'ledger.db'}", "budget": budget, **config}
    )
    with Engine(cfg) as engine:
        engine.steps.insert(truth, after="ledger")
        report = replay(transcript, budget=budget, engine=engine, repair=True)
        assert report.turns == len(seen) > 0
        assert report.invalid_requests == 0
        yield LedgerReader.for_engine(engine, "replay"), seen


def _check(reader: LedgerReader, seen: list[Seen]) -> dict[str, int]:
    assert reader.turns == len(seen)
    fates: dict[str, int] = {}
    for turn, truth in enumerate(seen, start=1):
        assert reader.trace(turn).ledger == truth.ledger
        ledger = reader.ledger(turn)
        messages = ledger.messages
        # every message of the log, exactly once, in order
        assert [e.position for e in messages] == list(range(truth.ledger.log_length))
        held = {o: m for o, m in zip(truth.origins, truth.history, strict=True) if o is not None}
        pairs = list(zip(truth.origins, truth.history, strict=True))
        summaries = {i: m.text for i, (o, m) in enumerate(pairs) if o is None}
        summary_texts = set(summaries.values())
        for e in messages:
            assert e.position is not None
            fates[e.fate] = fates.get(e.fate, 0) + 1
            original = reader.log[e.position]
            assert e.pointer is not None
            if e.pointer.startswith("log:"):
                assert reader.original(e.pointer).text == message_text(original)
            else:
                assert reader.original(e.pointer).text, (turn, e)
            if original.role == "system":
                # a system message's text is in the system prompt of every request
                assert e.fate == "sent" and original.text.strip() in truth.system, (turn, e)
            elif e.position in held:
                sent = held[e.position]
                assert e.fate in ("sent", "cleared", "truncated"), (turn, e)
                if e.fate == "cleared":
                    assert sent != original and sent.tool_results, (turn, e.position)
                    # its size as sent: rebuilt from the results the turns cleared,
                    # some of a message's results or all of them
                    assert e.tokens_after == reader.counter.count_messages([sent]), (turn, e)
                else:
                    assert sent == original, (turn, e.position)
                assert e.tokens_after <= e.tokens_before
            else:
                assert e.fate in ("summarized", "recalled"), (turn, e)
                assert e.tokens_after == 0
                assert e.into is not None and e.into.startswith("summary:"), (turn, e)
                text = reader.original(e.into).text
                assert text is not None and text in summary_texts, (turn, e.into)
                for ref in e.refs:
                    assert reader.original(ref).text, (turn, ref)
        # each summary entry stands for the messages missing before the next one held
        entries = [e for e in ledger.entries if e.kind == "summary"]
        assert len(entries) == len(summaries) == len(truth.ledger.summaries)
        for entry, record in zip(entries, truth.ledger.summaries, strict=True):
            assert not held.keys() & set(range(record.first, record.stop))
            assert entry.pointer is not None
            assert reader.original(entry.pointer).text == summaries[record.index]
        for e in ledger.entries:
            if e.kind == "section":
                for ref in e.refs:
                    assert reader.original(ref).text, (turn, ref)
    return fates


CLAUDE_CODE = claude_code_files()


@pytest.mark.parametrize("path", CLAUDE_CODE, ids=[p.stem[:24] for p in CLAUDE_CODE])
def test_every_message_of_a_claude_code_session_is_accounted_for_on_every_turn(
    tmp_path: Path, data_dir: Path, path: Path
) -> None:
    transcript = read_transcripts(path)[0]
    with _replayed(tmp_path, transcript, 30_000, costs={"gate": False}) as (reader, seen):
        fates = _check(reader, seen)
    assert fates.get("dropped", 0) == 0
    out = fates.get("summarized", 0) + fates.get("recalled", 0)
    # a file too short to compact has every message in every request
    assert (out > 0) == any(s.ledger.summaries for s in seen)


@pytest.mark.parametrize("index", range(TAU_TRAJECTORIES))
def test_every_message_of_a_tau_bench_trajectory_is_accounted_for_on_every_turn(
    tmp_path: Path, data_dir: Path, index: int
) -> None:
    transcripts = read_transcripts(TAU)
    assert len(transcripts) >= TAU_TRAJECTORIES
    transcript = transcripts[index]
    # a budget the trajectory outgrows, whatever its length: part of what it holds
    total = CharCounter().count_messages(transcript.messages)
    budget = max(3_500, int(0.75 * total))
    with _replayed(tmp_path, transcript, budget, costs={"gate": False}) as (reader, seen):
        fates = _check(reader, seen)
    assert fates.get("dropped", 0) == 0
    # one that outgrows its budget compacts (the shortest fit whole)
    assert any(s.ledger.summaries for s in seen) or total < budget


def test_the_long_sessions_clear_and_compact_under_this_configuration(
    tmp_path: Path, data_dir: Path
) -> None:
    """The configuration exercises every edit the ledger reports on a long session:
    clears and compactions both happen, so the checks above see cleared and
    summarized messages, not only sent ones."""
    long = max(CLAUDE_CODE, key=lambda p: p.stat().st_size)
    with _replayed(tmp_path, read_transcripts(long)[0], 30_000, costs={"gate": False}) as (
        reader,
        seen,
    ):
        fates = _check(reader, seen)
    assert fates.get("cleared", 0) > 0
    assert fates.get("summarized", 0) > 0
