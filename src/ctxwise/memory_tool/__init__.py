"""A backend for Anthropic's client-side memory tool (``memory_20250818``).

The model asks for one command at a time on paths under ``/memories``; the
application runs it and sends the text back as the tool result. :class:`MemoryTool`
runs those commands over one of two backends:

- :class:`DirectoryMemory` keeps each file as a file under a root folder on disk,
  written atomically (a temporary file renamed over the old one);
- :class:`StoreMemory` keeps each file as one item of a ctxwise memory
  :class:`~ctxwise.memory.Store`, keyed by its path, in one namespace (one per tenant
  and session), with one more item that indexes the paths, so a command reads the
  index and the files it names, never the others. Folders are implied by the paths
  of the files in them.

Commands (the SDK's ``BetaMemoryTool20250818*Command`` types)::

    view         path, view_range?      a file with line numbers, or a folder listing
    create       path, file_text        a new file (an existing one is refused)
    str_replace  path, old_str, new_str replace the one occurrence of old_str
    insert       path, insert_line, insert_text   insert after line insert_line (0: at the top)
    delete       path                   a file or a folder with everything in it
    rename       old_path, new_path     a file or a folder, to a path that does not exist

:meth:`MemoryTool.execute` never raises for a model's command: a bad command comes
back as ``MemoryResult(text, is_error=True)`` whose text names the path and what to
do instead, and nothing is changed. A missing or unknown parameter is such an error.
A bad constructor argument raises :class:`~ctxwise.errors.UsageError`.

Paths are confined to ``/memories`` and the folders below it. Refused: any other
path (relative, another absolute path, ``/memoriesX``), ``.`` and ``..`` segments
and every name starting with a dot, empty segments, backslashes, NUL and other
control or format characters, names that start or end with a space or end with a
dot (Windows drops those, so ``a.md.`` would be ``a.md``), percent escapes (``%2e``,
``%252e``, ``%2f``), names that Unicode normalization (NFKC) would change (dot
look-alikes such as U+2024, U+2025, U+FF0E and fullwidth forms such as U+FF0F) and
other dot-like characters, slash and backslash look-alikes (U+2215 ``∕``, U+2044
``⁄``, U+29F8 ``⧸``, U+2571 ``╱``, U+2216 ``∖`` and the others Unicode lists as
confusable with them, so ``/memories/∕..∕etc`` does not read as traversal), names
Windows cannot hold (the device names ``CON``, ``PRN``, ``AUX``, ``NUL``,
``CONIN$``, ``CONOUT$``, ``COM0``-``COM9``, ``LPT0``-``LPT9`` in any case and with
any extension, and ``< > : " | ? *``: ``a.md:x`` is an alternate data stream
there), and a new name (``create``, the destination of ``rename``, and the folders
they make) that differs only in letter case (``str.casefold``) from a name already
in its folder: ``Case.md`` beside ``case.md`` would be one file where case is
ignored (a rename that changes only the case of its own name is allowed). So the
files of a memory can be copied to any file system. On disk a path
is resolved with its symbolic links and refused unless the real path stays under
the root, so no link leads out; the folder (or file) is then opened and checked
again where it really is, and used through that descriptor, so a link swapped in
after the check does not lead out either. One trailing slash is accepted (``/memories/``).

Files are capped (``max_file_bytes`` of UTF-8, by default 1 MiB) and a view is cut
into pages of ``max_view_chars``; a cut page ends with the ``view_range`` that
reads the rest. Every result goes back into the model's window, so none grows with
what the model sent: the snippet after ``str_replace`` is cut at ``max_view_chars``;
an error quotes a string the model sent by its first :data:`MAX_QUOTE_CHARS`
characters and its length (``zzz…(500,000 characters)``), lists the lines of at
most :data:`MAX_MATCH_LINES` occurrences of an ``old_str`` found more than once
(and how many there are in all), and is cut at :data:`MAX_ERROR_CHARS` characters.
``str_replace`` finds at most two occurrences to know whether ``old_str`` is
unique, so it takes one pass whatever the number of matches. Return strings follow
the SDK's local filesystem tool (``anthropic.lib.tools.BetaLocalFilesystemMemoryTool``).

:class:`AnthropicMemoryTool` (extra ``anthropic``) subclasses the SDK's
``BetaAbstractMemoryTool``, so the SDK's tool runner drives a :class:`MemoryTool`::

    tool = MemoryTool(DirectoryMemory("./memory")).anthropic()
    client.beta.messages.tool_runner(model=..., max_tokens=..., messages=..., tools=[tool])
"""

from __future__ import annotations

from typing import Any

from ctxwise.memory_tool._adapter import adapter_class
from ctxwise.memory_tool._backend import MemoryBackend
from ctxwise.memory_tool._directory import DirectoryMemory
from ctxwise.memory_tool._paths import (
    MAX_ERROR_CHARS,
    MAX_NAME_BYTES,
    MAX_PATH_CHARS,
    MAX_QUOTE_CHARS,
    ROOT,
    check_path,
)
from ctxwise.memory_tool._store import StoreMemory
from ctxwise.memory_tool._tool import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_VIEW_CHARS,
    MAX_MATCH_LINES,
    MemoryResult,
    MemoryTool,
)

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_VIEW_CHARS",
    "MAX_ERROR_CHARS",
    "MAX_MATCH_LINES",
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "MAX_QUOTE_CHARS",
    "ROOT",
    "AnthropicMemoryTool",
    "DirectoryMemory",
    "MemoryBackend",
    "MemoryResult",
    "MemoryTool",
    "StoreMemory",
    "check_path",
]


def __getattr__(name: str) -> Any:
    if name == "AnthropicMemoryTool":
        return adapter_class(MemoryTool)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
