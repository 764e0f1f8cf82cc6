"""The persisted form of a :class:`~ctxwise.policy.PolicyGate` (version 1), as
pydantic models: ``{"version": 1, "rules": [rule, ...]}``, each rule tagged by
its ``kind`` (``forbid``, ``require_fact``), exactly as the rules' ``to_dict``
write them.

The models check the shape; what makes a rule sound (a non-empty name, at least
one tool, a fact template of plain names) stays with the rule classes, which
:meth:`~ctxwise.policy.PolicyGate.from_dict` builds from these models. Optional
fields may be absent or ``null`` (hand-written gates), and an id in ``when`` or
``accept`` may be written as an integer (``4417``).
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from pydantic import Field

from ctxwise._schema import IdText, PersistedModel, versions

__all__ = ["RULE_KINDS", "ForbidItem", "GateFile", "RequireFactItem", "RuleItem"]


class ForbidItem(PersistedModel):
    kind: Literal["forbid"]
    name: str
    text: str
    tools: list[str]
    when: dict[str, IdText] | None = None


class RequireFactItem(PersistedModel):
    kind: Literal["require_fact"]
    name: str
    text: str
    tools: list[str]
    fact: str
    accept: list[IdText] | None = None
    when: dict[str, IdText] | None = None
    satisfied_by: str | None = None


RuleItem: TypeAlias = Annotated[ForbidItem | RequireFactItem, Field(discriminator="kind")]

RULE_KINDS = ("forbid", "require_fact")
"""The tags of :data:`RuleItem` (the built-in rule kinds)."""


class GateFile(PersistedModel):
    version: Annotated[Literal[1], versions(1)]
    rules: list[RuleItem]
