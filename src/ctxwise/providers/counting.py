"""Token counters that ask a provider's API (extra ``anthropic``).

The local counters (char, word, tiktoken) live in :mod:`ctxwise.tokens`; a
counter here satisfies the same :class:`~ctxwise.tokens.TokenCounter` protocol
but sends the text to the provider, so it needs a configured SDK client and the
network.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxwise.errors import MissingDependencyError, ProviderError, UsageError
from ctxwise.formats import anthropic as codec
from ctxwise.messages import Message, Transcript
from ctxwise.providers._response import (
    AnthropicCount,
    check_prompt,
    connection_error,
    parse_body,
    raw_body,
    sendable,
    status_error,
    sync_client,
)
from ctxwise.tokens import _LRU

if TYPE_CHECKING:
    import anthropic

__all__ = ["AnthropicCounter"]


class AnthropicCounter:
    """Counts with the Messages API ``count_tokens`` endpoint, cached by content hash.

    ``count(text)`` is the ``input_tokens`` of a request holding ``text`` as one
    user message, so it includes that request's small fixed framing.
    ``count_messages`` sends the whole conversation (system messages as the
    top-level ``system``) and so includes every overhead the API charges.
    Pass a configured ``anthropic.Anthropic`` client; ctxwise never reads keys
    from the environment by itself. Install with ``pip install -e '.[anthropic]'``.
    """

    def __init__(
        self,
        client: anthropic.Anthropic,
        model: str,
        *,
        cache_size: int = 65536,
    ) -> None:
        try:
            import anthropic as _anthropic
        except ImportError:
            raise MissingDependencyError(
                "anthropic", "anthropic", "counting with the Anthropic API"
            ) from None
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            # checked now: the cache is first used after a paid call, whose count it would lose
            raise UsageError(f"cache_size must be a whole number 0 or more, got {cache_size!r}")
        self.client = sync_client("AnthropicCounter", _anthropic, client)
        self.model = model
        self._cache = _LRU(cache_size)

    @property
    def name(self) -> str:
        return f"anthropic:{self.model}"

    def count(self, text: str) -> int:
        check_prompt(text=text)
        if not text:
            return 0
        return self._count_payload([{"role": "user", "content": text}], None)

    def count_messages(self, messages: Sequence[Message]) -> int:
        if not messages:
            return 0
        system, payload = codec.encode_messages(Transcript(tuple(messages)))
        return self._count_payload(payload, system)

    def _count_payload(self, messages: list[dict[str, Any]], system: Any) -> int:
        try:
            body = json.dumps(
                {"model": self.model, "system": system, "messages": messages},
                sort_keys=True,
                ensure_ascii=False,
            )
        except RecursionError as exc:
            raise UsageError(
                "the messages cannot be counted: a tool input or result nests too deeply "
                "for the JSON encoder, so no request can carry it"
            ) from exc
        key = _LRU.key(body)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        import anthropic as _anthropic

        try:
            body.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (a cut emoji): sent as U+FFFD
            messages, system = sendable(messages), sendable(system)
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages}
        if system is not None:
            kwargs["system"] = system
        try:
            raw: Any = self.client.messages.with_raw_response.count_tokens(**kwargs)
        except _anthropic.APIStatusError as exc:
            raise status_error("anthropic", exc.status_code, exc.response) from exc
        except _anthropic.APIError as exc:
            raise connection_error("anthropic", exc) from exc
        except TypeError as exc:  # raised before sending: a client with no credentials
            raise ProviderError("anthropic", f"the SDK could not send the request: {exc}") from exc
        n = parse_body(
            "anthropic", raw_body("AnthropicCounter", "anthropic", raw), AnthropicCount
        ).input_tokens
        self._cache.put(key, n)
        return n

    def __repr__(self) -> str:
        return f"AnthropicCounter(model={self.model!r})"
