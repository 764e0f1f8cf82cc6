"""The verbatim line store, the offline scorer, and the carry's fixed shares."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxwise.errors import RelayError
from ctxwise.relay import (
    DirectoryRuns,
    DroppedLine,
    ExampleScorer,
    HandoverParser,
    KeptLine,
    LineScorer,
    LineStore,
    Relay,
    Shares,
    StepRequest,
    StepResult,
    Workload,
    generate,
    line_shape,
    score_run,
)
from ctxwise.relay.carry import NOTES_HEADER
from ctxwise.tokens import CharCounter
from tests.relay.conftest import AllLines, assert_same_result, small_needles

# -- the must-show: every needle, no filler, on six seeds ---------------


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_the_offline_scorer_keeps_all_497_needles_and_no_filler(tmp_path: Path, seed: int) -> None:
    workload = generate(seed)
    result = Relay(workload, HandoverParser(), runs=tmp_path).run(f"needles-{seed}")
    score = score_run(result, workload)
    assert score.needles_total == 497
    assert score.needles_kept == 497
    assert score.needles_exact == 497
    assert score.filler_kept == 0
    assert score.carry_tokens_max <= 24_000
    assert all(r.carry_tokens <= 24_000 for r in result.records)
    assert result.dropped == ()
    assert score.steps == 96
    assert (score.holders_correct, score.counts_exact) == (40, 40)


def test_the_scorer_separates_needles_from_filler_by_its_threshold() -> None:
    workload = small_needles(7, chunks=8)
    assert workload.answers is not None
    scorer = ExampleScorer(
        workload.examples.keep, workload.examples.skip, instruction=workload.instruction
    )
    assert isinstance(scorer, LineScorer)
    assert scorer.threshold == 0.0
    needles = {(n.chunk, n.line) for n in workload.answers.needles}
    for c, chunk in enumerate(workload.chunks):
        lines = chunk.split("\n")[:-1]
        for i, s in enumerate(scorer.score(lines)):
            assert (s > scorer.threshold) == ((c, i) in needles), lines[i]


def test_scorer_without_skip_examples_or_keep_examples() -> None:
    only_keep = ExampleScorer(["Ana Ruiz handed pump P-1 over to Bea Sato."])
    assert only_keep.threshold == 0.5
    near, far = only_keep.score(
        ["Dev Weber handed crane CR-7 over to Uma Iqbal.", "Oil level topped up."]
    )
    assert near > 0.5 > far
    from_instruction = ExampleScorer([], instruction="keep the handover lines")
    assert len(from_instruction.score(["a handover line", "x"])) == 2
    with pytest.raises(RelayError) as err:
        ExampleScorer(["  "], ["skip me"])
    assert err.value.reason == "spec"
    with pytest.raises(RelayError):
        ExampleScorer(["keep me"], ngram=0)


def test_line_shape_masks_names_and_ids() -> None:
    a = line_shape("Ana Ruiz handed pump P-104 over to Bo Sato.")
    b = line_shape("Dev Weber handed pump B-7 over to Uma Iqbal.")
    assert a == b
    assert "<cap>" in a and "#" in a and "." in a


# -- the store: policies, reports, bytes ----------------------------------------


def _kept(chunk: int, line: int, score: float) -> KeptLine:
    return KeptLine(chunk, line, f"line{chunk}{line}", score)  # 7 chars, 2 tokens with "\n"


def test_lowest_score_drops_the_lowest_and_on_a_tie_the_oldest() -> None:
    store = LineStore(6, CharCounter())  # three 7-char lines: 8*3-1 chars = 6 tokens
    a, b, c, d = _kept(0, 0, 0.5), _kept(0, 1, 0.1), _kept(0, 2, 0.9), _kept(0, 3, 0.1)
    dropped = store.add([a, b, c, d], step=0)
    assert dropped == [DroppedLine(0, 1, b.text, 0.1, 0, "lowest-score")]
    assert store.lines == [a, c, d]
    assert store.tokens <= 6
    e = _kept(1, 0, 0.2)
    assert store.add([e], step=1) == [DroppedLine(0, 3, d.text, 0.1, 1, "lowest-score")]
    assert store.lines == [a, c, e]
    loser = _kept(2, 0, 0.01)  # a new line can lose too
    assert store.add([loser], step=2) == [DroppedLine(2, 0, loser.text, 0.01, 2, "lowest-score")]
    assert store.lines == [a, c, e]


def test_oldest_drops_the_oldest_whatever_its_score() -> None:
    store = LineStore(6, CharCounter(), policy="oldest")
    lines = [_kept(0, i, s) for i, s in enumerate([0.9, 0.1, 0.8, 0.2])]
    assert store.add(lines, step=3) == [DroppedLine(0, 0, lines[0].text, 0.9, 3, "oldest")]
    newer = [_kept(1, 0, 0.0), _kept(1, 1, 0.0)]
    dropped = store.add(newer, step=4)
    assert [(d.chunk, d.line, d.step, d.policy) for d in dropped] == [
        (0, 1, 4, "oldest"),
        (0, 2, 4, "oldest"),
    ]
    assert store.lines == [lines[3], *newer]


def test_the_store_keeps_input_order_and_a_zero_budget_keeps_nothing() -> None:
    store = LineStore(100, CharCounter())
    store.add([_kept(1, 0, 1.0), _kept(0, 5, 1.0)], step=1)
    assert [(k.chunk, k.line) for k in store.lines] == [(0, 5), (1, 0)]
    assert store.render() == "line05\nline10"
    empty = LineStore(0, CharCounter())
    assert len(empty.add([_kept(0, 0, 1.0)], step=0)) == 1
    assert empty.lines == [] and empty.tokens == 0


def test_bad_policy_or_budget_is_a_spec_error() -> None:
    with pytest.raises(RelayError) as err:
        LineStore(10, CharCounter(), policy="newest")  # type: ignore[arg-type]
    assert err.value.reason == "spec"
    with pytest.raises(RelayError):
        LineStore(-1, CharCounter())


ODD_LINES = [
    "caf\u00e9 cr\u00e8me \u2014 \u65e5\u672c\u8a9e \U0001f600",
    "trailing spaces   ",
    "windows line\r",
    "\ttab first, then  two  spaces",
    "",
    "\u00a0no-break\u00a0space and zero\u200bwidth",
    "\r",
]


def test_kept_lines_are_byte_identical_through_a_run_and_a_resume(tmp_path: Path) -> None:
    chunks = ("\n".join(ODD_LINES) + "\n", "\n".join(reversed(ODD_LINES)))
    workload = Workload(instruction="keep every line", chunks=chunks)
    whole = Relay(workload, HandoverParser(), runs=tmp_path / "a", scorer=AllLines()).run("r")
    expected = [
        (c, i, text)
        for c, chunk in enumerate(chunks)
        for i, text in enumerate(chunk.split("\n"))
        if not (c == 0 and i == len(ODD_LINES))  # the chunk's final "\n" ends a line
    ]
    assert [(k.chunk, k.line, k.text) for k in whole.lines] == expected
    for k in whole.lines:
        assert k.text.encode("utf-8") == chunks[k.chunk].split("\n")[k.line].encode("utf-8")
    relay = Relay(workload, HandoverParser(), runs=tmp_path / "b", scorer=AllLines())
    relay.run("r", stop_after=1)
    resumed = Relay(workload, HandoverParser(), runs=tmp_path / "b", scorer=AllLines()).resume("r")
    assert_same_result(resumed, whole)
    assert "windows line\r\n" in resumed.carry


def test_every_dropped_line_is_reported_once_with_its_step(tmp_path: Path) -> None:
    workload = small_needles(3, chunks=12)
    assert workload.answers is not None
    # a small store beside the 40-row table
    shares = Shares(lines=0.3, state=0.7)
    result = Relay(workload, HandoverParser(), runs=tmp_path, carry_tokens=1500, shares=shares).run(
        "small"
    )
    kept = {(k.chunk, k.line) for k in result.lines}
    dropped = [(d.chunk, d.line) for d in result.dropped]
    assert dropped, "the store must overflow for this test"
    assert len(set(dropped)) == len(dropped)
    assert not kept & set(dropped)
    # nothing is lost without a report: kept + dropped are exactly the needles
    assert kept | set(dropped) == {(n.chunk, n.line) for n in workload.answers.needles}
    texts = {(n.chunk, n.line): n.text for n in workload.answers.needles}
    for d in result.dropped:
        assert d.text == texts[(d.chunk, d.line)]
        assert d.policy == "lowest-score"
        assert d.chunk <= d.step < 12
    by_step = {r.step: r.dropped for r in result.records}
    assert sum(by_step.values()) == len(dropped)
    for step, n in by_step.items():
        assert n == sum(1 for d in result.dropped if d.step == step)


# -- shares: growing notes cannot crowd out the store -----------------------------


class GrowingNotes:
    """The parser's table plus notes that double every step, without bound."""

    def __init__(self) -> None:
        self.parser = HandoverParser()
        self.sizes: list[int] = []

    def __call__(self, request: StepRequest) -> StepResult:
        notes = "a note that grows " * (2 ** (request.index + 3))
        self.sizes.append(len(notes))
        return StepResult(table=self.parser(request).table, notes=notes)


def test_notes_that_grow_without_bound_leave_the_line_store_as_it_would_be(
    tmp_path: Path,
) -> None:
    workload = small_needles(5, chunks=16)
    cap = 3000  # small enough that the store overflows and drops lines
    quiet = Relay(workload, HandoverParser(), runs=tmp_path, carry_tokens=cap).run("quiet")
    step = GrowingNotes()
    loud = Relay(workload, step, runs=tmp_path, carry_tokens=cap).run("loud")
    assert step.sizes[-1] > 100 * cap * 4  # the notes asked for far more than the cap
    assert quiet.dropped, "the store must be full for this test to mean anything"
    assert loud.lines == quiet.lines
    assert loud.dropped == quiet.dropped
    assert loud.table == quiet.table
    assert [r.kept for r in loud.records] == [r.kept for r in quiet.records]
    assert all(r.carry_tokens <= cap for r in loud.records)
    assert loud.carry_tokens_max <= cap
    assert CharCounter().count(loud.carry) <= cap
    assert any(r.notes_cut for r in loud.records)
    assert loud.records[-1].notes_cut
    assert not any(r.notes_cut for r in quiet.records)
    assert loud.notes.startswith("a note that grows")
    assert loud.carry.split(NOTES_HEADER + "\n", 1)[1] == loud.notes
    # the notes did take their share: the carry is fuller than without them
    assert loud.carry_tokens_max > quiet.carry_tokens_max


def test_shares_must_be_fractions_that_sum_to_at_most_one() -> None:
    Shares(0.5, 0.5)
    Shares(0.6, 0.2)
    for lines, state in [(0, 0.3), (1, 0.3), (0.7, 0.0), (0.8, 0.3), (-0.1, 0.5), (0.7, 1.5)]:
        with pytest.raises(RelayError) as err:
            Shares(lines, state)
        assert err.value.reason == "spec"
    with pytest.raises(RelayError):
        Shares(True, 0.3)
    with pytest.raises(RelayError):
        Shares("0.7", 0.3)  # type: ignore[arg-type]


def test_a_cap_that_leaves_no_room_is_a_spec_error(tmp_path: Path) -> None:
    workload = small_needles(chunks=4)
    for cap in (0, 10, True):
        with pytest.raises(RelayError) as err:
            Relay(workload, HandoverParser(), runs=tmp_path, carry_tokens=cap)
        assert err.value.reason == "spec"
    with pytest.raises(RelayError) as err:
        Relay(workload, HandoverParser(), runs=tmp_path, drop_policy="newest")  # type: ignore[arg-type]
    assert err.value.reason == "spec"
    assert not list(tmp_path.iterdir())  # nothing written
    assert isinstance(Relay(workload, HandoverParser(), runs=tmp_path).runs, DirectoryRuns)
