"""The state table's invariants, checked by code."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise.errors import RelayError
from ctxwise.relay import Change, StateTable
from ctxwise.relay.table import diff_tables
from ctxwise.relay.workload import ColumnSpec, TableSpec

ROWS = (
    {"asset": "pump P-1", "holder": "Ana Ruiz", "handovers": 2, "ok": True, "load": 0.5},
    {"asset": "crane CR-2", "holder": "Bea Sato", "handovers": 0, "ok": False, "load": 1.0},
)


def _spec(rows: Sequence[Mapping[str, Any]] = ROWS) -> TableSpec:
    return TableSpec(
        key="asset",
        columns={
            "asset": ColumnSpec(type="str"),
            "holder": ColumnSpec(type="str"),
            "handovers": ColumnSpec(type="int", counter=True),
            "ok": ColumnSpec(type="bool"),
            "load": ColumnSpec(type="float"),
            "note": ColumnSpec(type="str", required=False),
        },
        rows=tuple(dict(r) for r in rows),
    )


def _rules(table: StateTable, proposed: Sequence[Any]) -> list[str]:
    return [v.rule for v in table.check(proposed)]


def test_a_valid_update_passes() -> None:
    table = StateTable(_spec())
    proposed = [dict(r) for r in ROWS]
    proposed[0].update(holder="Cleo Novak", handovers=3, note="moved")
    proposed[1].update(load=2)  # an int is a float
    proposed.append(
        {"asset": "mixer MX-9", "holder": "Dev Weber", "handovers": 0, "ok": True, "load": 0.0}
    )
    assert table.check(proposed) == []
    table.accept(proposed)
    assert table.rows == tuple(proposed)
    # and the next check compares with the accepted rows
    lowered = [dict(r) for r in proposed]
    lowered[0]["handovers"] = 2
    assert _rules(table, lowered) == ["counter_decreased"]


def test_row_dropped() -> None:
    table = StateTable(_spec())
    (v,) = table.check([dict(ROWS[0])])
    assert (v.rule, v.key) == ("row_dropped", "crane CR-2")
    assert "crane CR-2" in str(v)


def test_counter_decreased() -> None:
    table = StateTable(_spec())
    proposed = [dict(r) for r in ROWS]
    proposed[0]["handovers"] = 1
    (v,) = table.check(proposed)
    assert (v.rule, v.key, v.column) == ("counter_decreased", "pump P-1", "handovers")
    assert "2 -> 1" in v.detail


def test_required_missing_absent_or_null() -> None:
    table = StateTable(_spec())
    absent = [dict(r) for r in ROWS]
    del absent[0]["holder"]
    null = [dict(r) for r in ROWS]
    null[1]["ok"] = None
    (a,) = table.check(absent)
    (n,) = table.check(null)
    assert (a.rule, a.key, a.column) == ("required_missing", "pump P-1", "holder")
    assert (n.rule, n.key, n.column) == ("required_missing", "crane CR-2", "ok")
    optional = [dict(r) for r in ROWS]
    optional[0]["note"] = None
    assert table.check(optional) == []


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("handovers", True),  # bool is not int
        ("handovers", 2.0),
        ("handovers", "3"),
        ("holder", 7),
        ("ok", 1),
        ("load", float("nan")),
        ("load", float("inf")),
        ("load", False),
        ("load", "0.5"),
    ],
)
def test_type(column: str, value: Any) -> None:
    table = StateTable(_spec())
    proposed = [dict(r) for r in ROWS]
    proposed[0][column] = value
    rules = table.check(proposed)
    assert [(v.rule, v.key, v.column) for v in rules] == [("type", "pump P-1", column)]


def test_a_row_that_is_not_an_object_is_a_type_violation() -> None:
    table = StateTable(_spec())
    assert "type" in _rules(table, [*ROWS, ["not", "a", "row"]])


def test_unknown_column() -> None:
    table = StateTable(_spec())
    proposed = [dict(r) for r in ROWS]
    proposed[1]["colour"] = "red"
    (v,) = table.check(proposed)
    assert (v.rule, v.key, v.column) == ("unknown_column", "crane CR-2", "colour")


def test_duplicate_key() -> None:
    table = StateTable(_spec())
    (v,) = table.check([*ROWS, dict(ROWS[1])])
    assert (v.rule, v.key) == ("duplicate_key", "crane CR-2")


def test_key_missing() -> None:
    table = StateTable(_spec())
    keyless = dict(ROWS[0])
    del keyless["asset"]
    rules = _rules(table, [keyless, dict(ROWS[1])])
    assert "key_missing" in rules
    assert "row_dropped" in rules  # and so pump P-1 is gone


def test_custom_check() -> None:
    seen: list[tuple[int, int]] = []

    def one_holder_each(
        current: Sequence[Mapping[str, Any]], proposed: Sequence[Mapping[str, Any]]
    ) -> Iterator[str]:
        seen.append((len(current), len(proposed)))
        holders = [r["holder"] for r in proposed]
        for h in sorted({h for h in holders if holders.count(h) > 1}):
            yield f"{h} holds two assets"

    table = StateTable(_spec(), checks=[one_holder_each])
    fine = [dict(r) for r in ROWS]
    assert table.check(fine) == []
    bad = [dict(r) for r in ROWS]
    bad[1]["holder"] = "Ana Ruiz"
    (v,) = table.check(bad)
    assert v.rule == "custom"
    assert "one_holder_each" in v.detail and "Ana Ruiz holds two assets" in v.detail
    assert seen[-1] == (2, 2)


def test_starting_rows_that_break_a_rule_are_a_table_error() -> None:
    bad_type = [dict(ROWS[0], handovers="two"), dict(ROWS[1])]
    duplicate = [dict(ROWS[0]), dict(ROWS[0])]
    for rows in (bad_type, duplicate):
        with pytest.raises(RelayError) as err:
            StateTable(_spec(rows))
        assert err.value.reason == "table"

    def never(
        current: Sequence[Mapping[str, Any]], proposed: Sequence[Mapping[str, Any]]
    ) -> list[str]:
        return ["no table is good enough"]

    with pytest.raises(RelayError) as err:
        StateTable(_spec(), checks=[never])
    assert err.value.reason == "table"


def test_a_bad_schema_is_a_table_error() -> None:
    no_key = TableSpec(key="id", columns={"name": ColumnSpec()})
    str_counter = TableSpec(
        key="id", columns={"id": ColumnSpec(), "n": ColumnSpec(type="str", counter=True)}
    )
    for spec in (no_key, str_counter):
        with pytest.raises(RelayError) as err:
            StateTable(spec)
        assert err.value.reason == "table"


def test_diff_tables_lists_every_change() -> None:
    new: list[dict[str, Any]] = [
        dict(ROWS[0], holder="Cleo Novak", handovers=3),
        {"asset": "mixer MX-9"},
    ]
    changes = diff_tables(ROWS, new, "asset")
    assert changes == [
        Change("crane CR-2", "removed"),
        Change("pump P-1", "changed", "handovers", 2, 3),
        Change("pump P-1", "changed", "holder", "Ana Ruiz", "Cleo Novak"),
        Change("mixer MX-9", "added"),
    ]
    assert diff_tables(ROWS, ROWS, "asset") == []


# -- a property: the two rules the relay leans on ------------------------------

KEYS = [f"k{i}" for i in range(8)]
COUNTER_SPEC = TableSpec(
    key="id",
    columns={
        "id": ColumnSpec(type="str"),
        "a": ColumnSpec(type="int", counter=True),
        "b": ColumnSpec(type="int", counter=True),
        "label": ColumnSpec(type="str"),
    },
)

_rows_strategy = st.dictionaries(
    st.sampled_from(KEYS),
    st.tuples(st.integers(0, 5), st.integers(0, 5), st.sampled_from(["x", "y"])),
    max_size=8,
)


@given(
    before=_rows_strategy,
    drop=st.sets(st.sampled_from(KEYS)),
    deltas=st.dictionaries(
        st.sampled_from(KEYS), st.tuples(st.integers(-3, 3), st.integers(-3, 3)), max_size=8
    ),
    added=_rows_strategy,
    reverse=st.booleans(),
)
def test_row_dropped_and_counter_decreased_exactly_when_they_happen(
    before: dict[str, tuple[int, int, str]],
    drop: set[str],
    deltas: dict[str, tuple[int, int]],
    added: dict[str, tuple[int, int, str]],
    reverse: bool,
) -> None:
    current: list[dict[str, Any]] = [
        {"id": k, "a": a, "b": b, "label": lab} for k, (a, b, lab) in before.items()
    ]
    proposed: list[dict[str, Any]] = []
    for row in current:
        if row["id"] in drop:
            continue
        da, db = deltas.get(str(row["id"]), (0, 0))
        proposed.append(dict(row, a=row["a"] + da, b=row["b"] + db))
    proposed += [
        {"id": k, "a": a, "b": b, "label": lab}
        for k, (a, b, lab) in added.items()
        if k not in before
    ]
    if reverse:
        proposed.reverse()
    table = StateTable(COUNTER_SPEC)
    rules = [v.rule for v in table.check(proposed, current=current)]
    gone = set(before) & drop
    went_down = any(d < 0 for k, ds in deltas.items() if k in before and k not in drop for d in ds)
    assert ("row_dropped" in rules) == bool(gone)
    assert rules.count("row_dropped") == len(gone)
    assert ("counter_decreased" in rules) == went_down
    assert set(rules) <= {"row_dropped", "counter_decreased"}
