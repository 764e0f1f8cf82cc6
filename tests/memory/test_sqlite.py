"""SQLite specifics: migrations, schema versions, WAL durability under SIGKILL."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ctxwise.memory import SQLiteStore, StoreError
from ctxwise.memory.sqlite import SCHEMA_VERSION


def test_migrations_are_recorded_and_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    first = SQLiteStore(path)
    assert first.migrations == ["001_items", "002_fts"] and len(first.migrations) == SCHEMA_VERSION
    first.close()
    again = SQLiteStore(path)
    assert again.migrations == ["001_items", "002_fts"]
    assert again._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    again.close()


def test_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO migrations (position, name) VALUES (99, '099_future')")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="newer"):
        SQLiteStore(path)
    assert path.read_bytes() == before


def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable SQLite store"):
        SQLiteStore(path)


WRITER = textwrap.dedent(
    """
    import sys
    from ctxwise.embeddings import HashingEmbedder
    from ctxwise.memory import NewItem, SQLiteStore
    store = SQLiteStore(sys.argv[1])
    emb = HashingEmbedder(64)
    batch = 0
    while True:  # batches of 200 until killed
        texts = [f"batch {batch} item {i} about order {batch * 1000 + i}" for i in range(200)]
        items = [NewItem(t, {"batch": batch}, None, v) for t, v in zip(texts, emb.embed(texts))]
        store.put_many(("kill", "test"), items)
        print(batch, flush=True)
        batch += 1
    """
)


def test_sigkill_mid_batch_keeps_every_committed_item(tmp_path: Path) -> None:
    path = tmp_path / "kill.db"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True
    )
    committed = -1
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while committed < 5 and time.monotonic() < deadline:
        committed = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)  # mid-batch: it is always writing the next one
    proc.wait()
    proc.stdout.close()
    store = SQLiteStore(path)
    count = store.count(("kill", "test"))
    assert count % 200 == 0, "a batch was half written"
    assert count >= (committed + 1) * 200, "a committed batch was lost"
    batches = {it.metadata["batch"] for it in store.by_seq(("kill", "test"), range(count))}
    assert batches == set(range(count // 200))
    assert store.lexical_search(("kill", "test"), "order 5001", 1)[0][0].metadata["batch"] == 5
    store.close()
