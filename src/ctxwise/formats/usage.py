"""What a provider counted for the messages added between two calls.

A transcript that records each call's usage tells how many tokens the provider
counted for the messages between two calls: the prompt of call ``n + 1`` holds the
prompt of call ``n`` (system prompt, tool definitions, the messages so far) plus
call ``n``'s response and what followed it (tool results, the user's next message).
So ``prompt[n+1] - prompt[n]`` is the provider's count of those added messages, a
ground truth for a local counter without a provider tokenizer. For Anthropic the
prompt of a call is ``input_tokens + cache_read_input_tokens +
cache_creation_input_tokens`` (the cache fields split the same prompt, they do
not add to it); for OpenAI it is ``prompt_tokens``.

:func:`usage_steps` turns a transcript and its calls (:class:`CallUsage`) into
:class:`UsageStep` records, whatever recorded them; :func:`claude_code_usage_steps`
reads a Claude Code session file, and :func:`transcript_calls` finds the usage any
codec kept on assistant messages (an ``extra`` key ending in ``.usage``). How a
Claude Code session becomes steps:

- **One response, several lines.** Claude Code writes one ``assistant`` line per
  content block of a streamed response, all with the same ``message.id`` and a
  copy of the same usage (only ``output_tokens`` grows). The reader
  (:mod:`ctxwise.formats.claude_code`) rebuilds one assistant message per id, and
  a call is one such message. When the lines of one id disagree on the prompt
  side of the usage, the call is ``inconsistent_usage``; without a usage object or
  its ``input_tokens``, ``missing_usage``. Steps touching such a call are skipped
  and counted, never guessed.
- **Parallel tool calls** are blocks of that one response; their results are one
  user message. Both are in the added messages of the step.
- **Compaction boundaries** (``compact_boundary``, then an ``isCompactSummary``
  message) start a new chain: the next prompt holds the summary, not what came
  before, so the pair of calls around a boundary is skipped (``compaction``).
- **Sidechains.** A subagent's file is its own chain of calls; sidechain lines in a
  main session file (older Claude Code versions) are left out by the reader, so
  they never enter a main-session step.
- **Thinking** blocks of the response are in its added messages as the transcript
  holds them (summarised text for Claude 4 models); whether, and at what weight,
  the next prompt counts them is left to the fit, which measures it
  (``benchmarks/bench_tokens.py`` reports the fitted weight).
- **A different model** between two calls (``/model``, a fallback) may change the
  system prompt and the tokenizer: skipped (``model_changed``).
- A prompt that does not grow (a cleared or rewritten history the file does not
  record) is skipped (``non_positive_delta``).

What the deltas also hold, and no counter can see: text the harness sends but does
not write to the file (hook output added after a tool ran, plan-mode reminders,
file-change notices). It shows as a step whose delta is well above its content.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxwise._io import parse_json
from ctxwise.formats.claude_code import _synthetic_error, read_claude_code_lines
from ctxwise.messages import Message, Transcript
from ctxwise.pricing import TokenSplit

__all__ = [
    "SKIP_REASONS",
    "BilledCall",
    "CallUsage",
    "UsageReport",
    "UsageStep",
    "billed_split",
    "claude_code_billed",
    "claude_code_usage_steps",
    "most_used_model",
    "prompt_tokens",
    "read_usage_steps",
    "transcript_calls",
    "usage_steps",
]

SKIP_REASONS = (
    "missing_usage",
    "inconsistent_usage",
    "compaction",
    "model_changed",
    "non_positive_delta",
)
"""Why a pair of consecutive calls gives no step (see the module docstring)."""

_ANTHROPIC_PROMPT = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


@dataclass(frozen=True, slots=True)
class CallUsage:
    """One recorded call: the index of its response in the transcript's messages and
    the prompt tokens the provider counted (``None`` with a ``problem``)."""

    index: int
    prompt_tokens: int | None
    model: str | None = None
    id: str | None = None
    problem: str | None = None
    """``missing_usage`` or ``inconsistent_usage`` when ``prompt_tokens`` is None."""


@dataclass(frozen=True, slots=True)
class UsageStep:
    """The messages added between two consecutive calls and the provider's count
    of them (``delta``)."""

    source: str
    step: str
    """``source#n``: the later call's position among the file's calls."""
    added: tuple[Message, ...]
    delta: int
    prompt_before: int
    prompt_after: int
    model: str | None = None


@dataclass(slots=True)
class UsageReport:
    """What became of a file's calls: ``steps`` made, pairs ``skipped`` by reason."""

    source: str
    calls: int = 0
    steps: int = 0
    skipped: Counter[str] = field(default_factory=Counter)


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def prompt_tokens(usage: Any) -> int | None:
    """The prompt tokens of one call's usage: Anthropic's ``input_tokens`` plus its
    cache reads and writes (absent cache fields count as 0), or OpenAI's
    ``prompt_tokens``; ``None`` when the usage has neither, or a field that is not a
    count of zero or more."""
    if not isinstance(usage, Mapping):
        return None
    if "input_tokens" in usage:
        total = 0
        for key in _ANTHROPIC_PROMPT:
            value = usage.get(key)
            if value is None and key != "input_tokens":
                continue  # a usage from before prompt caching
            n = _count(value)
            if n is None:
                return None
            total += n
        return total
    if "prompt_tokens" in usage:
        return _count(usage["prompt_tokens"])
    return None


def usage_steps(
    transcript: Transcript, calls: Sequence[CallUsage], *, source: str = "transcript"
) -> tuple[list[UsageStep], UsageReport]:
    """One :class:`UsageStep` per pair of consecutive ``calls`` (by message index),
    the pairs that give none counted by reason in the report (see the module
    docstring)."""
    report = UsageReport(source, calls=len(calls))
    ordered = sorted(calls, key=lambda c: c.index)
    bounds = [b.index for b in transcript.compactions]
    steps: list[UsageStep] = []
    for n, (a, b) in enumerate(itertools.pairwise(ordered), start=1):
        if a.prompt_tokens is None or b.prompt_tokens is None:
            report.skipped[(a if a.prompt_tokens is None else b).problem or "missing_usage"] += 1
            continue
        if any(a.index < x <= b.index for x in bounds):
            report.skipped["compaction"] += 1
            continue
        if a.model != b.model:
            report.skipped["model_changed"] += 1
            continue
        delta = b.prompt_tokens - a.prompt_tokens
        if delta <= 0:
            report.skipped["non_positive_delta"] += 1
            continue
        steps.append(
            UsageStep(
                source,
                f"{source}#{n}",
                transcript.messages[a.index : b.index],
                delta,
                a.prompt_tokens,
                b.prompt_tokens,
                b.model,
            )
        )
    report.steps = len(steps)
    return steps, report


def transcript_calls(transcript: Transcript) -> list[CallUsage]:
    """The calls whose usage a codec kept on the transcript's assistant messages (an
    ``extra`` key ending in ``.usage``; the model from one ending in ``.model``).
    An assistant message without one is a call with ``missing_usage``."""
    calls = []
    for i, m in enumerate(transcript.messages):
        if m.role != "assistant":
            continue
        usage = next((v for k, v in m.extra.items() if k.endswith(".usage")), None)
        model = next(
            (v for k, v in m.extra.items() if k.endswith(".model") and isinstance(v, str)), None
        )
        n = prompt_tokens(usage)
        calls.append(CallUsage(i, n, model, m.id, None if n is not None else "missing_usage"))
    return calls


def _claude_code_prompts(events: Iterable[Mapping[str, Any]]) -> dict[str, set[int | None]]:
    """``message.id`` → the prompt sizes its assistant lines record."""
    out: dict[str, set[int | None]] = defaultdict(set)
    for e in events:
        raw = e.get("message")
        if e.get("type") != "assistant" or not isinstance(raw, Mapping) or _synthetic_error(e):
            continue
        mid = raw.get("id")
        if isinstance(mid, str):
            out[mid].add(prompt_tokens(raw.get("usage")))
    return out


def claude_code_usage_steps(
    text: str, *, source: str = "claude-code"
) -> tuple[list[UsageStep], UsageReport]:
    """The usage steps of a Claude Code session file (its full text).

    Raises:
        FormatError: the file is not a Claude Code session (as
            :func:`~ctxwise.formats.claude_code.read_claude_code` raises it).
    """
    lines = text.split("\n")
    transcript, _ = read_claude_code_lines(lines, source=source)
    events = []
    for line in lines:  # the reader parsed every line already: these cannot fail
        if line.strip():
            event = parse_json(line)
            if isinstance(event, Mapping):
                events.append(event)
    prompts = _claude_code_prompts(events)
    calls = []
    for i, m in enumerate(transcript.messages):
        if m.role != "assistant":
            continue
        model = m.extra.get("claude_code.model")
        seen = prompts.get(m.id or "", {None})
        if len(seen) > 1:
            calls.append(CallUsage(i, None, None, m.id, "inconsistent_usage"))
            continue
        (n,) = seen
        problem = None if n is not None else "missing_usage"
        calls.append(CallUsage(i, n, model if isinstance(model, str) else None, m.id, problem))
    return usage_steps(transcript, calls, source=source)


def read_usage_steps(path: str | Path) -> tuple[list[UsageStep], list[UsageReport]]:
    """The usage steps of a transcript file, and a report per transcript in it: a
    Claude Code session by :func:`claude_code_usage_steps`, any other format
    :mod:`ctxwise.formats` reads by :func:`transcript_calls` (a file of several
    transcripts is read as one chain per transcript, ``source#k``).

    Raises:
        FormatError, UnknownFormatError: the file does not read.
    """
    from ctxwise.formats import read_transcript_file

    file = read_transcript_file(path)
    source = str(path)
    if file.format == "claude-code":
        steps, report = claude_code_usage_steps(file.text, source=source)
        return steps, [report]
    steps, reports = [], []
    for k, transcript in enumerate(file.transcripts):
        name = source if len(file.transcripts) == 1 else f"{source}#{k}"
        more, report = usage_steps(transcript, transcript_calls(transcript), source=name)
        steps += more
        reports.append(report)
    return steps, reports


@dataclass(frozen=True, slots=True)
class BilledCall:
    """One recorded call as the provider billed it: its response id, model and
    token split (uncached input, cache read, cache writes by lifetime, output)."""

    id: str
    model: str | None
    split: TokenSplit


def _int_field(usage: Mapping[str, Any], key: str) -> int:
    value = _count(usage.get(key))
    return 0 if value is None else value


def billed_split(usage: Any) -> TokenSplit | None:
    """How one response's ``usage`` was billed, whichever API wrote it; ``None``
    when it holds no input count.

    - Anthropic Messages (``input_tokens`` beside ``cache_read_input_tokens`` /
      ``cache_creation_input_tokens``): ``input_tokens`` is the uncached part; a cache
      write is split by lifetime when ``cache_creation`` says, else a 5-minute write;
    - OpenAI Responses (``input_tokens`` with ``input_tokens_details``) and Chat
      Completions (``prompt_tokens``): the input counts its cached tokens
      (``cached_tokens`` in the details), which are read from the cache; OpenAI
      writes its cache for free, so there is no write."""
    if not isinstance(usage, Mapping):
        return None
    if "prompt_tokens" in usage or "input_tokens_details" in usage:
        chat = "prompt_tokens" in usage
        total = _count(usage.get("prompt_tokens" if chat else "input_tokens"))
        if total is None:
            return None
        details = usage.get("prompt_tokens_details" if chat else "input_tokens_details")
        cached = _int_field(details, "cached_tokens") if isinstance(details, Mapping) else 0
        cached = min(cached, total)
        output = _int_field(usage, "completion_tokens" if chat else "output_tokens")
        return TokenSplit(uncached=total - cached, cache_read=cached, output=output)
    uncached = _count(usage.get("input_tokens"))
    if uncached is None:
        return None
    created = _int_field(usage, "cache_creation_input_tokens")
    by = usage.get("cache_creation")
    w1h = _int_field(by, "ephemeral_1h_input_tokens") if isinstance(by, Mapping) else 0
    return TokenSplit(
        uncached=uncached,
        cache_read=_int_field(usage, "cache_read_input_tokens"),
        cache_write_5m=max(created - w1h, 0),
        cache_write_1h=min(w1h, created) if created else w1h,
        output=_int_field(usage, "output_tokens"),
    )


def claude_code_billed(text: str) -> tuple[list[BilledCall], Counter[str]]:
    """What a Claude Code session file's own calls were billed, one per ``message.id``
    in file order (sidechain calls, which subagent files hold, are not in it), and
    the calls skipped by reason (``missing_usage``, ``inconsistent_usage``: its lines
    disagree on the input). A cache write is split by lifetime when the usage says
    (``cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``),
    else counted as a 5-minute write; the output is the largest ``output_tokens`` a
    line of the call records (streamed lines grow it)."""
    seen: dict[str, list[Mapping[str, Any]]] = {}
    models: dict[str, str | None] = {}
    for line in text.split("\n"):
        if not line.strip():
            continue
        event = parse_json(line)
        if not isinstance(event, Mapping) or event.get("type") != "assistant":
            continue
        raw = event.get("message")
        if not isinstance(raw, Mapping) or _synthetic_error(event):
            continue
        mid = raw.get("id")
        if not isinstance(mid, str):
            continue
        usage = raw.get("usage")
        seen.setdefault(mid, []).append(usage if isinstance(usage, Mapping) else {})
        model = raw.get("model")
        models[mid] = model if isinstance(model, str) else None
    calls: list[BilledCall] = []
    skipped: Counter[str] = Counter()
    for mid, usages in seen.items():
        inputs = {tuple(_count(u.get(k)) for k in _ANTHROPIC_PROMPT) for u in usages}
        if len(inputs) > 1:
            skipped["inconsistent_usage"] += 1
            continue
        (fields,) = inputs
        if any(v is None for v in fields):
            skipped["missing_usage"] += 1
            continue
        usage = usages[-1]
        created = _int_field(usage, "cache_creation_input_tokens")
        split_by = usage.get("cache_creation")
        if isinstance(split_by, Mapping):
            w1h = _int_field(split_by, "ephemeral_1h_input_tokens")
            w5m = created - w1h
        else:
            w5m, w1h = created, 0
        output = max(_int_field(u, "output_tokens") for u in usages)
        split = TokenSplit(
            uncached=_int_field(usage, "input_tokens"),
            cache_read=_int_field(usage, "cache_read_input_tokens"),
            cache_write_5m=max(w5m, 0),
            cache_write_1h=w1h,
            output=output,
        )
        calls.append(BilledCall(mid, models[mid], split))
    return calls, skipped


def most_used_model(calls: Sequence[BilledCall], default: str) -> str:
    """The model most of ``calls`` used (the first of a tie), else ``default``."""
    models = Counter(c.model for c in calls if c.model)
    return models.most_common(1)[0][0] if models else default
