"""Tools ctxwise gives the model: a deferred catalog with tool search, trimmed tool
results, and cursors to load the rest on demand.

- :mod:`ctxwise.tools.catalog`: every tool an agent could call, few of them sent:
  the always-loaded ones, the session's loaded ones, the best matches for the turn,
  and a ``tool_search`` tool for the rest (or Anthropic's server-side tool search);
- :mod:`ctxwise.tools.trim`: keep a JSON result's named fields byte for byte, cap its
  lists with a note of how many items were left out, cut text to head and tail;
- :mod:`ctxwise.tools.cursors`: store a large result and hand the model a page of it
  with a signed, session-bound, expiring cursor and a ``fetch_more`` tool.
"""

from ctxwise.errors import ToolCatalogError
from ctxwise.tools.catalog import (
    DEFAULT_K,
    TOOL_SEARCH,
    SearchOutcome,
    ToolCatalog,
    ToolDef,
    ToolHit,
    ToolTurn,
)
from ctxwise.tools.cursors import (
    CursorError,
    Page,
    ResultStore,
    fetch_more_result,
    fetch_more_tool,
    paginate,
)
from ctxwise.tools.trim import Trimmed, trim, trim_text

__all__ = [
    "DEFAULT_K",
    "TOOL_SEARCH",
    "CursorError",
    "Page",
    "ResultStore",
    "SearchOutcome",
    "ToolCatalog",
    "ToolCatalogError",
    "ToolDef",
    "ToolHit",
    "ToolTurn",
    "Trimmed",
    "fetch_more_result",
    "fetch_more_tool",
    "paginate",
    "trim",
    "trim_text",
]
