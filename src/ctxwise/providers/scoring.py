"""Yes-probability scoring: how likely a model answers "yes" to a question.

:class:`OpenAIYesNo` asks Chat Completions for one token with its top log
probabilities (``logprobs=True``, ``top_logprobs``) and returns
``P(yes) / (P(yes) + P(no))`` over the top tokens that read as yes or no (case and
surrounding spaces ignored). When neither appears among them the answer is 0.5:
the model said neither, so the score says nothing either way.

The Messages API returns no log probabilities, so there is no Anthropic twin.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ctxwise.errors import MissingDependencyError, ProviderError, UsageError
from ctxwise.providers._response import (
    OpenAIScoredCompletion,
    check_prompt,
    connection_error,
    parse_body,
    raw_body,
    sendable,
    status_error,
    sync_client,
)

if TYPE_CHECKING:
    import openai

__all__ = ["OpenAIYesNo", "YesNoModel"]


@runtime_checkable
class YesNoModel(Protocol):
    """A model that gives the probability of "yes" to a yes/no question."""

    @property
    def name(self) -> str: ...

    def yes_probability(self, system: str, user: str) -> float: ...


class OpenAIYesNo:
    """Chat Completions' log probabilities through the official ``openai`` SDK."""

    def __init__(self, client: openai.OpenAI, model: str, *, top_logprobs: int = 5) -> None:
        try:
            import openai as _sdk
        except ImportError as e:
            raise MissingDependencyError("openai", "openai", "the OpenAI scorer") from e
        if isinstance(top_logprobs, bool) or not isinstance(top_logprobs, int):
            raise UsageError(f"top_logprobs must be an integer, got {top_logprobs!r}")
        if not 1 <= top_logprobs <= 20:
            raise UsageError(f"top_logprobs must be between 1 and 20, got {top_logprobs}")
        self.client = sync_client("OpenAIYesNo", _sdk, client)
        self.model = model
        self.top_logprobs = top_logprobs

    @property
    def name(self) -> str:
        return f"openai-yes:{self.model}"

    def yes_probability(self, system: str, user: str) -> float:
        import openai as sdk

        check_prompt(system=system, user=user)
        try:
            raw: Any = self.client.chat.completions.with_raw_response.create(
                model=self.model,
                max_completion_tokens=1,
                logprobs=True,
                top_logprobs=self.top_logprobs,
                messages=[
                    {"role": "system", "content": sendable(system)},
                    {"role": "user", "content": sendable(user)},
                ],
            )
        except sdk.APIStatusError as exc:
            raise status_error("openai", exc.status_code, exc.response) from exc
        except sdk.APIError as exc:
            raise connection_error("openai", exc) from exc
        response = parse_body(
            "openai", raw_body("OpenAIYesNo", "openai", raw), OpenAIScoredCompletion
        )
        choice = response.choices[0]
        content = choice.logprobs.content if choice.logprobs is not None else None
        if not content:
            refused = choice.refusal()  # a refusal has its log probabilities elsewhere
            if refused is not None:
                raise ProviderError("openai", f"the model refused: {refused}")
            raise ProviderError("openai", "the response has no log probabilities")
        picked: list[tuple[bool, float]] = []
        for top in content[0].top_logprobs or []:
            word = top.token.strip().lower()
            if word in ("yes", "no"):
                # validated finite and <= a tiny epsilon: clamp the rounding above 0
                picked.append((word == "yes", min(top.logprob, 0.0)))
        if not picked:
            return 0.5
        # relative to the largest, so log probabilities past exp's range (-745) still
        # compare: exp(-1000) and exp(-1001) are both 0.0, their ratio is not
        top_lp = max(lp for _, lp in picked)
        yes = sum(math.exp(lp - top_lp) for is_yes, lp in picked if is_yes)
        no = sum(math.exp(lp - top_lp) for is_yes, lp in picked if not is_yes)
        return yes / (yes + no)
