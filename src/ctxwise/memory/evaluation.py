"""Recall evaluation on conversations with evidence-labelled questions.

Generic format (JSON)::

    {"conversations": [
        {"id": "conv-1",
         "turns": [{"id": "D1:1", "speaker": "Ann", "text": "...", "date": "8 May 2023"}, ...],
         "questions": [{"question": "...", "evidence": ["D1:1"], "category": "1"}, ...]}
    ]}

Every turn is remembered as :class:`~ctxwise.memory.TieredMemory` remembers a
turn (:func:`turn_items`: text ``"speaker: text"``; role, speaker, position and
the date as time in the metadata; id = the turn id), in the conversation's own
namespace, with the recall settings of a preset (``options={"preset": ...}``); every
question is a recall query; recall@k is the fraction of a question's evidence
turns in the top k ("any": at least one, "all": every one), per category and
overall, for hybrid recall and, in the same run, for lexical-only and vector-only
(with the hybrid's settings).

Settings chosen on the data they are scored on give a figure no other data will:
:func:`held_out_recall` chooses a setting from a grid on all conversations but
one and scores it on the one left out, each in turn (:func:`score_settings`,
:class:`SettingScores`), and fits the lexical-only and vector-only baselines the
same way, on the grid cut to the settings they read (:data:`MODE_SETTINGS`).

:func:`locomo_to_generic` converts LoCoMo (categories 1–4; evidence strings are
parsed for every ``D<s>:<t>`` and ids that name no turn are dropped; a shared
image's caption is kept in its turn's text, as ``[shares <caption>]``).

The guide's Memory section (docs/guide.md) gives the figures on LoCoMo dev, per
preset and store. Reading and converting the conversations lives in
``ctxwise.memory._conversations``; every name is importable from here.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ctxwise.embeddings import Embedder, HashingEmbedder, MemoEmbedder
from ctxwise.errors import UsageError
from ctxwise.memory._conversations import (
    check_conversations,
    conversation_name,
    evidence_ids,
    load_conversations,
    locomo_to_generic,
    skipped_question,
    turn_items,
    turn_messages,
)
from ctxwise.memory.longterm import LongTermMemory, RecallMode
from ctxwise.memory.sqlite import SQLiteStore
from ctxwise.memory.store import (
    InMemoryStore,
    MemoryItem,
    Namespace,
    NewItem,
    Store,
    check_k,
    check_namespace,
)

__all__ = [
    "MODE_SETTINGS",
    "Fold",
    "HeldOut",
    "SettingScores",
    "check_conversations",
    "conversation_name",
    "evaluate_recall",
    "grid_for_mode",
    "held_out_recall",
    "load_conversations",
    "locomo_to_generic",
    "score_settings",
    "skipped_question",
    "turn_items",
    "turn_messages",
]

_OPTIONS = frozenset(inspect.signature(LongTermMemory).parameters) - {
    "store",
    "namespace",
    "embedder",
}


def _store_name(store: Store) -> str:
    path = getattr(store, "path", None)
    return str(path) if isinstance(path, str) and path else repr(store)


def _check_fresh(store: Store, namespace: Sequence[str], items: Sequence[NewItem]) -> None:
    """Refuse a namespace that holds items other than ``items`` (a rerun of the
    same data is allowed): they would be recalled with the conversation's own."""
    held = store.count(namespace)
    if not held:
        return
    mine = store.get_many(namespace, [it.id for it in items if it.id is not None])
    texts = {it.id: it.text for it in items}
    if held == len(items) == len(mine) and all(texts.get(m.id) == m.text for m in mine):
        return
    raise UsageError(
        f"store {_store_name(store)} already holds {held} item(s) in namespace"
        f" {'/'.join(namespace)!r} that are not this data's turns (they would be recalled"
        " with them); evaluate in an empty store or namespace — nothing was written"
    )


def _percent(values: list[float]) -> float:
    return round(float(np.mean(values)), 4) if values else 0.0


def evaluate_recall(
    data: Mapping[str, Any],
    ks: Sequence[int] = (1, 5, 10),
    *,
    embedder: Embedder | None = None,
    store_factory: Callable[[], Store] = lambda: SQLiteStore(":memory:"),
    clock: Callable[[], int] = time.perf_counter_ns,
    options: Mapping[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Recall@k for hybrid recall, with lexical-only and vector-only baselines.

    ``options`` are keyword arguments for :class:`LongTermMemory` (e.g.
    ``{"weights": (1.0, 0.3)}``), to evaluate a configuration other than the
    defaults. Each query returns exactly ``max(ks)`` items (fewer only when the
    conversation has fewer candidates); recall@k reads the first ``k`` of them.
    A question without evidence is left out of every figure, counted as
    ``skipped`` and listed in ``skipped_questions`` with the reason
    (:func:`skipped_question`); ``excluded`` is what the loader left out (LoCoMo:
    ``{"category 5": n}``).

    Conversation ``id`` is remembered in the namespace ``eval/<id>`` of the store
    ``store_factory`` opens. A rerun of the same data rewrites its own items; a
    namespace holding anything else is refused before anything is written (its
    items would be recalled too).

    ``progress(done, total)`` is called as the questions are done (``total``:
    every question, those without evidence too); nothing is printed.

    Raises:
        FormatError: ``data`` is not the generic format (:func:`check_conversations`).
        UsageError: bad ``ks`` or ``options``, a conversation id that cannot name a
            namespace (one with ``/``, say), or a namespace that holds other items.
    """
    if isinstance(ks, str | bytes) or not all(
        isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in ks
    ):
        raise UsageError(f"k values must be positive integers, got {ks!r}")
    ks = sorted(set(ks))
    if not ks:
        raise UsageError("k values must be positive integers, got none")
    options = dict(options or {})
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise UsageError(
            f"unknown memory option(s) {', '.join(unknown)};"
            f" choose from {', '.join(sorted(_OPTIONS))}"
        )
    check_conversations(data, "evaluation data")
    for n, conv in enumerate(data["conversations"], 1):
        name = conversation_name(conv, n)
        try:
            check_namespace(("eval", name))
        except UsageError as exc:
            raise UsageError(
                f"conversation {n}'s id {name!r} cannot name its namespace eval/<id>: {exc}"
            ) from None
    store = store_factory()
    settings: dict[str, Any] = {}
    modes: tuple[RecallMode, ...] = ("hybrid", "lexical", "vector")
    results: dict[str, list[tuple[str, dict[int, tuple[float, bool, bool]]]]] = {
        m: [] for m in modes
    }
    latencies: list[float] = []
    skipped: list[dict[str, Any]] = []
    asked = 0
    work = sum(len(conv.get("questions", [])) for conv in data["conversations"])
    if progress is not None:
        progress(0, work)
    try:
        # every namespace is checked before anything is written
        plan = []
        for n, conv in enumerate(data["conversations"], 1):
            memory = LongTermMemory(
                store, ("eval", conversation_name(conv, n)), embedder, **options
            )
            items = turn_items(conv)
            _check_fresh(store, memory.namespace, items)
            plan.append((conv, memory, items))
        for conv, memory, items in plan:
            settings = memory.settings()
            # a rerun of the same data: its own items are written afresh
            store.delete(memory.namespace, [it.id for it in items if it.id is not None])
            memory.remember_many(items)
            for qn, q in enumerate(conv.get("questions", []), 1):
                if progress is not None:  # the questions done before this one
                    progress(asked, work)
                asked += 1
                evidence = evidence_ids(q)
                if not evidence:
                    skipped.append(skipped_question(memory.namespace[-1], qn, q))
                    continue
                for mode in modes:
                    t0 = clock()
                    hits = memory.recall(q["question"], k=ks[-1], mode=mode)
                    if mode == "hybrid":
                        latencies.append((clock() - t0) / 1e6)
                    ids = [h.item.id for h in hits]
                    per_k = {}
                    for k in ks:
                        found = evidence & set(ids[:k])
                        per_k[k] = (len(found) / len(evidence), bool(found), found == evidence)
                    results[mode].append((str(q.get("category", "")), per_k))
    finally:
        store.close()
    if progress is not None:
        progress(work, work)

    def summary(rows: list[tuple[str, dict[int, tuple[float, bool, bool]]]]) -> dict[str, Any]:
        return {
            "n": len(rows),
            "recall_at": {str(k): _percent([r[1][k][0] for r in rows]) for k in ks},
            "any_at": {str(k): _percent([float(r[1][k][1]) for r in rows]) for k in ks},
            "all_at": {str(k): _percent([float(r[1][k][2]) for r in rows]) for k in ks},
        }

    hybrid = results["hybrid"]
    categories = sorted({c for c, _ in hybrid})
    return {
        **summary(hybrid),
        "by_category": {c: summary([r for r in hybrid if r[0] == c]) for c in categories},
        "baselines": {m: summary(results[m]) for m in ("lexical", "vector")},
        "p50_ms": round(float(np.percentile(latencies, 50)), 4) if latencies else 0.0,
        "p99_ms": round(float(np.percentile(latencies, 99)), 4) if latencies else 0.0,
        "skipped": len(skipped),
        "skipped_questions": skipped,
        "excluded": dict(data.get("excluded", {})),
        "conversations": len(data["conversations"]),
        "embedder": settings.get("embedder", embedder.name if embedder is not None else "hashing"),
        "settings": settings,
    }


# held-out recall: settings chosen on some conversations, scored on the one left out

MODE_SETTINGS: Mapping[RecallMode, frozenset[str]] = {
    "hybrid": frozenset(_OPTIONS - {"clock"}),
    "lexical": frozenset(
        {
            "preset",
            "context",
            "index_metadata",
            "rrf_k",
            "successor_share",
            "mention_field",
            "mention_boost",
            "stopwords",
        }
    ),
    "vector": frozenset({"preset", "rrf_k", "successor_share", "mention_field", "mention_boost"}),
}
"""The :class:`LongTermMemory` options each recall mode reads. One ranking alone
does not read ``weights`` (a weight scales every score alike); the vector ranking
does not read what shapes the lexical index or query (``context``,
``index_metadata``, ``stopwords``). A baseline's grid is the grid without what
it does not read (:func:`grid_for_mode`), so it is fit on what it can change."""


def _plain(value: Any) -> Any:
    """A setting's value that JSON has no type for: a set as a sorted list."""
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise TypeError(f"a setting's value is JSON, a tuple or a set, not {type(value).__name__}")


def _setting_key(setting: Mapping[str, Any]) -> str:
    """A setting as canonical JSON (tuples as lists): equal settings, equal keys."""
    return json.dumps(setting, sort_keys=True, default=_plain)


def grid_for_mode(grid: Sequence[Mapping[str, Any]], mode: RecallMode) -> list[dict[str, Any]]:
    """``grid`` with only the options ``mode`` reads (:data:`MODE_SETTINGS`), each
    distinct setting once, in the order it first appears."""
    if mode not in MODE_SETTINGS:
        raise UsageError(f"unknown recall mode {mode!r}; choose hybrid, lexical or vector")
    out: dict[str, dict[str, Any]] = {}
    for setting in grid:
        kept = {key: value for key, value in setting.items() if key in MODE_SETTINGS[mode]}
        out.setdefault(_setting_key(kept), kept)
    return list(out.values())


@dataclass(frozen=True, slots=True)
class Fold:
    """One conversation held out: the setting chosen on the others and its recall@k
    on this one (the mean over its ``n`` questions)."""

    held_out: str
    chosen: Mapping[str, Any]
    recall: float
    n: int


@dataclass(frozen=True, slots=True)
class HeldOut:
    """Recall@k of settings chosen on all conversations but one and scored on that
    one, each conversation in turn (leave one conversation out).

    ``recall`` is pooled over every held-out question (each question counts once,
    scored by the setting chosen without its conversation). ``best_on_all`` and
    ``recall_best_on_all`` are the in-sample figures: the best setting on every
    conversation, scored on the same conversations.
    """

    mode: RecallMode
    k: int
    settings: int
    recall: float
    n: int
    folds: tuple[Fold, ...]
    best_on_all: Mapping[str, Any]
    recall_best_on_all: float

    def report(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "mode": self.mode,
            "k": self.k,
            "settings": self.settings,
            "held_out_recall": round(self.recall, 4),
            "n": self.n,
            "folds": [
                {
                    "held_out": f.held_out,
                    "chosen": json.loads(_setting_key(f.chosen)),
                    "recall": round(f.recall, 4),
                    "n": f.n,
                }
                for f in self.folds
            ],
            "in_sample": {
                "best_on_all": json.loads(_setting_key(self.best_on_all)),
                "recall": round(self.recall_best_on_all, 4),
            },
        }


@dataclass(frozen=True, slots=True)
class SettingScores:
    """Recall@k of every question under every setting of a grid, for one mode:
    ``recall[s][c][q]`` is question ``q`` of conversation ``c`` under setting ``s``
    (questions without evidence left out)."""

    mode: RecallMode
    k: int
    conversations: tuple[str, ...]
    settings: tuple[Mapping[str, Any], ...]
    recall: tuple[tuple[tuple[float, ...], ...], ...]

    def mean(self, setting: int, conversations: Sequence[int]) -> float:
        """Setting ``setting``'s recall@k pooled over the questions of ``conversations``
        (0.0 when they hold none)."""
        values = [x for c in conversations for x in self.recall[setting][c]]
        return sum(values) / len(values) if values else 0.0

    def _among(self, among: Sequence[Mapping[str, Any]] | None) -> list[int]:
        if among is None:
            return list(range(len(self.settings)))
        wanted = {_setting_key(s) for s in among}
        found = [i for i, s in enumerate(self.settings) if _setting_key(s) in wanted]
        if len(found) != len(wanted):
            raise UsageError("among names settings that were not scored")
        return found

    def choose(
        self, conversations: Sequence[int], among: Sequence[Mapping[str, Any]] | None = None
    ) -> int:
        """The index of the best setting (of ``among``, default all) on
        ``conversations``; a tie goes to the setting listed first."""
        candidates = self._among(among)
        if not candidates:
            raise UsageError("there is no setting to choose from")
        best = candidates[0]
        best_recall = self.mean(best, conversations)
        for i in candidates[1:]:
            value = self.mean(i, conversations)
            if value > best_recall:
                best, best_recall = i, value
        return best

    def held_out(self, among: Sequence[Mapping[str, Any]] | None = None) -> HeldOut:
        """Leave each conversation out in turn: choose on the others (:meth:`choose`),
        score on it; see :class:`HeldOut`."""
        everyone = range(len(self.conversations))
        if len(self.conversations) < 2:
            raise UsageError("holding a conversation out needs at least two conversations")
        folds = []
        pooled: list[float] = []
        for h in everyone:
            chosen = self.choose([c for c in everyone if c != h], among)
            pooled.extend(self.recall[chosen][h])
            folds.append(
                Fold(
                    self.conversations[h],
                    self.settings[chosen],
                    self.mean(chosen, [h]),
                    len(self.recall[chosen][h]),
                )
            )
        best = self.choose(list(everyone), among)
        return HeldOut(
            self.mode,
            self.k,
            len(self._among(among)),
            sum(pooled) / len(pooled) if pooled else 0.0,
            len(pooled),
            tuple(folds),
            self.settings[best],
            self.mean(best, list(everyone)),
        )


class _Reads(Store):
    """``inner`` with its reads remembered until the next write: every setting of
    a grid asks the same searches of the same items, and only the fusion differs."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.analyzer = inner.analyzer
        self._memo: dict[tuple[Any, ...], Any] = {}

    def _read(self, key: tuple[Any, ...], read: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = read()
        return self._memo[key]

    def put_many(self, namespace: Sequence[str], items: Sequence[NewItem]) -> list[str]:
        self._memo.clear()
        return self.inner.put_many(namespace, items)

    def get_many(self, namespace: Sequence[str], ids: Sequence[str]) -> list[MemoryItem]:
        return self.inner.get_many(namespace, ids)

    def delete(self, namespace: Sequence[str], ids: Sequence[str]) -> int:
        self._memo.clear()
        return self.inner.delete(namespace, ids)

    def lexical_search(
        self, namespace: Sequence[str], query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[tuple[MemoryItem, float]]:
        if filters is not None:
            return self.inner.lexical_search(namespace, query, k, filters)
        key = ("lexical", tuple(namespace), query, k)
        found = self._read(key, lambda: self.inner.lexical_search(namespace, query, k))
        return list(found)

    def vector_search(
        self,
        namespace: Sequence[str],
        vector: Any,
        k: int,
        filters: Mapping[str, Any] | None = None,
    ) -> list[tuple[MemoryItem, float]]:
        if filters is not None:
            return self.inner.vector_search(namespace, vector, k, filters)
        key = ("vector", tuple(namespace), np.asarray(vector, dtype=np.float64).tobytes(), k)
        found = self._read(key, lambda: self.inner.vector_search(namespace, vector, k))
        return list(found)

    def by_seq(self, namespace: Sequence[str], seqs: Sequence[int]) -> list[MemoryItem]:
        key = ("seq", tuple(namespace), tuple(seqs))
        return list(self._read(key, lambda: self.inner.by_seq(namespace, seqs)))

    def recent(self, namespace: Sequence[str], n: int) -> list[MemoryItem]:
        key = ("recent", tuple(namespace), n)
        return list(self._read(key, lambda: self.inner.recent(namespace, n)))

    def namespaces(self) -> list[Namespace]:
        return self.inner.namespaces()

    def count(self, namespace: Sequence[str]) -> int:
        return int(self._read(("count", tuple(namespace)), lambda: self.inner.count(namespace)))

    def close(self) -> None:
        self.inner.close()


def score_settings(
    data: Mapping[str, Any],
    grid: Sequence[Mapping[str, Any]],
    *,
    mode: RecallMode = "hybrid",
    k: int = 10,
    embedder: Embedder | None = None,
    options: Mapping[str, Any] | None = None,
    store_factory: Callable[[], Store] = lambda: SQLiteStore(":memory:"),
    progress: Callable[[int, int], None] | None = None,
) -> SettingScores:
    """Recall@k of every question of ``data`` under every setting of ``grid``, in
    ``mode``: what :meth:`SettingScores.held_out` chooses from.

    A setting is keyword arguments for :class:`LongTermMemory` over ``options``
    (e.g. ``options={"preset": "dialogue"}``, a setting ``{"context": 2,
    "weights": (1.0, 0.1)}``). The grid is first cut to the options ``mode``
    reads (:func:`grid_for_mode`), so a baseline is fit on its own settings.
    Conversations are remembered as :func:`evaluate_recall` remembers them, once
    per distinct index (``context``, ``index_metadata``), each index in a store
    ``store_factory`` opens and closes. Recall@k of a question is the share of
    its evidence turns among the first ``k`` items recalled; questions without
    evidence are left out. ``progress(done, total)`` is called as settings are
    scored; nothing is printed.

    Raises:
        FormatError: ``data`` is not the generic format (:func:`check_conversations`).
        UsageError: an empty grid, an option :class:`LongTermMemory` does not take
            or a bad value, a bad ``k`` or ``mode``, a conversation id that cannot
            name a namespace, or a store namespace holding other items.
    """
    check_k(k)
    base = dict(options or {})
    for setting in [base, *grid]:
        unknown = sorted(set(setting) - _OPTIONS)
        if unknown:
            raise UsageError(
                f"unknown memory option(s) {', '.join(unknown)};"
                f" choose from {', '.join(sorted(_OPTIONS))}"
            )
    settings = grid_for_mode(grid, mode)
    if not settings:
        raise UsageError("the grid holds no settings")
    check_conversations(data, "evaluation data")
    convs = data["conversations"]
    names = [conversation_name(conv, n) for n, conv in enumerate(convs, 1)]
    for n, name in enumerate(names, 1):
        try:
            check_namespace(("eval", name))
        except UsageError as exc:
            raise UsageError(
                f"conversation {n}'s id {name!r} cannot name its namespace eval/<id>: {exc}"
            ) from None
    memo = MemoEmbedder(embedder if embedder is not None else HashingEmbedder())
    scratch = InMemoryStore()  # only to read each setting's resolved values
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, setting in enumerate(settings):
        resolved = LongTermMemory(scratch, ("grid",), memo, **{**base, **setting})
        groups.setdefault((resolved.context, resolved.index_metadata), []).append(i)
    scratch.close()
    table: list[list[tuple[float, ...]]] = [[] for _ in settings]
    done = 0
    if progress is not None:
        progress(0, len(settings))
    for members in groups.values():
        store = _Reads(store_factory())
        try:
            index = {**base, **settings[members[0]]}
            plan = []
            for name, conv in zip(names, convs, strict=True):  # checked before any write
                memory = LongTermMemory(store, ("eval", name), memo, **index)
                items = turn_items(conv)
                _check_fresh(store, memory.namespace, items)
                plan.append((memory, items))
            for memory, items in plan:
                store.delete(memory.namespace, [it.id for it in items if it.id is not None])
                memory.remember_many(items)
            for i in members:
                for name, conv in zip(names, convs, strict=True):
                    memory = LongTermMemory(store, ("eval", name), memo, **{**base, **settings[i]})
                    row = []
                    for q in conv.get("questions", []):
                        evidence = evidence_ids(q)
                        if evidence:
                            hits = memory.recall(q["question"], k=k, mode=mode)
                            found = evidence & {h.item.id for h in hits[:k]}
                            row.append(len(found) / len(evidence))
                    table[i].append(tuple(row))
                done += 1
                if progress is not None:
                    progress(done, len(settings))
        finally:
            store.close()
    return SettingScores(
        mode, k, tuple(names), tuple(settings), tuple(tuple(rows) for rows in table)
    )


def held_out_recall(
    data: Mapping[str, Any],
    grid: Sequence[Mapping[str, Any]],
    *,
    mode: RecallMode = "hybrid",
    k: int = 10,
    embedder: Embedder | None = None,
    options: Mapping[str, Any] | None = None,
    store_factory: Callable[[], Store] = lambda: SQLiteStore(":memory:"),
    progress: Callable[[int, int], None] | None = None,
) -> HeldOut:
    """Recall@k of the setting chosen from ``grid`` on all conversations but one,
    scored on that one, each in turn (:func:`score_settings`, then
    :meth:`SettingScores.held_out`). For a baseline, pass the same grid with its
    ``mode``: it is cut to what the mode reads and fit the same way."""
    return score_settings(
        data,
        grid,
        mode=mode,
        k=k,
        embedder=embedder,
        options=options,
        store_factory=store_factory,
        progress=progress,
    ).held_out()
