"""Opening a store by URL, in the library and in ``ctxwise eval memory --store``."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from ctxwise.errors import UsageError
from ctxwise.memory import InMemoryStore, SQLiteStore, StoreURLError, open_store
from ctxwise.memory.urls import store_kind

GENERIC = {
    "conversations": [
        {
            "id": "c1",
            "turns": [
                {"id": "D1:1", "speaker": "Ann", "text": "I adopted a puppy named Rex"},
                {"id": "D1:2", "speaker": "Bo", "text": "Lovely! Where did you find him?"},
                {"id": "D1:3", "speaker": "Ann", "text": "At the café near the station"},
            ],
            "questions": [
                {"question": "What is the puppy called?", "evidence": ["D1:1"], "category": "1"},
                {"question": "Where was the cafe?", "evidence": ["D1:3"], "category": "1"},
            ],
        }
    ]
}


def test_urls_open_each_backend(tmp_path: Path) -> None:
    assert isinstance(open_store("memory"), InMemoryStore)
    store = open_store(f"sqlite:///{tmp_path / 'm.db'}")
    assert isinstance(store, SQLiteStore) and store.path == str(tmp_path / "m.db")
    store.close()
    assert isinstance(open_store("sqlite://"), SQLiteStore)
    assert store_kind("postgresql://app@db/app") == "postgresql"
    assert store_kind("postgres://app@db/app") == "postgresql"


@pytest.mark.parametrize(
    "url",
    [
        "mongodb://x/y",
        "redis://localhost",
        "",
        "memory.db",
        "sqlite://relative.db",
        "sqlite:///bad.db?mode=ro",
        "sqlite:///a\x00b.db",
        "sqlite:///a\ud800.db",  # a lone surrogate: UnicodeEncodeError from sqlite3
        "postgresql://u@h/d\udcff",
    ],
)
def test_a_bad_url_is_a_typed_usage_error(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreURLError) as caught:
        open_store(url)
    assert list(tmp_path.iterdir()) == []  # nothing was opened or written
    assert isinstance(caught.value, UsageError) and caught.value.url == url
    again = pickle.loads(pickle.dumps(caught.value))
    assert str(again) == str(caught.value) and again.reason == caught.value.reason


def test_a_password_never_shows_in_the_message() -> None:
    with pytest.raises(StoreURLError) as caught:
        open_store("mysql://app:secret@db/app")
    assert "secret" not in str(caught.value) and "app:***@db/app" in str(caught.value)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", "eval", "memory", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=os.getcwd(),
    )


def test_eval_memory_on_every_store(tmp_path: Path) -> None:
    data = tmp_path / "conv.json"
    data.write_text(json.dumps(GENERIC), encoding="utf-8")
    stores = ["memory", f"sqlite:///{tmp_path / 'eval.db'}"]
    if os.environ.get("CTXWISE_PG_DSN"):
        stores.append(os.environ["CTXWISE_PG_DSN"])
    results = []
    for url in stores:
        out = _cli("--data", str(data), "--k", "1,3", "--store", url, "--json")
        assert out.returncode == 0, out.stderr
        results.append(json.loads(out.stdout))
    assert [r["store"] for r in results] == ["memory", "sqlite", "postgresql"][: len(stores)]
    assert all(r["recall_at"] == results[0]["recall_at"] for r in results)
    assert results[0]["recall_at"]["1"] == 1.0
    again = _cli("--data", str(data), "--k", "1,3", "--store", stores[1], "--json")
    assert json.loads(again.stdout)["recall_at"] == results[0]["recall_at"]  # a rerun: same


def test_eval_memory_with_an_unknown_scheme_writes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "conv.json"
    data.write_text(json.dumps(GENERIC), encoding="utf-8")
    before = sorted(tmp_path.iterdir())
    out = _cli("--data", str(data), "--store", f"mongodb://{tmp_path}/x.db")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("ctxwise: error: bad store URL")
    assert "unknown scheme 'mongodb'" in out.stderr
    assert sorted(tmp_path.iterdir()) == before
