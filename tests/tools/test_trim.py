"""Trimming JSON tool results (``ctxwise.tools.trim``): allowlisted fields survive byte for
byte, list caps say exactly how many items went, and a token budget is never exceeded
when it can be met. Measured on the real tau-bench airline trajectories."""

from __future__ import annotations

import json
from json.decoder import scanstring
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise.errors import BudgetError, UsageError
from ctxwise.formats import read_transcripts
from ctxwise.messages import ToolResultBlock, ToolUseBlock
from ctxwise.tokens import CharCounter, WordCounter
from ctxwise.tools.trim import MAX_DEPTH, MORE_ITEMS, Trimmed, trim, trim_text
from tests.conftest import DATA

TAU = DATA / "transcripts" / "tau_bench" / "gpt-4o-airline.json"

# The fields an airline agent acts on, per tool. A reservation keeps its id, owner,
# route, cabin, the flights' numbers and dates, who flies and how it was paid;
# it loses the booking time, baggage counts and insurance. A user keeps name, email,
# payment methods, membership and reservation ids; the address, birth date and saved
# passengers go. A flight search keeps what picks a flight (number, route, time,
# status, prices) and loses the seat counts; at most five options per search.
RESERVATION = [
    "reservation_id",
    "user_id",
    "origin",
    "destination",
    "flight_type",
    "cabin",
    "flights.flight_number",
    "flights.date",
    "flights.origin",
    "flights.destination",
    "passengers",
    "payment_history",
    "status",
]
SEARCH = [
    "flight_number",
    "origin",
    "destination",
    "scheduled_departure_time_est",
    "status",
    "prices",
    "date",
]
ALLOWLISTS: dict[str, tuple[list[str], int | None]] = {
    "get_reservation_details": (RESERVATION, None),
    "book_reservation": (RESERVATION, None),
    "cancel_reservation": (RESERVATION, None),
    "update_reservation_flights": (RESERVATION, None),
    "update_reservation_baggages": (RESERVATION, None),
    "update_reservation_passengers": (RESERVATION, None),
    "get_user_details": (["name", "email", "payment_methods", "membership", "reservations"], None),
    "search_direct_flight": (SEARCH, 5),
    "search_onestop_flight": (SEARCH, 5),
}


# -- an independent slicer: where each value of a dotted path sits in a JSON text ------------

_DECODER = json.JSONDecoder()


def _skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t\n\r":
        i += 1
    return i


def _slices(s: str, i: int, path: list[str]) -> list[str]:
    """The raw text of every value at ``path`` (lists transparent) in the value at ``i``."""
    i = _skip_ws(s, i)
    _, end = _DECODER.raw_decode(s, i)
    if not path:
        return [s[i:end]]
    out: list[str] = []
    if s[i] == "[":
        j = _skip_ws(s, i + 1)
        while s[j] != "]":
            out += _slices(s, j, path)
            _, j = _DECODER.raw_decode(s, j)
            j = _skip_ws(s, j)
            j = _skip_ws(s, j + 1) if s[j] == "," else j
    elif s[i] == "{":
        j = _skip_ws(s, i + 1)
        while s[j] != "}":
            key, j = scanstring(s, j + 1)
            j = _skip_ws(s, _skip_ws(s, j) + 1)
            if key == path[0]:
                out += _slices(s, j, path[1:])
            _, j = _DECODER.raw_decode(s, j)
            j = _skip_ws(s, j)
            j = _skip_ws(s, j + 1) if s[j] == "," else j
    return out


def _tool_results() -> list[tuple[str, str]]:
    if not TAU.exists():
        pytest.skip(f"{TAU} is not on this machine")
    found = []
    for transcript in read_transcripts(TAU):
        names: dict[str, str] = {}
        for message in transcript.messages:
            for block in message.content:
                if isinstance(block, ToolUseBlock):
                    names[block.id] = block.name
                elif isinstance(block, ToolResultBlock) and isinstance(block.content, str):
                    found.append((names[block.tool_use_id], block.content))
    return found


def test_tau_bench_results_shrink_and_allowlisted_fields_survive_byte_for_byte() -> None:
    before = after = trimmed_results = checked = 0
    for name, text in _tool_results():
        if name not in ALLOWLISTS:
            continue
        fields, max_items = ALLOWLISTS[name]
        out = trim(text, fields=fields, max_items=max_items)
        before += out.tokens_before
        after += out.tokens_after
        try:
            json.loads(text)
        except ValueError:
            assert out.kind == "text" and out.text == text  # "Error: ..." passes through
            continue
        trimmed_results += 1
        assert out.kind == "json"
        json.loads(out.text)
        assert out.tokens_after <= out.tokens_before
        for field in fields:
            kept = _slices(out.text, 0, field.split("."))
            original = _slices(text, 0, field.split("."))
            # the same values, byte for byte; with a list cap, a prefix of them
            assert kept == original[: len(kept)], (name, field)
            if max_items is None:
                assert len(kept) == len(original), (name, field)
            checked += len(kept)
    assert trimmed_results > 500 and checked > 10_000
    assert after < before
    reduction = 1 - after / before
    print(f"tau-bench airline: {before} -> {after} tokens, reduction {reduction:.1%}")
    assert reduction > 0


def test_tau_bench_budget_is_met_on_every_result() -> None:
    counter = CharCounter()
    for name, text in _tool_results()[:400]:
        out = trim(text, max_tokens=60, counter=counter)
        assert out.tokens_after <= 60 or not out.fits, name
        if out.kind == "json":
            json.loads(out.text)


# -- formatting survives -------------------------------------------------------------------


ODD = '{"a" :  1.50e0 , "b":"\\u00e9\\/x", "c": {"x" : [1 ,2.0,  -0], "y": true}, "d": [ ]}'


def test_original_formatting_of_kept_values_is_unchanged() -> None:
    out = trim(ODD, fields=["a", "b", "c.x", "d"])
    assert out.text == '{"a": 1.50e0, "b": "\\u00e9\\/x", "c": {"x": [1 ,2.0,  -0]}, "d": [ ]}'
    assert out.dropped_paths == ("c.y",)
    for field in ("a", "b", "c.x", "d"):
        assert _slices(out.text, 0, field.split(".")) == _slices(ODD, 0, field.split("."))


def test_nothing_to_cut_returns_the_original_text() -> None:
    out = trim(ODD)
    assert out.text == ODD and not out.changed
    assert trim(ODD, fields=["a", "b", "c", "d"]).text == ODD
    assert trim("255.0", fields=["x"]).text == "255.0"


def test_paths_apply_through_lists_and_report_what_went() -> None:
    data = {"reservations": [{"flights": [{"origin": "JFK", "price": 1}], "id": "A"}]}
    out = trim(data, fields=["reservations.flights.origin"])
    assert json.loads(out.text) == {"reservations": [{"flights": [{"origin": "JFK"}]}]}
    assert out.dropped_paths == ("reservations[].flights[].price", "reservations[].id")
    assert isinstance(out, Trimmed)


def test_a_dropped_path_can_be_named_back_as_a_field() -> None:
    # "flights[].price" (the notation of dropped_paths) named no key and kept nothing
    value = {"flights": [{"price": 1, "x": 2}], "y": 3, "grid": [[{"a": 1, "b": 2}]]}
    plain = trim(value, fields=["flights.price", "grid.a"])
    marked = trim(value, fields=["flights[].price", "grid[][].a"])
    assert marked == plain
    assert json.loads(marked.text) == {"flights": [{"price": 1}], "grid": [[{"a": 1}]]}
    assert trim([[{"a": 1, "b": 2}]], fields=["[][].a"]).text == '[[{"a": 1}]]'
    for bad in ("[]", "[].[]", "a..b"):
        with pytest.raises(UsageError):
            trim(value, fields=[bad])


def test_a_scalar_where_a_path_goes_on_is_dropped() -> None:
    out = trim({"a": "text", "b": {"c": 1}}, fields=["a.x", "b.c"])
    assert json.loads(out.text) == {"b": {"c": 1}}
    assert out.dropped_paths == ("a",)


def test_list_cap_notes_the_number_dropped() -> None:
    out = trim(list(range(212)), max_items=5)
    assert json.loads(out.text) == [0, 1, 2, 3, 4, "… 207 more items"]
    assert out.dropped_items == 207


def test_budget_cut_notes_keys_and_items() -> None:
    data = {"a": list(range(50)), "b": "x" * 200, "c": 1}
    out = trim(data, max_tokens=40)
    value = json.loads(out.text)
    assert out.tokens_after <= 40 and out.fits
    assert value["a"][-1] == f"… {50 - len(value['a']) + 1} more items"
    assert value["…"] == "2 more keys"
    assert out.dropped_keys == 2


def test_an_existing_ellipsis_key_is_not_overwritten() -> None:
    out = trim({"…": "mine", "b": "x" * 100}, max_tokens=12)
    assert json.loads(out.text) == {"…": "mine", "……": "1 more keys"}


def test_an_unmeetable_budget_gives_the_smallest_form() -> None:
    out = trim({"a": "x" * 40, "b": 2}, max_tokens=1)
    assert out.text == '{"…": "2 more keys"}' and not out.fits
    small = trim({"a": 1, "b": 2}, max_tokens=1)  # the uncut form is the smaller here
    assert small.text == '{"a": 1, "b": 2}' and not small.fits


def test_non_json_text_is_trimmed_as_text() -> None:
    assert trim("Error: no seats").text == "Error: no seats"
    out = trim("word " * 100, max_tokens=20)
    assert out.kind == "text" and out.tokens_after <= 20 and out.dropped_chars > 0


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 600, 5000])
def test_deeply_nested_json_is_trimmed_as_text(depth: int) -> None:
    # a tool may return anything: nesting past the recursion limit raised RecursionError
    text = '{"a": ' * depth + "1" + "}" * depth
    n = CharCounter().count(text)
    assert trim(text, max_items=1) == Trimmed(text, n, n, "text")
    cut = trim(text, fields=["a"], max_tokens=50)
    assert cut.kind == "text" and cut.fits and cut.tokens_after <= 50 and cut.dropped_chars


def test_json_as_deep_as_allowed_is_cut_inside() -> None:
    text = "[" * MAX_DEPTH + "1, 2, 3" + "]" * MAX_DEPTH
    cut = trim(text, max_items=1)
    assert cut.kind == "json" and cut.dropped_items == 2
    assert json.loads(cut.text)


def test_a_parsed_result_that_is_not_json_is_a_usage_error() -> None:
    import datetime

    loop: list[Any] = []
    loop.append(loop)
    for bad in ({"when": datetime.date(2026, 1, 1)}, loop, {"b": b"bytes"}):
        with pytest.raises(UsageError, match="JSON values"):
            trim(bad, max_items=1)


def test_a_bad_marker_is_a_usage_error() -> None:
    # a marker with another field, a positional one or a lone brace raised KeyError,
    # IndexError or ValueError from str.format, and only once the text was over budget
    for bad in ("{oops}", "{0}", "{cut}}", "{", 5):
        with pytest.raises(UsageError, match="marker"):
            trim_text("x" * 100, max_tokens=10, marker=bad)  # type: ignore[arg-type]
    assert trim_text("x" * 100, max_tokens=10, marker="{{{cut}}}").text.count("{") == 1


def test_bad_arguments() -> None:
    with pytest.raises(BudgetError):
        trim("[]", max_items=-1)
    with pytest.raises(BudgetError):
        trim_text("x", max_tokens=-1)
    with pytest.raises(UsageError):
        trim("{}", fields=["a..b"])


def test_trim_text_head_and_tail() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(400))
    out = trim_text(text, max_tokens=30)
    head, _, rest = out.text.partition(" [… ")
    cut, _, tail = rest.partition(" characters cut …] ")
    assert text.startswith(head) and text.endswith(tail)
    assert int(cut) == len(text) - len(head) - len(tail) == out.dropped_chars
    assert out.tokens_after <= 30
    assert trim_text("short", max_tokens=30).text == "short"
    assert trim_text(text, max_tokens=2).text == ""


def test_word_counter_budgets_hold() -> None:
    out = trim(
        {"items": [f"item number {i}" for i in range(100)]}, max_tokens=50, counter=WordCounter()
    )
    assert out.tokens_after <= 50


# -- properties ------------------------------------------------------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=4), inner, max_size=5)
    ),
    max_leaves=30,
)
_NAMES = st.sampled_from(["a", "b", "c", "x"])
FIELDS = st.none() | st.lists(st.lists(_NAMES, min_size=1, max_size=3).map(".".join), max_size=4)


def _given(value: Any) -> Any:
    """A generated value as ``trim`` takes it: containers parsed, anything else as JSON text
    (a ``str`` argument is always JSON text)."""
    return value if isinstance(value, dict | list) else json.dumps(value)


def _capped(value: Any, k: int) -> Any:
    if isinstance(value, list):
        kept = [_capped(v, k) for v in value[:k]]
        return [*kept, MORE_ITEMS.format(n=len(value) - k)] if len(value) > k else kept
    if isinstance(value, dict):
        return {key: _capped(v, k) for key, v in value.items()}
    return value


def _lists_dropped(value: Any, k: int) -> int:
    if isinstance(value, list):
        return max(0, len(value) - k) + sum(_lists_dropped(v, k) for v in value[:k])
    if isinstance(value, dict):
        return sum(_lists_dropped(v, k) for v in value.values())
    return 0


@given(JSON, FIELDS, st.none() | st.integers(0, 4), st.none() | st.integers(0, 80))
def test_output_is_always_valid_json(
    value: Any, fields: list[str] | None, max_items: int | None, max_tokens: int | None
) -> None:
    out = trim(_given(value), fields=fields, max_items=max_items, max_tokens=max_tokens)
    json.loads(out.text)
    assert out.kind == "json"
    assert out.tokens_after == CharCounter().count(out.text)


@given(JSON, FIELDS, st.integers(0, 200))
def test_a_satisfiable_budget_is_never_exceeded(
    value: Any, fields: list[str] | None, max_tokens: int
) -> None:
    """Satisfiable: the budget holds the smallest form (every child of the root cut)
    or the result uncut."""
    uncut = trim(_given(value), fields=fields).tokens_after
    smallest = trim(_given(value), fields=fields, max_tokens=0).tokens_after
    out = trim(_given(value), fields=fields, max_tokens=max_tokens)
    if max_tokens >= min(uncut, smallest):
        assert out.fits and out.tokens_after <= max_tokens
    else:
        assert not out.fits and out.tokens_after == min(uncut, smallest)


@given(JSON, st.integers(0, 4))
def test_list_caps_note_the_exact_number_dropped(value: Any, k: int) -> None:
    out = trim(_given(value), max_items=k)
    assert json.loads(out.text) == _capped(json.loads(json.dumps(value)), k)
    assert out.dropped_items == _lists_dropped(value, k)


@given(st.text(max_size=300), st.integers(0, 60))
def test_trim_text_never_exceeds_a_budget_it_can_meet(text: str, max_tokens: int) -> None:
    out = trim_text(text, max_tokens=max_tokens)
    assert out.tokens_after <= max_tokens
    if out.text != text and out.text:
        head, _, rest = out.text.partition(" [… ")
        cut, _, tail = rest.rpartition(" characters cut …] ")
        assert int(cut) == out.dropped_chars == len(text) - len(head) - len(tail)
