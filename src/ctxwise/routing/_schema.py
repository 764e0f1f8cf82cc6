"""The router file's JSON part (format ``ctxwise-router``, versions 1 and 2) as
pydantic models, exactly as :meth:`~ctxwise.routing.router.IntentRouter.to_dict`
and ``save`` write it.

Version 2 adds ``state``: the ``.npz`` file beside the JSON, its SHA-256, the
scorer's labels and metadata (the arrays themselves never pass through pydantic).
Keys a writer always writes but an older or hand-written file may lack have
defaults: ``state`` (none), ``max_query_chars``, ``per_intent``, ``params``,
``utterances``, ``keywords`` and ``negatives``. ``max_query_chars`` is 1 or more;
the intents ``per_intent`` names, and a version 2 file's ``state`` for a scorer that
saves one, are checked by the router when it builds itself from the file.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from ctxwise._schema import PersistedModel, versions

__all__ = ["CalibrationItem", "IntentItem", "RouterFile", "ScorerItem", "StateItem"]


class ScorerItem(PersistedModel):
    name: str
    params: dict[str, Any] | None = None


class StateItem(PersistedModel):
    file: str
    sha256: str
    labels: list[str]
    meta: dict[str, Any]

    @field_validator("file")
    @classmethod
    def _a_plain_file_name(cls, name: str) -> str:
        if not name or name != PurePath(name).name or name in (".", ".."):
            raise ValueError(f"bad arrays file {name!r} (a file name beside the router)")
        return name


class CalibrationItem(PersistedModel):
    threshold: float
    margin: float
    per_intent: dict[str, float] = Field(default_factory=dict)


class IntentItem(PersistedModel):
    name: str
    utterances: list[str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class RouterFile(PersistedModel):
    format: Literal["ctxwise-router"]
    version: Annotated[Literal[1, 2], versions(1, 2)]
    scorer: ScorerItem
    state: StateItem | None = None
    calibration: CalibrationItem
    max_query_chars: Annotated[int, Field(ge=1)] | None = None
    intents: list[IntentItem]
    negatives: list[str] = Field(default_factory=list)
