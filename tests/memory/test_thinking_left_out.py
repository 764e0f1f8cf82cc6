"""A model's thinking is its private reasoning, not something it said: it is left
out of the text memory keeps (recent turns, long-term items) and of what a
summarizer is given, over a real Claude Code session whose replies think."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxwise import CharCounter, Message, ThinkingBlock, read_transcript
from ctxwise.embeddings import HashingEmbedder
from ctxwise.memory import LongTermMemory, SQLiteStore, TieredMemory
from ctxwise.memory.tiered import turn_items
from ctxwise.summarize import LLMSummarizer, render_turns
from tests._http import anthropic_message, mock_client, response

SESSION = "transcripts/claude_code/tool_heavy.jsonl"


def _messages(data_dir: Path) -> list[Message]:
    t = read_transcript(str(data_dir / SESSION))
    return [m for m in t.messages if m.role != "system"]


def _thoughts(messages: list[Message]) -> list[str]:
    """Each thinking block's text (its first 60 characters, which no other block
    of the session repeats)."""
    out = [
        b.thinking.strip()[:60]
        for m in messages
        for b in m.content
        if isinstance(b, ThinkingBlock) and b.thinking.strip()
    ]
    assert out, "the session holds thinking"
    return out


def test_recent_turns_and_long_term_items_leave_thinking_out(
    data_dir: Path, tmp_path: Path
) -> None:
    messages = _messages(data_dir)
    thoughts = _thoughts(messages)
    said = [m.text.strip() for m in messages if m.text.strip()]
    store = SQLiteStore(str(tmp_path / "memory.db"))
    try:
        longterm = LongTermMemory(store, ("s26", "thinking"), HashingEmbedder(64))
        memory = TieredMemory(
            counter=CharCounter(), working_tokens=4000, working_turns=4, longterm=longterm
        )
        for m in messages:
            memory.add(m)
        assert memory.archive, "turns were evicted into the long-term store"
        recent = memory.sections()[0]
        assert recent.name == "recent turns"
        ns = ("s26", "thinking")
        remembered = [it.text for it in store.recent(ns, store.count(ns))]
        assert remembered
        for thought in thoughts:
            assert thought not in recent.content
            assert all(thought not in text for text in remembered)
            assert thought not in render_turns(messages)
        # what the turns said is still there
        everything = render_turns(messages)
        assert all(text in everything for text in said)
        # a reply made of thinking only is no item at all
        only = [
            m
            for m in messages
            if m.content and all(isinstance(b, ThinkingBlock) for b in m.content)
        ]
        for m in only:
            assert turn_items([m]) == []
    finally:
        store.close()


def test_the_summarizer_prompt_leaves_thinking_out(data_dir: Path) -> None:
    pytest.importorskip("anthropic")
    import anthropic

    from ctxwise.providers import AnthropicChat

    messages = _messages(data_dir)
    thoughts = _thoughts(messages)
    sent: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        sent.append(json.loads(request.content))
        return response(
            "anthropic", 200, anthropic_message([{"type": "text", "text": "A summary."}])
        )

    client = anthropic.Anthropic(
        api_key="k", max_retries=0, http_client=mock_client("anthropic", handler)
    )
    summarizer = LLMSummarizer(AnthropicChat(client, "claude-sonnet-5-5"))
    assert summarizer.summarize("", messages, 300) == "A summary."
    prompt = sent[0]["messages"][0]["content"]
    assert "Turns leaving the window" in prompt
    for thought in thoughts:
        assert thought not in prompt
    # the blocks themselves are untouched: a render still sends them back
    assert _thoughts(messages) == thoughts
