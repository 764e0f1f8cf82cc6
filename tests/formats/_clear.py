"""Test helper: a transcript file cleared and written back, as `ctxwise clear` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxwise.editing import EditResult, clear_tool_uses
from ctxwise.formats import TranscriptFile, read_transcript_file, write_back


def clear_file(
    path: Path, text: str, **clear: Any
) -> tuple[TranscriptFile, EditResult, bytes, str]:
    """Write ``text`` to ``path``, read it, clear its first transcript with ``clear``
    (``trigger_tokens`` 0 unless given) and write it back: the file read, the edit,
    the bytes written back and their shape."""
    path.write_text(text, encoding="utf-8")
    f = read_transcript_file(path)
    edit = clear_tool_uses(f.transcripts[0], **{"trigger_tokens": 0, **clear})
    data, shape = write_back(f, {0: edit.transcript})
    return f, edit, data, shape
