"""Tools ctxwise gives the model: trimmed tool results, and cursors to load the rest on demand.

- :mod:`ctxwise.tools.trim`: keep a JSON result's named fields byte for byte, cap its
  lists with a note of how many items were left out, cut text to head and tail;
- :mod:`ctxwise.tools.cursors`: store a large result and hand the model a page of it
  with a signed, session-bound, expiring cursor and a ``fetch_more`` tool.
"""

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
    "CursorError",
    "Page",
    "ResultStore",
    "Trimmed",
    "fetch_more_result",
    "fetch_more_tool",
    "paginate",
    "trim",
    "trim_text",
]
