"""SQLite specifics: migrations, schema versions, WAL durability under SIGKILL."""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise.embeddings import HashingEmbedder
from ctxwise.errors import UsageError
from ctxwise.memory import NewItem, SQLiteStore, StoreError, _ann
from ctxwise.memory import sqlite as sqlite_module
from ctxwise.memory.sqlite import SCHEMA_VERSION
from ctxwise.memory.store import fts_tokens
from ctxwise.search import _bounded, bounded_search
from ctxwise.text import Analyzer
from tests.search._reference import ReferenceRows

ANALYZED = "004_analyzed_terms_per_namespace"


def test_migrations_are_recorded_and_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    first = SQLiteStore(path)
    assert (
        first.migrations == ["001_items", "002_fts", "003_counts", ANALYZED]
        and len(first.migrations) == SCHEMA_VERSION
    )
    first.close()
    again = SQLiteStore(path)
    assert again.migrations == ["001_items", "002_fts", "003_counts", ANALYZED]
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


@pytest.mark.parametrize("bad", ["newer", "junk"])
def test_a_store_that_cannot_open_closes_its_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    path = tmp_path / "m.db"
    if bad == "newer":
        SQLiteStore(path).close()
        with sqlite3.connect(path) as conn:
            conn.execute("INSERT INTO migrations (position, name) VALUES (99, '099_future')")
    else:
        path.write_bytes(b"this is not sqlite" * 100)
    opened: list[sqlite3.Connection] = []
    connect = sqlite3.connect

    def recording(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)  # type: ignore[arg-type]
        opened.append(conn)
        return conn

    monkeypatch.setattr(sqlite_module.sqlite3, "connect", recording)
    with pytest.raises(StoreError):
        SQLiteStore(path)
    assert len(opened) == 1
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        opened[0].execute("SELECT 1")


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
    if _ann.available():  # an index built after the kill holds every committed vector
        indexed = SQLiteStore(path, ann_min_items=100)
        assert indexed.index_info(("kill", "test")).method == "hnsw"
        last = f"batch {committed} item 7 about order {committed * 1000 + 7}"
        vector = HashingEmbedder(64).embed([last])[0]
        assert indexed.vector_search(("kill", "test"), vector, 1)[0][0].text == last
        indexed.close()


# the bounded lexical search --------------------------------------------------------

WORDS = ["refund", "parcel", "router", "laptop", "berlin", "osaka", "late", "broken", "mia"]


def _corpus(n: int, seed: int) -> list[str]:
    """Short texts over a small vocabulary: every word is common, as at scale."""
    rng = random.Random(seed)
    return [" ".join(rng.sample(WORDS, rng.randint(2, 5))) + f" case {i}" for i in range(n)]


def _exact(store: SQLiteStore, ns: tuple[str, ...], query: str, k: int) -> list[float]:
    """FTS5's exact BM25 scores of the best k rows of ``ns`` (no bound)."""
    terms = sorted(set(fts_tokens(query)))
    match = " OR ".join(f'"{t}"' for t in terms)
    t = f'"{store.lexical_table(ns)}"'
    rows = store._conn.execute(
        f"SELECT -bm25({t}) FROM {t} WHERE {t} MATCH ? ORDER BY bm25({t}) LIMIT ?",
        (match, k),
    ).fetchall()
    return [r[0] for r in rows]


def test_a_store_within_the_cap_is_ranked_exactly(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    ns = ("lex", "small")
    store.put_many(ns, [NewItem(t) for t in _corpus(300, 1)])
    for query in ["refund for the broken router", "mia berlin", "late parcel osaka laptop"]:
        got = [s for _, s in store.lexical_search(ns, query, 10)]
        assert got == pytest.approx(_exact(store, ns, query, 10))
    store.close()


@settings(max_examples=20)
@given(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
    st.integers(min_value=1, max_value=30),
    st.booleans(),
)
def test_bounded_lexical_search_invariants(
    tmp_path_factory: pytest.TempPathFactory, words: list[str], k: int, shared: bool
) -> None:
    """With a tiny cap every bounded step runs: results stay in the namespace, hold a
    query term, are at most k, best first, and never score above the exact BM25."""
    path = tmp_path_factory.mktemp("lex") / "m.db"
    store = SQLiteStore(path)
    ns, other = ("lex", "a"), ("lex", "b")
    store.put_many(ns, [NewItem(t) for t in _corpus(400, 2)])
    if shared:
        store.put_many(other, [NewItem(t) for t in _corpus(200, 3)])
    query = " ".join(words)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_bounded, "LEXICAL_CAP", 40)
        mp.setattr(_bounded, "STOP_WINDOW", 100)
        got = store.lexical_search(ns, query, k)
    assert 0 < len(got) <= k
    assert all(it.namespace == ns and set(fts_tokens(it.text)) & set(words) for it, _ in got)
    scores = [s for _, s in got]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] <= _exact(store, ns, query, 1)[0] + 1e-9
    store.close()


def test_bounded_lexical_search_finds_the_rows_with_every_term(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    ns = ("lex", "big")
    texts = _corpus(3000, 4)
    texts[1234] = "mia osaka broken router refund"
    store.put_many(ns, [NewItem(t) for t in texts])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_bounded, "LEXICAL_CAP", 100)
        top = store.lexical_search(ns, "refund for the broken router mia osaka", 5)
    assert top[0][0].seq == 1234
    assert top[0][1] == pytest.approx(_exact(store, ns, "refund broken router mia osaka", 1)[0])
    store.close()


@pytest.mark.parametrize(
    ("query", "k", "odd"),
    [
        ("refund parcel", 5, None),
        ("refund parcel router", 40, None),
        ("mia berlin late", 12, False),
        ("osaka case17", 5, True),
        ("late", 3, None),
    ],
)
def test_bounded_lexical_search_is_the_search_cores(
    tmp_path: Path, query: str, k: int, odd: bool | None
) -> None:
    """Above the cap the store runs ctxwise.search.bounded_search: the same rows and
    scores as over plain-Python rows (what PostgreSQL's test checks too)."""
    store = SQLiteStore(tmp_path / "m.db")
    ns = ("lex", "core")
    texts = _corpus(600, 5)
    store.put_many(ns, [NewItem(t, {"odd": i % 2 == 1}) for i, t in enumerate(texts)])
    filters = None if odd is None else {"odd": odd}
    docs = [store.analyzer.words(t) for t in texts]
    kept = {i for i in range(len(texts)) if odd is None or (i % 2 == 1) == odd}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_bounded, "LEXICAL_CAP", 60)
        got = [(it.seq, s) for it, s in store.lexical_search(ns, query, k, filters)]
        terms = sorted(set(store.analyzer.words(query)))
        want = bounded_search(ReferenceRows(docs, kept), terms, len(docs), k)
    assert [seq for seq, _ in got] == [seq for seq, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)
    store.close()


# the HNSW vector index -------------------------------------------------------------

needs_usearch = pytest.mark.skipif(not _ann.available(), reason="needs the ann extra (usearch)")
VDIM = 32
EMB = HashingEmbedder(VDIM)
NS = ("ann", "user")


def _items(texts: list[str], ids: list[str] | None = None) -> list[NewItem]:
    vectors = EMB.embed(texts)
    return [
        NewItem(t, {"n": i % 3}, None if ids is None else ids[i], vectors[i])
        for i, t in enumerate(texts)
    ]


def _texts(n: int, start: int = 0) -> list[str]:
    rng = random.Random(start)
    return [f"{rng.choice(WORDS)} {rng.choice(WORDS)} note {i}" for i in range(start, start + n)]


def _ids(store: SQLiteStore, query: str, k: int = 10, **filters: object) -> list[str]:
    return [it.id for it, _ in store.vector_search(NS, EMB.embed([query])[0], k, filters or None)]


@needs_usearch
def test_the_index_serves_big_namespaces_like_brute_force(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    store = SQLiteStore(path, ann_min_items=300)
    store.put_many(NS, _items(_texts(600)))
    assert store.index_info(NS).method == "hnsw"
    exact = SQLiteStore(path, ann_min_items=None)
    assert exact.index_info(NS).method == "exact"
    for query in ["refund parcel note 5", "mia osaka", "broken laptop note 599"]:
        got = store.vector_search(NS, EMB.embed([query])[0], 10)
        want = exact.vector_search(NS, EMB.embed([query])[0], 10)
        assert got[0][1] == pytest.approx(want[0][1], abs=1e-6)  # exact re-scoring
        assert len(got) == 10 and min(s for _, s in got) >= want[-1][1] - 1e-6  # ties differ
    assert _ids(store, "note 7", 50, n=1) == _ids(exact, "note 7", 50, n=1)  # filters: exact
    small = ("ann", "small")
    store.put_many(small, _items(_texts(10)))
    assert store.index_info(small).method == "exact"
    exact.close()
    store.close()


@needs_usearch
def test_the_index_is_saved_deterministic_and_reloaded(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    store = SQLiteStore(path, ann_min_items=100)
    store.put_many(NS, _items(_texts(400)))
    store.index_info(NS)
    store.close()
    files = sorted((tmp_path / "v.db.ann").iterdir())
    assert [f.suffix for f in files] == [".json", ".usearch"]
    first = files[1].read_bytes()
    shutil.rmtree(tmp_path / "v.db.ann")
    again = SQLiteStore(path, ann_min_items=100)
    again.index_info(NS)
    again.close()
    assert files[1].read_bytes() == first  # same rows, same order: same index
    reopened = SQLiteStore(path, ann_min_items=100)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SQLiteStore, "_build_index", None)  # a rebuild would fail here
        assert reopened.index_info(NS).method == "hnsw"
        assert _ids(reopened, _texts(400)[3], 1) == ["m3"]
    reopened.close()


@needs_usearch
def test_a_stale_index_catches_up_with_other_writers(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    reader = SQLiteStore(path, ann_min_items=100)
    writer = SQLiteStore(path, ann_min_items=None)
    writer.put_many(NS, _items(_texts(300)))
    assert reader.index_info(NS).method == "hnsw"
    writer.put_many(NS, _items(["osaka osaka brand new arrival"], ["new"]))
    assert _ids(reader, "osaka osaka brand new arrival", 1) == ["new"]
    writer.delete(NS, ["new", "m0", "m1"])
    assert "new" not in _ids(reader, "osaka osaka brand new arrival", 300)
    assert len(reader._indexes["/".join(NS)][1]) == 298
    writer.put_many(NS, _items(["replaced text about a parcel"], ["m5"]))
    assert _ids(reader, "replaced text about a parcel", 1) == ["m5"]
    writer.delete(NS, [f"m{i}" for i in range(2, 200)])  # most of it: rebuilt
    assert reader.count(NS) == 100
    assert len(_ids(reader, "note", 500)) == 100
    reader.close()
    writer.close()


@needs_usearch
@pytest.mark.parametrize("damage", ["corrupt", "foreign"])
def test_a_damaged_or_foreign_index_file_is_rebuilt(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "v.db"
    store = SQLiteStore(path, ann_min_items=100)
    store.put_many(NS, _items(_texts(300)))
    store.index_info(NS)
    store.close()
    if damage == "corrupt":
        data = next((tmp_path / "v.db.ann").glob("*.usearch"))
        data.write_bytes(data.read_bytes()[:1000])
    else:  # a new store in the same place, with other rows
        for p in tmp_path.glob("v.db*"):
            if p.is_file():
                p.unlink()
        fresh = SQLiteStore(path, ann_min_items=None)
        fresh.put_many(NS, _items(_texts(300, start=5000)))
        fresh.close()
    store = SQLiteStore(path, ann_min_items=100)
    want = SQLiteStore(path, ann_min_items=None)
    for query in ["note 5010", "mia broken"]:
        got = store.vector_search(NS, EMB.embed([query])[0], 10)
        best = want.vector_search(NS, EMB.embed([query])[0], 10)
        assert got[0][1] == pytest.approx(best[0][1], abs=1e-6)
        assert min(s for _, s in got) >= best[-1][1] - 1e-6  # the same top 10, up to ties
    store.close()
    want.close()


def test_without_usearch_vectors_are_searched_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ann, "available", lambda: False)
    store = SQLiteStore(tmp_path / "v.db", ann_min_items=10)
    store.put_many(NS, _items(_texts(50)))
    info = store.index_info(NS)
    assert info.method == "exact" and "pip install -e '.[ann]'" in info.reason
    assert _ids(store, _texts(50)[3], 1) == ["m3"]
    assert not (tmp_path / "v.db.ann").exists()
    store.close()


def test_counts_survive_the_migration_from_schema_2(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SQLiteStore(path)
    store.put_many(NS, _items(_texts(5)))
    store.put_many(("other",), [NewItem("lexical only")])
    store.close()
    with sqlite3.connect(path) as conn:  # back to what schema 2 looked like
        conn.execute("DROP TRIGGER items_count_ai")
        conn.execute("DROP TRIGGER items_count_ad")
        conn.execute("ALTER TABLE counters DROP COLUMN n_items")
        conn.execute("ALTER TABLE counters DROP COLUMN n_vectors")
        conn.execute("DELETE FROM migrations WHERE position = 3")
    store = SQLiteStore(path)
    assert store.migrations[-2:] == ["003_counts", ANALYZED]
    assert store.count(NS) == 5 and store.count(("other",)) == 1
    assert store._conn.execute("SELECT sum(n_vectors) FROM counters").fetchone()[0] == 5
    assert sorted(store.namespaces()) == [NS, ("other",)]
    store.close()


def _exact_vectors(path: Path, ns: tuple[str, ...], q: object, k: int) -> list[tuple[str, float]]:
    fresh = SQLiteStore(path, ann_min_items=None)
    try:
        return [(i.id, round(s, 5)) for i, s in fresh.vector_search(ns, q, k)]  # type: ignore[arg-type]
    finally:
        fresh.close()


def test_a_write_between_queries_appends_to_the_cached_matrix(tmp_path: Path) -> None:
    """Brute force keeps its matrix: a write adds its rows, nothing is reloaded."""
    path = tmp_path / "m.db"
    emb = HashingEmbedder(64)
    store = SQLiteStore(path, ann_min_items=None)
    ns = ("t",)
    store.put_many(
        ns,
        [
            NewItem(f"case {i} parcel", vector=v)
            for i, v in enumerate(emb.embed([f"case {i} parcel" for i in range(100)]))
        ],
    )
    q = emb.embed(["case 7 parcel"])[0]
    store.vector_search(ns, q, 5)
    matrix = store._matrices["t"]
    for n, text in enumerate(["case 7 parcel again", "case 7 parcel once more"], start=101):
        store.put(ns, NewItem(text, vector=emb.embed([text])[0]))
        got = [(i.id, round(s, 5)) for i, s in store.vector_search(ns, q, 5)]
        assert store._matrices["t"] is matrix and matrix.n == n
        assert got == _exact_vectors(path, ns, q, 5)
        if n == 101:
            buffer = matrix.vectors  # grown to twice the size at the first append
    assert matrix.vectors is buffer  # the second write was appended in place
    store.close()


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["put", "replace", "delete", "lexical", "other"]),
            st.integers(0, 30),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_the_cached_matrix_always_equals_a_fresh_load(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]]
) -> None:
    """Puts, replacements, deletions, rows without vectors, and writes by another
    store on the same file: after each, brute force answers as a fresh store does."""
    path = tmp_path_factory.mktemp("matrix") / "m.db"
    emb = HashingEmbedder(32)
    store = SQLiteStore(path, ann_min_items=None)
    other = SQLiteStore(path, ann_min_items=None)
    ns = ("n",)
    q = emb.embed(["parcel 3 late"])[0]
    store.put_many(
        ns,
        [
            NewItem(f"parcel {i}", id=f"p{i}", vector=emb.embed([f"parcel {i}"])[0])
            for i in range(5)
        ],
    )
    store.vector_search(ns, q, 3)
    for op, n in ops:
        text = f"parcel {n} late {op}"
        if op == "put":
            store.put_many(
                ns,
                [
                    NewItem(f"{text} {j}", vector=emb.embed([f"{text} {j}"])[0])
                    for j in range(n % 4 + 1)
                ],
            )
        elif op == "replace":
            store.put(ns, NewItem(text, id=f"p{n % 5}", vector=emb.embed([text])[0]))
        elif op == "delete":
            store.delete(ns, [f"p{n % 5}", f"m{n}"])
        elif op == "lexical":
            store.put(ns, NewItem(text))  # no vector
        else:
            other.put(ns, NewItem(text, vector=emb.embed([text])[0]))
        got = [(i.id, round(s, 5)) for i, s in store.vector_search(ns, q, 8)]
        assert got == _exact_vectors(path, ns, q, 8)
    store.close()
    other.close()


def test_a_file_from_before_the_analyzer_is_migrated_and_reindexed(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # schema 3: one porter FTS5 table for the file
        conn.execute(
            "CREATE TABLE migrations (position INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL)"
        )
        for position, (name, steps) in enumerate(sqlite_module.MIGRATIONS[:3], start=1):
            for step in steps:
                assert isinstance(step, str)
                conn.execute(step)
            conn.execute("INSERT INTO migrations VALUES (?, ?)", (position, name))
        conn.execute("INSERT INTO counters (ns, next_seq) VALUES ('a', 0), ('b', 0)")
        conn.execute(
            "INSERT INTO items (ns, id, seq, text, index_text, metadata) VALUES"
            " ('a', 'x', 0, 'Refunded twice', 'earlier turn Refunded twice: Café', '{}'),"
            " ('a', 'y', 1, 'nothing to see', 'nothing to see', '{}'),"
            " ('b', 'z', 0, 'refund elsewhere', 'refund elsewhere', '{}')"
        )
    store = SQLiteStore(path)
    assert store.migrations[-1] == ANALYZED
    tables = {r[0] for r in store._conn.execute("SELECT name FROM sqlite_master")}
    assert "items_fts" not in tables and store.lexical_table(("a",)) in tables
    assert [it.id for it, _ in store.lexical_search(("a",), "refund cafe turns", 5)] == ["x"]
    assert [it.id for it, _ in store.lexical_search(("b",), "refund", 5)] == ["z"]
    store.close()
    unstemmed = SQLiteStore(path, analyzer=Analyzer(stem=None))  # another analyzer: re-indexed
    assert unstemmed.lexical_search(("a",), "refund", 5) == []
    assert [it.id for it, _ in unstemmed.lexical_search(("a",), "refunded", 5)] == ["x"]
    unstemmed.close()


def test_a_writer_locked_out_past_the_timeout_is_a_store_error(tmp_path: Path) -> None:
    """Another connection holding the write lock: a StoreError naming the file,
    not sqlite3's OperationalError, and nothing written."""
    path = tmp_path / "locked.db"
    store = SQLiteStore(path, timeout=0.05)
    store.put_many(("a",), [NewItem("kept")])
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match="locked"):
            store.put_many(("a",), [NewItem("blocked")])
        with pytest.raises(StoreError, match="locked"):
            store.delete(("a",), ["m0"])
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert [it.text for it in store.recent(("a",), 5)] == ["kept"]
    store.put_many(("a",), [NewItem("after")])
    assert store.count(("a",)) == 2
    store.close()


def test_a_path_with_nul_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="NUL"):
        SQLiteStore(f"{tmp_path}/a\x00b.db")


def test_a_read_only_file_is_read_and_a_write_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    with SQLiteStore(path) as store:
        store.put_many(("a",), [NewItem("hello world")])
    read_only = SQLiteStore(f"file:{path}?mode=ro")
    assert [it.text for it, _ in read_only.lexical_search(("a",), "hello", 3)] == ["hello world"]
    with pytest.raises(StoreError, match="readonly"):
        read_only.put_many(("a",), [NewItem("more")])
    assert read_only.count(("a",)) == 1
    read_only.close()
