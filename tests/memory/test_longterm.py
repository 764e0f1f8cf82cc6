"""Long-term recall: what is indexed, how recall ranks, and that it returns exactly k."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise.embeddings import HashingEmbedder
from ctxwise.errors import UsageError
from ctxwise.memory import InMemoryStore, LongTermMemory, NewItem, SQLiteStore, Store
from ctxwise.memory.longterm import (
    PRESET_EMBEDDERS,
    PRESETS,
    STOPWORDS,
    RecallSettings,
    lexical_query,
)
from ctxwise.text import Analyzer

EMB = HashingEmbedder(64)
NS = ("acme", "user-7")


def test_lexical_query_drops_stopwords_and_question_words() -> None:
    query = "When did Caroline go to the LGBTQ support group?"
    assert lexical_query(query) == "caroline go lgbtq support group"
    assert lexical_query("What is it?") == "What is it?"  # nothing else left: as written
    assert lexical_query("what is Rex", stopwords=()) == "what is rex"
    assert {"what", "when", "did", "the"} <= STOPWORDS


def test_index_text_holds_context_and_metadata() -> None:
    memory = LongTermMemory(InMemoryStore(), NS, EMB, context=2)
    item = NewItem("c", {"date": "8 May 2023", "flag": True, "n": 3})
    assert memory.index_text(item, ["a", "b", "x"]) == "b x c 8 May 2023"
    assert memory.index_text(item, ["x"]) == "x c 8 May 2023"
    bare = LongTermMemory(InMemoryStore(), NS, EMB, context=0, index_metadata=("date", "n"))
    assert bare.index_text(item, ["a"]) == "c 8 May 2023 3"


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_context_carries_across_batches(backend: str, tmp_path: Path) -> None:
    store: Store = InMemoryStore() if backend == "memory" else SQLiteStore(tmp_path / "m.db")
    memory = LongTermMemory(store, NS, EMB, context=1, successor_share=0.0)
    turns = ["I adopted a puppy last week", "What did you name it?", "Rex, after my grandpa"]
    memory.remember_many((NewItem(t) for t in turns), batch_size=1)
    # "Rex…" does not hold the word: lexical search finds it through the turn it answers
    hits = memory.recall("name", k=3, mode="lexical")
    assert {h.item.text for h in hits} == {"What did you name it?", "Rex, after my grandpa"}
    store.close()


def conversation(prefix: bool = True) -> list[NewItem]:
    turns = [
        ("Mel", "You'd be a great counselor! Take a look at this. [shares a lake at dawn]"),
        ("Ann", "Thanks, Mel! Is this your own painting?"),
        ("Mel", "Yeah, I painted that lake sunrise last year!"),
        ("Ann", "I went hiking with my dog on Sunday"),
        ("Mel", "I went hiking with my kids on Sunday"),
        ("Ann", "The weather was lovely all weekend"),
    ]
    return [
        NewItem(f"{who}: {text}" if prefix else text, {"speaker": who}, f"D1:{i}")
        for i, (who, text) in enumerate(turns, start=1)
    ]


def test_a_turn_is_found_through_its_reply() -> None:
    # unstemmed: "painted" (D1:3) would otherwise match "painting" and credit D1:2
    memory = LongTermMemory(
        InMemoryStore(analyzer=Analyzer(stem=None)), NS, EMB, preset="dialogue", context=0
    )
    memory.remember_many(conversation())
    hits = memory.recall("own painting", k=3, mode="lexical")
    assert hits[0].item.id == "D1:2" and hits[0].via == "hit" and hits[0].lexical_rank == 1
    # D1:1 matches no query word; its reply does, so it comes along, ranked, within k
    found = {h.item.id: h for h in hits}
    assert found["D1:1"].via == "successor" and found["D1:1"].lexical_rank is None
    assert found["D1:1"].score == pytest.approx(memory.successor_share * hits[0].score)
    plain = LongTermMemory(memory.store, NS, EMB, preset="dialogue", context=0, successor_share=0)
    assert "D1:1" not in {h.item.id for h in plain.recall("own painting", k=3, mode="lexical")}


def test_a_query_naming_one_speaker_prefers_what_they_said() -> None:
    # the names are only in the metadata: the two hiking turns tie on the words
    memory = LongTermMemory(
        InMemoryStore(), NS, EMB, preset="dialogue", context=0, successor_share=0.0
    )
    memory.remember_many(conversation(prefix=False))
    for who, turn in (("Mel", "D1:5"), ("Ann", "D1:4")):
        top = memory.recall(f"When did {who} go hiking on Sunday?", k=3)
        assert top[0].item.id == turn and top[0].mentioned
        assert {"D1:4", "D1:5"} <= {h.item.id for h in top}  # D1:2 names Mel too
    both = memory.recall("Did Ann and Mel go hiking on Sunday?", k=2)
    assert not any(h.mentioned for h in both)  # two names: no preference
    off = LongTermMemory(memory.store, NS, EMB, context=0)  # neutral: no mention boost
    top = [h.item.id for h in off.recall("When did Mel go hiking on Sunday?", k=3)]
    assert top.index("D1:4") < top.index("D1:5")  # a tie: older first
    assert not any(h.mentioned for h in off.recall("When did Mel go hiking on Sunday?", k=3))


def test_filters_hold_for_items_found_through_their_reply() -> None:
    memory = LongTermMemory(InMemoryStore(), NS, EMB, preset="dialogue", context=0)
    memory.remember_many(conversation())
    hits = memory.recall("own painting", k=6, filters={"speaker": "Ann"})
    assert hits and all(h.item.metadata["speaker"] == "Ann" for h in hits)


def test_settings_and_bad_parameters() -> None:
    memory = LongTermMemory(InMemoryStore(), NS, EMB)
    neutral = {
        "preset": "neutral",
        "embedder": "hashing:64",
        "weights": [1.0, 0.5],
        "rrf_k": 10,
        "context": 2,
        "index_metadata": ["date", "time"],
        "successor_share": 0.0,
        "mention_field": None,
        "mention_boost": 0.0,
        "stopwords": len(STOPWORDS),
    }
    assert memory.settings() == neutral
    dialogue = PRESETS["dialogue"]
    assert dialogue.successor_share > 0 and dialogue.mention_field == "speaker"
    assert dialogue.mention_boost > 0
    named = LongTermMemory(InMemoryStore(), NS, EMB, preset="dialogue", rrf_k=20)
    assert named.settings()["preset"] == "dialogue" and named.rrf_k == 20
    assert named.successor_share == dialogue.successor_share  # the rest from the preset
    given = LongTermMemory(InMemoryStore(), NS, EMB, preset=RecallSettings(context=0))
    assert given.settings()["preset"] is None and given.context == 0
    off = LongTermMemory(InMemoryStore(), NS, EMB, preset="dialogue", mention_field="")
    assert off.mention_field is None
    with pytest.raises(UsageError, match="unknown recall preset"):
        LongTermMemory(InMemoryStore(), NS, EMB, preset="locomo")
    with pytest.raises(UsageError):
        RecallSettings(rrf_k=0)
    store = InMemoryStore()
    bad: list[dict[str, object]] = [
        {"context": -1},
        {"rrf_k": 0},
        {"weights": (1.0,)},
        {"weights": (1.0, -0.5)},
        {"successor_share": -0.1},
        {"successor_share": float("nan")},
        {"mention_boost": True},
        {"index_metadata": "date"},
        {"stopwords": "the"},
        {"mention_field": 3},
    ]
    for kwargs in bad:
        with pytest.raises(UsageError):
            LongTermMemory(store, NS, EMB, **kwargs)  # type: ignore[arg-type]
    memory.remember("hello")
    with pytest.raises(UsageError):
        memory.recall("hello", pool=0)
    with pytest.raises(UsageError):
        memory.recall("hello", weights=(1.0, 2.0, 3.0))  # type: ignore[arg-type]


class _Named:
    """An embedder that says it is ``name`` (vectors from the hashing embedder)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dim = EMB.dim

    def embed(self, texts: Sequence[str]) -> Any:
        return EMB.embed(texts)


def test_preset_for_another_embedder_is_refused_by_name() -> None:
    # dialogue-minilm's weights were fit to MiniLM's vectors: on the hashing
    # embedder it ran, silently, as a figure of another configuration
    for embedder in (None, EMB, _Named("st:/models/other")):
        with pytest.raises(UsageError, match=r"dialogue-minilm.*minilm"):
            LongTermMemory(InMemoryStore(), NS, embedder, preset="dialogue-minilm")
    chosen = LongTermMemory(InMemoryStore(), NS, _Named("minilm"), preset="dialogue-minilm")
    assert chosen.settings()["preset"] == "dialogue-minilm"
    for preset in sorted(set(PRESETS) - set(PRESET_EMBEDDERS)):  # for any embedder
        LongTermMemory(InMemoryStore(), NS, _Named("minilm"), preset=preset)
        LongTermMemory(InMemoryStore(), NS, EMB, preset=preset)


WORDS = st.sampled_from(["order", "refund", "the", "dog", "Ann:", "Rex", "what", "paid", "7"])


@settings(max_examples=60)
@given(
    texts=st.lists(st.lists(WORDS, min_size=1, max_size=6).map(" ".join), min_size=1, max_size=30),
    query=st.lists(WORDS, min_size=1, max_size=4).map(" ".join),
    k=st.integers(1, 12),
    mode=st.sampled_from(["hybrid", "lexical", "vector"]),
    preset=st.sampled_from(sorted(PRESETS)),
)
def test_recall_returns_exactly_k_distinct_items(
    texts: list[str], query: str, k: int, mode: str, preset: str
) -> None:
    """Vector search ranks every item (pool 50 > 30 items), so every mode that uses
    it returns exactly min(k, distinct texts); nothing is returned twice or beyond k."""
    store = InMemoryStore()
    ns = ("prop", hashlib.sha256("|".join(texts).encode()).hexdigest()[:12])
    # every preset's settings, given as settings: a preset named for another
    # embedder than EMB is refused by name (test_preset_for_another_embedder_...)
    memory = LongTermMemory(store, ns, EMB, preset=PRESETS[preset])
    memory.remember_many(NewItem(t, {"speaker": t.split()[0]}) for t in texts)
    hits = memory.recall(query, k=k, mode=mode)  # type: ignore[arg-type]
    ids = [h.item.id for h in hits]
    assert len(ids) == len(set(ids)) <= k
    assert all(h.item.namespace == ns and h.via in ("hit", "successor") for h in hits)
    distinct = {" ".join(t.lower().split()) for t in texts}
    if mode != "lexical":
        assert len(hits) == min(k, len(distinct))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
