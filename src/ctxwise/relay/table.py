"""The state table: rows keyed by id, typed columns, invariants checked by code.

A step proposes the whole next table; :meth:`StateTable.check` compares it with
the current one and lists every :class:`Violation` of the declared invariants:

- ``row_dropped``: a row of the current table is missing;
- ``counter_decreased``: a counter column went down;
- ``required_missing``: a required column is absent or null;
- ``type``: a value of the wrong type (``bool`` is not an ``int``);
- ``unknown_column``, ``duplicate_key``, ``key_missing``: a malformed row;
- ``custom``: a check of the caller's returned a problem.

An update with no violation is accepted; the relay rejects any other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxwise.errors import RelayError
from ctxwise.relay.workload import ColumnSpec, TableSpec

__all__ = ["Change", "Check", "StateTable", "Violation", "diff_tables"]

Row = Mapping[str, Any]
Check = Callable[[Sequence[Row], Sequence[Row]], Iterable[str]]
"""A custom invariant: ``check(current_rows, proposed_rows)`` yields one message per
problem (nothing when the update is fine)."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant: ``rule`` (see the module docstring), the row's ``key``
    and the ``column`` when it is about one, and what is wrong."""

    rule: str
    detail: str
    key: str | None = None
    column: str | None = None

    def __str__(self) -> str:
        where = (
            ""
            if self.key is None
            else f"row {self.key!r}" + ("" if self.column is None else f", column {self.column!r}")
        )
        return f"{self.rule}: {where + ': ' if where else ''}{self.detail}"


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between two tables: a row ``added`` or ``removed``, or a
    ``column`` whose value went from ``old`` to ``new``."""

    key: str
    kind: str
    column: str | None = None
    old: Any = None
    new: Any = None


_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
}


def _type_ok(value: Any, col: ColumnSpec) -> bool:
    if col.type != "bool" and isinstance(value, bool):
        return False
    if col.type == "float" and isinstance(value, float) and not math.isfinite(value):
        return False
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False  # lone surrogates: the state could not be saved
    return isinstance(value, _TYPES[col.type])


def diff_tables(old: Sequence[Row], new: Sequence[Row], key: str) -> list[Change]:
    """Every row added or removed and every value changed, going from ``old`` to ``new``."""
    before = {str(r.get(key)): r for r in old}
    after = {str(r.get(key)): r for r in new}
    out: list[Change] = [Change(k, "removed") for k in before if k not in after]
    for k, row in after.items():
        prev = before.get(k)
        if prev is None:
            out.append(Change(k, "added"))
            continue
        for col in sorted(set(prev) | set(row)):
            if prev.get(col) != row.get(col):
                out.append(Change(k, "changed", col, prev.get(col), row.get(col)))
    return out


class StateTable:
    """A table of :class:`~ctxwise.relay.workload.TableSpec`'s shape and its invariants.

    ``rows`` is the current table (the spec's starting rows at first); ``checks``
    are custom invariants. The starting rows must pass every check.

    Raises:
        RelayError: (``"table"``) the spec's key is not a column, a counter is not
            numeric, or the starting rows break an invariant.
    """

    def __init__(self, spec: TableSpec, *, checks: Sequence[Check] = ()) -> None:
        if spec.key not in spec.columns:
            raise RelayError("table", f"key {spec.key!r} is not one of the columns")
        for name, col in spec.columns.items():
            if col.counter and col.type not in ("int", "float"):
                raise RelayError("table", f"column {name!r} is a counter but of type {col.type}")
        self.spec = spec
        self.checks = tuple(checks)
        problems = self.check(spec.rows, current=())
        if problems:
            raise RelayError("table", f"the starting rows break an invariant: {problems[0]}")
        self.rows: tuple[dict[str, Any], ...] = tuple(dict(r) for r in spec.rows)

    @property
    def key(self) -> str:
        """The key column."""
        return self.spec.key

    def check(
        self, proposed: Sequence[Any], *, current: Sequence[Row] | None = None
    ) -> list[Violation]:
        """Every invariant ``proposed`` breaks against ``current`` (default: :attr:`rows`)."""
        now = self.rows if current is None else current
        cols = self.spec.columns
        key = self.spec.key
        out: list[Violation] = []
        seen: dict[str, Row] = {}
        for i, row in enumerate(proposed):
            if not isinstance(row, Mapping):
                out.append(Violation("type", f"row {i} is not an object"))
                continue
            if row.get(key) is None:
                out.append(Violation("key_missing", f"row {i} has no {key!r}"))
                continue
            k = str(row[key])
            if k in seen:
                out.append(Violation("duplicate_key", "the key is used by two rows", key=k))
            seen[k] = row
            for name in row:
                if name not in cols:
                    out.append(
                        Violation("unknown_column", "no such column", key=k, column=str(name))
                    )
            for name, col in cols.items():
                value = row.get(name)
                if value is None:
                    if col.required:
                        out.append(Violation("required_missing", "missing", key=k, column=name))
                    continue
                if not _type_ok(value, col):
                    out.append(
                        Violation(
                            "type",
                            f"{value!r} is not of type {col.type}",
                            key=k,
                            column=name,
                        )
                    )
        for old in now:
            k = str(old.get(key))
            new = seen.get(k)
            if new is None:
                out.append(Violation("row_dropped", "the row is missing from the update", key=k))
                continue
            for name, col in cols.items():
                if not col.counter:
                    continue
                before, after = old.get(name), new.get(name)
                if (
                    isinstance(before, int | float)
                    and isinstance(after, int | float)
                    and not isinstance(after, bool)
                    and after < before
                ):
                    out.append(
                        Violation(
                            "counter_decreased", f"{before!r} -> {after!r}", key=k, column=name
                        )
                    )
        if not out:
            for check in self.checks:
                name = getattr(check, "__name__", type(check).__name__)
                for problem in check(now, list(proposed)):
                    out.append(Violation("custom", f"{name}: {problem}"))
        return out

    def accept(self, proposed: Sequence[Row]) -> None:
        """Make ``proposed`` the current table (call after :meth:`check` found nothing)."""
        self.rows = tuple(dict(r) for r in proposed)
