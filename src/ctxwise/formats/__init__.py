"""Codecs between provider formats and the neutral model in :mod:`ctxwise.messages`.

- :mod:`ctxwise.formats.anthropic`: Messages API requests and responses;
- :mod:`ctxwise.formats.openai`: Chat Completions requests and responses;
- :mod:`ctxwise.formats.claude_code`: Claude Code session JSONL (read; an edited
  session is written back by ``patch_claude_code``, a compacted one by
  ``formats._claude_code_compact``).

:func:`read_transcripts` loads a file in any of them, detecting the format when
asked to (``format="auto"``). A JSON file may hold one request, one response, a
bare ``messages`` list, or trajectories (objects with a ``traj`` messages list,
as tau-bench writes them; a list of them gives one transcript each).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ctxwise._io import read_text_file
from ctxwise.errors import FormatError, UnknownFormatError
from ctxwise.formats import anthropic, claude_code, openai
from ctxwise.messages import Transcript

__all__ = [
    "FORMATS",
    "FormatName",
    "anthropic",
    "claude_code",
    "detect_format",
    "openai",
    "read_transcript",
    "read_transcripts",
]

FormatName: TypeAlias = Literal["auto", "anthropic", "openai", "claude-code"]
FORMATS: tuple[str, ...] = ("auto", "anthropic", "openai", "claude-code")

_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking", "document"}


def _read_text(path: Path) -> str:
    return read_text_file(path, "a transcript file", FormatError)


def _messages_format(messages: Sequence[Any]) -> Literal["anthropic", "openai"]:
    for m in messages:
        if not isinstance(m, Mapping):
            continue
        if m.get("role") in ("system", "developer", "tool") or "tool_calls" in m:
            return "openai"
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                if isinstance(b, Mapping):
                    if b.get("type") in _ANTHROPIC_BLOCKS:
                        return "anthropic"
                    if b.get("type") == "image_url":
                        return "openai"
    return "anthropic"


def detect_format(
    path: str | Path, text: str | None = None
) -> Literal["anthropic", "openai", "claude-code"]:
    """The format of a transcript file, from its content (and extension as a hint)."""
    p = Path(path)
    return _detect(p, _read_text(p) if text is None else text)[0]


def _detect(p: Path, body: str) -> tuple[Literal["anthropic", "openai", "claude-code"], Any]:
    """The format, and the parsed JSON document when the file is JSON (not JSONL)."""
    stripped = body.lstrip()
    if not stripped:
        raise UnknownFormatError(str(p), "empty file")
    first_line = stripped.split("\n", 1)[0]
    multi_line = "\n" in stripped.rstrip()
    if p.suffix == ".jsonl" or (multi_line and first_line.startswith("{") and _is_json(first_line)):
        return "claude-code", None
    try:
        doc = json.loads(body)
    except json.JSONDecodeError as exc:
        raise UnknownFormatError(
            str(p), f"not JSON or JSONL ({exc.msg} at line {exc.lineno})"
        ) from None
    except RecursionError:
        raise FormatError(str(p), "JSON nested too deeply") from None
    if isinstance(doc, Mapping):
        if doc.get("object") == "chat.completion" or "traj" in doc:
            return "openai", doc
        if doc.get("type") == "message" or "system" in doc:
            return "anthropic", doc
        if isinstance(doc.get("messages"), list):
            return _messages_format(doc["messages"]), doc
    if isinstance(doc, list):
        if doc and all(isinstance(x, Mapping) and "traj" in x for x in doc):
            return "openai", doc
        return _messages_format(doc), doc
    raise UnknownFormatError(
        str(p), "no known transcript shape (request, response, messages list, JSONL)"
    )


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True


def read_transcripts(path: str | Path, format: FormatName = "auto") -> list[Transcript]:
    """Every transcript in a file (one, except for trajectory collections).

    Each transcript's ``format`` says which format it was read as.
    """
    if format not in FORMATS:
        raise UnknownFormatError(
            str(path), f"unknown format {format!r}; choose one of {', '.join(FORMATS)}"
        )
    p = Path(path)
    text = _read_text(p)
    source = str(p)
    doc: Any = None
    if format == "auto":
        fmt, doc = _detect(p, text)
    else:
        fmt = format
    if fmt == "claude-code":
        return [claude_code.read_claude_code(text, source=source)]
    if doc is None:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatError(source, f"invalid JSON: {exc.msg}", line=exc.lineno) from None
        except RecursionError:
            raise FormatError(source, "JSON nested too deeply") from None
    if fmt == "openai":
        return _read_openai(doc, source)
    return [_read_anthropic(doc, source)]


def read_transcript(path: str | Path, format: FormatName = "auto", *, index: int = 0) -> Transcript:
    """One transcript from a file; ``index`` picks one of a trajectory collection."""
    items = read_transcripts(path, format)
    if not -len(items) <= index < len(items):
        raise FormatError(
            str(path), f"holds {len(items)} transcript(s); index {index} is out of range"
        )
    return items[index]


def _read_openai(doc: Any, source: str) -> list[Transcript]:
    if isinstance(doc, list) and doc and all(isinstance(x, Mapping) and "traj" in x for x in doc):
        return [
            openai.decode_messages(x["traj"], source=f"{source}[{i}]") for i, x in enumerate(doc)
        ]
    if isinstance(doc, Mapping):
        if "traj" in doc:
            return [openai.decode_messages(doc["traj"], source=source)]
        if doc.get("object") == "chat.completion":
            msg = openai.decode_response(doc, source=source)
            return [Transcript((msg,), source=source, format="openai")]
        return [openai.decode_request(doc, source=source)]
    if isinstance(doc, list):
        return [openai.decode_messages(doc, source=source)]
    raise FormatError(source, "an OpenAI transcript is a request, a response or a messages list")


def _read_anthropic(doc: Any, source: str) -> Transcript:
    if isinstance(doc, Mapping):
        if doc.get("type") == "message":
            msg = anthropic.decode_response(doc, source=source)
            return Transcript((msg,), source=source, format="anthropic")
        return anthropic.decode_request(doc, source=source)
    if isinstance(doc, list):
        return anthropic.decode_messages(doc, source=source)
    raise FormatError(source, "an Anthropic transcript is a request, a response or a messages list")
