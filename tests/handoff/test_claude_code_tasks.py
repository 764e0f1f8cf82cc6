"""Issue 14's must-show on the long Claude Code sessions: for tasks modelled on a
later user-side message, the handoff carries the earlier tool results they depend on.

Each task in ``tests/data/handoff_claude_code_tasks.json`` names the message it was
modelled on (``cut_at_message``: the transcript handed over is everything before
it) and its expected chunks by tool_use id. A call's chunk is found the way
:func:`~ctxwise.handoff.chunks.chunk_transcript` makes it: the tool chunk starting
at the call's message whose (first part's) text starts with the call; a split
chunk counts as carried when any of its parts is selected.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxwise.formats import read_transcript
from ctxwise.handoff import Chunk, chunk_transcript, select_context
from ctxwise.messages import ToolUseBlock
from ctxwise.tokens import CharCounter

TASKS_FILE = Path(__file__).resolve().parents[1] / "data" / "handoff_claude_code_tasks.json"
TASKS = json.loads(TASKS_FILE.read_text(encoding="utf-8"))
BUDGET = 20_000

CASES = [
    pytest.param(session, n, id=f"{session[:8]}-{n}")
    for session, tasks in TASKS.items()
    for n in range(len(tasks))
]


def _call_chunk_id(chunks: list[Chunk], pos: int, use: ToolUseBlock) -> str:
    """The id of the (unsplit) chunk holding ``use`` and its result."""
    # chunks.py writes a call as its name then its input as JSON
    head = f"{use.name} {json.dumps(use.input, ensure_ascii=False)}"
    found = [
        c
        for c in chunks
        if c.kind == "tool"
        and c.position == pos
        and c.tool == use.name
        and (c.part is None or c.part[0] == 1)
        and c.text.startswith(head)
    ]
    assert len(found) == 1, f"{use.id}: {len(found)} chunks start with its call"
    return found[0].origin or found[0].id


_TRANSCRIPTS: dict[str, object] = {}


def _messages(data_dir: Path, session: str):
    if session not in _TRANSCRIPTS:
        _TRANSCRIPTS[session] = read_transcript(data_dir / "transcripts" / "claude_code" / session)
    return _TRANSCRIPTS[session].messages


@pytest.mark.parametrize(("session", "n"), CASES)
def test_selection_carries_the_tool_results_a_task_depends_on(
    data_dir: Path, session: str, n: int
) -> None:
    case = TASKS[session][n]
    messages = _messages(data_dir, session)
    cut = case["cut_at_message"]
    assert messages[cut].role == "user"
    transcript = messages[:cut]
    calls = {
        b.id: (pos, b)
        for pos, m in enumerate(transcript)
        for b in m.content
        if isinstance(b, ToolUseBlock)
    }

    handoff = select_context(transcript, case["task"], budget=BUDGET)

    # the chunks select_context made (same transcript, counter and chunk size)
    chunks = chunk_transcript(transcript, CharCounter())
    by_id = {c.id: c for c in chunks}
    for c in handoff.chunks:
        assert by_id[c.id] == c
    assert handoff.tokens <= BUDGET
    positions = [(c.position, chunks.index(c)) for c in handoff.chunks]
    assert positions == sorted(positions), "chunks are not in transcript order"
    rendered = handoff.render()
    for c in handoff.chunks:
        assert c.text in rendered

    selected = {c.origin or c.id for c in handoff.chunks}
    missing = []
    for e in case["expected"]:
        assert e["tool_use_id"] in calls, f"{e['tool_use_id']} is not before message {cut}"
        pos, use = calls[e["tool_use_id"]]
        assert use.name == e["tool"]
        want = _call_chunk_id(chunks, pos, use)
        if want not in selected:
            score = next((s for c, s in handoff.left_out if (c.origin or c.id) == want), None)
            missing.append(f"{e['tool_use_id']} ({e['tool']}, chunk {want}, score {score})")
    report = handoff.report()
    assert not missing, (
        f"left out: {missing}; selected: "
        f"{[(s['id'], s['reason'], s['score']) for s in report['selected']]}; "
        f"best left out: {report['left_out']['best']}"
    )
