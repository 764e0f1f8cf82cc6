"""Every CLI report read at 80 columns: cells wrap, none is cut.

Each command is run twice, at ``COLUMNS=80`` and on a terminal wide enough for every
line: at 80 no line is wider than the terminal, no ``…`` appears that the wide run
does not have (rich marks a cut cell with one), and the same letters are printed
(a cell cut short loses some). The letters, not every character: timings differ
between two runs of one command.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from rich.cells import cell_len

from ctxwise import Engine, EngineConfig, Message
from ctxwise._northwind import SCRIPT, SESSION_ID
from ctxwise.cli import app
from tests._cli import runner
from tests.conftest import DATA, ROOT

WIDE = 400
LIVEMCP = DATA / "tools" / "livemcpbench" / "livemcp_tool_catalog.jsonl"
LIVEMCP_QUERIES = DATA / "tools" / "livemcpbench" / "livemcp_queries_gold_tools.jsonl"
SESSION = DATA / "transcripts" / "claude_code" / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"

INTENTS = {
    "billing": ["refund my last invoice", "why was my card charged twice", "update billing card"],
    "weather": ["will it rain in paris tomorrow", "weather forecast for berlin", "is it sunny"],
    "greeting": ["hello there", "good morning to you", "hi how are you doing today"],
}
OOS = ["what is the capital of peru", "play some jazz music", "how tall is mount everest"]


def render(args: Sequence[str | Path], columns: int) -> str:
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, (args, result.stderr)
    return str(result.stdout)


def assert_fits_80_columns(*args: str | Path) -> str:
    narrow, wide = render(args, 80), render(args, WIDE)
    too_wide = [line for line in narrow.splitlines() if cell_len(line) > 80]
    assert not too_wide, too_wide[:3]
    assert narrow.count("…") == wide.count("…"), "a cell was cut at 80 columns"
    letters = Counter(c for c in narrow if c.isalpha())
    assert letters == Counter(c for c in wide if c.isalpha()), "text was lost at 80 columns"
    return narrow


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("width")
    rows = [(t, label) for label, texts in INTENTS.items() for t in texts * 4]
    rows += [(t, "oos") for t in OOS * 4]
    train = tmp / "train.jsonl"
    train.write_text("".join(json.dumps({"text": t, "label": g}) + "\n" for t, g in rows))
    router = tmp / "router.json"
    built = runner.invoke(
        app, ["router", "build", "--train", str(train), "--out", str(router), "--scorer", "bow"]
    )
    assert built.exit_code == 0, built.stderr
    conversations = tmp / "conversations.json"
    turns = [
        {"id": f"t{i}", "speaker": "Ann" if i % 2 else "Bob", "text": text}
        for i, text in enumerate(
            [s.user for s in SCRIPT if s.user is not None] * 3  # long enough to choose from
        )
    ]
    conversations.write_text(
        json.dumps(
            {
                "conversations": [
                    {
                        "id": "northwind",
                        "turns": turns,
                        "questions": [
                            {"question": "Who takes in the parcels?", "evidence": ["t6"]},
                            {"question": "When was order 4417 placed?", "evidence": ["t0"]},
                        ],
                    }
                ]
            }
        )
    )
    transcript = tmp / "session.json"
    transcript.write_text(
        json.dumps(
            [
                {"role": "user", "content": "Order 4417 never arrived. Never call me before 9am."},
                {"role": "assistant", "content": "I am checking order 4417 for you now."},
                {"role": "user", "content": "It was placed on 2026-11-02, to Portland."},
                {"role": "assistant", "content": "Noted: placed on 2026-11-02, to Portland."},
            ]
        )
    )
    db = tmp / "sessions.db"
    # char-counted, no safety margin: a small session that compacts as it did
    cfg = EngineConfig(store=f"sqlite:///{db}", budget=300, counter="char", safety_margin=0)
    with Engine(cfg) as engine:
        for step in SCRIPT[:6]:
            if step.user is not None:
                engine.turn(SESSION_ID, [Message.text_message("user", step.user)])
                engine.record(SESSION_ID, [Message.text_message("assistant", "Noted.")])
    catalog = tmp / "tools.json"
    long = "an_uncommonly_long_tool_name_that_cannot_wrap_at_a_space_anywhere_at_all"
    catalog.write_text(
        json.dumps(
            [
                {
                    "name": f"{long}_{n}",
                    "description": "Looks up an order by its number and returns it. " * 3,
                    "input_schema": {"type": "object", "properties": {"order_id": {}}},
                }
                for n in range(3)
            ]
        )
    )
    queries = tmp / "queries.jsonl"
    queries.write_text(
        json.dumps({"query": "look up an order", "gold_tools": [{"tool": f"{long}_1"}]}) + "\n"
    )
    return {
        "train": train,
        "router": router,
        "conversations": conversations,
        "transcript": transcript,
        "db": db,
        "catalog": catalog,
        "queries": queries,
    }


def test_demo(files: dict[str, Path]) -> None:
    assert_fits_80_columns("demo")


def test_assemble_and_inspect(files: dict[str, Path]) -> None:
    assert_fits_80_columns("assemble", ROOT / "examples" / "support.yaml")
    assert_fits_80_columns("inspect", files["transcript"])


@pytest.mark.data
def test_inspect_a_long_session() -> None:
    if not SESSION.is_file():
        pytest.skip(f"shared data not found at {DATA} (set CTXWISE_DATA)")
    assert_fits_80_columns("inspect", SESSION)


def test_replay_and_trace(files: dict[str, Path]) -> None:
    assert_fits_80_columns("replay", files["transcript"], "--budget", "300")
    assert_fits_80_columns("trace", SESSION_ID, "--store", files["db"])


def test_explain(files: dict[str, Path]) -> None:
    ledger = assert_fits_80_columns("explain", SESSION_ID, "--store", files["db"])
    assert "summarized" in ledger  # the session compacted: a run of messages on one line
    found = assert_fits_80_columns("explain", SESSION_ID, "--store", files["db"], "--find", "4417")
    assert "place(s) hold" in found


def test_routing(files: dict[str, Path]) -> None:
    assert_fits_80_columns("route", files["router"], "-q", "refund the invoice", "--explain")
    assert_fits_80_columns(
        "eval", "routing", "--train", files["train"], "--test", files["train"], "--scorer", "bow"
    )


def test_memory_and_handoff(files: dict[str, Path]) -> None:
    assert_fits_80_columns("eval", "memory", "--data", files["conversations"])
    assert_fits_80_columns("eval", "handoff", "--data", files["conversations"])


def test_tools(files: dict[str, Path]) -> None:
    catalog, queries = files["catalog"], files["queries"]
    assert_fits_80_columns("tools", "search", catalog, "-q", "look up an order")
    assert_fits_80_columns("tools", "budget", catalog, "--k", "2")
    assert_fits_80_columns("tools", "budget", catalog, "--k", "2", "--queries", queries)
    assert_fits_80_columns("eval", "tools", "--catalog", catalog, "--queries", queries)


@pytest.mark.data
def test_tools_on_the_shipped_catalog() -> None:
    if not LIVEMCP.is_file():
        pytest.skip(f"shared data not found at {DATA} (set CTXWISE_DATA)")
    assert_fits_80_columns("tools", "search", LIVEMCP, "-q", "read the pages of a pdf")
    assert_fits_80_columns("tools", "budget", LIVEMCP, "--queries", LIVEMCP_QUERIES)
    assert_fits_80_columns("eval", "tools", "--catalog", LIVEMCP, "--queries", LIVEMCP_QUERIES)


def test_simulate_and_relay() -> None:
    assert_fits_80_columns(
        "simulate", "compaction", "--start-tokens", "20000", "--growth", "3000",
        "--calls", "200", "--summary-tokens", "4000", "--cache-read-factor", "0.1",
    )  # fmt: skip
    assert_fits_80_columns(
        "simulate", "clearing", "--context-tokens", "120000", "--cleared-tokens", "40000",
        "--edit-point-tokens", "30000",
    )  # fmt: skip
    assert_fits_80_columns("eval", "relay", "--chunks", "4")


COMMANDS = [
    [], ["assemble"], ["inspect"], ["demo"], ["clear"], ["compact"], ["route"], ["replay"],
    ["trace"], ["explain"], ["mcp"], ["router", "build"], ["eval", "routing"], ["eval", "memory"],
    ["eval", "tools"], ["eval", "handoff"], ["eval", "relay"], ["data", "clinc150"],
    ["data", "relay"], ["simulate", "compaction"], ["simulate", "clearing"],
    ["tools", "search"], ["tools", "budget"], ["handoff", "select"], ["relay", "run"],
    ["relay", "resume"], ["hook", "install"],
]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "ctxwise")
def test_help(command: list[str]) -> None:
    shown = assert_fits_80_columns(*command, "--help")
    # a flag is shown as a flag: typer 0.29 printed a type beside it (--json <bool>)
    assert "<bool>" not in shown
