"""Tool definitions as the providers take them, and the names they are sent by:
the ``tools`` arrays of :meth:`ToolCatalog.anthropic_tools
<ctxwise.tools.catalog.ToolCatalog.anthropic_tools>` and
:meth:`~ctxwise.tools.catalog.ToolCatalog.openai_tools` are built here."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ctxwise.errors import UsageError

if TYPE_CHECKING:
    from ctxwise.tools.catalog import ToolCatalog, ToolDef, ToolTurn

__all__: list[str] = []  # the catalog renders through these; ctxwise.tools.catalog is the API

SERVER_SEARCH_TOOLS: Mapping[str, Mapping[str, str]] = {
    "bm25": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
    "regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
}
"""Anthropic's server-side tool search tools, by variant."""

Mode: TypeAlias = Literal["client", "server"]

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


def anthropic_tools(
    catalog: ToolCatalog,
    turn: ToolTurn,
    mode: Mode,
    server_search: Literal["bm25", "regex"],
    cache_ttl: Literal["5m", "1h"] | None,
) -> list[dict[str, Any]]:
    """The Messages API ``tools`` array for ``turn`` (what
    :meth:`ToolCatalog.anthropic_tools <ctxwise.tools.catalog.ToolCatalog.anthropic_tools>`
    says)."""
    if cache_ttl not in (None, "5m", "1h"):
        raise UsageError(f"cache_ttl is '5m', '1h' or None, not {cache_ttl!r}")
    mark: dict[str, Any] = {"type": "ephemeral"}
    if cache_ttl is not None:
        mark["ttl"] = cache_ttl
    catalog._check_turn(turn)
    wire = catalog._wire_names()
    if mode == "server":
        if server_search not in SERVER_SEARCH_TOOLS:
            raise UsageError(f"server_search is 'bm25' or 'regex', not {server_search!r}")
        head = [_anthropic_def(t, wire[t.key]) for t in turn.always]
        head.append(dict(SERVER_SEARCH_TOOLS[server_search]))
        head[-1]["cache_control"] = mark
        always = {t.key for t in turn.always}
        deferred = [
            {**_anthropic_def(t, wire[t.key]), "defer_loading": True}
            for t in catalog
            if t.key not in always
        ]
        return [*head, *deferred]
    if mode != "client":
        raise UsageError(f"mode is 'client' or 'server', not {mode!r}")
    head = [_anthropic_def(t, wire[t.key]) for t in turn.always]
    if turn.search:
        head.append(catalog.search_tool())
    if head:
        head[-1] = {**head[-1], "cache_control": mark}
    sent = {t.key for t in turn.sent}
    tail = [_anthropic_def(t, wire[t.key]) for t in (*turn.loaded, *(h.tool for h in turn.found))]
    deferred = (
        [
            {**_anthropic_def(t, wire[t.key]), "defer_loading": True}
            for t in catalog
            if t.key not in sent
        ]
        if turn.search
        else []
    )
    return [*head, *tail, *deferred]


def openai_tools(catalog: ToolCatalog, turn: ToolTurn) -> list[dict[str, Any]]:
    """The Chat Completions ``tools`` array for ``turn`` (what
    :meth:`ToolCatalog.openai_tools <ctxwise.tools.catalog.ToolCatalog.openai_tools>`
    says)."""
    catalog._check_turn(turn)
    wire = catalog._wire_names()
    out = [_openai_def(t, wire[t.key]) for t in turn.always]
    if turn.search:
        s = catalog.search_tool()
        out.append(
            {
                "type": "function",
                "function": {
                    "name": s["name"],
                    "description": s["description"],
                    "parameters": s["input_schema"],
                },
            }
        )
    out.extend(_openai_def(t, wire[t.key]) for t in (*turn.loaded, *(h.tool for h in turn.found)))
    return out
