"""Window composition of a transcript: where the tokens go.

Like Claude Code's ``/context``: tokens by kind of content, tool results by tool
name, the largest items, and tool pairing problems. ``total_tokens`` is the sum
of the kinds (block contents only; per-message framing is not attributed to a
kind and is left out).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

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

__all__ = ["KINDS", "Composition", "CompositionItem", "composition"]

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
class Composition:
    total_tokens: int
    by_kind: dict[str, int]
    by_tool: dict[str, int]
    largest: tuple[CompositionItem, ...]
    problems: tuple[PairingProblem, ...]
    messages: int
    compactions: int
    counter: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_tokens": self.total_tokens,
            "by_kind": dict(self.by_kind),
            "by_tool": dict(self.by_tool),
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


def composition(
    transcript: Transcript,
    counter: TokenCounter | None = None,
    *,
    top: int = 10,
    placement: Placement = "loose",
) -> Composition:
    """Tokens by kind and by tool, the ``top`` largest blocks, and pairing problems."""
    ctr = counter if counter is not None else CharCounter()
    media_cost = int(getattr(ctr, "media_tokens", MEDIA_TOKENS))
    names = transcript.tool_names()
    by_kind = dict.fromkeys(KINDS, 0)
    by_tool: dict[str, int] = {}
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
            elif isinstance(block, ToolResultBlock):
                kind, tool = "tool_result", names.get(block.tool_use_id, "(unknown)")
                if not isinstance(block.content, str):
                    tokens += media_cost * sum(isinstance(b, MediaBlock) for b in block.content)
                by_tool[tool] = by_tool.get(tool, 0) + tokens
            elif isinstance(block, ThinkingBlock):
                kind = "thinking"
            elif isinstance(block, MediaBlock):
                kind, tokens = "media", media_cost
                text = f"[{block.media}]"
            else:
                assert isinstance(block, OpaqueBlock)
                kind = "other"
            by_kind[kind] += tokens
            items.append(CompositionItem(i, kind, tokens, tool, _preview(text)))
    largest = heapq.nlargest(top, items, key=lambda it: it.tokens) if top > 0 else []
    return Composition(
        total_tokens=sum(by_kind.values()),
        by_kind=by_kind,
        by_tool=dict(sorted(by_tool.items(), key=lambda kv: -kv[1])),
        largest=tuple(largest),
        problems=tuple(transcript.problems(placement)),
        messages=len(transcript.messages),
        compactions=len(transcript.compactions),
        counter=ctr.name,
    )
