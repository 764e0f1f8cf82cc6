"""What a summary retains: the hard-to-reconstruct specifics of the text it replaced.

A summary that keeps the gist but loses the order number, the file path or the
exact error message forces the agent to redo work (or to guess). This module
lists the *specifics* of a text and checks which of them a summary still holds:

- ``path``: a file path (``lib/app/session_live.ex``, ``src/x.py``) or a file name
  with a common extension (``app.js``); a path counts as kept when the summary
  holds it whole or holds its file name (generous to summaries that shorten);
- ``id``: a token mixing letters and digits (``spotter-gqc.1``, ``W4417``, a
  commit hash ``8cc42b0``, a uuid);
- ``number``: a number of two or more digits that is not part of an id or a path
  (``397`` tests, ``4,417``, ``12.50``). The line-number gutter of tool output
  (``    57→code`` as Claude Code's Read prints it, ``cat -n``'s ``57<tab>``) is not
  a specific: it says where a line was in a file, not what it said, and a summary
  of bare gutter lines would score without keeping anything (``count_gutters=True``
  counts them, for comparison with figures measured that way);
- ``error``: the message of an error line (what follows ``error:``, ``Error:``,
  ``** (CompileError)``, ``failed:`` …), first 60 characters, whitespace folded,
  kept when the summary holds its first 40 characters.

Matching is on normalized text (case-folded, whitespace folded), so a summary
gets credit for a specific wherever it states it, as a token of its own: a longer
id or file name does not hold it (``W44170`` does not keep ``W4417``, nor
``zapp.py`` ``app.py``). :func:`retention` returns the
specifics by kind and origin (conversation text vs tool output), and which a
summary kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ctxwise.errors import UsageError
from ctxwise.messages import (
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    block_text,
    check_messages,
)

__all__ = ["Retention", "Specific", "SpecificKind", "retention", "specifics"]

SpecificKind: TypeAlias = Literal["path", "id", "number", "error"]
Origin: TypeAlias = Literal["conversation", "tool_output"]

_EXT = (
    "py|pyi|js|jsx|ts|tsx|mjs|cjs|ex|exs|heex|eex|erl|rb|go|rs|java|kt|c|h|cc|cpp|hpp|cs|"
    "swift|php|sh|bash|zsh|sql|md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|conf|lock|csv|"
    "html|css|scss|vue|svelte|xml|proto|gradle|env|log"
)
_PATH = re.compile(
    r"(?<![\w@:/.-])(?:~|\.{1,2})?/?(?:[\w@.+-]+/)+[\w@.+-]*[A-Za-z][\w@.+-]*"
    rf"|(?<![\w/.-])[\w+-]+(?:\.[\w+-]+)*\.(?:{_EXT})\b",
)
_ID = re.compile(
    r"(?<![\w.-])(?=[\w.-]*\d)(?=[\w.-]*[A-Za-z])[A-Za-z0-9][\w.-]*[A-Za-z0-9](?![\w-])"
)
_NUMBER = re.compile(
    r"(?<![\w.,-])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.,-])\d{2,}(?:\.\d+)?(?![\w])"
)
_ERROR = re.compile(
    r"(?:\b(?:error|exception|failed|failure|panic|fatal)\b\s*[:!-]"
    r"|\*\*\s*\(\w+(?:Error|Exception)\))\s*(?P<msg>\S[^\n]*)",
    re.IGNORECASE,
)
_SPACE = re.compile(r"\s+")
_GUTTER = re.compile(r"^[ \t]*\d+[→\t]", re.MULTILINE)


def _fold(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


@dataclass(frozen=True, slots=True)
class Specific:
    """One specific: its kind and normalized value (``key``)."""

    kind: SpecificKind
    key: str


def specifics(text: str) -> set[Specific]:
    """The specifics of ``text`` (see the module doc)."""
    if not isinstance(text, str):
        raise UsageError(f"specifics() reads text, got {type(text).__name__}")
    found: set[Specific] = set()
    taken = bytearray(len(text))  # 1 where a path or an id was read (linear, not per match)
    for m in _PATH.finditer(text):
        value = m.group().rstrip(".,:;)'\"")
        if "/" in value and not re.search(r"[A-Za-z]{2}", value.rsplit("/", 1)[-1] or "x"):
            continue  # a date like 12/05/2024 or a fraction, not a path
        if value.startswith(("http://", "https://")) or "//" in value:
            continue
        found.add(Specific("path", _fold(value)))
        taken[m.start() : m.end()] = b"\x01" * (m.end() - m.start())
    for m in _ID.finditer(text):
        if taken[m.start()]:
            continue
        value = m.group()
        if len(value) < 4 or value.replace(".", "").isdigit():
            continue
        found.add(Specific("id", _fold(value)))
        taken[m.start() : m.end()] = b"\x01" * (m.end() - m.start())
    for m in _NUMBER.finditer(text):
        if taken[m.start()]:
            continue
        found.add(Specific("number", m.group().replace(",", "")))
    for m in _ERROR.finditer(text):
        msg = _fold(m["msg"])[:60]
        if len(msg) >= 8:
            found.add(Specific("error", msg))
    return found


def _stated(value: str, folded: str, before: str) -> bool:
    """``value`` appears in ``folded`` as a token of its own: not inside a longer id
    or file name (``w4417`` is not in ``w44170``, ``app.py`` not in ``zapp.py``)."""
    pattern = rf"(?<![{before}]){re.escape(value)}(?![\w@+-]|\.\w)"
    return re.search(pattern, folded) is not None


def _kept(spec: Specific, folded: str, summary_specifics: set[Specific]) -> bool:
    if spec in summary_specifics:
        return True
    if spec.kind == "error":
        return spec.key[:40] in folded
    if spec.kind == "path":
        name = spec.key.rsplit("/", 1)[-1]
        # the file name may follow another folder: generous to summaries that shorten
        return _stated(spec.key, folded, r"\w@.+/-") or (
            "." in name and _stated(name, folded, r"\w@.+-")
        )
    if spec.kind == "number":
        plain = folded.replace(",", "")
        return re.search(rf"(?<![\d.]){re.escape(spec.key)}(?!\d)", plain) is not None
    return _stated(spec.key, folded, r"\w.-")


def _origin_texts(
    messages: Sequence[Message], count_gutters: bool = False
) -> Iterable[tuple[Origin, str]]:
    for m in messages:
        for b in m.content:
            if isinstance(b, ToolResultBlock):
                text = block_text(b)
                yield "tool_output", text if count_gutters else _GUTTER.sub("", text)
            elif isinstance(b, TextBlock | ToolUseBlock):
                yield "conversation", block_text(b)


@dataclass(frozen=True, slots=True)
class Retention:
    """The specifics of a range and which of them a summary kept."""

    present: dict[Origin, frozenset[Specific]]
    kept: dict[Origin, frozenset[Specific]]

    def counts(self) -> dict[str, Any]:
        """``{origin: {kind: [kept, present]}}`` plus ``total``: ``[kept, present]``."""
        out: dict[str, Any] = {}
        for origin, items in self.present.items():
            by_kind: dict[str, list[int]] = {}
            for s in items:
                row = by_kind.setdefault(s.kind, [0, 0])
                row[1] += 1
                row[0] += s in self.kept[origin]
            out[origin] = {k: by_kind[k] for k in sorted(by_kind)}
        every = frozenset().union(*self.present.values())
        kept_any = frozenset().union(*self.kept.values())
        out["total"] = [len(kept_any & every), len(every)]
        return out


def retention(
    messages: Sequence[Message], summary: str, *, count_gutters: bool = False
) -> Retention:
    """Which specifics of ``messages`` the ``summary`` holds, by origin.

    A specific seen both in the conversation and in tool output counts under
    ``conversation`` only (the conversation is where the agent stated it).
    """
    if not isinstance(summary, str):
        raise UsageError(f"the summary is text, got {type(summary).__name__}")
    check_messages(messages)
    folded = _fold(summary)
    in_summary = specifics(summary)
    conversation: set[Specific] = set()
    tool_output: set[Specific] = set()
    for origin, text in _origin_texts(messages, count_gutters):
        (conversation if origin == "conversation" else tool_output).update(specifics(text))
    tool_output -= conversation
    present: dict[Origin, frozenset[Specific]] = {
        "conversation": frozenset(conversation),
        "tool_output": frozenset(tool_output),
    }
    kept = {
        origin: frozenset(s for s in items if _kept(s, folded, in_summary))
        for origin, items in present.items()
    }
    return Retention(present, kept)
