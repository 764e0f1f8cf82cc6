"""``ctxwise replay`` and ``ctxwise trace``: real recordings and a scripted session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxwise._scripted import scripted_session
from ctxwise.cli import main
from ctxwise.config import EngineConfig
from ctxwise.engine import Engine
from ctxwise.errors import CompactionBudgetError, PinnedOverflowError
from ctxwise.formats import anthropic, read_transcript
from ctxwise.messages import Message, ToolResultBlock, block_text
from ctxwise.replay import replay
from ctxwise.tokens import CharCounter


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def sizes(data_dir: Path) -> list[int]:
    t = read_transcript(
        data_dir / "transcripts" / "claude_code" / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    )
    return [
        len(block_text(b)) for m in t.messages for b in m.content if isinstance(b, ToolResultBlock)
    ]


@pytest.mark.parametrize("fraction", [0.5, 0.25])
def test_a_200_turn_scripted_session_holds_every_check(sizes: list[int], fraction: float) -> None:
    t = scripted_session(200, sizes, seed=3)
    full = CharCounter().count_messages(t.messages)
    report = replay(t, budget=int(full * fraction))
    assert report.turns == 400
    assert (report.over_budget_turns, report.invalid_requests, report.pinned_missing) == (0, 0, 0)
    assert report.clears + report.compactions > 0
    assert report.tokens_sent < report.tokens_full * (fraction + 0.1)


def test_pins_are_checked_for_real(sizes: list[int]) -> None:
    """The checker finds the rules the script states, so 0 missing is a real 0."""
    t = scripted_session(30, sizes, seed=1)
    full = CharCounter().count_messages(t.messages)
    engine = Engine(EngineConfig(store="memory", budget=full // 4))
    replay(t, budget=full // 4, engine=engine)
    rules = [r.text for r in engine.rules("replay")]
    assert "Never deploy on Fridays." in rules and len(rules) == 2
    last = engine.traces("replay")[-1]
    assert any(s.name == "rules" and s.status == "included" for s in last.sections)
    engine.close()


def test_replay_cli_on_a_real_session(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    path = data_dir / "transcripts" / "claude_code" / "tool_heavy.jsonl"
    code, out, err = run(capsys, "replay", path, "--budget", 800, "--json")
    assert code == 0, err
    data = json.loads(out)
    for key in (
        "turns",
        "max_window_tokens",
        "over_budget_turns",
        "invalid_requests",
        "compactions",
        "clears",
        "tokens_sent",
        "tokens_full",
        "p50_ms",
        "p99_ms",
        "pinned_missing",
    ):
        assert key in data
    assert data["turns"] == 4 and data["max_window_tokens"] <= 800
    assert (data["over_budget_turns"], data["invalid_requests"]) == (0, 0)
    code, out, _ = run(capsys, "replay", path, "--budget", 800, "--render", "openai")
    assert code == 0 and "invalid_requests" in out


def test_replay_refuses_what_cannot_fit(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    tau = data_dir / "transcripts" / "tau_bench" / "gpt-4o-airline.json"
    code, out, err = run(capsys, "replay", tau, "--budget", 500, "--repair")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "pinned sections need" in err
    code, _, err = run(capsys, "replay", tau, "--budget", 3000)
    assert code == 2 and "duplicate_id" in err and "--repair" in err
    code, _, err = run(capsys, "replay", tau, "--budget", 3000, "--index", 999)
    assert code == 2 and "out of range" in err


def test_trace_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "ctxwise.db"
    with Engine(EngineConfig(store=f"sqlite:///{db}", budget=2000)) as engine:
        engine.turn("s1", [Message.text_message("user", "Order 4417 is late.")])
        engine.turn(
            "s1",
            [Message.text_message("assistant", "Checking."), Message.text_message("user", "ok")],
        )
    code, out, err = run(capsys, "trace", "s1", "--db", db, "--json")
    assert code == 0, err
    traces = json.loads(out)
    assert [t["turn"] for t in traces] == [1, 2]
    assert traces[1]["tokens"]["total"] <= 2000
    code, out, _ = run(capsys, "trace", "s1", "--db", db, "--turn", 2)
    assert code == 0 and "s1" in out
    code, out, err = run(capsys, "trace", "nobody", "--db", db)
    assert code == 2 and out == "" and "unknown session 'nobody'" in err
    code, _, err = run(capsys, "trace", "s1", "--db", tmp_path / "missing.db")
    assert code == 2 and "does not exist" in err
    assert not (tmp_path / "missing.db").exists()
    code, _, err = run(capsys, "trace", "s1", "--db", "ftp://x")
    assert code == 2 and "unknown scheme" in err


def test_replay_with_a_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    path = data_dir / "transcripts" / "claude_code" / "subagent.jsonl"
    cfg = tmp_path / "ctxwise.toml"
    cfg.write_text('system = "Be brief."\n[clearing]\nkeep_last = 1\n', encoding="utf-8")
    code, out, err = run(capsys, "replay", path, "--budget", 6000, "--config", cfg, "--json")
    assert code == 0, err
    assert json.loads(out)["over_budget_turns"] == 0
    cfg.write_text("[clearing]\nkeep_lats = 1\n", encoding="utf-8")
    code, out, err = run(capsys, "replay", path, "--budget", 6000, "--config", cfg)
    assert code == 2 and "clearing.keep_lats: unknown key" in err


def test_library_errors_are_typed(data_dir: Path) -> None:
    tau = data_dir / "transcripts" / "tau_bench" / "gpt-4o-airline.json"
    from ctxwise.formats import read_transcripts

    t = read_transcripts(tau)[0]
    with pytest.raises(PinnedOverflowError):
        replay(t, budget=400, repair=True)
    big = Message.text_message("user", "word " * 4000)
    with pytest.raises(CompactionBudgetError):
        replay(
            anthropic.decode_messages(
                [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello"},
                    anthropic.encode_message(big),
                    {"role": "assistant", "content": "ok"},
                ]
            ),
            budget=1000,
        )


def test_trace_leaves_a_file_that_is_not_a_store_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import hashlib
    import sqlite3

    foreign = tmp_path / "notes.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (x)")
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all, " * 40)
    for path in (foreign, empty, junk):
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        code, out, err = run(capsys, "trace", "s1", "--db", path)
        assert code == 2 and out == "" and err.count("\n") == 1
        assert "not a ctxwise store" in err
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db", "junk.db", "notes.db"]


def test_replay_into_a_kept_store_starts_a_new_session(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    path = data_dir / "transcripts" / "claude_code" / "short.jsonl"
    db = f"sqlite:///{tmp_path / 'kept.db'}"
    code, out, err = run(capsys, "replay", path, "--budget", 20000, "--db", db, "--json")
    assert code == 0, err
    first = json.loads(out)
    code, out, err = run(capsys, "replay", path, "--budget", 20000, "--db", db)
    assert code == 2 and out == "" and "session 'replay' already exists" in err
    code, out, err = run(
        capsys, "replay", path, "--budget", 20000, "--db", db, "--session", "again", "--json"
    )
    assert code == 0, err
    again = json.loads(out)
    for key in ("turns", "max_window_tokens", "sent_ratio", "invalid_requests"):
        assert again[key] == first[key]
    with Engine(EngineConfig(store=db)) as engine:
        assert len(engine.traces("replay")) == len(engine.traces("again")) == first["turns"]


def test_a_reserve_the_budget_cannot_hold_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    path = data_dir / "transcripts" / "claude_code" / "tool_heavy.jsonl"
    cfg = tmp_path / "ctxwise.toml"
    cfg.write_text("reserve = 4000\n", encoding="utf-8")
    code, out, err = run(capsys, "replay", path, "--budget", 4000, "--config", cfg)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "reserve (4000) must be below budget (4000)" in err


def test_parallel_openai_results_render_as_one_anthropic_turn() -> None:
    from ctxwise.formats import openai

    t = openai.decode_messages(
        [
            {"role": "system", "content": "Answer in English."},
            {"role": "user", "content": "Weather in Paris and Tokyo?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": f'{{"city": "{c}"}}'},
                    }
                    for i, c in enumerate(("Paris", "Tokyo"))
                ],
            },
            {"role": "tool", "tool_call_id": "call_0", "content": "Paris: 18C " + "x" * 400},
            {"role": "tool", "tool_call_id": "call_1", "content": "Tokyo: 22C " + "y" * 400},
            {"role": "assistant", "content": "Sunny in Paris, rain in Tokyo."},
            {"role": "user", "content": "And tomorrow?"},
            {"role": "assistant", "content": "Much the same."},
        ]
    )
    report = replay(t, budget=50_000, config=EngineConfig(store="memory", render="anthropic"))
    assert report.invalid_requests == 0, report.problems
    with Engine(EngineConfig(store="memory", budget=50_000)) as engine:
        body = engine.turn("s", list(t.messages[1:5])).request
    assert anthropic.decode_request(body).problems("anthropic") == []
    results = [m for m in body["messages"] if m["role"] == "user" and m is not body["messages"][0]]
    assert len(results) == 1
    kinds = [b["type"] for b in results[0]["content"]]
    assert kinds[:2] == ["tool_result", "tool_result"]
    assert [b["tool_use_id"] for b in results[0]["content"][:2]] == ["call_0", "call_1"]
