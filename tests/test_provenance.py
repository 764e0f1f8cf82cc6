"""Synthesis keeps every claim tied to its source, keeps conflicts, dates and gaps."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise.errors import SubagentReportError
from ctxwise.handoff.report import Finding, Source, SubagentReport
from ctxwise.provenance import claim_key, synthesize

A = {"url": "https://stats.example/growth", "title": "National statistics"}
B = {"document": "analyst-briefing.pdf", "title": "Analyst briefing"}


def _finding(claim: str, source: dict[str, Any], **over: Any) -> dict[str, Any]:
    return {
        "claim": claim,
        "evidence_excerpt": f"excerpt for {claim}",
        "source": source,
        "relevance": 0.8,
        **over,
    }


def _growth(value: float, source: dict[str, Any], published: str, method: str) -> dict[str, Any]:
    return _finding(
        f"Market growth was {value:g}%",
        {**source, "published": published, "method": method},
        metric="market growth",
        value=value,
        unit="%",
    )


def test_two_sources_giving_different_growth_keep_both_values_sources_and_dates() -> None:
    one = {"subtask": "official figures", "findings": [_growth(12, A, "2024-03", "census")]}
    two = {"subtask": "analysts", "findings": [_growth(8, B, "2024-03", "survey")]}
    syn = synthesize([one, two])
    (contested,) = syn.contested
    assert contested.kind == "contradictory"
    got = {(v.value, v.source_id, v.published, v.method) for v in contested.values}
    a_id, b_id = Source.model_validate(A).id, Source.model_validate(B).id
    assert got == {(12.0, a_id, "2024-03", "census"), (8.0, b_id, "2024-03", "survey")}
    text = syn.render_markdown()
    contested_part = text.split("## Contested", 1)[1].split("## Coverage gaps", 1)[0]
    assert "### market growth (contradictory)" in contested_part
    assert f"| 12 | % | {a_id} | 2024-03 | census |" in contested_part
    assert f"| 8 | % | {b_id} | 2024-03 | survey |" in contested_part


def test_one_source_cited_at_two_dates_keeps_each_date_with_its_value() -> None:
    # two versions of one page: the merged source keeps one date, but each number
    # stays with the date its report gave it, and the sources list shows both
    one = {"subtask": "2023 figures", "findings": [_growth(12, A, "2023-01", "census")]}
    two = {"subtask": "2024 figures", "findings": [_growth(8, A, "2024-01", "census")]}
    syn = synthesize([one, two])
    a_id = Source.model_validate(A).id
    (contested,) = syn.contested
    assert contested.kind == "temporal"
    assert {(a.value, a.published) for a in syn.attributions} == {
        (12.0, "2023-01"),
        (8.0, "2024-01"),
    }
    text = syn.render_markdown()
    findings = text.split("## Key findings", 1)[1].split("## Well established", 1)[0]
    assert f"| market growth | 12 | % | {a_id} | 2023-01 | census |" in findings
    assert f"| market growth | 8 | % | {a_id} | 2024-01 | census |" in findings
    sources = text.split("## Sources", 1)[1]
    assert "| 2023-01, 2024-01 |" in sources


def test_values_from_different_dates_are_temporal_not_contradictory() -> None:
    one = {"subtask": "s1", "findings": [_growth(12, A, "2024", "census")]}
    two = {"subtask": "s2", "findings": [_growth(8, B, "2022-06", "census")]}
    (contested,) = synthesize([one, two]).contested
    assert contested.kind == "temporal"
    assert [v.published for v in contested.values] == ["2022-06", "2024"]
    assert any("change over time" in n for n in contested.notes)


@pytest.mark.parametrize(
    ("dates", "kind"),
    [
        (("2023", "2023-05"), "contradictory"),  # the same year, at the precision both give
        (("2023-05", None), "contradictory"),  # an undated value cannot be placed
        (("2023-05-01", "2023-06-01"), "temporal"),
    ],
)
def test_dates_are_compared_at_the_precision_both_give(
    dates: tuple[str | None, str | None], kind: str
) -> None:
    reports = []
    for value, src, date in ((12, A, dates[0]), (8, B, dates[1])):
        finding = _growth(value, src, date or "2000", "census")
        if date is None:
            del finding["source"]["published"]
        reports.append({"subtask": f"s{value}", "findings": [finding]})
    assert synthesize(reports).contested[0].kind == kind


def test_the_same_value_twice_is_no_conflict() -> None:
    one = {"subtask": "s1", "findings": [_growth(12, A, "2024", "census")]}
    two = {"subtask": "s2", "findings": [_growth(12, B, "2024", "survey")]}
    assert synthesize([one, two]).contested == ()


def test_a_conflict_a_subagent_reported_is_kept_with_its_note() -> None:
    report = {
        "subtask": "s",
        "findings": [_finding("Growth is disputed", A)],
        "conflicts": [
            {
                "metric": "Market growth",
                "values": [
                    {"value": 12, "unit": "%", "source": {**A, "published": "2024"}},
                    {"value": 8, "unit": "%", "source": B, "published": "2024", "method": "poll"},
                ],
                "note": "the analysts exclude exports",
            }
        ],
    }
    other = {"subtask": "t", "findings": [_growth(10, A, "2023", "census")]}
    (contested,) = synthesize([report, other]).contested
    assert {v.value for v in contested.values} == {12.0, 8.0, 10.0}
    assert "the analysts exclude exports" in contested.notes
    assert contested.kind == "contradictory"


def test_a_timed_out_source_appears_as_a_gap_with_status_timeout() -> None:
    report = {
        "subtask": "EU prices",
        "findings": [_finding("French prices rose", A)],
        "gaps": [
            {
                "topic": "German prices",
                "status": "timeout",
                "detail": "destatis did not answer",
                "source": {"url": "https://destatis.example"},
            }
        ],
    }
    syn = synthesize([report])
    (gap,) = syn.gaps
    assert gap.statuses == ("timeout",) and gap.covered_by == ()
    gaps_part = syn.render_markdown().split("## Coverage gaps", 1)[1].split("## Sources", 1)[0]
    assert "| German prices | timeout | destatis did not answer |" in gaps_part
    assert "not covered" in gaps_part


def test_a_gap_in_one_report_and_findings_in_another_says_both() -> None:
    one = {"subtask": "s1", "gaps": [{"topic": "German prices", "status": "unavailable"}]}
    two = {"subtask": "s2", "findings": [_finding("German prices fell in May", B)]}
    three = {"subtask": "s3", "gaps": [{"topic": "german prices.", "status": "empty"}]}
    (gap,) = synthesize([one, two, three]).gaps
    assert gap.statuses == ("empty", "unavailable")
    assert gap.covered_by == (Source.model_validate(B).id,)


def test_the_same_claim_from_two_sources_is_one_well_established_finding() -> None:
    one = {"subtask": "s1", "findings": [_finding("Exports doubled since 2019.", A)]}
    two = {"subtask": "s2", "findings": [_finding("exports  doubled since 2019", B)]}
    syn = synthesize([one, two])
    (finding,) = syn.findings
    assert len(finding.support) == 2 and finding.well_established
    assert {a.claim for a in finding.support} == {
        "Exports doubled since 2019.",
        "exports  doubled since 2019",
    }
    established = syn.render_markdown().split("## Well established", 1)[1].split("##", 1)[0]
    assert "(2 sources)" in established and Source.model_validate(A).id in established


def test_hedged_claims_stay_hedged() -> None:
    one = {"subtask": "s1", "findings": [_finding("Prices may rise about 3% next year", A)]}
    two = {"subtask": "s2", "findings": [_finding("Prices may rise about 3% next year", B)]}
    syn = synthesize([one, two])
    (finding,) = syn.findings
    assert finding.hedged and not finding.well_established
    text = syn.render_markdown()
    key = text.split("## Key findings", 1)[1].split("## Well established", 1)[0]
    assert "Prices may rise about 3% next year" in key and "_(hedged)_" in key
    assert "Prices may rise" not in text.split("## Well established", 1)[1].split("##", 1)[0]


def test_the_rendered_report_has_every_section_in_order_and_numbers_as_tables() -> None:
    one = {
        "subtask": "official figures",
        "findings": [_growth(12, A, "2024-03", "census"), _finding("Demand is strong", A)],
        "gaps": [{"topic": "Q4", "status": "timeout"}],
    }
    two = {"subtask": "analysts", "findings": [_growth(8, B, "2024-03", "survey")]}
    syn = synthesize([one, two])
    text = syn.render_markdown()
    heads = ["## Key findings", "## Well established", "## Contested", "## Coverage gaps"]
    positions = [text.index(h) for h in [*heads, "## Sources"]]
    assert positions == sorted(positions)
    key = text.split("## Key findings", 1)[1].split("## Well established", 1)[0]
    assert "| metric | value | unit | source | date | method |" in key
    for finding in syn.findings:
        assert f"{finding.claim} [{', '.join(finding.source_ids)}]" in key
    sources = text.split("## Sources", 1)[1]
    assert "| id | title | url | date | method |" in sources
    for s in syn.sources:
        assert f"| {s.id} | {s.title} | {s.locator} |" in sources
    assert "| 12 | % |" in text and "12.0" not in text
    assert text.endswith("\n") and "\n\n\n" not in text


def test_pipes_in_claims_do_not_break_a_table() -> None:
    report = {"subtask": "s", "gaps": [{"topic": "a | b", "status": "empty", "detail": "x\ny"}]}
    gaps_part = synthesize([report]).render_markdown().split("## Coverage gaps", 1)[1]
    assert "| a \\| b | empty | x y |" in gaps_part


def test_synthesis_is_independent_of_report_order() -> None:
    reports = [
        {"subtask": "s1", "findings": [_growth(12, A, "2024", "census"), _finding("X", B)]},
        {"subtask": "s2", "findings": [_growth(8, B, "2023", "survey"), _finding("x.", A)]},
        {"subtask": "s3", "gaps": [{"topic": "Y", "status": "timeout"}]},
    ]
    forward, backward = synthesize(reports), synthesize(list(reversed(reports)))
    assert forward == backward
    assert forward.render_markdown() == backward.render_markdown()


def test_a_malformed_report_is_named_by_its_position() -> None:
    good = {"subtask": "s", "findings": [_finding("X", A)]}
    with pytest.raises(SubagentReportError) as info:
        synthesize([good, '```json\n{"subtask": "t", "findings": [{"claim": "c"}]}\n```'])
    assert info.value.source == "reports[1]"
    assert "findings[0].source" in dict(info.value.problems)


def test_one_source_id_for_two_sources_across_reports_is_refused() -> None:
    one = {"subtask": "s1", "findings": [_finding("X", {"id": "s1", "url": "https://a.org"})]}
    two = {"subtask": "s2", "findings": [_finding("Y", {"id": "s1", "url": "https://b.org"})]}
    with pytest.raises(SubagentReportError, match="names"):
        synthesize([one, two])


# -- the property: no claim–source pair is ever lost ----------------------------------------------

_claims = st.sampled_from(
    ["Exports rose", "exports rose.", "Prices may fall", "Output fell", "Jobs grew", "jobs grew"]
)
_sources = st.sampled_from(
    [{"url": "https://a.org"}, {"url": "https://b.org"}, {"document": "c.pdf", "page": 2}]
)
_findings = st.builds(
    lambda claim, src, rel: Finding.model_validate(_finding(claim, src, relevance=rel)),
    _claims,
    _sources,
    st.floats(0, 1),
)
_reports = st.lists(
    st.builds(
        lambda i, fs: SubagentReport(subtask=f"task {i}", findings=tuple(fs)),
        st.integers(0, 3),
        st.lists(_findings, min_size=1, max_size=5),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=100, deadline=None)
@given(_reports)
def test_synthesis_never_loses_a_claim_source_pair(reports: list[SubagentReport]) -> None:
    syn = synthesize(reports)
    kept = {(a.claim, a.source_id, a.excerpt) for a in syn.attributions}
    given_pairs = {(f.claim, f.source.id, f.evidence_excerpt) for r in reports for f in r.findings}
    assert given_pairs == kept
    assert {s.id for s in syn.sources} == {f.source.id for r in reports for f in r.findings}
    text = syn.render_markdown()
    for finding in syn.findings:
        assert all(claim_key(a.claim) == claim_key(finding.claim) for a in finding.support)
        assert finding.claim in text
        for sid in finding.source_ids:
            assert sid in text


def test_synthesis_is_independent_of_report_order_when_reports_repeat_a_figure() -> None:
    # the same value from the same source in two subtasks is one contested row, and
    # two gaps on one topic of one subtask differ only in detail: both were kept in
    # the order the reports came in
    reports = [
        {
            "subtask": "alpha",
            "findings": [_growth(5, A, "2024", "census")],
            "gaps": [{"topic": "pricing", "status": "timeout", "detail": "after 30 s"}],
        },
        {
            "subtask": "beta",
            "findings": [
                {**_growth(5, A, "2024", "census"), "claim": "Growth reached 5%"},
                _growth(7, B, "2024", "survey"),
            ],
        },
        {
            "subtask": "alpha",
            "gaps": [{"topic": "Pricing", "status": "timeout", "detail": "after 90 s"}],
        },
    ]
    first = synthesize(reports)
    for order in itertools.permutations(reports):
        assert synthesize(order) == first
        assert synthesize(order).render_markdown() == first.render_markdown()
    (contested,) = first.contested
    assert [(v.value, v.subtask) for v in contested.values] == [(5.0, "alpha"), (7.0, "beta")]
    assert [r.detail for r in first.gaps[0].reports] == ["after 30 s", "after 90 s"]
