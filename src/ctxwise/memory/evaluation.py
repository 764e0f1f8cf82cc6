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
preset and store.
"""

from __future__ import annotations

import inspect
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ctxwise._io import parse_json, read_text_file
from ctxwise.embeddings import Embedder, HashingEmbedder, MemoEmbedder
from ctxwise.errors import FormatError, UsageError
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
from ctxwise.memory.tiered import turn_items as tiered_turn_items
from ctxwise.messages import Message, TextBlock

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

_EVIDENCE = re.compile(r"D(\d+):(\d+)")
"""A LoCoMo evidence id, anywhere in an evidence string (upstream writes a few as
``"D8:6; D9:17"`` or ``"D30:05"``); read as ``D<session>:<turn>`` with the leading
zeros dropped, as the turns' own ``dia_id`` has them."""
_OPTIONS = frozenset(inspect.signature(LongTermMemory).parameters) - {
    "store",
    "namespace",
    "embedder",
}


def locomo_to_generic(
    data: Any, categories: Sequence[int] = (1, 2, 3, 4), *, captions: bool = True
) -> dict[str, Any]:
    """LoCoMo samples → the generic format.

    With ``captions`` (the default), a turn that shares an image carries the
    image's caption as LoCoMo gives it (``blip_caption``), as ``"text [shares
    <caption>]"``: the caption is part of what the turn said (LoCoMo's own
    baselines read it too). Its ``query`` field (the search that fetched the
    image when the data was made) is never used.

    Evidence ids are read as the data's README says: every ``D<s>:<t>`` in an
    evidence string, leading zeros dropped, ids that name no turn left out. A
    question none of whose ids names a turn is kept with no evidence (the
    evaluations skip it, count it and list it with its ``unresolved_evidence``);
    a question outside ``categories`` is left out and counted in ``excluded``
    (``{"category 5": n}``).
    """
    if not isinstance(data, list) or not all(isinstance(s, Mapping) for s in data):
        raise FormatError("locomo", "LoCoMo data is a list of samples")
    conversations = []
    excluded: dict[str, int] = {}
    for sample in data:
        conv = sample.get("conversation")
        if not isinstance(conv, Mapping):
            raise FormatError("locomo", "a sample has no 'conversation'")
        turns = []
        sessions = sorted(
            (int(m.group(1)), key)
            for key in conv
            if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(conv[key], list)
        )
        for number, key in sessions:
            date = conv.get(f"session_{number}_date_time")
            for turn in conv[key]:
                text = turn.get("text", "")
                caption = turn.get("blip_caption")
                shares = captions and isinstance(caption, str) and caption.strip()
                if shares and (text is None or isinstance(text, str)):  # others are refused
                    text = f"{text or ''} [shares {caption.strip()}]".lstrip()
                turns.append(
                    {
                        "id": turn["dia_id"],
                        "speaker": turn.get("speaker", ""),
                        "text": text,
                        "date": date,
                        "session": number,
                    }
                )
        ids = {t["id"] for t in turns}
        questions = []
        for qa in sample.get("qa", []):
            category = qa.get("category")
            if isinstance(category, str) and category.strip().isdigit():
                category = int(category)  # "1", as a file converted through strings has it
            if isinstance(category, bool) or category not in categories:
                key = f"category {category}"
                excluded[key] = excluded.get(key, 0) + 1
                continue
            raw = [str(r) for r in qa.get("evidence", [])]
            named = [f"D{int(s)}:{int(t)}" for r in raw for s, t in _EVIDENCE.findall(r)]
            evidence = sorted({e for e in named if e in ids})
            question: dict[str, Any] = {
                "question": qa["question"],
                "evidence": evidence,
                "category": str(category),
            }
            if not evidence:  # kept, so the evaluations count it and say why
                question["unresolved_evidence"] = raw
            questions.append(question)
        conversations.append(
            {"id": str(sample.get("sample_id")), "turns": turns, "questions": questions}
        )
    return {"conversations": conversations, "excluded": dict(sorted(excluded.items()))}


def load_conversations(path: str | Path, format: str = "auto") -> dict[str, Any]:
    """Read a generic or LoCoMo file (``format``: auto, generic, locomo), checked by
    :func:`check_conversations`.

    Raises:
        FormatError: the file is not JSON, or not conversations of that format (the
            message names the first conversation, turn or question that is wrong).
        UsageError: an unknown ``format``.
    """
    text = read_text_file(path, "a JSON file", FormatError)
    try:
        data = parse_json(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise FormatError(str(path), f"invalid JSON: {exc}") from None
    if format == "auto":
        format = "generic" if isinstance(data, Mapping) and "conversations" in data else "locomo"
    if format == "locomo":
        try:
            out = locomo_to_generic(data)
        except FormatError as exc:  # said of LoCoMo data: say it of the file
            raise FormatError(
                str(path), f"not LoCoMo or generic conversations: {exc.detail}"
            ) from None
        except (KeyError, TypeError, AttributeError) as exc:  # a malformed sample
            raise FormatError(
                str(path), f"not LoCoMo or generic conversations ({type(exc).__name__}: {exc})"
            ) from None
    elif format != "generic":
        raise UsageError(f"unknown format {format!r}; choose auto, generic or locomo")
    else:
        if not isinstance(data, Mapping) or not isinstance(data.get("conversations"), list):
            raise FormatError(str(path), "the generic format is {'conversations': [...]}")
        out = dict(data)
    check_conversations(out, str(path))
    return out


def check_conversations(data: Mapping[str, Any], source: str) -> None:
    """Raise :class:`FormatError` unless ``data`` is the generic format: a non-empty
    list of conversations, each with its own ``id``, ``turns`` and ``questions``.

    - A turn is an object with an ``id`` (a non-empty string or an integer, no two
      alike in a conversation) and a string or null as ``text``; at least one turn
      of a conversation has text to remember.
    - A question is an object with a ``question`` (not blank) and a list of turn ids as
      ``evidence``, each naming a turn of the conversation (turn ids and evidence
      ids compare as strings). A question without evidence is valid: the
      evaluations skip it and count it as ``skipped``.
    """
    convs = data.get("conversations")
    if not isinstance(convs, list) or not convs:
        raise FormatError(source, "holds no conversations")
    seen: set[str] = set()
    for n, conv in enumerate(convs, 1):
        if not isinstance(conv, Mapping):
            raise FormatError(source, f"conversation {n} is not an object")
        turns, questions = conv.get("turns"), conv.get("questions", [])
        if not isinstance(turns, list) or not all(
            isinstance(t, Mapping) and isinstance(t.get("id"), str | int) for t in turns
        ):
            raise FormatError(source, f"conversation {n}: 'turns' is a list of {{'id', 'text'}}")
        if not isinstance(questions, list) or not all(
            isinstance(q, Mapping)
            and isinstance(q.get("question"), str)
            and isinstance(q.get("evidence", []), list)
            and all(isinstance(e, str | int) for e in q.get("evidence", []))
            for q in questions
        ):
            raise FormatError(
                source,
                f"conversation {n}: 'questions' is a list of "
                "{'question': text, 'evidence': [turn ids]}",
            )
        name = conversation_name(conv, n)
        if name in seen:
            raise FormatError(source, f"two conversations have the id {name!r}")

        seen.add(name)
        ids: set[str] = set()
        for t in turns:
            tid = str(t["id"])
            if isinstance(t["id"], bool) or not tid.strip():
                raise FormatError(
                    source,
                    f"conversation {name!r}: a turn's id is a non-empty string or an"
                    f" integer, got {t['id']!r}",
                )
            text = t.get("text")
            if text is not None and not isinstance(text, str):
                raise FormatError(
                    source,
                    f"conversation {name!r}: turn {tid!r} has a {type(text).__name__} as"
                    " its text, not a string",
                )
            if tid in ids:
                raise FormatError(
                    source,
                    f"conversation {name!r}: two turns have the id {tid!r} (the second"
                    " would replace the first, and evidence could not tell them apart)",
                )
            ids.add(tid)
        if not turn_items(conv):
            raise FormatError(source, f"conversation {name!r} has no turns to remember")
        for qn, q in enumerate(questions, 1):
            if not q["question"].strip():
                raise FormatError(
                    source, f"conversation {name!r}: question {qn} has no text to recall with"
                )
            for e in q.get("evidence", []):
                if str(e) not in ids:
                    raise FormatError(
                        source,
                        f"conversation {name!r}: question {qn}'s evidence names"
                        f" unknown turn {str(e)!r}",
                    )


def conversation_name(conversation: Mapping[str, Any], position: int) -> str:
    """A conversation's name: its ``id`` as a string, or ``conversation-<position>``
    (1-based) without one; the evaluation remembers it in ``eval/<name>``."""
    return str(conversation.get("id", f"conversation-{position}"))


def _evidence_ids(question: Mapping[str, Any]) -> set[str]:
    """A question's evidence turn ids, as strings (turn ids compare as strings)."""
    return {str(e) for e in question.get("evidence", [])}


def skipped_question(conversation: str, number: int, question: Mapping[str, Any]) -> dict[str, Any]:
    """What an evaluation reports of a question it left out for want of evidence:
    its ``conversation``, its 1-based ``question`` number there, its ``text`` (at
    most 200 characters) and the ``reason``."""
    unresolved = question.get("unresolved_evidence")
    if unresolved:
        reason = "its evidence names no turn of the conversation: " + ", ".join(
            repr(str(e))[:40] for e in unresolved[:5]
        )
    else:
        reason = "it has no evidence"
    text = str(question.get("question", ""))
    return {
        "conversation": conversation,
        "question": number,
        "text": text if len(text) <= 200 else text[:199] + "…",
        "reason": reason,
    }


def turn_messages(conversation: Mapping[str, Any]) -> list[Message]:
    """A generic-format conversation as messages: each turn a user message with
    the turn's id, its date as the timestamp and its speaker as ``extra["name"]``
    (a turn whose text is missing or null has none)."""
    out = []
    for t in conversation["turns"]:
        speaker = t.get("speaker")
        date = t.get("date")
        out.append(
            Message(
                "user",
                (TextBlock(t.get("text") or ""),),
                plain=True,
                id=str(t["id"]),
                timestamp=str(date) if date is not None else None,
                extra={"name": speaker} if isinstance(speaker, str) and speaker else {},
            )
        )
    return out


def turn_items(conversation: Mapping[str, Any]) -> list[NewItem]:
    """What the evaluation remembers of a generic-format conversation: what
    :class:`~ctxwise.memory.TieredMemory` remembers of the same turns
    (:func:`~ctxwise.memory.tiered.turn_items` of :func:`turn_messages`): one item
    per non-empty turn, text ``"speaker: text"``, id = the turn id."""
    return tiered_turn_items(turn_messages(conversation))


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
                evidence = _evidence_ids(q)
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
                        evidence = _evidence_ids(q)
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
