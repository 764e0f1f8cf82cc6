"""Write a compaction back into the file its transcript was read from.

:func:`write_back_compaction` lives with compaction, not with the codecs in
:mod:`ctxwise.formats`: it reads a :class:`~ctxwise.compaction.Compaction`, and the
codecs sit a layer below compaction (see the architecture page), so they know
nothing of it. Every shape but a Claude Code session is
:func:`ctxwise.formats.write_back` of the compacted transcript; a session is
appended to the way Claude Code records its own compactions
(:mod:`ctxwise.compaction._claude_code`).
"""

from __future__ import annotations

from ctxwise.compaction._claude_code import compacted_claude_code
from ctxwise.compaction.result import Compaction
from ctxwise.formats import Shape, TranscriptFile, write_back

__all__ = ["write_back_compaction"]

_BOM = b"\xef\xbb\xbf"


def write_back_compaction(
    file: TranscriptFile, result: Compaction, index: int = 0
) -> tuple[bytes, Shape]:
    """The file's bytes with ``result``, a compaction of its transcript ``index``,
    written in, and the shape written.

    A Claude Code session (``result`` compacts its
    :meth:`~ctxwise.messages.Transcript.live_window`) stays Claude Code JSONL,
    written the way Claude Code records its own compactions: every original line
    unchanged (a byte order mark the file began with too), then a
    ``compact_boundary`` event, the summary and the tail (see
    :mod:`ctxwise.compaction._claude_code`). Any other shape is
    :func:`~ctxwise.formats.write_back` of ``result.transcript``; save the bytes
    with :func:`~ctxwise.formats.save_transcript_file`.

    Raises:
        UsageError: as :func:`~ctxwise.formats.write_back`.
        ClaudeCodeWriteError: a session compaction that cannot be written (see
            ``compacted_claude_code``).
    """
    if file.shape == "session":
        data = compacted_claude_code(file.text, result, source=file.source).encode("utf-8")
        return (_BOM + data if file.bom else data), "session"
    return write_back(file, {index: result.transcript})
