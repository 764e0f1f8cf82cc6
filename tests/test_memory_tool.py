"""The memory tool backend: every command on both backends, path confinement,
pagination, the size cap, and the SDK's tool runner driving the adapter."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxwise import memory_tool
from ctxwise.errors import UsageError
from ctxwise.memory import InMemoryStore, SQLiteStore
from ctxwise.memory_tool import (
    DirectoryMemory,
    MemoryBackend,
    MemoryResult,
    MemoryTool,
    StoreMemory,
    check_path,
)

BACKENDS = ["directory", "sqlite", "memory"]


def _backend(kind: str, tmp_path: Path) -> Iterator[MemoryBackend]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    if kind == "directory":
        yield DirectoryMemory(tmp_path / "root")
    elif kind == "sqlite":
        store = SQLiteStore(tmp_path / "m.db")
        try:
            yield StoreMemory(store, ("acme", "session-1"))
        finally:
            store.close()
    else:
        yield StoreMemory(InMemoryStore(), ("acme", "session-1"))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryBackend]:
    yield from _backend(request.param, tmp_path)


@pytest.fixture
def tool(backend: MemoryBackend) -> MemoryTool:
    return MemoryTool(backend)


def ok(tool: MemoryTool, **command: Any) -> str:
    result = tool.execute(command)
    assert not result.is_error, result.text
    return result.text


def err(tool: MemoryTool, **command: Any) -> str:
    result = tool.execute(command)
    assert result.is_error, result.text
    return result.text


def content(tool: MemoryTool, path: str) -> str:
    text = ok(tool, command="view", path=path)
    rows = text.split("\n")[1:]
    return "".join(row.split("\t", 1)[1] + "\n" for row in rows)


# ------------------------------------------------------------------ commands --


def test_create_and_view_a_file(tool: MemoryTool) -> None:
    assert ok(tool, command="create", path="/memories/notes.md", file_text="one\ntwo\n") == (
        "File created successfully at: /memories/notes.md"
    )
    assert ok(tool, command="view", path="/memories/notes.md") == (
        "Here's the content of /memories/notes.md with line numbers:\n     1\tone\n     2\ttwo"
    )
    assert ok(tool, command="view", path="/memories/notes.md", view_range=[2, -1]).endswith(
        "with line numbers:\n     2\ttwo"
    )
    assert ok(tool, command="view", path="/memories/notes.md", view_range=[1, 1]).endswith(
        "     1\tone"
    )


def test_create_refuses_an_existing_file_and_keeps_it(tool: MemoryTool) -> None:
    ok(tool, command="create", path="/memories/a.md", file_text="first\n")
    text = err(tool, command="create", path="/memories/a.md", file_text="second\n")
    assert "/memories/a.md already exists" in text
    assert content(tool, "/memories/a.md") == "first\n"


def test_create_makes_folders_and_view_lists_them(tool: MemoryTool) -> None:
    ok(tool, command="create", path="/memories/projects/x/plan.md", file_text="plan\n")
    ok(tool, command="create", path="/memories/todo.md", file_text="todo\n")
    listing = ok(tool, command="view", path="/memories")
    lines = listing.split("\n")
    assert lines[0] == (
        "Here're the files and directories up to 2 levels deep in /memories, "
        "excluding hidden items:"
    )
    paths = [line.split("\t")[1] for line in lines[1:]]
    assert paths == [
        "/memories",
        "/memories/projects/",
        "/memories/projects/x/",
        "/memories/todo.md",
    ]
    assert ok(tool, command="view", path="/memories/").split("\n")[1:] == lines[1:]
    sub = ok(tool, command="view", path="/memories/projects/x")
    assert sub.split("\n")[-1] == "5B\t/memories/projects/x/plan.md"


def test_view_of_empty_root(tool: MemoryTool) -> None:
    lines = ok(tool, command="view", path="/memories").split("\n")
    assert lines[1:] == ["0B\t/memories"]


def test_str_replace(tool: MemoryTool) -> None:
    ok(tool, command="create", path="/memories/a.md", file_text="l1\nl2\nl3 cat\nl4\nl5\nl6\n")
    text = ok(tool, command="str_replace", path="/memories/a.md", old_str="cat", new_str="dog")
    assert text == (
        "The memory file has been edited. Here is the snippet showing the change "
        "(with line numbers):\n     1\tl1\n     2\tl2\n     3\tl3 dog\n     4\tl4\n     5\tl5"
    )
    assert content(tool, "/memories/a.md") == "l1\nl2\nl3 dog\nl4\nl5\nl6\n"
    missing = err(tool, command="str_replace", path="/memories/a.md", old_str="cow", new_str="x")
    assert missing == (
        "No replacement was performed, old_str `cow` did not appear verbatim in /memories/a.md."
    )
    many = err(tool, command="str_replace", path="/memories/a.md", old_str="l", new_str="x")
    assert "Multiple occurrences of old_str `l` in lines: 1, 2, 3, 4, 5, 6" in many
    assert content(tool, "/memories/a.md") == "l1\nl2\nl3 dog\nl4\nl5\nl6\n"
    gone = err(tool, command="str_replace", path="/memories/b.md", old_str="a", new_str="b")
    assert "/memories/b.md does not exist" in gone


def test_insert(tool: MemoryTool) -> None:
    ok(tool, command="create", path="/memories/a.md", file_text="one\ntwo\n")
    assert ok(
        tool, command="insert", path="/memories/a.md", insert_line=0, insert_text="zero\n"
    ) == ("The file /memories/a.md has been edited.")
    ok(tool, command="insert", path="/memories/a.md", insert_line=3, insert_text="three")
    assert content(tool, "/memories/a.md") == "zero\none\ntwo\nthree\n"
    text = err(tool, command="insert", path="/memories/a.md", insert_line=9, insert_text="x")
    assert text == "Invalid `insert_line` parameter: 9. It should be within the range [0, 4]."
    err(tool, command="insert", path="/memories/a.md", insert_line="1", insert_text="x")
    assert content(tool, "/memories/a.md") == "zero\none\ntwo\nthree\n"


def test_delete_file_and_folder(tool: MemoryTool) -> None:
    ok(tool, command="create", path="/memories/a.md", file_text="a")
    ok(tool, command="create", path="/memories/d/b.md", file_text="b")
    ok(tool, command="create", path="/memories/d/e/c.md", file_text="c")
    assert (
        ok(tool, command="delete", path="/memories/a.md") == "Successfully deleted /memories/a.md"
    )
    assert ok(tool, command="delete", path="/memories/d") == "Successfully deleted /memories/d"
    assert ok(tool, command="view", path="/memories").split("\n")[1:] == ["0B\t/memories"]
    assert "does not exist" in err(tool, command="delete", path="/memories/a.md")
    assert "itself" in err(tool, command="delete", path="/memories")


def test_rename_file_and_folder(tool: MemoryTool) -> None:
    ok(tool, command="create", path="/memories/a.md", file_text="a\n")
    ok(tool, command="create", path="/memories/d/b.md", file_text="b\n")
    assert ok(tool, command="rename", old_path="/memories/a.md", new_path="/memories/n/a2.md") == (
        "Successfully renamed /memories/a.md to /memories/n/a2.md"
    )
    assert content(tool, "/memories/n/a2.md") == "a\n"
    assert "does not exist" in err(tool, command="view", path="/memories/a.md")
    ok(tool, command="rename", old_path="/memories/d", new_path="/memories/e")
    assert content(tool, "/memories/e/b.md") == "b\n"
    assert "does not exist" in err(tool, command="view", path="/memories/d")
    taken = err(tool, command="rename", old_path="/memories/e/b.md", new_path="/memories/n/a2.md")
    assert "the destination /memories/n/a2.md already exists" in taken
    assert "into itself" in err(
        tool, command="rename", old_path="/memories/e", new_path="/memories/e/f"
    )
    assert "does not exist" in err(
        tool, command="rename", old_path="/memories/z", new_path="/memories/y"
    )
    assert "itself" in err(tool, command="rename", old_path="/memories", new_path="/memories/y")
    assert content(tool, "/memories/e/b.md") == "b\n"


def test_a_file_is_not_a_folder(tool: MemoryTool) -> None:
    ok(tool, command="create", path="/memories/a.md", file_text="a")
    err(tool, command="create", path="/memories/a.md/b.md", file_text="b")
    assert content(tool, "/memories/a.md") == "a\n"
    ok(tool, command="create", path="/memories/d/b.md", file_text="b")
    assert "is a folder" in err(tool, command="create", path="/memories/d", file_text="x")
    assert "is a folder" in err(
        tool, command="str_replace", path="/memories/d", old_str="b", new_str="c"
    )


def test_nothing_goes_under_a_file(tool: MemoryTool) -> None:
    # both backends say which file is in the way (the directory one said "File exists")
    ok(tool, command="create", path="/memories/a.md", file_text="x")
    ok(tool, command="create", path="/memories/b.md", file_text="y")
    for command in (
        {"command": "create", "path": "/memories/a.md/b.md", "file_text": "z"},
        {"command": "rename", "old_path": "/memories/b.md", "new_path": "/memories/a.md/b.md"},
    ):
        text = err(tool, **command)
        assert text == "Error: /memories/a.md is a file, so /memories/a.md/b.md cannot be under it."
    assert content(tool, "/memories/a.md") == "x\n"
    assert content(tool, "/memories/b.md") == "y\n"


def test_state_survives_reopening_a_sqlite_store(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    ok(
        MemoryTool(StoreMemory(store, ("t", "s"))),
        command="create",
        path="/memories/a.md",
        file_text="kept",
    )
    store.close()
    store = SQLiteStore(tmp_path / "m.db")
    try:
        assert content(MemoryTool(StoreMemory(store, ("t", "s"))), "/memories/a.md") == "kept\n"
        other = MemoryTool(StoreMemory(store, ("t", "other")))
        assert "does not exist" in err(other, command="view", path="/memories/a.md")
    finally:
        store.close()


def test_directory_backend_writes_files_under_root(tmp_path: Path) -> None:
    tool = MemoryTool(DirectoryMemory(tmp_path / "root"))
    ok(tool, command="create", path="/memories/x/a.md", file_text="hello")
    assert (tmp_path / "root" / "x" / "a.md").read_text() == "hello"
    ok(tool, command="str_replace", path="/memories/x/a.md", old_str="hello", new_str="bye")
    assert (tmp_path / "root" / "x" / "a.md").read_text() == "bye"
    assert sorted(os.listdir(tmp_path / "root" / "x")) == ["a.md"]  # no temporary file left


# ------------------------------------------------------------------ parameters --


@pytest.mark.parametrize(
    ("command", "named"),
    [
        ({"command": "create", "path": "/memories/a.md"}, "missing file_text"),
        ({"command": "create", "file_text": "x"}, "missing path"),
        (
            {"command": "create", "path": "/memories/a.md", "file_text": "x", "mode": "w"},
            "unknown mode",
        ),
        ({"command": "str_replace", "path": "/memories/a.md", "old_str": "a"}, "missing new_str"),
        (
            {"command": "insert", "path": "/memories/a.md", "insert_text": "a"},
            "missing insert_line",
        ),
        ({"command": "rename", "old_path": "/memories/a.md"}, "missing new_path"),
        (
            {"command": "rename", "path": "/memories/a.md", "new_path": "/memories/b"},
            "missing old_path",
        ),
        ({"command": "delete", "path": "/memories/a.md", "recursive": True}, "unknown recursive"),
        ({"command": "view", "path": "/memories/a.md", "range": [1, 2]}, "unknown range"),
        ({"command": "create", "path": 7, "file_text": "x"}, "`path` must be a string"),
        (
            {"command": "create", "path": "/memories/a.md", "file_text": ["x"]},
            "`file_text` must be a string",
        ),
        ({"command": "erase", "path": "/memories/a.md"}, "unknown command 'erase'"),
        ({"path": "/memories/a.md"}, "unknown command None"),
    ],
)
def test_bad_parameters_are_named_and_nothing_is_written(
    tool: MemoryTool, command: dict[str, Any], named: str
) -> None:
    result = tool.execute(command)
    assert result.is_error
    assert named in result.text
    assert ok(tool, command="view", path="/memories").split("\n")[1:] == ["0B\t/memories"]


def test_bad_view_range(tool: MemoryTool) -> None:
    ok(tool, command="create", path="/memories/a.md", file_text="1\n2\n3\n")
    for bad in ([0, 2], [2, 1], [1, 9], [4, -1], [1], "1-2", [1.0, 2], [True, 2]):
        text = err(tool, command="view", path="/memories/a.md", view_range=bad)
        assert "view_range" in text
    assert "folder" in err(tool, command="view", path="/memories", view_range=[1, 2])


def test_an_empty_file_reads_to_its_end(tool: MemoryTool) -> None:
    # [1, -1] is "from the top to the end": an empty file has no lines, not a bad range
    ok(tool, command="create", path="/memories/empty.md", file_text="")
    text = ok(tool, command="view", path="/memories/empty.md", view_range=[1, -1])
    assert text == "Here's the content of /memories/empty.md with line numbers:"
    for bad in ([2, -1], [1, 1], [0, -1]):
        assert "view_range" in err(tool, command="view", path="/memories/empty.md", view_range=bad)


def test_execute_never_raises_for_a_non_mapping(tool: MemoryTool) -> None:
    assert tool.execute("view /memories").is_error  # type: ignore[arg-type]


def test_bad_constructor_arguments_raise_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        MemoryTool("not a backend")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        MemoryTool(StoreMemory(InMemoryStore(), ("t",)), max_file_bytes=0)
    with pytest.raises(UsageError):
        MemoryTool(StoreMemory(InMemoryStore(), ("t",)), max_view_chars=True)
    with pytest.raises(UsageError):
        StoreMemory(InMemoryStore(), "tenant")
    with pytest.raises(UsageError):
        StoreMemory({}, ("t",))  # type: ignore[arg-type]
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError):
        DirectoryMemory(tmp_path / "file")
    with pytest.raises(UsageError):
        DirectoryMemory(tmp_path / "missing", create=False)
    with pytest.raises(UsageError):
        check_path("/etc/passwd")
    assert check_path("/memories/a/b.md") == ("a", "b.md")
    assert check_path("/memories") == ()


# ------------------------------------------------------------------ size and pages --


def test_size_cap(backend: MemoryBackend) -> None:
    tool = MemoryTool(backend, max_file_bytes=100)
    text = err(tool, command="create", path="/memories/big.md", file_text="x" * 101)
    assert "/memories/big.md would be 101 bytes, over the 100-byte limit" in text
    assert "does not exist" in err(tool, command="view", path="/memories/big.md")
    ok(tool, command="create", path="/memories/a.md", file_text="é" * 49)  # 98 bytes
    err(tool, command="str_replace", path="/memories/a.md", old_str="é", new_str="éé")
    err(tool, command="insert", path="/memories/a.md", insert_line=0, insert_text="abc")
    assert content(tool, "/memories/a.md") == "é" * 49 + "\n"


def test_default_size_cap_is_one_mebibyte(tool: MemoryTool) -> None:
    ok(tool, command="create", path="/memories/full.md", file_text="x" * (1 << 20))
    err(tool, command="create", path="/memories/over.md", file_text="x" * ((1 << 20) + 1))


def test_a_file_over_the_cap_on_disk_is_not_read(tmp_path: Path) -> None:
    root = tmp_path / "root"
    tool = MemoryTool(DirectoryMemory(root), max_file_bytes=10)
    (root / "big.md").write_text("x" * 11)
    assert "limit" in err(tool, command="view", path="/memories/big.md")


def test_long_view_is_paginated(tool: MemoryTool) -> None:
    paged = MemoryTool(tool.backend, max_view_chars=200)
    body = "".join(f"line number {i:03d}\n" for i in range(1, 101))
    ok(paged, command="create", path="/memories/long.md", file_text=body)
    first = ok(paged, command="view", path="/memories/long.md")
    assert len(first) < 400
    assert first.endswith(
        "[Showing lines 1-8 of 100. To read the rest, call view with view_range [9, -1].]"
    )
    seen: list[str] = []
    start = 1
    while True:
        page = ok(paged, command="view", path="/memories/long.md", view_range=[start, -1])
        rows = page.split("\n")[1:]
        if rows[-1].startswith("[Showing"):
            start = int(rows[-1].split("view_range [")[1].split(",")[0])
            rows = rows[:-1]
            seen += [r.split("\t", 1)[1] for r in rows]
        else:
            seen += [r.split("\t", 1)[1] for r in rows]
            break
    assert "".join(s + "\n" for s in seen) == body
    bounded = ok(paged, command="view", path="/memories/long.md", view_range=[1, 50])
    assert bounded.endswith("call view with view_range [9, 50].]")


def test_a_line_longer_than_a_page_is_cut(tool: MemoryTool) -> None:
    paged = MemoryTool(tool.backend, max_view_chars=50)
    ok(paged, command="create", path="/memories/wide.md", file_text="y" * 500 + "\nz\n")
    page = ok(paged, command="view", path="/memories/wide.md")
    assert "was cut" in page
    assert "view_range [2, -1]" in page


def test_long_listing_is_cut(tool: MemoryTool) -> None:
    for i in range(30):
        ok(tool, command="create", path=f"/memories/file-{i:02d}.md", file_text="x")
    paged = MemoryTool(tool.backend, max_view_chars=200)
    listing = ok(paged, command="view", path="/memories")
    assert "more entries not shown" in listing
    assert len(listing) < 400


# ------------------------------------------------------------------ bounded results --
# every result goes back into the model's window, so none may grow with what was sent


def test_an_old_str_found_many_times_is_answered_briefly(tool: MemoryTool) -> None:
    # every occurrence was listed (an error of about 120,000 characters here; of
    # 3,000,102 at a million occurrences), each found by a scan from the top
    ok(tool, command="create", path="/memories/many.md", file_text="ab\n" * 20_000)
    text = err(tool, command="str_replace", path="/memories/many.md", old_str="ab", new_str="x")
    assert len(text) < 300
    assert text == (
        "No replacement was performed. Multiple occurrences of old_str `ab` in lines: "
        "1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 19,990 more (20,000 in all). Please ensure it is unique"
    )
    assert tool.backend.read(("many.md",), 1 << 20) == "ab\n" * 20_000


def test_the_lines_of_repeated_matches_are_counted_right(tool: MemoryTool) -> None:
    ok(tool, command="create", path="/memories/a.md", file_text="x\n\nx x\n\n\nx\n")
    text = err(tool, command="str_replace", path="/memories/a.md", old_str="x", new_str="y")
    assert "in lines: 1, 3, 3, 6. Please ensure it is unique" in text
    # occurrences count without overlap, as str.count does: "aa" is once in "aaa"
    ok(tool, command="create", path="/memories/b.md", file_text="aaa\n")
    ok(tool, command="str_replace", path="/memories/b.md", old_str="aa", new_str="b")
    assert content(tool, "/memories/b.md") == "ba\n"
    ok(tool, command="create", path="/memories/c.md", file_text="aaaa")
    text = err(tool, command="str_replace", path="/memories/c.md", old_str="aa", new_str="b")
    assert "in lines: 1, 1. Please ensure it is unique" in text


def test_a_long_old_str_that_is_missing_is_quoted_short(tool: MemoryTool) -> None:
    ok(tool, command="create", path="/memories/a.md", file_text="short\n")
    old = "z" * 500_000
    text = err(tool, command="str_replace", path="/memories/a.md", old_str=old, new_str="x")
    assert len(text) < 400
    assert text == (
        f"No replacement was performed, old_str `{'z' * memory_tool.MAX_QUOTE_CHARS}… "
        "(500,000 characters)` did not appear verbatim in /memories/a.md."
    )
    ok(tool, command="create", path="/memories/b.md", file_text=old + "\n" + old)
    text = err(tool, command="str_replace", path="/memories/b.md", old_str=old, new_str="x")
    assert len(text) < 400
    assert "(500,000 characters)` in lines: 1, 2." in text


def test_the_snippet_of_a_long_replacement_is_cut(tool: MemoryTool) -> None:
    paged = MemoryTool(tool.backend, max_view_chars=200)
    ok(paged, command="create", path="/memories/a.md", file_text="a\nb\nc\n")
    text = ok(paged, command="str_replace", path="/memories/a.md", old_str="b", new_str="x" * 5000)
    assert len(text) < 500
    assert text.endswith(
        "\n[the snippet is cut at 200 characters; view /memories/a.md to read the change]"
    )
    assert content(tool, "/memories/a.md") == "a\n" + "x" * 5000 + "\nc\n"


HUGE_INT = 10**5000  # repr() and str() refuse integers over 4,300 digits
BOUNDED = [
    {"command": "x" * 100_000, "path": "/memories/a.md"},
    {"command": HUGE_INT},
    {"command": ["view"], "path": "/memories/a.md"},
    {"command": {"view": 1}, "path": "/memories/a.md"},
    {"command": "view", "path": "/memories/a.md", **{f"k{i}" * 500: 1 for i in range(1_000)}},
    {"command": "view", "path": "/memories/a.md", "view_range": [1, HUGE_INT]},
    {"command": "view", "path": "/memories/a.md", "view_range": [HUGE_INT, -1]},
    {"command": "view", "path": "/memories/a.md", "view_range": [HUGE_INT]},
    {"command": "view", "path": "/memories/a.md", "view_range": list(range(100_000))},
    {"command": "view", "path": "/memories/a.md", "view_range": "9" * 100_000},
    {"command": "insert", "path": "/memories/a.md", "insert_line": HUGE_INT, "insert_text": "x"},
    {"command": "insert", "path": "/memories/a.md", "insert_line": -HUGE_INT, "insert_text": "x"},
    {"command": "insert", "path": "/memories/a.md", "insert_line": "9" * 10**5, "insert_text": "x"},
    {
        "command": "insert",
        "path": "/memories/a.md",
        "insert_line": [[1]] * 10**5,
        "insert_text": "",
    },
    {"command": "create", "path": "/memories/" + "a" * 1000, "file_text": "x"},
    {"command": "create", "path": "/memories/" + "\u0000" * 1000, "file_text": "x"},
    {"command": "create", "path": "/memories/" + "\U0010fffe" * 1000, "file_text": "x"},
    {"command": "create", "path": "/memories/." + "\U000e0001" * 1000, "file_text": "x"},
    {"command": "create", "path": "/memories/" + "a/" * 500 + "CON", "file_text": "x"},
    {"command": "view", "path": "/elsewhere/" + "\x01" * 1000},
    {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/" + "\u2215" * 900},
    {"command": "str_replace", "path": "/memories/a.md", "old_str": "y" * 10**6, "new_str": ""},
]


@pytest.mark.parametrize("command", BOUNDED, ids=range(len(BOUNDED)))
def test_every_error_is_short_whatever_was_sent(tool: MemoryTool, command: dict[str, Any]) -> None:
    ok(tool, command="create", path="/memories/a.md", file_text="one\n")
    result = tool.execute(command)
    assert result.is_error
    assert len(result.text) < 1_000, (len(result.text), result.text[:300])
    assert content(tool, "/memories/a.md") == "one\n"


def test_check_path_of_a_huge_integer_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="too large to show"):
        check_path(HUGE_INT)


def test_an_error_longer_than_the_cap_is_cut_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    class Loud(MemoryBackend):
        def kind(self, parts: tuple[str, ...]) -> Any:
            raise UsageError("Error: " + "x" * 10_000)

        read = write = listing = remove = move = kind  # type: ignore[assignment]

    text = err(MemoryTool(Loud()), command="view", path="/memories/a.md")
    assert len(text) < memory_tool.MAX_ERROR_CHARS + 50
    assert text.endswith("… (error cut: 10,007 characters)")


# ------------------------------------------------------------------ hostile paths --

HOSTILE = [
    "",
    "/",
    "memories",
    "memories/a.md",
    "./memories/a.md",
    "a.md",
    "../a.md",
    "/etc/passwd",
    "/tmp/memories/a.md",
    "/memoriesX",
    "/memoriesX/a.md",
    "/memories-evil/a.md",
    "/Memories/a.md",
    "//memories/a.md",
    "~/memories/a.md",
    "file:///memories/a.md",
    "/memories/..",
    "/memories/../etc/passwd",
    "/memories/a/../../outside/secret.txt",
    "/memories/a/../b.md",
    "/memories/.",
    "/memories/./a.md",
    "/memories/...",
    "/memories/.hidden",
    "/memories//a.md",
    "/memories/a//b.md",
    "/memories///",
    "/memories//",
    "/memories/a.md.",
    "/memories/a.md ",
    "/memories/ a.md",
    "/memories/notes./a.md",
    "/memories/a\u3000",
    "/memories\\..\\outside\\secret.txt",
    "/memories/a\\b.md",
    "/memories/..\\secret.txt",
    "/memories/%2e%2e/outside/secret.txt",
    "/memories/%2E%2E/outside/secret.txt",
    "/memories/%2e%2e%2foutside%2fsecret.txt",
    "/memories/%252e%252e/outside/secret.txt",
    "/memories/%252e%252e%252foutside",
    "/memories/a%2fb.md",
    "/memories%2f..%2foutside",
    "/memories/%c0%ae%c0%ae/outside",
    "/memories/%00.md",
    "/memories/\x00",
    "/memories/a.md\x00.txt",
    "/memories/\u2024\u2024/outside/secret.txt",
    "/memories/\u2025/outside/secret.txt",
    "/memories/\uff0e\uff0e/outside/secret.txt",
    "/memories/\ufe52\ufe52/outside/secret.txt",
    "/memories/\u2026/outside",
    "/memories/\u3002\u3002/outside",
    "/memories/\uff61\uff61/outside",
    "/memories/\u0701\u0701/outside",
    "/memories/\uff0fetc",
    "/memories/a\uff3cb",
    "/memories/\uff4d\uff45\uff4d.md",
    "/memories/\u200b../outside",
    "/memories/\u202e..",
    "/memories/a\nb.md",
    "/memories/a\r",
    "/memories/\t",
    "/memories/\x1b[2J",
    "/memories/" + "a" * 300,
    "/memories/" + "a/" * 600 + "b",
    "/memories/CON",
    "/memories/nul.md",
    "/memories/com1/a.md",
    "/memories/Lpt9.txt.md",
    "/memories/a:b.md",
    "/memories/notes.md:stream",
    "/memories/what?.md",
    "/memories/<a>.md",
    # slash and backslash look-alikes: one name each, but they read as traversal
    "/memories/\u2215..\u2215..\u2215etc",
    "/memories/\u2044..\u2044etc\u2044passwd",
    "/memories/\u29f8etc\u29f8passwd",
    "/memories/\u2571..\u2571outside",
    "/memories/\u27cb..\u27cbsecret.txt",
    "/memories/\uff0f..\uff0fetc",
    "/memories/a\u2216b.md",
    "/memories/\u29f5..\u29f5outside",
    "/memories/\u2572..\u2572secret.txt",
    "/memories/\u0338etc",
    "/memories/a\U0001f67cb.md",
    "/memories/\u2afd..\u2afdetc",
    # Windows device names, with and without an extension, in any case
    "/memories/CONIN$",
    "/memories/conout$.md",
    "/memories/Conin$/a.md",
    "/memories/CONOUT$.txt.md",
    "/memories/Aux",
    "/memories/prn.md",
    "/memories/NUL.tar.gz",
    "/memories/COM9",
    "/memories/lpt1.md",
    "/memories/nul .md",
]


def test_the_hostile_list_is_long_enough() -> None:
    assert len(HOSTILE) >= 90
    assert len(set(HOSTILE)) == len(HOSTILE)


def _hostile_commands(path: str) -> list[dict[str, Any]]:
    return [
        {"command": "view", "path": path},
        {"command": "view", "path": path, "view_range": [1, 1]},
        {"command": "create", "path": path, "file_text": "pwned"},
        {"command": "str_replace", "path": path, "old_str": "secret", "new_str": "pwned"},
        {"command": "insert", "path": path, "insert_line": 0, "insert_text": "pwned"},
        {"command": "delete", "path": path},
        {"command": "rename", "old_path": path, "new_path": "/memories/stolen.md"},
        {"command": "rename", "old_path": "/memories/keep.md", "new_path": path},
    ]


@pytest.mark.parametrize("path", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_paths_are_refused_on_every_backend(path: str, tmp_path: Path) -> None:
    for kind in BACKENDS:
        for backend in _backend(kind, tmp_path / kind):
            tool = MemoryTool(backend)
            ok(tool, command="create", path="/memories/keep.md", file_text="secret\n")
            before = ok(tool, command="view", path="/memories")
            for command in _hostile_commands(path):
                result = tool.execute(command)
                assert result.is_error, (kind, command, result.text)
                assert result.text.strip()
            assert ok(tool, command="view", path="/memories") == before
            assert content(tool, "/memories/keep.md") == "secret\n"
    with pytest.raises(UsageError):
        check_path(path)


def _snapshot(folder: Path) -> dict[str, Any]:
    shot: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            st = p.lstat()
            if p.is_symlink():
                shot[str(p.relative_to(folder))] = ("link", os.readlink(p))
            elif p.is_file():
                shot[str(p.relative_to(folder))] = ("file", p.read_bytes(), st.st_mode)
            else:
                shot[str(p.relative_to(folder))] = ("dir", st.st_mode)
    return shot


ESCAPES = [
    "/memories/out",
    "/memories/out/secret.txt",
    "/memories/out/new.md",
    "/memories/out/sub/new.md",
    "/memories/link.txt",
    "/memories/dangling/x.md",
    "/memories/inner/out/secret.txt",
]


def test_nothing_outside_the_root_changes(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (tmp_path / "sibling.txt").write_text("sibling secret\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(outside, target_is_directory=True)
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "dangling").symlink_to(tmp_path / "not-yet")
    (root / "inner").mkdir()
    (root / "inner" / "out").symlink_to("../../outside")
    tool = MemoryTool(DirectoryMemory(root))
    ok(tool, command="create", path="/memories/keep.md", file_text="secret\n")

    def outside_root() -> dict[str, Any]:
        shot = _snapshot(tmp_path)
        return {k: v for k, v in shot.items() if not k.startswith("root/") or k.count("/") == 1}

    before = outside_root()
    for path in [*HOSTILE, *ESCAPES]:
        for command in _hostile_commands(path):
            result = tool.execute(command)
            assert result.is_error, (command, result.text)
    for path in ESCAPES:
        text = err(tool, command="view", path=path)
        assert "symbolic link" in text, text
    assert outside_root() == before
    assert not (tmp_path / "not-yet").exists()
    listing = ok(tool, command="view", path="/memories")
    assert "/memories/out" not in listing
    assert "/memories/link.txt" not in listing
    assert "/memories/keep.md" in listing


def test_a_link_inside_the_root_is_followed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    tool = MemoryTool(DirectoryMemory(root))
    ok(tool, command="create", path="/memories/real/a.md", file_text="inside\n")
    (root / "alias").symlink_to(root / "real", target_is_directory=True)
    assert content(tool, "/memories/alias/a.md") == "inside\n"
    ok(tool, command="delete", path="/memories/alias")
    assert (root / "real" / "a.md").exists()


# a name that differs from an existing one only in letter case would be the same
# file on a file system that ignores case (Windows, macOS): refused on every backend
CASE_CLASHES = [
    ("/memories/Case.md", "/memories/case.md"),
    ("/memories/Case.md", "/memories/CASE.MD"),
    ("/memories/straße.md", "/memories/STRASSE.md"),
    ("/memories/Notes/a.md", "/memories/notes/b.md"),
    ("/memories/Notes/a.md", "/memories/NOTES"),
    ("/memories/Notes/Deep/a.md", "/memories/Notes/deep/b/c.md"),
]


@pytest.mark.parametrize(("existing", "new"), CASE_CLASHES, ids=range(len(CASE_CLASHES)))
def test_a_name_differing_only_in_case_is_refused(
    backend: MemoryBackend, existing: str, new: str
) -> None:
    tool = MemoryTool(backend)
    ok(tool, command="create", path=existing, file_text="kept\n")
    ok(tool, command="create", path="/memories/other.md", file_text="other\n")
    before = ok(tool, command="view", path="/memories")
    for command in (
        {"command": "create", "path": new, "file_text": "pwned"},
        {"command": "rename", "old_path": "/memories/other.md", "new_path": new},
    ):
        text = err(tool, **command)
        assert "differs only in letter case" in text, text
        assert len(text.splitlines()) == 1
    assert ok(tool, command="view", path="/memories") == before
    assert content(tool, existing) == "kept\n"


def test_the_case_refusal_names_both_paths(tool: MemoryTool) -> None:
    ok(tool, command="create", path="/memories/Notes/a.md", file_text="a")
    text = err(tool, command="create", path="/memories/notes/b.md", file_text="b")
    assert text.startswith(
        "Error: /memories/notes differs only in letter case from /memories/Notes, which exists"
    )
    assert text.endswith("; use /memories/Notes or another name.")


def test_a_rename_may_change_only_the_case(tool: MemoryTool) -> None:
    ok(tool, command="create", path="/memories/notes.md", file_text="n\n")
    ok(tool, command="create", path="/memories/dir/a.md", file_text="a\n")
    ok(tool, command="rename", old_path="/memories/notes.md", new_path="/memories/Notes.md")
    ok(tool, command="rename", old_path="/memories/dir", new_path="/memories/DIR")
    assert content(tool, "/memories/Notes.md") == "n\n"
    assert content(tool, "/memories/DIR/a.md") == "a\n"
    rows = ok(tool, command="view", path="/memories").split("\n")[1:]
    paths = [row.split("\t")[1] for row in rows]
    assert paths == ["/memories", "/memories/DIR/", "/memories/DIR/a.md", "/memories/Notes.md"]


def test_case_variants_of_a_file_change_nothing_on_every_backend(tmp_path: Path) -> None:
    # the hostile commands on a case variant of keep.md: each one is refused (the
    # variant does not exist, or clashes), and keep.md and the listing stay as they were
    for kind in BACKENDS:
        for backend in _backend(kind, tmp_path / kind):
            tool = MemoryTool(backend)
            ok(tool, command="create", path="/memories/keep.md", file_text="secret\n")
            ok(tool, command="create", path="/memories/d/x.md", file_text="x\n")
            before = ok(tool, command="view", path="/memories")
            for path in ("/memories/KEEP.md", "/memories/Keep.md", "/memories/D/keep.md"):
                for command in _hostile_commands(path)[:-1]:  # the last: a case-only rename
                    result = tool.execute(command)
                    assert result.is_error, (kind, command, result.text)
            assert ok(tool, command="view", path="/memories") == before
            assert content(tool, "/memories/keep.md") == "secret\n"


def test_a_case_clash_with_a_file_made_outside_the_tool_is_refused(tmp_path: Path) -> None:
    # on disk, every name in the folder counts, not only the ones a listing shows
    root = tmp_path / "root"
    tool = MemoryTool(DirectoryMemory(root))
    (root / "Made-By-Hand.md").write_text("x")
    text = err(tool, command="create", path="/memories/made-by-hand.md", file_text="y")
    assert "differs only in letter case from /memories/Made-By-Hand.md" in text
    assert sorted(os.listdir(root)) == ["Made-By-Hand.md"]


# ------------------------------------------------------------------ the SDK adapter --


def _message(content: list[dict[str, Any]], stop_reason: str, n: int) -> dict[str, Any]:
    return {
        "id": f"msg_0{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 10},
    }


def test_the_sdk_tool_runner_drives_the_adapter(tmp_path: Path) -> None:
    anthropic = pytest.importorskip("anthropic")
    # this SDK build ships its own HTTP client package, httpx2 (same API as httpx)
    httpx = pytest.importorskip("httpx2")
    from anthropic.lib.tools import BetaAbstractMemoryTool

    replies = [
        _message(
            [
                {"type": "text", "text": "I'll save that."},
                {
                    "type": "tool_use",
                    "id": "toolu_01",
                    "name": "memory",
                    "input": {
                        "command": "create",
                        "path": "/memories/prefs.md",
                        "file_text": "likes coffee\n",
                    },
                },
            ],
            "tool_use",
            1,
        ),
        _message(
            [
                {
                    "type": "tool_use",
                    "id": "toolu_02",
                    "name": "memory",
                    "input": {"command": "view", "path": "/memories/../outside"},
                }
            ],
            "tool_use",
            2,
        ),
        _message([{"type": "text", "text": "Saved."}], "end_turn", 3),
    ]
    requests: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        assert request.url.path == "/v1/messages"
        requests.append(json.loads(request.content))
        return httpx.Response(200, json=replies[len(requests) - 1])

    client = anthropic.Anthropic(
        api_key="x", http_client=httpx.Client(transport=httpx.MockTransport(handler))
    )
    memory = MemoryTool(DirectoryMemory(tmp_path / "root"))
    adapter = memory.anthropic()
    assert isinstance(adapter, BetaAbstractMemoryTool)
    runner = client.beta.messages.tool_runner(
        model="claude-sonnet-5-5",
        max_tokens=1024,
        messages=[{"role": "user", "content": "Remember that I like coffee"}],
        tools=[adapter],
    )
    final = runner.until_done()
    assert final.content[0].text == "Saved."
    assert len(requests) == 3
    assert requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    first_result = requests[1]["messages"][-1]["content"][0]
    assert first_result["type"] == "tool_result"
    assert first_result["tool_use_id"] == "toolu_01"
    assert "File created successfully at: /memories/prefs.md" in json.dumps(first_result["content"])
    assert not first_result.get("is_error")
    second_result = requests[2]["messages"][-1]["content"][0]
    assert second_result["tool_use_id"] == "toolu_02"
    assert second_result["is_error"] is True
    assert "'..'" in json.dumps(second_result["content"])
    assert (tmp_path / "root" / "prefs.md").read_text() == "likes coffee\n"


def test_adapter_methods_delegate(tmp_path: Path) -> None:
    pytest.importorskip("anthropic")
    from anthropic.lib.tools import ToolError
    from anthropic.types.beta import (
        BetaMemoryTool20250818CreateCommand,
        BetaMemoryTool20250818ViewCommand,
    )

    from ctxwise import memory_tool

    adapter = memory_tool.AnthropicMemoryTool(MemoryTool(StoreMemory(InMemoryStore(), ("t",))))
    assert adapter.name == "memory"
    create = BetaMemoryTool20250818CreateCommand(
        command="create", path="/memories/a.md", file_text="a"
    )
    assert adapter.create(create) == "File created successfully at: /memories/a.md"
    view = BetaMemoryTool20250818ViewCommand(command="view", path="/memories/a.md")
    assert adapter.view(view).endswith("     1\ta")
    with pytest.raises(ToolError):
        adapter.call({"command": "create", "path": "/memories/a.md"})
    with pytest.raises(UsageError):
        memory_tool.AnthropicMemoryTool("nope")
    assert MemoryResult("x") == MemoryResult("x", is_error=False)


def test_a_listing_leaves_out_names_no_path_can_reach(tmp_path: Path) -> None:
    # a name with a newline would forge listing rows; one that is not UTF-8 comes back
    # from the file system as a lone surrogate, which no tool result can carry
    root = tmp_path / "root"
    tool = MemoryTool(DirectoryMemory(root))
    ok(tool, command="create", path="/memories/keep.md", file_text="x")
    (root / "a\n4K\t").mkdir()
    (root / "a\n4K\t" / "forged.md").write_text("x")
    with open(os.fsencode(root) + b"/\xff.md", "wb") as fh:
        fh.write(b"x")
    listing = ok(tool, command="view", path="/memories")
    assert listing.encode("utf-8")
    assert listing.splitlines()[1:] == ["1B\t/memories", "1B\t/memories/keep.md"]


def test_a_store_listing_leaves_out_ids_no_path_can_reach() -> None:
    from ctxwise.memory.store import NewItem

    store = InMemoryStore()
    tool = MemoryTool(StoreMemory(store, ("acme", "s")))
    ok(tool, command="create", path="/memories/keep.md", file_text="x")
    store.put(("acme", "s"), NewItem("x", {"content": "x"}, id="/memories/a\nb.md"))
    listing = ok(tool, command="view", path="/memories")
    assert listing.splitlines()[1:] == ["1B\t/memories", "1B\t/memories/keep.md"]


def test_a_name_of_the_longest_length_can_be_written(tmp_path: Path) -> None:
    # the temporary file was named after the target, so a 241-255 byte name was refused
    # by the file system ("File name too long") though the path check accepts it
    tool = MemoryTool(DirectoryMemory(tmp_path / "root"))
    for name in ("a" * 255, "é" * 127):
        path = f"/memories/{name}"
        ok(tool, command="create", path=path, file_text="one\n")
        ok(tool, command="str_replace", path=path, old_str="one", new_str="two")
        assert (tmp_path / "root" / name).read_text() == "two\n"
    assert sorted(os.listdir(tmp_path / "root")) == sorted(["a" * 255, "é" * 127])


@pytest.fixture
def racing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[MemoryTool, Path]:
    """A memory root whose folder ``d`` an attacker swaps for a link to ``outside``
    right after every path check and back before the next: each check sees a real
    folder, each use the link (the worst interleaving of a check-then-use race)."""
    import ctxwise.memory_tool as memory_tool

    outside = tmp_path / "outside"
    (outside / "e").mkdir(parents=True)
    (outside / "secret.txt").write_text("TOPSECRET\n")
    (outside / "e" / "secret.txt").write_text("TOPSECRET\n")
    (outside / "only-outside.txt").write_text("TOPSECRET\n")
    root = tmp_path / "root"
    tool = MemoryTool(DirectoryMemory(root))
    ok(tool, command="create", path="/memories/s", file_text="mine\n")
    ok(tool, command="create", path="/memories/d/secret.txt", file_text="mine\n")
    ok(tool, command="create", path="/memories/d/e/secret.txt", file_text="mine\n")
    real, hidden, link = root / "d", root / ".d-real", root / "d"
    realpath = os.path.realpath

    def restore() -> None:
        if hidden.exists():
            link.unlink()
            hidden.rename(real)

    def swap() -> None:
        real.rename(hidden)
        link.symlink_to(outside, target_is_directory=True)

    def checked(path: Any, *args: Any, **kwargs: Any) -> str:
        restore()
        try:
            return realpath(path, *args, **kwargs)
        finally:
            swap()

    monkeypatch.setattr(memory_tool._directory.os.path, "realpath", checked)
    return tool, outside


@pytest.mark.parametrize(
    "command",
    [
        {"command": "view", "path": "/memories/d/secret.txt"},
        {"command": "view", "path": "/memories/d/e/secret.txt"},
        {"command": "view", "path": "/memories/d"},
        {"command": "create", "path": "/memories/d/new.md", "file_text": "pwned"},
        {"command": "create", "path": "/memories/d/e/new.md", "file_text": "pwned"},
        {
            "command": "str_replace",
            "path": "/memories/d/secret.txt",
            "old_str": "TOPSECRET",
            "new_str": "pwned",
        },
        {
            "command": "insert",
            "path": "/memories/d/e/secret.txt",
            "insert_line": 0,
            "insert_text": "x",
        },
        {"command": "delete", "path": "/memories/d/secret.txt"},
        {"command": "delete", "path": "/memories/d/e"},
        {"command": "rename", "old_path": "/memories/d/secret.txt", "new_path": "/memories/s.md"},
        {"command": "rename", "old_path": "/memories/s", "new_path": "/memories/d/e/s.md"},
    ],
    ids=lambda c: f"{c['command']}-{c.get('path', c.get('old_path'))}",
)
def test_a_link_swapped_in_after_the_check_does_not_lead_out(
    racing: tuple[MemoryTool, Path], command: dict[str, Any]
) -> None:
    tool, outside = racing
    before = _snapshot(outside)
    result = tool.execute(command)
    assert "TOPSECRET" not in result.text
    assert "only-outside" not in result.text
    assert _snapshot(outside) == before


def test_a_write_that_fails_leaves_the_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    import ctxwise._io as ctxwise_io

    root = tmp_path / "root"
    tool = MemoryTool(DirectoryMemory(root))
    ok(tool, command="create", path="/memories/a.md", file_text="original\n")

    def full(fd: int, data: bytes) -> None:
        os.write(fd, data[:3])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ctxwise_io, "_write_all", full)
    for command in (
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "original", "new_str": "x"},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "x"},
        {"command": "create", "path": "/memories/b.md", "file_text": "new"},
    ):
        assert "No space left on device" in err(tool, **command)
    assert (root / "a.md").read_text() == "original\n"
    assert os.listdir(root) == ["a.md"]


def test_a_write_sweeps_the_temporaries_a_killed_process_left(tmp_path: Path) -> None:
    # a process killed in the middle of a write leaves its hidden temporary file;
    # the next write in that folder removes it once it is an hour old (by the clock
    # given), and leaves every other hidden file
    now = 2_000_000_000.0
    root = tmp_path / "root"
    (root / "x").mkdir(parents=True)
    left = {
        ".ctxwise-0123abcd.tmp": now - 3601,  # stale: removed
        ".tmp-0123456789abcdef": now - 3601,  # an earlier version's, stale: removed
        ".ctxwise-89abcdef.tmp": now - 10,  # a write still going
        ".notes": now - 86_400,  # not ctxwise's
    }
    for name, mtime in left.items():
        (root / "x" / name).write_bytes(b"part")
        os.utime(root / "x" / name, (mtime, mtime))
    tool = MemoryTool(DirectoryMemory(root, clock=lambda: now))
    ok(tool, command="create", path="/memories/x/a.md", file_text="kept\n")
    assert sorted(os.listdir(root / "x")) == [".ctxwise-89abcdef.tmp", ".notes", "a.md"]
    assert "ctxwise" not in ok(tool, command="view", path="/memories/x")  # never listed
