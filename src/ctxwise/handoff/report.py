"""What a subagent hands back: findings tied to their sources, gaps, conflicts.

A subagent answers one subtask with a :class:`SubagentReport`:

- :class:`Finding`: a claim, the verbatim excerpt that supports it, the
  :class:`Source` it came from (a url or a document, a page, the date it was
  published, the method behind it) and how relevant it is to the subtask. A finding
  that states a number also names the ``metric``, the ``value`` and its ``unit``,
  so that :mod:`ctxwise.provenance` can compare numbers across reports.
- :class:`Gap`: a topic the subagent could not cover, and why: ``unavailable``
  (the source failed or refused), ``timeout`` (it did not answer in time) or
  ``empty`` (it answered, with nothing on the topic). A failed source is never
  reported as empty (see :class:`Gap`).
- :class:`Conflict`: one metric given different values by different sources, with
  every value, its source, date and method; the subagent reports both instead of
  picking one.

The models are pydantic, frozen, and refuse unknown keys. :func:`report_json_schema`
exports the JSON Schema a subagent is asked to follow (:func:`report_prompt`
embeds it in a prompt fragment), and :meth:`SubagentReport.parse` reads what the
model returned (a JSON object, alone or in a ```` ```json ```` fence) and raises
:class:`~ctxwise.errors.SubagentReportError` naming the field path and what is
wrong with it.

Large outputs travel by reference: :func:`store_output` keeps a long text, a list of
JSON values or a whole report in a memory :class:`~ctxwise.memory.store.Store` and
gives back an :class:`OutputRef` (its content-hash id, a summary of what it holds,
its tokens and item count) small enough to put in a report's ``outputs``;
:func:`load_output` reads it back and checks it against its id.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ctxwise.errors import StoreError, SubagentReportError, UsageError
from ctxwise.handoff._report_parse import decode, json_type, problems
from ctxwise.memory.store import NewItem, Store, check_namespace
from ctxwise.text import normalize, words
from ctxwise.tokens import CharCounter, TokenCounter

__all__ = [
    "FAILURE_WORDS",
    "HEDGE_WORDS",
    "OUTPUT_NAMESPACE",
    "REPORT_PROMPT",
    "Conflict",
    "ConflictValue",
    "Finding",
    "Gap",
    "GapStatus",
    "OutputRef",
    "Source",
    "SubagentReport",
    "SubagentReportError",
    "is_hedged",
    "load_output",
    "report_json_schema",
    "report_prompt",
    "source_id",
    "store_output",
]

GapStatus = Literal["unavailable", "empty", "timeout"]
"""Why a topic has no findings: the source failed, it did not answer in time, or it
answered with nothing on the topic."""

_HEDGE_TEXT = """may might could suggest suggests suggested suggesting appear appears appeared
    apparently likely unlikely possibly possible perhaps probably about around
    approximately roughly nearly estimated estimate estimates reportedly indicates
    indicate preliminary unclear uncertain unconfirmed"""
HEDGE_WORDS = frozenset(_HEDGE_TEXT.split())
"""Words that hedge a claim. A finding whose ``hedged`` is not given is hedged when its
claim contains one of them (:func:`is_hedged`)."""

_APPROXIMATIONS = frozenset({"about", "around", "approximately", "roughly", "nearly"})
_QUANTITY = (
    r"(?:[$€£¥~≈]\s?)?\d|one|two|three|four|five|six|seven|eight|nine|ten|twenty|"
    r"thirty|forty|fifty|hundred|thousand|million|billion|half|a\s+(?:third|quarter|"
    r"half|dozen|hundred|thousand|million|billion|fifth|tenth)"
)
_APPROXIMATE = re.compile(
    r"\b(?:about|around|approximately|roughly|nearly)\s+(?:" + _QUANTITY + r")", re.IGNORECASE
)
_MAY = re.compile(r"\bmay\b", re.IGNORECASE)
_MONTH_MAY = re.compile(r"May\s+(?:\d|the\s+\d)")

FAILURE_WORDS = (
    "error",
    "errors",
    "failed",
    "failure",
    "fails",
    "timeout",
    "timed out",
    "time out",
    "unreachable",
    "unavailable",
    "refused",
    "denied",
    "forbidden",
    "exception",
    "crashed",
    "no response",
    "not respond",
    "did not respond",
)
"""Phrases that describe a failure. A :class:`Gap` whose status is ``empty`` and whose
detail contains one of them as words (or an HTTP status 4xx or 5xx) is
refused: a source that failed did not answer."""

_FAILURE = re.compile(
    r"\b(?:" + "|".join(re.escape(w) for w in FAILURE_WORDS) + r")\b|\bhttp\s*[45]\d\d\b"
)
# ASCII digits only, as the exported schema's pattern reads (\d is ASCII in JSON Schema)
_DATE = re.compile(r"^\d{4}(?:-\d{2}(?:-\d{2})?)?$", re.ASCII)


def source_id(key: str) -> str:
    """The stable id of a source whose url or document name is ``key``: ``s-`` and the
    first ten hex digits of the SHA-256 of ``key`` without surrounding whitespace, a
    fragment or a trailing slash (so ``https://a.org/x/`` and ``https://a.org/x#p2``
    are one source)."""
    text = key.strip().split("#", 1)[0].rstrip("/")
    return "s-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]


def is_hedged(claim: str) -> bool:
    """Whether ``claim`` contains a word of :data:`HEDGE_WORDS`. Two kinds are read
    in context: an approximation (``about``, ``around``, ``roughly``, ...) hedges only
    before a quantity ("about 40 firms", not "a report about revenue"), and ``May``
    inside a sentence before a day or a year is the month ("in May 2024")."""
    for w in words(claim):
        if w in HEDGE_WORDS and w not in _APPROXIMATIONS and w != "may":
            return True
    if _APPROXIMATE.search(claim):
        return True
    return any(
        not _MONTH_MAY.match(claim, m.start()) or _sentence_start(claim, m.start())
        for m in _MAY.finditer(claim)
    )


def _sentence_start(text: str, at: int) -> bool:
    before = text[:at].rstrip()
    return not before or before[-1] in ".!?:;\n"


def _text(value: str, what: str = "text") -> str:
    """A non-blank string, without surrounding whitespace."""
    stripped = value.strip()
    if not stripped:
        raise ValueError(f"empty {what}")
    return stripped


def _published(value: str | None) -> str | None:
    """A date as ``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD`` (a real one), or ``None``."""
    if value is None:
        return None
    text = value.strip()
    if not _DATE.match(text):
        raise ValueError(f"{value!r} is not a date as YYYY, YYYY-MM or YYYY-MM-DD")
    parts = [int(p) for p in text.split("-")]
    try:
        dt.date(parts[0], parts[1] if len(parts) > 1 else 1, parts[2] if len(parts) > 2 else 1)
    except ValueError as e:
        raise ValueError(f"{value!r} is not a real date ({e})") from None
    return text


def _not_bool(value: Any) -> Any:
    """``value`` unless it is a boolean: pydantic reads ``true`` as 1 where a number
    is due, which the exported schema (``"type": "number"``) refuses."""
    if isinstance(value, bool):
        raise ValueError(f"should be a number, not a boolean ({json.dumps(value)})")
    return value


class _Model(BaseModel):
    """Frozen, unknown keys refused, no NaN or infinity (they are not JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Source(_Model):
    """Where a finding came from: a ``url`` or a ``document`` (at least one), the
    ``page`` within it, when it was ``published`` and the ``method`` behind its figures
    (a survey, a census, a model estimate, an analyst's forecast).

    ``id`` is stable: when not given it is :func:`source_id` of the url (else of the
    document), so the same source gets the same id in every report. ``page`` locates
    the excerpt and is not part of the id.
    """

    id: str = Field(
        default="",
        description="Stable id; leave it out and it is derived from the url or document.",
    )
    title: str | None = Field(default=None, description="The source's title, if known.")
    url: str | None = Field(default=None, description="Where the source can be read.")
    document: str | None = Field(
        default=None, description="A document name or path, for sources without a url."
    )
    page: int | str | None = Field(
        default=None, description="The page (or section) the excerpt is on."
    )
    published: str | None = Field(
        default=None,
        json_schema_extra={"pattern": _DATE.pattern},
        description="When the source was published: YYYY, YYYY-MM or YYYY-MM-DD.",
    )
    method: str | None = Field(
        default=None, description="How its figures were produced (survey, census, estimate)."
    )

    @model_validator(mode="before")
    @classmethod
    def _derive_id(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and not data.get("id"):
            for key in ("url", "document"):
                value = data.get(key)
                if isinstance(value, str) and value.strip():
                    return {**data, "id": source_id(value)}
        return data

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if value and (value != value.strip() or any(c.isspace() for c in value)):
            raise ValueError(f"{value!r}: a source id has no whitespace")
        return value

    @field_validator("title", "url", "document", "method")
    @classmethod
    def _check_text(cls, value: str | None) -> str | None:
        return None if value is None else _text(value)

    @field_validator("published")
    @classmethod
    def _check_published(cls, value: str | None) -> str | None:
        return _published(value)

    @model_validator(mode="after")
    def _needs_a_locator(self) -> Source:
        if self.url is None and self.document is None:
            raise ValueError("needs a url or a document")
        return self

    @property
    def locator(self) -> str:
        """The url, else the document name."""
        return self.url if self.url is not None else str(self.document)


class Finding(_Model):
    """One claim, the verbatim excerpt of the source that supports it, the source and
    how relevant it is to the subtask (from 0 to 1).

    A claim that states a number also gives the ``metric`` it measures, the
    ``value`` (a number) and its ``unit``: a value needs a metric, and a metric a value.

    ``hedged`` says the claim is uncertain (the source says "may", "suggests",
    "about"). When the subagent leaves it out it is detected from the claim's words
    (:func:`is_hedged`); when it is given, it wins. A hedged claim keeps its wording
    through synthesis and is never listed as well established.
    """

    claim: str = Field(description="What the source says, as one sentence; keep its hedges.")
    evidence_excerpt: str = Field(description="The words of the source that support the claim.")
    source: Source
    relevance: float = Field(ge=0.0, le=1.0, description="How relevant to the subtask, 0 to 1.")
    metric: str | None = Field(
        default=None, description="The quantity a numeric claim measures (e.g. 'market growth')."
    )
    value: float | None = Field(default=None, description="The number the claim states.")
    unit: str | None = Field(default=None, description="The value's unit (e.g. '%', 'USD bn').")
    hedged: bool = Field(
        default=False, description="True when the source hedges the claim; detected if left out."
    )

    @model_validator(mode="before")
    @classmethod
    def _detect_hedge(cls, data: Any) -> Any:
        if (
            isinstance(data, Mapping)
            and "hedged" not in data
            and isinstance(data.get("claim"), str)
        ):
            return {**data, "hedged": is_hedged(data["claim"])}
        return data

    @field_validator("relevance", "value", mode="before")
    @classmethod
    def _check_number(cls, value: Any) -> Any:
        return _not_bool(value)

    @field_validator("claim", "evidence_excerpt")
    @classmethod
    def _check_text(cls, value: str) -> str:
        return _text(value)

    @field_validator("metric", "unit")
    @classmethod
    def _check_optional(cls, value: str | None) -> str | None:
        return None if value is None else _text(value)

    @model_validator(mode="after")
    def _metric_and_value(self) -> Finding:
        if self.value is not None and self.metric is None:
            raise ValueError("a value needs a metric: name what the number measures")
        if self.metric is not None and self.value is None:
            raise ValueError("a metric needs a value: give the number (its unit in 'unit')")
        if self.unit is not None and self.value is None:
            raise ValueError("a unit needs a value")
        return self


class Gap(_Model):
    """A topic the subagent could not cover: ``status`` says why and ``detail`` how.

    ``unavailable``: the source failed or refused (an error, a 5xx, access denied);
    ``timeout``: it did not answer in time; ``empty``: it answered, and held nothing
    on the topic. A failed source is never reported as empty: a gap with status
    ``empty`` whose detail describes a failure (a phrase of :data:`FAILURE_WORDS`:
    "error", "timed out", "unreachable", ...) is refused with a pointer to the right
    status, because an empty answer says the topic has nothing and a failure says
    nothing about the topic.
    """

    topic: str = Field(description="What could not be covered.")
    status: GapStatus = Field(
        description="unavailable (the source failed), timeout, or empty (it answered, with "
        "nothing on the topic). Never 'empty' for a source that failed."
    )
    detail: str = Field(default="", description="What happened, e.g. the error message.")
    source: Source | None = Field(default=None, description="The source that failed, if one did.")

    @field_validator("topic")
    @classmethod
    def _check_topic(cls, value: str) -> str:
        return _text(value, "topic")

    @field_validator("detail")
    @classmethod
    def _failed_is_not_empty(cls, value: str, info: Any) -> str:
        detail = value.strip()
        if info.data.get("status") == "empty":
            found = _FAILURE.search(normalize(detail))
            if found is not None:
                hit = found.group(0)
                fix = "timeout" if "time" in hit else "unavailable"
                raise ValueError(
                    f"a failed source is never reported as empty: the detail says {hit!r}; "
                    f"use status {fix!r}"
                )
        return detail


class ConflictValue(_Model):
    """One of a conflict's values, with its source and, when they are not given here,
    the source's date and method."""

    value: float
    unit: str | None = None
    source: Source
    published: str | None = Field(default=None, json_schema_extra={"pattern": _DATE.pattern})
    method: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_source(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        src = data.get("source")
        given = (
            dict(src)
            if isinstance(src, Mapping)
            else src.model_dump()
            if isinstance(src, Source)
            else {}
        )
        filled = dict(data)
        for key in ("published", "method"):
            if filled.get(key) is None and given.get(key) is not None:
                filled[key] = given[key]
        return filled

    @field_validator("value", mode="before")
    @classmethod
    def _check_number(cls, value: Any) -> Any:
        return _not_bool(value)

    @field_validator("published")
    @classmethod
    def _check_published(cls, value: str | None) -> str | None:
        return _published(value)

    @field_validator("unit", "method")
    @classmethod
    def _check_optional(cls, value: str | None) -> str | None:
        return None if value is None else _text(value)


class Conflict(_Model):
    """One metric given different values by different sources; every value is kept.
    It holds at least two different values (a value and its unit): the same figure
    from two sources is an agreement, not a conflict."""

    metric: str
    values: tuple[ConflictValue, ...] = Field(min_length=2)
    note: str = Field(default="", description="What may explain the difference.")

    @field_validator("metric")
    @classmethod
    def _check_metric(cls, value: str) -> str:
        return _text(value, "metric")

    @model_validator(mode="after")
    def _two_different_values(self) -> Conflict:
        if len({(v.value, normalize(v.unit or "")) for v in self.values}) < 2:
            raise ValueError(
                "every value is the same: a conflict holds two or more different values "
                "(sources that agree are findings, one per source)"
            )
        return self


class OutputRef(_Model):
    """A large output kept in a store, passed on by reference: its ``id`` (a content
    hash), a ``summary`` of what it holds, its ``tokens`` and ``items`` (lines of a
    text, values of a list, findings of a report) and its ``kind``."""

    id: str = Field(pattern=r"^o-[0-9a-f]{16}$")
    summary: str
    tokens: int = Field(ge=0)
    items: int = Field(ge=0)
    kind: Literal["text", "items", "report"] = "text"

    @field_validator("tokens", "items", mode="before")
    @classmethod
    def _check_number(cls, value: Any) -> Any:
        return _not_bool(value)


class SubagentReport(_Model):
    """A subagent's answer to one subtask: findings, gaps and conflicts, and references
    to large outputs it stored. It holds at least one finding or one gap: a subtask
    that found nothing reports a gap."""

    subtask: str = Field(description="The subtask this report answers.")
    findings: tuple[Finding, ...] = ()
    gaps: tuple[Gap, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    outputs: tuple[OutputRef, ...] = Field(
        default=(), description="References to large outputs stored instead of pasted."
    )

    @field_validator("subtask")
    @classmethod
    def _check_subtask(cls, value: str) -> str:
        return _text(value, "subtask")

    @model_validator(mode="after")
    def _holds_something(self) -> SubagentReport:
        if not self.findings and not self.gaps:
            raise ValueError(
                "no findings and no gaps: a subtask that found nothing reports a gap "
                "(status 'empty', 'unavailable' or 'timeout')"
            )
        seen: dict[str, str] = {}
        for source in self.sources():
            other = seen.setdefault(source.id, source.locator)
            if other != source.locator:
                raise ValueError(
                    f"source id {source.id!r} names two sources ({other!r} and {source.locator!r})"
                )
        return self

    def sources(self) -> list[Source]:
        """Every source the report cites (findings, gaps, conflicts), in order."""
        found = [f.source for f in self.findings]
        found += [g.source for g in self.gaps if g.source is not None]
        found += [v.source for c in self.conflicts for v in c.values]
        return found

    @classmethod
    def parse(
        cls, data: str | bytes | Mapping[str, Any] | SubagentReport, *, source: str | None = None
    ) -> SubagentReport:
        """The report in ``data``: a mapping, or the text a model returned (a JSON
        object, alone, inside a ```` ```json ```` fence, or amid prose).

        Raises:
            SubagentReportError: the text holds no JSON object, or the object does
                not validate; ``problems`` names each field path and what is wrong,
                ``source`` is passed through.
        """
        if isinstance(data, SubagentReport):
            return data
        obj = decode(data, source) if isinstance(data, str | bytes) else data
        if not isinstance(obj, Mapping):
            raise SubagentReportError(
                [("(top level)", f"expected a JSON object, got {json_type(obj)}")], source=source
            )
        try:
            return cls.model_validate(dict(obj))
        except ValidationError as e:
            raise SubagentReportError(problems(e, SubagentReport), source=source) from None


# -- the schema and the prompt ------------------------------------------------------------


def report_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a :class:`SubagentReport`, as a new dict."""
    schema = SubagentReport.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def report_prompt(subtask: str | None = None) -> str:
    """The instructions that ask a subagent for a :class:`SubagentReport`, with the
    schema; ``subtask`` is named in them when given."""
    schema = json.dumps(report_json_schema(), sort_keys=True, separators=(",", ":"))
    task = f"Your subtask: {subtask.strip()}\n\n" if subtask else ""
    return (
        f"{task}When you are done, reply with one JSON object in a ```json fenced block, "
        "matching the JSON Schema below, and nothing else after it.\n"
        "- findings: one per claim. Quote the words that support it in evidence_excerpt, "
        "verbatim. Give its source: a url or a document, the page, the date it was "
        "published (YYYY, YYYY-MM or YYYY-MM-DD) and the method behind its figures. "
        "relevance is 0 to 1.\n"
        "- A claim that states a number also gives metric (what it measures), value (the "
        "number alone) and unit.\n"
        "- Keep the source's hedges: if it says 'may', 'suggests' or 'about', so does the "
        "claim, and hedged is true.\n"
        "- conflicts: when sources give different values for one metric, report every "
        "value with its source, date and method. Do not pick one.\n"
        "- gaps: a topic you could not cover. status is 'unavailable' if the source failed "
        "or refused, 'timeout' if it did not answer in time, 'empty' only if it answered "
        "with nothing on the topic. Never report a failed source as empty.\n"
        "- outputs: a large result you stored is referenced by its id and summary, not "
        "pasted.\n"
        "- If you found nothing, report a gap, not an empty list.\n\n"
        f"JSON Schema:\n{schema}\n"
    )


REPORT_PROMPT = report_prompt()
"""The prompt fragment of :func:`report_prompt` without a subtask."""


# -- outputs by reference -----------------------------------------------------------------

OUTPUT_NAMESPACE: tuple[str, ...] = ("ctxwise", "handoff_outputs")
"""Where :func:`store_output` keeps outputs unless told otherwise."""

_SUMMARY_CHARS = 120


def _clip(text: str, limit: int = _SUMMARY_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


def _output_id(kind: str, text: str) -> str:
    return "o-" + hashlib.sha256(f"{kind}\n{text}".encode()).hexdigest()[:16]


def store_output(
    output: str | Sequence[Any] | SubagentReport,
    *,
    store: Store,
    namespace: Sequence[str] = OUTPUT_NAMESPACE,
    summary: str | None = None,
    counter: TokenCounter | None = None,
) -> OutputRef:
    """Keep ``output`` in ``store`` and return a reference to it.

    ``output`` is a text, a sequence of JSON values or a :class:`SubagentReport`. The
    id is a hash of its content, so storing the same output twice gives the same
    reference and one stored item. ``summary`` says what it holds; when not given it
    is made from its size and its start. ``tokens`` are counted with ``counter``
    (:class:`~ctxwise.tokens.CharCounter` by default).

    Raises:
        UsageError: the output is empty, too large for the store, or not JSON.
    """
    ns = check_namespace(namespace)
    tc = counter if counter is not None else CharCounter()
    kind: Literal["text", "items", "report"]
    if isinstance(output, SubagentReport):
        kind, text = "report", output.model_dump_json()
        items = len(output.findings)
        auto = (
            f"report on {_clip(output.subtask, 60)!r}: {len(output.findings)} findings, "
            f"{len(output.gaps)} gaps, {len(output.conflicts)} conflicts"
        )
    elif isinstance(output, str):
        if not output.strip():
            raise UsageError("empty output: there is nothing to store")
        kind, text = "text", output
        lines = output.splitlines()
        items = len(lines)
        auto = f"text, {items} lines: {_clip(output)}"
    elif isinstance(output, Sequence) and not isinstance(output, bytes | bytearray):
        values = list(output)
        if not values:
            raise UsageError("empty output: there is nothing to store")
        try:
            text = json.dumps(values, ensure_ascii=False, sort_keys=True, allow_nan=False)
            first = json.dumps(values[0], ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError) as e:
            raise UsageError(f"an output list must hold JSON values: {e}") from None
        kind, items = "items", len(values)
        auto = f"{items} items, the first: {_clip(first)}"
    else:
        raise UsageError(
            f"cannot store a {type(output).__name__}: give a text, a list of JSON values "
            "or a SubagentReport"
        )
    if summary is not None and (not isinstance(summary, str) or not summary.strip()):
        raise UsageError(f"a summary says what the output holds, not {summary!r}")
    ref = OutputRef(
        id=_output_id(kind, text),
        summary=summary.strip() if summary is not None else auto,
        tokens=tc.count(text),
        items=items,
        kind=kind,
    )
    if store.get(ns, ref.id) is None:
        store.put(ns, NewItem(text, {"kind": "handoff_output", "output_kind": kind}, id=ref.id))
    return ref


def load_output(
    ref: OutputRef, *, store: Store, namespace: Sequence[str] = OUTPUT_NAMESPACE
) -> str | list[Any] | SubagentReport:
    """The output ``ref`` points to, as it was stored (a text, a list, a report).

    Raises:
        UsageError: nothing is stored under ``ref.id`` in ``namespace``.
        StoreError: what is stored there does not match the reference's hash.
        SubagentReportError: a stored report no longer validates (it was stored
            by a version that checked less).
    """
    ns = check_namespace(namespace)
    item = store.get(ns, ref.id)
    if item is None:
        raise UsageError(f"output {ref.id} is not stored in {'/'.join(ns)!r}")
    if _output_id(ref.kind, item.text) != ref.id:
        raise StoreError(f"output {ref.id} in {'/'.join(ns)!r} does not match its content hash")
    if ref.kind == "report":
        try:
            return SubagentReport.model_validate_json(item.text)
        except ValidationError as e:  # stored by a version that checked less
            raise SubagentReportError(
                problems(e, SubagentReport), source=f"output {ref.id}"
            ) from None
    if ref.kind == "items":
        values: list[Any] = json.loads(item.text)
        return values
    return item.text
