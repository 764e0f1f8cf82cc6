"""Thin adapters over the official provider SDKs (extras ``anthropic`` and ``openai``).

An adapter takes a configured SDK client (ctxwise never reads keys from the
environment by itself). Chat adapters expose ``complete(system, user, max_tokens) -> str``
(:mod:`ctxwise.providers.chat`); counters that ask the provider's API satisfy
:class:`~ctxwise.tokens.TokenCounter` (:mod:`ctxwise.providers.counting`); a
yes/no model gives the probability of "yes" (:mod:`ctxwise.providers.scoring`).
Errors become :class:`~ctxwise.errors.ProviderError`.
"""

from ctxwise.providers.chat import AnthropicChat, ChatModel, OpenAIChat
from ctxwise.providers.counting import AnthropicCounter
from ctxwise.providers.scoring import OpenAIYesNo, YesNoModel

__all__ = [
    "AnthropicChat",
    "AnthropicCounter",
    "ChatModel",
    "OpenAIChat",
    "OpenAIYesNo",
    "YesNoModel",
]
