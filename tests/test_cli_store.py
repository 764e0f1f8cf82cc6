"""``--store URL|PATH``: one way to name a store on every command.

A plain path is a SQLite file; a command that writes creates it (its folder must
exist), a read-only one refuses it; ``--db`` is the old, hidden name; a config's
``store`` is honoured by ``replay``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ctxwise.cli import app
from tests._cli import assert_usage_error, ok_json, run, runner

TRANSCRIPT = [
    {"role": "user", "content": "Order 4417 never arrived. Never call me before 9am."},
    {"role": "assistant", "content": "Sorry about that: I am checking order 4417."},
    {"role": "user", "content": "Thanks. It was placed on 2026-11-02."},
    {"role": "assistant", "content": "Noted: placed on 2026-11-02."},
]
CONVERSATIONS = {
    "conversations": [
        {
            "id": "c1",
            "turns": [
                {"id": "t1", "speaker": "Ann", "text": "My sister lives in Lisbon."},
                {"id": "t2", "speaker": "Bob", "text": "I adopted a dog called Rex."},
            ],
            "questions": [{"question": "Where does the sister live?", "evidence": ["t1"]}],
        }
    ]
}


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    path = tmp_path / "session.json"
    path.write_text(json.dumps(TRANSCRIPT), encoding="utf-8")
    return path


def sessions_in(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "ctxwise_session_migrations" in tables
        return {r[0] for r in conn.execute("SELECT session_id FROM ctxwise_sessions")}
    finally:
        conn.close()


# -- commands that write: a new SQLite file is created -----------------------------


def test_replay_store_path_creates_the_file_and_trace_reads_it(
    transcript: Path, tmp_path: Path
) -> None:
    db = tmp_path / "new.db"
    out = ok_json("replay", transcript, "--budget", "2000", "--store", db, "--session", "s1")
    assert db.is_file() and out["store"] == {"kind": "sqlite", "from": "--store", "path": str(db)}
    traces = ok_json("trace", "s1", "--store", db)
    assert [t["turn"] for t in traces] == [1, 2]
    # the table says where the session went and how to look at it
    result = runner.invoke(
        app, ["replay", str(transcript), "--budget", "2000", "--store", str(db), "--session", "s2"]
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == f"next: ctxwise trace s2 --store {db}"


def test_db_is_the_hidden_old_name_of_store(transcript: Path, tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    # replay --db took only a URL; a path works now too, and so does the URL
    ok_json("replay", transcript, "--budget", "2000", "--db", db, "--session", "a")
    ok_json("replay", transcript, "--budget", "2000", "--db", f"sqlite:///{db}", "--session", "b")
    assert [t["turn"] for t in ok_json("trace", "b", "--db", db)] == [1, 2]
    for args in (
        ("replay", transcript, "--budget", "2000", "--store", db, "--db", db),
        ("trace", "a", "--store", db, "--db", db),
        ("demo", "--store", tmp_path / "x.db", "--db", tmp_path / "y.db"),
    ):
        assert_usage_error(run(*args), "--store", "--db")
    assert not (tmp_path / "x.db").exists() and not (tmp_path / "y.db").exists()
    for command in (["replay"], ["trace"], ["demo"], ["mcp"]):
        shown = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"}).stdout
        assert "--store" in shown and "--db" not in shown


def test_a_relative_sqlite_url_is_the_current_folders(
    transcript: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = ok_json("replay", transcript, "--budget", "2000", "--store", "sqlite:///rel.db")
    assert out["store"]["path"] == str(tmp_path / "rel.db") and (tmp_path / "rel.db").is_file()


@pytest.mark.parametrize("missing", ["no-such-folder/x.db", "sqlite:///no-such-folder/x.db"])
def test_a_store_in_a_missing_folder_is_refused_by_every_writer(
    transcript: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "conv.json"
    data.write_text(json.dumps(CONVERSATIONS), encoding="utf-8")
    for args in (
        ("replay", transcript, "--budget", "2000", "--store", missing),
        ("demo", "--store", missing),
        ("eval", "memory", "--data", data, "--store", missing),
    ):
        assert_usage_error(run(*args), "no-such-folder", "does not exist")
    assert not (tmp_path / "no-such-folder").exists()


def test_a_folder_is_no_store(transcript: Path, tmp_path: Path) -> None:
    assert_usage_error(run("demo", "--store", tmp_path), "folder")
    result = run("replay", transcript, "--budget", "2000", "--store", tmp_path)
    assert_usage_error(result, "folder")
    assert_usage_error(run("trace", "s1", "--store", tmp_path), "folder")


def test_eval_memory_takes_a_plain_path(tmp_path: Path) -> None:
    data = tmp_path / "conv.json"
    data.write_text(json.dumps(CONVERSATIONS), encoding="utf-8")
    db = tmp_path / "memory.db"
    out = ok_json("eval", "memory", "--data", data, "--store", db, "--k", "1")
    assert out["store"] == "sqlite" and out["n"] == 1 and db.is_file()


def test_demo_store_keeps_the_sessions(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    out = ok_json("demo", "--store", db)
    assert out["checks"]["ok"] is True
    assert sessions_in(db) == {"northwind-4417", "northwind-4417-kitchen-sink"}


# -- a read-only command: nothing is created ---------------------------------------


def test_trace_refuses_a_store_that_does_not_exist(tmp_path: Path) -> None:
    for value in (tmp_path / "missing.db", f"sqlite:///{tmp_path / 'missing.db'}"):
        assert_usage_error(run("trace", "s1", "--store", value), "missing.db", "does not exist")
    assert not (tmp_path / "missing.db").exists()
    # the default, ctxwise.db in the current folder, is not created either
    assert_usage_error(run("trace", "s1"), "ctxwise.db", "does not exist")
    assert_usage_error(run("trace", "s1", "--store", "memory"), "in-memory")
    assert_usage_error(run("trace", "s1", "--store", "sqlite://"), "in-memory")


# -- a config's store: honoured by replay, never ignored -----------------------------


def replay_with(config: Path, transcript: Path, *extra: str | Path) -> Any:
    return ok_json("replay", transcript, "--budget", "2000", "--config", config, *extra)


def test_replay_keeps_the_session_in_the_configs_store(transcript: Path, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    config = folder / "ctxwise.toml"
    config.write_text('store = "sqlite:///sessions.db"\n', encoding="utf-8")
    out = replay_with(config, transcript)
    kept = folder / "sessions.db"  # a relative path in a config is the config's folder's
    assert out["store"] == {"kind": "sqlite", "from": "--config", "path": str(kept)}
    assert sessions_in(kept) == {"replay"}
    # a second replay into the same store and session is refused, not mixed in
    result = run("replay", transcript, "--budget", "2000", "--config", config)
    assert_usage_error(result, "already exists")
    # --store replaces the config's store
    other = tmp_path / "other.db"
    out = replay_with(config, transcript, "--store", other)
    assert out["store"]["from"] == "--store" and sessions_in(other) == {"replay"}


def test_replay_with_a_config_that_names_no_store_keeps_nothing(
    transcript: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "ctxwise.toml"
    config.write_text('system = "Be brief."\n', encoding="utf-8")
    out = replay_with(config, transcript)
    assert out["store"] == {"kind": "memory", "from": "default", "path": None}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ctxwise.toml", "session.json"]


def test_mcp_refuses_a_store_in_a_missing_folder_before_serving(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    result = run("mcp", "--store", tmp_path / "nowhere" / "x.db")
    assert_usage_error(result, "nowhere", "does not exist")
