"""Synthesis that keeps every claim tied to its source.

:func:`synthesize` merges the :class:`~ctxwise.handoff.report.SubagentReport` of
several subagents into a :class:`Synthesis`:

- **every claim–source pair is kept** (an :class:`Attribution`: the claim as the
  subagent wrote it, the source id, the excerpt, the page). Claims that read the same
  once normalized (case, accents, spacing, a final full stop) are one
  :class:`KeyFinding` with every source behind it. A finding backed by two or more
  distinct sources, none of which hedges it, is *well established*.
- **hedged claims stay hedged**: the claim's words are never rewritten, and a finding
  any of whose sources hedges it is marked hedged and is never well established.
- **conflicts are kept, not resolved**: findings that give one metric (normalized
  as claims are) different values, and the conflicts the subagents reported, become a
  :class:`Contested` holding every value with its source, date and method. When every
  value is dated and no two different values share a date, the difference is
  ``temporal`` (a change over time); otherwise it is ``contradictory``. Dates are
  compared at the precision both give (``2023`` and ``2023-05`` share a date).
- **gaps are merged by topic**, every status kept (a timeout in one report and an
  empty answer in another stay both); a topic covered by findings of another
  report (its subtask, a finding's metric, or a claim holding every word of the
  topic) says so.

:meth:`Synthesis.render_markdown` writes the report: key findings with their source
ids, well established, contested (every value in a table), coverage gaps, and the
sources (id, title, url or document, date); numbers are tables. Everything is
ordered deterministically: the same reports, in any order, give the same synthesis.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ctxwise.errors import SubagentReportError
from ctxwise.handoff.report import GapStatus, Source, SubagentReport
from ctxwise.text import DEFAULT_ANALYZER, STOPWORDS, normalize

__all__ = [
    "Attribution",
    "Contested",
    "ContestedValue",
    "CoverageGap",
    "GapReport",
    "KeyFinding",
    "Synthesis",
    "claim_key",
    "synthesize",
]


def claim_key(text: str) -> str:
    """What two claims (or metric names) must share to be the same: normalized text
    (:func:`ctxwise.text.normalize`) with runs of whitespace as one space and no final
    full stop."""
    return re.sub(r"\s+", " ", normalize(text)).strip().rstrip(".").strip()


def _number(value: float) -> str:
    """A value as written in a report: ``12`` not ``12.0``, no exponent for large ones."""
    text = format(value, ".15g")
    if "e" in text:
        text = format(value, "f").rstrip("0").rstrip(".")
    return text


@dataclass(frozen=True, slots=True)
class Attribution:
    """One claim–source pair as a subagent reported it, with the date and method
    that report gave its source (another report may give the same source others:
    the merged :class:`Source` keeps one)."""

    claim: str
    source_id: str
    excerpt: str
    subtask: str
    relevance: float
    hedged: bool
    page: int | str | None = None
    metric: str | None = None
    value: float | None = None
    unit: str | None = None
    published: str | None = None
    method: str | None = None


@dataclass(frozen=True, slots=True)
class KeyFinding:
    """A claim and every attribution behind it (sorted by source id)."""

    claim: str
    support: tuple[Attribution, ...]
    hedged: bool

    @property
    def source_ids(self) -> tuple[str, ...]:
        """The distinct sources behind the claim, sorted."""
        return tuple(sorted({a.source_id for a in self.support}))

    @property
    def relevance(self) -> float:
        """The highest relevance any report gave it."""
        return max(a.relevance for a in self.support)

    @property
    def well_established(self) -> bool:
        """Two or more distinct sources, and not hedged."""
        return len(self.source_ids) >= 2 and not self.hedged


@dataclass(frozen=True, slots=True)
class ContestedValue:
    """One value of a contested metric, where it came from and how it was produced.

    ``claim`` is the finding that gave it (``None`` when it comes from a conflict a
    subagent reported)."""

    value: float
    unit: str | None
    source_id: str
    published: str | None
    method: str | None
    subtask: str
    claim: str | None = None


@dataclass(frozen=True, slots=True)
class Contested:
    """A metric with different values: every value, and whether the difference is
    ``temporal`` (each differing value from another date) or ``contradictory``.
    ``notes`` hold the subagents' notes and what synthesis observed."""

    metric: str
    values: tuple[ContestedValue, ...]
    kind: Literal["temporal", "contradictory"]
    notes: tuple[str, ...] = ()

    @property
    def source_ids(self) -> tuple[str, ...]:
        """The distinct sources behind the values, sorted."""
        return tuple(sorted({v.source_id for v in self.values}))


@dataclass(frozen=True, slots=True)
class GapReport:
    """One report's gap on a topic."""

    status: GapStatus
    detail: str
    subtask: str
    source_id: str | None = None


@dataclass(frozen=True, slots=True)
class CoverageGap:
    """A topic some report could not cover: every report's gap on it, and the sources
    whose findings in other reports do cover it (``covered_by``)."""

    topic: str
    reports: tuple[GapReport, ...]
    covered_by: tuple[str, ...] = ()

    @property
    def statuses(self) -> tuple[GapStatus, ...]:
        """The distinct statuses reported, sorted."""
        return tuple(sorted({r.status for r in self.reports}))


@dataclass(frozen=True, slots=True)
class Synthesis:
    """What :func:`synthesize` made of the reports."""

    subtasks: tuple[str, ...]
    findings: tuple[KeyFinding, ...]
    contested: tuple[Contested, ...]
    gaps: tuple[CoverageGap, ...]
    sources: tuple[Source, ...]

    @property
    def attributions(self) -> tuple[Attribution, ...]:
        """Every claim–source pair, finding by finding."""
        return tuple(a for f in self.findings for a in f.support)

    @property
    def well_established(self) -> tuple[KeyFinding, ...]:
        """The findings backed by two or more sources, none hedging them."""
        return tuple(f for f in self.findings if f.well_established)

    def source(self, source_id: str) -> Source:
        """The source with this id (``KeyError`` if none)."""
        for s in self.sources:
            if s.id == source_id:
                return s
        raise KeyError(source_id)

    def render_markdown(self, title: str = "Synthesis") -> str:
        """The report as Markdown: key findings, well established, contested, coverage
        gaps and sources, in that order; numbers and sources as tables."""
        return "\n".join(_render(self, title)).rstrip() + "\n"


# -- merging ------------------------------------------------------------------------------


def _parsed(reports: Iterable[SubagentReport | Mapping[str, Any] | str]) -> list[SubagentReport]:
    out = []
    for i, report in enumerate(reports):
        out.append(
            report
            if isinstance(report, SubagentReport)
            else SubagentReport.parse(report, source=f"reports[{i}]")
        )
    return out


def _merge_sources(reports: list[SubagentReport]) -> dict[str, Source]:
    """One source per id; the same id for two locators is refused."""
    found: dict[str, list[Source]] = {}
    for i, report in enumerate(reports):
        for source in report.sources():
            same = found.setdefault(source.id, [])
            if same and same[0].locator != source.locator:
                raise SubagentReportError(
                    [
                        (
                            "source.id",
                            f"{source.id!r} names {same[0].locator!r} and also {source.locator!r}",
                        )
                    ],
                    source=f"reports[{i}]",
                )
            same.append(source)
    merged: dict[str, Source] = {}
    for sid, variants in found.items():

        def pick(field: str, options: list[Source] = variants) -> Any:
            given = sorted({str(v) for s in options if (v := getattr(s, field)) is not None})
            return given[0] if given else None

        first = min(variants, key=lambda s: s.model_dump_json())
        merged[sid] = Source(
            id=sid,
            title=pick("title"),
            url=first.url,
            document=first.document,
            published=pick("published"),
            method=pick("method"),
        )
    return merged


def _findings(reports: list[SubagentReport]) -> tuple[KeyFinding, ...]:
    groups: dict[str, list[Attribution]] = {}
    for report in reports:
        for f in report.findings:
            attribution = Attribution(
                claim=f.claim,
                source_id=f.source.id,
                excerpt=f.evidence_excerpt,
                subtask=report.subtask,
                relevance=f.relevance,
                hedged=f.hedged,
                page=f.source.page,
                metric=f.metric,
                value=f.value,
                unit=f.unit,
                published=f.source.published,
                method=f.source.method,
            )
            group = groups.setdefault(claim_key(f.claim), [])
            if attribution not in group:
                group.append(attribution)
    found = []
    for group in groups.values():
        support = tuple(sorted(group, key=lambda a: (a.source_id, repr(a))))
        found.append(
            KeyFinding(min(a.claim for a in support), support, any(a.hedged for a in support))
        )
    found.sort(key=lambda f: (-len(f.source_ids), -f.relevance, claim_key(f.claim), f.claim))
    return tuple(found)


def _same_period(a: str, b: str) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _contested(reports: list[SubagentReport]) -> tuple[Contested, ...]:
    values: dict[str, list[ContestedValue]] = {}
    names: dict[str, set[str]] = {}
    notes: dict[str, list[str]] = {}
    reported: set[str] = set()
    for report in reports:
        for f in report.findings:
            if f.metric is None or f.value is None:
                continue
            key = claim_key(f.metric)
            names.setdefault(key, set()).add(f.metric)
            src = f.source
            values.setdefault(key, []).append(
                ContestedValue(
                    f.value, f.unit, src.id, src.published, src.method, report.subtask, f.claim
                )
            )
        for c in report.conflicts:
            key = claim_key(c.metric)
            reported.add(key)
            names.setdefault(key, set()).add(c.metric)
            if c.note:
                notes.setdefault(key, []).append(c.note)
            for v in c.values:
                values.setdefault(key, []).append(
                    ContestedValue(
                        v.value, v.unit, v.source.id, v.published, v.method, report.subtask
                    )
                )
    out = []
    for key, found in values.items():
        distinct = {(v.value, claim_key(v.unit or "")) for v in found}
        if len(distinct) < 2 and key not in reported:
            continue
        # one entry per value, source and date: the same figure repeated is one row
        # (the first by subtask and claim, so the order of the reports does not matter)
        unique: dict[tuple[Any, ...], ContestedValue] = {}
        for entry in sorted(found, key=lambda v: (v.subtask, v.claim or "")):
            unique.setdefault(
                (entry.value, entry.unit, entry.source_id, entry.published, entry.method), entry
            )
        rows = sorted(
            unique.values(),
            key=lambda v: (v.published or "", v.value, v.unit or "", v.source_id, v.method or ""),
        )
        kind, observed = _classify(rows)
        out.append(
            Contested(
                min(names[key]),
                tuple(rows),
                kind,
                tuple(sorted(set(notes.get(key, [])))) + observed,
            )
        )
    out.sort(key=lambda c: claim_key(c.metric))
    return tuple(out)


def _classify(
    rows: list[ContestedValue],
) -> tuple[Literal["temporal", "contradictory"], tuple[str, ...]]:
    """``temporal`` when every value is dated and no two different values share a date."""
    observed: list[str] = []
    units = sorted({v.unit or "no unit" for v in rows})
    if len(units) > 1:
        observed.append(f"values in different units ({', '.join(units)}): compare with care")
    undated = sorted({v.source_id for v in rows if v.published is None})
    clashes = sorted(
        {
            f"{a.source_id} and {b.source_id} ({a.published})"
            for i, a in enumerate(rows)
            for b in rows[i + 1 :]
            if a.published is not None
            and b.published is not None
            and (a.value, a.unit) != (b.value, b.unit)
            and _same_period(a.published, b.published)
        }
    )
    if undated:
        observed.append(f"undated: {', '.join(undated)}, so the difference cannot be dated")
    if clashes:
        observed.append(f"different values for the same date: {'; '.join(clashes)}")
    if undated or clashes:
        return "contradictory", tuple(observed)
    dates = sorted({str(v.published) for v in rows})
    observed.append(
        f"values from different dates ({', '.join(dates)}): a change over time, not a contradiction"
    )
    return "temporal", tuple(observed)


def _topic_words(text: str) -> set[str]:
    return {w for w in DEFAULT_ANALYZER.words(text) if w not in STOPWORDS}


def _gaps(reports: list[SubagentReport]) -> tuple[CoverageGap, ...]:
    topics: dict[str, list[tuple[str, GapReport]]] = {}
    for report in reports:
        for g in report.gaps:
            entry = GapReport(
                g.status, g.detail, report.subtask, None if g.source is None else g.source.id
            )
            group = topics.setdefault(claim_key(g.topic), [])
            if (g.topic, entry) not in group:
                group.append((g.topic, entry))
    out = []
    for key, group in topics.items():
        wanted = _topic_words(key)
        covered: set[str] = set()
        for report in reports:
            subtask_match = claim_key(report.subtask) == key
            for f in report.findings:
                metric_match = f.metric is not None and claim_key(f.metric) == key
                words_match = bool(wanted) and wanted <= _topic_words(f.claim)
                if subtask_match or metric_match or words_match:
                    covered.add(f.source.id)
        entries = tuple(
            sorted(
                (e for _, e in group),
                key=lambda e: (e.status, e.subtask, e.source_id or "", e.detail),
            )
        )
        out.append(CoverageGap(min(t for t, _ in group), entries, tuple(sorted(covered))))
    out.sort(key=lambda g: claim_key(g.topic))
    return tuple(out)


def synthesize(reports: Iterable[SubagentReport | Mapping[str, Any] | str]) -> Synthesis:
    """Merge subagent reports (models, or what :meth:`SubagentReport.parse` reads) into
    one :class:`Synthesis`, keeping every claim–source pair, every conflicting value
    and every gap.

    Raises:
        SubagentReportError: a report does not parse (``source`` is ``reports[i]``),
            or one source id names two different sources.
    """
    parsed = _parsed(reports)
    sources = _merge_sources(parsed)
    return Synthesis(
        subtasks=tuple(sorted({r.subtask for r in parsed})),
        findings=_findings(parsed),
        contested=_contested(parsed),
        gaps=_gaps(parsed),
        sources=tuple(sources[k] for k in sorted(sources)),
    )


# -- rendering ----------------------------------------------------------------------------


def _cell(value: object) -> str:
    if value is None:
        return ""
    text = _number(value) if isinstance(value, float) else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def _table(header: tuple[str, ...], rows: Iterable[tuple[object, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _ids(ids: Iterable[str]) -> str:
    return "[" + ", ".join(ids) + "]"


def _render(syn: Synthesis, title: str) -> list[str]:
    out = [f"# {title}", ""]
    if syn.subtasks:
        out += ["Subtasks: " + "; ".join(syn.subtasks), ""]

    out += ["## Key findings", ""]
    if syn.findings:
        for i, f in enumerate(syn.findings, 1):
            hedge = " _(hedged)_" if f.hedged else ""
            out.append(f"{i}. {_cell(f.claim)} {_ids(f.source_ids)}{hedge}")
        numbers = [a for a in syn.attributions if a.metric is not None and a.value is not None]
        if numbers:
            rows = sorted(
                (
                    (
                        a.metric,
                        a.value,
                        a.unit,
                        a.source_id,
                        a.published,
                        a.method,
                    )
                    for a in numbers
                ),
                key=lambda r: (claim_key(str(r[0])), r[1], str(r[2] or ""), r[3]),
            )
            out += ["", *_table(("metric", "value", "unit", "source", "date", "method"), rows)]
    else:
        out.append("_No findings._")
    out.append("")

    out += ["## Well established", ""]
    established = syn.well_established
    if established:
        for f in established:
            n = len(f.source_ids)
            out.append(f"- {_cell(f.claim)} {_ids(f.source_ids)} ({n} sources)")
    else:
        out.append("_No claim is backed by two or more sources without a hedge._")
    out.append("")

    out += ["## Contested", ""]
    if syn.contested:
        for c in syn.contested:
            out += [f"### {_cell(c.metric)} ({c.kind})", ""]
            out += _table(
                ("value", "unit", "source", "date", "method"),
                ((v.value, v.unit, v.source_id, v.published, v.method) for v in c.values),
            )
            out += [""] + [f"- {_cell(n)}" for n in c.notes]
            out.append("")
    else:
        out += ["_No metric has conflicting values._", ""]

    out += ["## Coverage gaps", ""]
    if syn.gaps:
        gap_rows = [
            (
                g.topic,
                r.status,
                r.detail,
                r.subtask,
                r.source_id,
                ", ".join(g.covered_by) or "not covered",
            )
            for g in syn.gaps
            for r in g.reports
        ]
        out += _table(("topic", "status", "detail", "subtask", "source", "covered by"), gap_rows)
    else:
        out.append("_No gaps reported._")
    out.append("")

    out += ["## Sources", ""]
    out += _table(
        ("id", "title", "url", "date", "method"),
        ((s.id, s.title, s.locator, _dates(syn, s), s.method) for s in syn.sources),
    )
    return out


def _dates(syn: Synthesis, source: Source) -> str | None:
    """Every date the reports gave ``source`` (two reports may cite two versions of
    one page), earliest first."""
    given = {a.published for a in syn.attributions if a.source_id == source.id}
    given.add(source.published)
    dates = sorted(d for d in given if d is not None)
    return ", ".join(dates) if dates else None
