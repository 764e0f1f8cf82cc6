"""Codec round trips on every transcript in ../shared/data/transcripts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxwise import Transcript, read_transcript, read_transcripts
from ctxwise.formats import anthropic, openai
from ctxwise.messages import ToolResultBlock, ToolUseBlock
from tests.conftest import TAU, claude_code_files, long_sessions


def _tool_ids(t: Transcript) -> tuple[set[str], set[str]]:
    uses = {b.id for m in t for b in m.content if isinstance(b, ToolUseBlock)}
    results = {b.tool_use_id for m in t for b in m.content if isinstance(b, ToolResultBlock)}
    return uses, results


def _raw_tool_ids(path: Path) -> tuple[set[str], set[str]]:
    uses: set[str] = set()
    results: set[str] = set()
    for line in path.read_text().splitlines():
        event = json.loads(line)
        content = (
            event.get("message", {}).get("content")
            if event.get("type") in ("user", "assistant")
            else None
        )
        for b in content if isinstance(content, list) else []:
            if b.get("type") == "tool_use":
                uses.add(b["id"])
            elif b.get("type") == "tool_result":
                results.add(b["tool_use_id"])
    return uses, results


@pytest.mark.data
@pytest.mark.parametrize("path", claude_code_files(), ids=lambda p: p.name)
def test_claude_code_loads_pairs_and_round_trips(path: Path, data_dir: Path) -> None:
    t = read_transcript(path)
    assert t.messages
    # the reader keeps every tool call and result of the source
    assert _tool_ids(t) == _raw_tool_ids(path)
    # the sources have no pairing problem, so neither may the transcript,
    # even under the Anthropic API's strict placement rule
    assert t.problems("anthropic") == []
    # Anthropic request round trip: JSON-serialisable, decodes to the same messages,
    # and re-encodes to the same bytes
    payload = anthropic.encode_request(t)
    wire = json.loads(json.dumps(payload))
    back = anthropic.decode_request(wire)
    assert back.messages == _anthropic_view(t).messages
    assert anthropic.encode_request(back) == wire


def _anthropic_view(t: Transcript) -> Transcript:
    """What an Anthropic request can carry: messages without reader-only metadata."""
    from dataclasses import replace

    msgs = tuple(
        replace(
            m,
            id=None,
            timestamp=None,
            kind="message",
            extra={k: v for k, v in m.extra.items() if k.startswith("anthropic.")},
        )
        for m in t.messages
    )
    return Transcript(msgs)


@pytest.mark.data
@pytest.mark.parametrize("path", long_sessions(), ids=lambda p: p.name)
def test_long_sessions_recognise_compaction(path: Path, data_dir: Path) -> None:
    t = read_transcript(path)
    assert len(t.compactions) == 1
    boundary = t.compactions[0]
    assert boundary.trigger == "auto" and boundary.pre_tokens and boundary.pre_tokens > 100_000
    summary = t.messages[boundary.index]
    assert summary.kind == "compact_summary"
    assert summary.text.startswith("This session is being continued")
    assert t.live_window().messages[0] is summary


@pytest.mark.data
def test_tau_bench_all_200_round_trip_exactly(data_dir: Path) -> None:
    raw = json.loads(TAU.read_text())
    transcripts = read_transcripts(TAU)
    assert len(transcripts) == len(raw) == 200
    reused = 0
    for item, t in zip(raw, transcripts, strict=True):
        # Some gpt-4o trajectories reuse a tool call id for a later call (each call is
        # still answered in place): the only problems reported are those duplicates.
        ids = [c["id"] for m in item["traj"] for c in m.get("tool_calls") or []]
        repeats = len(ids) - len(set(ids))
        reused += repeats > 0
        for placement in ("openai", "anthropic"):
            problems = t.problems(placement)
            assert [p.kind.value for p in problems] == ["duplicate_id"] * repeats
        # lossless: byte-for-byte the same messages back (raw argument strings, nulls, names)
        assert openai.encode_messages(t) == item["traj"]
        # and through Anthropic: the neutral messages survive the trip
        a = anthropic.decode_request(json.loads(json.dumps(anthropic.encode_request(t))))
        assert [(m.role, m.content[0].__class__) for m in a.messages[1:]] == [
            (m.role, m.content[0].__class__) for m in t.messages[1:] if m.content
        ]
        assert _tool_ids(a) == _tool_ids(t)
    assert reused == 49  # as counted in the source file
