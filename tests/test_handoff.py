"""select_context and its chunks: verbatim, in order, under budget, pins kept, tool
pairs whole — on small cases, on every shared Claude Code transcript, and as
properties over generated transcripts."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise import Engine, EngineConfig, Message
from ctxwise.errors import BudgetError, UsageError
from ctxwise.formats import read_transcript
from ctxwise.handoff import (
    SIZE_EXPONENT,
    Chunk,
    HybridScorer,
    chunk_transcript,
    identifiers,
    select_context,
)
from ctxwise.handoff.evaluation import evaluate_handoff
from ctxwise.messages import MediaBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from ctxwise.tokens import CharCounter
from tests.conftest import claude_code_files

C = CharCounter()


def _session() -> list[Message]:
    return [
        Message.text_message("system", "You are a coding agent."),
        Message.text_message("user", "The deploy of service billing-api fails since Monday."),
        Message(
            "assistant",
            (
                ThinkingBlock("let me look"),
                TextBlock("I will read the config."),
                ToolUseBlock("t1", "Read", {"path": "deploy/billing-api.yaml"}),
            ),
        ),
        Message("user", (ToolResultBlock("t1", "replicas: 3\nimage: billing:2.4.1\nport: 8080"),)),
        Message("assistant", (TextBlock("The image tag is 2.4.1, which was yanked."),)),
        Message.text_message("user", "Also, our on-call rota lives in ops/rota.md."),
        Message("assistant", (ToolUseBlock("t2", "Bash", {"cmd": "kubectl get pods"}),)),
        Message(
            "user", (ToolResultBlock("t2", "billing-api-7f9 CrashLoopBackOff", is_error=True),)
        ),
        Message.text_message("user", "Thanks. Lunch orders are due at noon."),
    ]


def test_chunks_are_user_text_assistant_text_and_whole_tool_pairs() -> None:
    chunks = chunk_transcript(_session(), C)
    kinds = [(c.kind, c.tool) for c in chunks]
    assert kinds == [
        ("user", None),
        ("assistant", None),
        ("tool", "Read"),
        ("assistant", None),
        ("user", None),
        ("tool", "Bash"),
        ("user", None),
    ]
    read = chunks[2]
    assert read.text.startswith('Read {"path": "deploy/billing-api.yaml"}')
    assert "→ replicas: 3" in read.text and read.positions == (2, 3)
    assert chunks[5].text.endswith("→ error: billing-api-7f9 CrashLoopBackOff")
    assert all("let me look" not in c.text for c in chunks)  # thinking is not handed over
    assert [c.id for c in chunks] == [f"c{i}" for i in range(1, 8)]


def test_an_oversized_chunk_is_split_on_paragraphs_and_points_to_its_origin() -> None:
    paragraphs = [f"paragraph {i} " + "word " * 40 for i in range(12)]
    text = "\n\n".join(paragraphs)
    chunks = chunk_transcript([Message.text_message("user", text)], C, max_chunk_tokens=200)
    assert len(chunks) > 1
    assert all(c.origin == "c1" and c.tokens <= 200 for c in chunks)
    assert [c.part for c in chunks] == [(i, len(chunks)) for i in range(1, len(chunks) + 1)]
    assert "\n\n".join(c.text for c in chunks) == text.strip()  # cut between paragraphs
    one_line = "x" * 5000
    parts = chunk_transcript([Message.text_message("user", one_line)], C, max_chunk_tokens=100)
    assert "".join(c.text for c in parts) == one_line and all(c.tokens <= 100 for c in parts)


def test_later_parts_of_a_tool_chunk_name_the_call() -> None:
    # a later part of a long result said only "tool Read, part 3 of 5": which file
    # it came from was in part 1 alone
    path = "/home/me/projects/" + "deep/" * 20 + "service/billing.py"
    use = ToolUseBlock("t1", "Read", {"file_path": path})
    body = "\n".join(f"{i:5d}  line of code {i}" for i in range(400))
    chunks = chunk_transcript(
        [Message("assistant", (use,)), Message("user", (ToolResultBlock("t1", body),))],
        C,
        max_chunk_tokens=300,
    )
    assert len(chunks) > 2 and chunks[0].call is None
    for part in chunks[1:]:
        assert part.call is not None and len(part.call) <= 60
        assert part.call.startswith('Read {"file_path": "/ho')
        assert part.call.endswith('service/billing.py"}')
        assert f" · of {part.call}" in part.header()
    assert chunks[0].text.startswith(f'Read {{"file_path": "{path}"}}')


def test_identifiers_in_a_task() -> None:
    task = "Fix `parse_args` in src/cli/main.py for order 4417 and ticket C-118, please."
    assert identifiers(task) == ["parse_args", "src/cli/main.py", "4417", "C-118"]
    assert identifiers("summarize the meeting") == []
    # a hyphen names a thing only next to a capital or a digit, not anywhere in a
    # word that has one: SQLite-safe and Read-only describe, X-Request-Id names
    assert identifiers("make it SQLite-safe and Read-only; send X-Request-Id") == ["X-Request-Id"]


def test_a_chunk_defining_a_named_thing_is_pinned() -> None:
    handoff = select_context(_session(), "Write the rota summary from ops/rota.md", 10_000)
    pinned = [s for s in handoff.selected if s.reason == "pinned"]
    assert [s.defines for s in pinned] == ["ops/rota.md"]
    assert "ops/rota.md" in pinned[0].chunk.text


def test_selection_is_verbatim_in_order_and_reported() -> None:
    handoff = select_context(_session(), "why does the billing-api deploy crash?", 120)
    assert handoff.tokens <= 120
    positions = [c.position for c in handoff.chunks]
    assert positions == sorted(positions)
    prompt = handoff.render()
    assert prompt.startswith("why does the billing-api deploy crash?")
    for c in handoff.chunks:
        assert f"{c.header()}\n{c.text}" in prompt
    report = handoff.report()
    assert report["matched"] is True
    assert report["left_out"]["chunks"] == len(handoff.left_out) > 0
    assert {s["id"] for s in report["selected"]} == {c.id for c in handoff.chunks}
    assert "Lunch" not in prompt  # the unrelated chunk lost to the relevant ones


def test_a_task_that_matches_nothing_gets_the_most_recent_context() -> None:
    handoff = select_context(_session(), "zebra quokka", 60)
    assert handoff.matched is False
    assert handoff.selected and all(s.reason == "recent" for s in handoff.selected)
    assert handoff.chunks[-1].text.startswith("Thanks. Lunch orders")


def test_bad_input() -> None:
    with pytest.raises(UsageError):
        select_context(_session(), "   ", 100)
    for budget in (0, -5, True):
        with pytest.raises(BudgetError):
            select_context(_session(), "task", budget)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        chunk_transcript(_session(), C, max_chunk_tokens=3)

    class Broken:
        name = "broken"

        def score(self, task: str, chunks: object) -> list[float]:
            return [1.0]

    with pytest.raises(UsageError, match="broken"):
        select_context(_session(), "deploy", 100, scorer=Broken())
    empty = select_context([], "anything", 100)
    assert empty.selected == () and empty.tokens == 0


def test_the_scorer_indexes_one_transcript_once() -> None:
    scorer = HybridScorer()
    chunks = chunk_transcript(_session(), C)
    first = scorer.score("billing deploy", chunks)
    memory = scorer._last
    assert scorer.score("rota", chunks) != first
    assert scorer._last is memory


@pytest.mark.parametrize("path", claude_code_files(), ids=lambda p: p.name)
def test_every_shared_claude_code_transcript(path: Path, data_dir: Path) -> None:
    transcript = read_transcript(path)
    users = [m for m in transcript.messages if m.role == "user" and m.text.strip()]
    task = users[-1].text[:300] if users else "continue the work"
    handoff = select_context(transcript, task, 5_000)
    assert handoff.tokens <= 5_000
    prompt = handoff.render()
    for c in handoff.chunks:
        assert c.text in prompt
    answered = {r.tool_use_id for m in transcript.messages for r in m.tool_results}
    calls = 0
    for c in chunk_transcript(transcript, C):
        if c.tool_use_id is not None and c.part in (None, (1, c.part[1] if c.part else 1)):
            calls += 1
            if c.tool_use_id in answered and c.origin is None:
                assert "\n→ " in c.text  # the call and its result are one chunk
    assert calls == sum(len(m.tool_uses) for m in transcript.messages)


def test_engine_handoff_reads_the_whole_log(tmp_path: Path) -> None:
    config = EngineConfig(store=f"sqlite:///{tmp_path / 'h.db'}", budget=600)
    with Engine(config) as engine:
        for i in range(30):
            engine.turn(
                "s",
                [
                    Message.text_message("user", f"note {i}: the invoice INV-{1000 + i} is open"),
                    Message.text_message("assistant", f"Noted invoice {i}."),
                ][: 1 if i == 29 else 2],
            )
        handoff = engine.handoff("s", "What is the status of INV-1003?", 400)
        assert any("INV-1003" in c.text for c in handoff.chunks)
        assert handoff.tokens <= 400


_texts = st.text(alphabet=st.sampled_from("abc xyz 12\n"), min_size=1, max_size=60)


@st.composite
def _transcripts(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = []
    for i in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["user", "assistant", "tool"]))
        if kind == "tool":
            out.append(Message("assistant", (ToolUseBlock(f"t{i}", "Run", {"q": draw(_texts)}),)))
            out.append(Message("user", (ToolResultBlock(f"t{i}", draw(_texts)),)))
        else:
            out.append(Message.text_message(kind, draw(_texts)))
    return out


@settings(max_examples=60, deadline=None)
@given(
    _transcripts(),
    st.text(alphabet=st.sampled_from("abc xyz 12"), min_size=1, max_size=20),
    st.integers(1, 400),
)
def test_properties(messages: list[Message], task: str, budget: int) -> None:
    if not task.strip():
        return
    handoff = select_context(messages, task, budget)
    assert handoff.tokens <= budget
    chunks = chunk_transcript(messages, C)
    ids = [c.id for c in handoff.chunks]
    assert ids == [c.id for c in chunks if c.id in set(ids)]  # original order
    by_id: dict[str, Chunk] = {c.id: c for c in chunks}
    for c in handoff.chunks:
        assert by_id[c.id] == c  # verbatim
        if c.kind == "tool":  # a call is never handed over without its result
            assert "→" in c.text


def test_a_pin_that_does_not_fit_is_reported() -> None:
    big = Message.text_message("user", "ticket C-118: " + "detail " * 400)
    handoff = select_context([big, *_session()], "close C-118", 100)
    assert handoff.pins_left_out == ("C-118",)
    assert handoff.report()["pins_left_out"] == ["C-118"]
    assert handoff.tokens <= 100


def test_packing_weighs_a_chunk_s_score_against_its_length() -> None:
    """A long chunk scoring a little higher than several short ones does not shut
    them out; scoring much higher, it goes first (``SIZE_EXPONENT``)."""
    long_text = " ".join(["filler"] * 400)
    messages = [Message.text_message("user", long_text)] + [
        Message.text_message("assistant", f"short note {n}") for n in range(4)
    ]
    chunks = chunk_transcript(messages, C)
    cost = [C.count(f"{c.header()}\n{c.text}") + 2 for c in chunks]
    budget = cost[0] + 1  # room for the long chunk or for all the short ones

    class Fixed:
        name = "fixed"

        def __init__(self, first: float) -> None:
            self.first = first

        def score(self, task: str, chunks: object) -> list[float]:
            return [self.first, 1.0, 1.0, 1.0, 1.0]

    assert sum(cost[1:]) + cost[-1] < budget  # the shorts fit together, with room to spare
    a_little = select_context(messages, "task", budget, scorer=Fixed(1.1), recent_share=0)
    assert [c.id for c in a_little.chunks] == [c.id for c in chunks[1:]]
    ratio = (cost[0] / cost[1]) ** SIZE_EXPONENT
    much = select_context(messages, "task", budget, scorer=Fixed(ratio * 1.01), recent_share=0)
    assert much.chunks[0].id == chunks[0].id


def test_a_file_history_leaves_out_what_a_later_write_of_the_file_replaced() -> None:
    """Of a file the task names, the calls that read, wrote or ran it are pinned,
    newest first, except the content a later whole-file Write replaced. A Write
    that failed replaces nothing, and a call that only mentions the file (a plan
    written elsewhere) is not a write of it."""

    def call(n: int, tool: str, args: dict[str, str], result: str) -> list[Message]:
        return [
            Message("assistant", (ToolUseBlock(f"t{n}", tool, args),)),
            Message("user", (ToolResultBlock(f"t{n}", result),)),
        ]

    app = "/repo/src/app.py"
    messages = [
        Message.text_message("user", "Make the app log its errors."),
        *call(1, "Read", {"file_path": app}, "def main():\n    run()"),
        *call(2, "Edit", {"file_path": app, "old_string": "run()", "new_string": "go()"}, "ok"),
        *call(3, "Write", {"file_path": "/repo/plan.md", "content": "rewrite src/app.py"}, "ok"),
        *call(
            4,
            "Write",
            {"file_path": app, "content": "v2"},
            "<tool_use_error>File has not been read yet</tool_use_error>",
        ),
        *call(5, "Write", {"file_path": app, "content": "def main():\n    log(run())"}, "ok"),
        *call(6, "Bash", {"command": "python src/app.py"}, "done"),
    ]

    class Nothing:
        name = "nothing"

        def score(self, task: str, chunks: object) -> list[float]:
            return [0.0] * len(chunks)  # type: ignore[arg-type]

    handoff = select_context(
        messages, "Add error logging to src/app.py", 10_000, scorer=Nothing(), recent_share=0
    )
    history = {s.chunk.tool_use_id for s in handoff.selected if s.defines == "src/app.py"}
    assert history == {"t3", "t5", "t6"}  # t1, t2 and the failed t4 came before t5


# -- QA: edge cases ------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [2.5e4, "20000", None])
def test_a_budget_that_is_not_an_integer_is_named_as_given(budget: object) -> None:
    # the message said "invalid budget 0" for a budget of 25000.0
    with pytest.raises(BudgetError, match=f"invalid budget {budget}: .*integer") as info:
        select_context(_session(), "task", budget)  # type: ignore[arg-type]
    assert info.value.budget == budget
    with pytest.raises(BudgetError, match=f"invalid budget {budget}: "):
        evaluate_handoff({"conversations": []}, budget)  # type: ignore[arg-type]


def test_an_evaluation_without_questions_still_names_its_scorer() -> None:
    data = {"conversations": [{"id": "a", "turns": [{"id": "t1", "speaker": "A", "text": "hi"}]}]}
    result = evaluate_handoff(data, 100)
    assert (result["n"], result["scorer"]) == (0, HybridScorer().name)


def test_a_budget_past_what_a_float_holds_takes_everything() -> None:
    # budget * recent_share raised OverflowError (a traceback from the CLI)
    huge = 10**400
    handoff = select_context(_session(), "billing-api deploy", huge)
    assert len(handoff.selected) == len(chunk_transcript(_session(), C))
    assert handoff.budget == huge
    assert select_context(_session(), "zebra quokka", huge).tokens == handoff.tokens


def test_a_result_of_only_images_is_not_reported_as_no_output() -> None:
    # a screenshot came back, but the chunk said "(no output)"
    shot = (MediaBlock("image", {"type": "base64", "data": "AAAA"}),)
    messages = [
        Message("assistant", (ToolUseBlock("t1", "screenshot", {}),)),
        Message("user", (ToolResultBlock("t1", shot + shot),)),
        Message("assistant", (ToolUseBlock("t2", "Bash", {"command": "true"}),)),
        Message("user", (ToolResultBlock("t2", ""),)),
    ]
    texts = [c.text for c in chunk_transcript(messages, C)]
    assert texts == [
        "screenshot {}\n→ (no text: 2 images)",
        'Bash {"command": "true"}\n→ (no output)',
    ]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "high", None])
def test_a_scorer_giving_a_score_that_is_not_a_finite_number_is_refused(bad: object) -> None:
    # NaN went into the packing order and into the report, which json.dumps wrote as NaN
    class Odd:
        name = "odd"

        def score(self, task: str, chunks: object) -> list[object]:
            return [0.5] * (len(chunks) - 1) + [bad]  # type: ignore[arg-type]

    with pytest.raises(UsageError, match=r"scorer 'odd' gave .* for chunk c\d+: .*finite"):
        select_context(_session(), "task", 500, scorer=Odd())  # type: ignore[arg-type]


def test_a_transcript_with_a_lone_surrogate_is_handed_over_verbatim() -> None:
    # a truncated emoji in a tool's output: the scorer's store refused the text and
    # the digest of its cache crashed with UnicodeEncodeError
    messages = [
        Message.text_message("user", "Fix the parser, it drops \ud83d emoji"),
        Message("assistant", (ToolUseBlock("t1", "Bash", {"command": "pytest"}),)),
        Message("user", (ToolResultBlock("t1", "FAILED test_parser \udcff"),)),
        Message.text_message("user", "Lunch is at noon."),
    ]
    handoff = select_context(messages, "why does the parser fail", 200)
    assert handoff.matched
    texts = [c.text for c in handoff.chunks]
    assert "Fix the parser, it drops \ud83d emoji" in texts
    assert 'Bash {"command": "pytest"}\n→ FAILED test_parser \udcff' in texts
    data = {
        "conversations": [
            {
                "id": "c",
                "turns": [
                    {"id": "t1", "speaker": "A", "text": "my cat \ud83d is Tom"},
                    {"id": "t2", "speaker": "B", "text": "lunch"},
                ],
                "questions": [{"question": "What is the cat called?", "evidence": ["t1"]}],
            }
        ]
    }
    assert evaluate_handoff(data, 100)["evidence_recall"] == 1.0


@pytest.mark.parametrize("task", ["\udcff", "why does the parser fail \ud83d"])
def test_a_task_with_a_lone_surrogate_is_scored_and_handed_over_as_given(task: str) -> None:
    # a Task prompt cut inside an emoji: the scorer's store refused the query ("not
    # valid Unicode") when no word of the task came before the surrogate
    messages = [
        Message.text_message("user", "Fix the parser, it drops emoji"),
        Message.text_message("user", "Lunch is at noon."),
    ]
    handoff = select_context(messages, task, 200)
    assert handoff.render().startswith(task)
    assert handoff.selected


def test_a_budget_smaller_than_every_chunk_gives_an_empty_handoff_that_says_so() -> None:
    handoff = select_context(_session(), "zebra quokka", 5)
    assert handoff.selected == () and handoff.tokens == 0
    assert len(handoff.left_out) == len(chunk_transcript(_session(), C))
    assert handoff.report()["left_out"]["chunks"] == len(handoff.left_out)
