"""A relay step: one fresh call that sees a chunk and the carry, and proposes an update.

A :class:`Step` is any callable from :class:`StepRequest` to :class:`StepResult`:
a function, a parser (:class:`~ctxwise.relay.workload.HandoverParser`), or a model
call (:class:`LLMStep`, over the provider adapters). A step that cannot produce an
update raises :class:`StepFailed`; the relay then treats the attempt like a
rejected edit (it retries once, then keeps the previous state).

:class:`FaultyStep` wraps a step and, seeded, breaks some of its updates the way
a model editing a table does: a row dropped, counts reset, a count lowered.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ctxwise._io import parse_json
from ctxwise.errors import StepFailed
from ctxwise.providers.chat import ChatModel

__all__ = [
    "FaultyStep",
    "LLMStep",
    "Step",
    "StepFailed",
    "StepRequest",
    "StepResult",
    "keep_state",
]


@dataclass(frozen=True, slots=True)
class StepRequest:
    """What a step sees: the chunk, the carry (rendered, and its parts), the job.

    ``attempt`` is 0, or 1 on the retry after a rejection, when ``feedback`` says
    what was wrong with the first proposal.
    """

    index: int
    chunk: str
    carry: str
    table: tuple[Mapping[str, Any], ...]
    notes: str
    kept_lines: tuple[str, ...]
    instruction: str
    attempt: int = 0
    feedback: str | None = None


@dataclass(frozen=True, slots=True)
class StepResult:
    """A step's proposal: the whole next ``table`` (None: unchanged) and the next
    ``notes`` (None: unchanged).

    ``recognised``: how many items of the chunk the step recognised (a parser: the
    lines it parsed), or None when the step does not count them (a model, the
    ``none`` step). A 0 is reported: the chunk counts in the run's
    :attr:`~ctxwise.relay.RelayResult.unrecognised_chunks`, so a parser that knows
    none of a log's phrasing says so instead of leaving the table as it was in silence.
    """

    table: tuple[Mapping[str, Any], ...] | None = None
    notes: str | None = None
    recognised: int | None = None


class Step(Protocol):
    """One fresh call per chunk."""

    def __call__(self, request: StepRequest, /) -> StepResult: ...


def keep_state(request: StepRequest, /) -> StepResult:
    """A step that changes nothing: for jobs that only keep lines."""
    return StepResult()


_LLM_FORMAT = (
    "Reply with one JSON object and nothing else: "
    '{"table": [<every row of the state table, updated>], "notes": "<your notes>"}. '
    "Keep every row; never lower a count."
)


@dataclass(frozen=True, slots=True)
class LLMStep:
    """A step that asks a :class:`~ctxwise.providers.chat.ChatModel` for the update.

    The system prompt is the job's instruction and the reply format; the user
    message is the carry and the chunk (and the feedback on a retry). The reply must
    be a JSON object with ``table`` (a list of row objects) and optional ``notes``;
    anything else raises :class:`StepFailed`.
    """

    model: ChatModel
    max_tokens: int = 4096

    def __call__(self, request: StepRequest) -> StepResult:
        system = f"{request.instruction}\n\n{_LLM_FORMAT}"
        parts = [f"<carry>\n{request.carry}\n</carry>", f"<chunk>\n{request.chunk}</chunk>"]
        if request.feedback:
            parts.append(f"Your previous update was rejected: {request.feedback}")
        reply = self.model.complete(system, "\n\n".join(parts), self.max_tokens)
        return parse_reply(reply)


def parse_reply(reply: str) -> StepResult:
    """A model's JSON reply as a :class:`StepResult`, or :class:`StepFailed`.
    A fenced code block around the object is accepted."""
    text = reply.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    try:
        data = parse_json(text)
    except json.JSONDecodeError as exc:
        raise StepFailed(f"the reply is not JSON ({exc.msg} at char {exc.pos})") from None
    except RecursionError:
        raise StepFailed("the reply is JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise StepFailed("the reply is not a JSON object")
    unknown = sorted(set(data) - {"table", "notes"})
    if unknown:
        raise StepFailed(f"unknown key {unknown[0]!r} in the reply")
    table = data.get("table")
    if table is not None and (
        not isinstance(table, list) or not all(isinstance(r, dict) for r in table)
    ):
        raise StepFailed("'table' is not a list of row objects")
    notes = data.get("notes")
    if notes is not None and not isinstance(notes, str):
        raise StepFailed("'notes' is not a string")
    return StepResult(table=None if table is None else tuple(table), notes=notes)


def _draw(seed: int, *parts: object) -> float:
    digest = hashlib.sha256(json.dumps([seed, *parts]).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True, slots=True)
class FaultyStep:
    """Wraps ``inner`` and breaks a share ``rate`` of its first attempts, seeded by
    ``seed`` and the step index (so a resumed run breaks the same steps).

    A broken update drops a row (rows keyed by ``key``), resets every ``counters``
    column to 0, or lowers one count below its current value, as the seeded draw
    picks; every break is one the table's invariants catch. On the retry
    (``attempt`` 1, with the relay's feedback) the update is left intact, as a
    model told what it broke usually fixes it; with ``persistent=True`` the retry
    is broken too.
    """

    inner: Step
    rate: float = 0.25
    seed: int = 0
    key: str = "asset"
    counters: Sequence[str] = field(default=("handovers",))
    persistent: bool = False

    def breaks(self, index: int, attempt: int = 0) -> bool:
        """Whether the call for step ``index``, attempt ``attempt`` is broken."""
        if attempt > 0 and not self.persistent:
            return False
        return _draw(self.seed, "fault", index, attempt) < self.rate

    def __call__(self, request: StepRequest) -> StepResult:
        result = self.inner(request)
        if not self.breaks(request.index, request.attempt):
            return result
        rows = [dict(r) for r in (result.table or request.table)]
        before = {r.get(self.key): r for r in request.table}
        counted = sorted(
            (k for k, r in before.items() if any(_count(r.get(c)) > 0 for c in self.counters)),
            key=str,
        )
        kind = int(_draw(self.seed, "kind", request.index, request.attempt) * 3)
        if kind > 0 and not counted:
            kind = 0  # no count to lower yet: drop a row instead
        keys = sorted((k for k in before if any(r.get(self.key) == k for r in rows)), key=str)
        if kind == 0 and not keys:
            return result
        pick = _draw(self.seed, "row", request.index, request.attempt)
        if kind == 0:
            gone = keys[int(pick * len(keys))]
            rows = [r for r in rows if r.get(self.key) != gone]
        elif kind == 1:
            for row in rows:
                for c in self.counters:
                    if c in row:
                        row[c] = 0
        else:
            lowered = counted[int(pick * len(counted))]
            for row in rows:
                if row.get(self.key) == lowered:
                    for c in self.counters:
                        if _count(before[lowered].get(c)) > 0:
                            row[c] = _count(before[lowered].get(c)) - 1
        return StepResult(table=tuple(rows), notes=result.notes, recognised=result.recognised)


def _count(value: Any) -> int | float:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else 0
