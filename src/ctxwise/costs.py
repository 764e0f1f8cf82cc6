"""What context management costs: compaction and tool-result clearing, simulated.

Two questions an agent builder asks before turning a knob:

* :func:`simulate_compaction` — over a session of ``calls`` model calls whose
  context grows by ``growth`` tokens a call, how many input tokens do the calls
  send with and without auto-compaction at ``trigger`` tokens, counting the
  summary calls that compaction itself makes? Optionally, what do they cost with
  prompt caching?
* :func:`clearing_break_even` — clearing old tool results edits the middle of
  the prompt, so the provider's cached prefix ends at the edit point and
  everything after it is written to the cache again. After how many later calls
  has the cheaper prompt paid for that cache miss?

Everything is exact integer arithmetic on token counts; costs are in *input-token
equivalents* (tokens times their price factor relative to the base input price),
computed with :class:`fractions.Fraction` so that ``0.1`` means one tenth.

Price factors (Anthropic, "Prompt caching → Pricing",
https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#pricing):
a 5-minute cache write costs 1.25x the base input price, a 1-hour cache write
2x, and a cache read (hit or refresh) 0.1x. These are the defaults here
(:data:`ANTHROPIC_CACHE_WRITE_FACTOR`, :data:`ANTHROPIC_CACHE_READ_FACTOR`).
OpenAI's automatic caching has no write premium (write factor 1.0) and a
model-dependent read discount; pass its factors explicitly.
"""

from __future__ import annotations

import math
import numbers
import sys
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ctxwise.errors import SimulationError

__all__ = [
    "ANTHROPIC_CACHE_READ_FACTOR",
    "ANTHROPIC_CACHE_WRITE_FACTOR",
    "CacheCost",
    "ClearingBreakEven",
    "CompactionSimulation",
    "SimulationError",
    "SummaryCall",
    "clearing_break_even",
    "simulate_compaction",
]

ANTHROPIC_CACHE_READ_FACTOR = 0.1
"""Anthropic cache reads (hits and refreshes): 0.1x the base input price."""

ANTHROPIC_CACHE_WRITE_FACTOR = 1.25
"""Anthropic 5-minute cache writes: 1.25x the base input price (1-hour writes: 2.0)."""


_MAX_CALLS = 10_000_000
"""The most calls :func:`simulate_compaction` takes: it lists every compaction, and
a session this long lists millions of them."""

_MAX_TOKENS = 10**18
"""The most tokens any count takes: far beyond any context, and small enough that no
total of :data:`_MAX_CALLS` calls at a read factor of at most 1 overflows a float."""

_FLOAT_MAX = sys.float_info.max


@dataclass(frozen=True, slots=True)
class SummaryCall:
    """One compaction: the summary call made just before call ``before_call`` (0-based)."""

    before_call: int
    context_tokens: int
    """The context the summary call read (what call ``before_call`` would have sent)."""
    input_tokens: int
    """``context_tokens`` plus the summary instruction: what the summary call sent."""
    output_tokens: int
    context_after: int
    """The context after compaction: the kept prefix plus the summary."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "before_call": self.before_call,
            "context_tokens": self.context_tokens,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "context_after": self.context_after,
        }


@dataclass(frozen=True, slots=True)
class CacheCost:
    """Input tokens of a session split by how a prompt cache bills them.

    ``cost`` is ``read_tokens * read_factor + write_tokens * write_factor +
    uncached_tokens`` in base-input-token equivalents.
    """

    read_tokens: int
    write_tokens: int
    uncached_tokens: int
    cost: float

    @property
    def input_tokens(self) -> int:
        return self.read_tokens + self.write_tokens + self.uncached_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "read_tokens": self.read_tokens,
            "write_tokens": self.write_tokens,
            "uncached_tokens": self.uncached_tokens,
            "cost": self.cost,
        }


@dataclass(frozen=True, slots=True)
class CompactionSimulation:
    """The result of :func:`simulate_compaction`: its inputs and the token totals.

    ``with_compaction`` counts every input token sent with auto-compaction on,
    the summary calls included (``summary_input_tokens`` of it);
    ``without_compaction`` the same session with no compaction. ``cache_*`` are
    set only when a cache read factor was given.
    """

    start_tokens: int
    growth: int
    calls: int
    summary_tokens: int
    trigger: int
    prefix_tokens: int
    summary_prompt_tokens: int
    without_compaction: int
    with_compaction: int
    call_input_tokens: int
    """Input tokens of the ``calls`` ordinary calls with compaction on (no summary calls)."""
    summary_calls: tuple[SummaryCall, ...]
    peak_without: int
    """The largest single input without compaction (the last call's)."""
    peak_with: int
    """The largest single input with compaction on, summary calls included."""
    cache_read_factor: float | None = None
    cache_write_factor: float | None = None
    cache_without: CacheCost | None = None
    cache_with: CacheCost | None = None

    @property
    def compactions(self) -> int:
        return len(self.summary_calls)

    @property
    def summary_input_tokens(self) -> int:
        return sum(s.input_tokens for s in self.summary_calls)

    @property
    def summary_output_tokens(self) -> int:
        return sum(s.output_tokens for s in self.summary_calls)

    @property
    def saved_tokens(self) -> int:
        """Input tokens compaction saves (negative when it costs more than it saves)."""
        return self.without_compaction - self.with_compaction

    @property
    def saved_fraction(self) -> float:
        return self.saved_tokens / self.without_compaction

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "with_compaction": self.with_compaction,
            "without_compaction": self.without_compaction,
            "compactions": self.compactions,
            "summary_calls": [s.to_dict() for s in self.summary_calls],
            "summary_input_tokens": self.summary_input_tokens,
            "summary_output_tokens": self.summary_output_tokens,
            "call_input_tokens": self.call_input_tokens,
            "saved_tokens": self.saved_tokens,
            "saved_fraction": round(self.saved_fraction, 6),
            "peak_without": self.peak_without,
            "peak_with": self.peak_with,
            "inputs": {
                "start_tokens": self.start_tokens,
                "growth": self.growth,
                "calls": self.calls,
                "summary_tokens": self.summary_tokens,
                "trigger": self.trigger,
                "prefix_tokens": self.prefix_tokens,
                "summary_prompt_tokens": self.summary_prompt_tokens,
            },
            "cache": None,
        }
        if self.cache_with is not None and self.cache_without is not None:
            out["cache"] = {
                "read_factor": self.cache_read_factor,
                "write_factor": self.cache_write_factor,
                "with_compaction": self.cache_with.to_dict(),
                "without_compaction": self.cache_without.to_dict(),
            }
        return out


@dataclass(frozen=True, slots=True)
class ClearingBreakEven:
    """The result of :func:`clearing_break_even`; costs in base-input-token equivalents.

    ``miss_cost`` is what the first call after clearing costs more than it would
    have without clearing (negative: clearing is cheaper at once);
    ``saving_per_call`` what every later call saves; ``calls_to_break_even`` the
    number of later calls after which clearing has paid for its miss (0: at once;
    ``None``: never, when cached tokens cost nothing).
    """

    context_tokens: int
    cleared_tokens: int
    edit_point_tokens: int
    cache_read_factor: float
    cache_write_factor: float
    cost_without: float
    cost_with: float
    miss_cost: float
    saving_per_call: float
    calls_to_break_even: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "context_tokens": self.context_tokens,
            "cleared_tokens": self.cleared_tokens,
            "edit_point_tokens": self.edit_point_tokens,
            "cache_read_factor": self.cache_read_factor,
            "cache_write_factor": self.cache_write_factor,
            "cost_without": self.cost_without,
            "cost_with": self.cost_with,
            "miss_cost": self.miss_cost,
            "saving_per_call": self.saving_per_call,
            "calls_to_break_even": self.calls_to_break_even,
        }


def _given(value: object) -> object:
    """``value`` for an error, which shows its repr: an int (or a fraction of ints) too
    long for Python to turn into a string (past ``sys.get_int_max_str_digits()``) is
    described instead."""
    if isinstance(value, numbers.Rational):
        bits = max(int(value.numerator).bit_length(), int(value.denominator).bit_length())
        if bits > 13_000:  # about 3,900 digits
            what = "an integer" if isinstance(value, numbers.Integral) else "a fraction"
            return f"{what} of about {int(bits * math.log10(2)) + 1} digits"
    return value


def _int(name: str, value: object, *, minimum: int) -> int:
    # any integral number (a NumPy or pandas count too), taken as the int it is
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise SimulationError(name, value, "must be a whole number of tokens")
    count = int(value)
    if count < minimum:
        raise SimulationError(
            name,
            _given(count),
            "must be greater than 0" if minimum == 1 else f"must be {minimum} or more",
        )
    if count > _MAX_TOKENS:
        raise SimulationError(name, _given(count), f"must be at most {_MAX_TOKENS:.0e} tokens")
    return count


def _exact(value: numbers.Real) -> Fraction:
    """A real number as the fraction it is written as: ``0.1`` (a float, or a NumPy
    float32 printed as 0.1) is one tenth; a ``Fraction`` or an int is itself."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    try:
        return Fraction(str(value))  # "0.1" → 1/10 exactly
    except ValueError:
        return Fraction(float(value))


def _factor(name: str, value: object, low: float, high: float) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SimulationError(name, value, "must be a finite number")
    if isinstance(value, numbers.Rational):  # an int or a Fraction: finite, maybe no float
        exact = _exact(value)
        if abs(exact) > _FLOAT_MAX:  # math.isfinite would overflow converting it
            detail = f"must be a finite number (at most {_FLOAT_MAX:g})"
            raise SimulationError(name, _given(value), detail)
    elif not math.isfinite(float(value)):
        raise SimulationError(name, value, "must be a finite number")
    else:
        exact = _exact(value)
    if not low <= exact <= high:
        hi = "" if math.isinf(high) else f" and {high:g}"
        raise SimulationError(
            name, value, f"must be between {low:g}{hi}" if hi else f"must be {low:g} or more"
        )
    return exact


def _cost(total: Fraction, write_factor: object) -> float:
    """``total`` as a float; the write factor is what can make one too large (token
    counts are at most :data:`_MAX_TOKENS`, read factors at most 1)."""
    try:
        return float(total)
    except OverflowError:
        raise SimulationError(
            "cache_write_factor",
            write_factor,
            f"gives costs larger than the largest float ({_FLOAT_MAX:g})",
        ) from None


class _Ledger:
    """Running input-token totals, split by how a prompt cache would bill them."""

    __slots__ = ("read", "uncached", "write")

    def __init__(self) -> None:
        self.read = 0
        self.write = 0
        self.uncached = 0

    def cost(self, read: Fraction, write: Fraction, write_factor: object) -> CacheCost:
        total = self.read * read + self.write * write + self.uncached
        return CacheCost(self.read, self.write, self.uncached, _cost(total, write_factor))


def simulate_compaction(
    *,
    start_tokens: int,
    growth: int,
    calls: int,
    summary_tokens: int,
    trigger: int = 150_000,
    prefix_tokens: int | None = None,
    summary_prompt_tokens: int = 0,
    summary_output_tokens: int | None = None,
    cache_read_factor: float | None = None,
    cache_write_factor: float = ANTHROPIC_CACHE_WRITE_FACTOR,
) -> CompactionSimulation:
    """Simulate a session's input tokens with and without auto-compaction.

    The model, from first principles (every model call is stateless, so it sends
    its whole context as input):

    * Call 0 sends ``start_tokens``. After each call the context grows by
      ``growth`` (the reply, the tool results, the next user message), so
      without compaction call *k* sends ``start_tokens + k * growth`` and the
      total is ``calls * start_tokens + growth * calls * (calls - 1) / 2``.
    * With compaction, before a call whose input would exceed ``trigger`` (strictly
      greater), a summary call is made. It reads that whole context (the growth
      just added included, so the latest turn is in the summary) plus
      ``summary_prompt_tokens`` of instruction, and writes
      ``summary_output_tokens`` (default: ``summary_tokens``; output, so not in
      the input totals). The context becomes the kept prefix plus the summary:
      ``prefix_tokens + summary_tokens``, where ``prefix_tokens`` (default:
      ``start_tokens``) is the part compaction never summarizes: system prompt,
      tool definitions, the task as first stated. The call then proceeds with
      that context, and growth resumes.
    * ``with_compaction`` = the ordinary calls' inputs + the summary calls' inputs.

    With the inputs of issue 5 (start 12,000, growth 6,000, 60 calls, summary
    8,000, trigger 150,000): without compaction 11,340,000 tokens exactly; with
    compaction 4,904,000 (two compactions, before calls 24 and 46, reading
    156,000 and 152,000 tokens; 4,596,000 in the ordinary calls), 1.1% above the
    issue's 4.85M. Keeping no prefix (``prefix_tokens=0``) gives 4,592,000
    (5.3% below).

    Prompt-cache mode (``cache_read_factor`` set): every ordinary call puts a
    cache breakpoint at its end, as Claude Code does, so it reads the previous
    call's context from the cache (``cache_read_factor``) and writes the new
    tokens (``cache_write_factor``); call 0 writes everything. A summary call
    reads the cached prefix and pays the base price for the rest (it is never
    reused, so it is not written). After a compaction only the kept prefix is
    still cached (byte-identical system prompt and tools); the summary is
    written by the next call (the prefix carries its own breakpoint, as Claude
    Code's system prompt and tools do). Cache entries are assumed not to expire between
    calls (5-minute TTL, refreshed by every read). With the issue's inputs and
    Anthropic's factors (0.1 read, 1.25 write) the session costs 1,554,900
    input-token equivalents without compaction and 926,700 with, against
    11,340,000 and 4,904,000 uncached: caching alone saves 86%, and compaction
    on top of it 40% of what is left (each compaction re-writes the summary and
    pays full price for the summary call's uncached tail).

    The totals are computed in closed form, one step per compaction (the calls
    between two compactions are an arithmetic run), so the time grows with the
    number of compactions, not of calls.

    Raises :class:`SimulationError` (a :class:`~ctxwise.errors.UsageError`) for
    a count below 1 (``start_tokens``, ``growth``, ``calls``, ``summary_tokens``,
    ``trigger``) or below 0 (the others) or above 10**18, more than 10,000,000 calls, a prefix
    larger than the start context, a summary (plus prefix) that does not fit
    under the trigger, cache factors outside 0 ≤ read ≤ 1 ≤ write, and a write
    factor so large that a cost does not fit a float.
    """
    start = _int("start_tokens", start_tokens, minimum=1)
    grow = _int("growth", growth, minimum=1)
    n = _int("calls", calls, minimum=1)
    if n > _MAX_CALLS:
        raise SimulationError(
            "calls", n, f"must be at most {_MAX_CALLS:,} (every compaction is listed)"
        )
    summary = _int("summary_tokens", summary_tokens, minimum=1)
    trig = _int("trigger", trigger, minimum=1)
    prompt = _int("summary_prompt_tokens", summary_prompt_tokens, minimum=0)
    out_tokens = _int(
        "summary_output_tokens",
        summary if summary_output_tokens is None else summary_output_tokens,
        minimum=0,
    )
    prefix = _int("prefix_tokens", start if prefix_tokens is None else prefix_tokens, minimum=0)
    if prefix > start:
        raise SimulationError(
            "prefix_tokens", prefix, f"the kept prefix is part of the start context ({start})"
        )
    if summary >= trig:
        raise SimulationError(
            "summary_tokens", summary, f"a summary must be smaller than the trigger ({trig})"
        )
    if prefix + summary >= trig:
        raise SimulationError(
            "summary_tokens",
            summary,
            f"the kept prefix ({prefix}) plus the summary reach the trigger ({trig}): "
            "every call would compact",
        )
    # the write factor is checked even without a read factor: a bad one is a mistake
    # to report, not a setting to ignore
    write_f = _factor("cache_write_factor", cache_write_factor, 1.0, math.inf)
    read_f = Fraction(0)
    if cache_read_factor is not None:
        read_f = _factor("cache_read_factor", cache_read_factor, 0.0, 1.0)

    # Without compaction call k sends start + k * grow and reads the previous
    # call's context from the cache (call 0 writes everything): closed forms.
    plain = _Ledger()
    without = n * start + grow * n * (n - 1) // 2
    plain.read = without - (start + (n - 1) * grow)  # every call's context but the last
    plain.write = start + (n - 1) * grow
    # With compaction the calls between two compactions are an arithmetic run
    # (context c0, c0 + grow, ... while at most the trigger), summed in one step.
    compacted = _Ledger()
    with_ = calls_in = peak_with = 0
    summaries: list[SummaryCall] = []
    context = start
    cached = 0  # tokens at the front of the context the cache holds
    k = 0
    while k < n:
        if context > trig:
            sent = context + prompt
            summaries.append(SummaryCall(k, context, sent, out_tokens, prefix + summary))
            with_ += sent
            peak_with = max(peak_with, sent)
            compacted.read += cached
            compacted.uncached += sent - cached
            context = prefix + summary
            cached = min(cached, prefix)
        m = min(n - k, (trig - context) // grow + 1)  # calls before the next compaction
        last = context + (m - 1) * grow
        run = m * context + grow * m * (m - 1) // 2
        with_ += run
        calls_in += run
        peak_with = max(peak_with, last)
        # the first call reads what is cached, every later one its predecessor's context
        compacted.read += cached + run - last
        compacted.write += last - cached
        cached = last
        context = last + grow
        k += m

    cache_args: dict[str, Any] = {}
    if cache_read_factor is not None:
        cache_args = {
            "cache_read_factor": float(read_f),
            "cache_write_factor": float(write_f),
            "cache_without": plain.cost(read_f, write_f, cache_write_factor),
            "cache_with": compacted.cost(read_f, write_f, cache_write_factor),
        }
    return CompactionSimulation(
        start_tokens=start,
        growth=grow,
        calls=n,
        summary_tokens=summary,
        trigger=trig,
        prefix_tokens=prefix,
        summary_prompt_tokens=prompt,
        without_compaction=without,
        with_compaction=with_,
        call_input_tokens=calls_in,
        summary_calls=tuple(summaries),
        peak_without=start + (n - 1) * grow,
        peak_with=peak_with,
        **cache_args,
    )


def clearing_break_even(
    *,
    context_tokens: int,
    cleared_tokens: int,
    edit_point_tokens: int,
    cache_read_factor: float = ANTHROPIC_CACHE_READ_FACTOR,
    cache_write_factor: float = ANTHROPIC_CACHE_WRITE_FACTOR,
) -> ClearingBreakEven:
    """After how many later calls does clearing ``cleared_tokens`` pay for its cache miss?

    The model: the context is ``context_tokens`` and fully cached by the last
    call. Clearing removes ``cleared_tokens`` of old tool results, the first of
    them starting ``edit_point_tokens`` into the prompt. A prompt cache matches
    prefixes only, so the next call reads ``edit_point_tokens`` from the cache
    and writes the rest, ``context - cleared - edit_point``, again; without
    clearing it would have read all ``context_tokens``. The new tokens both
    branches add after that are the same and cancel out. From then on both
    branches are fully cached and every call reads ``cleared_tokens`` fewer
    tokens, saving ``cleared_tokens * cache_read_factor``::

        miss_cost       = edit_point * read + (context - cleared - edit_point) * write
                          - context * read
        saving_per_call = cleared * read
        break_even      = ceil(miss_cost / saving_per_call) later calls

    Example, with Anthropic's factors (0.1 read, 1.25 write): a 100,000-token
    context, clearing 30,000 tokens from 20,000 in: the first call costs 64,500
    equivalents instead of 10,000 (miss 54,500), each later call saves 3,000,
    so clearing pays after 19 more calls. With no prompt cache (both factors
    1.0) clearing is cheaper at once (0 calls). This is why
    ``clear_at_least`` exists: a small clearing deep in a cached prompt rarely
    pays within a session.

    Raises :class:`SimulationError` for a context below 1, a cleared amount
    below 1 or beyond the end of the context, an edit point below 0 or at or
    past the end, a count above 10**18, factors outside 0 ≤ read ≤ 1 ≤ write, and
    a write factor so large that a cost does not fit a float.
    """
    context = _int("context_tokens", context_tokens, minimum=1)
    edit = _int("edit_point_tokens", edit_point_tokens, minimum=0)
    if edit >= context:
        raise SimulationError(
            "edit_point_tokens", edit, f"must lie inside the context ({context} tokens)"
        )
    cleared = _int("cleared_tokens", cleared_tokens, minimum=1)
    if cleared > context - edit:
        raise SimulationError(
            "cleared_tokens",
            cleared,
            f"only {context - edit} tokens follow the edit point ({edit} of {context})",
        )
    read = _factor("cache_read_factor", cache_read_factor, 0.0, 1.0)
    write = _factor("cache_write_factor", cache_write_factor, 1.0, math.inf)
    without = context * read
    with_ = edit * read + (context - cleared - edit) * write
    miss = with_ - without
    saving = cleared * read
    if miss <= 0:
        calls: int | None = 0
    elif saving == 0:
        calls = None
    else:
        calls = math.ceil(miss / saving)
    return ClearingBreakEven(
        context_tokens=context,
        cleared_tokens=cleared,
        edit_point_tokens=edit,
        cache_read_factor=float(read),
        cache_write_factor=float(write),
        cost_without=_cost(without, cache_write_factor),
        cost_with=_cost(with_, cache_write_factor),
        miss_cost=_cost(miss, cache_write_factor),
        saving_per_call=_cost(saving, cache_write_factor),
        calls_to_break_even=calls,
    )
