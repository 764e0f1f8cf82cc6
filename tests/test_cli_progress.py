"""Progress on standard error: drawn for a terminal, never for ``--json`` or a pipe;
and the ``progress`` callbacks of the library functions that loop.

The library functions never print: they call ``progress(done, total)``. The CLI's
one helper (``ctxwise.cli._progress.progress``) turns the calls into a rich bar on
standard error when it is a terminal (checked here on a real pseudo-terminal).
"""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from ctxwise import EngineConfig, Message, Transcript
from ctxwise.cli._progress import progress, scaled
from ctxwise.handoff.evaluation import evaluate_handoff
from ctxwise.memory.evaluation import evaluate_recall
from ctxwise.replay import replay
from ctxwise.routing import make_scorer
from ctxwise.routing.evaluation import evaluate
from ctxwise.tools.catalog import ToolCatalog
from ctxwise.tools.evaluation import evaluate_tool_search

CONVERSATIONS: dict[str, Any] = {
    "conversations": [
        {
            "id": f"c{c}",
            "turns": [
                {"id": "t1", "speaker": "Ann", "text": "My sister lives in Lisbon."},
                {"id": "t2", "speaker": "Bob", "text": "I adopted a dog called Rex."},
                {"id": "t3", "speaker": "Ann", "text": "We met in Porto in 2019."},
            ],
            "questions": [
                {"question": "Where does the sister live?", "evidence": ["t1"]},
                {"question": "What is the dog called?", "evidence": ["t2"]},
                {"question": "A question without evidence", "evidence": []},
            ],
        }
        for c in range(2)
    ]
}


class Calls:
    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def __call__(self, done: int, total: int) -> None:
        self.seen.append((done, total))

    def check(self, total: int) -> None:
        """From 0 to ``total`` of ``total``, never going back."""
        assert self.seen[0] == (0, total) and self.seen[-1] == (total, total)
        assert {t for _, t in self.seen} == {total}
        done = [d for d, _ in self.seen]
        assert done == sorted(done)


# -- the library callbacks -------------------------------------------------------------


def test_evaluate_reports_the_test_queries_then_the_timed_ones() -> None:
    rows = [(f"refund invoice {i}", "billing") for i in range(12)]
    rows += [(f"rain forecast {i}", "weather") for i in range(12)]
    rows += [(f"capital of country {i}", "oos") for i in range(12)]
    calls = Calls()
    result = evaluate(rows, rows, scorer=make_scorer("bow"), latency_queries=5, progress=calls)
    calls.check(len(rows) + 5)
    # reporting changes nothing: the figures are those of a run without a callback
    plain = evaluate(rows, rows, scorer=make_scorer("bow"), latency_queries=5)
    assert result.metrics == plain.metrics


def test_evaluate_recall_and_handoff_report_every_question() -> None:
    recall_calls, handoff_calls = Calls(), Calls()
    with_calls = evaluate_recall(CONVERSATIONS, [1, 2], progress=recall_calls)
    recall_calls.check(6)  # the question without evidence counts as done too
    assert with_calls["recall_at"] == evaluate_recall(CONVERSATIONS, [1, 2])["recall_at"]
    evaluated = evaluate_handoff(CONVERSATIONS, 200, progress=handoff_calls)
    handoff_calls.check(6)
    assert evaluated == evaluate_handoff(CONVERSATIONS, 200)


def test_evaluate_tool_search_reports_every_query() -> None:
    catalog = ToolCatalog()
    catalog.add_anthropic(
        [
            {"name": "get_weather", "description": "Weather.", "input_schema": {"type": "object"}},
            {"name": "get_stock", "description": "Stocks.", "input_schema": {"type": "object"}},
        ]
    )
    queries = [{"query": q, "gold_tools": [{"tool": "get_weather"}]} for q in ("rain", "sun")]
    calls = Calls()
    evaluate_tool_search(catalog, queries, [1], progress=calls)
    calls.check(2)


def test_replay_reports_every_turn_and_the_dry_run_too(tmp_path: Path) -> None:
    messages = tuple(
        Message.text_message(role, text)
        for role, text in (
            ("user", "Order 4417 never arrived."),
            ("assistant", "Checking order 4417."),
            ("user", "It was placed on 2026-11-02."),
            ("assistant", "Noted."),
        )
    )
    calls = Calls()
    replay(Transcript(messages), budget=2000, progress=calls)
    calls.check(2)
    # a store that outlives the call: every turn runs first on a memory store
    kept = Calls()
    config = EngineConfig(store=f"sqlite:///{tmp_path / 'r.db'}")
    replay(Transcript(messages), budget=2000, config=config, progress=kept)
    kept.check(4)


# -- the CLI helper --------------------------------------------------------------------


def test_the_helper_draws_on_a_terminal_and_nothing_elsewhere() -> None:
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=80)
    with progress("counting things", console=terminal) as report:
        assert report is not None
        report(3, 10)
    assert "counting things" in screen.getvalue()
    pipe = io.StringIO()
    with progress("counting things", console=Console(file=pipe)) as report:
        assert report is None  # not a terminal
    with progress("counting things", enabled=False, console=terminal) as report:
        assert report is None  # --json
    assert pipe.getvalue() == ""


def test_scaled_fills_one_bar_with_two_passes() -> None:
    calls = Calls()
    first, second = scaled(calls, 0, 2), scaled(calls, 1, 2)
    assert first is not None and second is not None
    first(0, 5)
    first(5, 5)
    second(5, 5)
    assert calls.seen == [(0, 10), (5, 10), (10, 10)]
    assert scaled(None, 0, 2) is None


# -- the CLI on a real terminal --------------------------------------------------------


def _run_with_stderr_on_a_terminal(*args: str) -> tuple[int, str, str]:
    """``ctxwise ARGS…`` with stdout a pipe and stderr a pseudo-terminal: exit code,
    stdout and what the terminal received."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxwise.cli", *args],
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    out, _ = proc.communicate(timeout=120)
    os.close(leader)
    return proc.returncode, out.decode(), seen.decode(errors="replace")


def test_the_cli_draws_progress_on_a_terminal_only(tmp_path: Path) -> None:
    data = tmp_path / "conversations.json"
    data.write_text(json.dumps(CONVERSATIONS), encoding="utf-8")
    code, out, err = _run_with_stderr_on_a_terminal("eval", "handoff", "--data", str(data))
    assert code == 0 and "evidence recall" in out
    assert "handing off conversations.json" in err  # the bar, on the terminal
    assert "handing off" not in out  # never on stdout
    # --json: nothing on the terminal at all
    code, out, err = _run_with_stderr_on_a_terminal(
        "eval", "handoff", "--data", str(data), "--json"
    )
    assert code == 0 and json.loads(out)["n"] == 4 and err == ""
    # stderr a pipe (a log, a CI job): no bar, no control characters
    piped = subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", "eval", "handoff", "--data", str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert piped.returncode == 0 and piped.stderr == ""


def test_an_error_leaves_no_bar_behind(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    code, out, err = _run_with_stderr_on_a_terminal("eval", "handoff", "--data", str(missing))
    assert code == 2 and out == ""
    assert "ctxwise: error:" in err and "handing off" not in err


def test_eval_relay_draws_its_chunks_on_a_terminal() -> None:
    args = ("eval", "relay", "--chunks", "12", "--seed", "0")
    code, out, err = _run_with_stderr_on_a_terminal(*args)
    assert code == 0 and "needles kept" in out
    assert "relay" in err and "/12" in err  # the bar counts the chunks
    code, out, err = _run_with_stderr_on_a_terminal(*args, "--json")
    assert code == 0 and json.loads(out)["steps"] == 12 and err == ""
