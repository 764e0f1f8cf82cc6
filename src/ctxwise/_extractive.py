"""The extractive summarizer: a summary made of excerpts of the turns it folds,
chosen by salience (identifiers, numbers, errors, instructions) under a token
budget, each tagged with the message it came from (:func:`format_excerpt`).
:mod:`ctxwise.summarize` holds the ``Summarizer`` protocol and re-exports these."""

from __future__ import annotations

import heapq
import itertools
import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

from ctxwise.errors import UsageError
from ctxwise.messages import (
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    block_text,
    check_messages,
)
from ctxwise.text import normalize
from ctxwise.tokens import DEFAULT_MARKER, CharCounter, TokenCounter

__all__ = [
    "CUT_LEFT",
    "CUT_RIGHT",
    "Excerpt",
    "ExtractiveSummarizer",
    "check_input",
    "counter_or_default",
    "format_excerpt",
    "parse_excerpt",
]

# --------------------------------------------------------------------------- excerpts

CUT_RIGHT = DEFAULT_MARKER
"""Ends an excerpt cut before the end of its line (the marker of
:func:`~ctxwise.tokens.truncate_to_tokens`)."""
CUT_LEFT = DEFAULT_MARKER.strip() + " "
"""Starts an excerpt cut after the start of its line."""

_LEFT_CHARS = len(CUT_LEFT)
_RIGHT_CHARS = len(CUT_RIGHT)
_SNAP_CHARS = 8
"""A window reaches the end of its line when no more than this many characters are
left there: a short word reads better than a cut marker that saves little."""
_EXCERPT = re.compile(r"\[m(\d+) ([^\]\n]+)\] (.*)")


@dataclass(frozen=True, slots=True)
class Excerpt:
    """One summary line: message number ``index``, ``who`` said it (``user``,
    ``assistant``, ``system``, ``<tool> call``, ``<tool> result``), and ``text``, a
    verbatim piece of that message's block (with :data:`CUT_LEFT` / :data:`CUT_RIGHT`
    where it was cut out of a longer line)."""

    index: int
    who: str
    text: str


def format_excerpt(index: int, who: str, text: str) -> str:
    """One summary line: ``[m<index> <who>] <text>``."""
    return f"[m{index} {who}] {text}"


def parse_excerpt(line: str) -> Excerpt | None:
    """The origin and text of a summary line, ``None`` for a line of another shape."""
    m = _EXCERPT.fullmatch(line)
    return Excerpt(int(m[1]), m[2], m[3]) if m else None


def _uncut(text: str) -> tuple[str, bool, bool]:
    """An excerpt's verbatim text and whether it was cut at the left, the right."""
    left = text.startswith(CUT_LEFT)
    if left:
        text = text[len(CUT_LEFT) :]
    right = text.endswith(CUT_RIGHT)
    if right:
        text = text[: -len(CUT_RIGHT)]
    return text, left, right


# --------------------------------------------------------------------------- reading

# An *atom* is a run of the characters a detail (path, name, number) is written
# with; every other character, whitespace included, ends one. So the details of a
# text are exactly the union of its atoms' (errors aside), and an excerpt cut at
# atom boundaries holds the same details as its source. Only atoms with a digit, a
# slash, a dot, an underscore or a lower-case letter before a capital can hold one;
# the look-behind makes the scan linear (one attempt per atom).
_ATOM_CHARS = r"\w@.+\-/~:,"
_ATOM = re.compile(rf"(?<![{_ATOM_CHARS}])[{_ATOM_CHARS}]*?(?:[\d/._]|[a-z][A-Z])[{_ATOM_CHARS}]*")
_DATA_ATOM = re.compile(rf"(?<![{_ATOM_CHARS}])[{_ATOM_CHARS}]*?[\d/.][{_ATOM_CHARS}]*")
"""The atoms of tool output, where names written like code are no details: only
an atom with a digit, a slash or a dot can hold one there."""
_PARTS = re.compile(r":|,(?!\d{3}(?!\d))")
"""Where an atom splits into details (``lib/a.ex:12:5`` → the path, ``12``, ``5``);
a comma between digit groups (``4,417``) does not split."""
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)*")
_CAMEL = re.compile(r"[a-z][A-Z]")
_DOT_INSIDE = re.compile(r"\w\.[^\W\d]")
_HAS_LETTER = re.compile(r"[^\W\d_]")
_DIGITS = re.compile(r"\d")
_BREAK = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_ERROR_WORD = re.compile(
    r"\b(?:error|exception|failed|failure|panic|fatal)\b\s*[:!-]"
    r"|\*\*\s*\(\w+(?:error|exception)\)"
)
"""Where an error message may start, matched on lower-cased text."""
_ERROR_MESSAGE = re.compile(rf"(?:{_ERROR_WORD.pattern})\s*(?P<msg>\S[^\n]*)", re.IGNORECASE)
"""An error message: what follows its error word on the line. It is one detail,
held by an excerpt with its first :data:`_ERROR_HELD` characters (whitespace
folded)."""
_ERROR_KEY = 60
_ERROR_HELD = 40
_ERROR_WORD_ANY_CASE = re.compile(_ERROR_WORD.pattern, re.IGNORECASE)
_ERROR_HINTS = ("rror", "RROR", "xception", "ail", "AIL", "anic", "atal", "ATAL")


def _error_positions(text: str) -> list[int]:
    if not any(h in text for h in _ERROR_HINTS):
        return []
    low = text.lower()
    if len(low) != len(text):  # lower-casing moved characters: match case-blind
        return [m.start() for m in _ERROR_WORD_ANY_CASE.finditer(text)]
    return [m.start() for m in _ERROR_WORD.finditer(low)]


_LETTER = re.compile(r"[^\W\d_]")
_NUMBERING = re.compile(r"[\W_]*(?:\d{1,3}[\W_]*)?")
"""A list number or punctuation alone (``1.``, ``-``, ``12)``): never a summary line."""
_GUTTER = re.compile(r"[ \t]*\d+[→\t]")
"""A line-number gutter, as file reads print (``  12→code``, ``cat -n``): in tool
output it tells where a line was, not what it said, so it is no detail to keep."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_STRIP = ".,;:()[]{}\"'`<>!?*"

_INSTRUCTION_WORDS = frozenset(
    {"never", "always", "must", "mustn't", "until", "unless", "only", "deadline"}
    | {"require", "required", "requires"}
)
_INSTRUCTION_PHRASES = (
    "do not",
    "don't",
    "should not",
    "shouldn't",
    "make sure",
    "be sure",
    "no later than",
    "from now on",
)
_NOT_INSTRUCTING = frozenset({"i", "we", "they", "he", "she", "it", "that", "this", "which"})
"""Subjects before "do not" / "don't" that make it a statement, not an instruction."""
_INSTRUCTION_WEIGHT = 8
"""An instruction weighs this many times the most salient detail: losing one
changes behaviour."""
_CONVERSATION_FACTOR = 2
"""A detail the user or the agent wrote (text or a tool call) weighs this many
times one only a tool printed at the end of the range (twice that at its start):
a tool call can fetch tool output again."""
_PROSE = frozenset(("user", "assistant", "system"))

_RUN_ATOMS = (1, 2, 4, 8)
"""A window spans this many neighbouring detail-bearing atoms (a longer run is
cheaper than as many windows, since each excerpt line pays its origin prefix; the
lengths double, so a line of many atoms gives a few windows per atom, not eight) …"""
_RUN_CHARS = 160
"""… and at most this many characters (one atom alone may be longer)."""
_SENTENCE_CHARS = 200
"""A sentence the user or the assistant said is kept whole up to this long; a
longer one may give windows too."""
_CONTEXT_CHARS = 32
"""A window without a letter (a bare number) grows by one word, if one is this near."""
_SCAN_CHARS = 320_000
"""Tool calls and results are read whole up to this many characters in all (about
80,000 tokens: half of a 150,000-token window, and what keeps a compaction of one
under its time target on two cores; ``bench_retention`` and ``bench_compaction``
give the figures). Past
it, a tool call is read by its first :data:`_CALL_CHARS` characters and a tool
result by its lines within as many characters at each end as keeps them all within
the rest: what a command reported and how it ended (errors, totals) sit there,
while the middle of a file or a log is what a tool call can fetch again. This
bounds the time of a call on a long range."""
_MIN_KEEP_CHARS = 200
_CALL_CHARS = 1000
"""A tool call is read by its first this many characters on a long range (its
input as JSON: the path, the command, the start of a file body)."""
_ERROR_CHARS = 120
"""An error line is kept from its error word on, this many characters at most."""


def _is_instruction(sentence: str) -> bool:
    """Whether a sentence instructs: an instruction word, or a phrase like "do not"
    that is not about the speaker or a third party ("I don't remember")."""
    folded = sentence.casefold()
    for phrase in _INSTRUCTION_PHRASES:
        at = folded.find(phrase)
        while at >= 0:
            before = folded[:at].split()
            if not before or before[-1].strip(_STRIP) not in _NOT_INSTRUCTING:
                return True
            at = folded.find(phrase, at + 1)
    return any(w.strip(_STRIP) in _INSTRUCTION_WORDS for w in folded.split())


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass(slots=True)
class _Line:
    """One line of a block (or of the previous summary) that may give excerpts."""

    index: int  # message number; -1 for an origin-less line of the previous summary
    who: str
    text: str
    order: tuple[int, int, int]  # transcript order
    cut_left: bool = False  # already an excerpt cut at that end
    cut_right: bool = False
    lo: int = 0  # the text without surrounding whitespace is text[lo:hi]
    hi: int = 0
    prefix: int = 0  # characters of the origin prefix
    chosen: list[tuple[int, int]] = field(default_factory=list)

    def pieces(self, extra: tuple[int, int] | None = None) -> list[tuple[int, int]]:
        """The chosen windows (plus ``extra``), close ones merged: a gap shorter than
        what a second excerpt line would cost is cheaper kept."""
        spans = sorted([*self.chosen, extra] if extra else self.chosen)
        merged: list[tuple[int, int]] = []
        gap = self.prefix + len(CUT_LEFT) + len(CUT_RIGHT) + 1
        for s, e in spans:
            if merged and s - merged[-1][1] <= gap:
                merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
            else:
                merged.append((s, e))
        return merged

    def render(self, s: int, e: int) -> str:
        if self.index < 0:
            return self.text
        left = CUT_LEFT if self.cut_left or s > self.lo else ""
        right = CUT_RIGHT if self.cut_right or e < self.hi else ""
        return format_excerpt(self.index, self.who, left + self.text[s:e] + right)

    def chars(self, s: int, e: int) -> int:
        """Characters of ``render(s, e)``, plus the newline."""
        if self.index < 0:
            return len(self.text) + 1
        left = _LEFT_CHARS if self.cut_left or s > self.lo else 0
        right = _RIGHT_CHARS if self.cut_right or e < self.hi else 0
        return self.prefix + left + (e - s) + right + 1


_Hit = tuple[int, int, tuple[str, ...]]  # an atom: start, end, its details
_Candidate = tuple[int, int, int, tuple[str, ...], int]  # line, start, end, units, chars


def _unit(kind: str, key: str) -> str:
    return kind + "\x00" + key


def _details(atom: str) -> tuple[str, ...]:
    """The details an atom names, as units: a URL whole; else each part between
    colons and commas that is a path (and its file name), a number of two or more
    digits, an id (letters mixed with digits), a dotted name (a file name,
    ``Spotter.Repo``) or a name written like code (an underscore, or a lower-case
    letter before a capital: unit kind ``code``)."""
    if "://" in atom:
        return (_unit("url", normalize(atom.strip(".,:;-"))),)
    found: list[str] = []
    for part in _PARTS.split(atom):
        core = part.strip(".-+~@")
        if len(core) < 2:
            continue
        if "/" in core:
            path = core.strip("/")
            if _HAS_LETTER.search(path):
                found.append(_unit("path", normalize(path)))
                name = path.rsplit("/", 1)[-1]
                if "." in name and name != path and _HAS_LETTER.search(name):
                    found.append(_unit("file", normalize(name)))
        elif _NUMBER.fullmatch(core):
            if len(_DIGITS.findall(core)) >= 2:
                found.append(_unit("number", core.replace(",", "")))
        elif len(core) >= 3 and _DIGITS.search(core) and _HAS_LETTER.search(core):
            found.append(_unit("id", normalize(core)))
        elif _DOT_INSIDE.search(core):
            found.append(_unit("name", normalize(core)))
        elif "_" in core.strip("_") or _CAMEL.search(core):
            found.append(_unit("code", normalize(core)))
    return tuple(dict.fromkeys(found))


class _Reader:
    """Turns blocks into lines and candidate windows, reading each atom once."""

    def __init__(self) -> None:
        self.lines: list[_Line] = []
        self.candidates: list[_Candidate] = []
        self.plain: list[tuple[int, int, int]] = []  # prose sentences without a detail
        self.instructions: set[str] = set()
        # per unit: [messages that hold it, the last of them, written by user or agent]
        self.seen_in: dict[str, list[int]] = {}
        self._atoms: dict[str, tuple[str, ...]] = {}
        self._printed: dict[str, tuple[str, ...]] = {}
        self._seen: set[tuple[str, str]] = set()

    def hits(self, text: str, printed: bool = False) -> list[_Hit]:
        """The atoms of ``text`` that hold details. In what a tool ``printed`` (a
        tool result), names written like code (``code`` units: the identifiers of a
        file read, which a tool call can fetch again) are not details; the user's and
        the agent's own use of a name is what marks it. A JSON key is no detail."""
        hits = []
        atoms = self._printed if printed else self._atoms
        for m in (_DATA_ATOM if printed else _ATOM).finditer(text):
            end = m.end()
            if text.startswith('":', end):
                continue  # a JSON key (a tool call's "file_path"): a field's name, not a detail
            atom = m.group()
            units = atoms.get(atom)
            if units is None:
                if printed:
                    units = self._atoms.get(atom)
                    if units is None:
                        units = self._atoms[atom] = _details(atom)
                    units = tuple(u for u in units if not u.startswith("code\x00"))
                else:
                    units = _details(atom)
                atoms[atom] = units
            if units:
                hits.append((m.start(), end, units))
        return hits

    def mention(self, index: int, hits: Sequence[_Hit], written: bool) -> None:
        """Message ``index`` holds the details of ``hits`` (``written``: the user or
        the agent wrote them). Messages come in order, so a new index is a new
        message."""
        seen_in = self.seen_in
        for hit in hits:
            for u in hit[2]:
                row = seen_in.get(u)
                if row is None:
                    seen_in[u] = [1, index, written]
                else:
                    if row[1] != index:
                        row[0] += 1
                        row[1] = index
                    if written:
                        row[2] = True

    def block(self, index: int, who: str, text: str, block_no: int, cut: bool = False) -> None:
        """Candidates from one block's ``text`` (``cut``: only its start was given)."""
        hits = self.hits(text, who.endswith(" result"))
        prose = who in _PROSE
        errors = _error_positions(text)
        if not hits and not prose and not errors:
            return
        rows = text.splitlines()
        if len(rows) == 1:
            starts = [0]
        else:
            starts = [0, *itertools.accumulate(map(len, text.splitlines(keepends=True)))]
        by_line: dict[int, list[_Hit]] = {}
        if len(rows) == 1:
            if hits:
                by_line[0] = hits
            wanted: Sequence[int] = [0]
        else:
            for hit in hits:
                by_line.setdefault(bisect_right(starts, hit[0]) - 1, []).append(hit)
            if prose:
                wanted = range(len(rows))
            else:
                wanted = sorted({*by_line, *(bisect_right(starts, e) - 1 for e in errors)})
        seen = self._seen
        written = prose or who.endswith(" call")
        if len(rows) == 1:
            error_rows = {0} if errors else set()
        else:
            error_rows = {bisect_right(starts, e) - 1 for e in errors}
        for j in wanted:
            line = rows[j]
            if not line.strip():
                continue
            line_hits = by_line.get(j, [])
            s0 = starts[j]
            if line_hits and not prose and line_hits[0][0] - s0 <= 16:
                gutter = _GUTTER.match(line)
                if gutter is not None and line_hits[0][1] - s0 == gutter.end() - 1:
                    line_hits = line_hits[1:]  # a line number, not a detail
            if line_hits:
                self.mention(index, line_hits, written)
            key = (who, line)
            if key in seen:
                continue  # a line said twice is read once (its first time)
            seen.add(key)
            if s0:
                line_hits = [(s - s0, e - s0, u) for s, e, u in line_hits]
            row = _Line(
                index, who, line, (index, block_no, j), cut_right=cut and j == len(rows) - 1
            )
            self.line(row, line_hits, prose, j in error_rows)

    def line(self, line: _Line, hits: list[_Hit], prose: bool, error: bool = True) -> None:
        """Candidates from one line; ``error``: it may hold an error message."""
        text = line.text
        line.lo = len(text) - len(text.lstrip())
        line.hi = len(text.rstrip())
        if line.index >= 0:
            line.prefix = len(str(line.index)) + len(line.who) + 4  # "[m", " ", "] "
        n = len(self.lines)
        self.lines.append(line)
        if line.index < 0:  # the previous summary's own words: whole, as they are
            whole = [u for _, _, us in hits for u in us]
            if _is_instruction(text):
                whole.append(_unit("instruction", _fold(text)))
                self.instructions.add(whole[-1])
            if whole:
                units = tuple(dict.fromkeys(whole))
                self.candidates.append((n, line.lo, line.hi, units, line.chars(line.lo, line.hi)))
            else:
                self.plain.append((n, line.lo, line.hi))
            return
        if error and _error_positions(text):
            self.errors(n, line, hits)
        if prose:
            self.sentences(n, line, hits)
        else:
            self.windows(n, line, hits)

    def windows(self, n: int, line: _Line, hits: list[_Hit]) -> None:
        """A window over each run of neighbouring atoms that hold details, worth the
        details of every atom inside it once grown (see :meth:`window`); runs that
        grow to the same window give it once."""
        add = self.candidates.append
        k = len(hits)
        done: set[tuple[int, int]] = set()
        for i in range(k):
            start = hits[i][0]
            for length in _RUN_ATOMS:
                j = i + length - 1
                if j >= k:
                    break
                end = hits[j][1]
                if j > i and end - start > _RUN_CHARS:
                    break
                window = self.window(line, start, end)
                if window is None or window in done:
                    continue
                done.add(window)
                s, e = window
                a, b = i, j + 1  # the atoms inside the grown window: i..j and any it reached
                while a > 0 and hits[a - 1][0] >= s:
                    a -= 1
                while b < k and hits[b][1] <= e:
                    b += 1
                if b - a == 1:
                    units = hits[a][2]
                else:
                    units = tuple(dict.fromkeys(u for h in hits[a:b] for u in h[2]))
                add((n, s, e, units, line.chars(s, e)))

    def window(self, line: _Line, s: int, e: int) -> tuple[int, int] | None:
        """``[s, e)`` grown to the line's ends when a cut marker would cost more, and by
        one word when it holds no letter; ``None`` when it stays numbering only."""
        text, lo, hi = line.text, line.lo, line.hi
        if s - lo <= _SNAP_CHARS:
            s = lo
        if hi - e <= _SNAP_CHARS:
            e = hi
        if _LETTER.search(text, s, e) is not None:
            while text[e - 1].isspace():  # a cut at a space (an error line's end)
                e -= 1
            return s, e
        m = _LETTER.search(text, e, min(hi, e + _CONTEXT_CHARS))
        if m is not None:
            stop = text.find(" ", m.end(), hi)
            e = hi if stop < 0 or hi - stop <= _SNAP_CHARS else stop
        else:
            lead = text[max(lo, s - _CONTEXT_CHARS) : s]
            found = [x.start() for x in _LETTER.finditer(lead)]
            if found:
                s = text.rfind(" ", lo, s - len(lead) + found[-1]) + 1 or lo
                if s - lo <= _SNAP_CHARS:
                    s = lo
        while e > s and text[e - 1].isspace():
            e -= 1
        if _NUMBERING.fullmatch(text, s, e):
            return None
        return s, e

    def errors(self, n: int, line: _Line, hits: list[_Hit]) -> None:
        """An error line from the word before its error word on (its message is a
        detail, held when the excerpt holds its first :data:`_ERROR_HELD`
        characters)."""
        text = line.text
        keys = [
            key
            for m in _ERROR_MESSAGE.finditer(text)
            if len(key := _fold(m["msg"])[:_ERROR_KEY]) >= 8
        ]
        if not keys:
            return
        at = _error_positions(text)[0]
        s = text.rfind(" ", line.lo, at) + 1 or line.lo
        e = min(line.hi, s + _ERROR_CHARS)
        if e < line.hi:
            space = text.rfind(" ", s, e)
            e = space if space > s else e
        window = self.window(line, s, e)
        if window is None:
            return
        s, e = window
        folded = _fold(text[s:e])
        found = [_unit("error", k) for k in keys if k[:_ERROR_HELD] in folded]
        if found:
            self.mention(line.index, [(s, e, tuple(found))], line.who in _PROSE)
            found += [u for a, b, us in hits if s <= a and b <= e for u in us]
            self.candidates.append((n, s, e, tuple(dict.fromkeys(found)), line.chars(s, e)))

    def sentences(self, n: int, line: _Line, hits: list[_Hit]) -> None:
        """What the user, the assistant or the system said: whole sentences, and
        windows too inside a sentence longer than :data:`_SENTENCE_CHARS`."""
        text = line.text
        cuts = [line.lo]
        for m in _SENTENCE_END.finditer(text, line.lo, line.hi):
            if not _NUMBERING.fullmatch(text, cuts[-1], m.start()):  # "1. Do x": one
                cuts.append(m.end())
        cuts.append(line.hi)
        starts = [h[0] for h in hits]  # in text order: a sentence's hits are a run
        for s, e in itertools.pairwise(cuts):
            e = len(text[s:e].rstrip()) + s
            if e <= s or _NUMBERING.fullmatch(text, s, e):
                continue
            inside = []
            i = bisect_left(starts, s)
            while i < len(hits) and hits[i][0] < e:
                if hits[i][1] <= e:
                    inside.append(hits[i])
                i += 1
            if e - s > _SENTENCE_CHARS:
                self.windows(n, line, inside)
            found = [u for _, _, us in inside for u in us]
            if line.who == "user" and _is_instruction(text[s:e]):
                found.append(_unit("instruction", _fold(text[s:e])))
                self.instructions.add(found[-1])
            if found:
                self.candidates.append((n, s, e, tuple(dict.fromkeys(found)), line.chars(s, e)))
            elif line.who != "system":
                self.plain.append((n, s, e))


def _salience(reader: _Reader) -> dict[str, float]:
    """Each detail's weight: ``(1 + log2 m) × w``, where ``m`` is how many messages
    hold it (the session came back to it) and ``w`` says who: what the user or the
    agent wrote (text or a tool call) weighs :data:`_CONVERSATION_FACTOR` and stands
    until they say otherwise; what only a tool printed weighs ``(1 + r) / 2``, where
    ``r`` is how late the last message holding it is in the range (0 at its first
    message, 1 at its last): a later run of a tool supersedes an earlier one, and a
    tool call can fetch it again. Repetition is counted in messages, not lines, so a
    name that fills one file read weighs no more than one said once; rarity is not
    rewarded, since a one-off token in a log is usually noise. An instruction weighs
    :data:`_INSTRUCTION_WEIGHT` times the heaviest detail."""
    indices = [line.index for line in reader.lines if line.index >= 0]
    lo, hi = (min(indices), max(indices)) if indices else (0, 0)
    span = hi - lo
    weights: dict[str, float] = {}
    for unit, (messages, last, written) in reader.seen_in.items():
        if written:
            who = float(_CONVERSATION_FACTOR)
        else:
            who = (1.0 + ((max(last, lo) - lo) / span if span else 1.0)) / 2
        weights[unit] = (1.0 + math.log2(messages)) * who
    top = max(weights.values(), default=1.0)
    for unit in reader.instructions:
        weights[unit] = _INSTRUCTION_WEIGHT * top
    return weights


def _char_capacity(counter: TokenCounter, budget: int) -> int | None:
    """The characters ``budget`` tokens hold when ``counter`` is a
    :class:`~ctxwise.tokens.CharCounter` (its count depends on the length only),
    ``None`` for any other counter."""
    if type(counter) is not CharCounter:
        return None
    cap = int(budget * 4 / (1 + counter.safety_margin)) + 2
    while cap > 0 and counter.count("x" * cap) > budget:
        cap -= 1
    return cap


def _head_and_tail(text: str, keep: int) -> tuple[str, bool]:
    """A tool result's lines within its first and last ``keep`` characters, the
    middle left out as one empty line (so its lines stay verbatim and in order); and
    whether the text returned ends inside a line (a first line longer than ``keep``)."""
    if len(text) <= 2 * keep:
        return text, False
    head = text.rfind("\n", 0, keep)
    if head < 0:
        end = max(text.rfind(" ", 0, keep), text.rfind('"', 0, keep))
        return text[: max(end, 1)], True
    tail = text.find("\n", len(text) - keep)
    if tail < 0 or tail <= head:
        return text[:head], False
    return text[:head] + "\n\n" + text[tail + 1 :], False


def _keep_chars(results: Sequence[str], room: int) -> int:
    """The most characters at each end of a tool result that keep all of them within
    ``room`` characters (at least :data:`_MIN_KEEP_CHARS`)."""
    lo, hi = _MIN_KEEP_CHARS, max((len(t) for t in results), default=0) // 2 + 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(len(t), 2 * mid) for t in results) <= room:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _tool_name(name: str | None) -> str:
    if not name or "]" in name or _BREAK.search(name) or not name.strip():
        return "tool"
    return name


def counter_or_default(counter: TokenCounter | None) -> TokenCounter:
    if counter is None:
        return CharCounter()
    if not isinstance(counter, TokenCounter):
        raise UsageError(f"counter is a TokenCounter or None, got {type(counter).__name__}")
    return counter


def check_input(previous: str, turns: Sequence[Message]) -> None:
    """A :class:`UsageError` unless ``previous`` is text and ``turns`` a sequence of
    :class:`~ctxwise.messages.Message` (not one message, a string or dicts)."""
    if not isinstance(previous, str):
        raise UsageError(
            f"the previous summary is text ('' for none), got {type(previous).__name__}"
        )
    check_messages(turns, "turns")


class ExtractiveSummarizer:
    """Verbatim excerpts that carry details and instructions, in order, under a budget.

    Each line is ``format_excerpt(index, who, text)``: message number ``first_index
    + i`` for ``turns[i]``; ``who`` is the role for text, ``<tool> call`` for a tool
    call (its input as compact JSON, as :func:`~ctxwise.messages.block_text` gives
    it) and ``<tool> result`` for a tool result (``tool`` when the call is not in
    ``turns``); ``text`` a contiguous piece of one line of that block, marked with
    :data:`CUT_LEFT` / :data:`CUT_RIGHT` where it was cut out of a longer line.
    Thinking, images and opaque blocks are not read. No line is empty or a bare list
    number or punctuation; a bare number grows by its neighbouring word.

    Selection is a budgeted greedy cover (lazy: a gain only shrinks as the summary
    covers more, so a stale candidate is re-scored when it surfaces). A candidate is
    a sentence of what the user, the assistant or the system said (windows too inside
    a long one), or, in any other line, a window over a run of neighbouring atoms that
    hold details (paths, file names, code-like names, numbers, URLs; see the module
    doc), or an error line from its error word on. It is worth the salience of the
    details it holds that the summary does not hold yet (:func:`_salience`: how many
    messages came back to a detail, and whether the user or the agent wrote it or a
    tool printed it, how late: tool output can be fetched again) plus, for a sentence of the
    user's that instructs ("do not…", "must…", "until…"), a weight that puts it
    ahead of any detail; divided by the characters of the line it writes, origin and
    markers included. So a detail repeated in twenty tool results costs one excerpt,
    a line said twice is read once, and a long line costs only the window around
    its detail. Windows of one line closer than a second line would cost are merged.

    The previous summary's lines compete on the same terms: its excerpts keep their
    origin (and may be cut further), its other lines are kept whole, as they are, and
    come first. So the summary rolls: older detail leaves only when newer detail that
    weighs more needs the room. When nothing carries a detail or an instruction, the
    latest sentences the user and the assistant said that fit are kept instead.

    The time of a call is bounded on long ranges: past :data:`_SCAN_CHARS` of tool
    calls and results, only their starts and ends are read. With a
    :class:`~ctxwise.tokens.CharCounter` the budget is met exactly in characters;
    with another counter each line costs its count plus one, and the whole summary is
    counted again at the end (dropping the last picks while it is over).
    """

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self.counter = counter_or_default(counter)

    def summarize(
        self, previous: str, turns: Sequence[Message], budget: int, *, first_index: int = 0
    ) -> str:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise UsageError(f"summary budget must be a positive integer, got {budget!r}")
        if isinstance(first_index, bool) or not isinstance(first_index, int) or first_index < 0:
            raise UsageError(f"first_index must be an integer ≥ 0, got {first_index!r}")
        check_input(previous, turns)
        reader = _Reader()
        for n, raw in enumerate(previous.splitlines()):
            if not raw.strip():
                continue
            ex = parse_excerpt(raw)
            if ex is None:
                hits = reader.hits(raw)
                reader.mention(-1, hits, True)
                reader.line(_Line(-1, "", raw, (-1, 0, n)), hits, False)
                continue
            text, left, right = _uncut(ex.text)
            if text.strip() and not _NUMBERING.fullmatch(text.strip()):
                line = _Line(ex.index, ex.who, text, (ex.index, -1, n), left, right)
                hits = reader.hits(text, ex.who.endswith(" result"))
                reader.mention(ex.index, hits, ex.who in _PROSE or ex.who.endswith(" call"))
                reader.line(line, hits, ex.who in _PROSE)
        names = {b.id: b.name for m in turns for b in m.content if isinstance(b, ToolUseBlock)}
        blocks: list[tuple[int, str, str, int, bool]] = []  # index, who, text, block, result
        for i, m in enumerate(turns):
            for k, b in enumerate(m.content):
                if isinstance(b, TextBlock):
                    who: str = m.role
                elif isinstance(b, ToolUseBlock):
                    who = _tool_name(b.name) + " call"
                elif isinstance(b, ToolResultBlock):
                    who = _tool_name(names.get(b.tool_use_id)) + " result"
                else:
                    continue
                blocks.append(
                    (first_index + i, who, block_text(b), k, isinstance(b, ToolResultBlock))
                )
        tool_chars = sum(len(x[2]) for x in blocks if x[1] not in _PROSE)
        if tool_chars <= _SCAN_CHARS:
            for index, who, text, k, _ in blocks:
                reader.block(index, who, text, k)
        else:
            calls = [x[2] for x in blocks if x[1] not in _PROSE and not x[4]]
            results = [x[2] for x in blocks if x[4]]
            room = _SCAN_CHARS - sum(min(len(t), _CALL_CHARS) for t in calls)
            keep = _keep_chars(results, room)
            for index, who, text, k, result in blocks:
                cut = False
                if result:
                    text, cut = _head_and_tail(text, keep)
                elif who not in _PROSE and len(text) > _CALL_CHARS:
                    end = max(text.rfind(" ", 0, _CALL_CHARS), text.rfind('"', 0, _CALL_CHARS))
                    text, cut = text[: max(end, 1)], True
                reader.block(index, who, text, k, cut)
        return self._select(reader, budget)

    def _select(self, reader: _Reader, budget: int) -> str:
        lines, candidates = reader.lines, reader.candidates
        cap = _char_capacity(self.counter, budget)
        limit = cap + 1 if cap is not None else budget + 1  # the last line has no newline
        count = self.counter.count

        def cost(line: _Line, extra: tuple[int, int] | None = None) -> int:
            pieces = line.pieces(extra)
            if cap is not None:
                return sum(line.chars(s, e) for s, e in pieces)
            return sum(count(line.render(s, e)) + 1 for s, e in pieces)

        left = _salience(reader)  # what each unit still adds: 0 once the summary holds it
        weight = left.__getitem__

        def gain(units: tuple[str, ...]) -> float:
            return sum(map(weight, units))

        heap = [(-gain(c[3]) / c[4], n) for n, c in enumerate(candidates)]
        heapq.heapify(heap)
        spent: dict[int, int] = {}
        picks: list[int] = []
        used = 0
        smallest = min((c[4] for c in candidates), default=0)
        while heap:
            _, n = heapq.heappop(heap)
            li, s, e, units, chars = candidates[n]
            if cap is not None and chars > limit - used and li not in spent:
                if limit - used < smallest:
                    break  # nothing fits any more
                continue  # cannot fit (a window of a line already kept may merge for less)
            g = gain(units)
            if g <= 0:
                continue
            ratio = g / chars
            if heap and ratio < -heap[0][0]:
                heapq.heappush(heap, (-ratio, n))
                continue
            line = lines[li]
            before = spent.get(li, 0)
            if before:
                after = cost(line, (s, e))
            else:
                after = chars if cap is not None else count(line.render(s, e)) + 1
            if used + after - before > limit:
                continue
            used += after - before
            spent[li] = after
            line.chosen.append((s, e))
            for u in units:
                left[u] = 0.0
            picks.append(li)
        if not picks:
            return self._latest(reader, budget)
        out = self._render(lines, spent)
        while picks and count(out) > budget:  # a counter that is not additive per line
            lines[picks.pop()].chosen.pop()
            out = self._render(lines, spent)
        return out

    @staticmethod
    def _render(lines: Sequence[_Line], touched: dict[int, int]) -> str:
        rows = [
            (line.order, s, line.render(s, e))
            for li in touched
            for line in (lines[li],)
            for s, e in line.pieces()
        ]
        rows.sort()
        return "\n".join(r for _, _, r in rows)

    def _latest(self, reader: _Reader, budget: int) -> str:
        """Nothing carried a detail or an instruction: keep the latest sentences the
        user and the assistant said (tool output is never plain prose) that fit."""
        chosen: list[str] = []
        used = 0
        for li, s, e in sorted(reader.plain, key=lambda p: (reader.lines[p[0]].order, p[1]))[::-1]:
            text = reader.lines[li].render(s, e)
            cost = self.counter.count(text) + 1
            if used + cost > budget + 1:
                break
            chosen.append(text)
            used += cost
        out = "\n".join(reversed(chosen))
        while chosen and self.counter.count(out) > budget:
            chosen.pop()
            out = "\n".join(reversed(chosen))
        return out
