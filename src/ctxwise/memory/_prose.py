"""Blank out what is not prose in a message's text, keeping every offset.

The fact extractor reads what people said, not code they pasted or output a tool
printed. :func:`prose_only` replaces each character of such a region with
:data:`MASK` (newlines are kept, so line and sentence ends stay where they were);
the text keeps its length, so a span found in the result is the same span in the
original. :data:`MASK` is neither a word character nor whitespace, so no pattern
reads across a blanked region ("May `x` 20" is not "May 20").

Code (kept with ``code=True``):

- Markdown fenced code blocks: a line that starts (after spaces, tabs and ``>``
  quote markers) with three or more backticks or tildes opens a block; the first
  later line holding only the same character, at least as many times (again after
  any indentation or quote markers, and before trailing spaces), closes it. Any
  indentation is accepted, since fences in list items are indented. An unclosed
  fence runs to the end of the text, as in CommonMark. A backtick fence whose
  info string holds a backtick ("```x``` y") is not a fence.
- Inline code spans: a run of backticks up to the next run of the same length in
  the same paragraph (a blank line ends a paragraph); a run with no partner is
  literal text. Found in one pass, so stray backticks cost linear time.
- ``<bash-input>…</bash-input>``: a shell command the user typed in Claude Code.

Tool output (kept with ``tool_output=True``): the elements a harness inserts into user text
for tool or hook output (Claude Code's ``<system-reminder>``,
``<local-command-stdout>``, ``<local-command-stderr>``, ``<bash-stdout>``,
``<bash-stderr>``, ``<task-notification>``, ``<user-prompt-submit-hook>``), from
the opening tag through the matching closing tag, or to the end of the text when
it is not closed.

Indented (four-space) code blocks are not recognised: in chat text indentation
is far more often a nested list than code.
"""

from __future__ import annotations

import bisect
import re

__all__ = ["CODE_TAGS", "MASK", "TOOL_OUTPUT_TAGS", "prose_only"]

MASK = "\x00"
"""What a blanked character becomes."""

CODE_TAGS: tuple[str, ...] = ("bash-input",)
"""Elements whose content is code a person typed."""

TOOL_OUTPUT_TAGS: tuple[str, ...] = (
    "system-reminder",
    "local-command-stdout",
    "local-command-stderr",
    "bash-stdout",
    "bash-stderr",
    "task-notification",
    "user-prompt-submit-hook",
)
"""Elements a harness puts in user text to carry tool or hook output."""

_FENCE_OPEN = re.compile(r"^[ \t]*(?:>[ \t]*)*(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$", re.M)
_TICKS = re.compile(r"`+")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_NOT_NEWLINE = re.compile(r"[^\n]")


def _tag_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(rf"<(?P<name>{'|'.join(map(re.escape, names))})>")


_CODE_TAG = _tag_pattern(CODE_TAGS)
_TOOL_TAG = _tag_pattern(TOOL_OUTPUT_TAGS)


def _fences(text: str) -> list[tuple[int, int]]:
    if "```" not in text and "~~~" not in text:
        return []
    spans: list[tuple[int, int]] = []
    pos = 0
    while (m := _FENCE_OPEN.search(text, pos)) is not None:
        fence = m.group("fence")
        if fence[0] == "`" and "`" in m.group("info"):
            pos = m.end() + 1
            continue
        close = re.compile(
            rf"^[ \t]*(?:>[ \t]*)*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M
        ).search(text, m.end())
        end = close.end() if close is not None else len(text)
        spans.append((m.start(), end))
        pos = end + 1
    return spans


def _inline_code(text: str) -> list[tuple[int, int]]:
    """Backtick code spans: each run of backticks pairs with the next run of the
    same length in its paragraph (right-to-left table of next partners, one pass)."""
    if "`" not in text:
        return []
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(text)]
    breaks = [m.start() for m in _PARAGRAPH_BREAK.finditer(text)]
    paragraph = [bisect.bisect_right(breaks, start) for start, _ in runs]
    partner: list[int | None] = [None] * len(runs)
    latest: dict[tuple[int, int], int] = {}
    for i in range(len(runs) - 1, -1, -1):
        key = (paragraph[i], runs[i][1] - runs[i][0])
        partner[i] = latest.get(key)
        latest[key] = i
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(runs):
        j = partner[i]
        if j is None:
            i += 1
            continue
        spans.append((runs[i][0], runs[j][1]))
        i = j + 1
    return spans


def _elements(text: str, tag: re.Pattern[str]) -> list[tuple[int, int]]:
    if "<" not in text:
        return []
    spans: list[tuple[int, int]] = []
    pos = 0
    while (m := tag.search(text, pos)) is not None:
        closing = f"</{m.group('name')}>"
        at = text.find(closing, m.end())
        end = len(text) if at < 0 else at + len(closing)
        spans.append((m.start(), end))
        pos = end
    return spans


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end in sorted(spans):
        start = max(start, pos)
        if start >= end:
            continue
        out.append(text[pos:start])
        out.append(_NOT_NEWLINE.sub(MASK, text[start:end]))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def prose_only(text: str, *, code: bool = False, tool_output: bool = False) -> str:
    """``text`` with code and harness tool output blanked out, same length, same
    offsets (see the module doc). ``code=True`` / ``tool_output=True`` keep that
    kind of text, as the :class:`~ctxwise.memory.FactExtractor` flags of those names do."""
    if not code:  # fences first: a tag or a backtick inside a fence is code
        text = _blank(text, _fences(text))
    if not tool_output:
        text = _blank(text, _elements(text, _TOOL_TAG))
    if not code:
        text = _blank(text, _elements(text, _CODE_TAG))
        text = _blank(text, _inline_code(text))
    return text
