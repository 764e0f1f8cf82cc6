"""``replay`` into a store that outlives it, on a real recording (QA, stop 25)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxwise.config import EngineConfig
from ctxwise.errors import CompactionBudgetError
from ctxwise.formats import read_transcripts
from ctxwise.replay import replay
from ctxwise.sessions import SQLiteSessionStore
from tests._cli import assert_usage_error, run

# gpt-4o-airline.json[0] at 1,600 tokens: the first turns fit, a later one must keep more
# (counted by char with no safety margin, as these budgets were found)
FAILS_LATER, FITS = 1600, 1700
CHAR = 'counter = "char"\nsafety_margin = 0\n'


@pytest.fixture(scope="module")
def tau(data_dir: Path) -> Path:
    return data_dir / "transcripts" / "tau_bench" / "gpt-4o-airline.json"


def _sessions(db: Path) -> dict[str, int]:
    with SQLiteSessionStore(db) as store:
        return {s: store.version(s) for s in store.sessions()}


def test_a_replay_that_fails_at_a_later_turn_keeps_no_partial_session(
    tau: Path, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    transcript = read_transcripts(tau)[0]
    config = EngineConfig(store=f"sqlite:///{db}", counter="char", safety_margin=0)
    with pytest.raises(CompactionBudgetError):
        replay(transcript, budget=FAILS_LATER, config=config, repair=True)
    # two turns had been committed before the third failed, so the same replay with a
    # budget that fits was refused: "session 'replay' already exists"
    assert _sessions(db) == {}
    report = replay(transcript, budget=FITS, config=config, repair=True)
    assert _sessions(db) == {"replay": report.turns} and report.turns == 15


def test_replay_cli_that_fails_leaves_the_db_without_the_session(tau: Path, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    url = f"sqlite:///{db}"
    char = tmp_path / "char.toml"
    char.write_text(CHAR, encoding="utf-8")
    args = ("replay", tau, "--repair", "--db", url, "--session", "airline-0", "--config", char)
    assert_usage_error(run(*args, "--budget", str(FAILS_LATER)), "budget", "too small")
    assert _sessions(db) == {}
    result = run(*args, "--budget", str(FITS), "--json")
    assert result.exit_code == 0, result.stderr
    assert _sessions(db) == {"airline-0": 15}


def _config_elsewhere(tmp_path: Path) -> Path:
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "system.txt").write_text("You answer for the airline.", encoding="utf-8")
    (folder / "ctxwise.toml").write_text(f'system_file = "system.txt"\n{CHAR}', encoding="utf-8")
    (tmp_path / "cwd").mkdir()
    return folder / "ctxwise.toml"


def test_replay_resolves_the_configs_files_from_its_folder(
    tau: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxwise.config import load_config

    config = _config_elsewhere(tmp_path)
    monkeypatch.chdir(tmp_path / "cwd")
    # the config was re-validated from its dump, which leaves base_dir out, so
    # system.txt was looked for in the working folder: ConfigError 'no such file'
    result = run("replay", tau, "--repair", "--budget", str(FITS), "--config", config, "--json")
    assert result.exit_code == 0, result.stderr
    # a relative --db stays the shell's: it is made in the working folder
    result = run(
        "replay", tau, "--repair", "--budget", str(FITS), "--config", config,
        "--db", "sqlite:///runs.db", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert _sessions(tmp_path / "cwd" / "runs.db") == {"replay": 15}
    assert sorted(p.name for p in config.parent.iterdir()) == ["ctxwise.toml", "system.txt"]
    # the library keeps the config's own store, sqlite:///ctxwise.db beside the config
    report = replay(read_transcripts(tau)[0], budget=FITS, config=load_config(config), repair=True)
    assert report.turns == 15
    assert _sessions(config.parent / "ctxwise.db") == {"replay": 15}
    assert not (tmp_path / "cwd" / "ctxwise.db").exists()
