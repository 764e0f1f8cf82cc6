"""Scorers for handoffs: would a subagent given this task need this chunk?

- :class:`HybridScorer` (the default; offline): the long-term memory's hybrid
  recall, BM25 plus hashing vectors, over the chunks, with camelCase names split
  into their words on both sides (:func:`code_words`);
- :class:`BM25Scorer`: plain BM25 over the chunks (the same analyzer, no vectors,
  no fusion): the baseline the evaluation packs exactly as the default scorer's
  chunks are packed, so only the scorer differs;
- :class:`LLMScorer`: a model's probability of answering "yes" to that question
  for each chunk (:class:`~ctxwise.providers.scoring.YesNoModel`, e.g.
  :class:`~ctxwise.providers.scoring.OpenAIYesNo`). One call per chunk costs, so
  only the ``shortlist`` best chunks by a first scorer (hybrid by default) are
  asked; the rest keep 0.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol, runtime_checkable

from ctxwise.embeddings import Embedder, HashingEmbedder
from ctxwise.errors import UsageError
from ctxwise.handoff.chunks import Chunk
from ctxwise.memory.longterm import LongTermMemory
from ctxwise.memory.store import InMemoryStore, NewItem
from ctxwise.providers.scoring import YesNoModel
from ctxwise.search import BM25Index
from ctxwise.text import DEFAULT_ANALYZER, identifier_parts

__all__ = [
    "DEFAULT_SHORTLIST",
    "RELEVANCE_PROMPT",
    "BM25Scorer",
    "ChunkScorer",
    "HybridScorer",
    "LLMScorer",
    "code_words",
]

code_words = identifier_parts
"""``text`` with each camelCase or PascalCase word followed by its parts
(:func:`ctxwise.text.identifier_parts`), so a task naming a module finds the chunks
naming its file."""


def _indexable(text: str) -> str:
    """``text`` with lone surrogates (a truncated emoji in a tool's output) as U+FFFD,
    which the store refuses; the chunk itself is handed over as it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


_CODE_ANALYZER = replace(DEFAULT_ANALYZER, identifiers=True)

DEFAULT_SHORTLIST = 40
"""Chunks an :class:`LLMScorer` asks its model about."""

RELEVANCE_PROMPT = (
    "You decide what context a subagent needs. It will get a task and nothing else "
    "of the conversation except the excerpts you approve. Answer with one word, yes "
    "or no: would a subagent doing this task need this excerpt?"
)
"""The system prompt of :class:`LLMScorer`."""


@runtime_checkable
class ChunkScorer(Protocol):
    """Scores how much a subagent given ``task`` would need each chunk (higher: more;
    0: not at all), one score per chunk, in the chunks' order."""

    @property
    def name(self) -> str: ...

    def score(self, task: str, chunks: Sequence[Chunk]) -> list[float]: ...


class HybridScorer:
    """The long-term memory's hybrid recall (:class:`~ctxwise.memory.LongTermMemory`,
    ``preset``: ``"neutral"``) over the chunks, in a throwaway in-memory store: a
    chunk's score is its fused recall score, 0 when recall does not find it (and
    every score is 0 when no word of the task is in any chunk)."""

    def __init__(self, embedder: Embedder | None = None, *, preset: str = "neutral") -> None:
        self.embedder = embedder if embedder is not None else HashingEmbedder()
        self.preset = preset
        self._last: tuple[str, LongTermMemory] | None = None

    @property
    def name(self) -> str:
        return f"hybrid:{self.embedder.name}:{self.preset}"

    def _memory(self, chunks: Sequence[Chunk]) -> LongTermMemory:
        """The chunks remembered; the last transcript's index is kept, so scoring
        many tasks against one transcript indexes it once."""
        digest = hashlib.sha256()
        for c in chunks:
            digest.update(f"{c.id}\x00{c.text}\x01".encode("utf-8", "surrogatepass"))
        key = digest.hexdigest()
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        memory = LongTermMemory(InMemoryStore(), ("handoff",), self.embedder, preset=self.preset)
        memory.remember_many(
            NewItem(text, {"position": c.position}, id=c.id, index_text=code_words(text))
            for c in chunks
            for text in (_indexable(c.text),)
        )
        self._last = (key, memory)
        return memory

    def score(self, task: str, chunks: Sequence[Chunk]) -> list[float]:
        if not chunks:
            return []
        memory = self._memory(chunks)
        hits = memory.recall(code_words(_indexable(task)), k=len(chunks), pool=len(chunks))
        if not any(h.lexical_rank is not None for h in hits):
            # no word of the task is in the transcript: hashing vectors hold nothing more
            return [0.0] * len(chunks)
        found = {h.item.id: h.score for h in hits}
        return [max(0.0, float(found.get(c.id, 0.0))) for c in chunks]


class BM25Scorer:
    """Plain BM25 (:class:`~ctxwise.search.BM25Index`, the stores' formula) over each
    chunk's text, by the default analyzer with its ``identifiers`` option: camelCase
    split on both sides as :class:`HybridScorer` splits it (:func:`code_words`); a
    chunk no word of the task is in scores 0.

    ``context``: the chunks before each one whose text is indexed with it (0: the
    chunk alone; the default scorer's lexical index holds two, the ``neutral``
    preset's context). ``headers``: index each chunk's header line too (its id,
    kind, position and time, as the handoff shows it).
    """

    def __init__(self, *, context: int = 0, headers: bool = False) -> None:
        if isinstance(context, bool) or not isinstance(context, int) or context < 0:
            raise UsageError(f"context must be 0 or more chunks, got {context!r}")
        self.context = context
        self.headers = bool(headers)
        self._last: tuple[str, BM25Index] | None = None

    @property
    def name(self) -> str:
        return f"bm25:context={self.context}" + (":headers" if self.headers else "")

    def text(self, chunks: Sequence[Chunk], i: int) -> str:
        """What is indexed for chunk ``i`` (the analyzer adds its camelCase words' parts)."""
        parts = [c.text for c in chunks[max(0, i - self.context) : i + 1]]
        if self.headers:
            parts.insert(0, chunks[i].header())
        return _indexable("\n".join(parts))

    def _index(self, chunks: Sequence[Chunk]) -> BM25Index:
        """The chunks' index; the last transcript's is kept, as :class:`HybridScorer`
        keeps its memory."""
        digest = hashlib.sha256()
        for c in chunks:
            digest.update(f"{c.header()}\x00{c.text}\x01".encode("utf-8", "surrogatepass"))
        key = digest.hexdigest()
        if self._last is None or self._last[0] != key:
            texts = [self.text(chunks, i) for i in range(len(chunks))]
            self._last = (key, BM25Index(_CODE_ANALYZER, texts))
        return self._last[1]

    def score(self, task: str, chunks: Sequence[Chunk]) -> list[float]:
        if not chunks:
            return []
        found = self._index(chunks).query(_indexable(task))
        return [float(x) for x in found]


class LLMScorer:
    """A model's yes-probability per chunk (see the module docstring). ``max_chars``
    cuts a long chunk's text in the question (its head is kept)."""

    def __init__(
        self,
        model: YesNoModel,
        *,
        shortlist: int = DEFAULT_SHORTLIST,
        first: ChunkScorer | None = None,
        max_chars: int = 4_000,
    ) -> None:
        if not isinstance(model, YesNoModel):
            raise UsageError(
                f"model needs yes_probability(system, user); got {type(model).__name__}"
            )
        for what, value in (("shortlist", shortlist), ("max_chars", max_chars)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{what} must be a positive integer, got {value!r}")
        self.model = model
        self.shortlist = shortlist
        self.first = first if first is not None else HybridScorer()
        self.max_chars = max_chars

    @property
    def name(self) -> str:
        return f"llm:{self.model.name}"

    def score(self, task: str, chunks: Sequence[Chunk]) -> list[float]:
        first = self.first.score(task, chunks)
        ranked = sorted(range(len(chunks)), key=lambda i: (-first[i], i))[: self.shortlist]
        out = [0.0] * len(chunks)
        for i in ranked:
            text = chunks[i].text[: self.max_chars]
            question = f"Task:\n{task}\n\nExcerpt ({chunks[i].kind}):\n{text}"
            out[i] = float(self.model.yes_probability(RELEVANCE_PROMPT, question))
        return out
