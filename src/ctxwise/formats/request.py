"""Rendering a window (system part, history as real turns, a context block) as a
provider request, with cache breakpoints.

A :class:`Window` is what the Engine decided to send, in the neutral model:

- ``system``: the system part's blocks in order; the first ``stable`` of them are
  the cache-stable prefix (identical across turns);
- ``messages``: the history as real message turns, tool pairs intact;
- ``context``: routed and recalled context for this turn (or empty), and
  ``context_at``: the index of the message it rides in (the latest user turn).

:meth:`Window.transcript` is the neutral form of exactly what is sent (the
context block placed into its message), which is what the token counter counts.

For Anthropic (:func:`render_anthropic`), consecutive user messages of tool
results (parallel calls read from Chat Completions, one ``tool`` message each)
become one user message, as the Messages API requires; ``system`` becomes text
blocks and the last stable one carries ``cache_control``; a second breakpoint goes on the last
block of the message before the context-bearing one, the end of the history the
next turn will share, so each turn reads the previous turn's cache. Blocks that
cannot carry ``cache_control`` (thinking, empty text) are skipped over.
Thinking with no signature (a reasoning summary from the OpenAI Agents SDK or
another provider, a block given by hand) is left out: the Messages API requires
the signature Anthropic returned with each thinking block sent back, and
verifies it. Nothing the API requires is lost: the only thinking it requires
back is that of the assistant turn whose tool calls the last user turn answers,
signed, which no other source can supply; the thinking of earlier turns is
optional (most models strip it from the context). An assistant message left with
nothing else (or only blank text) is not sent; the API combines the consecutive
turns of one role around it. For
OpenAI (:func:`render_openai`), whose caching is automatic on the longest shared
prefix, the system part is one system message and the history follows.

Both renders write each message with its codec, so a block read from the other
provider's format is converted, left out with a visible placeholder or refused by
the rule of the target codec (:mod:`ctxwise.formats.anthropic`,
:mod:`ctxwise.formats.openai`), and a block of the target's own format is sent as
it was read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ctxwise.formats import anthropic, openai
from ctxwise.messages import (
    ContentBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    Transcript,
    block_text,
)
from ctxwise.tokens import TokenCounter

__all__ = [
    "CONTEXT_CLOSE",
    "CONTEXT_OPEN",
    "SentCounter",
    "Window",
    "render_anthropic",
    "render_openai",
]

CONTEXT_OPEN = "<context>"
CONTEXT_CLOSE = "</context>"
_NO_CACHE_TYPES = ("thinking", "redacted_thinking")


@dataclass(frozen=True, slots=True)
class Window:
    system: tuple[str, ...]
    stable: int
    messages: tuple[Message, ...]
    context: str = ""
    context_at: int | None = None

    def context_block(self) -> str:
        return f"{CONTEXT_OPEN}\n{self.context}\n{CONTEXT_CLOSE}" if self.context else ""

    def with_context(self) -> tuple[Message, ...]:
        """The messages with the context block placed: after the tool results of a
        tool-result turn, before the text of a text turn (the question stays last)."""
        block = self.context_block()
        if not block or self.context_at is None:
            return self.messages
        target = self.messages[self.context_at]
        text = TextBlock(block)
        results = [b for b in target.content if isinstance(b, ToolResultBlock)]
        if results:
            others = [b for b in target.content if not isinstance(b, ToolResultBlock)]
            content = (*results, text, *others)
        else:
            content = (text, *target.content)
        placed = replace(target, content=content, plain=False)
        out = list(self.messages)
        out[self.context_at] = placed
        return tuple(out)

    def transcript(self) -> Transcript:
        """The neutral form of the request: one system message, then the turns."""
        system = (
            (Message("system", tuple(TextBlock(s) for s in self.system)),) if self.system else ()
        )
        return Transcript((*system, *self.with_context()))


def _breakpoint(blocks: list[dict[str, Any]], mark: dict[str, Any]) -> bool:
    for block in reversed(blocks):
        if block.get("type") in _NO_CACHE_TYPES:
            continue
        if block.get("type") == "text" and not block.get("text"):
            continue
        block["cache_control"] = dict(mark)
        return True
    return False


def _encoded(
    window: Window,
    encoded: Sequence[Any] | None,
    encode: Callable[[Message], Any],
    sent: Callable[[Message], Message | None] = lambda m: m,
) -> tuple[list[Any], int | None]:
    """Each message's encoding: ``encoded[i]`` where given (encodings the caller
    kept from earlier turns), a fresh one for the message carrying the context and
    for one ``sent`` changes; and where the context-bearing message went. A message
    ``sent`` maps to ``None`` is not sent."""
    placed = window.with_context()
    if encoded is not None and len(encoded) != len(placed):
        raise ValueError("encoded must hold one encoding per window message")
    out: list[Any] = []
    at = None
    for i, m in enumerate(placed):
        s = sent(m)
        if s is None:
            continue
        if i == window.context_at:
            at = len(out)
        kept = encoded is not None and i != window.context_at and s is m
        out.append(encoded[i] if kept and encoded is not None else encode(s))
    return out, at


def _unsigned(block: ContentBlock) -> bool:
    return isinstance(block, ThinkingBlock) and not block.redacted and not block.signature


def _signed_only(message: Message) -> Message | None:
    """``message`` as :func:`render_anthropic` sends it: without thinking that has
    no signature, and not at all when blank text is all that is left of it."""
    if not any(_unsigned(b) for b in message.content):
        return message
    kept = tuple(b for b in message.content if not _unsigned(b))
    if all(isinstance(b, TextBlock) and not b.text.strip() for b in kept):
        return None
    return replace(message, content=kept)


def _is_results(message: dict[str, Any], *, only: bool) -> bool:
    """A user message of tool results (``only``), or one that starts with them."""
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list) or not content:
        return False
    types = [b.get("type") if isinstance(b, dict) else None for b in content]
    return all(t == "tool_result" for t in types) if only else types[0] == "tool_result"


def _join_results(
    messages: list[dict[str, Any]], context_at: int | None
) -> tuple[list[dict[str, Any]], int | None]:
    """Consecutive user messages of tool results as one message (and where the
    context-bearing message went): the results of parallel calls, which Chat
    Completions and the neutral model keep one a message, must all come in the one
    user message after the calls. New dicts; the given ones are not changed."""
    out: list[dict[str, Any]] = []
    at = None
    for i, message in enumerate(messages):
        if out and _is_results(out[-1], only=True) and _is_results(message, only=False):
            out[-1] = {**out[-1], "content": [*out[-1]["content"], *message["content"]]}
        else:
            out.append(message)
        if i == context_at:
            at = len(out) - 1
    return out, at


def render_anthropic(
    window: Window,
    *,
    model: str,
    max_tokens: int,
    cache_ttl: Literal["5m", "1h"] | None = None,
    context_management: dict[str, Any] | None = None,
    encoded: Sequence[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A Messages API request body for ``window`` (see the module docstring).

    ``encoded``: the messages' :func:`ctxwise.formats.anthropic.encode_message`
    output, when the caller keeps it across turns (they are not modified; the
    message that gets a breakpoint is copied). The body shares those objects:
    copy it before changing it in place."""
    mark: dict[str, Any] = {"type": "ephemeral"}
    if cache_ttl is not None:
        mark["ttl"] = cache_ttl
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    system: list[dict[str, Any]] = [{"type": "text", "text": s} for s in window.system if s]
    if system:
        stable = sum(1 for s in window.system[: window.stable] if s)
        if stable:
            system[stable - 1]["cache_control"] = dict(mark)
        body["system"] = system
    messages, context_at = _join_results(
        *_encoded(window, encoded, anthropic.encode_message, _signed_only)
    )
    end = context_at if context_at is not None else len(messages)
    for i in range(end - 1, -1, -1):
        content = messages[i].get("content")
        if isinstance(content, str):
            blocks = [{"type": "text", "text": content}] if content else []
        else:
            blocks = [dict(b) for b in content] if isinstance(content, list) else []
        if _breakpoint(blocks, mark):
            messages[i] = {**messages[i], "content": blocks}
            break
    body["messages"] = messages
    if context_management is not None:
        body["context_management"] = context_management
    return body


def render_openai(
    window: Window,
    *,
    model: str,
    max_tokens: int,
    encoded: Sequence[list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """A Chat Completions request body for ``window``; ``encoded`` as for
    :func:`render_anthropic` (:func:`ctxwise.formats.openai.encode_message` output)."""
    messages: list[dict[str, Any]] = []
    text = "\n\n".join(s for s in window.system if s)
    if text:
        messages.append({"role": "system", "content": text})
    for parts in _encoded(window, encoded, openai.encode_message)[0]:
        messages.extend(parts)
    return {"model": model, "max_completion_tokens": max_tokens, "messages": messages}


def _as_sent_openai(message: Message) -> list[Message]:
    """``message`` as the Chat Completions messages :func:`render_openai` sends for
    it, in neutral form: a system message's texts joined into one (as the system
    part is), a user message's tool results one message each, then its other
    blocks (:func:`ctxwise.formats.openai.encode_message`): without thinking (Chat
    Completions is not sent it; an assistant message of thinking only is not sent
    at all), Anthropic blocks with no Chat Completions form as the text that stands
    for them."""
    if openai._left_out(message):
        return []
    native = openai._natives(message.content)
    native = tuple(b for b in native if not isinstance(b, ThinkingBlock))
    if native != message.content:
        message = replace(message, content=native)
    if message.role == "system":
        joined = "\n\n".join(t for t in (block_text(b) for b in message.content) if t)
        if len(message.content) > 1 and all(isinstance(b, TextBlock) for b in message.content):
            return [replace(message, content=(TextBlock(joined),))]
        return [message]
    if message.role != "user":
        return [message]
    results = [b for b in message.content if isinstance(b, ToolResultBlock)]
    if not results:
        return [message]
    out: list[Message] = []
    moved: list[ContentBlock] = []  # parts a tool message cannot hold go to the user one
    for r in results:
        texts, media = openai._split_result(r, message.extra.get("openai._role"))
        moved.extend(media)
        out.append(replace(message, content=(replace(r, content=texts),), plain=False))
    others = (*moved, *(b for b in message.content if not isinstance(b, ToolResultBlock)))
    if others:
        out.append(replace(message, content=others, plain=message.plain and not moved))
    return out


class SentCounter:
    """``counter`` counting messages as a render sends them: each message the
    provider receives carries the counter's per-message framing once.

    For ``"anthropic"`` the neutral messages are what is sent (parallel tool
    results share one user message, as in the neutral form), so counts are
    ``counter``'s own, less the unsigned thinking the render leaves out. For
    ``"openai"`` (Chat Completions) a user turn of ``n`` tool results is ``n``
    ``tool`` messages (plus one for its other blocks), and the system part one
    message of its texts joined by blank lines: counting the neutral message
    instead leaves out that framing and those separators, which a full window
    would send over its budget."""

    def __init__(self, counter: TokenCounter, render: Literal["anthropic", "openai"]) -> None:
        self.counter = counter
        self.render = render

    @property
    def name(self) -> str:
        return self.counter.name

    def count(self, text: str) -> int:
        return self.counter.count(text)

    def count_messages(self, messages: Sequence[Message]) -> int:
        if self.render == "openai":
            messages = [part for m in messages for part in _as_sent_openai(m)]
        else:
            messages = [s for s in map(_signed_only, messages) if s is not None]
        return self.counter.count_messages(messages)

    def __repr__(self) -> str:
        return f"SentCounter({self.counter!r}, {self.render!r})"
