"""Choosing a counter: by name (:func:`get_counter`) or by the model a request goes
to (:func:`counter_for_model`), and how far each counter is from the provider's
count (:func:`counter_error`)."""

from __future__ import annotations

from dataclasses import dataclass

from ctxwise.errors import MissingDependencyError, TokenizerUnavailableError, UsageError
from ctxwise.tokens._base import CharCounter, TiktokenCounter, TokenCounter, WordCounter
from ctxwise.tokens.anthropic import AnthropicTokenizer, CalibratedAnthropicCounter
from ctxwise.tokens.openai import OpenAIChatCounter, openai_encoding

__all__ = [
    "CounterAccuracy",
    "anthropic_counter",
    "check_counter_name",
    "counter_error",
    "counter_for_model",
    "default_safety_margin",
    "get_counter",
    "is_claude_model",
    "provider_of",
]

_NAMES = ("auto", "char", "word", "tiktoken", "anthropic", "anthropic:chars", "anthropic:o200k")
_PREFIXES = ("tiktoken:", "openai:", "auto:")
_CHOOSE = (
    "choose auto, char, word, tiktoken, tiktoken:ENCODING, anthropic, anthropic:chars, "
    "anthropic:o200k, openai:MODEL or auto:MODEL"
)


@dataclass(frozen=True, slots=True)
class CounterAccuracy:
    """How far a counter's estimates were from a provider's counts, per step of
    recorded usage (:mod:`ctxwise.formats.usage`): relative errors
    ``|estimate - delta| / delta`` and the ratio of the summed estimates to the
    summed deltas. ``held_out``: a calibrated counter was scored on sessions it
    was not fit on."""

    counter: str
    provider: str
    steps: int
    sum_ratio: float
    p50: float
    p90: float
    p95: float
    held_out: bool


def counter_error(
    counter: TokenCounter | str, provider: str = "anthropic"
) -> CounterAccuracy | None:
    """The measured error of ``counter`` (or a counter name) against ``provider``'s
    counts, from the shipped measurements; ``None`` when it was not measured."""
    from ctxwise.tokens._anthropic_fit import ERRORS

    name = counter if isinstance(counter, str) else counter.name
    row = ERRORS.get(name) if provider == "anthropic" else None
    if row is None:
        return None
    return CounterAccuracy(
        name,
        provider,
        int(row["steps"]),
        float(row["sum_ratio"]),
        float(row["p50"]),
        float(row["p90"]),
        float(row["p95"]),
        bool(row["held_out"]),
    )


def calibrated_margin(counter: TokenCounter | str, model: str | None) -> float | None:
    """The ``safety_margin`` a budget keeps by default once its session has calibrated
    on a response's usage: the measured 95th-percentile error of the calibrated
    estimate of the next request (``scripts/measure_calibration.py``), for ``counter``
    against a Claude model; ``None`` when that was not measured (the uncalibrated
    margin, :func:`default_safety_margin`, stays)."""
    from ctxwise.tokens._calibrated import CALIBRATED

    if provider_of(model) != "anthropic":
        return None
    name = counter if isinstance(counter, str) else counter.name
    row = CALIBRATED.get(name)
    return None if row is None else float(row["p95"])


def is_claude_model(model: str) -> bool:
    """``model`` names a Claude model (``claude-…``, with or without a provider
    prefix such as ``anthropic/`` or Bedrock's ``us.anthropic.``)."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    return name.startswith("claude") or ".claude" in name or "anthropic.claude" in name


def _bpe_available() -> bool:
    try:
        TiktokenCounter("o200k_base")
    except (MissingDependencyError, TokenizerUnavailableError):
        return False
    return True


def anthropic_counter(tokenizer: AnthropicTokenizer | None = None) -> CalibratedAnthropicCounter:
    """The calibrated Anthropic counter: ``tokenizer``, or by default the one whose
    shipped fit scored better on held-out sessions, when it is installed (the
    ``o200k`` tokenizer needs the ``tiktoken`` extra; without it, ``chars``)."""
    if tokenizer is not None:
        return CalibratedAnthropicCounter(tokenizer)
    from ctxwise.tokens._anthropic_fit import PREFERRED

    if PREFERRED == "o200k" and _bpe_available():  # the better fit, when installed
        return CalibratedAnthropicCounter("o200k")
    return CalibratedAnthropicCounter("chars")


def counter_for_model(model: str | None) -> TokenCounter:
    """The counter for requests to ``model``:

    - a Claude model: :func:`anthropic_counter` (calibrated on Anthropic's usage);
    - an OpenAI chat model (``gpt-4o``, ``gpt-4.1``, ``gpt-5``, ``o1``, ``o3``,
      ``o4-mini``, ``gpt-4``, ``gpt-3.5-turbo``): :class:`OpenAIChatCounter` with the
      model's encoding and the documented overheads; without the ``tiktoken``
      extra (or its encoding file), :class:`CharCounter`;
    - anything else, or no model: :class:`CharCounter`.

    Never raises for an unknown or unsupported name and never downloads anything:
    the fallback is the default counter, and :func:`counter_error` says how far it
    may be.
    """
    if not model or not model.strip():
        return CharCounter()
    if is_claude_model(model):
        return anthropic_counter()
    if openai_encoding(model) is not None:
        try:
            return OpenAIChatCounter(model)
        except (MissingDependencyError, TokenizerUnavailableError):
            return CharCounter()
    return CharCounter()


def check_counter_name(name: str) -> str:
    """``name`` when :func:`get_counter` knows it (without building the counter, so
    an extra that is not installed is not refused here); a :class:`UsageError`
    listing the names otherwise."""
    if name in _NAMES or any(name.startswith(p) and name[len(p) :] for p in _PREFIXES):
        return name
    raise UsageError(f"unknown counter {name!r}; {_CHOOSE}")


def get_counter(name: str, *, safety_margin: float = 0.0, model: str | None = None) -> TokenCounter:
    """A local counter by name: ``char``, ``word``, ``tiktoken`` (o200k_base),
    ``tiktoken:cl100k_base``, ``tiktoken:o200k_base``, ``anthropic`` (the calibrated
    Anthropic counter, :func:`anthropic_counter`), ``anthropic:chars``,
    ``anthropic:o200k``, ``openai:MODEL`` (:class:`OpenAIChatCounter`),
    ``auto:MODEL`` (:func:`counter_for_model`) or ``auto`` (the counter for
    ``model``, :func:`counter_for_model`; char without one)."""
    if name == "auto":
        return counter_for_model(model)
    if name == "char":
        return CharCounter(safety_margin)
    if name == "word":
        return WordCounter()
    if name == "tiktoken":
        return TiktokenCounter()
    if name.startswith("tiktoken:"):
        return TiktokenCounter(name.split(":", 1)[1])
    if name == "anthropic":
        return anthropic_counter()
    if name in ("anthropic:chars", "anthropic:o200k"):
        return anthropic_counter("chars" if name.endswith("chars") else "o200k")
    if name.startswith("openai:"):
        return OpenAIChatCounter(name.split(":", 1)[1])
    if name.startswith("auto:"):
        return counter_for_model(name.split(":", 1)[1])
    raise UsageError(f"unknown counter {name!r}; {_CHOOSE}")


def provider_of(model: str | None) -> str | None:
    """The provider whose counts a request to ``model`` is measured against:
    ``anthropic`` for a Claude model, ``openai`` for a model
    :func:`~ctxwise.tokens.openai_encoding` knows, else ``None``."""
    if not model or not model.strip():
        return None
    if is_claude_model(model):
        return "anthropic"
    return "openai" if openai_encoding(model) is not None else None


def default_safety_margin(counter: TokenCounter | str, model: str | None) -> float:
    """The ``safety_margin`` a budget gets by default: the measured 95th-percentile
    relative error (:func:`counter_error`) of ``counter`` against the provider
    ``model`` goes to. ``0.0`` when that pair was not measured: an :class:`OpenAIChatCounter` for an
    OpenAI model (exact BPE and the documented overheads), or a model of no known
    provider."""
    provider = provider_of(model)
    if provider is None:
        return 0.0
    if provider == "openai" and isinstance(counter, OpenAIChatCounter):
        return 0.0
    accuracy = counter_error(counter, provider)
    return 0.0 if accuracy is None else accuracy.p95
