"""Hand a subagent the transcript chunks its task needs, verbatim, under a budget.

:func:`select_context` never writes a brief. It returns the task and chosen chunks
of the transcript (:mod:`ctxwise.handoff.chunks`) exactly as they were:

1. **pinned**: a chunk that *defines* something the task names is always taken.
   The task's identifiers (:func:`identifiers`: ``C-118``, ``src/app.py``,
   ``parse_args``, ``4417``, a name in backticks) are looked up in turn: the first
   tool call whose input names it (``Read {"file_path": ".../app.py"}``, ``bd show
   C-118``: where the thing was fetched or made), else the first chunk that holds
   it. Then the files the task or a pinned chunk names (a spec listing the files
   to change): the tool calls that read, wrote or ran each one, newest first and
   in turns across the files, within half the budget, leaving out the reads,
   writes and edits of a file that a later whole-file ``Write`` of it replaced;
2. **recent**: the latest chunks, newest first and contiguous, up to
   ``recent_share`` of the budget (default :data:`DEFAULT_RECENT_SHARE`);
3. **scored**: the rest are ranked by the scorer (:class:`HybridScorer` by
   default: the long-term memory's hybrid recall, BM25 plus hashing vectors, over
   the chunks), best first;
4. **packed** whole, best value per token first (score over cost to the power
   :data:`SIZE_EXPONENT`, or ``size_exponent``: a long chunk must score higher
   than a short one to go first), while they fit the budget (a chunk that does
   not fit is passed over for a smaller one after it), then **emitted in their
   original order**, each under a header with its id, kind, position and time.

When nothing in the transcript matches the task, the report says so and the most
recent chunks are taken instead (never nothing, unless no chunk with its header
fits the budget: then the handoff is empty and ``left_out`` holds every chunk).
:class:`Handoff` says what was taken and why, and what was left out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from ctxwise.errors import BudgetError, UsageError
from ctxwise.handoff.chunks import DEFAULT_MAX_CHUNK_TOKENS, Chunk, chunk_transcript
from ctxwise.handoff.scoring import ChunkScorer, HybridScorer
from ctxwise.messages import Message, Transcript
from ctxwise.tokens import CharCounter, TokenCounter

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_RECENT_SHARE",
    "SIZE_EXPONENT",
    "Handoff",
    "Selected",
    "chunk_costs",
    "identifiers",
    "select_context",
    "select_scored",
]

DEFAULT_BUDGET = 20_000
"""Tokens of transcript a handoff carries when the caller does not say."""

DEFAULT_RECENT_SHARE = 0.1
"""The share of the budget kept for the latest chunks (after the pinned ones): a
subagent usually continues the work of the last few steps. Chosen on the tuned and
held-out Claude Code tasks and LoCoMo (the benchmarks page gives the figures)."""

SIZE_EXPONENT = 0.25
"""How much a scored chunk's length counts against it when packing: chunks go in
by ``score / tokens ** SIZE_EXPONENT``. At 0 a 2,000-token chunk that scores a
little higher than four 100-token ones shuts them all out; at 1 (score per
token) short chunks crowd out the long ones that hold whole files. Chosen on the
five Claude Code task sets and LoCoMo (the benchmarks page gives the figures)."""

_IDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./:#-]*[A-Za-z0-9]")
_TICKS = re.compile(r"`([^`\s]{2,120})`")
_DOTTED = re.compile(r"[A-Za-z0-9]\.[A-Za-z0-9]")
_HYPHEN_CAP = re.compile(r"[A-Z]-|-[A-Z]")


@dataclass(frozen=True, slots=True)
class Selected:
    """A chunk in the handoff and why: ``pinned`` (it defines ``defines``, a name the
    task uses), ``recent`` (among the latest chunks, or nothing matched so the latest
    went in) or ``scored``."""

    chunk: Chunk
    reason: Literal["pinned", "scored", "recent"]
    score: float
    defines: str | None = None


@dataclass(frozen=True, slots=True)
class Handoff:
    """The task, the chunks chosen (in transcript order), and the report.

    ``tokens`` counts the chosen chunks with their headers (what the budget holds);
    ``transcript_tokens`` the whole transcript's chunks the same way. ``left_out``
    are the chunks not taken, best first; ``unmatched`` the task's identifiers no
    chunk holds; ``matched`` is false when the scorer found nothing for the task.
    """

    task: str
    selected: tuple[Selected, ...]
    left_out: tuple[tuple[Chunk, float], ...]
    budget: int
    tokens: int
    transcript_tokens: int
    scorer: str
    matched: bool
    identifiers: tuple[str, ...]
    unmatched: tuple[str, ...]
    pins_left_out: tuple[str, ...] = ()
    """Names whose defining chunk was found but did not fit the budget."""

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        return tuple(s.chunk for s in self.selected)

    @property
    def share(self) -> float:
        """The handoff's share of the transcript's tokens."""
        return self.tokens / self.transcript_tokens if self.transcript_tokens else 0.0

    def render(self) -> str:
        """The subagent's prompt: the task, then the chunks verbatim, in order."""
        body = "\n\n".join(f"{s.chunk.header()}\n{s.chunk.text}" for s in self.selected)
        note = (
            f"{len(self.selected)} of {len(self.selected) + len(self.left_out)} parts of the "
            "conversation so far, verbatim and in their original order"
        )
        return f'{self.task}\n\n<context note="{note}">\n{body}\n</context>'

    def report(self) -> dict[str, Any]:
        """What was taken, why, and what was left out (JSON-ready)."""
        return {
            "task": self.task,
            "scorer": self.scorer,
            "budget": self.budget,
            "tokens": self.tokens,
            "transcript_tokens": self.transcript_tokens,
            "share": round(self.share, 4),
            "matched": self.matched,
            "identifiers": list(self.identifiers),
            "unmatched": list(self.unmatched),
            "pins_left_out": list(self.pins_left_out),
            "selected": [
                {
                    "id": s.chunk.id,
                    "kind": s.chunk.kind,
                    "position": s.chunk.position,
                    "tokens": s.chunk.tokens,
                    "reason": s.reason,
                    "score": round(s.score, 6),
                    **({"defines": s.defines} if s.defines else {}),
                }
                for s in self.selected
            ],
            "left_out": {
                "chunks": len(self.left_out),
                "tokens": sum(c.tokens for c, _ in self.left_out),
                "best": [
                    {"id": c.id, "score": round(score, 6), "tokens": c.tokens}
                    for c, score in self.left_out[:10]
                ],
            },
        }


def _is_identifier(word: str) -> bool:
    """A word that names one thing rather than saying something: it holds a digit,
    an underscore, ``#`` or ``:``, a dot between letters or digits (``app.py``,
    ``gqc.5``), a slash with a dot or more than one slash (a path, not
    ``open/closed``), or a hyphen next to a digit or a capital (``C-118``,
    ``X-Request-Id``; not ``project-level`` or ``SQLite-safe``)."""
    if any(c.isdigit() for c in word) or any(c in word for c in "_#:"):
        return True
    if _DOTTED.search(word):
        return True
    if word.count("/") > 1 or ("/" in word and "." in word):
        return True
    return bool(_HYPHEN_CAP.search(word))


def identifiers(task: str) -> list[str]:
    """The names in ``task`` a handoff must carry the definition of (see
    :func:`_is_identifier`; a single word in backticks always counts), in the
    order they appear, each once."""
    found = [m.group(1).strip("`.,;:") for m in _TICKS.finditer(task)]
    for m in _IDENT.finditer(task):
        word = m.group(0)
        if len(word) >= 3 and _is_identifier(word):
            found.append(word)
    return list(dict.fromkeys(w for w in found if w))


def _is_path(name: str) -> bool:
    return "/" in name and "." in name.rsplit("/", 1)[-1]


def _calls_naming(chunks: Sequence[Chunk], name: str) -> list[int]:
    """The tool chunks whose call (not its result) names ``name``, in order."""
    return [
        i
        for i, c in enumerate(chunks)
        if c.tool_use_id is not None
        and c.part in (None, (1, c.part[1] if c.part else 0))
        and name in c.text.split("\n→ ", 1)[0]
    ]


def _defining(chunks: Sequence[Chunk], name: str) -> int | None:
    """The chunk that defines ``name``: for a file path, the latest tool call whose
    input names it (the file as it stands now); for any other name, the first such
    call (where it was fetched or made); else the first chunk holding it."""
    calls = _calls_naming(chunks, name)
    if calls:
        return calls[-1] if _is_path(name) else calls[0]
    return next((i for i, c in enumerate(chunks) if name in c.text), None)


_CONTENT_TOOLS = frozenset({"Read", "Write", "Edit", "MultiEdit", "NotebookEdit"})
_FILE_PATH = re.compile(r'"(?:file_path|notebook_path)": "((?:[^"\\]|\\.)*)"')


def _on_file(chunk: Chunk, path: str) -> bool:
    """Whether ``chunk`` is a read, write or edit of the file ``path`` itself (not a
    call that only mentions it, such as a plan written elsewhere)."""
    if chunk.tool not in _CONTENT_TOOLS:
        return False
    found = _FILE_PATH.search(chunk.text.partition("\n→ ")[0])
    if found is None:
        return False
    target = found.group(1)
    return target == path or target.endswith("/" + path.lstrip("/"))


def _current(chunks: Sequence[Chunk], path: str, history: list[int]) -> list[int]:
    """A file's history, newest first, without what a later whole-file ``Write`` of
    it (one that did not fail) superseded: its reads, writes and edits before it."""
    out: list[int] = []
    written = False
    for i in history:
        chunk = chunks[i]
        on_file = _on_file(chunk, path)
        if written and on_file:
            continue
        out.append(i)
        result = chunk.text.partition("\n→ ")[2]
        if on_file and chunk.tool == "Write" and "<tool_use_error>" not in result[:200]:
            written = True
    return out


def _finite(score: Any) -> bool:
    try:
        return math.isfinite(score)
    except TypeError:  # not a number at all
        return False


def _share_of(budget: int, share: float) -> int:
    """``int(budget * share)``, also for a budget too large for a float."""
    try:
        return int(budget * share)
    except OverflowError:  # a budget past 1e308 tokens
        return int(Fraction(share) * budget)


def chunk_costs(chunks: Sequence[Chunk], counter: TokenCounter) -> list[int]:
    """What each chunk costs a handoff's budget: its header and text as
    :meth:`Handoff.render` writes them, and the blank line after."""
    return [counter.count(f"{c.header()}\n{c.text}") + 2 for c in chunks]


def _check(task: str, budget: int, recent_share: float | None, size_exponent: float | None) -> None:
    if not isinstance(task, str) or not task.strip():
        raise UsageError("the task is empty: say what the subagent must do")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise BudgetError(budget, "a handoff budget is an integer >= 1")
    share: Any = recent_share
    if share is not None and (
        isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1
    ):
        raise UsageError(f"recent_share is a fraction of the budget in [0, 1], not {share!r}")
    power: Any = size_exponent
    if power is not None and (
        isinstance(power, bool) or not isinstance(power, int | float) or not 0 <= power < math.inf
    ):
        raise UsageError(f"size_exponent is a finite number >= 0, not {power!r}")


def select_context(
    transcript: Transcript | Sequence[Message],
    task: str,
    budget: int = DEFAULT_BUDGET,
    *,
    scorer: ChunkScorer | None = None,
    counter: TokenCounter | None = None,
    max_chunk_tokens: int = DEFAULT_MAX_CHUNK_TOKENS,
    recent_share: float | None = None,
    size_exponent: float | None = None,
) -> Handoff:
    """The chunks of ``transcript`` a subagent given ``task`` needs, verbatim, in at
    most ``budget`` tokens (see the module docstring). ``recent_share`` and
    ``size_exponent`` default to :data:`DEFAULT_RECENT_SHARE` and
    :data:`SIZE_EXPONENT`.

    Raises:
        UsageError: ``task`` is empty, ``recent_share`` is not in [0, 1],
            ``size_exponent`` is not a finite number >= 0, or ``scorer`` returns
            the wrong number of scores or one that is not a finite number (NaN,
            infinity).
        BudgetError: ``budget`` is not a positive integer.
    """
    _check(task, budget, recent_share, size_exponent)
    tc = counter if counter is not None else CharCounter()
    chosen_scorer = scorer if scorer is not None else HybridScorer()
    chunks = chunk_transcript(transcript, tc, max_chunk_tokens=max_chunk_tokens)
    scores = chosen_scorer.score(task, chunks) if chunks else []
    return select_scored(
        task,
        chunks,
        scores,
        budget,
        counter=tc,
        recent_share=recent_share,
        size_exponent=size_exponent,
        scorer=chosen_scorer.name,
    )


def select_scored(
    task: str,
    chunks: Sequence[Chunk],
    scores: Sequence[float],
    budget: int = DEFAULT_BUDGET,
    *,
    counter: TokenCounter | None = None,
    recent_share: float | None = None,
    size_exponent: float | None = None,
    scorer: str = "given",
    costs: Sequence[int] | None = None,
) -> Handoff:
    """What :func:`select_context` does once the chunks are scored (steps 1–4 of
    the module docstring), for a caller that scores a transcript's chunks once
    and packs them under several budgets or settings; ``scorer`` names where the
    scores came from (in the report and errors). ``costs`` are the chunks' costs
    as :func:`chunk_costs` gives them, when the caller has them already.

    Raises:
        UsageError: as :func:`select_context`; ``scores`` is not one finite
            number per chunk, or ``costs`` not one token count >= 0 per chunk.
        BudgetError: ``budget`` is not a positive integer.
    """
    _check(task, budget, recent_share, size_exponent)
    share = DEFAULT_RECENT_SHARE if recent_share is None else recent_share
    power = SIZE_EXPONENT if size_exponent is None else size_exponent
    tc = counter if counter is not None else CharCounter()
    chunks = list(chunks)
    scores = list(scores)
    cost = chunk_costs(chunks, tc) if costs is None else list(costs)
    if len(cost) != len(chunks) or not all(
        isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cost
    ):
        raise UsageError(f"costs are {len(chunks)} token counts >= 0, one per chunk")
    if len(scores) != len(chunks):
        raise UsageError(
            f"the scorer {scorer!r} gave {len(scores)} scores for {len(chunks)} chunks"
        )
    # NaN sorts nowhere (the packing order became arbitrary) and is not JSON (the report)
    bad = next((i for i, s in enumerate(scores) if not _finite(s)), None)
    if bad is not None:
        raise UsageError(
            f"the scorer {scorer!r} gave {scores[bad]!r} for chunk {chunks[bad].id}: "
            "a score is a finite number"
        )
    names = identifiers(task)
    pinned: dict[int, str] = {}
    unmatched = []
    for name in names:
        at = _defining(chunks, name)
        if at is None:
            unmatched.append(name)
        elif at not in pinned:
            pinned[at] = name
    # the files the task or a pinned chunk names (a spec listing the files to
    # change): the tool calls that read, wrote or ran them, newest first, taken in
    # turns across the files
    files = [n for n in names if _is_path(n)]
    files += [n for i in sorted(pinned) for n in identifiers(chunks[i].text) if _is_path(n)]
    histories = [_current(chunks, f, _calls_naming(chunks, f)[::-1]) for f in dict.fromkeys(files)]
    also: dict[int, str] = {}
    for depth in range(max((len(h) for h in histories), default=0)):
        for path, history in zip(dict.fromkeys(files), histories, strict=True):
            if depth < len(history) and history[depth] not in pinned:
                also.setdefault(history[depth], path)
    matched = any(s > 0 for s in scores)
    if matched:
        value = [scores[i] / max(cost[i], 1) ** power for i in range(len(chunks))]
        order = sorted(range(len(chunks)), key=lambda i: (-value[i], i))
        order = [i for i in order if scores[i] > 0]
        rest = [i for i in range(len(chunks) - 1, -1, -1) if scores[i] <= 0]
    else:
        order, rest = [], list(range(len(chunks) - 1, -1, -1))
    taken: dict[int, Selected] = {}
    used = 0
    for i in sorted(pinned):
        if used + cost[i] <= budget:
            taken[i] = Selected(chunks[i], "pinned", scores[i], pinned[i])
            used += cost[i]
    # the latest chunks, newest first and contiguous, within recent_share of the budget
    recent_cap = min(budget, used + _share_of(budget, share))
    for i in range(len(chunks) - 1, -1, -1):
        if i in taken:
            continue
        if used + cost[i] > recent_cap:
            break
        taken[i] = Selected(chunks[i], "recent", scores[i])
        used += cost[i]
    cap = used + budget // 2  # file history may take up to half the budget
    for i, path in also.items():
        if i not in taken and used + cost[i] <= min(budget, cap):
            taken[i] = Selected(chunks[i], "pinned", scores[i], path)
            used += cost[i]
    for i in order:
        if i not in taken and used + cost[i] <= budget:
            taken[i] = Selected(chunks[i], "scored", scores[i])
            used += cost[i]
    if not matched:
        for i in rest:
            if i not in taken and used + cost[i] <= budget:
                taken[i] = Selected(chunks[i], "recent", 0.0)
                used += cost[i]
    left = sorted((i for i in range(len(chunks)) if i not in taken), key=lambda i: (-scores[i], i))
    return Handoff(
        task,
        tuple(taken[i] for i in sorted(taken)),
        tuple((chunks[i], scores[i]) for i in left),
        budget,
        used,
        sum(cost),
        scorer,
        matched,
        tuple(names),
        tuple(unmatched),
        tuple(pinned[i] for i in sorted(pinned) if i not in taken),
    )
