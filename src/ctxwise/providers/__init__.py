"""Thin adapters over the official provider SDKs (extras ``anthropic`` and ``openai``).

An adapter takes a configured SDK client (ctxwise never reads keys from the
environment by itself) and exposes ``complete(system, user, max_tokens) -> str``.
Errors become :class:`~ctxwise.errors.ProviderError`.
"""

from ctxwise.providers.chat import AnthropicChat, ChatModel, OpenAIChat

__all__ = ["AnthropicChat", "ChatModel", "OpenAIChat"]
