"""Structured subagent returns: models, parsing with clear errors, schema, prompt, refs."""

from __future__ import annotations

import hashlib
import json
import pickle
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from ctxwise.errors import StoreError, SubagentReportError, UsageError
from ctxwise.handoff.report import (
    REPORT_PROMPT,
    Conflict,
    ConflictValue,
    Finding,
    Gap,
    OutputRef,
    Source,
    SubagentReport,
    is_hedged,
    load_output,
    report_json_schema,
    report_prompt,
    source_id,
    store_output,
)
from ctxwise.memory.store import InMemoryStore, NewItem


def _finding(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "claim": "The market grew 12% in 2023.",
        "evidence_excerpt": "revenue grew 12 percent year on year",
        "source": {"url": "https://stats.example/report", "published": "2024-02"},
        "relevance": 0.9,
    }
    base.update(over)
    return base


def _report(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"subtask": "market size", "findings": [_finding()]}
    base.update(over)
    return base


def _problems(data: object) -> dict[str, str]:
    with pytest.raises(SubagentReportError) as info:
        SubagentReport.parse(data)  # type: ignore[arg-type]
    err = info.value
    assert str(err).startswith("malformed subagent report")
    return dict(err.problems)


# -- parsing --------------------------------------------------------------------------------


def test_parse_a_dict_and_derive_the_source_id() -> None:
    report = SubagentReport.parse(_report())
    finding = report.findings[0]
    assert finding.source.id == source_id("https://stats.example/report")
    assert finding.source.id.startswith("s-") and len(finding.source.id) == 12
    assert finding.hedged is False
    assert report.gaps == () and report.conflicts == ()


def test_source_ids_are_stable_across_spellings_of_one_url() -> None:
    assert source_id("https://a.org/x/") == source_id(" https://a.org/x#page=2 ")
    assert source_id("https://a.org/x") != source_id("https://a.org/y")
    assert Source(document="annual.pdf", page=4).id == Source(document="annual.pdf", page=9).id
    assert Source(id="who-2024", url="https://who.int").id == "who-2024"


def test_parse_json_inside_a_fence_amid_prose() -> None:
    text = (
        "I searched three sources. Here is my report:\n\n```json\n"
        + json.dumps(_report())
        + "\n```\nLet me know if you need more."
    )
    assert SubagentReport.parse(text) == SubagentReport.parse(_report())
    assert SubagentReport.parse(json.dumps(_report()).encode()) == SubagentReport.parse(_report())
    bare_fence = "```\n" + json.dumps(_report()) + "\n```"
    assert SubagentReport.parse(bare_fence).subtask == "market size"
    prose = "Report: " + json.dumps(_report()) + " (end)"
    assert SubagentReport.parse(prose).subtask == "market size"


def test_a_timed_out_source_is_a_gap_with_status_timeout() -> None:
    report = SubagentReport.parse(
        _report(
            gaps=[
                {
                    "topic": "EU prices",
                    "status": "timeout",
                    "detail": "eurostat did not answer in time",
                    "source": {"url": "https://eurostat.example"},
                }
            ]
        )
    )
    (gap,) = report.gaps
    assert gap.status == "timeout"
    assert gap.source is not None and gap.source.id == source_id("https://eurostat.example")


@pytest.mark.parametrize(
    ("detail", "fix"),
    [
        ("connection error", "unavailable"),
        ("request timed out", "timeout"),
        ("host unreachable", "unavailable"),
        ("HTTP 503 from the API", "unavailable"),
        ("Search failed: rate limited", "unavailable"),
    ],
)
def test_a_failed_source_is_never_reported_as_empty(detail: str, fix: str) -> None:
    problems = _problems(_report(gaps=[{"topic": "t", "status": "empty", "detail": detail}]))
    assert "never reported as empty" in problems["gaps[0].detail"]
    assert repr(fix) in problems["gaps[0].detail"]


def test_an_empty_answer_without_a_failure_is_empty() -> None:
    gap = Gap(topic="t", status="empty", detail="the index holds no document on this topic")
    assert gap.status == "empty"
    assert Gap(topic="t", status="unavailable", detail="HTTP 503").status == "unavailable"


@pytest.mark.parametrize(
    ("data", "path", "fragment"),
    [
        ({"findings": [_finding()]}, "subtask", "missing"),
        (_report(subtask="  "), "subtask", "empty subtask"),
        (_report(findings="none"), "findings", "tuple"),
        (_report(findings=[_finding(claim="")]), "findings[0].claim", "empty"),
        (_report(findings=[_finding(evidence_excerpt=None)]), "findings[0].evidence_excerpt", ""),
        (_report(findings=[{**_finding(), "evidence": "x"}]), "findings[0].evidence", "unknown"),
        (_report(findings=[_finding(source={"title": "T"})]), "findings[0].source", "url or a doc"),
        (_report(findings=[_finding(relevance=1.5)]), "findings[0].relevance", "1.5"),
        (_report(findings=[_finding(relevance="high")]), "findings[0].relevance", "'high'"),
        (_report(findings=[_finding(value=12)]), "findings[0]", "needs a metric"),
        (_report(findings=[_finding(metric="growth")]), "findings[0]", "needs a value"),
        (
            _report(findings=[_finding(metric="growth", value="12%")]),
            "findings[0].value",
            "'12%'",
        ),
        (
            _report(findings=[_finding(source={"url": "u", "published": "May 2023"})]),
            "findings[0].source.published",
            "YYYY",
        ),
        (
            _report(findings=[_finding(source={"url": "u", "published": "2023-02-30"})]),
            "findings[0].source.published",
            "real date",
        ),
        (
            _report(findings=[_finding(source={"url": "u", "page": 2.5})]),
            "findings[0].source.page",
            "an integer or a string",
        ),
        (_report(gaps=[{"topic": "t", "status": "gone"}]), "gaps[0].status", "'timeout'"),
        (_report(gaps=[{"status": "empty"}]), "gaps[0].topic", "missing"),
        (
            _report(conflicts=[{"metric": "m", "values": []}]),
            "conflicts[0].values",
            "at least 2",
        ),
        ({"subtask": "s"}, "(top level)", "no findings and no gaps"),
        ({**_report(), "notes": "x"}, "notes", "unknown key"),
        (
            _report(outputs=[{"id": "x", "summary": "s", "tokens": 1, "items": 1}]),
            "outputs[0].id",
            "",
        ),
    ],
)
def test_every_malformed_shape_names_its_field(data: object, path: str, fragment: str) -> None:
    problems = _problems(data)
    assert path in problems, problems
    assert fragment in problems[path]


def test_an_unknown_key_suggests_the_field_meant() -> None:
    problems = _problems(_report(findings=[{**_finding(), "evidnce": "x"}]))
    assert "did you mean 'evidence_excerpt'?" in problems["findings[0].evidnce"]


def test_every_problem_is_reported_at_once() -> None:
    bad = {
        "subtask": "",
        "findings": [_finding(relevance=3), _finding(source={})],
        "gaps": [{"topic": "t", "status": "lost"}],
    }
    problems = _problems(bad)
    assert {"subtask", "findings[0].relevance", "findings[1].source", "gaps[0].status"} <= set(
        problems
    )


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty reply"),
        ("I could not find anything.", "no JSON object"),
        ('{"subtask": "s", ', "not valid JSON"),
        ("```json\n[1, 2]\n```", "got an array"),
        ('"just a string"', "no JSON object"),
        (b"\xff\xfe", "not UTF-8"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),  # was a RecursionError
        ('{"subtask": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ],
)
def test_text_that_is_not_a_report_object(text: str | bytes, fragment: str) -> None:
    problems = _problems(text)
    assert fragment in problems["(top level)"]


def test_the_error_names_its_report_and_pickles() -> None:
    with pytest.raises(SubagentReportError) as info:
        SubagentReport.parse({"subtask": "s"}, source="worker-3")
    err = info.value
    assert isinstance(err, UsageError)
    assert err.source == "worker-3" and str(err).startswith("worker-3: ")
    back = pickle.loads(pickle.dumps(err))
    assert back.problems == err.problems and str(back) == str(err)


def test_one_source_id_for_two_sources_is_refused() -> None:
    problems = _problems(
        _report(
            findings=[
                _finding(source={"id": "s1", "url": "https://a.org"}),
                _finding(source={"id": "s1", "url": "https://b.org"}),
            ]
        )
    )
    assert "names two sources" in problems["(top level)"]


def test_models_are_frozen() -> None:
    report = SubagentReport.parse(_report())
    with pytest.raises(ValueError, match="frozen"):
        report.findings[0].claim = "other"


# -- hedges ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claim", "hedged"),
    [
        ("Prices may rise next year", True),
        ("The data suggests a slowdown", True),
        ("About 40 firms joined", True),
        ("Prices rose in 2023", False),
        ("Revenue grew around 12% in 2023", True),
        ("It rose roughly a third", True),
        ("A report about revenue growth", False),
        ("Flights around the world resumed", False),
        ("Sales rose in May 2024", False),
        ("May prices rise again", True),
    ],
)
def test_hedges_are_detected_when_not_given(claim: str, hedged: bool) -> None:
    assert is_hedged(claim) is hedged
    assert Finding.model_validate(_finding(claim=claim)).hedged is hedged


def test_a_given_hedge_flag_wins() -> None:
    assert Finding.model_validate(_finding(claim="Prices may rise", hedged=False)).hedged is False
    assert Finding.model_validate(_finding(claim="Prices rise", hedged=True)).hedged is True


def test_conflict_values_take_the_date_and_method_of_their_source() -> None:
    value = ConflictValue.model_validate(
        {"value": 8, "source": {"url": "u", "published": "2023", "method": "survey"}}
    )
    assert (value.published, value.method) == ("2023", "survey")
    given = ConflictValue.model_validate(
        {"value": 8, "source": {"url": "u", "published": "2023"}, "published": "2022"}
    )
    assert given.published == "2022"


# -- the schema and the prompt ----------------------------------------------------------------

_ALL = SubagentReport.parse(
    _report(
        findings=[
            _finding(
                metric="market growth",
                value=12,
                unit="%",
                source={
                    "url": "https://stats.example/report",
                    "title": "Stats",
                    "page": "iv",
                    "published": "2024-02-01",
                    "method": "survey",
                },
            ),
            _finding(source={"document": "analyst.pdf", "page": 3}),
        ],
        gaps=[{"topic": "EU", "status": "timeout", "source": {"url": "https://eu.example"}}],
        conflicts=[
            {
                "metric": "market growth",
                "values": [
                    {"value": 12, "unit": "%", "source": {"url": "https://stats.example/report"}},
                    {"value": 8, "unit": "%", "source": {"document": "analyst.pdf"}},
                ],
                "note": "different methods",
            }
        ],
        outputs=[{"id": "o-" + "0" * 16, "summary": "the rows", "tokens": 12, "items": 3}],
    )
)


def test_the_exported_schema_is_valid_and_every_model_validates_against_its_own() -> None:
    schema = report_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(_ALL.model_dump(mode="json"), schema)
    samples: dict[type[BaseModel], BaseModel] = {
        Source: _ALL.findings[0].source,
        Finding: _ALL.findings[0],
        Gap: _ALL.gaps[0],
        ConflictValue: _ALL.conflicts[0].values[0],
        Conflict: _ALL.conflicts[0],
        OutputRef: _ALL.outputs[0],
    }
    for model, sample in samples.items():
        own = model.model_json_schema()
        jsonschema.Draft202012Validator.check_schema(own)
        jsonschema.validate(sample.model_dump(mode="json"), own)
        assert model.model_validate_json(sample.model_dump_json()) == sample


def test_the_schema_refuses_what_the_models_refuse() -> None:
    schema = report_json_schema()
    bad = _ALL.model_dump(mode="json")
    bad["gaps"][0]["status"] = "lost"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    bad = _ALL.model_dump(mode="json")
    bad["findings"][0]["source"]["published"] = "May 2023"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    bad = _ALL.model_dump(mode="json")
    bad["extra"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_the_schema_is_a_fresh_dict() -> None:
    schema = report_json_schema()
    schema["title"] = "changed"
    assert report_json_schema()["title"] == "SubagentReport"


_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1).filter(
    lambda t: t.strip() == t and t != ""
)


@settings(max_examples=50, deadline=None)
@given(
    claims=st.lists(_text, min_size=1, max_size=4),
    relevance=st.floats(0, 1),
    value=st.none() | st.floats(-1e9, 1e9, allow_nan=False),
    published=st.none() | st.dates().map(lambda d: d.isoformat()),
)
def test_any_valid_report_round_trips_through_its_schema(
    claims: list[str], relevance: float, value: float | None, published: str | None
) -> None:
    findings = [
        Finding(
            claim=c,
            evidence_excerpt=c,
            source=Source(url=f"https://x.example/{i}", published=published),
            relevance=relevance,
            metric=None if value is None else "m",
            value=value,
        )
        for i, c in enumerate(claims)
    ]
    report = SubagentReport(subtask="s", findings=tuple(findings))
    data = json.loads(report.model_dump_json())
    jsonschema.validate(data, report_json_schema())
    assert SubagentReport.parse(json.dumps(data)) == report


def test_the_prompt_asks_for_the_shape_and_embeds_the_schema() -> None:
    prompt = report_prompt("size the EU market")
    assert prompt.startswith("Your subtask: size the EU market")
    assert "```json" in prompt and "Never report a failed source as empty" in prompt
    schema_text = prompt.split("JSON Schema:\n", 1)[1].strip()
    assert json.loads(schema_text) == report_json_schema()
    assert report_prompt() == REPORT_PROMPT
    assert "Your subtask" not in REPORT_PROMPT


# -- outputs by reference ------------------------------------------------------------------------


def test_a_large_text_is_stored_and_handed_back_by_reference() -> None:
    store = InMemoryStore()
    text = "\n".join(f"row {i}: value {i * 3}" for i in range(500))
    ref = store_output(text, store=store)
    assert ref.id.startswith("o-") and ref.kind == "text" and ref.items == 500
    assert ref.tokens > 1000 and len(ref.model_dump_json()) < 400
    assert "500 lines" in ref.summary and "row 0" in ref.summary
    assert load_output(ref, store=store) == text
    assert store_output(text, store=store) == ref
    assert store.count(("ctxwise", "handoff_outputs")) == 1


def test_items_and_reports_by_reference() -> None:
    store = InMemoryStore()
    rows = [{"country": "FR", "sales": 12}, {"country": "DE", "sales": 8}]
    ref = store_output(rows, store=store, namespace=("job", "7"), summary="sales by country")
    assert (ref.kind, ref.items, ref.summary) == ("items", 2, "sales by country")
    assert load_output(ref, store=store, namespace=("job", "7")) == rows
    rep = store_output(_ALL, store=store)
    assert rep.kind == "report" and "2 findings, 1 gaps, 1 conflicts" in rep.summary
    assert load_output(rep, store=store) == _ALL
    with_ref = SubagentReport.parse(_report(outputs=[ref.model_dump()]))
    assert with_ref.outputs == (ref,)


def test_bad_outputs_and_missing_or_altered_references() -> None:
    store = InMemoryStore()
    with pytest.raises(UsageError, match="nothing to store"):
        store_output("  ", store=store)
    with pytest.raises(UsageError, match="nothing to store"):
        store_output([], store=store)
    with pytest.raises(UsageError, match="JSON values"):
        store_output([object()], store=store)
    ref = store_output("hello", store=store)
    with pytest.raises(UsageError, match="not stored"):
        load_output(ref, store=store, namespace=("elsewhere",))
    store.delete(("ctxwise", "handoff_outputs"), [ref.id])
    store.put(("ctxwise", "handoff_outputs"), NewItem("tampered", id=ref.id))
    with pytest.raises(StoreError, match="content hash"):
        load_output(ref, store=store)


# -- QA: edge cases of validation ------------------------------------------------------------


@pytest.mark.parametrize("published", ["２０２４", "٢٠٢٤-٠٥", "2024-0５-01"])
def test_a_date_in_other_digits_is_refused(published: str) -> None:
    # int() reads these digits, but the schema's pattern (ECMA \d) does not, and
    # synthesis compares dates as text: '２０２４' and '2024' would be two periods
    data = _report(findings=[_finding(source={"url": "u", "published": published})])
    assert "YYYY" in _problems(data)["findings[0].source.published"]


def test_a_conflict_whose_values_are_all_the_same_is_refused() -> None:
    # synthesis listed such a "conflict" as contested, and as a change over time
    one = {"value": 4.0, "unit": "%", "source": {"url": "https://a.example"}}
    two = {"value": 4, "unit": "%", "source": {"url": "https://b.example"}}
    problems = _problems(_report(conflicts=[{"metric": "growth", "values": [one, two]}]))
    assert "two or more different values" in problems["conflicts[0]"]
    other_unit = {**two, "unit": "pp"}
    report = SubagentReport.parse(_report(conflicts=[{"metric": "g", "values": [one, other_unit]}]))
    assert len(report.conflicts[0].values) == 2


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (_report(findings=[_finding(relevance=True)]), "findings[0].relevance"),
        (_report(findings=[_finding(metric="growth", value=False)]), "findings[0].value"),
        (
            _report(
                conflicts=[
                    {
                        "metric": "m",
                        "values": [
                            {"value": True, "source": {"url": "https://a.example"}},
                            {"value": 2, "source": {"url": "https://b.example"}},
                        ],
                    }
                ]
            ),
            "conflicts[0].values[0].value",
        ),
        (
            _report(outputs=[{"id": "o-" + "0" * 16, "summary": "s", "tokens": True, "items": 1}]),
            "outputs[0].tokens",
        ),
    ],
)
def test_a_boolean_is_not_a_number(data: dict[str, Any], path: str) -> None:
    # pydantic read true as 1.0 (a relevance of 1, a value of 1) where the schema refuses it
    assert "not a boolean" in _problems(data)[path]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, report_json_schema())


def test_a_bad_conflict_value_is_one_problem_not_also_a_count() -> None:
    values = [
        {"value": 1, "source": {"url": "https://a.example"}, "published": "last year"},
        {"value": 2, "source": {"url": "https://b.example"}},
    ]
    problems = _problems(_report(conflicts=[{"metric": "m", "values": values}]))
    assert list(problems) == ["conflicts[0].values[0].published"]
    # one value, and a bad one: both problems at once
    problems = _problems(_report(conflicts=[{"metric": "m", "values": values[:1]}]))
    assert set(problems) == {"conflicts[0].values[0].published", "conflicts[0].values"}
    assert (
        "at least 2"
        in _problems(_report(conflicts=[{"metric": "m", "values": values[1:]}]))[
            "conflicts[0].values"
        ]
    )


@pytest.mark.parametrize("summary", ["", "  \n", 5])
def test_a_blank_summary_is_a_usage_error_and_nothing_is_stored(summary: object) -> None:
    # it raised a bare ValueError (AttributeError for a number), which the docs
    # and the CLI's error mapping do not expect
    store = InMemoryStore()
    with pytest.raises(UsageError, match="summary"):
        store_output("a long text", store=store, summary=summary)  # type: ignore[arg-type]
    assert store.count(("ctxwise", "handoff_outputs")) == 0
    assert store_output("a long text", store=store, summary="  the text ").summary == "the text"


@pytest.mark.parametrize(
    "before",
    [
        "I ran this:\n```python\nrows = fetch()\n```\n",
        "The server said:\n```\nHTTP 503 Service Unavailable\n```\n",
        "```bash\ncurl -s https://stats.example\n```\n```\nok\n```\n",
    ],
)
def test_the_json_block_is_found_after_other_fenced_blocks(before: str) -> None:
    # the closing fence of the first block was read as the opening of a "block" that
    # ran to the ```json fence, and the reply failed as "not valid JSON"
    text = before + "My report:\n```json\n" + json.dumps(_report()) + "\n```\n"
    assert SubagentReport.parse(text) == SubagentReport.parse(_report())
    python_only = "```python\nprint('x')\n```\n" + json.dumps(_report())
    assert SubagentReport.parse(python_only).subtask == "market size"


def test_a_stored_report_that_no_longer_validates_is_a_report_error() -> None:
    # a report stored before a check was added (here: a conflict whose values are all
    # the same) raised pydantic's ValidationError from load_output
    report = SubagentReport.parse(_report())
    data = json.loads(report.model_dump_json())
    same = {"value": 1.0, "source": {"id": "s-x", "url": "https://a.example"}}
    data["conflicts"] = [{"metric": "m", "values": [same, same], "note": ""}]
    text = json.dumps(data)
    store = InMemoryStore()
    ref = OutputRef(
        id="o-" + hashlib.sha256(f"report\n{text}".encode()).hexdigest()[:16],
        summary="old",
        tokens=1,
        items=1,
        kind="report",
    )
    store.put(("ctxwise", "handoff_outputs"), NewItem(text, id=ref.id))
    with pytest.raises(SubagentReportError, match="two or more different values") as info:
        load_output(ref, store=store)
    assert info.value.source == f"output {ref.id}"
