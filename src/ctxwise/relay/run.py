"""The relay loop: a long input, chunk by chunk, each step a fresh call.

For each chunk, in order:

1. the line scorer scores the chunk's lines; those above its threshold go into
   the line store, verbatim; the store drops by its policy to stay in its share;
2. the step sees the chunk and the carry (kept lines, table, notes) and proposes
   the next table and notes (and may say how many items of the chunk it recognised:
   a chunk it recognised nothing in is counted in
   :attr:`RelayResult.unrecognised_chunks`);
3. code checks the proposal against the table's invariants and the state share;
   a violation (or a step that raised :class:`~ctxwise.relay.step.StepFailed`)
   rejects it and the step runs once more with feedback; if that fails too, the
   previous table stays and the rejection is recorded with the offending change;
4. the notes are cut to what the state share leaves after the table;
5. the state and the manifest are committed atomically.

:meth:`Relay.resume` continues after the last committed step; a run killed at
any point resumes to the same result as one never interrupted (the scorer, the
store and a deterministic step give the same output for the same input).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import numbers
import re
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from ctxwise.errors import CtxwiseError, RelayError, RelayStateError
from ctxwise.relay.carry import CarryBudget, Shares, render_carry, render_table
from ctxwise.relay.lines import (
    DroppedLine,
    DropPolicy,
    ExampleScorer,
    KeptLine,
    LineScorer,
    LineStore,
)
from ctxwise.relay.manifest import AgentStatus, DirectoryRuns, Manifest, RunStore, check_run_id
from ctxwise.relay.step import Step, StepFailed, StepRequest, StepResult
from ctxwise.relay.table import Change, Check, StateTable, diff_tables
from ctxwise.relay.workload import Workload
from ctxwise.tokens import CharCounter, TokenCounter

__all__ = ["Rejection", "Relay", "RelayResult", "StepRecord"]

DEFAULT_CARRY_TOKENS = 24_000

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Rejection:
    """A proposal code refused: at ``step``, ``attempt`` 0 or 1, why (``reason``:
    ``"invariant"``, ``"over_share"`` or ``"step_failed"``), the violations, and the
    offending ``changes`` against the table it would have replaced. ``final`` is
    True when the retry failed too and the previous table stayed."""

    step: int
    attempt: int
    reason: str
    violations: tuple[str, ...]
    changes: tuple[Change, ...] = ()
    final: bool = False


@dataclass(frozen=True, slots=True)
class StepRecord:
    """What one step did: lines kept from its chunk, lines the store dropped,
    attempts made, whether an update was accepted, the carry's tokens after it, and
    how many items of the chunk the step said it recognised (``None``: it did not
    say; from its accepted proposal, else its last one)."""

    step: int
    kept: int
    dropped: int
    attempts: int
    accepted: bool
    notes_cut: bool
    carry_tokens: int
    recognised: int | None = None


@dataclass(frozen=True, slots=True)
class RelayResult:
    """The state after the last committed step of run ``run_id``."""

    run_id: str
    steps: int
    total_steps: int
    lines: tuple[KeptLine, ...]
    table: tuple[Mapping[str, Any], ...]
    notes: str
    dropped: tuple[DroppedLine, ...]
    rejections: tuple[Rejection, ...]
    records: tuple[StepRecord, ...]
    carry: str
    unrecognised_chunks: int = 0
    """Chunks in which the step recognised nothing (its result said ``recognised=0``):
    a parser that does not know the input's phrasing leaves the table as it was
    there, and this says so. Steps that do not count (``recognised=None``) add
    nothing."""

    @property
    def done(self) -> bool:
        """Whether every chunk was processed."""
        return self.steps == self.total_steps

    @property
    def carry_tokens_max(self) -> int:
        """The largest carry any step saw or left."""
        return max((r.carry_tokens for r in self.records), default=0)


@dataclass(slots=True)
class _State:
    step: int = -1
    lines: list[KeptLine] = field(default_factory=list)
    table: tuple[dict[str, Any], ...] = ()
    notes: str = ""
    dropped: list[DroppedLine] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    records: list[StepRecord] = field(default_factory=list)

    def dump(self) -> bytes:
        data = {
            "step": self.step,
            "lines": [_fields(k) for k in self.lines],
            "table": list(self.table),
            "notes": self.notes,
            "dropped": [_fields(d) for d in self.dropped],
            "rejections": [
                {**_fields(r), "changes": [_fields(c) for c in r.changes]} for r in self.rejections
            ],
            "records": [_fields(r) for r in self.records],
        }
        # insertion order kept (table rows keep their column order): the dump is
        # deterministic because every part is built in a fixed order
        # a rejected proposal's record may hold a lone surrogate (a step's reason, a
        # refused value): it can only be inside a JSON string, where backslashreplace
        # writes it as the JSON escape \uXXXX, which loads back as the same string
        return json.dumps(data, ensure_ascii=False).encode("utf-8", "backslashreplace")

    @classmethod
    def load(cls, data: bytes, where: str) -> _State:
        try:
            raw = json.loads(data)
            _keys(raw, _STATE_KEYS, "the state")
            step = raw["step"]
            if not _fits(step, int):
                raise ValueError(f"step: {step!r} is not a whole number")
            if not isinstance(raw["notes"], str):
                raise ValueError("notes: not a string")
            table = _list(raw["table"], "table")
            if not all(isinstance(r, dict) for r in table):
                raise ValueError("table: a row is not an object")
            rejections = []
            for r in _list(raw["rejections"], "rejections"):
                if not isinstance(r, dict):
                    raise ValueError("a rejection is not an object")
                r = {
                    **r,
                    "violations": tuple(_list(r.get("violations"), "a rejection's violations")),
                    "changes": tuple(
                        _typed(Change, c, "a rejection's change")
                        for c in _list(r.get("changes", []), "a rejection's changes")
                    ),
                }
                rejections.append(_typed(Rejection, r, "a rejection"))
            return cls(
                step=step,
                lines=[_typed(KeptLine, k, "a kept line") for k in _list(raw["lines"], "lines")],
                table=tuple(dict(r) for r in table),
                notes=raw["notes"],
                dropped=[
                    _typed(DroppedLine, d, "a dropped line")
                    for d in _list(raw["dropped"], "dropped")
                ],
                rejections=rejections,
                records=[
                    _typed(StepRecord, r, "a step record") for r in _list(raw["records"], "records")
                ],
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise RelayStateError(f"the state file does not parse ({exc})", path=where) from None


_STATE_KEYS = frozenset(("step", "lines", "table", "notes", "dropped", "rejections", "records"))


def _keys(
    raw: object, names: Set[str], what: str, optional: Set[str] = frozenset()
) -> dict[str, Any]:
    """``raw`` if it is an object with the keys ``names`` (those in ``optional`` may
    be missing) and no other, else a ValueError."""
    if not isinstance(raw, dict):
        raise ValueError(f"{what} is not an object")
    odd = sorted((set(raw) - names) | (names - optional - set(raw)))
    if odd:
        raise ValueError(f"{what} has the wrong keys ({', '.join(map(repr, odd))})")
    return raw


def _list(raw: object, what: str) -> list[Any]:
    if not isinstance(raw, list):
        raise ValueError(f"{what}: not a list")
    return raw


def _fits(value: object, hint: Any) -> bool:
    """Whether a value read from JSON is of the field type ``hint`` (a bool is not a number)."""
    if hint is Any:
        return True
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint in (str, bool):
        return isinstance(value, hint)
    origin = get_origin(hint)
    if origin is Literal:
        return value in get_args(hint)
    if origin in (Union, UnionType):
        return any(_fits(value, h) for h in get_args(hint))
    if origin is tuple:
        return isinstance(value, tuple) and all(_fits(v, get_args(hint)[0]) for v in value)
    return isinstance(value, origin or hint)


_HINTS: dict[type, dict[str, Any]] = {}


def _typed(cls: type[_T], raw: object, what: str) -> _T:
    """``cls`` (a dataclass) from the object ``raw``, every field present and of its type."""
    every = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = {f.name for f in every}
    defaults = {f.name for f in every if f.default is not dataclasses.MISSING}
    fields = _keys(raw, names, what, defaults)
    hints = _HINTS.get(cls) or _HINTS.setdefault(cls, get_type_hints(cls))
    for name in fields:
        if not _fits(fields[name], hints[name]):
            raise ValueError(f"{what}: {name} {fields[name]!r} is not of type {hints[name]}")
    return cls(**fields)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _plain(value: Any) -> Any:
    """``value`` if it is JSON as it stands, else its ``repr`` (a rejected proposal
    may hold anything, and its record must still be saved)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _safe_changes(
    current: Sequence[Mapping[str, Any]], proposed: object, key: str
) -> tuple[Change, ...]:
    """The changes a rejected proposal would have made (none when it is not rows)."""
    if not isinstance(proposed, list | tuple) or not all(isinstance(r, Mapping) for r in proposed):
        return ()
    return tuple(
        Change(c.key, c.kind, c.column, _plain(c.old), _plain(c.new))
        for c in diff_tables(current, proposed, key)
    )


def _fields(obj: Any) -> dict[str, Any]:
    """A slotted dataclass's fields as a dict, shallow (``asdict`` deep-copies: slow)."""
    return {name: getattr(obj, name) for name in obj.__slots__}


def _kind(obj: object) -> str:
    """A function's qualified name, or an object's type."""
    qualified = getattr(obj, "__qualname__", None)
    if isinstance(qualified, str):
        return f"{getattr(obj, '__module__', '')}.{qualified}"
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _identity(obj: object, depth: int = 0) -> Any:
    """What names ``obj`` across processes: a function's qualified name; a
    dataclass's type and fields; an object's type with its ``settings`` or
    ``name`` (a scorer, a model, a counter). Never an address."""
    if obj is None or isinstance(obj, str | int | float | bool):
        return obj
    if isinstance(obj, list | tuple) and depth < 4:
        return [_identity(v, depth + 1) for v in obj]
    if isinstance(obj, re.Pattern):
        return obj.pattern
    kind = type(obj)
    qualified = getattr(obj, "__qualname__", None)
    if isinstance(qualified, str):  # a function or a class
        return f"{getattr(obj, '__module__', '')}.{qualified}"
    out: dict[str, Any] = {"type": f"{kind.__module__}.{kind.__qualname__}"}
    if dataclasses.is_dataclass(obj) and depth < 4:
        out["fields"] = {
            f.name: _identity(getattr(obj, f.name), depth + 1)
            for f in dataclasses.fields(obj)
            if f.repr
        }
    for attr in ("settings", "name"):
        value = getattr(obj, attr, None)
        if isinstance(value, str | dict):
            out[attr] = value
    return out


class Relay:
    """Runs a :class:`~ctxwise.relay.workload.Workload` through ``step``, chunk by chunk.

    Args:
        workload: the instruction, the chunks, the examples and the state table
            (``workload.table``; None for a job without one).
        step: the :class:`~ctxwise.relay.step.Step` called once per chunk (twice
            when its first proposal is rejected).
        runs: where runs are committed: a :class:`RunStore`, or a folder for
            :class:`DirectoryRuns`.
        scorer: chooses the lines to keep; default :class:`ExampleScorer` over the
            workload's examples and instruction.
        carry_tokens: the carry's cap (default 24,000), split by ``shares``.
        drop_policy: ``"lowest-score"`` (default) or ``"oldest"``.
        checks: custom table invariants (see :data:`~ctxwise.relay.table.Check`).
        retries: how many times a rejected step runs again (default 1).
        counter: the token counter (default :class:`~ctxwise.tokens.CharCounter`).

    Raises:
        RelayError: a setting out of range, or a table spec that does not hold.
    """

    def __init__(
        self,
        workload: Workload,
        step: Step,
        *,
        runs: RunStore | str | Path,
        scorer: LineScorer | None = None,
        carry_tokens: int = DEFAULT_CARRY_TOKENS,
        shares: Shares | None = None,
        drop_policy: DropPolicy = "lowest-score",
        checks: Sequence[Check] = (),
        retries: int = 1,
        counter: TokenCounter | None = None,
    ) -> None:
        if not workload.chunks:
            raise RelayError("workload", "the workload has no chunks")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise RelayError("spec", f"retries must be a whole number ≥ 0, not {retries!r}")
        self.workload = workload
        self.step = step
        self.runs = runs if isinstance(runs, RunStore) else DirectoryRuns(runs)
        self.counter = counter if counter is not None else CharCounter()
        self.shares = shares if shares is not None else Shares()
        self.budget = CarryBudget(carry_tokens, self.shares, self.counter)
        self.scorer = (
            scorer
            if scorer is not None
            else ExampleScorer(
                workload.examples.keep, workload.examples.skip, instruction=workload.instruction
            )
        )
        threshold: object = self.scorer.threshold  # a Python scorer may hold anything
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
            raise RelayError("spec", f"the scorer's threshold must be a number, not {threshold!r}")
        self.drop_policy: DropPolicy = drop_policy
        LineStore(self.budget.lines, self.counter, drop_policy)  # validates the policy
        self.table = StateTable(workload.table, checks=checks) if workload.table else None
        if workload.table is not None:
            start = self.counter.count(
                render_table(workload.table.rows, list(workload.table.columns))
            )
            if start > self.budget.state:
                raise RelayError(
                    "table",
                    f"the starting table takes {start} tokens, more than the state share "
                    f"of {self.budget.state}; raise carry_tokens or shares.state",
                )
        self.retries = retries

    # -- identity of the job ----------------------------------------------------

    def fingerprint(self) -> str:
        """A hash of what decides the result: the input, the job, the carry's
        settings, the scorer and counter with their settings, and the step's kind
        (its function or class, not its settings: a run may resume with the step
        fixed, or with another model). A run resumes only on the same fingerprint."""
        h = hashlib.sha256()
        parts: list[Any] = [
            self.workload.instruction,
            [hashlib.sha256(c.encode("utf-8")).hexdigest() for c in self.workload.chunks],
            self.workload.examples.model_dump(),
            None if self.workload.table is None else self.workload.table.model_dump(),
            self.budget.cap,
            [self.shares.lines, self.shares.state],
            self.drop_policy,
            self.retries,
            _identity(self.scorer),
            float(self.scorer.threshold),
            _kind(self.step),
            _identity(self.counter),
        ]
        h.update(json.dumps(parts, sort_keys=True, default=str).encode("utf-8"))
        return h.hexdigest()

    # -- running ------------------------------------------------------------------

    def run(
        self,
        run_id: str,
        *,
        stop_after: int | None = None,
        on_commit: Callable[[int], None] | None = None,
    ) -> RelayResult:
        """Start run ``run_id`` and process every chunk (or ``stop_after`` of them).

        ``on_commit(step)`` is called after each committed step.

        Raises:
            RelayError: (``"run"``) a run with this id exists, or another process
                holds it (:meth:`RunStore.hold`); (``"step"``) the step
                returned something that is not a :class:`StepResult`.
        """
        check_run_id(run_id)
        with self.runs.hold(run_id, create=True):
            return self._start(run_id, stop_after, on_commit)

    def _start(
        self,
        run_id: str,
        stop_after: int | None,
        on_commit: Callable[[int], None] | None,
    ) -> RelayResult:
        if self.runs.exists(run_id):
            raise RelayError(
                "run", f"run {run_id!r} exists in {self.runs.where(run_id)}; resume it instead"
            )
        state = _State(table=() if self.table is None else self.table.rows)
        manifest = Manifest(
            run_id=run_id,
            job=self.fingerprint(),
            phase="running",
            step=-1,
            steps=len(self.workload.chunks),
            agents={
                "scorer": AgentStatus(status="idle", last_step=-1),
                "step": AgentStatus(status="idle", last_step=-1),
            },
        )
        manifest = self.runs.commit(manifest, state.dump())
        return self._loop(manifest, state, stop_after, on_commit)

    def resume(
        self,
        run_id: str,
        *,
        stop_after: int | None = None,
        on_commit: Callable[[int], None] | None = None,
    ) -> RelayResult:
        """Continue run ``run_id`` after its last committed step (a finished run
        returns its result).

        Raises:
            RelayError: no such run, it was started on another job, or another
                process is running it (:meth:`RunStore.hold`).
            RelayStateError: its manifest or state file is damaged.
        """
        with self.runs.hold(check_run_id(run_id)):
            return self._continue(run_id, stop_after, on_commit)

    def _continue(
        self,
        run_id: str,
        stop_after: int | None,
        on_commit: Callable[[int], None] | None,
    ) -> RelayResult:
        manifest, data = self.runs.load(run_id)
        if manifest.job != self.fingerprint():
            raise RelayError(
                "run", f"run {run_id!r} was started on another job or with other settings"
            )
        where = self.runs.where(run_id)
        total = len(self.workload.chunks)
        if manifest.steps != total or manifest.step >= total:
            # the fingerprint covers the chunks: only a damaged manifest gets here
            raise RelayStateError(
                f"the manifest is of step {manifest.step} of {manifest.steps} chunks; "
                f"the workload has {total} chunks",
                path=where,
            )
        if data is None:
            raise RelayStateError("the manifest names no state file", path=where)
        state = _State.load(data, where)
        if state.step != manifest.step:
            raise RelayStateError(
                f"the state is of step {state.step}, the manifest of step {manifest.step}",
                path=where,
            )
        # the table was checked when it was committed: one that fails now was edited
        broken = (
            [str(v) for v in self.table.check(state.table)]
            if self.table is not None
            else (["this job keeps no state table"] if state.table else [])
        )
        if broken:
            raise RelayStateError(f"the state file's table does not hold ({broken[0]})", path=where)
        return self._loop(manifest, state, stop_after, on_commit)

    def _loop(
        self,
        manifest: Manifest,
        state: _State,
        stop_after: int | None,
        on_commit: Callable[[int], None] | None,
    ) -> RelayResult:
        chunks = self.workload.chunks
        done = 0
        while state.step + 1 < len(chunks) and (stop_after is None or done < stop_after):
            index = state.step + 1
            accepted, failures = self._advance(state, index)
            last = index == len(chunks) - 1
            agents = dict(manifest.agents)
            agents["scorer"] = AgentStatus(status="done" if last else "ok", last_step=index)
            prev = manifest.agents["step"]
            agents["step"] = AgentStatus(
                status="done" if last else ("ok" if accepted else "rejected"),
                last_step=index,
                failures=prev.failures + failures,
            )
            manifest = manifest.model_copy(
                update={"step": index, "phase": "done" if last else "running", "agents": agents}
            )
            manifest = self.runs.commit(manifest, state.dump())
            done += 1
            if on_commit is not None:
                on_commit(index)
        return self._result(manifest.run_id, state)

    def _advance(self, state: _State, index: int) -> tuple[bool, int]:
        """Process chunk ``index`` into ``state``; return (update accepted, failures)."""
        chunk = self.workload.chunks[index]
        lines = chunk.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        try:
            scores = [float(s) for s in self.scorer.score(lines)]
        except CtxwiseError:
            raise  # a provider or store failure: the last commit stands; resume later
        except Exception as exc:
            # a Python scorer may raise anything, or give what is not a number
            raise RelayError(
                "step", f"the scorer raised {type(exc).__name__} on chunk {index}: {exc}"
            ) from exc
        if len(scores) != len(lines):
            raise RelayError(
                "step", f"the scorer returned {len(scores)} scores for {len(lines)} lines"
            )
        threshold = float(self.scorer.threshold)
        new = [
            KeptLine(index, i, text, s)
            for i, (text, s) in enumerate(zip(lines, scores, strict=True))
            if s > threshold
        ]
        store = LineStore(self.budget.lines, self.counter, self.drop_policy, list(state.lines))
        dropped = store.add(new, index)
        state.lines = store.lines
        state.dropped.extend(dropped)
        kept_now = sum(1 for k in store.lines if k.chunk == index)

        columns = list(self.workload.table.columns) if self.workload.table else []
        current_table = state.table
        table_text = render_table(current_table, columns)
        carry = render_carry(store.render(), table_text, state.notes)
        carry_in = self.counter.count(carry)

        feedback: str | None = None
        failures = 0
        accepted = False
        proposal: StepResult | None = None
        recognised: int | None = None
        for attempt in range(self.retries + 1):
            request = StepRequest(
                index=index,
                chunk=chunk,
                carry=carry,
                table=tuple(dict(r) for r in current_table),
                notes=state.notes,
                kept_lines=tuple(k.text for k in store.lines),
                instruction=self.workload.instruction,
                attempt=attempt,
                feedback=feedback,
            )
            try:
                result = self.step(request)
            except StepFailed as exc:
                failures += 1
                final = attempt == self.retries
                state.rejections.append(
                    Rejection(index, attempt, "step_failed", (exc.reason,), final=final)
                )
                feedback = exc.reason
                continue
            except CtxwiseError:
                raise  # a provider or store failure: the last commit stands; resume later
            except Exception as exc:
                raise RelayError(
                    "step", f"step {index} raised {type(exc).__name__}: {exc}"
                ) from exc
            if not isinstance(result, StepResult):
                raise RelayError(
                    "step",
                    f"step {index} returned {type(result).__name__}, not a StepResult",
                )
            said: object = result.recognised  # a Python step may return anything
            if said is not None and (
                isinstance(said, bool) or not isinstance(said, int) or said < 0
            ):
                raise RelayError(
                    "step",
                    f"step {index} returned recognised={said!r}, not a whole number ≥ 0 or None",
                )
            recognised = result.recognised
            problems = self._check(result, current_table, columns)
            if problems:
                failures += 1
                reason, violations = problems
                changes = _safe_changes(current_table, result.table, self._key())
                state.rejections.append(
                    Rejection(
                        index,
                        attempt,
                        reason,
                        violations,
                        changes,
                        final=attempt == self.retries,
                    )
                )
                feedback = "; ".join(violations[:10])
                continue
            proposal = result
            accepted = True
            break

        if proposal is not None:
            if proposal.table is not None and self.table is not None:
                state.table = tuple(dict(r) for r in proposal.table)
            notes = state.notes if proposal.notes is None else proposal.notes
        else:
            notes = state.notes
        table_text = render_table(state.table, columns)
        fitted = self.budget.fit_notes(notes, self.counter.count(table_text) if table_text else 0)
        notes_cut = fitted != notes
        state.notes = fitted
        carry_out = self.counter.count(render_carry(store.render(), table_text, state.notes))
        state.records.append(
            StepRecord(
                step=index,
                kept=kept_now,
                dropped=len(dropped),
                attempts=min(failures + 1, self.retries + 1) if accepted else failures,
                accepted=accepted,
                notes_cut=notes_cut,
                carry_tokens=max(carry_in, carry_out),
                recognised=recognised,
            )
        )
        state.step = index
        return accepted, failures

    def _key(self) -> str:
        return self.workload.table.key if self.workload.table else ""

    def _check(
        self, result: StepResult, current: Sequence[Mapping[str, Any]], columns: Sequence[str]
    ) -> tuple[str, tuple[str, ...]] | None:
        notes: object = result.notes  # a Python step may return anything
        if notes is not None and not isinstance(notes, str):
            return "invariant", ("notes: not a string",)
        if isinstance(notes, str) and not _utf8(notes):
            return "invariant", ("notes: not valid Unicode (lone surrogates)",)
        table: object = result.table  # a Python step may return anything
        if table is None:
            return None
        if self.table is None:
            return "invariant", ("table: this job keeps no state table",)
        if not isinstance(table, list | tuple) or not all(isinstance(r, Mapping) for r in table):
            return "invariant", ("type: the table is not a list of row objects",)
        rows: Sequence[Mapping[str, Any]] = table
        violations = self.table.check(rows, current=current)
        if violations:
            return "invariant", tuple(str(v) for v in violations)
        tokens = self.counter.count(render_table(rows, columns))
        if tokens > self.budget.state:
            return "over_share", (
                f"over_share: the table takes {tokens} tokens, its share is {self.budget.state}",
            )
        return None

    def _result(self, run_id: str, state: _State) -> RelayResult:
        columns = list(self.workload.table.columns) if self.workload.table else []
        store_text = "\n".join(k.text for k in state.lines)
        return RelayResult(
            run_id=run_id,
            steps=state.step + 1,
            total_steps=len(self.workload.chunks),
            lines=tuple(state.lines),
            table=tuple(state.table),
            notes=state.notes,
            dropped=tuple(state.dropped),
            rejections=tuple(state.rejections),
            records=tuple(state.records),
            carry=render_carry(store_text, render_table(state.table, columns), state.notes),
            unrecognised_chunks=sum(1 for r in state.records if r.recognised == 0),
        )
