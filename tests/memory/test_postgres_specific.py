"""What only the PostgreSQL store has: migrations, connection failures, concurrency,
and parity with the reference store on a real server.

Needs a server: ``CTXWISE_PG_DSN=$(python scripts/pg_server.py start DATADIR)``.
Every test works in a schema of its own, dropped afterwards.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

EXTRA = "the PostgreSQL store needs the extra: pip install -e '.[postgres]'"
psycopg = pytest.importorskip("psycopg", reason=EXTRA)
pytest.importorskip("pgvector", reason=EXTRA)

from psycopg import sql  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402

from ctxwise.errors import UsageError  # noqa: E402
from ctxwise.memory import _postgres_lexical, _postgres_vectors  # noqa: E402
from ctxwise.memory import postgres as postgres_module  # noqa: E402
from ctxwise.memory.postgres import MIGRATIONS, PostgresStore  # noqa: E402
from ctxwise.memory.store import (  # noqa: E402
    MAX_TEXT_CHARS,
    InMemoryStore,
    NewItem,
    Store,
    StoreError,
    matches,
)
from ctxwise.search import _bounded, bounded_search  # noqa: E402
from tests.search._reference import ReferenceRows  # noqa: E402

DIM = 8
ROOT = Path(__file__).resolve().parents[2]
SKIP = (
    "CTXWISE_PG_DSN is not set: start a server with "
    "`CTXWISE_PG_DSN=$(python scripts/pg_server.py start DATADIR)` to run the PostgreSQL tests"
)


@pytest.fixture(scope="module")
def dsn() -> str:
    value = os.environ.get("CTXWISE_PG_DSN")
    if not value:
        pytest.skip(SKIP)
    return value


@pytest.fixture
def schema(request: pytest.FixtureRequest, dsn: str) -> Iterator[str]:
    """A schema name no other test or concurrent run uses; dropped afterwards."""
    digest = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:10]
    name = f"t{os.getpid()}_{digest}"
    yield name
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def open_store(dsn: str, schema: str) -> Iterator[Callable[..., PostgresStore]]:
    opened: list[PostgresStore] = []

    def make(**kwargs: object) -> PostgresStore:
        kwargs.setdefault("dim", DIM)
        kwargs.setdefault("schema", schema)
        store = PostgresStore(dsn, **kwargs)  # type: ignore[arg-type]
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Callable[..., PostgresStore]) -> PostgresStore:
    return open_store()


def unit(*values: float) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[: len(values)] = values
    return v / np.linalg.norm(v)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


# migrations -------------------------------------------------------------------------


def test_migrations_are_recorded_in_order_and_applied_once(
    open_store: Callable[..., PostgresStore], dsn: str, schema: str
) -> None:
    first = open_store()
    applied = first.migrations()
    assert [name for name, _ in applied] == [name for name, _ in MIGRATIONS]
    first.put(("a",), NewItem("kept across opens"))
    first.close()

    second = open_store()  # the same schema again: nothing to apply
    assert second.migrations() == applied
    assert second.count(("a",)) == 1
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.migrations").format(sql.Identifier(schema))
        ).fetchone()
    assert rows == (len(MIGRATIONS),)


def test_a_schema_from_a_newer_ctxwise_is_refused(
    open_store: Callable[..., PostgresStore], dsn: str, schema: str
) -> None:
    open_store().close()
    with psycopg.connect(dsn) as conn:
        conn.execute(
            sql.SQL("INSERT INTO {}.migrations (name) VALUES ('m999_from_the_future')").format(
                sql.Identifier(schema)
            )
        )
    with pytest.raises(StoreError, match=r"newer ctxwise.*m999_from_the_future"):
        open_store()
    with pytest.raises(StoreError, match="newer"):
        open_store(create=False)


def test_create_false_opens_only_an_existing_schema(
    open_store: Callable[..., PostgresStore],
) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        open_store(create=False)
    open_store().put(("a",), NewItem("x"))
    assert open_store(create=False).count(("a",)) == 1


def test_another_dimension_is_refused(open_store: Callable[..., PostgresStore]) -> None:
    open_store().close()
    with pytest.raises(StoreError, match=f"{DIM}-dimensional vectors, not 4"):
        open_store(dim=4)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dim": 0}, "dim"),
        ({"dim": True}, "dim"),
        ({"schema": "Bad-Name"}, "schema name"),
        ({"schema": "1abc"}, "schema name"),
    ],
)
def test_bad_arguments_are_usage_errors(
    open_store: Callable[..., PostgresStore], kwargs: dict[str, object], match: str
) -> None:
    with pytest.raises(UsageError, match=match):
        open_store(**kwargs)


def test_drop_removes_the_schema(
    open_store: Callable[..., PostgresStore], dsn: str, schema: str
) -> None:
    store = open_store()
    store.put(("a",), NewItem("gone soon"))
    store.drop()
    with pytest.raises(StoreError, match="closed"):
        store.count(("a",))
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT to_regnamespace(%s)", [schema]).fetchone() == (None,)


# connection failures ------------------------------------------------------------------


def assert_one_line(err: BaseException) -> None:
    message = str(err)
    assert message and "\n" not in message
    assert err.__cause__ is None and err.__suppress_context__


def test_a_closed_port_is_a_one_line_store_error() -> None:
    conninfo = f"host=127.0.0.1 port={free_port()} dbname=x user=x connect_timeout=5"
    with pytest.raises(StoreError, match=r"cannot connect to PostgreSQL.*refused") as info:
        PostgresStore(conninfo, dim=DIM)
    assert_one_line(info.value)


def test_a_wrong_password_is_a_one_line_store_error(dsn: str) -> None:
    params = conninfo_to_dict(dsn)
    params["password"] = "not-the-password"
    try:  # a server that trusts every login has no password to refuse
        psycopg.connect(make_conninfo("", **params), connect_timeout=5).close()
    except psycopg.OperationalError:
        pass
    else:
        pytest.skip("this server does not check passwords (scripts/pg_server.py's does)")
    with pytest.raises(StoreError, match="password authentication failed") as info:
        PostgresStore(make_conninfo("", **params), dim=DIM)
    assert_one_line(info.value)
    assert "not-the-password" not in str(info.value)


def test_a_malformed_conninfo_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="connection string"):
        PostgresStore("no_such_option=1", dim=DIM)


# the contract on a real server ----------------------------------------------------------

ITEMS = [
    NewItem("the cat sat on the mat", {"kind": "pet", "n": 1}, vector=unit(1, 0)),
    NewItem("a dog and a cat played", {"kind": "pet", "tags": ["a", "b"]}, vector=unit(0, 1)),
    NewItem("stock prices fell sharply", {"kind": "news"}, vector=unit(0, 0, 1)),
    NewItem("cat cat cat: the cat of cats", {"kind": "pet", "n": 2}, id="cats"),
    NewItem("foo-bar and baz", {"kind": None}, vector=unit(1, 1), created_at=1700000000.5),
]


def both(store: PostgresStore) -> list[Store]:
    ref = InMemoryStore()
    for s in (store, ref):
        s.put_many(("t", "u"), ITEMS)
    return [store, ref]


def test_put_get_replace_delete_match_the_reference(store: PostgresStore) -> None:
    pg, ref = both(store)
    for s in (pg, ref):
        assert s.put(("t", "u"), NewItem("the mat again", {"kind": "pet"}, id="m0")) == "m0"
    for s in (pg, ref):
        assert s.delete(("t", "u"), ["m2", "m2", "nope"]) == 1
    ids = ["cats", "m0", "nope", "m4", "m0", "m2"]
    assert pg.get_many(("t", "u"), ids) == ref.get_many(("t", "u"), ids)
    assert pg.get(("t", "u"), "m0") == ref.get(("t", "u"), "m0")
    assert pg.get(("t", "u"), "m0").seq == 5  # type: ignore[union-attr]  # a new seq
    assert pg.by_seq(("t", "u"), [0, 1, 2, 3, 4, 5, 99]) == ref.by_seq(("t", "u"), range(100))
    assert pg.count(("t", "u")) == ref.count(("t", "u")) == 4
    assert pg.namespaces() == ref.namespaces() == [("t", "u")]


@pytest.mark.parametrize(
    ("query", "filters"),
    [
        ("cat", None),
        ("cat mat", None),
        ("the cat", {"kind": "pet"}),
        ("cat nothing-like-it", None),
        ("cat", {"tags": ["a", "b"]}),
        ("cat", {"tags": ["a"]}),  # equality, not containment
        ("foo baz cat", {"kind": None}),  # None: the key is missing or null
        ("zebra", None),
        ("!!! ???", None),
    ],
)
def test_lexical_search_is_bm25_like_the_reference(
    store: PostgresStore, query: str, filters: dict[str, object] | None
) -> None:
    pg, ref = both(store)
    got = pg.lexical_search(("t", "u"), query, 10, filters)
    want = ref.lexical_search(("t", "u"), query, 10, filters)
    assert [i.id for i, _ in got] == [i.id for i, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want])


def _core(
    store: PostgresStore, ns: tuple[str, ...], query: str, k: int, filters: dict[str, object] | None
) -> list[tuple[int, float]]:
    """What the bounded pass gives on plain-Python rows of ``ns`` (seqs 0..n-1)."""
    items = store.by_seq(ns, range(store.count(ns)))
    docs = [store.analyzer.words(it.text) for it in items]
    kept = {it.seq for it in items if matches(it.metadata, filters)}
    terms = sorted(set(store.analyzer.words(query)))
    return bounded_search(ReferenceRows(docs, kept), terms, len(docs), k)


@pytest.mark.parametrize("cap", [1, 3])
@pytest.mark.parametrize(
    ("query", "filters"),
    [("cat", None), ("the cat mat", None), ("the cat", {"kind": "pet"}), ("zebra", None)],
)
def test_bounded_lexical_search_is_the_search_cores(
    store: PostgresStore,
    monkeypatch: pytest.MonkeyPatch,
    cap: int,
    query: str,
    filters: dict[str, object] | None,
) -> None:
    """Above the cap the store runs ctxwise.search.bounded_search: its rows, its
    scores (exact BM25 over the terms each step scores), as on plain-Python rows."""
    monkeypatch.setattr(_bounded, "LEXICAL_CAP", cap)
    both(store)
    got = [(i.seq, s) for i, s in store.lexical_search(("t", "u"), query, 10, filters)]
    want = _core(store, ("t", "u"), query, 10, filters)
    assert [seq for seq, _ in got] == [seq for seq, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-12)


def test_bounded_lexical_search_finds_the_row_with_every_term(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    words = ["refund", "parcel", "router", "laptop", "berlin", "osaka", "late", "broken"]
    texts = [
        f"{words[i % 8]} {words[(i * 3) % 8]} {words[(i * 5 + 1) % 8]} case {i}" for i in range(600)
    ]
    texts[123] = "late broken router parcel osaka"
    ref = InMemoryStore()
    for s in (store, ref):
        s.put_many(("big",), [NewItem(t) for t in texts])
    monkeypatch.setattr(_bounded, "LEXICAL_CAP", 50)
    query = "the late broken router parcel to osaka"
    got = store.lexical_search(("big",), query, 5)
    want = ref.lexical_search(("big",), query, 5)
    assert got[0][0].seq == want[0][0].seq == 123
    assert [s for _, s in got] == pytest.approx([s for _, s in want])
    for s in (store, ref):  # one write: common counts are reused, within DF_DRIFT
        s.put(("big",), NewItem("late late late broken router parcel osaka"))
    got = store.lexical_search(("big",), query, 3)
    assert [s for _, s in got] == pytest.approx(
        [s for _, s in ref.lexical_search(("big",), query, 3)], rel=_postgres_lexical.DF_DRIFT
    )


def test_common_counts_are_reused_until_the_namespace_drifts(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A common lexeme is counted once, reused while the namespace has changed by at
    most DF_DRIFT of its count (a write between queries costs no recount), and
    counted again past it, after which scores are exact again."""
    monkeypatch.setattr(_bounded, "LEXICAL_CAP", 20)
    ref = InMemoryStore()
    texts = [f"parcel late case {i}" if i % 4 == 1 else f"router case {i}" for i in range(400)]
    for s in (store, ref):
        s.put_many(("d",), [NewItem(t) for t in texts])
    store.lexical_search(("d",), "parcel 17", 3)
    key = ("d", "parcel")
    first, rare = store._df[key], store._df[("d", "17")]
    assert first[2] == 100 and rare[2] == 1  # exact
    store.lexical_search(("d",), "parcel 17", 3)
    assert store._df[("d", "17")] == rare  # no write: nothing counted again
    for s in (store, ref):  # 2 changes <= 2% of 100
        s.put(("d",), NewItem("parcel again"))
        s.delete(("d",), ["m0"])
    store.lexical_search(("d",), "parcel 17", 3)
    assert store._df[key] == first  # reused, not counted again
    assert store._df[("d", "17")] != rare  # 2 changes > 2% of 1: counted again
    for s in (store, ref):  # 12 changes in all > 2% of 100
        s.put_many(("d",), [NewItem(f"parcel extra {i}") for i in range(10)])
    got = store.lexical_search(("d",), "parcel 17", 5)
    assert store._df[key][2] == 111  # counted again
    want = ref.lexical_search(("d",), "parcel 17", 5)
    assert [s for _, s in got] == pytest.approx([s for _, s in want])


def _rule_text(i: int) -> str:
    if i % 10 == 0:  # both common terms, in long rows
        text = f"refund parcel filler filler filler filler filler case{i}"
    elif i % 10 in (1, 2, 3):
        text = f"refund refund case{i}"
    elif i % 10 in (4, 5):  # short rows that outscore the long ones
        text = f"parcel parcel parcel case{i}"
    else:
        text = f"router late case{i}"
    return text + (" rare7" if i % 50 == 7 else "")


@pytest.mark.parametrize(
    ("query", "k", "filters"),
    [
        ("refund parcel", 5, None),  # enough rows hold both: no fallback
        ("refund parcel", 40, None),  # too few: the newest holding either
        ("refund parcel", 12, {"odd": False}),
        ("refund parcel", 5, {"odd": True}),  # no row holds both: the fallback
        ("parcel rare7", 5, None),  # a rare term's rows, then the common one's
        ("parcel rare7 router", 30, {"odd": True}),
        ("late", 3, None),
    ],
)
def test_bounded_lexical_search_ranks_the_candidates_of_the_rule(
    store: PostgresStore,
    monkeypatch: pytest.MonkeyPatch,
    query: str,
    k: int,
    filters: dict[str, object] | None,
) -> None:
    """The bounded pass over the store's rows ranks as it does over plain-Python rows:
    the same rows, the same scores, filters applied (statistics count every row)."""
    texts = [_rule_text(i) for i in range(300)]
    store.put_many(("r",), [NewItem(t, {"odd": i % 2 == 1}) for i, t in enumerate(texts)])
    monkeypatch.setattr(_bounded, "LEXICAL_CAP", 25)
    got = [(i.seq, s) for i, s in store.lexical_search(("r",), query, k, filters)]
    want = _core(store, ("r",), query, k, filters)
    assert [seq for seq, _ in got] == [seq for seq, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-12)


def test_bounded_scores_are_the_same_on_every_call(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each score sums its terms in one order (the lexemes'), whatever plan the server
    picks: psycopg prepares a statement run five times, and PostgreSQL may then
    switch to a generic plan that joins in another order."""
    texts = [f"mia returned the router {'late ' * (i % 3)}case {i}" for i in range(120)]
    for filters in (None, {"even": True}):
        ns = ("same", str(filters is None))
        store.put_many(ns, [NewItem(t, {"even": i % 2 == 0}) for i, t in enumerate(texts)])
        for cap in (1000, 10):
            monkeypatch.setattr(_bounded, "LEXICAL_CAP", cap)
            runs = [store.lexical_search(ns, "mia late router", 20, filters) for _ in range(12)]
            assert all(run == runs[0] for run in runs)


@pytest.mark.parametrize("pipelined", [True, False])
@pytest.mark.parametrize("name", ["_LEXICAL", "_LEXICAL_BOUNDED", "_VECTOR"])
def test_a_failed_search_leaves_the_store_usable(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch, name: str, pipelined: bool
) -> None:
    """Searches pipeline their statements (where libpq can; one by one where it
    cannot, with the same results): one that fails is a StoreError, and the
    connection is left out of the pipeline and the transaction for the next call."""
    if pipelined and not psycopg.Pipeline.is_supported():
        pytest.skip("this libpq has no pipeline mode")
    store._pipelined = pipelined
    store.put_many(("f",), [NewItem(f"late parcel {i}", vector=unit(1, i)) for i in range(30)])
    monkeypatch.setattr(_bounded, "LEXICAL_CAP", 10)

    def search() -> list[str]:
        if name == "_VECTOR":
            return [i.text for i, _ in store.vector_search(("f",), unit(1, 3), 2)]
        if name == "_LEXICAL":
            monkeypatch.setattr(_bounded, "LEXICAL_CAP", 1000)
        return [i.text for i, _ in store.lexical_search(("f",), "late parcel 3", 2)]

    want = search()
    with monkeypatch.context() as mp:
        module = _postgres_vectors if name == "_VECTOR" else _postgres_lexical
        arg = "fetch" if name == "_LEXICAL_BOUNDED" else "k"
        mp.setattr(module, name, f"SELECT 1 / (%({arg})s - %({arg})s)")
        with pytest.raises(StoreError, match="division by zero"):
            search()
    assert search() == want
    assert store.count(("f",)) == 30


def test_lexical_queries_are_text_not_tsquery_syntax(store: PostgresStore) -> None:
    store.put(("a",), NewItem("O'Neil wrote a\\b and c:* here"))
    for query in ["O'Neil", "a\\b", "c:* & !x | (y", "'", "\\", "&|!():*<->"]:
        store.lexical_search(("a",), query, 3)  # never a syntax error
    assert [i.text for i, _ in store.lexical_search(("a",), "o'neil", 3)] == [
        "O'Neil wrote a\\b and c:* here"
    ]


@pytest.mark.parametrize("filters", [None, {"kind": "pet"}, {"n": 1.0}, {"kind": None}])
def test_vector_search_is_cosine_like_the_reference(
    store: PostgresStore, filters: dict[str, object] | None
) -> None:
    pg, ref = both(store)
    q = unit(1, 0.3, 0.1)
    got = pg.vector_search(("t", "u"), q, 3, filters)
    want = ref.vector_search(("t", "u"), q, 3, filters)
    assert [i.id for i, _ in got] == [i.id for i, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)


def test_namespaces_isolate(store: PostgresStore) -> None:
    spaces = [("acme",), ("acme", "u1"), ("acme", "u2"), ("acme", "u1", "s")]
    for ns in spaces:
        store.put_many(ns, [NewItem(f"shared words {'/'.join(ns)}", {"ns": list(ns)}, id="x")])
        store.put(ns, NewItem("vector only here", vector=unit(1)))
    for ns in spaces:
        assert [i.namespace for i in store.get_many(ns, ["x", "m1"])] == [ns, ns]
        assert store.get(ns, "x").metadata == {"ns": list(ns)}  # type: ignore[union-attr]
        hits = store.lexical_search(ns, "shared words", 10)
        assert [i.namespace for i, _ in hits] == [ns]
        assert [i.namespace for i, _ in store.vector_search(ns, unit(1), 10)] == [ns]
        assert [i.namespace for i in store.by_seq(ns, [0, 1])] == [ns, ns]
        assert store.count(ns) == 2
    assert store.delete(("acme", "u1"), ["x", "m1"]) == 2
    assert store.count(("acme", "u1")) == 0
    assert store.count(("acme", "u1", "s")) == 2
    assert store.namespaces() == sorted(set(spaces) - {("acme", "u1")})
    assert store.get_many(("other",), ["x"]) == []
    assert store.lexical_search(("other",), "shared", 3) == []


def test_put_many_is_all_or_nothing(store: PostgresStore, dsn: str, schema: str) -> None:
    store.put(("a",), NewItem("before"))
    bad_text = [NewItem("fine"), NewItem("   "), NewItem("fine too")]
    bad_vector = [NewItem("fine"), NewItem("x", vector=np.ones(DIM + 1, dtype=np.float32))]
    not_finite = [NewItem("x", vector=np.full(DIM, np.nan, dtype=np.float32))]
    not_json = [NewItem("x", {"f": object()})]
    long_id = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(100))
    too_long = [NewItem("fine"), NewItem("long id", id=long_id)]  # past the btree key limit
    for batch in (bad_text, bad_vector, not_finite, not_json, too_long):
        with pytest.raises(UsageError):
            store.put_many(("a",), batch)
    # a failure inside the server, at the second row, rolls back the first too
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {s}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " IF NEW.text = 'refused' THEN RAISE EXCEPTION 'refused by a trigger'; END IF;"
                " RETURN NEW; END $$"
            ).format(s=sql.Identifier(schema))
        )
        conn.execute(
            sql.SQL(
                "CREATE TRIGGER refuse BEFORE INSERT ON {s}.items"
                " FOR EACH ROW EXECUTE FUNCTION {s}.refuse()"
            ).format(s=sql.Identifier(schema))
        )
    with pytest.raises(StoreError, match="refused by a trigger"):
        store.put_many(("a",), [NewItem("fine"), NewItem("refused")])
    assert [i.text for i in store.by_seq(("a",), range(100))] == ["before"]
    assert store.put(("a",), NewItem("after")) == "m1"  # failed batches used no seq


def test_repeated_ids_in_one_batch_keep_the_last(store: PostgresStore) -> None:
    ref = InMemoryStore()
    batch = [
        NewItem("one", id="a"),
        NewItem("two"),
        NewItem("three", id="a"),
        NewItem("four", id="m1"),
    ]
    assert store.put_many(("n",), batch) == ref.put_many(("n",), batch)
    assert store.get_many(("n",), ["a", "m1"]) == ref.get_many(("n",), ["a", "m1"])
    assert store.count(("n",)) == ref.count(("n",)) == 2


def test_nul_characters_round_trip(store: PostgresStore) -> None:
    item = NewItem("before\x00after", {"k\x00": ["v\x00"], "plain": "yes"})
    item_id = store.put(("a",), item)
    got = store.get(("a",), item_id)
    assert got is not None
    assert (got.text, got.metadata) == (item.text, item.metadata)
    assert [i.id for i, _ in store.lexical_search(("a",), "after", 3)] == [item_id]
    for filters in ({"plain": "yes"}, {"k\x00": ["v\x00"]}):
        assert [i.id for i, _ in store.lexical_search(("a",), "before", 3, filters)] == [item_id]
    assert store.lexical_search(("a",), "before", 3, {"k\x00": ["v"]}) == []


def test_a_text_past_the_tsvector_limit_is_stored_and_searchable(store: PostgresStore) -> None:
    words = [hashlib.sha256(str(i).encode()).hexdigest()[:30] for i in range(40_000)]
    text = " ".join(words)[:MAX_TEXT_CHARS]
    item_id = store.put(("big",), NewItem(text))
    assert store.get(("big",), item_id).text == text  # type: ignore[union-attr]
    for word in (words[0], words[10_000]):  # the longest prefix whose index fits: ~500k chars
        assert [i.id for i, _ in store.lexical_search(("big",), word, 3)] == [item_id]


def test_bad_queries_are_usage_errors(store: PostgresStore) -> None:
    store.put(("a",), NewItem("x", vector=unit(1)))
    with pytest.raises(UsageError, match="k must"):
        store.lexical_search(("a",), "x", 0)
    with pytest.raises(UsageError, match="shape"):
        store.vector_search(("a",), np.ones(3, dtype=np.float32), 1)
    with pytest.raises(UsageError, match="namespace"):
        store.count("a")
    with pytest.raises(UsageError, match="filter keys"):
        store.lexical_search(("a",), "x", 1, {1: "x"})  # type: ignore[dict-item]


# concurrency ----------------------------------------------------------------------------


def test_concurrent_writers_in_threads_get_distinct_seqs(
    open_store: Callable[..., PostgresStore],
) -> None:
    stores = [open_store() for _ in range(4)]
    start = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def write(n: int, store: PostgresStore) -> None:
        try:
            start.wait()
            for b in range(10):
                batch = [NewItem(f"writer {n} batch {b} item {i}") for i in range(5)]
                store.put_many(("shared",), batch)
                store.put(("shared",), NewItem("replaced often", id="hot"))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n, s)) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    items = stores[0].by_seq(("shared",), range(10_000))
    assert len(items) == stores[0].count(("shared",)) == 4 * 10 * 5 + 1
    assert len({i.seq for i in items}) == len(items)
    assert max(i.seq for i in items) == 4 * 10 * 6 - 1  # every seq handed out once


WRITER = """
import sys
from ctxwise.memory.postgres import PostgresStore
from ctxwise.memory.store import NewItem
dsn, schema, n = sys.argv[1], sys.argv[2], sys.argv[3]
with PostgresStore(dsn, dim=8, schema=schema) as store:
    for b in range(20):
        store.put_many(("shared",), [NewItem(f"process {n} batch {b} item {i}") for i in range(5)])
"""


def test_concurrent_writers_in_processes_get_distinct_seqs(
    open_store: Callable[..., PostgresStore], dsn: str, schema: str
) -> None:
    store = open_store()  # the schema exists before the writers race
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, dsn, schema, str(n)], cwd=ROOT)
        for n in range(2)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    items = store.by_seq(("shared",), range(1000))
    assert sorted(i.seq for i in items) == list(range(200))


def test_concurrent_first_opens_migrate_once(dsn: str, schema: str) -> None:
    stores: list[PostgresStore] = []
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def open_one() -> None:
        start.wait()
        try:
            stores.append(PostgresStore(dsn, dim=DIM, schema=schema))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        assert [len(s.migrations()) for s in stores] == [len(MIGRATIONS)] * 3
    finally:
        for s in stores:
            s.close()


# bulk loading -----------------------------------------------------------------------


def _has_vector_index(dsn: str, schema: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass(%s)", [f"{schema}.items_embedding_hnsw"]).fetchone()
    return row is not None and row[0] is not None


def test_bulk_load_drops_the_vector_index_and_builds_it_at_the_end(
    open_store: Callable[..., PostgresStore], dsn: str, schema: str
) -> None:
    store = open_store()
    assert _has_vector_index(dsn, schema)
    with store.bulk_load():
        assert not _has_vector_index(dsn, schema)
        store.put_many(("ns",), [NewItem(f"item {i}", vector=unit(1.0, i)) for i in range(50)])
        # searches inside the block are exact, never wrong
        (best, _), *_ = store.vector_search(("ns",), unit(1.0, 7), 3)
        assert best.text == "item 7"
    assert _has_vector_index(dsn, schema)
    (best, _), *_ = store.vector_search(("ns",), unit(1.0, 7), 3)
    assert best.text == "item 7"


def test_bulk_load_vacuums_the_items_at_the_end(
    open_store: Callable[..., PostgresStore], dsn: str, schema: str
) -> None:
    """Until a VACUUM records the GIN index's size (and merges its pending list),
    PostgreSQL prices it as never vacuumed and may scan every row for a lexical
    candidate set: a bulk load ends with VACUUM (ANALYZE)."""
    store = open_store()
    with store.bulk_load():
        store.put_many(("ns",), [NewItem(f"item {i}", vector=unit(1.0, i)) for i in range(50)])
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT last_vacuum, last_analyze FROM pg_stat_user_tables"
            " WHERE schemaname = %s AND relname = 'items'",
            [schema],
        ).fetchone()
    assert row is not None and row[0] is not None and row[1] is not None


def test_bulk_load_builds_the_index_after_an_error_too(
    open_store: Callable[..., PostgresStore], dsn: str, schema: str
) -> None:
    store = open_store()
    with pytest.raises(RuntimeError), store.bulk_load():
        raise RuntimeError("boom")
    assert _has_vector_index(dsn, schema)


def test_an_index_left_dropped_by_a_dead_loader_is_rebuilt_on_open(
    open_store: Callable[..., PostgresStore], dsn: str, schema: str
) -> None:
    open_store().close()
    with psycopg.connect(dsn, autocommit=True) as conn:  # what a killed bulk load leaves
        conn.execute(
            sql.SQL("DROP INDEX {}").format(sql.Identifier(schema, "items_embedding_hnsw"))
        )
    assert not _has_vector_index(dsn, schema)
    open_store()
    assert _has_vector_index(dsn, schema)


def test_no_rebuild_while_another_process_bulk_loads(
    open_store: Callable[..., PostgresStore], dsn: str, schema: str
) -> None:
    loader = open_store()
    with loader.bulk_load():
        open_store()  # a second store opened meanwhile leaves the index to the loader
        assert not _has_vector_index(dsn, schema)
    assert _has_vector_index(dsn, schema)


def test_bulk_load_rejects_a_bad_memory_setting(store: PostgresStore) -> None:
    with (
        pytest.raises(UsageError, match="maintenance_work_mem"),
        store.bulk_load(maintenance_work_mem="1GB; DROP TABLE x"),
    ):
        pass


def test_a_schema_from_before_the_analyzer_is_migrated_and_reindexed(
    open_store: Callable[..., PostgresStore],
    dsn: str,
    schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with monkeypatch.context() as mp:  # the schema as ctxwise wrote it before m004
        mp.setattr(postgres_module, "MIGRATIONS", MIGRATIONS[:3])
        mp.setattr(PostgresStore, "_check_analyzer", lambda self: None)
        open_store().close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {s}.items (ns, id, seq, text, metadata, ntok) VALUES"
                " ('a', 'x', 0, 'Refunded twice: Café au lait', '{{}}', 5),"
                " ('a', 'y', 1, 'nothing to see', '{{}}', 3)"
            ).format(s=sql.Identifier(schema))
        )
        conn.execute(
            sql.SQL("INSERT INTO {s}.counters VALUES ('a', 2, 2, 8)").format(
                s=sql.Identifier(schema)
            )
        )
    store = open_store()
    assert [name for name, _ in store.migrations()] == [name for name, _ in MIGRATIONS]
    hits = store.lexical_search(("a",), "refund cafe", 5)
    assert [it.id for it, _ in hits] == ["x"]
    reference = InMemoryStore()
    reference.put_many(
        ("a",),
        [NewItem("Refunded twice: Café au lait", {}, "x"), NewItem("nothing to see", {}, "y")],
    )
    assert hits[0][1] == pytest.approx(reference.lexical_search(("a",), "refund cafe", 5)[0][1])
    store.close()
    from ctxwise.text import Analyzer

    unstemmed = open_store(analyzer=Analyzer(stem=None))  # another analyzer: re-indexed
    assert unstemmed.lexical_search(("a",), "refund", 5) == []
    assert [it.id for it, _ in unstemmed.lexical_search(("a",), "refunded", 5)] == ["x"]


def test_term_frequencies_count_in_full(
    open_store: Callable[..., PostgresStore], dsn: str, schema: str
) -> None:
    """A tsvector keeps 256 positions per lexeme, none past 16,383: the positions
    hold the frequency instead, so a term occurring more than 256 times or past word
    16,383 scores as on the other stores, and a schema indexed before (those terms
    counted too few times) is re-indexed by m005."""
    filler = " ".join(f"w{i}" for i in range(17_000))
    items = [
        NewItem(filler + " needle needle needle needle", {}, "late"),
        NewItem("needle " + filler, {}, "early"),
        NewItem("short needle text", {}, "s"),
        NewItem("needle " * 300 + "x", {}, "300"),
        NewItem("needle " * 256 + "x", {}, "256"),
    ]
    reference = InMemoryStore()
    reference.put_many(("a",), items)
    want = [(it.id, s) for it, s in reference.lexical_search(("a",), "needle", 5)]
    assert [i for i, _ in want] == ["300", "256", "s", "late", "early"]

    store = open_store()
    store.put_many(("a",), items)
    got = [(it.id, s) for it, s in store.lexical_search(("a",), "needle", 5)]
    assert [i for i, _ in got] == [i for i, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)
    with psycopg.connect(dsn, autocommit=True) as conn:  # as if indexed before m005
        (term,) = store.analyzer.words("needle")
        conn.execute(  # a stale index that counts "late"'s needles too few times: none
            sql.SQL("UPDATE {s}.items SET tsv = ts_delete(tsv, %s::text) WHERE id = 'late'").format(
                s=sql.Identifier(schema)
            ),
            [term],
        )
        conn.execute(
            sql.SQL("DELETE FROM {s}.migrations WHERE name = 'm005_frequency_positions'").format(
                s=sql.Identifier(schema)
            )
        )
    assert "late" not in [it.id for it, _ in store.lexical_search(("a",), "needle", 5)]
    store.close()
    again = open_store()  # m005 re-indexes every item
    fresh = again.lexical_search(("a",), "needle", 5)
    assert [it.id for it, _ in fresh] == [i for i, _ in want]
    assert [s for _, s in fresh] == pytest.approx([s for _, s in want], rel=1e-9)
