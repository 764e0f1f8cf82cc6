"""The SQLite store's rows and metadata filters: what its lexical and vector searches share."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from ctxwise.memory.store import (
    INT64_MAX,
    MemoryItem,
    Namespace,
    check_filters,
    json_equal,
)

_COLUMNS = "rowid, ns, id, seq, text, metadata, created_at"


def _key(ns: Namespace) -> str:
    return "/".join(ns)


def _row(r: Sequence[Any]) -> MemoryItem:
    return MemoryItem(
        id=r[2],
        namespace=tuple(r[1].split("/")),
        text=r[4],
        metadata=json.loads(r[5]),
        seq=r[3],
        created_at=r[6],
    )


_INT64_MIN = -(2**63)
_NUL_JSON = json.dumps("\x00")[1:-1]  # how a NUL character reads in JSON text
_ENTRY = "EXISTS (SELECT 1 FROM json_each(items.metadata) AS j WHERE j.key = ?"


def _metadata_equal(metadata: str, key: str, value: str) -> bool:
    """SQL function ``ctxwise_metadata_equal``: :func:`json_equal` of the item's
    value under ``key`` (None when missing) and the filter value (JSON text)."""
    found = json.loads(metadata).get(key)
    return json_equal(found, json.loads(value))


def _native_filter(key: str, value: Any) -> tuple[str, list[Any]] | None:
    """SQL for one filter in SQLite's JSON functions, or None where they cannot
    compare it exactly."""
    if "\x00" in key:
        return None
    if value is None:
        return f"NOT {_ENTRY} AND j.type != 'null')", [key]
    if isinstance(value, bool):
        return f"{_ENTRY} AND j.type = ?)", [key, "true" if value else "false"]
    if isinstance(value, float) or (isinstance(value, int) and _INT64_MIN <= value <= INT64_MAX):
        return f"{_ENTRY} AND j.type IN ('integer', 'real') AND j.atom = ?)", [key, value]
    if isinstance(value, str) and "\x00" not in value:
        return f"{_ENTRY} AND j.type = 'text' AND j.atom = ?)", [key, value]
    return None


def _filter_sql(filters: Mapping[str, Any] | None) -> tuple[str, list[Any]]:
    """SQL for :func:`ctxwise.memory.store.matches` over ``items.metadata``.

    Top-level values are found by ``json_each`` (any key, no JSON path to escape)
    and compared by JSON type: ``true`` is not ``1``, a missing key matches
    ``None``. Lists, objects, integers past 64 bits and strings with NUL (which
    SQLite's JSON functions cut short) are compared in Python."""
    checked = check_filters(filters)
    if not checked:
        return "", []
    clauses: list[str] = []
    params: list[Any] = []
    for key, value in checked.items():
        exact = "ctxwise_metadata_equal(items.metadata, ?, ?)"
        exact_params = [key, json.dumps(value, ensure_ascii=False)]
        native = _native_filter(key, value)
        if native is None:
            clauses.append(exact)
            params.extend(exact_params)
        else:  # metadata holding a NUL anywhere (JSON text \u0000) is compared in Python
            clauses.append(
                f"(CASE WHEN instr(items.metadata, ?) THEN {exact} ELSE {native[0]} END)"
            )
            params.extend([_NUL_JSON, *exact_params, *native[1]])
    return " AND " + " AND ".join(clauses), params


def _by_rowid(conn: sqlite3.Connection, key: str, rowids: Sequence[int]) -> dict[int, MemoryItem]:
    """The namespace's items of these rowids, by rowid."""
    if not rowids:
        return {}
    marks = ",".join("?" * len(rowids))
    return {
        r[0]: _row(r)
        for r in conn.execute(
            f"SELECT {_COLUMNS} FROM items WHERE rowid IN ({marks}) AND +ns = ?",
            (*rowids, key),
        )
    }
