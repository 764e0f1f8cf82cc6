"""A relay job as a file: ``ctxwise relay run SPEC`` reads one of these (TOML or JSON).

::

    workload = "log"            # a workload folder, relative to the spec file
    runs = "runs"               # where runs go (default: .ctxwise/relay in the current folder)
    run_id = "log-1"            # default: the spec file's name
    carry_tokens = 24000
    drop_policy = "lowest-score"   # or "oldest"
    retries = 1
    counter = "char"            # char, word or tiktoken

    [shares]
    lines = 0.7                 # the verbatim line store
    state = 0.3                 # the table and the notes

    [scorer]                    # which lines to keep
    kind = "examples"           # the offline default; or "python" with object = "pkg.mod:name"
    threshold = 0.0             # default: 0 with skip examples, 0.5 without
    ngram = 2

    [step]                      # one fresh call per chunk
    kind = "parser"             # parser | faulty-parser | none | python | anthropic | openai
    # faulty-parser: rate = 0.25, seed = 0, persistent = false
    # python: object = "pkg.mod:name" (a Step, or a class to call with no arguments)
    # anthropic / openai: model = "...", max_tokens = 4096

Every key is checked: an unknown key or a bad value is a :class:`RelayError`
naming it, before anything runs.
"""

from __future__ import annotations

import importlib
import json
import tomllib
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from ctxwise._io import parse_json, read_user_file
from ctxwise._schema import describe, field_path
from ctxwise.errors import RelayError
from ctxwise.relay.carry import Shares
from ctxwise.relay.lines import DropPolicy, ExampleScorer, LineScorer
from ctxwise.relay.run import DEFAULT_CARRY_TOKENS, Relay
from ctxwise.relay.step import FaultyStep, LLMStep, Step, keep_state
from ctxwise.relay.workload import HandoverParser, Workload, load_workload
from ctxwise.tokens import get_counter

__all__ = ["DEFAULT_RUNS", "RelaySpec", "build_relay", "load_spec"]

DEFAULT_RUNS = ".ctxwise/relay"
"""Where runs are kept when a spec does not say: in the current folder."""


def _numeric(annotation: Any) -> bool:
    """Whether a field holds a number (``int``, ``float``, or one of them or None)."""
    kinds = set(get_args(annotation)) or {annotation}
    return bool(kinds & {int, float}) and bool not in kinds


class _Model(BaseModel):
    # strict: a value of the wrong type is refused, never converted ("3000" is not
    # a number, 1.0 is not a whole number, "yes" is not a bool)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # true/false is an int to Python (and to pydantic's lax mode), so
        # carry_tokens = true would be taken as 1; a number field wants a number.
        if (
            isinstance(value, bool)
            and info.field_name is not None
            and _numeric(cls.model_fields[info.field_name].annotation)
        ):
            raise ValueError(f"must be a number, not {str(value).lower()}")
        return value


class SharesSpec(_Model):
    """``[shares]``: fractions of the carry's cap."""

    lines: float = 0.7
    state: float = 0.3


class ScorerSpec(_Model):
    """``[scorer]``: the line scorer."""

    kind: Literal["examples", "python"] = "examples"
    threshold: float | None = None
    ngram: int = Field(default=2, ge=1, le=4)
    object: str | None = None


class StepSpec(_Model):
    """``[step]``: what runs once per chunk."""

    kind: Literal["parser", "faulty-parser", "none", "python", "anthropic", "openai"] = "parser"
    rate: float = Field(default=0.25, ge=0, le=1)
    seed: int = 0
    persistent: bool = False
    object: str | None = None
    model: str | None = None
    max_tokens: int = Field(default=4096, ge=1)


class RelaySpec(_Model):
    """A relay job: the workload, where runs go, and the settings of :class:`Relay`."""

    workload: str
    runs: str | None = None
    run_id: str | None = None
    carry_tokens: int = Field(default=DEFAULT_CARRY_TOKENS, ge=1)
    drop_policy: DropPolicy = "lowest-score"
    retries: int = Field(default=1, ge=0, le=10)
    counter: str = "char"
    shares: SharesSpec = SharesSpec()
    scorer: ScorerSpec = ScorerSpec()
    step: StepSpec = StepSpec()


def _detail(exc: ValidationError) -> str:
    """The first problem, naming an unknown key as ``unknown key 'step.bogus'``."""
    first = exc.errors(include_url=False)[0]
    if first["type"] == "extra_forbidden":
        return f"unknown key {field_path(first['loc'])!r}"
    return describe(exc)


def load_spec(path: str | Path) -> RelaySpec:
    """Read a spec file (``.json``, or TOML otherwise); relative paths in it are
    made absolute against its folder.

    Raises:
        RelayError: (``"spec"``) the file cannot be read, does not parse, has an
            unknown key or a bad value.
    """
    p = Path(path)
    blob = read_user_file(
        p, "a relay spec", lambda where, detail: RelayError("spec", detail, path=where)
    )
    try:
        raw = blob.decode("utf-8")
    except UnicodeDecodeError:
        raise RelayError("spec", "not UTF-8 text", path=str(p)) from None
    try:
        data: Any = parse_json(raw) if p.suffix == ".json" else tomllib.loads(raw)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RelayError("spec", f"does not parse ({exc})", path=str(p)) from None
    except RecursionError:
        raise RelayError("spec", "does not parse (nested too deeply)", path=str(p)) from None
    if not isinstance(data, dict):
        raise RelayError("spec", "the spec is not a table of keys", path=str(p))
    try:
        spec = RelaySpec.model_validate(data)
    except ValidationError as exc:
        raise RelayError("spec", _detail(exc), path=str(p)) from None
    base = p.resolve().parent
    runs = (base / spec.runs) if spec.runs is not None else Path(DEFAULT_RUNS)
    return spec.model_copy(
        update={
            "workload": str((base / spec.workload).resolve()),
            "runs": str(runs.resolve()),
            "run_id": spec.run_id if spec.run_id is not None else p.stem,
        }
    )


def _import(target: str | None, what: str) -> Any:
    if not target or ":" not in target:
        raise RelayError("spec", f"{what}.object must be 'package.module:name', not {target!r}")
    module, _, name = target.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise RelayError("spec", f"{what}.object {target!r} cannot be imported ({exc})") from None
    if isinstance(obj, type):
        obj = obj()
    return obj


def _step(spec: StepSpec, workload: Workload) -> Step:
    key = workload.table.key if workload.table else "asset"
    counters = (
        tuple(c for c, col in workload.table.columns.items() if col.counter)
        if workload.table
        else ()
    )
    if spec.kind == "parser":
        return HandoverParser.for_table(workload.table)
    if spec.kind == "none":
        return keep_state
    if spec.kind == "faulty-parser":
        return FaultyStep(
            HandoverParser.for_table(workload.table),
            rate=spec.rate,
            seed=spec.seed,
            key=key,
            counters=counters,
            persistent=spec.persistent,
        )
    if spec.kind == "python":
        step = _import(spec.object, "step")
        if not callable(step):
            raise RelayError("spec", f"step.object {spec.object!r} is not callable")
        return step  # type: ignore[no-any-return]
    if not spec.model:
        raise RelayError("spec", f"step.model is needed for a {spec.kind} step")
    if spec.kind == "anthropic":
        from ctxwise.providers.chat import AnthropicChat

        try:
            import anthropic
        except ImportError:
            from ctxwise.errors import MissingDependencyError

            raise MissingDependencyError("anthropic", "anthropic", "an anthropic step") from None
        return LLMStep(AnthropicChat(anthropic.Anthropic(), spec.model), spec.max_tokens)
    from ctxwise.providers.chat import OpenAIChat

    try:
        import openai
    except ImportError:
        from ctxwise.errors import MissingDependencyError

        raise MissingDependencyError("openai", "openai", "an openai step") from None
    return LLMStep(OpenAIChat(openai.OpenAI(), spec.model), spec.max_tokens)


def _scorer(spec: ScorerSpec, workload: Workload) -> LineScorer:
    if spec.kind == "python":
        scorer = _import(spec.object, "scorer")
        if not isinstance(scorer, LineScorer):
            raise RelayError("spec", f"scorer.object {spec.object!r} has no score() and threshold")
        return scorer
    return ExampleScorer(
        workload.examples.keep,
        workload.examples.skip,
        instruction=workload.instruction,
        threshold=spec.threshold,
        ngram=spec.ngram,
    )


def build_relay(spec: RelaySpec, *, workload: Workload | None = None) -> Relay:
    """The :class:`Relay` a spec describes (its workload loaded from disk unless given).

    Raises:
        RelayError: the workload folder is in the wrong shape, or a setting is bad.
    """
    job = workload if workload is not None else load_workload(spec.workload)
    try:
        counter = get_counter(spec.counter)
    except Exception as exc:  # a UsageError naming the counters
        raise RelayError("spec", f"counter: {exc}") from None
    return Relay(
        job,
        _step(spec.step, job),
        runs=spec.runs or DEFAULT_RUNS,
        scorer=_scorer(spec.scorer, job),
        carry_tokens=spec.carry_tokens,
        shares=Shares(spec.shares.lines, spec.shares.state),
        drop_policy=spec.drop_policy,
        retries=spec.retries,
        counter=counter,
    )
