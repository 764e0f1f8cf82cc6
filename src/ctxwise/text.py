"""The one text analyzer: what every lexical index, scorer and embedder sees as words.

:func:`words` (and :meth:`Analyzer.words`) turns text into terms, in this order:

1. Unicode normalization: NFKC (``ﬁ`` → ``fi``, full-width ``Ａ`` → ``A``, ``²`` → ``2``),
   then case folding (``Straße`` → ``strasse``);
2. Latin and Greek letters lose their diacritics (``café`` → ``cafe``, ``naïve`` →
   ``naive``); other scripts keep their marks (a Devanagari vowel sign is part of
   its word);
3. words are runs of Unicode letters, digits and combining marks (``_``,
   punctuation, symbols and spaces separate them: ``don't`` → ``don``, ``t``);
   Han ideographs and kana, written without spaces, are one term per character
   (``東京タワー`` → ``東``, ``京``, ``タ``, ``ワ``, ``ー``), so a query for ``東京`` finds it;
4. :class:`Analyzer` (``stem="english"``, the default) then reduces each word to
   its Snowball (Porter 2) English stem (``refunded`` → ``refund``), from the
   pure-Python ``snowballstemmer`` package; :func:`words` does not stem.

:data:`STOPWORDS` are the English function and question words lexical queries leave
out (:meth:`Analyzer.query_terms`); indexes keep every word.

A term never contains a space, so ``" ".join(terms)`` round-trips: the SQLite and
PostgreSQL stores index exactly these terms (see :mod:`ctxwise.memory`), which is
why every store ranks alike. Everything here is deterministic and offline.
"""

from __future__ import annotations

import re
import sys
import threading
import unicodedata
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from ctxwise.errors import UsageError

__all__ = [
    "DEFAULT_ANALYZER",
    "MAX_TERM_CHARS",
    "STOPWORDS",
    "Analyzer",
    "identifier_parts",
    "normalize",
    "split_identifier",
    "words",
]

_STOPWORD_TEXT = """a about after all also am an and any are as at be been before being but by can
    could d did do does doing done during for from had has have having he her here hers
    him his how i if in into is it its just ll m me might my no nor not now of on or our
    ours re s she should so some such t than that the their theirs them then there these
    they this those to too up us ve very was we were what when where which while who whom
    whose why will with would you your yours"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""English function words and question words left out of lexical queries. They
match most items, so they add little to BM25 but still reorder it: dropping them
raised lexical recall on LoCoMo dev (``ctxwise eval memory`` measures it)."""

# Han ideographs (with extensions and compatibility forms), kana and the
# prolonged-sound mark: scripts written without spaces between words.
_CJK = (
    "\u3005\u3007\u3021-\u3029\u3038-\u303c\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0002fa1f\U00030000-\U0003134f"
)
_CJK_RUN = re.compile(f"([{_CJK}])")
_FOLDED_RANGES = ((0x00C0, 0x024F), (0x1E00, 0x1EFF), (0x0370, 0x03FF), (0x1F00, 0x1FFF))


@lru_cache(maxsize=1)
def _word_pattern() -> re.Pattern[str]:
    """Letters, digits and combining marks (built once, on first use)."""
    ranges: list[str] = []
    for lo, hi in ((0x0300, 0x2FFFF), (0xE0100, 0xE01EF)):
        start: int | None = None
        for cp in range(lo, min(hi, sys.maxunicode) + 2):
            is_mark = cp <= hi and unicodedata.category(chr(cp)).startswith("M")
            if is_mark and start is None:
                start = cp
            elif not is_mark and start is not None:
                ranges.append(f"{re.escape(chr(start))}-{re.escape(chr(cp - 1))}")
                start = None
    # one character class (word characters and marks) is several times faster than an
    # alternation per character; "_" is not a word character here, so words() turns it
    # into a space first, which gives the same terms as (?:[^\\W_]|[marks])+
    return re.compile(f"[\\w{''.join(ranges)}]+")


@lru_cache(maxsize=1)
def _fold_table() -> dict[int, str]:
    """Latin and Greek letters with diacritics → the letters without them."""
    table: dict[int, str] = {}
    for lo, hi in _FOLDED_RANGES:
        for cp in range(lo, hi + 1):
            decomposed = unicodedata.normalize("NFKD", chr(cp))
            base = "".join(c for c in decomposed if not unicodedata.combining(c))
            if base and base != chr(cp):
                table[cp] = base.casefold()
    return table


_ASCII_RUN = re.compile(r"[\x00-\x7f]+")
_PLAIN_WORD = re.compile(r"\w+")
# \w in case-folded ASCII text, without "_" (which separates words here)
_ASCII_WORD = re.compile(r"[a-z0-9]+")


def _fold(text: str) -> tuple[str, frozenset[str]]:
    """Steps 1–2, and the distinct non-ASCII characters left (none for ASCII text).

    Most text is ASCII, or has only a few distinct non-ASCII characters: looking at
    those first lets :func:`words` skip the folding table and the word pattern with
    every combining mark in it (several times slower than ``\\w``) when they cannot
    change anything. The terms are exactly those of the full steps."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    if folded.isascii():
        return folded, frozenset()
    table = _fold_table()
    chars = frozenset(_ASCII_RUN.sub("", folded))
    if any(ord(c) in table for c in chars):
        folded = folded.translate(table)
        chars = frozenset(_ASCII_RUN.sub("", folded))
    return folded, chars


def normalize(text: str) -> str:
    """NFKC, case folding and Latin/Greek diacritics removed (steps 1–2 above)."""
    return _fold(text)[0]


MAX_TERM_CHARS = 255
"""A longer word (a hash, a base64 blob) is cut to this many characters, on every
backend alike (PostgreSQL cannot index a lexeme of more than 2,047 bytes)."""


def words(text: str) -> list[str]:
    """The default analyzer's terms (no stemming): steps 1–3 above."""
    folded, chars = _fold(text)
    if not chars:  # ASCII: no diacritics, CJK or combining marks
        found: list[str] = _ASCII_WORD.findall(folded)
    elif not _PLAIN_WORD.search(distinct := "".join(sorted(chars))) and not any(
        unicodedata.category(c).startswith("M") for c in chars
    ):
        # only separators (box drawing, arrows, emoji: a tool's output): as "?", a
        # separator too, the text is ASCII, which a pattern reads several times faster
        found = _ASCII_WORD.findall(folded.encode("ascii", "replace").decode("ascii"))
    else:
        spaced = folded.replace("_", " ")
        if _CJK_RUN.search(distinct):
            spaced = _CJK_RUN.sub(r" \1 ", spaced)
        # without a combining mark, the word pattern matches what \w does
        marks = any(unicodedata.category(c).startswith("M") for c in chars)
        found = (_word_pattern() if marks else _PLAIN_WORD).findall(spaced)
    if found and max(map(len, found)) > MAX_TERM_CHARS:
        return [w[:MAX_TERM_CHARS] for w in found]
    return found


_IDENTIFIER_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_ACRONYM_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_CAMEL_WORD = re.compile(r"\b[A-Za-z][a-z0-9]*(?:[A-Z][a-z0-9]+)+\b")


def split_identifier(name: str, *, acronyms: bool = True) -> str:
    """``name`` with a space at each camelCase or PascalCase boundary: ``getMe`` →
    ``get Me``, and with ``acronyms`` before the last capital of a run of capitals
    too (``getHTTPResponse`` → ``get HTTP Response``). ``snake_case`` and
    ``kebab-case`` need nothing: ``_`` and ``-`` already separate words."""
    return (_ACRONYM_BOUNDARY if acronyms else _IDENTIFIER_BOUNDARY).sub(" ", name)


def identifier_parts(text: str) -> str:
    """``text`` with each camelCase or PascalCase word followed by its parts
    (``ProjectReviewLive`` → ``ProjectReviewLive (Project Review Live)``), so a query
    naming a module finds the text naming its file (``project_review_live.ex``). What
    :class:`Analyzer` reads with ``identifiers=True``."""
    if not _CAMEL_WORD.search(text):
        return text
    return _CAMEL_WORD.sub(
        lambda m: f"{m.group(0)} ({split_identifier(m.group(0), acronyms=False)})", text
    )


@lru_cache(maxsize=4)
def _snowball(language: str) -> Callable[[str], str]:
    """A cached Snowball stemmer for ``language`` (one word in, its stem out)."""
    try:
        import snowballstemmer  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError as e:
        raise UsageError(
            "stemming needs the 'snowballstemmer' package (a ctxwise dependency):"
            " pip install snowballstemmer"
        ) from e
    stemmer = snowballstemmer.stemmer(language)
    lock = threading.Lock()  # a Snowball stemmer keeps its word in the instance
    english = language == "english"

    # slow in pure Python; text repeats its words, so they are cached
    @lru_cache(maxsize=1 << 17)
    def stem(word: str) -> str:
        # Snowball's English stemmer returns a word of fewer than 3 characters, and
        # one of ASCII digits (no suffix it knows), as it is: tool output is full of
        # numbers, each a new word to the cache
        if english and (len(word) < 3 or (word.isdigit() and word.isascii())):
            return word
        with lock:
            out: str = stemmer.stemWord(word)
        return out

    return stem


@dataclass(frozen=True, slots=True)
class Analyzer:
    """Text → terms, the same for indexing and querying.

    ``stem``: ``"english"`` (the default: Snowball English stems, from the small,
    pure-Python ``snowballstemmer`` package, a dependency) or ``None`` (no
    stemming, e.g. for text that is not English). Stemming raises hybrid recall
    on LoCoMo dev on every store alike (the guide's Memory section gives the
    figures; ``ctxwise eval memory`` measures them): "refund" finds "refunded".
    ``stopwords`` are what :meth:`query_terms` leaves out. ``identifiers``: a
    camelCase or PascalCase word also gives the terms of its parts
    (:func:`identifier_parts`), for text that names code.
    """

    stem: Literal["english"] | None = "english"
    stopwords: frozenset[str] = STOPWORDS
    identifiers: bool = False
    _stemmer: Callable[[str], str] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.stem not in (None, "english"):
            raise UsageError(f"unknown stemmer {self.stem!r}; choose None or 'english'")
        given: object = self.stopwords
        if isinstance(given, str) or not all(isinstance(w, str) for w in self.stopwords):
            raise UsageError("stopwords is a collection of lower-case words")
        object.__setattr__(self, "stopwords", frozenset(self.stopwords))
        if not isinstance(self.identifiers, bool):
            raise UsageError(f"identifiers is True or False, got {self.identifiers!r}")
        if self.stem is not None:
            object.__setattr__(self, "_stemmer", _snowball(self.stem))

    @property
    def name(self) -> str:
        """What a store records, so an index is never queried with other terms."""
        name = "ctxwise-1" + ("" if self.stem is None else f"+snowball-{self.stem}")
        return name + ("+identifiers" if self.identifiers else "")

    def words(self, text: str) -> list[str]:
        """The terms of ``text``, in order (repeats kept)."""
        found = words(identifier_parts(text) if self.identifiers else text)
        stem = self._stemmer
        return found if stem is None else [stem(w) for w in found]

    def terms(self, text: str) -> str:
        """The terms of ``text`` joined by single spaces: what the stores index."""
        return " ".join(self.words(text))

    def query_terms(self, query: str, stopwords: Collection[str] | None = None) -> list[str]:
        """The distinct terms a lexical search uses: without ``stopwords`` (default
        :attr:`stopwords`), or every term when nothing else is left; sorted."""
        drop = self.stopwords if stopwords is None else stopwords
        found = words(identifier_parts(query) if self.identifiers else query)
        kept = [w for w in found if w not in drop] or found
        stem = self._stemmer
        return sorted({w if stem is None else stem(w) for w in kept})


DEFAULT_ANALYZER = Analyzer()
"""The analyzer every store, scorer and embedder uses unless given another."""
