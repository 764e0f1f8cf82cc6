"""Writing an edited or compacted transcript file back to a path: ``write_back`` for
every shape (a Claude Code session patched), ``write_back_compaction`` and
``save_transcript_file`` (atomic, never over its own source unless asked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxwise.compaction import compact, write_back_compaction
from ctxwise.editing import clear_tool_uses
from ctxwise.errors import OutputError
from ctxwise.formats import (
    check_destination,
    read_transcript_file,
    save_transcript_file,
    write_back,
)
from ctxwise.messages import block_text
from ctxwise.summarize import ExtractiveSummarizer
from ctxwise.tokens import get_counter


def _session_events() -> list[dict[str, object]]:
    events: list[dict[str, object]] = []
    parent = None
    for n in range(3):
        call = f"toolu_{n}"
        for uuid, message in (
            (f"u{n}", {"role": "user", "content": f"question {n}"}),
            (
                f"a{n}",
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": call, "name": "grep", "input": {}}],
                },
            ),
            (
                f"r{n}",
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call, "content": "x" * 400}],
                },
            ),
        ):
            kind = message["role"]
            events.append({"type": kind, "uuid": uuid, "parentUuid": parent, "message": message})
            parent = uuid
    return events


def _session(tmp_path: Path) -> Path:
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in _session_events()), encoding="utf-8")
    return path


def _request(tmp_path: Path) -> Path:
    path = tmp_path / "req.json"
    messages = []
    for n in range(4):
        messages.append({"role": "user", "content": f"question {n} " + "words " * 50})
        messages.append({"role": "assistant", "content": f"answer {n} " + "more " * 50})
    messages.append({"role": "user", "content": "last"})
    body = {"model": "m", "max_tokens": 10, "messages": messages}
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def test_write_back_patches_a_session(tmp_path: Path) -> None:
    file = read_transcript_file(_session(tmp_path))
    cleared = clear_tool_uses(
        file.transcripts[0], trigger_tokens=0, keep_last=1, counter=get_counter("char")
    )
    assert cleared.cleared_tool_uses == 2
    data, shape = write_back(file, {0: cleared.transcript})
    assert shape == "session"
    out = tmp_path / "out.jsonl"
    save_transcript_file(file, data, out)
    again = read_transcript_file(out)
    assert again.shape == "session"
    written = [[(type(b), block_text(b)) for b in m.content] for m in again.transcripts[0].messages]
    edited = [[(type(b), block_text(b)) for b in m.content] for m in cleared.transcript.messages]
    assert written == edited  # ctxwise's own marks on cleared blocks are not written
    # nothing edited: the session comes back byte for byte
    assert write_back(file, {})[0] == file.text.encode("utf-8")


def test_a_session_is_never_written_over_itself(tmp_path: Path) -> None:
    path = _session(tmp_path)
    before = path.read_bytes()
    file = read_transcript_file(path)
    for replace_source in (False, True):
        with pytest.raises(OutputError, match="Claude Code session itself"):
            save_transcript_file(file, b"x\n", path, replace_source=replace_source)
    assert path.read_bytes() == before


def test_other_files_are_replaced_only_when_asked(tmp_path: Path) -> None:
    path = _request(tmp_path)
    file = read_transcript_file(path)
    link = tmp_path / "link.json"
    link.symlink_to(path)
    for dst in (path, link, tmp_path / "." / "req.json"):
        with pytest.raises(OutputError, match="is the input file"):
            check_destination(file, dst)
    check_destination(file, "-")
    data, shape = write_back(file, {0: file.transcripts[0]})
    save_transcript_file(file, data, path, replace_source=True)
    assert shape == "request" and path.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "req.json"]


def test_write_back_compaction_keeps_the_shape(tmp_path: Path) -> None:
    counter = get_counter("char")
    request = read_transcript_file(_request(tmp_path))
    result = compact(
        request.transcripts[0], ExtractiveSummarizer(counter), keep_tail_turns=1, counter=counter
    )
    assert result.compacted
    data, shape = write_back_compaction(request, result)
    assert (data, shape) == write_back(request, {0: result.transcript})
    session = read_transcript_file(_session(tmp_path))
    result = compact(
        session.transcripts[0], ExtractiveSummarizer(counter), keep_tail_turns=1, counter=counter
    )
    data, shape = write_back_compaction(session, result)
    assert shape == "session" and data.startswith(session.text.encode("utf-8"))
    out = tmp_path / "compacted.jsonl"
    save_transcript_file(session, data, out)
    assert len(read_transcript_file(out).transcripts[0].compactions) == 1
