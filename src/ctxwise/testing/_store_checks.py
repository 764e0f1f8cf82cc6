"""The memory :class:`~ctxwise.memory.Store` contract, as checks every backend runs.

These are the contract tests ctxwise runs over its own backends (memory, SQLite,
PostgreSQL), in a form a third-party store runs too: each is a function of
``make`` (a new handle on one fresh backing database) and the suite's settings.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import math
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxwise.embeddings import HashingEmbedder
from ctxwise.errors import NamespaceNotFoundError, StoreError, UsageError
from ctxwise.memory.longterm import LongTermMemory
from ctxwise.memory.store import MAX_KEY_BYTES, InMemoryStore, NewItem, Store
from ctxwise.testing._conformance import (
    Capability,
    Check,
    Settings,
    close_enough,
    overrides,
    raises,
)

__all__ = ["ASYNC_TWINS", "STORE_CHECKS", "detect_store"]

Make = Callable[[], Store]
A = ("acme", "user-1")
B = ("acme", "user-2")


def _emb(s: Settings) -> HashingEmbedder:
    return HashingEmbedder(s.dim)


def _item(s: Settings, text: str, id: str | None = None, **meta: object) -> NewItem:
    return NewItem(text, meta, id, _emb(s).embed([text])[0])


def _unit(s: Settings) -> npt.NDArray[np.float32]:
    v = np.zeros(s.dim, dtype=np.float32)
    v[0] = 1.0
    return v


# core -------------------------------------------------------------------------------


def put_get_delete_and_order(make: Make, s: Settings) -> None:
    store = make()
    ids = store.put_many(A, [_item(s, "first", "a"), _item(s, "second"), _item(s, "third", "c")])
    assert ids[0] == "a" and ids[2] == "c" and len(set(ids)) == 3, ids
    assert [g.text for g in store.get_many(A, ["c", "a", "missing"])] == ["third", "first"]
    assert [g.seq for g in store.by_seq(A, [0, 1, 2])] == [0, 1, 2]
    assert store.count(A) == 3 and store.delete(A, ["a", "zzz"]) == 1 and store.count(A) == 2
    store.put(A, _item(s, "replaced", "c"))
    got = store.get(A, "c")
    assert got is not None and got.text == "replaced"
    assert store.count(A) == 2


def namespaces_isolate(make: Make, s: Settings) -> None:
    store = make()
    store.put_many(A, [_item(s, "refund order 8812", "x", kind="fact")])
    store.put_many(B, [_item(s, "refund order 8812", "x", kind="fact"), _item(s, "other", "y")])
    assert store.count(A) == 1 and store.count(B) == 2
    assert all(it.namespace == A for it in store.get_many(A, ["x", "y"]))
    assert sorted(store.namespaces()) == sorted([A, B])
    assert store.delete(A, ["y"]) == 0 and store.count(B) == 2


def namespaces_are_listed_in_tuple_order(make: Make, s: Settings) -> None:
    store = make()
    names = [("a", "b"), ("a-b",), ("a",), ("a.", "x"), ("A",), ("é",), ("a b",)]
    for ns in names:
        store.put_many(ns, [NewItem("x")])
    assert store.namespaces() == sorted(names)  # not by the '/'-joined key: 'a-b' < 'a/b'


def writes_are_atomic(make: Make, s: Settings) -> None:
    store = make()
    store.put_many(A, [_item(s, "kept")])
    raises(UsageError, lambda: store.put_many(A, [_item(s, "fine"), NewItem("   ")]))
    assert store.count(A) == 1


def recent_and_context(make: Make, s: Settings) -> None:
    """A second LongTermMemory (another process, a restart) indexes its first item
    with the turns stored before it, as one instance writing all of them would."""
    store = make()
    LongTermMemory(store, A, _emb(s), context=1).remember("I adopted a puppy last week")
    later = LongTermMemory(make(), A, _emb(s), context=1, successor_share=0.0)
    later.remember("Rex, after my grandpa")
    hits = later.recall("puppy", k=2, mode="lexical")
    assert [h.item.text for h in hits] == ["I adopted a puppy last week", "Rex, after my grandpa"]
    assert [it.text for it in store.recent(A, 5)] == [h.item.text for h in hits]
    assert store.recent(A, 0) == [] and store.recent(B, 3) == []


def items_read_back_as_json_data(make: Make, s: Settings) -> None:
    store = make()
    meta: dict[Any, Any] = {"t": (1, 2), 3: "three", "big": 2**70}
    meta.update({"exact": 2**53 + 1, "nested": {"a": [None]}})
    store.put_many(A, [NewItem("x", meta, "i", created_at=5), NewItem("y", {}, ""), NewItem("z")])
    got = store.get(A, "i")
    assert got is not None and got.created_at == 5.0 and isinstance(got.created_at, float)
    assert got.metadata == {
        "t": [1, 2], "3": "three", "big": 2**70, "exact": 2**53 + 1, "nested": {"a": [None]},
    }, got.metadata  # fmt: skip
    assert [it.id for it in store.recent(A, 5)] == ["i", "m1", "m2"]  # "" asks for an id


def huge_k_n_and_seqs_are_clamped(make: Make, s: Settings) -> None:
    store = make()
    v = _unit(s)
    store.put_many(A, [NewItem("hello", {}, "i", v)])
    for k in (10**12, 2**63, 2**70):
        assert [it.id for it, _ in store.lexical_search(A, "hello", k)] == ["i"]
        assert [it.id for it, _ in store.vector_search(A, v, k)] == ["i"]
    assert [it.id for it in store.recent(A, 2**70)] == ["i"]
    assert [it.id for it in store.by_seq(A, [0, 0, -1, 2**63, 2**70])] == ["i"]


def ids_up_to_the_key_limit_fit(make: Make, s: Settings) -> None:
    """Ids and namespaces up to MAX_KEY_BYTES fit; longer ones are refused."""
    rng = np.random.default_rng(5)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789"))

    def noise(n: int) -> str:  # incompressible, as PostgreSQL would otherwise shrink it
        return "".join(rng.choice(letters, n))

    store = make()
    ns, item_id = (noise(MAX_KEY_BYTES),), noise(MAX_KEY_BYTES - 2) + "é"
    assert store.put_many(ns, [NewItem("hello", {}, item_id, _unit(s))]) == [item_id]
    assert store.get(ns, item_id) is not None and store.delete(ns, [item_id]) == 1
    raises(UsageError, lambda: store.put_many(A, [NewItem("hello", {}, item_id + "x")]), "exceeds")
    raises(UsageError, lambda: store.put_many(("x", ns[0]), [NewItem("hello")]), "exceeds")
    assert store.count(A) == 0


def ids_may_come_from_any_iterable(make: Make, s: Settings) -> None:
    store = make()
    store.put_many(A, (NewItem(t, {}, i) for t, i in [("a", "x"), ("b", "y")]))  # type: ignore[arg-type]
    odd: list[Any] = [1, None, ("x",), ["y"], "x\x00", "x\ud800"]
    assert [it.id for it in store.get_many(A, (i for i in ["y", "x", "z"]))] == ["y", "x"]  # type: ignore[arg-type]
    assert store.get_many(A, odd) == []
    assert store.delete(A, odd) == 0
    assert store.delete(A, (i for i in ["y", "y", "z"])) == 1 and store.count(A) == 1  # type: ignore[arg-type]
    raises(UsageError, lambda: store.put_many(A, ["just text"]), "NewItem")  # type: ignore[list-item]
    assert store.count(A) == 1


def recall_never_crosses_namespaces_or_exceeds_k(make: Make, s: Settings) -> None:
    """Seeded random corpora (the same every run): recall in every mode stays in
    its namespace and returns at most k."""
    rng = np.random.default_rng(29)
    store = make()
    for example in range(12):
        texts = [
            "".join(rng.choice(list("abc de"), int(rng.integers(1, 13)))).strip() or "a"
            for _ in range(int(rng.integers(1, 13)))
        ]
        key = hashlib.sha256(f"{example}|{'|'.join(texts)}".encode()).hexdigest()[:12]
        ns, other = ("prop", key), ("prop-other", key)
        LongTermMemory(store, other, _emb(s)).remember_many(NewItem(t) for t in texts)
        memory = LongTermMemory(store, ns, _emb(s))
        memory.remember_many(NewItem(t) for t in texts)
        for mode in ("hybrid", "lexical", "vector"):
            hits = memory.recall(texts[0], k=3, mode=mode)
            assert len(hits) <= 3 and all(h.item.namespace == ns for h in hits), (texts, mode)


def hybrid_recall_dedupes_and_expands_neighbours(make: Make, s: Settings) -> None:
    memory = LongTermMemory(make(), A, _emb(s), context=0)
    texts = ["hello there", "my order 8812 never arrived", "sorry to hear that"]
    memory.remember_many(NewItem(t) for t in [*texts, "My order 8812 never arrived"])
    hits = memory.recall("order 8812", k=3)
    assert [h.item.text.lower() for h in hits].count("my order 8812 never arrived") == 1
    expanded = memory.recall("order 8812", k=1, neighbours=1)
    assert [h.via for h in expanded] == ["hit", "neighbour", "neighbour"]
    assert {h.item.text for h in expanded[1:]} == {"hello there", "sorry to hear that"}


def recency_needs_a_clock_and_prefers_new(make: Make, s: Settings) -> None:
    now = [1000.0]
    memory = LongTermMemory(make(), A, _emb(s), clock=lambda: now[0], context=0)
    memory.remember("the plan is Pro", created_at=0.0)
    memory.remember("the plan is Basic", created_at=990.0)
    newest = memory.recall("what is the plan", k=1, recency_half_life=60.0)[0]
    assert newest.item.text == "the plan is Basic"
    raises(
        UsageError,
        lambda: LongTermMemory(memory.store, A, _emb(s)).recall("plan", recency_half_life=60.0),
        "clock",
    )


# lexical and vector search ------------------------------------------------------------


def search_ranks_and_filters(make: Make, s: Settings) -> None:
    store = make()
    store.put_many(
        A,
        [
            _item(s, "the parcel with tracking JD0148 shipped on May 2", "t", kind="fact"),
            _item(s, "customer prefers terse answers", "p", kind="pref"),
            _item(s, "refund policy allows returns within 30 days", "r", kind="fact"),
        ],
    )
    store.put_many(B, [_item(s, "the parcel shipped", "other")])
    lex = store.lexical_search(A, "when did the parcel ship", 2)
    assert lex[0][0].id == "t" and lex[0][1] >= lex[-1][1], lex
    assert all(it.namespace == A for it, _ in lex)
    assert store.lexical_search(A, "!!!", 5) == []


def vector_search_ranks_by_cosine(make: Make, s: Settings) -> None:
    """Vectors that are not unit length: the score is their cosine similarity, not
    a dot product that favours long vectors."""
    store = make()
    store.put_many(A, [_item(s, "customer prefers terse answers", "p"), _item(s, "refund", "r")])
    store.put_many(B, [_item(s, "customer prefers terse answers", "elsewhere")])
    vec = store.vector_search(A, _emb(s).embed(["terse answers please"])[0], 3)
    assert vec[0][0].id == "p" and all(it.namespace == A for it, _ in vec), vec
    long, tilted, unit = np.zeros(s.dim, np.float32), np.zeros(s.dim, np.float32), _unit(s)
    long[0], tilted[:2] = 30.0, 0.5
    store.put_many(("cos",), [NewItem("long", vector=long), NewItem("tilted", vector=tilted)])
    store.put_many(("cos",), [NewItem("zero", vector=unit * 0), NewItem("unit", vector=unit)])
    found = [(it.text, score) for it, score in store.vector_search(("cos",), unit * 4, 4)]
    assert [t for t, _ in found[2:]] == ["tilted", "zero"], found
    assert {t for t, _ in found[:2]} == {"long", "unit"}, found
    assert close_enough([sc for _, sc in found], [1.0, 1.0, 0.5**0.5, 0.0], 0.0, 1e-6), found


_UNICODE = [
    ("cafe", "Café naïve au centre-ville, crème brûlée"),
    ("tokyo", "東京タワーに行きました"),
    ("munich", "Straße in München, Ölpreis gestiegen"),
    ("greek", "Mixed Ελληνικά and English words"),
    ("russian", "Привет мир, заказ 8812 доставлен"),
    ("plain", "the parcel shipped on Monday"),
]
_UNICODE_QUERIES = [
    ("cafe", "cafe"), ("naïve creme brulee", "cafe"), ("CAFÉ", "cafe"), ("東京", "tokyo"),
    ("タワー", "tokyo"), ("strasse munchen", "munich"), ("ΕΛΛΗΝΙΚΆ", "greek"),
    ("привет", "russian"), ("заказ 8812", "russian"), ("shipping parcels", "plain"),
]  # fmt: skip


def accented_cjk_and_mixed_script_items_are_recalled(make: Make, s: Settings) -> None:
    store = make()
    store.put_many(A, [_item(s, text, id) for id, text in _UNICODE])
    memory = LongTermMemory(store, A, _emb(s))
    for query, want in _UNICODE_QUERIES:
        assert store.lexical_search(A, query, 1)[0][0].id == want, query
        assert memory.recall(query, k=1)[0].item.id == want, query


def one_namespace_never_changes_another_namespaces_scores(make: Make, s: Settings) -> None:
    store = make()
    a, b = ("stats", "a"), ("stats", "b")
    rng = np.random.default_rng(7)
    words = ["refund", "parcel", "router", "laptop", "berlin", "osaka", "late", "broken"]
    store.put_many(a, [NewItem(" ".join(rng.choice(words, 4)) + f" case {i}") for i in range(50)])
    queries = ["refund broken router", "osaka parcel", "late laptop case 7", "berlin"]

    def scores() -> list[list[tuple[str, float]]]:
        return [[(it.id, sc) for it, sc in store.lexical_search(a, q, 10)] for q in queries]

    before = scores()
    store.put_many(
        b, [NewItem(" ".join(rng.choice(words, 2)) + " refund refund") for _ in range(10_000)]
    )
    assert scores() == before


def a_long_index_text_is_indexed(make: Make, s: Settings) -> None:
    store = make()
    long = "padding " * 150_000 + "needle"  # longer than one item's text may be
    store.put_many(A, [NewItem("short", {}, "long", index_text=long), NewItem("needle", {}, "n")])
    found = {it.id: sc for it, sc in store.lexical_search(A, "needle", 5)}
    assert set(found) == {"long", "n"} and found["n"] > found["long"], found


# metadata filters ---------------------------------------------------------------------

_FILTERED: list[tuple[str, dict[str, Any]]] = [
    ("true", {"v": True}), ("one", {"v": 1}), ("float", {"v": 1.0}), ("text", {"v": "1"}),
    ("null", {"v": None}), ("none", {}), ("obj", {"v": {"b": 1, "c": [1, 2]}}),
    ("list", {"v": [1, 2]}), ("big", {"v": 2**70}), ("nul", {"v": "a\x00b"}),
    ("keys", {'c"d': 2, "a.b": 3, "$": 4, "k\x00": 5}),
]  # fmt: skip
_FILTERS: list[tuple[dict[str, Any], set[str]]] = [
    ({"v": True}, {"true"}), ({"v": 1}, {"one", "float"}), ({"v": 1.0}, {"one", "float"}),
    ({"v": "1"}, {"text"}), ({"v": False}, set()), ({"v": 0}, set()),
    ({"v": None}, {"null", "none", "keys"}), ({"v": {"c": [1, 2], "b": 1}}, {"obj"}),
    ({"v": {"b": 1}}, set()), ({"v": [1, 2]}, {"list"}), ({"v": (1, 2)}, {"list"}),
    ({"v": [1]}, set()), ({"v": 2**70}, {"big"}), ({"v": 2**70 + 1}, set()),
    ({"v": "a\x00b"}, {"nul"}), ({"v": "a"}, set()), ({'c"d': 2, "a.b": 3, "$": 4}, {"keys"}),
    ({"k\x00": 5}, {"keys"}), ({"missing": 1}, set()), ({}, {name for name, _ in _FILTERED}),
]  # fmt: skip


def filters_compare_json_values(make: Make, s: Settings) -> None:
    store = make()
    v = _unit(s)
    store.put_many(A, [NewItem("hello", meta, name, v) for name, meta in _FILTERED])
    for filters, want in _FILTERS:
        assert {it.id for it, _ in store.lexical_search(A, "hello", 50, filters)} == want, filters
        assert {it.id for it, _ in store.vector_search(A, v, 50, filters)} == want, filters


def search_filters_narrow_the_results(make: Make, s: Settings) -> None:
    store = make()
    store.put_many(
        A,
        [
            _item(s, "the parcel shipped on May 2", "t", kind="fact"),
            _item(s, "customer prefers terse answers", "p", kind="pref"),
            _item(s, "refund policy allows returns", "r", kind="fact"),
        ],
    )
    facts = store.lexical_search(A, "terse parcel refund", 10, {"kind": "fact"})
    assert {h[0].id for h in facts} == {"t", "r"}, facts
    prefs = store.vector_search(A, _emb(s).embed(["terse"])[0], 10, {"kind": "pref"})
    assert {h[0].id for h in prefs} == {"p"}, prefs


# validation ---------------------------------------------------------------------------


def _deep(depth: int) -> list[object]:
    nested: list[object] = []
    for _ in range(depth):
        nested = [nested]
    return nested


def bad_text_is_refused(make: Make, s: Settings) -> None:
    store = make()
    for bad in [NewItem(""), NewItem("x" * 10_000_001), NewItem("lone \ud800 surrogate")]:
        raises(UsageError, lambda bad=bad: store.put_many(A, [bad]))  # type: ignore[misc]
    assert store.count(A) == 0


def bad_namespaces_are_refused(make: Make, s: Settings) -> None:
    store = make()
    for ns in [(), ("a/b",), ("",), "acme"]:
        raises(UsageError, lambda ns=ns: store.count(ns))  # type: ignore[misc]
    memory = LongTermMemory(store, ("nobody",), _emb(s))
    raises(NamespaceNotFoundError, lambda: memory.recall("anything"))


def bad_items_write_nothing(make: Make, s: Settings) -> None:
    store = make()
    d, v = s.dim, _unit(s)
    bad_items = [
        NewItem("x", {"a": float("nan")}), NewItem("x", {"a": float("inf")}),
        NewItem("x", {"a": object()}), NewItem("x", {"a": "lone \ud800"}),
        NewItem("x", [("a", 1)]),  # type: ignore[arg-type]
        NewItem("x", id="a\x00b"), NewItem("x", id="a\ud800"),
        NewItem("x", id=5),  # type: ignore[arg-type]
        NewItem("x", created_at="yesterday"),  # type: ignore[arg-type]
        NewItem("x", created_at=True), NewItem("x", created_at=float("nan")),
        NewItem("x", vector=np.full(d, np.nan, dtype=np.float32)),
        NewItem("x", vector=np.zeros((2, d // 2), dtype=np.float32)),
        NewItem("x", vector=np.zeros(0, dtype=np.float32)),
        NewItem("x", vector=["a"] * d),  # type: ignore[arg-type]
        NewItem("x", vector=np.ones(d - 1, dtype=np.float32)),
        NewItem("x", index_text=5),  # type: ignore[arg-type]
        NewItem("x", {"a": _deep(5000)}),
    ]  # fmt: skip
    store.put_many(A, [NewItem("kept", vector=v)])
    for bad in bad_items:
        call = lambda bad=bad: store.put_many(A, [NewItem("fine", vector=v), bad])  # noqa: E731
        raises(UsageError, call)
    assert store.count(A) == 1 and [it.text for it in store.recent(A, 5)] == ["kept"]


def bad_calls_are_usage_errors(make: Make, s: Settings) -> None:
    store = make()
    v = _unit(s)
    store.put_many(A, [NewItem("hello", {"v": 1}, "i", v)])
    calls: list[Callable[[], object]] = [
        lambda: store.lexical_search(A, "hello", 5, [("v", 1)]),  # type: ignore[arg-type]
        lambda: store.lexical_search(A, "hello", 5, {1: 1}),  # type: ignore[dict-item]
        lambda: store.lexical_search(A, "hello", 5, {"v": float("nan")}),
        lambda: store.vector_search(A, v, 5, {"v": object()}),
        lambda: store.lexical_search(A, 5, 5),  # type: ignore[arg-type]
        lambda: store.lexical_search(A, "hello \ud800", 5),
        lambda: store.vector_search(A, np.full(s.dim, np.nan, dtype=np.float32), 5),
        lambda: store.vector_search(A, np.ones(s.dim - 1, dtype=np.float32), 5),
        lambda: store.vector_search(A, ["a"] * s.dim, 5),  # type: ignore[arg-type]
        lambda: store.by_seq(A, ["0"]),  # type: ignore[list-item]
        lambda: store.by_seq(A, [0.0]),  # type: ignore[list-item]
        lambda: store.recent(A, 1.5),  # type: ignore[arg-type]
        lambda: store.recent(A, True),
        lambda: store.count(("a\ud800",)),
        lambda: store.put_many(("a\ud800",), [NewItem("x")]),
    ]
    for call in calls:
        raises(UsageError, call)
    assert store.count(A) == 1


# ranking alike ------------------------------------------------------------------------


def _corpus(s: Settings, n: int) -> list[NewItem]:
    rng = np.random.default_rng(11)
    vocab = [
        "refund", "refunded", "parcel", "parcels", "router", "laptop", "berlin", "osaka",
        "late", "broken", "charged", "twice", "café", "東京", "order", "8812", "mia", "kai",
    ]  # fmt: skip
    texts = [" ".join(rng.choice(vocab, int(rng.integers(2, 9)))) for _ in range(n)]
    return [_item(s, t, f"i{i}", n=i % 3) for i, t in enumerate(texts)]


_AGREEMENT = [
    "refund", "refunds for broken routers", "Cafe in Tokyo 東京", "order 8812 charged twice",
    "mia kai", "late parcel osaka", "the", "laptop berlin broken late", "ORDER", "twice twice",
]  # fmt: skip


def _same_top(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    """The same top k, best first; items whose scores tie may swap."""
    assert close_enough([x for _, x in got], [x for _, x in want], 1e-9, 1e-12), (got, want)
    groups: dict[float, tuple[set[str], set[str]]] = {}
    for (gid, gs), (wid, _) in zip(got, want, strict=True):
        key = round(gs, 9)
        groups.setdefault(key, (set(), set()))
        groups[key][0].add(gid)
        groups[key][1].add(wid)
    cut = round(want[-1][1], 9) if want else None
    for key, (g, w) in groups.items():
        if key != cut:  # the last tie group may be cut at k by either store
            assert g == w, (got, want)


def _scores(store: Store, ns: tuple[str, ...], s: Settings) -> list[list[tuple[str, float]]]:
    rows = [[(it.id, sc) for it, sc in store.lexical_search(ns, q, 10)] for q in _AGREEMENT]
    memory = LongTermMemory(store, ("agree", "conv"), _emb(s))
    for q in _AGREEMENT:
        rows.append([(h.item.id, h.score) for h in memory.recall(q, k=10, mode="lexical")])
        rows.append([(it.id, sc) for it, sc in store.lexical_search(ns, q, 10, {"n": 1})])
    return rows


def ranks_like_the_reference(make: Make, s: Settings) -> None:
    """The same items and queries give the same top 10 (ties aside) as the
    reference InMemoryStore: the store's lexical search, with and without a
    filter, and LongTermMemory's lexical recall."""
    items = _corpus(s, 600)
    results = []
    for store in (InMemoryStore(), make()):
        store.put_many(A, items)
        store.put_many(B, items[:50])  # another namespace's items change nothing
        LongTermMemory(store, ("agree", "conv"), _emb(s)).remember_many(
            NewItem(it.text, it.metadata, it.id) for it in items
        )
        results.append(_scores(store, A, s))
    want, got = results
    assert all(len(r) == 10 for r in want[:3])
    for g, w in zip(got, want, strict=True):
        _same_top(g, w)
    assert not any(math.isnan(x) for r in got for _, x in r)


# handles, close, locks -----------------------------------------------------------------


def a_second_handle_sees_committed_items(make: Make, s: Settings) -> None:
    first = make()
    first.put_many(A, [_item(s, "visible to every handle", "v")])
    second = make()
    assert second.get(A, "v") is not None
    assert second.vector_search(A, _emb(s).embed(["visible handle"])[0], 1)[0][0].id == "v"
    assert second.lexical_search(A, "visible", 1)[0][0].id == "v"


def a_closed_store_is_a_store_error(make: Make, s: Settings) -> None:
    make()  # a first handle stays open (a backend may clean up through it)
    store = make()
    v = _unit(s)
    store.put_many(A, [NewItem("hello", {}, "i", v)])
    store.close()
    store.close()  # again: nothing
    calls: list[Callable[[], object]] = [
        lambda: store.put_many(A, [NewItem("more")]),
        lambda: store.get_many(A, ["i"]),
        lambda: store.delete(A, ["i"]),
        lambda: store.lexical_search(A, "hello", 5),
        lambda: store.vector_search(A, v, 5),
        lambda: store.by_seq(A, [0]),
        lambda: store.recent(A, 1),
        lambda: store.namespaces(),
        lambda: store.count(A),
    ]
    for call in calls:
        raises(StoreError, call, "closed")


def exclusive_refuses_a_second_holder(make: Make, s: Settings) -> None:
    store = make()

    def busy() -> BaseException:
        return StoreError("the caller's own refusal")

    with store.exclusive("job-7", busy=busy):
        raises(StoreError, lambda: store.exclusive("job-7", busy=busy).__enter__(), "caller's own")
        raises(StoreError, lambda: store.exclusive("job-7").__enter__(), "job-7")
        with store.exclusive("job-8"):  # another name is another lock
            pass
    with store.exclusive("job-7"):  # let go when the block ended
        pass
    raises(UsageError, lambda: store.exclusive("").__enter__())
    failed = UsageError("raised inside the block")
    try:
        with store.exclusive("job-9"):
            raise failed
    except UsageError as exc:
        assert exc is failed
    with store.exclusive("job-9"):  # let go when the block raised
        pass


# async twins ------------------------------------------------------------------------

ASYNC_TWINS = (
    "aput_many", "adelete", "arecent", "anamespaces", "alexical_search", "avector_search",
    "aget_many", "aby_seq", "acount", "aput", "aget", "arequire",
)  # fmt: skip
"""The async twin of every public method of :class:`~ctxwise.memory.Store`."""


def async_twins_give_what_the_sync_methods_give(make: Make, s: Settings) -> None:
    """Each twin, awaited, returns what its sync method returns on the same data,
    and raises the same typed errors."""
    store = make()
    items = [_item(s, "the parcel shipped on May 2", "t", kind="fact"),
             _item(s, "customer prefers terse answers", "p", kind="pref"),
             _item(s, "refund policy allows returns", "r", kind="fact")]  # fmt: skip
    q = _emb(s).embed(["terse parcel"])[0]

    async def run() -> None:
        assert await store.aput_many(A, items) == ["t", "p", "r"]
        assert await store.aput(B, _item(s, "elsewhere", "e")) == "e"
        assert await store.aget_many(A, ["r", "missing", "t"]) == store.get_many(A, ["r", "t"])
        assert await store.aget(A, "p") == store.get(A, "p")
        assert await store.aget(A, "missing") is None
        assert await store.aby_seq(A, [2, 0]) == store.by_seq(A, [0, 2])
        assert await store.arecent(A, 2) == store.recent(A, 2)
        assert await store.acount(A) == store.count(A) == 3
        assert sorted(await store.anamespaces()) == sorted(store.namespaces()) == [A, B]
        assert await store.arequire(A) == A
        for filters in (None, {"kind": "fact"}):
            want = store.lexical_search(A, "parcel refund terse", 2, filters)
            assert await store.alexical_search(A, "parcel refund terse", 2, filters) == want
            assert await store.avector_search(A, q, 2, filters) == store.vector_search(
                A, q, 2, filters
            )
        assert await store.adelete(A, ["p", "missing"]) == 1 and store.count(A) == 2
        bad_calls: list[Callable[[], Awaitable[object]]] = [
            lambda: store.acount(("a/b",)),
            lambda: store.alexical_search(A, "x", 0),
            lambda: store.aput_many(A, [NewItem("   ")]),
        ]
        for call in bad_calls:
            try:
                await call()
            except UsageError:
                continue
            raise AssertionError("a bad call through an async twin raised no UsageError")
        try:
            await store.arequire(("nobody",))
        except NamespaceNotFoundError:
            pass
        else:
            raise AssertionError("arequire of an empty namespace raised nothing")

    for name in ASYNC_TWINS:
        assert inspect.iscoroutinefunction(getattr(store, name)), f"{name} is not async"
    asyncio.run(run())


def async_calls_may_run_together(make: Make, s: Settings) -> None:
    """Writes and searches gathered on one event loop (by default each in a worker
    thread of its own) all complete, and every write is kept."""
    store = make()
    spaces = [("together", str(i)) for i in range(6)]

    async def writer(ns: tuple[str, ...]) -> list[str]:
        ids: list[str] = []
        for batch in range(4):
            texts = [f"parcel {ns[1]} batch {batch} item {j}" for j in range(10)]
            ids += await store.aput_many(ns, [_item(s, t) for t in texts])
            await store.alexical_search(ns, "parcel batch", 5)
            await store.avector_search(ns, _emb(s).embed(["parcel"])[0], 5)
        return ids

    async def run() -> list[list[str]]:
        return await asyncio.gather(*(writer(ns) for ns in spaces))

    written = asyncio.run(run())
    for ns, ids in zip(spaces, written, strict=True):
        assert len(set(ids)) == 40 and store.count(ns) == 40, (ns, store.count(ns))
        assert len(store.lexical_search(ns, f"parcel {ns[1]}", 100)) == 40


def _check(fn: Callable[[Make, Settings], None], capability: Capability) -> Check[Store]:
    return Check(fn.__name__, capability, fn, (fn.__doc__ or "").strip())


STORE_CHECKS: tuple[Check[Store], ...] = (
    *(
        _check(fn, Capability.CORE)
        for fn in (
            put_get_delete_and_order,
            namespaces_isolate,
            namespaces_are_listed_in_tuple_order,
            writes_are_atomic,
            recent_and_context,
            items_read_back_as_json_data,
            huge_k_n_and_seqs_are_clamped,
            ids_up_to_the_key_limit_fit,
            ids_may_come_from_any_iterable,
            recall_never_crosses_namespaces_or_exceeds_k,
            hybrid_recall_dedupes_and_expands_neighbours,
            recency_needs_a_clock_and_prefers_new,
        )
    ),
    _check(search_ranks_and_filters, Capability.LEXICAL),
    _check(accented_cjk_and_mixed_script_items_are_recalled, Capability.LEXICAL),
    _check(one_namespace_never_changes_another_namespaces_scores, Capability.LEXICAL),
    _check(a_long_index_text_is_indexed, Capability.LEXICAL),
    _check(vector_search_ranks_by_cosine, Capability.VECTOR),
    _check(filters_compare_json_values, Capability.FILTERS),
    _check(search_filters_narrow_the_results, Capability.FILTERS),
    _check(bad_text_is_refused, Capability.VALIDATION),
    _check(bad_namespaces_are_refused, Capability.VALIDATION),
    _check(bad_items_write_nothing, Capability.VALIDATION),
    _check(bad_calls_are_usage_errors, Capability.VALIDATION),
    _check(ranks_like_the_reference, Capability.RANKING),
    _check(a_second_handle_sees_committed_items, Capability.HANDLES),
    _check(a_closed_store_is_a_store_error, Capability.CLOSE),
    _check(exclusive_refuses_a_second_holder, Capability.LOCKS),
    _check(async_twins_give_what_the_sync_methods_give, Capability.ASYNC),
    _check(async_calls_may_run_together, Capability.ASYNC),
)
"""Every check of the memory store contract, in the order they run."""


def detect_store(store: Store) -> frozenset[Capability]:
    """The capabilities a store's class shows: every one but :attr:`Capability.CLOSE`,
    which needs ``close`` overridden (the base's does nothing), and
    :attr:`Capability.ASYNC`, which needs the async twins (the base gives every one;
    a class that replaced them all with something else does not offer it)."""
    found = set(Capability) - {Capability.CLOSE, Capability.ASYNC}
    if overrides(store, Store, "close"):
        found.add(Capability.CLOSE)
    if any(inspect.iscoroutinefunction(getattr(store, name, None)) for name in ASYNC_TWINS):
        found.add(Capability.ASYNC)
    return frozenset(found)
