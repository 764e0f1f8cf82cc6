"""StoreMemory reads only what a command names: the index of paths and the files the
command works on, never every file of the namespace; counted through a store that
records what it hands out, so the proof is structural, not a timing. Also: the
index of a namespace written before it existed, and the lock that keeps two
writers from losing one another's change to it."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ctxwise import memory_tool
from ctxwise.memory import InMemoryStore, SQLiteStore
from ctxwise.memory.store import MemoryItem, Namespace, NewItem, Store, Vector
from ctxwise.memory_tool import ROOT, MemoryTool, StoreMemory
from tests._children import child_line, python_child
from tests._stores import store_factory

NS = ("acme", "session-1")


class CountingStore(Store):
    """An in-memory store that records the id of every item it hands out, and how
    often the whole namespace was asked for."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()
        self.handed: list[str] = []
        self.recents = 0

    def _hand(self, items: list[MemoryItem]) -> list[MemoryItem]:
        self.handed += [item.id for item in items]
        return items

    def put_many(self, namespace: Sequence[str], items: Sequence[NewItem]) -> list[str]:
        return self.inner.put_many(namespace, items)

    def get_many(self, namespace: Sequence[str], ids: Sequence[str]) -> list[MemoryItem]:
        return self._hand(self.inner.get_many(namespace, ids))

    def delete(self, namespace: Sequence[str], ids: Sequence[str]) -> int:
        return self.inner.delete(namespace, ids)

    def lexical_search(
        self, namespace: Sequence[str], query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[tuple[MemoryItem, float]]:
        found = self.inner.lexical_search(namespace, query, k, filters)
        self._hand([item for item, _ in found])
        return found

    def vector_search(
        self,
        namespace: Sequence[str],
        vector: Vector,
        k: int,
        filters: Mapping[str, Any] | None = None,
    ) -> list[tuple[MemoryItem, float]]:
        found = self.inner.vector_search(namespace, vector, k, filters)
        self._hand([item for item, _ in found])
        return found

    def by_seq(self, namespace: Sequence[str], seqs: Sequence[int]) -> list[MemoryItem]:
        return self._hand(self.inner.by_seq(namespace, seqs))

    def recent(self, namespace: Sequence[str], n: int) -> list[MemoryItem]:
        self.recents += 1
        return self._hand(self.inner.recent(namespace, n))

    def namespaces(self) -> list[Namespace]:
        return self.inner.namespaces()

    def count(self, namespace: Sequence[str]) -> int:
        return self.inner.count(namespace)


def ok(tool: MemoryTool, **command: Any) -> str:
    result = tool.execute(command)
    assert not result.is_error, result.text
    return result.text


def err(tool: MemoryTool, **command: Any) -> str:
    result = tool.execute(command)
    assert result.is_error, result.text
    return result.text


COMMANDS: list[tuple[dict[str, Any], list[str]]] = [
    # (command, the files whose items it may read)
    ({"command": "create", "path": "/memories/new.md", "file_text": "n\n"}, []),
    ({"command": "create", "path": "/memories/g/h/new.md", "file_text": "n\n"}, []),
    ({"command": "view", "path": "/memories/f/0003.md"}, ["/memories/f/0003.md"]),
    (
        {"command": "view", "path": "/memories/f/0003.md", "view_range": [1, 1]},
        ["/memories/f/0003.md"],
    ),
    ({"command": "view", "path": "/memories"}, []),
    ({"command": "view", "path": "/memories/f"}, []),
    (
        {"command": "str_replace", "path": "/memories/f/0004.md", "old_str": "4", "new_str": "x"},
        ["/memories/f/0004.md"],
    ),
    (
        {"command": "insert", "path": "/memories/f/0005.md", "insert_line": 0, "insert_text": "y"},
        ["/memories/f/0005.md"],
    ),
    (
        {"command": "rename", "old_path": "/memories/f/0006.md", "new_path": "/memories/r/6.md"},
        ["/memories/f/0006.md"],
    ),
    ({"command": "delete", "path": "/memories/f/0007.md"}, []),
    ({"command": "view", "path": "/memories/missing.md"}, []),
    ({"command": "create", "path": "/memories/F/x.md", "file_text": "case clash"}, []),
    ({"command": "create", "path": "/memories/f/0008.md/x.md", "file_text": "under a file"}, []),
    (
        {"command": "rename", "old_path": "/memories/f/0009.md", "new_path": "/memories/f/0010.md"},
        [],
    ),
]


def _reads(n_files: int) -> list[tuple[list[str], int, int]]:
    """For each command of COMMANDS over a namespace of ``n_files`` files of 2 KiB:
    the file items it read, the times it read the index, and its whole-namespace reads."""
    store = CountingStore()
    tool = MemoryTool(StoreMemory(store, NS))
    for i in range(n_files):
        ok(tool, command="create", path=f"/memories/f/{i:04d}.md", file_text=f"{i}\n" * 512)
    seen = []
    for command, _ in COMMANDS:
        store.handed.clear()
        store.recents = 0
        tool.execute(command)
        files = [i for i in store.handed if i != ROOT]
        seen.append((files, store.handed.count(ROOT), store.recents))
    return seen


def test_a_command_reads_the_index_and_the_files_it_names_only() -> None:
    # the old backend decoded every file of the namespace for a command naming a
    # new path (a create read all 200 files here)
    small, large = _reads(20), _reads(200)
    for (command, allowed), (files, index_reads, recents) in zip(COMMANDS, large, strict=True):
        assert files == allowed, (command, len(files))
        assert recents == 0, command
        assert index_reads <= 8, (command, index_reads)
    # and what it reads does not grow with the namespace
    assert small == large


def test_the_index_lists_paths_and_sizes_not_contents() -> None:
    store = InMemoryStore()
    tool = MemoryTool(StoreMemory(store, NS))
    ok(tool, command="create", path="/memories/a/b.md", file_text="é" * 10)
    ok(tool, command="create", path="/memories/c.md", file_text="")
    index = store.get(NS, ROOT)
    assert index is not None
    assert dict(index.metadata) == {
        "memory_tool": ROOT,
        "version": 1,
        "files": {"a/b.md": 20, "c.md": 0},
    }
    ok(tool, command="rename", old_path="/memories/a", new_path="/memories/d")
    ok(tool, command="delete", path="/memories/c.md")
    index = store.get(NS, ROOT)
    assert index is not None
    assert index.metadata["files"] == {"d/b.md": 20}
    assert sorted(item.id for item in store.recent(NS, 10)) == [ROOT, "/memories/d/b.md"]


def _legacy(store: Store) -> None:
    """Files as the backend stored them before the index: one item per file."""
    for path, text in [("/memories/a.md", "one\n"), ("/memories/d/b.md", "two\n")]:
        store.put(NS, NewItem(path, {"content": text, "memory_tool": ROOT}, id=path))


def test_a_namespace_without_an_index_is_indexed_on_first_use() -> None:
    store = CountingStore()
    _legacy(store)
    tool = MemoryTool(StoreMemory(store, NS))
    listing = ok(tool, command="view", path="/memories")
    assert listing.split("\n")[1:] == [
        "8B\t/memories",
        "4B\t/memories/a.md",
        "4B\t/memories/d/",
        "4B\t/memories/d/b.md",
    ]
    assert store.recents == 1
    index = store.inner.get(NS, ROOT)
    assert index is not None
    assert index.metadata["files"] == {"a.md": 4, "d/b.md": 4}
    ok(tool, command="create", path="/memories/c.md", file_text="three\n")
    ok(tool, command="view", path="/memories/d")
    assert store.recents == 1


def test_a_write_indexes_a_namespace_without_an_index() -> None:
    store = InMemoryStore()
    _legacy(store)
    tool = MemoryTool(StoreMemory(store, NS))
    assert "already exists" in err(tool, command="create", path="/memories/a.md", file_text="x")
    ok(tool, command="create", path="/memories/c.md", file_text="three\n")
    index = store.get(NS, ROOT)
    assert index is not None
    assert index.metadata["files"] == {"a.md": 4, "d/b.md": 4, "c.md": 6}


def test_an_unreadable_index_is_made_again_from_the_files() -> None:
    store = InMemoryStore()
    _legacy(store)
    store.put(NS, NewItem(ROOT, {"memory_tool": ROOT, "version": 1, "files": "garbage"}, id=ROOT))
    tool = MemoryTool(StoreMemory(store, NS))
    assert "/memories/d/b.md" in ok(tool, command="view", path="/memories")
    index = store.get(NS, ROOT)
    assert index is not None
    assert index.metadata["files"] == {"a.md": 4, "d/b.md": 4}


def test_an_index_of_a_newer_version_is_a_store_error() -> None:
    from ctxwise.errors import StoreError

    store = InMemoryStore()
    store.put(NS, NewItem(ROOT, {"memory_tool": ROOT, "version": 2, "files": {}}, id=ROOT))
    with pytest.raises(StoreError, match="version 2"):
        MemoryTool(StoreMemory(store, NS)).execute({"command": "view", "path": "/memories"})


def test_a_file_that_left_the_index_is_not_seen() -> None:
    # a delete takes the path out of the index first: an item whose delete did not
    # happen (a crash between the two) is shown by no path, and a new file replaces it
    store = InMemoryStore()
    tool = MemoryTool(StoreMemory(store, NS))
    ok(tool, command="create", path="/memories/a.md", file_text="old\n")
    store.put(NS, NewItem(ROOT, {"memory_tool": ROOT, "version": 1, "files": {}}, id=ROOT))
    assert "does not exist" in err(tool, command="view", path="/memories/a.md")
    ok(tool, command="create", path="/memories/a.md", file_text="new\n")
    assert ok(tool, command="view", path="/memories/a.md").endswith("\tnew")


def test_a_refused_write_leaves_the_index_as_it_was() -> None:
    # a path over the store's key limit is refused before anything is stored; the
    # index a store handed out is not changed in place either
    store = InMemoryStore()
    tool = MemoryTool(StoreMemory(store, NS))
    ok(tool, command="create", path="/memories/ok.md", file_text="x")
    long = "/memories/" + "/".join(["é" * 120] * 8)
    for command in (
        {"command": "create", "path": long, "file_text": "x"},
        {"command": "rename", "old_path": "/memories/ok.md", "new_path": long},
    ):
        text = err(tool, **command)
        assert text.startswith("Error: the path /memories/éé")
        assert text.endswith(
            "is 1,937 bytes long in UTF-8, over the 1,200 bytes a store keys a file by; "
            "use shorter names."
        )
    index = store.get(NS, ROOT)
    assert index is not None
    assert index.metadata["files"] == {"ok.md": 1}
    listing = ok(tool, command="view", path="/memories")
    assert listing.split("\n")[1:] == ["1B\t/memories", "1B\t/memories/ok.md"]


# ------------------------------------------------------------------ the lock --

LOCK = "ctxwise.memory_tool:acme/session-1"


def test_a_change_waits_for_the_lock_and_is_refused_when_it_stays_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memory_tool._store, "_LOCK_PAUSE", 0.0)
    monkeypatch.setattr(memory_tool._store, "_LOCK_TRIES", 3)
    store = InMemoryStore()
    tool = MemoryTool(StoreMemory(store, NS))
    ok(tool, command="create", path="/memories/a.md", file_text="a\n")
    with store.exclusive(LOCK):
        for command in (
            {"command": "create", "path": "/memories/b.md", "file_text": "b"},
            {"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": "x"},
            {"command": "delete", "path": "/memories/a.md"},
            {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/c.md"},
        ):
            text = err(tool, **command)
            assert text == (
                "Error: another program is changing these memory files right now; nothing "
                "was changed. Try the command again."
            )
        assert ok(tool, command="view", path="/memories/a.md").endswith("\ta")  # reads go on
    ok(tool, command="create", path="/memories/b.md", file_text="b")
    index = store.get(NS, ROOT)
    assert index is not None
    assert index.metadata["files"] == {"a.md": 2, "b.md": 1}


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_writers_in_threads_lose_no_file(kind: str, tmp_path: Path) -> None:
    with store_factory(kind, tmp_path) as factory:
        errors: list[str] = []

        def writer(n: int) -> None:
            tool = MemoryTool(StoreMemory(factory(), NS))
            for i in range(10):
                result = tool.execute(
                    {"command": "create", "path": f"/memories/t{n}/{i}.md", "file_text": "x"}
                )
                if result.is_error:
                    errors.append(result.text)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        tool = MemoryTool(StoreMemory(factory(), NS))
        for n in range(4):
            listing = ok(tool, command="view", path=f"/memories/t{n}")
            assert len(listing.split("\n")) == 2 + 10, listing


HOLDER = """
import sys
from ctxwise.memory import SQLiteStore
store = SQLiteStore(sys.argv[1])
with store.exclusive(sys.argv[2]):
    print("held", flush=True)
    sys.stdin.readline()
store.close()
"""


def test_another_process_holding_the_lock_refuses_a_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_tool._store, "_LOCK_PAUSE", 0.0)
    monkeypatch.setattr(memory_tool._store, "_LOCK_TRIES", 2)
    path = tmp_path / "m.db"
    store = SQLiteStore(path)
    try:
        tool = MemoryTool(StoreMemory(store, NS))
        ok(tool, command="create", path="/memories/a.md", file_text="a")
        with python_child(HOLDER, str(path), LOCK) as child:
            assert child_line(child) == "held"
            text = err(tool, command="create", path="/memories/b.md", file_text="b")
            assert "another program is changing these memory files" in text
            assert child.stdin is not None
            child.stdin.write("\n")
            child.stdin.flush()
            child.wait()
        ok(tool, command="create", path="/memories/b.md", file_text="b")
    finally:
        store.close()
