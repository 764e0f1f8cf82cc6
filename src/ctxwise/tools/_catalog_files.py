"""Reading catalog files: MCP listings, Anthropic and OpenAI tools arrays, rows."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxwise._io import parse_json
from ctxwise.errors import FormatError, ToolCatalogError


def _array(tools: Any, what: str) -> list[Any]:
    if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
        raise ToolCatalogError("bad_definition", detail=f"{what} must be a list")
    return list(tools)


def _wire_form(value: Any) -> Any:
    """An MCP SDK model (``ListToolsResult``, ``Tool``) as its JSON form, whose keys
    are the protocol's (``inputSchema``; ``model_dump()`` alone writes
    ``input_schema``); anything else as it is."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, Mapping):
        return dump(mode="json", by_alias=True, exclude_none=True)
    return value


def _mcp_tools(listing: Any, server: str) -> list[Any]:
    listing = _wire_form(listing)
    if isinstance(listing, Mapping):
        body = listing.get("result", listing)
        tools = body.get("tools") if isinstance(body, Mapping) else None
        if not isinstance(tools, list):
            raise ToolCatalogError(
                "bad_definition",
                server=server,
                detail="an MCP tools/list result has a 'tools' list",
            )
        return tools
    return _array(listing, "an MCP tools list")


def _parse_catalog(text: str, source: str) -> tuple[list[Any], str, str | None]:
    """(definitions, kind, the listing's own server name) of a catalog file."""
    stripped = text.strip()
    if not stripped:
        raise FormatError(source, "the tool catalog is empty")
    try:
        data = parse_json(stripped)
    except (json.JSONDecodeError, RecursionError):
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(parse_json(line))
            except json.JSONDecodeError as e:
                raise FormatError(source, f"not JSON or JSON lines: {e.msg}", line=n) from None
            except RecursionError:
                raise FormatError(source, "JSON nested too deeply", line=n) from None
        return rows, "rows", None
    if isinstance(data, Mapping) and "server" in data and "name" in data and "inputSchema" in data:
        return [data], "rows", None  # a one-line JSONL catalog
    if isinstance(data, Mapping):
        body = data.get("result", data)
        if isinstance(body, Mapping) and isinstance(body.get("tools"), list):
            name = data.get("server")
            info = data.get("server_info") or data.get("serverInfo")
            if not isinstance(name, str) and isinstance(info, Mapping):
                name = info.get("name")
            return list(body["tools"]), "mcp", name if isinstance(name, str) else None
        raise FormatError(source, "a JSON object here is an MCP tools/list result with 'tools'")
    if isinstance(data, list):
        if not data:
            return [], "anthropic", None
        first = data[0]
        if isinstance(first, Mapping):
            if first.get("type") == "function":
                return data, "openai", None
            if "input_schema" in first:
                return data, "anthropic", None
            if "inputSchema" in first:
                return data, "rows" if "server" in first else "mcp", None
        raise FormatError(
            source, "a JSON array here is an Anthropic or OpenAI tools array, or MCP tools"
        )
    raise FormatError(source, "not a tool catalog (JSONL rows, tools/list, or a tools array)")
