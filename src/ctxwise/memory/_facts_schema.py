"""The persisted forms of :class:`~ctxwise.memory.facts.CaseFacts` and
:class:`~ctxwise.memory.facts.Rules` (version 1), as pydantic models.

What ``to_dict`` writes::

    {"version": 1, "facts": [{"key", "value", "source", "at"}, ...]}
    {"version": 1, "rules": [{"text", "source"}, ...]}

The models check the shape (keys, types, version); the values' own rules (a
non-empty key, one line, a length limit) stay with :class:`Fact` and
:class:`Rule`, which the owners build from these models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from ctxwise._schema import PersistedModel, as_dict, describe, versions
from ctxwise.errors import FormatError, UsageError

__all__ = [
    "FORMAT_VERSION",
    "CaseFactsFile",
    "FactItem",
    "RuleItem",
    "RulesFile",
    "items",
    "parse_file",
]

FORMAT_VERSION = 1
"""The ``version`` ``to_dict`` writes."""

_M = TypeVar("_M", bound=BaseModel)


class FactItem(PersistedModel):
    key: str
    value: str
    source: str | None = None
    at: str | None = None


class CaseFactsFile(PersistedModel):
    version: Annotated[Literal[1], versions(1)]
    facts: list[FactItem]


class RuleItem(PersistedModel):
    text: str
    source: str | None = None


class RulesFile(PersistedModel):
    version: Annotated[Literal[1], versions(1)]
    rules: list[RuleItem]


def items(values: Any, what: str) -> list[Any]:
    """``values`` as a list, or a :class:`UsageError` saying ``what``: a string (it
    would be read letter by letter) or something that is not iterable."""
    if isinstance(values, str | bytes):
        raise UsageError(f"{what}, not a string (wrap one in a list): {values!r:.60}")
    try:
        return list(values)
    except TypeError:
        raise UsageError(f"{what}, got {type(values).__name__}") from None


def parse_file(model: type[_M], data: object, what: str) -> _M:
    """``data`` read through its schema model; a :class:`FormatError` naming the field."""
    if not isinstance(data, Mapping):
        raise FormatError(what, f"expected a mapping, got {type(data).__name__}")
    try:
        return model.model_validate(as_dict(data))
    except ValidationError as exc:
        raise FormatError(what, describe(exc)) from None
