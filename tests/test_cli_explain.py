"""``ctxwise explain``: a turn's ledger in the terminal and as JSON, and ``--find``.

One shared Claude Code session is replayed once (``ctxwise replay`` into a real
SQLite file) at a budget where the Engine both clears old tool results and compacts
(the cost gate off, so clearing is not held back for the prompt cache); every test
reads that store, or a copy of it when it changes the file.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len

from ctxwise.cli import app
from ctxwise.ledger import LedgerEntry, LedgerReader
from ctxwise.memory.store import namespace_part
from ctxwise.memory.urls import open_store
from ctxwise.sessions import open_session_store
from tests._cli import assert_usage_error, ok_json, run, runner
from tests._stores import fresh_schema, postgres_dsn

pytestmark = pytest.mark.data

SESSION = "cc"
RECORDING = "258c7280-ae70-4798-800f-63464d01a85d.jsonl"


@pytest.fixture(scope="module")
def replayed(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store holding the replayed session (sessions and memory in one file)."""
    tmp = tmp_path_factory.mktemp("explain")
    config = tmp / "ctxwise.toml"
    config.write_text("[costs]\ngate = false\n")
    db = tmp / "store.db"
    report = ok_json(
        "replay", data_dir / "transcripts" / "claude_code" / RECORDING,
        "--budget", "30000", "--config", config, "--store", db, "--session", SESSION,
    )  # fmt: skip
    # the config this test needs: the Engine cleared and compacted
    assert report["clears"] > 0 and report["compactions"] > 0, report
    return db


def reader_of(db: Path, session: str = SESSION) -> tuple[LedgerReader, Any]:
    sessions = open_session_store(f"sqlite:///{db}")
    return LedgerReader(sessions, session), sessions


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def needle(text: str) -> str:
    """A line of an original to look for: its longest line of at most 70 characters,
    past the role and block markers (or the start of a longer one)."""
    lines = [ln.strip() for ln in text.splitlines()[1:]]
    lines = [ln.split("] ", 1)[-1] if ln.startswith("[tool") else ln for ln in lines]
    fit = [ln for ln in lines if 20 <= len(ln) <= 70]
    if not fit:  # only longer lines: the start of the longest, as a person recalls it
        longest = max(lines, key=len, default="")
        fit = [longest[:60].strip()] if len(longest) > 70 else []
    assert fit, text[:200]
    return max(fit, key=len)


def entries(
    db: Path, turn: int | None = None, session: str = SESSION
) -> tuple[LedgerReader, tuple[LedgerEntry, ...]]:
    reader, sessions = reader_of(db, session)
    try:
        return reader, reader.ledger(turn).messages
    finally:
        sessions.close()


def test_find_a_cleared_tool_result(replayed: Path) -> None:
    find_a_cleared_tool_result(replayed, SESSION)


def find_a_cleared_tool_result(replayed: Path, session: str) -> None:
    reader, messages = entries(replayed, session=session)
    cleared = [e for e in messages if e.fate == "cleared"]
    assert cleared, "the replay cleared no tool result"
    # the largest cleared result: the one a user would remember
    e = max(cleared, key=lambda x: x.tokens_before)
    original = reader.original(f"log:{e.position}").text
    assert original is not None
    text = needle(original)
    out = ok_json("explain", session, "--store", replayed, "--find", text)
    hits = [f for f in out["found"] if f["position"] == e.position]
    assert hits, (text, out["found"])
    assert hits[0]["fate"] == "cleared"
    assert hits[0]["pointer"] == f"log:{e.position}"
    assert text.casefold() in hits[0]["snippet"].casefold()
    # the pointer resolves to the text found
    resolved = reader.original(hits[0]["pointer"]).text
    assert resolved is not None and text in resolved
    shown = run("explain", session, "--store", replayed, "--find", text)
    assert shown.exit_code == 0, shown.stderr
    assert f"log {e.position} user" in shown.stdout and "cleared" in shown.stdout


def test_find_a_summarized_turn(replayed: Path) -> None:
    find_a_summarized_turn(replayed, SESSION)


def find_a_summarized_turn(replayed: Path, session: str) -> None:
    reader, messages = entries(replayed, session=session)
    gone = [e for e in messages if e.fate in ("summarized", "recalled") and e.role == "user"]
    assert gone, "the replay summarized no turn"
    # a person's words, not a tool result: the user's own text
    typed = [
        e for e in gone if "[tool result" not in (reader.original(f"log:{e.position}").text or "")
    ]
    e = typed[0] if typed else gone[0]
    text = needle(reader.original(f"log:{e.position}").text or "")
    out = ok_json("explain", session, "--store", replayed, "--find", text)
    hit = next(f for f in out["found"] if f["position"] == e.position)
    assert hit["fate"] in ("summarized", "recalled")
    assert hit["into"] is not None and hit["into"].startswith("summary:")
    summary = reader.original(hit["into"])
    assert summary.gone is None and summary.text
    shown = run("explain", session, "--store", replayed, "--find", text).stdout
    assert f"into {hit['into']}" in shown


@pytest.mark.parametrize(
    "recording",
    [
        "4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
        "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
    ],
    ids=["4d5611e5", "8463c716"],
)
def test_find_works_on_the_other_long_sessions(
    data_dir: Path, tmp_path: Path, recording: str
) -> None:
    """The must-show on every long shared session, not only the module's: a cleared
    tool result and a summarized turn, each found where it is now."""
    config = tmp_path / "ctxwise.toml"
    config.write_text("[costs]\ngate = false\n")
    db = tmp_path / "store.db"
    report = ok_json(
        "replay", data_dir / "transcripts" / "claude_code" / recording,
        "--budget", "30000", "--config", config, "--store", db, "--session", "long",
    )  # fmt: skip
    assert report["clears"] > 0 and report["compactions"] > 0, report
    find_a_cleared_tool_result(db, "long")
    find_a_summarized_turn(db, "long")


def test_nothing_found_exits_1(replayed: Path) -> None:
    result = run("explain", SESSION, "--store", replayed, "--find", "zq-no-such-text-xv")
    assert result.exit_code == 1
    assert "no message of session cc holds" in result.stdout
    out = run("explain", SESSION, "--store", replayed, "--find", "zq-no-such-text-xv", "--json")
    assert out.exit_code == 1 and json.loads(out.stdout)["found"] == []


def test_the_ledger_in_the_terminal(replayed: Path) -> None:
    reader, messages = entries(replayed)
    result = run("explain", SESSION, "--store", replayed)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert f"session {SESSION}, turn {reader.turns} of {reader.turns}" in out
    assert "since turn" in out and "cleared log" in out
    counts = reader.ledger().counts()
    assert f"summarized {counts['summarized']:,}" in out
    # the first summarized messages, collapsed into one line with their summary
    first = messages[0]
    assert first.fate in ("summarized", "recalled") and first.into is not None
    run_end = next(
        (e.position for e in messages[1:] if (e.fate, e.into) != (first.fate, first.into)),
        len(messages),
    )
    assert f"log 0–{run_end - 1}" in out
    assert first.into in out
    assert len(out.splitlines()) < len(messages)  # runs are collapsed


def test_the_ledger_fits_80_columns(replayed: Path) -> None:
    for args in ([], ["--turn", "40"], ["--find", "defmodule"]):
        result = run("explain", SESSION, "--store", replayed, *args)
        assert result.exit_code == 0, result.stderr
        assert result.stdout.strip()
        wide = [ln for ln in result.stdout.splitlines() if cell_len(ln) > 80]
        assert not wide, wide[:3]


def test_json_round_trip(replayed: Path) -> None:
    reader, sessions = reader_of(replayed)
    try:
        for turn in (1, 40, reader.turns):
            out = ok_json("explain", SESSION, "--store", replayed, "--turn", str(turn))
            assert out["turns"] == reader.turns
            want = reader.ledger(turn).to_dict()
            assert {k: out[k] for k in want} == want
            # every message of the log once, in log order
            positions = [e["position"] for e in out["entries"] if e["kind"] == "message"]
            assert positions == list(range(len(positions)))
    finally:
        sessions.close()


def test_turn(replayed: Path) -> None:
    out = run("explain", SESSION, "--store", replayed, "--turn", "40").stdout
    assert f"session {SESSION}, turn 40 of" in out and "since turn 39:" in out
    first = run("explain", SESSION, "--store", replayed, "--turn", "1").stdout
    assert "since nothing (the first turn):" in first


def test_bad_input_exits_2(replayed: Path, tmp_path: Path) -> None:
    assert_usage_error(run("explain", "nobody", "--store", replayed), "unknown session")
    assert_usage_error(run("explain", SESSION, "--store", replayed, "--turn", "9999"), "no turn")
    assert_usage_error(run("explain", SESSION, "--store", replayed, "--turn", "0"), "no turn")
    assert_usage_error(
        run("explain", SESSION, "--store", replayed, "--turn", "9999", "--find", "x"), "no turn"
    )
    assert_usage_error(run("explain", SESSION, "--store", replayed, "--find", " "), "text")
    missing = tmp_path / "missing.db"
    assert_usage_error(run("explain", SESSION, "--store", missing), "does not exist")
    assert not missing.exists()


def test_a_newer_store_is_refused(replayed: Path, tmp_path: Path) -> None:
    db = tmp_path / "newer.db"
    shutil.copy(replayed, db)
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO ctxwise_session_migrations (name) VALUES ('999_future')")
    before = digest(db)
    result = run("explain", SESSION, "--store", db)
    assert_usage_error(result, "newer ctxwise", "schema version")
    assert digest(db) == before


def test_explain_writes_nothing(replayed: Path) -> None:
    before = digest(replayed)
    assert run("explain", SESSION, "--store", replayed).exit_code == 0
    assert run("explain", SESSION, "--store", replayed, "--find", "defmodule").exit_code == 0
    assert digest(replayed) == before


def recalled_refs(db: Path) -> list[str]:
    reader, sessions = reader_of(db)
    try:
        ledger = reader.ledger()
    finally:
        sessions.close()
    refs = [r for e in ledger.entries if e.kind == "section" for r in e.refs]
    assert refs, "the last turn recalled no memory item"
    return refs


def test_a_deleted_memory_item_is_gone(replayed: Path, tmp_path: Path) -> None:
    db = tmp_path / "deleted.db"
    shutil.copy(replayed, db)
    refs = recalled_refs(db)
    out = ok_json("explain", SESSION, "--store", db)
    assert out["gone"] == {}  # every memory pointer resolves while the items are there
    gone = refs[0]
    store = open_store(f"sqlite:///{db}")
    try:
        namespace = ("ctxwise", "session", namespace_part(SESSION))
        assert store.delete(namespace, [gone.partition(":")[2]]) == 1
    finally:
        store.close()
    out = ok_json("explain", SESSION, "--store", db)
    assert out["gone"] == {gone: "deleted from the memory store"}
    shown = runner.invoke(
        app, ["explain", SESSION, "--store", str(db)], env={"COLUMNS": "400"}
    )  # wide: the table's cell on one line
    assert shown.exit_code == 0, shown.stderr
    assert f"{gone} (gone: deleted from the memory store)" in shown.stdout


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("ALTER TABLE migrations RENAME TO not_memory", "no memory store in this file"),
        (
            "DELETE FROM migrations WHERE position = (SELECT MAX(position) FROM migrations)",
            "the memory store needs migrating by a writing command first",
        ),
        (
            "INSERT INTO migrations (name, position) VALUES ('999_future', 999)",
            "the memory store was written by a newer ctxwise",
        ),
        (
            "UPDATE meta SET value = 'another-analyzer' WHERE key = 'analyzer'",
            "the memory store was indexed by another analyzer (another-analyzer)",
        ),
    ],
    ids=["no tables", "older", "newer", "another analyzer"],
)
def test_a_memory_store_that_cannot_be_read_as_it_is(
    replayed: Path, tmp_path: Path, change: str, reason: str
) -> None:
    """Opening it would create, migrate or re-index it: it is left alone, and its
    pointers say why they cannot be read."""
    db = tmp_path / "memory.db"
    shutil.copy(replayed, db)
    refs = recalled_refs(db)
    with sqlite3.connect(db) as conn:
        conn.execute(change)
    before = digest(db)
    with sqlite3.connect(db) as conn:
        tables_before = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    out = ok_json("explain", SESSION, "--store", db)
    assert set(out["gone"]) == set(refs)
    assert all(why.startswith(reason) for why in out["gone"].values()), out["gone"]
    assert digest(db) == before  # nothing created, migrated or re-indexed
    with sqlite3.connect(db) as conn:
        assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master")} == tables_before


def test_config_names_the_store_and_namespace(replayed: Path, tmp_path: Path) -> None:
    config = tmp_path / "ctxwise.toml"
    config.write_text(f'store = "sqlite:///{replayed}"\n')
    out = ok_json("explain", SESSION, "--config", config)
    assert out["session_id"] == SESSION and out["gone"] == {}
    # another namespace: the session's memory items are not there
    config.write_text(f'store = "sqlite:///{replayed}"\n[memory]\nnamespace = "other"\n')
    refs = recalled_refs(replayed)
    out = ok_json("explain", SESSION, "--config", config)
    assert out["gone"] == dict.fromkeys(refs, "deleted from the memory store")


def test_a_postgresql_store(data_dir: Path, tmp_path: Path) -> None:
    """Sessions and memory in one PostgreSQL database: the memory pointers resolve
    from it as from a SQLite file (the store is opened without creating anything)."""
    dsn = postgres_dsn()
    session = f"explain-{fresh_schema()}"  # the Engine's schema is shared: a new id
    config = tmp_path / "ctxwise.toml"
    config.write_text("[costs]\ngate = false\n")
    ok_json(
        "replay", data_dir / "transcripts" / "claude_code" / RECORDING,
        "--budget", "30000", "--config", config, "--store", dsn, "--session", session,
    )  # fmt: skip
    out = ok_json("explain", session, "--store", dsn)
    sessions = open_session_store(dsn)
    try:
        want = LedgerReader(sessions, session).ledger().to_dict()
    finally:
        sessions.close()
    assert {k: out[k] for k in want} == want
    refs = [r for e in out["entries"] if e["kind"] == "section" for r in e["refs"]]
    assert refs and out["gone"] == {}
    found = run("explain", session, "--store", dsn, "--find", "defmodule")
    assert found.exit_code == 0, found.stderr
