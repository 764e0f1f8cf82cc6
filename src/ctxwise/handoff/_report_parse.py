"""Reading what a subagent's model returned as a report: JSON alone or in a fence,
and validation errors as ``(field path, problem)`` pairs that name the key meant
(see :meth:`ctxwise.handoff.report.SubagentReport.parse`)."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from ctxwise._io import parse_json
from ctxwise._schema import field_path
from ctxwise.errors import SubagentReportError

__all__ = ["decode", "json_type", "problems"]

_MISSING = object()


_FENCE = re.compile(r"```([^\n`]*)\r?\n(.*?)```", re.DOTALL)
"""A fenced block: its info string (``json``, ``python``, none) and its body. Blocks
are matched in turn, so the closing fence of one is never read as the opening of
the next."""


def json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return names.get(type(value), type(value).__name__)


def decode(data: str | bytes, source: str | None) -> object:
    """The JSON value in a model's reply: the first ```` ```json ```` block, else the
    first fenced block without a language (a ```` ```python ```` block is code, not
    the report), else the whole text, else the span from its first ``{`` to its
    last ``}``."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as e:
        raise SubagentReportError(
            [("(top level)", f"not UTF-8 text ({e})")], source=source
        ) from None
    blocks = [(m.group(1).strip().lower(), m.group(2)) for m in _FENCE.finditer(text)]
    fenced = next((body for info, body in blocks if info == "json"), None)
    if fenced is None:
        fenced = next((body for info, body in blocks if not info), None)
    candidate = fenced if fenced is not None else text
    candidate = candidate.strip()
    if not candidate:
        raise SubagentReportError([("(top level)", "empty reply: no JSON object")], source=source)
    if fenced is None and not candidate.startswith(("{", "[")):
        start, end = candidate.find("{"), candidate.rfind("}")
        if start < 0 or end < start:
            raise SubagentReportError(
                [("(top level)", "no JSON object in the reply")], source=source
            )
        candidate = candidate[start : end + 1]
    try:
        return parse_json(candidate)
    except json.JSONDecodeError as e:
        raise SubagentReportError(
            [("(top level)", f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}")],
            source=source,
        ) from None
    except RecursionError:
        raise SubagentReportError(
            [("(top level)", "not valid JSON: nested too deeply")], source=source
        ) from None


_MEMBERS = {"int": "an integer", "str": "a string", "float": "a number", "bool": "a boolean"}
"""The names pydantic puts in an error's path for a union's members, and what they read as."""


def _model_at(loc: Sequence[int | str], root: type[BaseModel]) -> type[BaseModel] | None:
    """The model found at a field path below ``root`` (``findings, 0, source`` →
    :class:`~ctxwise.handoff.report.Source` below the report)."""
    model: type[BaseModel] | None = root
    for part in loc:
        if isinstance(part, int):
            continue
        if model is None or part not in model.model_fields:
            return None
        annotation = model.model_fields[part].annotation
        model = next((m for m in _models_in(annotation)), None)
    return model


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in getattr(annotation, "__args__", ()):
        found += _models_in(arg)
    return found


def _unknown_key(loc: Sequence[int | str], root: type[BaseModel]) -> str:
    key = str(loc[-1]) if loc else ""
    model = _model_at(loc[:-1], root)
    if model is None:
        return "unknown key"
    fields = list(model.model_fields)
    prefixed = [f for f in fields if len(key) >= 3 and f.startswith(key[:4])]
    close = prefixed or difflib.get_close_matches(key, fields, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown key ({hint}{model.__name__} has {', '.join(fields)})"


def _got(err: Mapping[str, Any]) -> str:
    given = err.get("input", _MISSING)
    if given is _MISSING or isinstance(given, Mapping | list) or err["type"] == "value_error":
        return ""
    shown = repr(given)
    return f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"


def problems(exc: ValidationError, root: type[BaseModel]) -> list[tuple[str, str]]:
    """``(field path, problem)`` for each error of the validation of a ``root`` (a
    report); the errors of a union's members at one path become one (``should be an
    integer or a string``)."""
    out: dict[str, str] = {}
    unions: dict[str, list[str]] = {}
    errors = exc.errors(include_url=False)
    # a list whose bad items pydantic left out of its count ("at least 2 items after
    # validation, not 1" for two values, one of them wrong): the items' errors say it
    failed_items = {
        tuple(e["loc"][:i]) for e in errors for i, p in enumerate(e["loc"]) if isinstance(p, int)
    }
    for err in errors:
        loc = tuple(err["loc"])
        if err["type"] == "too_short" and loc in failed_items:
            given = err.get("input")
            if isinstance(given, list | tuple) and len(given) >= err["ctx"]["min_length"]:
                continue
        member = loc[-1] if loc and loc[-1] in _MEMBERS else None
        if member is not None:
            loc = loc[:-1]
        where = field_path(loc) or "(top level)"
        kind = err["type"]
        if member is not None:
            unions.setdefault(where, []).append(_MEMBERS[str(member)])
            out[where] = f"should be {' or '.join(unions[where])}{_got(err)}"
        elif kind == "missing":
            out.setdefault(where, "missing")
        elif kind == "extra_forbidden":
            out.setdefault(where, _unknown_key(loc, root))
        else:
            out.setdefault(where, str(err["msg"]).removeprefix("Value error, ") + _got(err))
    return list(out.items())
