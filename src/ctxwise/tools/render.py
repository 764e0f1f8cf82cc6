"""Tool definitions as the providers take them, and the names they are sent by."""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxwise.tools.catalog import ToolDef

__all__: list[str] = []  # the catalog renders through these; ctxwise.tools.catalog is the API

_WIRE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NOT_WIRE = re.compile(r"[^A-Za-z0-9_-]+")


def _anthropic_def(tool: ToolDef, name: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if tool.description:
        out["description"] = tool.description
    out["input_schema"] = dict(tool.input_schema)
    return out


def _openai_def(tool: ToolDef, name: str) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": name}
    if tool.description:
        fn["description"] = tool.description
    fn["parameters"] = dict(tool.input_schema)
    return {"type": "function", "function": fn}


def _wire(name: str) -> str:
    """``name`` as the providers accept it (``^[A-Za-z0-9_-]{1,64}$``)."""
    if _WIRE.match(name):
        return name
    clean = _NOT_WIRE.sub("_", name).strip("_") or "tool"
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{clean[:55]}_{digest}"


def _qualified(server: str, name: str) -> str:
    full = f"{_NOT_WIRE.sub('_', server).strip('_') or 'server'}__{name}"
    if _WIRE.match(full):
        return full
    digest = hashlib.sha256(f"{server}\n{name}".encode()).hexdigest()[:8]
    return f"{_NOT_WIRE.sub('_', full)[:55]}_{digest}"
