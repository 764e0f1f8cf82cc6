"""The store contract, against every backend."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwise import UsageError
from ctxwise.embeddings import HashingEmbedder
from ctxwise.memory import (
    InMemoryStore,
    LongTermMemory,
    NamespaceNotFoundError,
    NewItem,
    SQLiteStore,
    Store,
    StoreError,
)
from ctxwise.memory.store import MAX_KEY_BYTES
from tests.memory.conftest import DIM

EMB = HashingEmbedder(DIM)
A = ("acme", "user-1")
B = ("acme", "user-2")


def item(text: str, id: str | None = None, **meta: object) -> NewItem:
    return NewItem(text, meta, id, EMB.embed([text])[0])


def test_put_get_delete_and_order(make_store: Callable[[], Store]) -> None:
    store = make_store()
    ids = store.put_many(A, [item("first", "a"), item("second"), item("third", "c")])
    assert ids[0] == "a" and ids[2] == "c" and len(set(ids)) == 3
    got = store.get_many(A, ["c", "a", "missing"])
    assert [g.text for g in got] == ["third", "first"]
    assert [g.seq for g in store.by_seq(A, [0, 1, 2])] == [0, 1, 2]
    assert store.count(A) == 3 and store.delete(A, ["a", "zzz"]) == 1 and store.count(A) == 2
    store.put(A, item("replaced", "c"))
    assert store.get(A, "c").text == "replaced"  # type: ignore[union-attr]
    assert store.count(A) == 2


def test_namespaces_isolate(make_store: Callable[[], Store]) -> None:
    store = make_store()
    store.put_many(A, [item("refund order 8812", "x", kind="fact")])
    store.put_many(B, [item("refund order 8812", "x", kind="fact"), item("other", "y")])
    assert store.count(A) == 1 and store.count(B) == 2
    for hits in (
        store.lexical_search(A, "refund 8812", 10),
        store.vector_search(A, EMB.embed(["refund order 8812"])[0], 10),
        store.get_many(A, ["x", "y"]),
    ):
        rows = [h[0] if isinstance(h, tuple) else h for h in hits]
        assert rows and all(r.namespace == A for r in rows)
    assert sorted(store.namespaces()) == sorted([A, B])
    assert store.delete(A, ["y"]) == 0 and store.count(B) == 2


def test_namespaces_are_listed_in_tuple_order(make_store: Callable[[], Store]) -> None:
    store = make_store()
    names = [("a", "b"), ("a-b",), ("a",), ("a.", "x"), ("A",), ("é",), ("a b",)]
    for ns in names:
        store.put_many(ns, [NewItem("x")])
    assert store.namespaces() == sorted(names)  # not by the '/'-joined key: 'a-b' < 'a/b'


def test_search_ranks_and_filters(make_store: Callable[[], Store]) -> None:
    store = make_store()
    store.put_many(
        A,
        [
            item("the parcel with tracking JD0148 shipped on May 2", "t", kind="fact"),
            item("customer prefers terse answers", "p", kind="pref"),
            item("refund policy allows returns within 30 days", "r", kind="fact"),
        ],
    )
    lex = store.lexical_search(A, "when did the parcel ship", 2)
    assert lex[0][0].id == "t" and lex[0][1] >= lex[-1][1]
    vec = store.vector_search(A, EMB.embed(["terse answers please"])[0], 3)
    assert vec[0][0].id == "p" and vec[0][1] == pytest.approx(max(s for _, s in vec))
    only_facts = store.lexical_search(A, "terse parcel refund", 10, {"kind": "fact"})
    assert {h[0].id for h in only_facts} == {"t", "r"}
    assert {
        h[0].id for h in store.vector_search(A, EMB.embed(["terse"])[0], 10, {"kind": "pref"})
    } == {"p"}
    assert store.lexical_search(A, "!!!", 5) == []


def test_writes_are_atomic(make_store: Callable[[], Store]) -> None:
    store = make_store()
    store.put_many(A, [item("kept")])
    with pytest.raises(UsageError):
        store.put_many(A, [item("fine"), NewItem("   ")])
    assert store.count(A) == 1


@pytest.mark.parametrize(
    "bad",
    [NewItem(""), NewItem("x" * 10_000_001), NewItem("lone \ud800 surrogate")],
    ids=["empty", "10MB", "invalid-utf8"],
)
def test_bad_text(make_store: Callable[[], Store], bad: NewItem) -> None:
    store = make_store()
    with pytest.raises(UsageError):
        store.put_many(A, [bad])
    assert store.count(A) == 0


def test_bad_namespaces(make_store: Callable[[], Store]) -> None:
    store = make_store()
    for ns in [(), ("a/b",), ("",), "acme"]:
        with pytest.raises(UsageError):
            store.count(ns)  # type: ignore[arg-type]
    memory = LongTermMemory(store, ("nobody",), EMB)
    with pytest.raises(NamespaceNotFoundError):
        memory.recall("anything")


def test_a_second_handle_sees_committed_items(make_store: Callable[[], Store]) -> None:
    first = make_store()
    first.put_many(A, [item("visible to every handle", "v")])
    second = make_store()
    assert second.get(A, "v") is not None
    assert second.vector_search(A, EMB.embed(["visible handle"])[0], 1)[0][0].id == "v"


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.text(alphabet="abc de", min_size=1, max_size=12).filter(str.strip),
        min_size=1,
        max_size=12,
    )
)
def test_recall_never_crosses_namespaces_or_exceeds_k(
    make_store: Callable[[], Store], texts: list[str]
) -> None:
    store = make_store()
    ns = ("prop", hashlib.sha256("|".join(texts).encode()).hexdigest()[:12])  # fresh per example
    other = ("prop-other", ns[1])
    memory = LongTermMemory(store, ns, EMB)
    LongTermMemory(store, other, EMB).remember_many(NewItem(t) for t in texts)
    memory.remember_many(NewItem(t) for t in texts)
    for mode in ("hybrid", "lexical", "vector"):
        hits = memory.recall(texts[0], k=3, mode=mode)  # type: ignore[arg-type]
        assert len(hits) <= 3 and all(h.item.namespace == ns for h in hits)


def test_hybrid_recall_dedupes_and_expands_neighbours(make_store: Callable[[], Store]) -> None:
    memory = LongTermMemory(make_store(), A, EMB, context=0)
    memory.remember_many(
        NewItem(t)
        for t in [
            "hello there",
            "my order 8812 never arrived",
            "sorry to hear that",
            "My order 8812 never arrived",
        ]
    )
    hits = memory.recall("order 8812", k=3)
    texts = [h.item.text.lower() for h in hits]
    assert texts.count("my order 8812 never arrived") == 1
    expanded = memory.recall("order 8812", k=1, neighbours=1)
    assert [h.via for h in expanded] == ["hit", "neighbour", "neighbour"]
    assert {h.item.text for h in expanded[1:]} == {"hello there", "sorry to hear that"}


def test_recency_needs_a_clock_and_prefers_new(make_store: Callable[[], Store]) -> None:
    now = [1000.0]
    memory = LongTermMemory(make_store(), A, EMB, clock=lambda: now[0], context=0)
    memory.remember("the plan is Pro", created_at=0.0)
    memory.remember("the plan is Basic", created_at=990.0)
    newest = memory.recall("what is the plan", k=1, recency_half_life=60.0)[0]
    assert newest.item.text == "the plan is Basic"
    with pytest.raises(UsageError, match="clock"):
        LongTermMemory(memory.store, A, EMB).recall("plan", recency_half_life=60.0)


def test_vectors_are_float32_unit() -> None:
    v = EMB.embed(["abc"])[0]
    assert v.dtype == np.float32 and float(np.linalg.norm(v)) == pytest.approx(1.0)


# one analyzer, one BM25: every backend ranks alike ---------------------------------

UNICODE = [
    ("cafe", "Café naïve au centre-ville, crème brûlée"),
    ("tokyo", "東京タワーに行きました"),
    ("munich", "Straße in München, Ölpreis gestiegen"),
    ("greek", "Mixed Ελληνικά and English words"),
    ("russian", "Привет мир, заказ 8812 доставлен"),
    ("plain", "the parcel shipped on Monday"),
]


@pytest.mark.parametrize(
    ("query", "want"),
    [
        ("cafe", "cafe"),
        ("naïve creme brulee", "cafe"),
        ("CAFÉ", "cafe"),
        ("東京", "tokyo"),
        ("タワー", "tokyo"),
        ("strasse munchen", "munich"),
        ("ΕΛΛΗΝΙΚΆ", "greek"),
        ("привет", "russian"),
        ("заказ 8812", "russian"),
        ("shipping parcels", "plain"),
    ],
)
def test_accented_cjk_and_mixed_script_items_are_recalled(
    make_store: Callable[[], Store], query: str, want: str
) -> None:
    store = make_store()
    store.put_many(A, [item(text, id) for id, text in UNICODE])
    assert store.lexical_search(A, query, 1)[0][0].id == want
    memory = LongTermMemory(store, A, EMB)
    assert memory.recall(query, k=1)[0].item.id == want


def _scores(store: Store, ns: tuple[str, ...], queries: list[str]) -> list[list[tuple[str, float]]]:
    return [[(it.id, s) for it, s in store.lexical_search(ns, q, 10)] for q in queries]


def test_one_namespace_never_changes_another_namespaces_scores(
    make_store: Callable[[], Store],
) -> None:
    store = make_store()
    a, b = ("stats", "a"), ("stats", "b")
    rng = np.random.default_rng(7)
    words = ["refund", "parcel", "router", "laptop", "berlin", "osaka", "late", "broken"]
    store.put_many(a, [NewItem(" ".join(rng.choice(words, 4)) + f" case {i}") for i in range(50)])
    queries = ["refund broken router", "osaka parcel", "late laptop case 7", "berlin"]
    before = _scores(store, a, queries)
    store.put_many(
        b, [NewItem(" ".join(rng.choice(words, 2)) + " refund refund") for _ in range(10_000)]
    )
    assert _scores(store, a, queries) == before


def _corpus(n: int) -> list[NewItem]:
    rng = np.random.default_rng(11)
    vocab = [
        "refund", "refunded", "parcel", "parcels", "router", "laptop", "berlin", "osaka",
        "late", "broken", "charged", "twice", "café", "東京", "order", "8812", "mia", "kai",
    ]  # fmt: skip
    texts = [" ".join(rng.choice(vocab, int(rng.integers(2, 9)))) for _ in range(n)]
    return [item(t, f"i{i}", n=i % 3) for i, t in enumerate(texts)]


AGREEMENT_QUERIES = [
    "refund", "refunds for broken routers", "Cafe in Tokyo 東京", "order 8812 charged twice",
    "mia kai", "late parcel osaka", "the", "laptop berlin broken late", "ORDER", "twice twice",
]  # fmt: skip


def _same_top(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    """The same top k, best first; items whose scores tie may swap."""
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9, abs=1e-12)
    groups: dict[float, tuple[set[str], set[str]]] = {}
    for (gid, gs), (wid, _) in zip(got, want, strict=True):
        key = round(gs, 9)
        groups.setdefault(key, (set(), set()))
        groups[key][0].add(gid)
        groups[key][1].add(wid)
    cut = round(want[-1][1], 9) if want else None
    for key, (g, w) in groups.items():
        if key != cut:  # the last tie group may be cut at k by either backend
            assert g == w


def _backends(tmp_path: Path) -> dict[str, Store]:
    stores: dict[str, Store] = {
        "memory": InMemoryStore(),
        "sqlite": SQLiteStore(tmp_path / "agree.db"),
    }
    dsn = os.environ.get("CTXWISE_PG_DSN")
    if dsn and importlib.util.find_spec("psycopg") and importlib.util.find_spec("pgvector"):
        from ctxwise.memory.postgres import PostgresStore

        stores["postgres"] = PostgresStore(dsn, dim=DIM, schema=f"t_{uuid.uuid4().hex[:12]}")
    return stores


def test_every_backend_ranks_alike(tmp_path: Path) -> None:
    """The same items and queries give the same top 10 (ties aside) on memory,
    SQLite and PostgreSQL (when CTXWISE_PG_DSN names one): the store's own lexical
    search, with and without a filter, and LongTermMemory's lexical recall."""
    stores = _backends(tmp_path)
    try:
        items = _corpus(600)
        results: dict[str, list[list[tuple[str, float]]]] = {}
        for name, store in stores.items():
            store.put_many(A, items)
            store.put_many(B, items[:50])  # another namespace's items change nothing
            memory = LongTermMemory(store, ("agree", "conv"), EMB)
            memory.remember_many(NewItem(it.text, it.metadata, it.id) for it in items)
            rows = _scores(store, A, AGREEMENT_QUERIES)
            for q in AGREEMENT_QUERIES:
                rows.append([(h.item.id, h.score) for h in memory.recall(q, k=10, mode="lexical")])
                filtered = store.lexical_search(A, q, 10, {"n": 1})
                rows.append([(it.id, s) for it, s in filtered])
            results[name] = rows
        assert all(len(r) == 10 for r in results["memory"][:3])
        for rows in results.values():
            for got, want in zip(rows, results["memory"], strict=True):
                _same_top(got, want)
    finally:
        for name, store in stores.items():
            if name == "postgres":
                store.drop()  # type: ignore[attr-defined]
            store.close()


def test_context_is_read_from_the_store(make_store: Callable[[], Store]) -> None:
    """A second LongTermMemory (another process, a restart) indexes its first item
    with the turns stored before it, as one instance writing all of them would."""
    store = make_store()
    LongTermMemory(store, A, EMB, context=1).remember("I adopted a puppy last week")
    later = LongTermMemory(make_store(), A, EMB, context=1, successor_share=0.0)
    later.remember("Rex, after my grandpa")
    hits = later.recall("puppy", k=2, mode="lexical")
    assert [h.item.text for h in hits] == ["I adopted a puppy last week", "Rex, after my grandpa"]
    assert [it.text for it in store.recent(A, 5)] == [h.item.text for h in hits]
    assert store.recent(A, 0) == [] and store.recent(B, 3) == []


def test_a_long_index_text_is_indexed_alike(make_store: Callable[[], Store]) -> None:
    store = make_store()
    long = "padding " * 150_000 + "needle"  # longer than one item's text may be
    store.put_many(A, [NewItem("short", {}, "long", index_text=long), NewItem("needle", {}, "n")])
    found = {it.id: s for it, s in store.lexical_search(A, "needle", 5)}
    assert set(found) == {"long", "n"} and found["n"] > found["long"]


# hostile inputs: every backend accepts, refuses and compares alike ----------------


def _deep(depth: int) -> list[object]:
    nested: list[object] = []
    for _ in range(depth):
        nested = [nested]
    return nested


V4 = np.zeros(DIM, dtype=np.float32)
V4[0] = 1.0


@pytest.mark.parametrize(
    "bad",
    [
        NewItem("x", {"a": float("nan")}),
        NewItem("x", {"a": float("inf")}),
        NewItem("x", {"a": object()}),
        NewItem("x", {"a": "lone \ud800"}),
        NewItem("x", [("a", 1)]),  # type: ignore[arg-type]
        NewItem("x", id="a\x00b"),
        NewItem("x", id="a\ud800"),
        NewItem("x", id=5),  # type: ignore[arg-type]
        NewItem("x", created_at="yesterday"),  # type: ignore[arg-type]
        NewItem("x", created_at=True),
        NewItem("x", created_at=float("nan")),
        NewItem("x", vector=np.full(DIM, np.nan, dtype=np.float32)),
        NewItem("x", vector=np.zeros((2, DIM // 2), dtype=np.float32)),
        NewItem("x", vector=np.zeros(0, dtype=np.float32)),
        NewItem("x", vector=["a"] * DIM),  # type: ignore[arg-type]
        NewItem("x", vector=np.ones(DIM - 1, dtype=np.float32)),
        NewItem("x", index_text=5),  # type: ignore[arg-type]
        NewItem("x", {"a": _deep(5000)}),
    ],
    ids=[
        "nan-metadata", "inf-metadata", "object-metadata", "surrogate-metadata",
        "list-metadata", "nul-id", "surrogate-id", "int-id", "str-created_at",
        "bool-created_at", "nan-created_at", "nan-vector", "2d-vector", "empty-vector",
        "str-vector", "short-vector", "int-index_text", "deep-metadata",
    ],
)  # fmt: skip
def test_bad_items_are_usage_errors_and_write_nothing(
    make_store: Callable[[], Store], bad: NewItem
) -> None:
    store = make_store()
    store.put_many(A, [NewItem("kept", vector=V4)])
    with pytest.raises(UsageError):
        store.put_many(A, [NewItem("fine", vector=V4), bad])
    assert store.count(A) == 1 and [it.text for it in store.recent(A, 5)] == ["kept"]


def test_items_read_back_as_json_data(make_store: Callable[[], Store]) -> None:
    store = make_store()
    meta = {"t": (1, 2), 3: "three", "big": 2**70, "exact": 2**53 + 1, "nested": {"a": [None]}}
    store.put_many(A, [NewItem("x", meta, "i", created_at=5), NewItem("y", {}, ""), NewItem("z")])
    got = store.get(A, "i")
    assert got is not None and got.created_at == 5.0 and isinstance(got.created_at, float)
    assert got.metadata == {
        "t": [1, 2], "3": "three", "big": 2**70, "exact": 2**53 + 1, "nested": {"a": [None]},
    }  # fmt: skip
    assert [it.id for it in store.recent(A, 5)] == ["i", "m1", "m2"]  # "" asks for an id


FILTERED = [
    ("true", {"v": True}),
    ("one", {"v": 1}),
    ("float", {"v": 1.0}),
    ("text", {"v": "1"}),
    ("null", {"v": None}),
    ("none", {}),
    ("obj", {"v": {"b": 1, "c": [1, 2]}}),
    ("list", {"v": [1, 2]}),
    ("big", {"v": 2**70}),
    ("nul", {"v": "a\x00b"}),
    ("keys", {'c"d': 2, "a.b": 3, "$": 4, "k\x00": 5}),
]


@pytest.mark.parametrize(
    ("filters", "want"),
    [
        ({"v": True}, {"true"}),
        ({"v": 1}, {"one", "float"}),
        ({"v": 1.0}, {"one", "float"}),
        ({"v": "1"}, {"text"}),
        ({"v": False}, set()),
        ({"v": 0}, set()),
        ({"v": None}, {"null", "none", "keys"}),
        ({"v": {"c": [1, 2], "b": 1}}, {"obj"}),
        ({"v": {"b": 1}}, set()),
        ({"v": [1, 2]}, {"list"}),
        ({"v": (1, 2)}, {"list"}),
        ({"v": [1]}, set()),
        ({"v": 2**70}, {"big"}),
        ({"v": 2**70 + 1}, set()),
        ({"v": "a\x00b"}, {"nul"}),
        ({"v": "a"}, set()),
        ({'c"d': 2, "a.b": 3, "$": 4}, {"keys"}),
        ({"k\x00": 5}, {"keys"}),
        ({"missing": 1}, set()),
        ({}, {name for name, _ in FILTERED}),
    ],
)
def test_filters_compare_json_values_alike(
    make_store: Callable[[], Store], filters: dict[str, object], want: set[str]
) -> None:
    store = make_store()
    store.put_many(A, [NewItem("hello", meta, name, V4) for name, meta in FILTERED])
    assert {it.id for it, _ in store.lexical_search(A, "hello", 50, filters)} == want
    assert {it.id for it, _ in store.vector_search(A, V4, 50, filters)} == want


def test_bad_calls_are_usage_errors(make_store: Callable[[], Store]) -> None:
    store = make_store()
    store.put_many(A, [NewItem("hello", {"v": 1}, "i", V4)])
    calls: list[Callable[[], object]] = [
        lambda: store.lexical_search(A, "hello", 5, [("v", 1)]),  # type: ignore[arg-type]
        lambda: store.lexical_search(A, "hello", 5, {1: 1}),  # type: ignore[dict-item]
        lambda: store.lexical_search(A, "hello", 5, {"v": float("nan")}),
        lambda: store.vector_search(A, V4, 5, {"v": object()}),
        lambda: store.lexical_search(A, 5, 5),  # type: ignore[arg-type]
        lambda: store.lexical_search(A, "hello \ud800", 5),
        lambda: store.vector_search(A, np.full(DIM, np.nan, dtype=np.float32), 5),
        lambda: store.vector_search(A, np.ones(DIM - 1, dtype=np.float32), 5),
        lambda: store.vector_search(A, ["a"] * DIM, 5),  # type: ignore[arg-type]
        lambda: store.by_seq(A, ["0"]),  # type: ignore[list-item]
        lambda: store.by_seq(A, [0.0]),  # type: ignore[list-item]
        lambda: store.recent(A, 1.5),  # type: ignore[arg-type]
        lambda: store.recent(A, True),
        lambda: store.count(("a\ud800",)),
        lambda: store.put_many(("a\ud800",), [NewItem("x")]),
    ]
    for call in calls:
        with pytest.raises(UsageError):
            call()
    assert store.count(A) == 1


def test_huge_k_n_and_seqs_are_clamped(make_store: Callable[[], Store]) -> None:
    store = make_store()
    store.put_many(A, [NewItem("hello", {}, "i", V4)])
    for k in (10**12, 2**63, 2**70):
        assert [it.id for it, _ in store.lexical_search(A, "hello", k)] == ["i"]
        assert [it.id for it, _ in store.vector_search(A, V4, k)] == ["i"]
    assert [it.id for it in store.recent(A, 2**70)] == ["i"]
    assert [it.id for it in store.by_seq(A, [0, 0, -1, 2**63, 2**70])] == ["i"]


def test_a_closed_store_is_a_store_error(make_store: Callable[[], Store]) -> None:
    make_store()  # the fixture's first handle stays open (it drops the PostgreSQL schema)
    store = make_store()
    store.put_many(A, [NewItem("hello", {}, "i", V4)])
    store.close()
    store.close()  # again: nothing
    calls: list[Callable[[], object]] = [
        lambda: store.put_many(A, [NewItem("more")]),
        lambda: store.get_many(A, ["i"]),
        lambda: store.delete(A, ["i"]),
        lambda: store.lexical_search(A, "hello", 5),
        lambda: store.vector_search(A, V4, 5),
        lambda: store.by_seq(A, [0]),
        lambda: store.recent(A, 1),
        lambda: store.namespaces(),
        lambda: store.count(A),
    ]
    for call in calls:
        with pytest.raises(StoreError, match="closed"):
            call()


def test_vector_search_ranks_by_cosine_for_vectors_of_any_length(
    make_store: Callable[[], Store],
) -> None:
    """Vectors that are not unit length (an embedder that does not normalize): the
    score is their cosine similarity on every backend, as PostgreSQL's ``<=>``
    gives it, not a dot product that favours long vectors."""
    store = make_store()
    long, tilted, zero = np.zeros(DIM, np.float32), np.zeros(DIM, np.float32), V4 * 0
    long[0], tilted[:2] = 30.0, 0.5
    store.put_many(A, [NewItem("long", vector=long), NewItem("tilted", vector=tilted)])
    store.put_many(A, [NewItem("zero", vector=zero), NewItem("unit", vector=V4)])
    found = [(it.text, s) for it, s in store.vector_search(A, V4 * 4, 4)]
    assert [t for t, _ in found[2:]] == ["tilted", "zero"]
    assert {t for t, _ in found[:2]} == {"long", "unit"}
    assert [s for _, s in found] == pytest.approx([1.0, 1.0, 0.5**0.5, 0.0], abs=1e-6)


def test_ids_and_namespaces_up_to_the_key_limit_fit_every_backend(
    make_store: Callable[[], Store],
) -> None:
    """PostgreSQL's btree keys hold (namespace, id) up to 2,704 bytes: every store
    takes ids and namespaces up to MAX_KEY_BYTES and refuses longer ones alike."""
    rng = np.random.default_rng(5)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789"))

    def noise(n: int) -> str:  # incompressible, as PostgreSQL would otherwise shrink it
        return "".join(rng.choice(letters, n))

    store = make_store()
    ns, item_id = (noise(MAX_KEY_BYTES),), noise(MAX_KEY_BYTES - 2) + "é"
    assert store.put_many(ns, [NewItem("hello", {}, item_id, V4)]) == [item_id]
    assert store.get(ns, item_id) is not None and store.delete(ns, [item_id]) == 1
    with pytest.raises(UsageError, match="exceeds"):
        store.put_many(A, [NewItem("hello", {}, item_id + "x")])
    with pytest.raises(UsageError, match="exceeds"):
        store.put_many(("x", ns[0]), [NewItem("hello")])
    assert store.count(A) == 0


def test_ids_may_come_from_any_iterable_and_odd_ones_match_nothing(
    make_store: Callable[[], Store],
) -> None:
    store = make_store()
    store.put_many(A, (NewItem(t, {}, i) for t, i in [("a", "x"), ("b", "y")]))
    odd: list[object] = [1, None, ("x",), ["y"], "x\x00", "x\ud800"]
    assert [it.id for it in store.get_many(A, (i for i in ["y", "x", "z"]))] == ["y", "x"]
    assert store.get_many(A, odd) == []  # type: ignore[arg-type]
    assert store.delete(A, odd) == 0  # type: ignore[arg-type]
    assert store.delete(A, (i for i in ["y", "y", "z"])) == 1 and store.count(A) == 1
    with pytest.raises(UsageError, match="NewItem"):
        store.put_many(A, ["just text"])  # type: ignore[list-item]
    assert store.count(A) == 1
