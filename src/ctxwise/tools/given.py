"""Tool definitions a caller gives a turn: read from any provider's shape, sent as the render's.

An agent loop has its tools at hand as its SDK wants them: an Anthropic ``tools``
array (``name``, ``description``, ``input_schema``), OpenAI's Chat Completions
(``{"type": "function", "function": {...}}``) or Responses (``{"type": "function",
"name": ...}``) function tools, or an MCP ``tools/list`` entry (``inputSchema``).
:func:`read_tools` reads any of these, checked as the catalog checks its tools
(a name, a JSON Schema of type ``object``); a provider's built-in tool (a ``type``
other than ``custom`` or ``function``: Anthropic's ``web_search_20250305``,
``bash_20250124``, OpenAI's ``web_search``) has no schema to read and is kept
verbatim. :func:`render_given` writes them in the request's shape, in the order
given. Every definition the request sends is counted in the turn's budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxwise.errors import ToolCatalogError, UsageError
from ctxwise.tools.catalog import ToolDef, _make, _openai_row
from ctxwise.tools.render import _anthropic_def, _openai_def

__all__ = ["NO_TOOLS", "GivenTools", "read_tools", "render_given"]


@dataclass(frozen=True, slots=True)
class GivenTools:
    """The tools a turn was given: ``custom`` (read into :class:`ToolDef`) and
    ``builtin`` (providers' built-in tools, verbatim), each in the order given;
    ``order`` interleaves them as given (``("custom", i)`` / ``("builtin", i)``)."""

    custom: tuple[ToolDef, ...] = ()
    builtin: tuple[Mapping[str, Any], ...] = ()
    order: tuple[tuple[Literal["custom", "builtin"], int], ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """Every tool's name as sent (a built-in tool's ``name``, else its ``type``), in order."""
        out: list[str] = []
        for kind, i in self.order:
            if kind == "custom":
                out.append(self.custom[i].name)
            else:
                raw = self.builtin[i]
                out.append(str(raw.get("name") or raw.get("type")))
        return tuple(out)

    def __bool__(self) -> bool:
        return bool(self.order)


NO_TOOLS = GivenTools()
"""A turn given no tools."""


def read_tools(tools: Sequence[Any] | None) -> GivenTools:
    """Read ``tools`` (see the module docstring); ``None`` or an empty list: none.

    Raises:
        ToolCatalogError: a definition without a name, with a bad schema, or a name
            given twice (``duplicate``).
        UsageError: ``tools`` is not a list of objects.
    """
    if tools is None:
        return NO_TOOLS
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise UsageError(f"tools must be a list of tool definitions, got {type(tools).__name__}")
    custom: list[ToolDef] = []
    builtin: list[Mapping[str, Any]] = []
    order: list[tuple[Literal["custom", "builtin"], int]] = []
    seen: set[str] = set()
    for i, raw in enumerate(tools):
        if not isinstance(raw, Mapping):
            raise UsageError(f"tools[{i}] must be an object, got {type(raw).__name__}")
        kind = raw.get("type")
        if kind == "function":
            tool = _openai_row(raw, None)
        elif kind in (None, "custom"):
            key = "inputSchema" if "inputSchema" in raw and "input_schema" not in raw else None
            tool = _make(raw, None, key or "input_schema")
        elif isinstance(kind, str) and kind.strip():
            name = str(raw.get("name") or kind)
            _unique(name, seen)
            order.append(("builtin", len(builtin)))
            builtin.append(dict(raw))
            continue
        else:
            raise UsageError(f"tools[{i}] has a type that is not a string: {kind!r}")
        _unique(tool.name, seen)
        order.append(("custom", len(custom)))
        custom.append(tool)
    return GivenTools(tuple(custom), tuple(builtin), tuple(order))


def _unique(name: str, seen: set[str]) -> None:
    if name in seen:
        raise ToolCatalogError("duplicate", tool=name, detail="given twice on one turn")
    seen.add(name)


def render_given(given: GivenTools, render: Literal["anthropic", "openai"]) -> list[dict[str, Any]]:
    """``given`` as a request's ``tools`` entries (Anthropic custom tools, or Chat
    Completions function tools), in the order given; built-in tools as given."""
    out: list[dict[str, Any]] = []
    for kind, i in given.order:
        if kind == "builtin":
            out.append(dict(given.builtin[i]))
            continue
        tool = given.custom[i]
        out.append((_anthropic_def if render == "anthropic" else _openai_def)(tool, tool.name))
    return out
