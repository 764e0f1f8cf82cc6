"""Window composition of a transcript: where the tokens go.

Like Claude Code's ``/context``: tokens by kind of content, tokens by tool (its
calls' inputs and its results), the largest items, and tool pairing problems.

``total_tokens`` is ``counter.count_messages(messages)``, the one count that
``clear_tool_uses`` and ``compact`` report as ``tokens_before`` for the same
messages and counter, and it is the sum of ``by_kind``: each block is counted as
``count_messages`` counts it (its text, see :func:`ctxwise.messages.block_text`,
plus ``media_tokens`` per image or document), and the kind ``framing`` holds the
rest, the per-message and per-request overhead the counter adds (4 per message
for the char and word counters, 3 per message and 3 per request for tiktoken).
With a counter whose single-text count carries its own framing (the Anthropic
API's), ``framing`` is the difference and can be negative.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace
from typing import Any, get_args

from ctxwise.errors import UsageError
from ctxwise.messages import (
    MediaBlock,
    OpaqueBlock,
    PairingProblem,
    Placement,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    block_text,
)
from ctxwise.tokens import MEDIA_TOKENS, CharCounter, TokenCounter

__all__ = ["KINDS", "Composition", "CompositionItem", "ToolTokens", "composition"]

KINDS: tuple[str, ...] = (
    "system",
    "user_text",
    "assistant_text",
    "tool_use",
    "tool_result",
    "thinking",
    "compact_summary",
    "media",
    "other",
    "framing",
)


@dataclass(frozen=True, slots=True)
class CompositionItem:
    """One content block: where it is, what it is, what it costs."""

    message_index: int
    kind: str
    tokens: int
    tool: str | None
    preview: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "message_index": self.message_index,
            "kind": self.kind,
            "tool": self.tool,
            "tokens": self.tokens,
            "preview": self.preview,
        }


@dataclass(frozen=True, slots=True)
class ToolTokens:
    """One tool's share: how many calls, and the tokens of their inputs and results."""

    calls: int = 0
    inputs: int = 0
    results: int = 0

    @property
    def tokens(self) -> int:
        return self.inputs + self.results

    def to_dict(self) -> dict[str, int]:
        return {"calls": self.calls, "inputs": self.inputs, "results": self.results}


@dataclass(frozen=True, slots=True)
class Composition:
    """Where a transcript's tokens go; ``by_tool`` is each tool's inputs + results,
    ``tools`` the same split into calls, inputs and results."""

    total_tokens: int
    by_kind: dict[str, int]
    by_tool: dict[str, int]
    largest: tuple[CompositionItem, ...]
    problems: tuple[PairingProblem, ...]
    messages: int
    compactions: int
    counter: str
    tools: dict[str, ToolTokens] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_tokens": self.total_tokens,
            "by_kind": dict(self.by_kind),
            "by_tool": dict(self.by_tool),
            "tools": {name: t.to_dict() for name, t in self.tools.items()},
            "largest": [i.to_dict() for i in self.largest],
            "problems": [p.to_dict() for p in self.problems],
            "messages": self.messages,
            "compactions": self.compactions,
            "counter": self.counter,
        }


def _preview(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    flat = flat if len(flat) <= width else flat[: width - 1] + "…"
    # lone surrogates (a cut emoji) cannot be printed or encoded: show U+FFFD
    return flat.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _check_arguments(transcript: object, counter: object, top: object, placement: object) -> None:
    """A UsageError naming the argument; each one raised TypeError or AttributeError
    from deep inside, and an unknown placement was taken as ``loose``."""
    if not isinstance(transcript, Transcript):
        raise UsageError(
            "transcript must be a Transcript (Transcript(messages)), got "
            f"{type(transcript).__name__}"
        )
    if counter is not None and not all(
        callable(getattr(counter, m, None)) for m in ("count", "count_messages")
    ):
        raise UsageError(
            f"counter must be a TokenCounter (count and count_messages), got {counter!r}; "
            "get_counter('char') gives one"
        )
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise UsageError(f"top must be a whole number of 0 or more, got {top!r}")
    if placement not in get_args(Placement):
        raise UsageError(
            f"unknown placement {placement!r}; choose {', '.join(get_args(Placement))}"
        )


def composition(
    transcript: Transcript,
    counter: TokenCounter | None = None,
    *,
    top: int = 10,
    placement: Placement = "loose",
) -> Composition:
    """Tokens by kind and by tool, the ``top`` largest blocks, and pairing problems.

    ``total_tokens == counter.count_messages(transcript.messages)`` and
    ``== sum(by_kind.values())`` (see the module docstring).
    """
    _check_arguments(transcript, counter, top, placement)
    ctr = counter if counter is not None else CharCounter()
    flat = int(getattr(ctr, "media_tokens", MEDIA_TOKENS))
    by_counter = getattr(ctr, "media_cost", None)

    def media_cost(block: MediaBlock) -> int:
        # as the counter counts it (a plain-text document by its text), else flat
        return int(by_counter(block)) if callable(by_counter) else flat

    names = transcript.tool_names()
    by_kind = dict.fromkeys(KINDS, 0)
    tools: dict[str, ToolTokens] = {}
    items: list[CompositionItem] = []
    for i, msg in enumerate(transcript.messages):
        for block in msg.content:
            tool: str | None = None
            text = block_text(block)
            tokens = ctr.count(text)
            if msg.role == "system":
                kind = "system"
            elif msg.kind == "compact_summary":
                kind = "compact_summary"
            elif isinstance(block, TextBlock):
                kind = "user_text" if msg.role == "user" else "assistant_text"
            elif isinstance(block, ToolUseBlock):
                kind, tool = "tool_use", block.name
                t = tools.get(tool, ToolTokens())
                tools[tool] = replace(t, calls=t.calls + 1, inputs=t.inputs + tokens)
            elif isinstance(block, ToolResultBlock):
                kind, tool = "tool_result", names.get(block.tool_use_id, "(unknown)")
                if not isinstance(block.content, str):
                    tokens += sum(media_cost(b) for b in block.content if isinstance(b, MediaBlock))
                t = tools.get(tool, ToolTokens())
                tools[tool] = replace(t, results=t.results + tokens)
            elif isinstance(block, ThinkingBlock):
                kind = "thinking"
            elif isinstance(block, MediaBlock):
                kind, tokens = "media", media_cost(block)
                text = f"[{block.media}]"
            else:
                assert isinstance(block, OpaqueBlock)
                kind = "other"
            by_kind[kind] += tokens
            items.append(CompositionItem(i, kind, tokens, tool, _preview(text)))
    total = ctr.count_messages(transcript.messages)
    by_kind["framing"] = total - sum(by_kind.values())
    largest = heapq.nlargest(top, items, key=lambda it: it.tokens) if top > 0 else []
    ranked = sorted(tools.items(), key=lambda kv: (-kv[1].tokens, kv[0]))
    return Composition(
        total_tokens=total,
        by_kind=by_kind,
        by_tool={name: t.tokens for name, t in ranked},
        tools=dict(ranked),
        largest=tuple(largest),
        problems=tuple(transcript.problems(placement)),
        messages=len(transcript.messages),
        compactions=len(transcript.compactions),
        counter=ctr.name,
    )
