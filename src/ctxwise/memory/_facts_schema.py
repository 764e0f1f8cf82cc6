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

from typing import Annotated, Literal

from ctxwise._schema import PersistedModel, versions

__all__ = ["CaseFactsFile", "FactItem", "RuleItem", "RulesFile"]


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
