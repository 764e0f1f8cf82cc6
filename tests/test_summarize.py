from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise import CharCounter, Message, UsageError, read_transcript, read_transcripts
from ctxwise.messages import TextBlock, ToolResultBlock, ToolUseBlock, block_text
from ctxwise.retention import retention
from ctxwise.summarize import (
    CUT_LEFT,
    CUT_RIGHT,
    Excerpt,
    ExtractiveSummarizer,
    Summarizer,
    format_excerpt,
    parse_excerpt,
)
from ctxwise.tokens import TokenCounter, WordCounter
from tests.conftest import TAU, claude_code_files

NUMBERING = re.compile(r"[\W_]*(?:\d{1,3}[\W_]*)?")

TURNS = [
    Message.text_message("user", "Hi there. I was charged twice for order W2378156 on May 2."),
    Message.text_message("assistant", "Sorry about that! Let me look. Thanks for waiting."),
    Message.text_message(
        "user", "Please do not refund to the old card, it expires until June. Cool."
    ),
    Message.text_message(
        "assistant", "Understood. I updated config/billing.yaml as asked. Anything else?"
    ),
    Message.text_message("user", "Great, nice weather today anyway"),
]


def uncut(text: str) -> tuple[str, bool, bool]:
    left, right = text.startswith(CUT_LEFT), text.endswith(CUT_RIGHT)
    if left:
        text = text[len(CUT_LEFT) :]
    if right:
        text = text[: -len(CUT_RIGHT)]
    return text, left, right


def blocks_for(message: Message, who: str, names: dict[str, str]) -> list[str]:
    """The texts of ``message``'s blocks an excerpt labelled ``who`` may come from."""
    out = []
    for b in message.content:
        if isinstance(b, TextBlock):
            label: str = message.role
        elif isinstance(b, ToolUseBlock):
            label = f"{b.name} call"
        elif isinstance(b, ToolResultBlock):
            label = f"{names.get(b.tool_use_id, 'tool')} result"
        else:
            continue
        if label == who:
            out.append(block_text(b))
    return out


def assert_excerpts(summary: str, turns: Sequence[Message], first_index: int = 0) -> None:
    """Every line is an excerpt of the message and block it names: verbatim, from one
    line, marked where cut, never empty or a bare number, in transcript order."""
    names = {b.id: b.name for m in turns for b in m.content if isinstance(b, ToolUseBlock)}
    last = -1
    for line in summary.splitlines():
        ex = parse_excerpt(line)
        assert ex is not None, line
        assert format_excerpt(ex.index, ex.who, ex.text) == line
        assert first_index <= ex.index < first_index + len(turns), line
        assert ex.index >= last, "lines come in transcript order"
        last = ex.index
        core, left, right = uncut(ex.text)
        assert core.strip() == core and core, line
        assert not NUMBERING.fullmatch(core), line
        sources = [
            row
            for text in blocks_for(turns[ex.index - first_index], ex.who, names)
            for row in text.splitlines()
        ]
        assert any(
            core in row
            and (left or row.lstrip().startswith(core))
            and (right or row.rstrip().endswith(core))
            for row in sources
        ), line


# --------------------------------------------------------------------------- excerpts


def test_format_and_parse_excerpt_round_trip() -> None:
    line = format_excerpt(40, "Bash result", CUT_LEFT + "lib/app.ex:12: warning" + CUT_RIGHT)
    assert line == "[m40 Bash result] […] lib/app.ex:12: warning […]"
    assert parse_excerpt(line) == Excerpt(40, "Bash result", "[…] lib/app.ex:12: warning […]")
    assert parse_excerpt("user: plain line") is None
    assert parse_excerpt("[m4 user] two\nlines") is None
    assert CUT_RIGHT == " […]" and CUT_LEFT == "[…] "


def test_keeps_fact_and_instruction_sentences_verbatim_with_origin_in_order() -> None:
    summary = ExtractiveSummarizer().summarize("", TURNS, 200)
    lines = summary.splitlines()
    assert "[m0 user] […] I was charged twice for order W2378156 on May 2." in lines
    assert "[m2 user] Please do not refund to the old card, it expires until June. […]" in lines
    assert any(x.startswith("[m3 assistant]") and "config/billing.yaml" in x for x in lines)
    assert not any("Thanks for waiting" in x or "Hi there" in x for x in lines)
    assert_excerpts(summary, TURNS)


def test_first_index_numbers_the_messages() -> None:
    summary = ExtractiveSummarizer().summarize("", TURNS, 200, first_index=100)
    indices = {parse_excerpt(x).index for x in summary.splitlines()}  # type: ignore[union-attr]
    assert indices == {100, 102, 103}
    assert_excerpts(summary, TURNS, first_index=100)
    with pytest.raises(UsageError):
        ExtractiveSummarizer().summarize("", TURNS, 200, first_index=-1)


def test_three_positional_arguments_still_work_as_a_summarizer() -> None:
    summarizer: Summarizer = ExtractiveSummarizer()
    assert isinstance(summarizer, Summarizer)
    assert summarizer.summarize("", TURNS, 200) == ExtractiveSummarizer().summarize(
        "", TURNS, 200, first_index=0
    )


def test_tool_calls_and_results_are_labelled_with_the_tool() -> None:
    turns = [
        Message.text_message("user", "Run the tests please."),
        Message(
            "assistant",
            (ToolUseBlock("t1", "Bash", {"command": "mix test test/session_test.exs"}),),
        ),
        Message(
            "user",
            (
                ToolResultBlock("t1", "Finished in 0.4 seconds\n397 tests, 3 failures"),
                ToolResultBlock("t9", "orphan result with id X4417"),
            ),
        ),
    ]
    summary = ExtractiveSummarizer().summarize("", turns, 200)
    lines = summary.splitlines()
    assert any(x.startswith("[m1 Bash call] ") and "test/session_test.exs" in x for x in lines)
    assert "[m2 Bash result] 397 tests, […]" in lines  # the number, grown by its word
    assert any(x.startswith("[m2 tool result] ") and "X4417" in x for x in lines)
    assert_excerpts(summary, turns)


def test_a_long_line_gives_a_window_around_its_detail_not_the_whole_line() -> None:
    noise = "lorem ipsum dolor sit amet " * 20
    turns = [Message("user", (ToolResultBlock("t", noise + "see lib/app/session.ex " + noise),))]
    summary = ExtractiveSummarizer().summarize("", turns, 40)
    assert summary == "[m0 tool result] […] lib/app/session.ex […]"


def test_no_numbering_only_lines() -> None:
    turns = [
        Message.text_message(
            "assistant", "Plan:\n1. Fix lib/a.ex.\n2.\n3. Run the 397 tests.\n-\n  42\n"
        ),
        Message("user", (ToolResultBlock("t", "ok\n  42 passed\n88\n-\n(7)"),)),
    ]
    summary = ExtractiveSummarizer().summarize("", turns, 2_000)
    lines = summary.splitlines()
    assert "[m0 assistant] 1. Fix lib/a.ex." in lines  # a list item stays whole
    assert "[m0 assistant] 3. Run the 397 tests." in lines
    assert "[m1 tool result] 42 passed" in lines  # a bare number grows by its word
    assert not any(x.endswith(("] 42", "] 88", "] -", "] 2.")) for x in lines)
    assert_excerpts(summary, turns)


def test_a_line_number_gutter_is_no_detail() -> None:
    """A file read numbers its lines (``  12→code``): where a line was, not what it
    said; the numbers of a gutter are not kept for their own sake."""
    read = "\n".join(f"{n:>6}→  end" for n in range(10, 60)) + "\n    60→  see app/x.py"
    turns = [Message("user", (ToolResultBlock("t", read),))]
    summary = ExtractiveSummarizer().summarize("", turns, 2_000)
    assert summary == "[m0 tool result] […] app/x.py"
    # in a line that is not a gutter the same number is a detail
    turns = [Message("user", (ToolResultBlock("t", "took 12 seconds"),))]
    assert ExtractiveSummarizer().summarize("", turns, 2_000) == "[m0 tool result] took 12 seconds"


def test_an_error_line_is_kept_from_its_error_word_and_cut_cleanly() -> None:
    line = "    at boot: error: " + "a" * 105 + "     " + "b" * 30
    turns = [Message("user", (ToolResultBlock("t", line),))]
    summary = ExtractiveSummarizer().summarize("", turns, 2_000)
    assert summary == "[m0 tool result] […] error: " + "a" * 105 + " […]"
    assert retention(turns, summary).counts()["total"] == [1, 1]
    assert_excerpts(summary, turns)


# --------------------------------------------------------------------------- selection


def _one_line_budget(line: str) -> int:
    """A budget that holds ``line`` and not two such lines."""
    return CharCounter().count(line)


def test_a_detail_the_session_came_back_to_outranks_a_one_off() -> None:
    turns = [
        Message("user", (ToolResultBlock("a", "abc123 ok"),)),
        Message("user", (ToolResultBlock("b", "xyz789 ok"),)),
        Message("user", (ToolResultBlock("c", "abc123 done"),)),
    ]
    summary = ExtractiveSummarizer().summarize(
        "", turns, _one_line_budget("[m0 tool result] abc123 ok")
    )
    assert "abc123" in summary and "xyz789" not in summary
    assert_excerpts(summary, turns)


def test_a_later_detail_outranks_an_earlier_one() -> None:
    turns = [
        Message("user", (ToolResultBlock("a", "aaa111 ok"),)),
        Message.text_message("assistant", "Looking."),
        Message("user", (ToolResultBlock("b", "bbb222 ok"),)),
    ]
    summary = ExtractiveSummarizer().summarize(
        "", turns, _one_line_budget("[m0 tool result] aaa111 ok")
    )
    assert summary == "[m2 tool result] bbb222 ok"


def test_what_the_user_or_agent_wrote_outranks_what_a_tool_printed() -> None:
    """Same message, same recency: the user's detail weighs double, enough to pay
    for a longer line (a tool call can fetch tool output again)."""
    said = "then please keep rrr222 around"
    turns = [Message("user", (ToolResultBlock("a", "qqq111 ok"), TextBlock(said)))]
    summary = ExtractiveSummarizer().summarize("", turns, _one_line_budget(f"[m0 user] {said}"))
    assert summary == f"[m0 user] {said}"


def test_names_written_like_code_count_where_the_agent_wrote_them() -> None:
    """``close_review_session`` is a detail in the agent's words and tool calls; in a
    file read (tool output) the identifiers of the file are not."""
    read = "def close_review_session(socket):\n    ok"
    turns = [
        Message("assistant", (ToolUseBlock("r", "Read", {"file_path": "x"}),)),
        Message("user", (ToolResultBlock("r", read),)),
        Message.text_message("assistant", "Now I call close_review_session from the view."),
    ]
    summary = ExtractiveSummarizer().summarize("", turns, 2_000)
    assert summary.splitlines() == ["[m2 assistant] Now I call close_review_session from the view."]


def _ctxwise_imports(module: str) -> set[str]:
    """The ctxwise modules ``module``'s source imports, anywhere in the file (a
    ``TYPE_CHECKING`` block included)."""
    src = Path(__file__).resolve().parents[1] / "src"
    path = src / Path(*module.split("."))
    file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    package = module if path.is_dir() else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    out = set()
    for name in found:
        while name and not (src / Path(*name.split("."))).with_suffix(".py").exists():
            if (src / Path(*name.split(".")) / "__init__.py").exists():
                break
            name = name.rpartition(".")[0]
        if name == "ctxwise" or name.startswith("ctxwise."):
            out.add(name)
    return out


def test_the_summarizer_does_not_rank_by_the_measure_it_is_scored_with() -> None:
    """It ranked lines by ``ctxwise.retention.specifics``, the function
    ``bench_retention`` scores summaries with, so its score there was circular.
    Neither ``ctxwise.summarize`` nor anything it imports, at run time or for type
    checking, reaches ``ctxwise.retention`` (nor the package, which re-exports it)."""
    reached: set[str] = set()
    todo = ["ctxwise.summarize"]
    while todo:
        module = todo.pop()
        if module in reached:
            continue
        reached.add(module)
        todo += sorted(_ctxwise_imports(module) - reached)
    assert "ctxwise.summarize" in reached and "ctxwise.text" in reached  # the walk works
    assert "ctxwise" not in reached
    assert "ctxwise.retention" not in reached
    assert "ctxwise.retention" not in _ctxwise_imports("ctxwise.summarize")


def test_the_summarizer_never_calls_retention(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctxwise.retention as measure

    turns = [*TURNS, Message("user", (ToolResultBlock("t", "Error: lib/a.ex:12 failed"),))]
    before = ExtractiveSummarizer().summarize("", turns, 300)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the summarizer read ctxwise.retention")

    for name in ("specifics", "retention", "references", "future_reference_recall"):
        monkeypatch.setattr(measure, name, refuse)
    assert ExtractiveSummarizer().summarize("", turns, 300) == before


def test_instruction_sentences_outrank_facts() -> None:
    facts = "\n".join(f"build b{n:04d} took {100 + n} ms on host-{n}" for n in range(200))
    turns = [
        Message.text_message("user", "Never push to the main branch."),
        Message("user", (ToolResultBlock("t", facts),)),
        Message.text_message("user", "Also, you must keep the changelog."),
    ]
    counter = CharCounter()
    summary = ExtractiveSummarizer(counter).summarize("", turns, 40)
    assert counter.count(summary) <= 40
    lines = summary.splitlines()
    assert "[m0 user] Never push to the main branch." in lines
    assert "[m2 user] Also, you must keep the changelog." in lines
    assert_excerpts(summary, turns)


def test_a_statement_with_dont_is_no_instruction() -> None:
    facts = "\n".join(f"build b{n:04d} took {100 + n} ms" for n in range(50))
    turns = [
        Message.text_message("user", "I don't remember the order number, sorry."),
        Message.text_message("user", "Please don't email me before 9."),
        Message("user", (ToolResultBlock("t", facts),)),
    ]
    summary = ExtractiveSummarizer().summarize("", turns, 30)
    assert "[m1 user] Please don't email me before 9." in summary.splitlines()
    assert "remember" not in summary


def test_a_detail_said_twice_is_kept_once() -> None:
    turns = [
        Message("user", (ToolResultBlock("a", "deployed build 8cc42b0 to eu-west-1"),)),
        Message("user", (ToolResultBlock("b", "deployed build 8cc42b0 to eu-west-1"),)),
        Message("user", (ToolResultBlock("c", "checked 8cc42b0 again"),)),
    ]
    summary = ExtractiveSummarizer().summarize("", turns, 200)
    assert summary == "[m0 tool result] […] 8cc42b0 to eu-west-1"


def test_budget_and_rolling_with_the_previous_summary() -> None:
    counter = CharCounter()
    summarizer = ExtractiveSummarizer(counter)
    tight = summarizer.summarize("", TURNS, 25)
    assert counter.count(tight) <= 25 and "do not refund" in tight  # instructions weigh most
    later = [Message.text_message("user", "Ship it to 12 Elm St by Friday.")]
    rolled = summarizer.summarize(tight, later, 60, first_index=5)
    assert "do not refund" in rolled and "12 Elm St" in rolled
    assert tight.splitlines()[0] in rolled.splitlines()  # carried with its origin, as it was
    assert rolled.splitlines()[-1].startswith("[m5 user] ")
    with pytest.raises(UsageError):
        summarizer.summarize("", TURNS, 0)


def test_previous_lines_compete_and_origin_less_lines_stay_verbatim() -> None:
    previous = "\n".join(
        [
            "Earlier notes: ticket OPS-4417 is open.",
            "[m3 Bash result] […] commit 8cc42b0 […]",
            "[m7 user] thanks!",
        ]
    )
    turns = [Message.text_message("user", "Now look at src/ctxwise/engine.py please.")]
    summary = ExtractiveSummarizer().summarize(previous, turns, 500, first_index=10)
    lines = summary.splitlines()
    assert lines[0] == "Earlier notes: ticket OPS-4417 is open."  # origin-less lines first
    assert "[m3 Bash result] […] commit 8cc42b0 […]" in lines  # carried as it was
    assert "[m7 user] thanks!" not in lines  # no detail, no instruction
    assert lines[-1].startswith("[m10 user] ") and "src/ctxwise/engine.py" in lines[-1]
    # a tight budget keeps the part of an old excerpt that holds the detail, still marked
    tight = ExtractiveSummarizer().summarize(
        "[m3 Bash result] the deploy of commit 8cc42b0 went out to all regions fine", [], 12
    )
    assert tight == "[m3 Bash result] […] 8cc42b0 […]"


def test_without_details_it_keeps_the_latest_words_rather_than_nothing() -> None:
    chat = [
        Message.text_message("user", "Hello there. Could you look at the flaky login page?"),
        Message.text_message("assistant", "Sure, looking now."),
    ]
    summary = ExtractiveSummarizer().summarize("", chat, 12)
    assert summary == "[m1 assistant] Sure, looking now."
    assert ExtractiveSummarizer().summarize("", chat, 200).startswith("[m0 user] Hello there.")


def test_deterministic_across_hash_seeds() -> None:
    path = next(p for p in claude_code_files() if p.name == "tool_heavy.jsonl")
    code = (
        "import sys; from ctxwise import read_transcript; "
        "from ctxwise.summarize import ExtractiveSummarizer; "
        f"t = read_transcript({str(path)!r}); "
        "sys.stdout.write(ExtractiveSummarizer().summarize('', t.messages, 400))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("0", "1", "12345")
    }
    assert len(outs) == 1 and next(iter(outs))


# --------------------------------------------------------------------------- real transcripts


@functools.cache
def _claude_code(name: str) -> tuple[Message, ...]:
    return read_transcript(Path(name)).messages


@functools.cache
def _tau() -> tuple[tuple[Message, ...], ...]:
    return tuple(t.messages for t in read_transcripts(TAU))


def _counters() -> list[TokenCounter]:
    return [CharCounter(), CharCounter(safety_margin=0.1), WordCounter()]


@pytest.mark.data
@settings(max_examples=150)
@given(
    which=st.integers(0, 10_000),
    share=st.floats(0.05, 1.0),
    budget=st.integers(1, 6_000),
    first_index=st.integers(0, 500),
    counter=st.sampled_from(range(3)),
)
def test_excerpts_are_verbatim_and_fit_on_real_transcripts(
    data_dir: Path, which: int, share: float, budget: int, first_index: int, counter: int
) -> None:
    files = [str(p) for p in claude_code_files()]
    tau = _tau()
    pick = tau[which % len(tau)] if which % 3 == 0 else None
    messages = pick if pick is not None else _claude_code(files[which % len(files)])
    turns = messages[: max(1, int(len(messages) * share))]
    ctr = _counters()[counter]
    summary = ExtractiveSummarizer(ctr).summarize("", turns, budget, first_index=first_index)
    assert ctr.count(summary) <= budget
    assert_excerpts(summary, turns, first_index)
    # rolling it on keeps it a valid summary of both: new lines excerpt the new turns,
    # older ones the previous summary's excerpts (cut further at most)
    later = messages[len(turns) :][:40]
    if later:
        start = first_index + len(turns)
        rolled = ExtractiveSummarizer(ctr).summarize(summary, later, budget, first_index=start)
        assert ctr.count(rolled) <= budget
        old = [x for x in rolled.splitlines() if parse_excerpt(x).index < start]  # type: ignore[union-attr]
        fresh = [x for x in rolled.splitlines() if x not in old]
        assert_excerpts("\n".join(fresh), later, start)
        before = [parse_excerpt(x) for x in summary.splitlines()]
        for x in old:
            ex = parse_excerpt(x)
            assert ex is not None
            core = uncut(ex.text)[0]
            assert any(
                b is not None and (b.index, b.who) == (ex.index, ex.who) and core in b.text
                for b in before
            ), x


@pytest.mark.data
def test_summaries_of_claude_codes_compacted_ranges_are_verbatim_and_fit(data_dir: Path) -> None:
    """At the size of Claude Code's own summary of each long session. (How many
    specifics they keep against Claude Code's is a benchmark figure, measured by
    ``benchmarks/bench_retention.py``, not a property to hold here.)"""
    from tests.conftest import long_sessions

    counter = CharCounter()
    for path in long_sessions():
        t = read_transcript(path)
        boundary = t.compactions[0]
        theirs = t.messages[boundary.index].text
        compacted = t.messages[: boundary.index]
        budget = counter.count(theirs)
        ours = ExtractiveSummarizer(counter).summarize("", compacted, budget)
        assert counter.count(ours) <= budget
        assert_excerpts(ours, compacted)
        assert len(ours.splitlines()) > 10
        json.dumps(ours)  # one string
