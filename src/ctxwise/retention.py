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

Retention scores a summary against everything the range held, whether or not it
is ever needed again. :func:`future_reference_recall` asks what was needed: at a
compaction point of a real session, of the paths, identifiers, numbers and names
(:func:`references`, a plainer reading than :func:`specifics`) that the user or
the agent writes *after* the point and that only the summarized range held, the
share the compacted window still holds. No summarizer ranks by either function:
the figures stay measurements (``benchmarks/bench_retention.py`` runs both).
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
from ctxwise.text import STOPWORDS

__all__ = [
    "FutureRecall",
    "Reference",
    "ReferenceKind",
    "Retention",
    "Specific",
    "SpecificKind",
    "future_reference_recall",
    "references",
    "retention",
    "specifics",
]

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


# --------------------------------------------------------------------------- future references

ReferenceKind: TypeAlias = Literal["path", "identifier", "number", "name"]


@dataclass(frozen=True, slots=True)
class Reference:
    """One reference: its kind and the ``key`` it is matched by (case-folded; a
    file path by its file name, see :func:`references`)."""

    kind: ReferenceKind
    key: str


_URL = re.compile(r"\bhttps?://[^\s<>\"'`)\]]+")
_TICKED = re.compile(r"`([^`\s]{2,80})`")
_TOKEN = re.compile(r"\w[\w.-]*")
_CAMEL = re.compile(r"[a-z][A-Z]")
_DOTTED = re.compile(r"\w\w\.[^\W\d]")
_LETTER_AND_DIGIT = re.compile(r"^(?=.*\d)(?=.*[^\W\d_])")
_VERSION = re.compile(r"\d+(?:\.\d+){2,}")
_NAME = re.compile(r"[A-Z][a-z]{2,}")
_TRAIL = ".,:;-"
_ESCAPED_BREAK = re.compile(r"\\[nrt]")


def _path_key(value: str) -> str:
    folded = _fold(value).rstrip("/")
    name = folded.rsplit("/", 1)[-1]
    return name if "." in name.strip(".") else folded


def _word_kind(token: str) -> ReferenceKind | None:
    """``identifier`` for a token written like code, else ``None``."""
    if (
        "_" in token.strip("_")
        or _CAMEL.search(token)
        or _DOTTED.search(token)
        or "-" in token.strip("-")
        or (len(token) >= 3 and _LETTER_AND_DIGIT.match(token))
        or _VERSION.fullmatch(token)
    ):
        return "identifier"
    return None


def _mid_sentence(text: str, at: int) -> bool:
    """Whether the word at ``at`` follows a letter, a digit or a comma (not the
    start of a sentence, a line, a quote or a list item)."""
    i = at - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i >= 0 and (text[i].isalnum() or text[i] == ",")


def references(text: str) -> set[Reference]:
    """The paths, identifiers, numbers and names ``text`` refers to.

    - ``path``: a file path or file name (the :func:`specifics` pattern) or a URL;
      keyed by its file name when it has one with an extension (``lib/a/x.ex`` and
      ``/home/u/p/lib/a/x.ex`` are one reference), else by the whole path;
    - ``identifier``: a token written like code: with an underscore, a dot inside
      (``Spotter.Repo``, ``conn.assigns``), a hyphen inside (``spotter-gqc``),
      letters and digits mixed (``W4417``, a hash, ``spotter-gqc.6``), a lower-case
      letter before a capital (``ProjectReviewLive``), or a version ``1.2.3``;
    - ``number``: two or more digits, not part of a path or an identifier;
    - ``name``: a short code span in backticks (`` `credo` ``), or a capitalised
      word inside a sentence (``… with Phoenix``).

    Text inside JSON (a tool call's input) reads as its strings would: an escaped
    line break (``\\n``) separates words, and an object key (``"file_path":``)
    names a field, not a reference. Keys are case-folded. It is a plain reading of
    the text, the same for every summary and session, and the summarizers do not
    use it.
    """
    if not isinstance(text, str):
        raise UsageError(f"references() reads text, got {type(text).__name__}")
    found: set[Reference] = set()
    text = _ESCAPED_BREAK.sub(" ", text).replace('\\"', '"')
    taken = bytearray(len(text))

    def take(start: int, end: int) -> None:
        taken[start:end] = b"\x01" * (end - start)

    for m in _URL.finditer(text):
        found.add(Reference("path", _fold(m.group().rstrip(".,:;'\""))))
        take(m.start(), m.end())
    for m in _PATH.finditer(text):
        if taken[m.start()]:
            continue
        value = m.group().rstrip(".,:;)'\"")
        if "/" in value and not re.search(r"[A-Za-z]{2}", value.rsplit("/", 1)[-1] or "x"):
            continue  # a date like 12/05/2024 or a fraction, not a path
        found.add(Reference("path", _path_key(value)))
        take(m.start(), m.end())
    for m in _TICKED.finditer(text):
        if taken[m.start(1)]:
            continue
        span = m[1].strip(_TRAIL)
        if len(span) >= 2 and any(c.isalpha() for c in span):
            found.add(Reference(_word_kind(span) or "name", _fold(span)))
            take(m.start(), m.end())
    for m in _NUMBER.finditer(text):
        if not taken[m.start()]:
            found.add(Reference("number", m.group().replace(",", "")))
            take(m.start(), m.end())
    for m in _TOKEN.finditer(text):
        if taken[m.start()] or text.startswith('":', m.end()):
            continue  # read already, or a JSON object's key
        token = m.group().rstrip(_TRAIL)
        kind = _word_kind(token)
        if kind is not None:
            found.add(Reference(kind, _fold(token)))
        elif (
            _NAME.fullmatch(token)
            and _mid_sentence(text, m.start())
            and token.casefold() not in STOPWORDS
        ):
            found.add(Reference("name", token.casefold()))
    return found


_HARNESS_ELEMENT = re.compile(r"<([a-z][\w-]*)>.*?</\1>", re.DOTALL)
"""An element a harness wraps into user text (``<system-reminder>…</…>``,
``<task-notification>…</…>``): shown to the agent, not written by the user."""


def _shown_and_written(message: Message) -> tuple[list[str], list[str]]:
    """The texts of ``message`` the session was shown (tool results, system text,
    harness elements) and those the user or the agent wrote (text, thinking, tool
    calls)."""
    shown: list[str] = []
    written: list[str] = []
    for b in message.content:
        if isinstance(b, ToolResultBlock):
            shown.append(_GUTTER.sub("", block_text(b)))
            continue
        text = block_text(b)
        if message.role == "system":
            shown.append(text)
        elif isinstance(b, TextBlock) and message.role == "user":
            shown.extend(m.group() for m in _HARNESS_ELEMENT.finditer(text))
            written.append(_HARNESS_ELEMENT.sub(" ", text))
        else:
            written.append(text)
    return shown, written


def _all_references(messages: Sequence[Message]) -> set[Reference]:
    found: set[Reference] = set()
    for m in messages:
        shown, written = _shown_and_written(m)
        for text in (*shown, *written):
            found |= references(text)
    return found


@dataclass(frozen=True, slots=True)
class FutureRecall:
    """At one compaction point: ``needed``, the references the session uses after
    it that only the summarized range held, and ``held``, those of them the
    compacted window still holds."""

    needed: frozenset[Reference]
    held: frozenset[Reference]

    @property
    def recall(self) -> float | None:
        """``held / needed``; ``None`` when nothing was needed."""
        return len(self.held) / len(self.needed) if self.needed else None

    def counts(self) -> dict[str, list[int]]:
        """``{kind: [held, needed]}`` plus ``total``."""
        out: dict[str, list[int]] = {}
        for r in self.needed:
            row = out.setdefault(r.kind, [0, 0])
            row[1] += 1
            row[0] += r in self.held
        return {**{k: out[k] for k in sorted(out)}, "total": [len(self.held), len(self.needed)]}


def future_reference_recall(
    summarized: Sequence[Message],
    after: Sequence[Message],
    window: str,
    *,
    kept: Sequence[Message] = (),
    reread: bool = False,
) -> FutureRecall:
    """How many of the references the session uses after a compaction point the
    compacted window still holds.

    ``summarized`` are the messages the compaction replaced, ``kept`` the ones it
    left verbatim (the tail, the system part), ``window`` the text that replaced
    the range (the summary, a pinned block), and ``after`` the messages that came
    after the compaction point. A reference is *used* after the point when the
    user or the agent writes it there: in text (harness elements left out), in
    thinking or in a tool call's input. It is *needed* when the summarized range
    has it and the kept messages do not: only the compaction decides whether the
    window still has it. It is *held* when ``window`` has it (:func:`references`,
    the same reading for every summary).

    By default a reference that a tool result, system text or a harness element
    after the point showed before its first written use is not needed: the agent
    could read it there. ``reread=True`` counts every written use.
    """
    if not isinstance(window, str):
        raise UsageError(f"the window is text, got {type(window).__name__}")
    for name, value in (("summarized", summarized), ("after", after), ("kept", kept)):
        check_messages(value, name)
    before = _all_references(summarized) - _all_references(kept)
    used: set[Reference] = set()
    seen: set[Reference] = set()
    for m in after:
        shown, written = _shown_and_written(m)
        for text in written:
            used |= references(text) - (set() if reread else seen)
        for text in shown:
            seen |= references(text)
    needed = frozenset(used & before)
    return FutureRecall(needed, needed & frozenset(references(window)))
