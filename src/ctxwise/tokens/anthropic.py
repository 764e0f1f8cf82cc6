"""A calibrated counter for Anthropic's Claude models, which have no public tokenizer.

The estimate of a conversation is a linear model over its blocks:

``Σ weights · units(block text) + Σ per-block overhead[kind] + per message · messages``

rounded up, plus the documented ``media_tokens`` per image or PDF. Two local
tokenizations give the units:

- ``chars`` (the default install, no dependency): a text is split into pieces
  (runs of ASCII letters, single digits, newlines, runs of spaces and tabs, single
  ASCII punctuation marks, single other characters) and the units are seven
  counts: letter runs, letters, digits, newlines, space runs, punctuation,
  other characters. The weights are shared by every block kind.
- ``o200k`` (with ``pip install -e '.[tiktoken]'``): the exact ``o200k_base``
  length of the block's text, with one weight per block kind (text, tool_use
  with its name and JSON input, tool_result, thinking).

The weights and overheads are data: an :class:`AnthropicCalibration` fit by
:func:`ctxwise.calibration.fit_anthropic` on the provider's own usage deltas
(:mod:`ctxwise.formats.usage`) and shipped in ``ctxwise.tokens._anthropic_fit``
with the files and commit they came from; ``scripts/calibrate_tokens.py``
regenerates it. Every weight is at least zero, so a count never falls when text
is appended. How far the estimate is from the provider's count is measured by
``benchmarks/bench_tokens.py`` (fit on two sessions, scored on the third) and
shipped as :data:`~ctxwise.tokens.COUNTER_ERRORS`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ctxwise.errors import UsageError
from ctxwise.messages import (
    ContentBlock,
    MediaBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    block_text,
)
from ctxwise.tokens._base import MEDIA_TOKENS, TiktokenCounter, _TextCounter

__all__ = [
    "BLOCK_KINDS",
    "CHAR_CLASSES",
    "AnthropicCalibration",
    "AnthropicTokenizer",
    "CalibratedAnthropicCounter",
    "block_kind",
    "char_units",
    "shipped_calibration",
]

AnthropicTokenizer = Literal["chars", "o200k"]

CHAR_CLASSES = (
    "letter_runs",
    "letters",
    "digits",
    "newlines",
    "space_runs",
    "punctuation",
    "other",
)
"""The units of the ``chars`` tokenization, in the order of its weights."""

BLOCK_KINDS = ("text", "tool_use", "tool_result", "thinking", "other")
"""The block kinds with their own overhead (``other``: media, opaque blocks), in the
order of :attr:`AnthropicCalibration.block`."""

_LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_DIGITS = b"0123456789"
_PUNCT = bytes(c for c in range(0x21, 0x7F) if not chr(c).isalnum())


def _mask(keep: bytes) -> bytes:
    """A translation table: the bytes of ``keep`` to ``a``, every other byte to a
    space (so the words of a translated text are the runs of ``keep``)."""
    table = bytearray(b" " * 256)
    for c in keep:
        table[c] = ord("a")
    return bytes(table)


_RUN_OF_LETTERS = _mask(_LETTERS)
_RUN_OF_SPACES = _mask(b" \t")


def char_units(text: str) -> tuple[int, int, int, int, int, int, int]:
    """The seven ``chars`` units of ``text`` (see :data:`CHAR_CLASSES`): a text is
    read as pieces, runs of ASCII letters, single digits, newlines, runs of spaces
    and tabs, single ASCII punctuation marks and single other characters (any
    other character, a control character or one outside ASCII)."""
    if not text:
        return 0, 0, 0, 0, 0, 0, 0
    data = text.encode("ascii", "replace")  # one byte per character, "?" outside ASCII
    outside = data.count(b"?") - text.count("?")
    letters_mask = data.translate(_RUN_OF_LETTERS)
    runs = len(letters_mask.split())
    letters = letters_mask.count(b"a")
    digits = len(data) - len(data.translate(None, _DIGITS))
    newlines = data.count(b"\n")
    spaces = len(data.translate(_RUN_OF_SPACES).split())
    blanks = data.count(b" ") + data.count(b"\t")
    punct = len(data) - len(data.translate(None, _PUNCT)) - outside
    other = len(data) - letters - digits - newlines - blanks - punct
    return runs, letters, digits, newlines, spaces, punct, other


def block_kind(block: ContentBlock) -> int:
    """The index in :data:`BLOCK_KINDS` of ``block``'s kind."""
    if isinstance(block, TextBlock):
        return 0
    if isinstance(block, ToolUseBlock):
        return 1
    if isinstance(block, ToolResultBlock):
        return 2
    if isinstance(block, ThinkingBlock):
        return 3
    return 4


@dataclass(frozen=True, slots=True)
class AnthropicCalibration:
    """The coefficients of a :class:`CalibratedAnthropicCounter` and where they
    came from."""

    tokenizer: AnthropicTokenizer
    weights: tuple[float, ...]
    """``chars``: one weight per unit of :data:`CHAR_CLASSES`; ``o200k``: one per
    block kind of :data:`BLOCK_KINDS` but the last (``other`` blocks use the text
    weight)."""
    block: tuple[float, float, float, float, float]
    """Tokens per block, by kind (:data:`BLOCK_KINDS`)."""
    message: float
    """Tokens per message (its role and framing)."""
    provenance: str = ""
    """The data and commit the coefficients were fit on."""

    def __post_init__(self) -> None:
        want = len(CHAR_CLASSES) if self.tokenizer == "chars" else len(BLOCK_KINDS) - 1
        if self.tokenizer not in ("chars", "o200k"):
            raise UsageError(f"unknown tokenizer {self.tokenizer!r}; choose chars or o200k")
        if len(self.weights) != want or len(self.block) != len(BLOCK_KINDS):
            raise UsageError(
                f"a {self.tokenizer} calibration has {want} weights and "
                f"{len(BLOCK_KINDS)} block overheads, got {len(self.weights)} and "
                f"{len(self.block)}"
            )
        values = (*self.weights, *self.block, self.message)
        if any(not math.isfinite(v) or v < 0 for v in values):
            raise UsageError("calibration coefficients must be finite and at least 0")

    @property
    def n_features(self) -> int:
        return len(self.weights) + len(self.block) + 1

    @property
    def coefficients(self) -> tuple[float, ...]:
        """Every coefficient, in the order of
        :meth:`CalibratedAnthropicCounter.features`."""
        return (*self.weights, *self.block, self.message)

    @classmethod
    def zeros(cls, tokenizer: AnthropicTokenizer) -> AnthropicCalibration:
        """A calibration of ``tokenizer`` with every coefficient 0 (its features are
        what a fit needs)."""
        n = len(CHAR_CLASSES) if tokenizer == "chars" else len(BLOCK_KINDS) - 1
        return cls.from_coefficients(tokenizer, [0.0] * (n + len(BLOCK_KINDS) + 1))

    @classmethod
    def from_coefficients(
        cls, tokenizer: AnthropicTokenizer, coefficients: Sequence[float], provenance: str = ""
    ) -> AnthropicCalibration:
        """The calibration whose :attr:`coefficients` are ``coefficients``."""
        n = len(CHAR_CLASSES) if tokenizer == "chars" else len(BLOCK_KINDS) - 1
        c = [float(x) for x in coefficients]
        k = len(BLOCK_KINDS)
        if len(c) != n + k + 1:
            raise UsageError(f"a {tokenizer} calibration has {n + k + 1} coefficients")
        block = (c[n], c[n + 1], c[n + 2], c[n + 3], c[n + 4])
        return cls(tokenizer, tuple(c[:n]), block, c[n + k], provenance)


def shipped_calibration(tokenizer: AnthropicTokenizer) -> AnthropicCalibration:
    """The calibration of ``tokenizer`` that ships with ctxwise
    (``scripts/calibrate_tokens.py`` fits it)."""
    from ctxwise.tokens._anthropic_fit import COEFFICIENTS, PROVENANCE

    if tokenizer not in COEFFICIENTS:
        raise UsageError(f"unknown tokenizer {tokenizer!r}; choose chars or o200k")
    return AnthropicCalibration.from_coefficients(tokenizer, COEFFICIENTS[tokenizer], PROVENANCE)


class CalibratedAnthropicCounter(_TextCounter):
    """Estimates what Anthropic counts, from a local tokenization and fitted
    coefficients (see the module docstring). ``calibration`` defaults to the shipped
    fit of ``tokenizer``; the ``o200k`` tokenizer needs the ``tiktoken`` extra.

    ``count(text)`` is a text block's content (without the block and message
    overheads, which ``count_messages`` adds); ``request_overhead`` is ``0``: the
    system prompt and tool definitions are counted by whoever sends them.
    """

    request_overhead = 0
    media_tokens = MEDIA_TOKENS

    def __init__(
        self,
        tokenizer: AnthropicTokenizer = "chars",
        *,
        calibration: AnthropicCalibration | None = None,
    ) -> None:
        if calibration is None:
            calibration = shipped_calibration(tokenizer)
        elif calibration.tokenizer != tokenizer:
            raise UsageError(
                f"the calibration is for the {calibration.tokenizer} tokenizer, not {tokenizer}"
            )
        self.tokenizer: AnthropicTokenizer = tokenizer
        self.calibration = calibration
        self._bpe = TiktokenCounter("o200k_base") if tokenizer == "o200k" else None
        self.message_overhead = 0  # count_messages adds the fitted one

    @property
    def name(self) -> str:
        return f"anthropic:{self.tokenizer}"

    def _units(self, text: str, kind: int) -> list[float]:
        """The weighted units' features of ``text`` in a block of ``kind``."""
        if self._bpe is None:
            return [float(u) for u in char_units(text)]
        out = [0.0] * (len(BLOCK_KINDS) - 1)
        out[0 if kind == len(BLOCK_KINDS) - 1 else kind] = float(self._bpe.count(text))
        return out

    def count(self, text: str) -> int:
        if not text:
            return 0
        w = self.calibration.weights
        x = sum(a * b for a, b in zip(w, self._units(text, 0), strict=True))
        return max(1, math.ceil(x - 1e-9))

    def features(self, messages: Sequence[Message]) -> tuple[list[float], int]:
        """The model's features of ``messages`` (units, blocks by kind, messages; the
        order of :attr:`AnthropicCalibration.coefficients`) and the media tokens
        they add outside the model."""
        units = [0.0] * len(self.calibration.weights)
        blocks = [0.0] * len(BLOCK_KINDS)
        media = 0
        for m in messages:
            for b in m.content:
                kind = block_kind(b)
                blocks[kind] += 1
                text = block_text(b)
                if text:
                    for i, u in enumerate(self._units(text, kind)):
                        units[i] += u
                if isinstance(b, MediaBlock):
                    media += self.media_cost(b)
                elif isinstance(b, ToolResultBlock) and not isinstance(b.content, str):
                    media += sum(self.media_cost(x) for x in b.content if isinstance(x, MediaBlock))
        return [*units, *blocks, float(len(messages))], media

    def count_messages(self, messages: Sequence[Message]) -> int:
        """The sum of each message's estimate, each rounded up: a conversation
        counts what its messages count one by one, as the Engine stores and joins
        them (a count rounded once over the whole would make two messages count
        less than their two counts, an overhead the request does not have)."""
        if not messages:
            return 0
        coefficients = self.calibration.coefficients
        total = self.request_overhead
        for message in messages:
            feats, media = self.features((message,))
            x = sum(a * b for a, b in zip(coefficients, feats, strict=True))
            total += math.ceil(x - 1e-9) + media
        return total

    def __repr__(self) -> str:
        return f"CalibratedAnthropicCounter({self.tokenizer!r})"
