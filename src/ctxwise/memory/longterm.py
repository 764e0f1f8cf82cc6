"""Long-term memory: remember text, recall it by similarity.

The settings are a :class:`RecallSettings`, named by a preset (:data:`PRESETS`):
``"neutral"``, the default, assumes nothing about the text beyond English function
words; ``"dialogue"`` adds steps 3 and 4 below, which assume conversations between
named speakers; ``"dialogue-minilm"`` is ``"dialogue"`` tuned for a sentence
embedder (MiniLM) instead of the hashing one.

What is indexed (at ``remember``):

- lexical search indexes the item with the ``context`` items remembered just
  before it (default two: in a conversation, the turn it answers and the one
  before) and the values of its ``index_metadata`` keys (default ``date`` and
  ``time``), so a question about an exchange, or about when something was said,
  finds the turn that holds it. The context is read from the store (the
  namespace's last items, :meth:`Store.recent`), so every process writing a
  namespace indexes alike;
- the vector embeds the item's own text only (embedding the turn before it too
  blurs what a turn says).

How recall ranks (at ``recall``):

1. the lexical query is the query's words without English function and question
   words (:data:`STOPWORDS`; a query made only of them is searched as written);
   the vector query is the query as written;
2. the lexical (BM25/FTS) and vector rankings, ``pool`` deep each, are fused by
   weighted reciprocal rank fusion: ``weight / (rrf_k + rank)`` summed over the
   rankings (``weights`` lexical / vector and ``rrf_k``);
3. an item gains ``successor_share`` (neutral: 0, off) of the fused score of the
   item remembered right after it: a reply often names what the turn before it was
   about ("is this your own painting?"), so a turn is also found through its
   reply (an item in neither ranking is fetched, ``via="successor"``);
4. when the query names exactly one value of the ``mention_field`` metadata key
   (neutral: None, off; dialogue: ``speaker``) among the candidates, their scores
   are multiplied by ``1 + mention_boost``: a question about Ann prefers what Ann
   said;
5. optional recency weighting (a half-life in seconds, against an injected clock)
   and de-duplication of identical texts, then the best ``k``: exactly ``k`` when
   there are that many candidates; neighbour expansion, only when asked, comes
   after those ``k`` (``via="neighbour"``).

Steps 3–5 run in every mode: ``mode="lexical"`` and ``mode="vector"`` are the same
pipeline with one ranking, the baselines the evaluation compares hybrid against.
The same logic runs over every store. The neutral values of steps 1–2 are generic
choices (a low ``rrf_k`` lets the top ranks count, the vector ranking at half
weight); the dialogue preset's values were chosen on LoCoMo dev, on four
conversations at a time and scored on the fifth (``ctxwise eval memory --preset``;
the guide's Memory section and the Benchmarks page, docs/benchmarks.md, give the
figures; ``benchmarks/bench_presets.py`` reruns them).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

from ctxwise.embeddings import Embedder, HashingEmbedder
from ctxwise.errors import UsageError
from ctxwise.memory.store import (
    MemoryItem,
    Namespace,
    NewItem,
    Store,
    batched,
    check_k,
    check_namespace,
    check_text,
    matches,
)
from ctxwise.search import reciprocal_rank_fusion
from ctxwise.text import STOPWORDS, words

__all__ = [
    "PRESETS",
    "PRESET_EMBEDDERS",
    "RRF_K",
    "STOPWORDS",
    "LongTermMemory",
    "RecallMode",
    "RecallSettings",
    "Recalled",
    "check_preset_embedder",
    "lexical_query",
    "recall_settings",
]

RRF_K = 10
"""Default ``k`` of reciprocal rank fusion (``weight / (k + rank)``). Lower than the
usual 60: with a pool of 50, it lets the top ranks of each ranking count more."""

RecallMode: TypeAlias = Literal["hybrid", "lexical", "vector"]


def lexical_query(query: str, stopwords: Collection[str] = STOPWORDS) -> str:
    """The words of ``query`` a lexical search uses: without ``stopwords`` (the
    query itself when nothing else is left)."""
    kept = [w for w in words(query) if w not in stopwords]
    return " ".join(kept) if kept else query


@dataclass(frozen=True, slots=True)
class Recalled:
    """A recalled item and how it was found (ranks are 1-based, None = not ranked).

    ``via``: ``"hit"`` (ranked by a search), ``"successor"`` (in neither ranking,
    found through the score of the item right after it) or ``"neighbour"``
    (neighbour expansion, after the ``k`` results). ``mentioned`` is True when
    the mention boost raised its score.
    """

    item: MemoryItem
    score: float
    lexical_rank: int | None
    vector_rank: int | None
    via: Literal["hit", "successor", "neighbour"] = "hit"
    mentioned: bool = False


@dataclass(slots=True)
class _Candidate:
    item: MemoryItem
    score: float = 0.0
    lexical_rank: int | None = None
    vector_rank: int | None = None
    mentioned: bool = False


def _norm(text: str) -> str:
    """``text`` lowercased, its whitespace runs as one space, stripped: what two
    recalled items must share to be one. ``str.split`` splits on the whitespace
    ``\\s`` matches (``str.isspace``), several times faster on long turns."""
    return " ".join(text.lower().split())


def _share(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise UsageError(f"{name} must be a number of at least 0, got {value!r}")
    return float(value)


def _weights(value: tuple[float, float]) -> tuple[float, float]:
    if (
        not isinstance(value, tuple | list)
        or len(value) != 2
        or not all(_share("a weight", w) >= 0 for w in value)
    ):
        raise UsageError(f"weights are (lexical, vector), two numbers >= 0; got {value!r}")
    return float(value[0]), float(value[1])


@dataclass(frozen=True, slots=True)
class RecallSettings:
    """How :class:`LongTermMemory` indexes and ranks (the module docstring gives
    each step). The defaults are the ``"neutral"`` preset: nothing that assumes a
    kind of text beyond English function words.

    - ``weights`` (lexical, vector) and ``rrf_k``: the fusion (1.0 / 0.5, 10);
    - ``context``: items before each one added to its lexical index (2);
    - ``index_metadata``: metadata keys whose values are indexed (``date``, ``time``);
    - ``successor_share``: the share of the next item's score an item gets
      (0: off; it assumes each item answers the one before it, as in a dialogue);
    - ``mention_field`` / ``mention_boost``: prefer the items whose field value the
      query names (None / 0: off; it assumes named speakers);
    - ``stopwords``: left out of lexical queries (empty: keep every word).
    """

    weights: tuple[float, float] = (1.0, 0.5)
    rrf_k: int = RRF_K
    context: int = 2
    index_metadata: tuple[str, ...] = ("date", "time")
    successor_share: float = 0.0
    mention_field: str | None = None
    mention_boost: float = 0.0
    stopwords: frozenset[str] = STOPWORDS

    def __post_init__(self) -> None:
        context, rrf_k = self.context, self.rrf_k
        index_metadata: Any = self.index_metadata
        if isinstance(context, bool) or not isinstance(context, int) or context < 0:
            raise UsageError(f"context must be 0 or more items, got {context!r}")
        if isinstance(rrf_k, bool) or not isinstance(rrf_k, int) or rrf_k < 1:
            raise UsageError(f"rrf_k must be a positive integer, got {rrf_k!r}")
        if isinstance(index_metadata, str) or not all(
            isinstance(key, str) for key in index_metadata
        ):
            raise UsageError(
                f"index_metadata is a sequence of metadata keys, not {index_metadata!r}"
            )
        if self.mention_field is not None and not isinstance(self.mention_field, str):
            raise UsageError(f"mention_field is a metadata key or None, not {self.mention_field!r}")
        stopwords: Any = self.stopwords
        if isinstance(stopwords, str) or not all(isinstance(w, str) for w in stopwords):
            raise UsageError("stopwords is a collection of lower-case words")
        object.__setattr__(self, "weights", _weights(self.weights))
        object.__setattr__(self, "index_metadata", tuple(index_metadata))
        object.__setattr__(self, "successor_share", _share("successor_share", self.successor_share))
        object.__setattr__(self, "mention_boost", _share("mention_boost", self.mention_boost))
        object.__setattr__(self, "stopwords", frozenset(stopwords))


PRESETS: Mapping[str, RecallSettings] = {
    "neutral": RecallSettings(),
    "dialogue": RecallSettings(
        weights=(1.0, 0.1),
        rrf_k=20,
        successor_share=0.7,
        mention_field="speaker",
        mention_boost=1.0,
    ),
    "dialogue-minilm": RecallSettings(
        weights=(1.0, 0.5),
        rrf_k=10,
        successor_share=0.5,
        mention_field="speaker",
        mention_boost=1.0,
    ),
}
"""Named recall settings. ``neutral`` (the default) assumes nothing about the text;
``dialogue`` is for conversations between named speakers (items with a ``speaker``
metadata value, each turn answering the one before): a turn gets 0.7 of its
reply's score, a question naming one speaker doubles that speaker's turns' scores,
and the vector ranking counts little (weight 0.1: chosen with the hashing
embedder). ``dialogue-minilm`` is the same kind of text with a sentence embedder
(chosen with MiniLM, the ``minilm`` extra): the vector ranking at half weight, a
turn gets 0.5 of its reply's score. Each is the best of the same grid on LoCoMo
dev with its embedder; choosing them on four conversations and scoring the fifth,
in turn, is how ``benchmarks/bench_presets.py`` (``--embedder minilm``) reports
them (see the Benchmarks page, docs/benchmarks.md)."""


PRESET_EMBEDDERS: Mapping[str, str] = {"dialogue-minilm": "minilm"}
"""The presets chosen for one embedder, by that embedder's name: their weights
and shares were fit to its vectors and mean something else on another's."""


def check_preset_embedder(preset: str | RecallSettings, embedder: str) -> None:
    """Refuse a preset chosen for another embedder than ``embedder`` (a name, as
    :attr:`Embedder.name`; ``"hashing"`` when none is given).

    Raises:
        UsageError: the preset is in :data:`PRESET_EMBEDDERS` for another embedder.
    """
    if not isinstance(preset, str):
        return
    wanted = PRESET_EMBEDDERS.get(preset)
    if wanted is not None and embedder != wanted:
        raise UsageError(
            f"recall preset {preset!r} was chosen for the {wanted} embedder, not"
            f" {embedder}: embed with {wanted}, or choose a preset for any embedder"
            f" ({', '.join(sorted(set(PRESETS) - set(PRESET_EMBEDDERS)))})"
        )


def recall_settings(preset: str | RecallSettings = "neutral", **overrides: Any) -> RecallSettings:
    """A preset by name (or settings as given), with ``overrides`` (None = keep)."""
    if isinstance(preset, RecallSettings):
        base = preset
    elif isinstance(preset, str) and preset in PRESETS:
        base = PRESETS[preset]
    else:
        raise UsageError(f"unknown recall preset {preset!r}; choose {', '.join(sorted(PRESETS))}")
    changed = {key: value for key, value in overrides.items() if value is not None}
    return replace(base, **changed) if changed else base


class LongTermMemory:
    """Remember and recall in one namespace of a store.

    The module docstring says what is indexed and how recall ranks. ``preset``
    names the :class:`RecallSettings` (:data:`PRESETS`: ``"neutral"``, the
    default, ``"dialogue"`` or ``"dialogue-minilm"``) or gives them; each keyword
    after it overrides one setting (None keeps the preset's; ``mention_field=""``
    turns the mention boost off). ``settings()`` says what ran.
    """

    def __init__(
        self,
        store: Store,
        namespace: Sequence[str],
        embedder: Embedder | None = None,
        *,
        clock: Callable[[], float] | None = None,
        preset: str | RecallSettings = "neutral",
        weights: tuple[float, float] | None = None,
        context: int | None = None,
        index_metadata: Sequence[str] | None = None,
        rrf_k: int | None = None,
        successor_share: float | None = None,
        mention_field: str | None = None,
        mention_boost: float | None = None,
        stopwords: Collection[str] | None = None,
    ) -> None:
        self.preset = preset if isinstance(preset, str) else None
        chosen = recall_settings(
            preset,
            weights=weights,
            context=context,
            index_metadata=index_metadata,
            rrf_k=rrf_k,
            successor_share=successor_share,
            mention_field=mention_field,
            mention_boost=mention_boost,
            stopwords=stopwords,
        )
        if chosen.mention_field == "":
            chosen = replace(chosen, mention_field=None)
        self.recall_settings = chosen
        self.weights = chosen.weights
        self.context = chosen.context
        self.index_metadata = chosen.index_metadata
        self.rrf_k = chosen.rrf_k
        self.successor_share = chosen.successor_share
        self.mention_field = chosen.mention_field
        self.mention_boost = chosen.mention_boost
        self.stopwords = chosen.stopwords
        if not isinstance(store, Store):
            raise UsageError(
                f"LongTermMemory takes a Store, got {type(store).__name__}"
                + (" (open a URL with ctxwise.memory.open_store)" if isinstance(store, str) else "")
            )
        if embedder is not None and not isinstance(embedder, Embedder):
            raise UsageError(
                f"embedder is an Embedder (embed, dim, name) or None, got {type(embedder).__name__}"
            )
        if clock is not None and not callable(clock):
            raise UsageError(f"clock is a function returning seconds, got {type(clock).__name__}")
        self.store = store
        self.namespace: Namespace = check_namespace(namespace)
        self.embedder: Embedder = embedder if embedder is not None else HashingEmbedder()
        check_preset_embedder(preset, self.embedder.name)
        self.clock = clock

    def settings(self) -> dict[str, Any]:
        """The recall settings, as plain JSON-ready values (for reports)."""
        return {
            "preset": self.preset,
            "embedder": self.embedder.name,
            "weights": list(self.weights),
            "rrf_k": self.rrf_k,
            "context": self.context,
            "index_metadata": list(self.index_metadata),
            "successor_share": self.successor_share,
            "mention_field": self.mention_field,
            "mention_boost": self.mention_boost,
            "stopwords": len(self.stopwords),
        }

    def _created(self, created_at: float | None) -> float | None:
        if created_at is not None:
            return created_at
        return self.clock() if self.clock is not None else None

    def index_text(self, item: NewItem, before: Sequence[str]) -> str:
        """What lexical search indexes for ``item``, given the texts remembered
        before it (oldest first): its context, its text and its indexed metadata."""
        start = max(0, len(before) - self.context)
        parts = [*before[start:], item.text] if self.context else [item.text]
        for key in self.index_metadata:
            value = item.metadata.get(key)
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                parts.append(str(value))
        return " ".join(parts)

    def remember(
        self,
        text: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        id: str | None = None,
        created_at: float | None = None,
    ) -> str:
        """Store one text with its embedding; returns its id."""
        return self.remember_many([NewItem(text, dict(metadata or {}), id, None, created_at)])[0]

    def remember_many(self, items: Iterable[NewItem], *, batch_size: int = 1024) -> list[str]:
        """Store many items, embedding and writing them in batches (each batch atomic)."""
        ids: list[str] = []
        for batch in batched(items, batch_size):
            for item in batch:
                check_text(item.text)
            tail = (
                [it.text for it in self.store.recent(self.namespace, self.context)]
                if self.context
                else []
            )
            indexed = []
            for it in batch:
                indexed.append(self.index_text(it, tail))
                tail.append(it.text)
            vectors = self.embedder.embed([it.text for it in batch])
            ready = [
                NewItem(
                    it.text,
                    it.metadata,
                    it.id,
                    vectors[i],
                    self._created(it.created_at),
                    indexed[i],
                )
                for i, it in enumerate(batch)
            ]
            ids.extend(self.store.put_many(self.namespace, ready))
        return ids

    def recall(
        self,
        query: str,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        *,
        mode: RecallMode = "hybrid",
        pool: int = 50,
        recency_half_life: float | None = None,
        neighbours: int = 0,
        dedupe: bool = True,
        weights: tuple[float, float] | None = None,
    ) -> list[Recalled]:
        """The ``k`` best items for ``query`` (then their neighbours, when asked)."""
        if not isinstance(query, str) or not query.strip():
            raise UsageError("empty query: there is nothing to recall")
        check_k(k)
        check_k(pool)
        if isinstance(neighbours, bool) or not isinstance(neighbours, int) or neighbours < 0:
            raise UsageError(f"neighbours must be an integer of at least 0, got {neighbours!r}")
        if mode not in ("hybrid", "lexical", "vector"):
            raise UsageError(f"unknown recall mode {mode!r}; choose hybrid, lexical or vector")
        if recency_half_life is not None:
            if self.clock is None:
                raise UsageError("recency weighting needs a clock: LongTermMemory(..., clock=...)")
            if (
                isinstance(recency_half_life, bool)
                or not isinstance(recency_half_life, int | float)
                or not recency_half_life > 0
            ):
                raise UsageError(
                    f"recency_half_life must be positive (seconds), got {recency_half_life!r}"
                )
        w_lex, w_vec = _weights(weights) if weights is not None else self.weights
        self.store.require(self.namespace)
        depth = max(pool, k)
        lexical: list[tuple[MemoryItem, float]] = []
        vector: list[tuple[MemoryItem, float]] = []
        if mode in ("hybrid", "lexical"):
            lexical = self.store.lexical_search(
                self.namespace, lexical_query(query, self.stopwords), depth, filters
            )
        if mode in ("hybrid", "vector"):
            q = self.embedder.embed([query])[0]
            vector = self.store.vector_search(self.namespace, q, depth, filters)
        found = self._fuse(lexical, vector, w_lex, w_vec)
        successors = self._credit_successors(found, filters)
        self._boost_mentions(query, [*found.values(), *successors.values()])
        candidates = [*found.values(), *successors.values()]
        if recency_half_life is not None:
            assert self.clock is not None
            now = self.clock()
            for entry in candidates:
                created = entry.item.created_at
                if created is not None:
                    entry.score *= 0.5 ** (max(0.0, now - created) / recency_half_life)
        candidates.sort(key=lambda e: (-e.score, e.item.seq))
        out: list[Recalled] = []
        seen_texts: set[str] = set()
        for entry in candidates:
            if dedupe:
                norm = _norm(entry.item.text)
                if norm in seen_texts:
                    continue
                seen_texts.add(norm)
            out.append(
                Recalled(
                    entry.item,
                    entry.score,
                    entry.lexical_rank,
                    entry.vector_rank,
                    "successor" if entry.item.id in successors else "hit",
                    entry.mentioned,
                )
            )
            if len(out) == k:
                break
        if neighbours > 0:
            out = self._expand(out, neighbours)
        return out

    def _fuse(
        self,
        lexical: Sequence[tuple[MemoryItem, float]],
        vector: Sequence[tuple[MemoryItem, float]],
        w_lex: float,
        w_vec: float,
    ) -> dict[str, _Candidate]:
        """The two rankings fused (:func:`ctxwise.search.reciprocal_rank_fusion`),
        by item id, lexical hits first."""
        items: dict[str, MemoryItem] = {}
        for item, _ in (*lexical, *vector):
            items.setdefault(item.id, item)
        fused, (lex_rank, vec_rank) = reciprocal_rank_fusion(
            [[item.id for item, _ in lexical], [item.id for item, _ in vector]],
            [w_lex, w_vec],
            self.rrf_k,
        )
        return {
            item_id: _Candidate(items[item_id], score, lex_rank.get(item_id), vec_rank.get(item_id))
            for item_id, score in fused.items()
        }

    def _credit_successors(
        self, found: dict[str, _Candidate], filters: Mapping[str, Any] | None
    ) -> dict[str, _Candidate]:
        """Give each item ``successor_share`` of the score of the item right after
        it; returns the items that were in neither ranking (fetched by ``seq``)."""
        if not self.successor_share or not found:
            return {}
        by_seq = {entry.item.seq: entry for entry in found.values()}
        missing = sorted({seq - 1 for seq in by_seq if seq > 0 and seq - 1 not in by_seq})
        extra: dict[str, _Candidate] = {}
        for item in self.store.by_seq(self.namespace, missing) if missing else []:
            if item.id not in found and matches(item.metadata, filters):
                entry = _Candidate(item)
                extra[item.id] = entry
                by_seq[item.seq] = entry
        scores = {seq: entry.score for seq, entry in by_seq.items()}
        for seq, entry in by_seq.items():
            entry.score += self.successor_share * scores.get(seq + 1, 0.0)
        return extra

    def _boost_mentions(self, query: str, candidates: Sequence[_Candidate]) -> None:
        """Multiply by ``1 + mention_boost`` the candidates whose ``mention_field``
        value the query names, when it names exactly one such value."""
        field = self.mention_field
        if field is None or not self.mention_boost:
            return
        said = words(query)
        named: set[str] = set()
        for value in {c.item.metadata.get(field) for c in candidates}:
            if isinstance(value, str) and value.strip():
                name = words(value)
                if name and _contains(said, name):
                    named.add(value)
        if len(named) != 1:
            return
        for c in candidates:
            if c.item.metadata.get(field) in named:
                c.score *= 1.0 + self.mention_boost
                c.mentioned = True

    def _expand(self, hits: list[Recalled], n: int) -> list[Recalled]:
        have = {h.item.id for h in hits}
        latest = self.store.recent(self.namespace, 1)
        n = min(n, latest[0].seq if latest else 0)  # no item lies further than that
        wanted = sorted({h.item.seq + d for h in hits for d in range(-n, n + 1) if d})
        by_seq = {it.seq: it for it in self.store.by_seq(self.namespace, wanted)}
        out: list[Recalled] = []
        for hit in hits:
            out.append(hit)
            for d in [*range(-n, 0), *range(1, n + 1)]:
                neighbour = by_seq.get(hit.item.seq + d)
                if neighbour is not None and neighbour.id not in have:
                    have.add(neighbour.id)
                    out.append(Recalled(neighbour, hit.score, None, None, "neighbour"))
        return out


def _contains(words: Sequence[str], phrase: Sequence[str]) -> bool:
    """Whether ``phrase`` occurs in ``words`` as consecutive words."""
    n = len(phrase)
    return any(list(words[i : i + n]) == list(phrase) for i in range(len(words) - n + 1))
