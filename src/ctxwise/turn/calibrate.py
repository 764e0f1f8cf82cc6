"""Online calibration: what the provider counted for a session's requests tightens
its budget to the provider's count.

A local counter is off from the provider's count by a share that depends on the
text (:func:`ctxwise.tokens.counter_error`). A session's requests mostly repeat
the one before, so that share is nearly the same from one request to the next:
when a provider response comes back with its usage, the provider's prompt tokens
over ctxwise's count of the request that produced it (``ratio``) is the correction
the next request needs. Two steps keep it:

- ``calibrate`` (after observe; :meth:`Engine.record <ctxwise.engine.Engine.record>`
  runs it too): the first response among the new messages that carries usage
  (:func:`ctxwise.formats.inputs.response_usage`; Anthropic's ``input_tokens +
  cache_read_input_tokens + cache_creation_input_tokens``, OpenAI's
  ``prompt_tokens``, the Responses API's ``input_tokens``) is compared with the
  session's estimate of its latest request, and the session's correction factor
  moves to the ratio (:data:`LEARNING_RATE`: all the way). A ratio outside
  ``[MIN_FACTOR, MAX_FACTOR]`` (a usage that cannot be this request's: zero, a
  negative count, a response to another request) is clamped to the bound and
  reported. A response without usage, or one with no estimate to compare with (the
  session's first request, a second response to the same request), leaves the
  factor alone.
- ``estimate`` (after trace): the request's counted total (``trace.tokens.total``)
  becomes the session's estimate for the next response to be compared with, and
  the trace gets :class:`~ctxwise.trace.CalibrationTrace`.

The budget step plans with the factor (:mod:`ctxwise.turn.budget`). Everything is
in the session state (:class:`~ctxwise._session_state.CalibrationMemo`, a constant
size), so another Engine on the same store continues it; no clock is read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ctxwise._session_state import CalibrationMemo
from ctxwise.formats.inputs import response_usage
from ctxwise.trace import CalibrationTrace
from ctxwise.turn.context import TurnContext
from ctxwise.turn.state import TurnState

__all__ = [
    "LEARNING_RATE",
    "MAX_FACTOR",
    "MIN_FACTOR",
    "calibrate",
    "estimate",
    "learn",
    "provider_prompt_tokens",
]

MIN_FACTOR = 0.25
"""The smallest correction factor (and observed ratio) the budget trusts."""
MAX_FACTOR = 4.0
"""The largest correction factor (and observed ratio) the budget trusts."""
LEARNING_RATE = 1.0
"""How far the factor moves to each new ratio (the first sets it). 1: the factor is
the latest ratio. A session's request repeats most of the one before, so the latest
ratio predicts the next best; replaying the shared Claude Code sessions, a smaller
rate left the next request's expected count further from the provider's
(docs/tokens.md, "Online calibration")."""

_ANTHROPIC = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def provider_prompt_tokens(usage: Mapping[str, Any]) -> int | None:
    """The prompt tokens a usage reports: Anthropic's (and the Responses API's)
    ``input_tokens`` plus the cache reads and writes (absent ones count 0; the
    Responses API's cached tokens are inside ``input_tokens``), or Chat Completions'
    ``prompt_tokens``. A negative count is read as it is (the calibration clamps
    it); ``None`` when the usage has no integer count."""
    if "input_tokens" in usage:
        counts = [_int(usage.get(k)) for k in _ANTHROPIC if k == "input_tokens" or k in usage]
        if any(c is None for c in counts):
            return None
        return sum(c for c in counts if c is not None)
    if "prompt_tokens" in usage:
        return _int(usage["prompt_tokens"])
    return None


def learn(memo: CalibrationMemo, observed: int) -> CalibrationMemo:
    """``memo`` after the provider counted ``observed`` prompt tokens for the request
    ``memo.estimate`` counted (which must be set and positive)."""
    assert memo.estimate, "a comparison needs the estimate of the request"
    ratio = observed / memo.estimate
    bounded = min(max(ratio, MIN_FACTOR), MAX_FACTOR)
    target = bounded if memo.calls == 0 else memo.factor + LEARNING_RATE * (bounded - memo.factor)
    factor = min(max(round(target, 6), MIN_FACTOR), MAX_FACTOR)
    return CalibrationMemo(
        factor=factor,
        calls=memo.calls + 1,
        estimate=None,
        observed=observed,
        compared=memo.estimate,
        clamped=bounded != ratio,
    )


def calibrate(state: TurnState, ctx: TurnContext) -> TurnState:
    session = state.session
    memo = session.calibration
    if memo is None or not memo.estimate:
        return state
    for message in state.new:
        usage = response_usage(message)
        observed = None if usage is None else provider_prompt_tokens(usage)
        if observed is not None:
            return state.but(session=session.but(calibration=learn(memo, observed)))
    return state


def estimate(state: TurnState, ctx: TurnContext) -> TurnState:
    trace, plan = state.trace, state.budget
    if trace is None or plan is None:
        return state
    session = state.session
    memo = session.calibration or CalibrationMemo()
    total = trace.tokens.total
    report = CalibrationTrace(
        counter=ctx.counter.name,
        factor=plan.factor,
        margin=plan.margin,
        limit=plan.limit if plan.limit is not None else plan.available,
        expected=math.ceil(total * plan.factor - 1e-9),
        calls=memo.calls,
        observed=memo.observed,
        estimate=memo.compared,
        ratio=None
        if memo.observed is None or not memo.compared
        else round(memo.observed / memo.compared, 6),
        clamped=memo.clamped,
    )
    kept = CalibrationMemo(factor=memo.factor, calls=memo.calls, estimate=total)
    return state.but(
        session=session.but(calibration=kept),
        trace=trace.model_copy(update={"calibration": report}),
        calibration=report,
    )
