"""The SQLite store's lexical postings in memory (``memory/_sqlite_postings.py``).

A store that searches a namespace again (or wrote it from empty) scores from
postings kept in memory instead of FTS5's ``bm25()``. Both paths run the same
bounded plan and must rank alike: every check compares a warm store with a store
freshly opened on the same file, whose first search of a namespace reads FTS5.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise.formats import read_transcript
from ctxwise.memory import _sqlite_postings
from ctxwise.memory.sqlite import SQLiteStore
from ctxwise.memory.store import NewItem, rank_key
from ctxwise.memory.tiered import turn_items
from ctxwise.search import _bounded
from tests.conftest import long_sessions

Hits = list[tuple[str, str]]


def _hits(store: SQLiteStore, ns: tuple[str, ...], query: str, k: int) -> Hits:
    """Ids and scores as every store ranks them (nine significant digits)."""
    return [(it.id, f"{s:.9g}") for it, s in store.lexical_search(ns, query, k)]


def _fts5(path: Path, ns: tuple[str, ...], query: str, k: int) -> Hits:
    """What FTS5 answers: a fresh store's first search of the namespace."""
    fresh = SQLiteStore(path)
    try:
        hits = _hits(fresh, ns, query, k)
        assert fresh._postings["/".join(ns)].n == 0  # nothing was read into postings
        return hits
    finally:
        fresh.close()


def _in_memory(store: SQLiteStore, ns: tuple[str, ...]) -> bool:
    postings = store._postings.get("/".join(ns))
    return postings is not None and postings.ready


@pytest.fixture(scope="module")
def session_turns() -> list[NewItem]:
    """The turns of a real Claude Code session, as the Engine remembers them."""
    paths = long_sessions()
    if not paths:
        pytest.skip("the shared Claude Code sessions are missing (set CTXWISE_DATA)")
    return turn_items(read_transcript(paths[0]).messages)[:600]


def _questions(items: list[NewItem], n: int) -> list[str]:
    asks = [it.text for it in items if it.metadata.get("role") == "user"]
    rng = random.Random(7)
    return [asks[i][:400] for i in sorted(rng.sample(range(len(asks)), min(n, len(asks))))]


@pytest.mark.parametrize("cap", [None, 150])
def test_postings_rank_real_session_turns_as_fts5_does(
    tmp_path: Path, session_turns: list[NewItem], cap: int | None
) -> None:
    """Long real turns and long questions (many terms, most of them common): the
    same hits and scores from memory as from FTS5, exact and (a small cap) through
    every step of the bounded plan."""
    path = tmp_path / "m.db"
    store = SQLiteStore(path)
    ns = ("session", "real")
    store.put_many(ns, session_turns)
    assert _in_memory(store, ns)  # written from empty: in memory from the start
    with pytest.MonkeyPatch.context() as mp:
        if cap is not None:
            mp.setattr(_bounded, "LEXICAL_CAP", cap)
            mp.setattr(_bounded, "STOP_WINDOW", 300)
        for query in [*_questions(session_turns, 12), "pytest failed", "zzz-never-said"]:
            for k in (1, 10, 66):
                assert _hits(store, ns, query, k) == _fts5(path, ns, query, k), (query, k)
    store.close()


def test_a_store_opened_on_a_file_reads_fts5_first_then_warms_up(
    tmp_path: Path, session_turns: list[NewItem]
) -> None:
    """The first search starts nothing; each later one reads at most WARM_CHARS of
    terms until every row is in, ranking alike all along."""
    path = tmp_path / "m.db"
    writer = SQLiteStore(path)
    ns = ("session", "warm")
    writer.put_many(ns, session_turns)
    writer.close()
    store = SQLiteStore(path)
    query = _questions(session_turns, 1)[0]
    want = _fts5(path, ns, query, 10)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_sqlite_postings, "WARM_CHARS", 50_000)
        mp.setattr("ctxwise.memory.sqlite.WARM_CHARS", 50_000)
        assert _hits(store, ns, query, 10) == want
        postings = store._postings["session/warm"]
        assert postings.n == 0
        steps = 0
        while not postings.ready:
            before = postings.n
            assert _hits(store, ns, query, 10) == want
            assert postings.n > before
            steps += 1
        assert steps > 2  # the namespace is well over the budget
        assert postings.n == postings.n_live == len(session_turns)
        assert _hits(store, ns, query, 10) == want
    store.close()


def test_own_writes_are_in_memory_before_the_next_search(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SQLiteStore(path)
    ns = ("t",)
    store.put_many(ns, [NewItem(f"parcel {i} late refund") for i in range(50)])
    postings = store._postings["t"]
    store.put_many(ns, [NewItem("router broken again"), NewItem("router late")])
    assert postings.n == 52 and postings.ready  # taken in by the write itself
    assert store.delete(ns, ["m0", "m51"]) == 2
    assert postings.n_live == 50 and postings.ready
    for query in ["router late", "parcel refund", "again"]:
        assert _hits(store, ns, query, 5) == _fts5(path, ns, query, 5)
    store.close()


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["put", "replace", "delete", "empty", "other", "other-delete"]),
            st.integers(0, 30),
        ),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from([None, 12]),
)
def test_postings_always_rank_as_a_fresh_store(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]], cap: int | None
) -> None:
    """Puts, replacements, deletions, empty texts, and writes and deletions by
    another store on the same file: after each, memory ranks as FTS5 does."""
    path = tmp_path_factory.mktemp("postings") / "m.db"
    store = SQLiteStore(path)
    other = SQLiteStore(path)
    ns = ("n",)
    words = ["parcel", "late", "router", "refund", "osaka", "mia"]
    store.put_many(ns, [NewItem(f"parcel {i} late", id=f"p{i}") for i in range(5)])
    with pytest.MonkeyPatch.context() as mp:
        if cap is not None:
            mp.setattr(_bounded, "LEXICAL_CAP", cap)
            mp.setattr(_bounded, "STOP_WINDOW", 10)
        for op, n in ops:
            text = " ".join(words[(n + j) % len(words)] for j in range(n % 4 + 1)) + f" {n}"
            if op == "put":
                store.put_many(ns, [NewItem(f"{text} {j}") for j in range(n % 3 + 1)])
            elif op == "replace":
                store.put(ns, NewItem(text, id=f"p{n % 5}"))
            elif op == "delete":
                store.delete(ns, [f"p{n % 5}", f"m{n}"])
            elif op == "empty":
                store.put(ns, NewItem("!!"))  # no terms at all
            elif op == "other":
                other.put_many(ns, [NewItem(text), NewItem(f"{text} again")])
            else:
                other.delete(ns, [f"p{n % 5}", f"m{n}", f"m{n + 1}"])
            for query in ["parcel late", "router refund osaka", f"{n} mia"]:
                assert _hits(store, ns, query, 8) == _fts5(path, ns, query, 8), (op, query)
        assert _in_memory(store, ns)
    store.close()
    other.close()


def test_filters_read_fts5(tmp_path: Path) -> None:
    """A filtered search reads FTS5 (the filter is SQL over the metadata)."""
    path = tmp_path / "m.db"
    store = SQLiteStore(path)
    ns = ("f",)
    store.put_many(ns, [NewItem(f"parcel {i} late", {"odd": i % 2 == 1}) for i in range(20)])
    got = store.lexical_search(ns, "parcel late", 5, {"odd": True})
    assert [it.metadata["odd"] for it, _ in got] == [True] * 5
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    store.close()


def test_the_least_recently_searched_namespaces_are_let_go(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SQLiteStore(path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("ctxwise.memory.sqlite.POSTINGS_KEPT", 2)
        for name in ("a", "b", "c"):
            store.put_many((name,), [NewItem(f"{name} parcel late")])
        assert sorted(store._postings) == ["b", "c"]
        store.lexical_search(("b",), "parcel", 1)  # b is the most recently used now
        store.lexical_search(("a",), "parcel", 1)  # a comes back (empty: FTS5 first)
        assert list(store._postings) == ["b", "a"]
        assert _hits(store, ("a",), "parcel", 1) == _fts5(path, ("a",), "parcel", 1)
    store.close()


def test_a_replaced_file_is_read_afresh(tmp_path: Path) -> None:
    """Postings of rows a new file does not hold are dropped (its seqs start lower)."""
    path = tmp_path / "m.db"
    store = SQLiteStore(path)
    ns = ("r",)
    store.put_many(ns, [NewItem(f"parcel {i}") for i in range(30)])
    store.lexical_search(ns, "parcel", 3)
    table = store.lexical_table(ns)
    with sqlite3.connect(path) as conn:  # as if another file were put in its place
        conn.execute("DELETE FROM counters")
        conn.execute("DELETE FROM items")
        conn.execute(f'INSERT INTO "{table}" ("{table}") VALUES (\'delete-all\')')
    other = SQLiteStore(path)
    other.put_many(ns, [NewItem("router late"), NewItem("parcel late")])
    other.close()
    assert _hits(store, ns, "parcel late", 5) == _fts5(path, ns, "parcel late", 5)
    assert [it.text for it, _ in store.lexical_search(ns, "parcel", 5)] == ["parcel late"]
    store.close()


def test_scores_are_ranked_as_every_store_ranks_them(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SQLiteStore(path)
    ns = ("tie",)
    store.put_many(ns, [NewItem("parcel late") for _ in range(6)])  # equal scores
    got = store.lexical_search(ns, "parcel", 4)
    assert [it.seq for it, _ in got] == [0, 1, 2, 3]
    assert sorted(got, key=lambda p: rank_key(p[1], p[0].seq)) == got
    store.close()
