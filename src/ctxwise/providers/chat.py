"""Chat completion adapters: one prompt in, text out, no tools offered."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ctxwise.errors import MissingDependencyError, ProviderError, UsageError
from ctxwise.providers._response import (
    AnthropicMessage,
    OpenAIChatCompletion,
    check_prompt,
    connection_error,
    parse_body,
    raw_body,
    sendable,
    status_error,
    sync_client,
)

if TYPE_CHECKING:
    import anthropic
    import openai

__all__ = ["AnthropicChat", "ChatModel", "OpenAIChat"]


@runtime_checkable
class ChatModel(Protocol):
    """A model that answers one user message under a system prompt."""

    @property
    def name(self) -> str: ...

    def complete(self, system: str, user: str, max_tokens: int) -> str: ...


def _check(max_tokens: int, system: str, user: str) -> None:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise UsageError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    check_prompt(system=system, user=user)


_PREVIEW = 200


def _partial(text: str) -> str:
    """What the model wrote before it was stopped, for an error message."""
    if not text.strip():
        return "no text before it"
    shown = text if len(text) <= _PREVIEW else text[:_PREVIEW] + "..."
    return f"{len(text)} characters of text before it: {shown!r}"


class AnthropicChat:
    """The Messages API through the official ``anthropic`` SDK.

    A reply a safety classifier stopped (``stop_reason`` "refusal": HTTP 200 with
    the text written so far) is a :class:`~ctxwise.errors.ProviderError` that
    shows that text, not an answer; so is a reply with no text. A ``max_tokens``
    the SDK refuses to send without streaming under its default timeout is a
    :class:`~ctxwise.errors.UsageError` (give the client an explicit timeout).
    """

    def __init__(self, client: anthropic.Anthropic, model: str) -> None:
        try:
            import anthropic as _sdk
        except ImportError:
            raise MissingDependencyError(
                "anthropic", "anthropic", "the Anthropic adapter"
            ) from None
        self.client = sync_client("AnthropicChat", _sdk, client)
        self.model = model

    @property
    def name(self) -> str:
        return f"anthropic:{self.model}"

    def complete(self, system: str, user: str, max_tokens: int) -> str:
        import anthropic as sdk

        _check(max_tokens, system, user)
        try:
            raw: Any = self.client.messages.with_raw_response.create(
                model=self.model,
                max_tokens=max_tokens,
                system=sendable(system),
                messages=[{"role": "user", "content": sendable(user)}],
            )
        except sdk.APIStatusError as exc:
            raise status_error("anthropic", exc.status_code, exc.response) from exc
        except sdk.APIError as exc:
            raise connection_error("anthropic", exc) from exc
        except TypeError as exc:
            # raised before sending: a client with no credentials ("Could not resolve
            # authentication method"), as anthropic.Anthropic() is without ANTHROPIC_API_KEY
            raise ProviderError("anthropic", f"the SDK could not send the request: {exc}") from exc
        except ValueError as exc:
            # raised before sending; the SDK refuses a non-streaming call whose
            # max_tokens it expects to outlast its default timeout
            if "stream" not in str(exc).lower():
                raise UsageError(f"the anthropic SDK refused the call: {exc}") from exc
            raise UsageError(
                f"the anthropic SDK refused the call with max_tokens={max_tokens}: {exc} "
                "(lower max_tokens, or give the client an explicit timeout: "
                "anthropic.Anthropic(timeout=...))"
            ) from exc
        response = parse_body(
            "anthropic", raw_body("AnthropicChat", "anthropic", raw), AnthropicMessage
        )
        text = response.text("anthropic")
        if response.stop_reason == "refusal":
            # a streaming classifier stopped the answer: the text is cut, not an answer
            raise ProviderError(
                "anthropic", f"the model refused (stop_reason 'refusal'), {_partial(text)}"
            )
        if not text.strip():
            raise ProviderError("anthropic", f"empty answer (stop_reason {response.stop_reason!r})")
        return text


class OpenAIChat:
    """Chat Completions through the official ``openai`` SDK.

    A refusal (the message's ``refusal`` text) and an answer the content filters
    stopped (``finish_reason`` "content_filter", the text so far) are a
    :class:`~ctxwise.errors.ProviderError` that shows them, not an answer; so is a
    reply with no text.
    """

    def __init__(self, client: openai.OpenAI, model: str) -> None:
        try:
            import openai as _sdk
        except ImportError:
            raise MissingDependencyError("openai", "openai", "the OpenAI adapter") from None
        self.client = sync_client("OpenAIChat", _sdk, client)
        self.model = model

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    def complete(self, system: str, user: str, max_tokens: int) -> str:
        import openai as sdk

        _check(max_tokens, system, user)
        try:
            raw: Any = self.client.chat.completions.with_raw_response.create(
                model=self.model,
                max_completion_tokens=max_tokens,
                messages=[
                    {"role": "system", "content": sendable(system)},
                    {"role": "user", "content": sendable(user)},
                ],
            )
        except sdk.APIStatusError as exc:
            raise status_error("openai", exc.status_code, exc.response) from exc
        except sdk.APIError as exc:
            raise connection_error("openai", exc) from exc
        response = parse_body("openai", raw_body("OpenAIChat", "openai", raw), OpenAIChatCompletion)
        choice = response.choices[0]
        text = choice.message.content or ""
        refusal = choice.message.refusal
        if isinstance(refusal, str) and refusal.strip():
            raise ProviderError("openai", f"the model refused: {refusal.strip()}")
        if choice.finish_reason == "content_filter":
            # the content filters flagged the answer and omitted what followed
            raise ProviderError(
                "openai",
                f"the content filter stopped the answer (finish_reason 'content_filter'), "
                f"{_partial(text)}",
            )
        if not text.strip():
            reason = choice.finish_reason
            reasoning = response.reasoning_tokens()
            why = (
                f": the model spent {reasoning} reasoning tokens of max_tokens={max_tokens} "
                "before writing any answer; raise max_tokens"
                if reason == "length" and reasoning
                else ""
            )
            raise ProviderError("openai", f"empty answer (finish_reason {reason!r}){why}")
        return text
