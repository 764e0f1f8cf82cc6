"""Codecs between provider formats and the neutral model in :mod:`ctxwise.messages`.

- :mod:`ctxwise.formats.anthropic`: Messages API requests and responses;
- :mod:`ctxwise.formats.openai`: Chat Completions requests and responses;
- :mod:`ctxwise.formats.claude_code`: Claude Code session JSONL (read; an edited
  session is written back by ``patch_claude_code``, a compacted one by
  :func:`ctxwise.compaction.write_back_compaction`, a layer above the codecs).

:func:`read_transcripts` loads a file in any of them, detecting the format when
asked to (``format="auto"``); :func:`read_transcript_file` also returns the
file's *shape*, which :func:`write_back` keeps when it writes edited transcripts
back (:func:`ctxwise.compaction.write_back_compaction` when it writes a
compaction back), and
:func:`save_transcript_file` writes those bytes to a path atomically, never over
the file they were read from unless asked to. The shapes of a JSON file:

============== ============================================================ ============
shape          the file holds                                              transcripts
============== ============================================================ ============
request        one request (``messages`` and the other parameters)         1
response       one response (``chat.completion`` / ``"type": "message"``)  1
messages       a bare ``messages`` list                                     1
trajectory     an object with a ``traj`` messages list (tau-bench)          1
trajectories   a list of those (tau-bench results)                          one each
records        a list of objects with a ``messages`` list (LiveMCPBench     one each
               results: ``task_id``, ``Question``, ``response``, …)
jsonl          one message object per line (OpenAI or Anthropic messages)   1
session        Claude Code JSONL (events with a ``type``)                   1
============== ============================================================ ============

Text is read as UTF-8 (a byte order mark is accepted), or as UTF-16 or UTF-32
when a byte order mark says so. :func:`write_back` always writes UTF-8 without a
byte order mark, the encoding JSON is exchanged in (RFC 8259 §8.1).

A file over ``max_bytes`` (by default :data:`MAX_TRANSCRIPT_BYTES`, 256 MiB) is
refused from its size before it is read, and a binary file from its first chunk
(see :func:`ctxwise._io.read_text_file`); ``max_bytes=None`` reads any size. An id
longer than ``max_id_chars`` (by default :data:`MAX_ID_CHARS`: a message's id, a
tool call's id, the id a tool result answers) is refused too.

A file that does not decode raises :class:`~ctxwise.errors.FormatError` whose
message names what it was read as and, when the format was detected, why (for
example ``read as Anthropic messages (auto-detected: no OpenAI role or field):
message 0: …``);
``line`` is set for JSONL files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias, get_args

from ctxwise._io import parse_json, read_text_file, same_file, write_output
from ctxwise.errors import FormatError, OutputError, UnknownFormatError, UsageError
from ctxwise.formats import anthropic, claude_code, openai
from ctxwise.messages import ToolResultBlock, ToolUseBlock, Transcript

__all__ = [
    "FORMATS",
    "MAX_ID_CHARS",
    "MAX_TRANSCRIPT_BYTES",
    "SHAPES",
    "FormatName",
    "Shape",
    "TranscriptFile",
    "anthropic",
    "check_destination",
    "claude_code",
    "detect_format",
    "openai",
    "read_transcript",
    "read_transcript_file",
    "read_transcripts",
    "save_transcript_file",
    "write_back",
]

FormatName: TypeAlias = Literal["auto", "anthropic", "openai", "claude-code"]
FORMATS: tuple[str, ...] = ("auto", "anthropic", "openai", "claude-code")
Shape: TypeAlias = Literal[
    "request",
    "response",
    "messages",
    "trajectory",
    "trajectories",
    "records",
    "jsonl",
    "session",
]
SHAPES: tuple[str, ...] = get_args(Shape)
_Format: TypeAlias = Literal["anthropic", "openai", "claude-code"]

MAX_TRANSCRIPT_BYTES = 256 * 2**20
"""The largest transcript file read by default (256 MiB): a larger one is refused
from its size, before a byte is read. Raise it with ``max_bytes`` (``None``: no
limit), on the command line with ``--max-input-bytes``. Reading a file holds its
bytes, its text and the parsed events at once, several times its size in memory:
the limit keeps a file given by mistake (a log, a disk image) from exhausting it."""
_RAISE_WITH = "--max-input-bytes (max_bytes in Python)"

MAX_ID_CHARS = 1024
"""The longest id a transcript file may hold by default (a message's id, a tool
call's id, the id a tool result answers): a longer one is refused. Raise it with
``max_id_chars`` (``None``: no limit), on the command line with ``--max-id-chars``.
Provider ids are tens of characters; an id of megabytes is a broken or hostile
file, and every report, trace and store that names it would carry it."""


def _check_ids(t: Transcript, max_id_chars: int) -> None:
    """Raise :class:`FormatError` for the first id of ``t`` over ``max_id_chars``."""
    for i, m in enumerate(t.messages):
        found = [("an id", m.id)] if m.id is not None else []
        for b in m.content:
            if isinstance(b, ToolUseBlock):
                found.append(("a tool_use id", b.id))
            elif isinstance(b, ToolResultBlock):
                found.append(("a tool_result's tool_use_id", b.tool_use_id))
        for what, value in found:
            if len(value) > max_id_chars:
                raise FormatError(
                    t.source or "transcript",
                    f"message {i}: {what} of {len(value):,} characters, over the limit of "
                    f"{max_id_chars:,}; raise it with --max-id-chars (max_id_chars in Python)",
                )


_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking", "document"}
_ROLES = {"system", "developer", "user", "assistant", "tool"}
# Chat Completions message fields and content parts the Messages API has no form of
_OPENAI_MESSAGE_KEYS = ("tool_calls", "function_call", "refusal", "audio", "name")
_OPENAI_PARTS = {"image_url", "input_audio", "file", "refusal"}
_LABELS = {"anthropic": "Anthropic", "openai": "OpenAI", "claude-code": "Claude Code"}
_SHAPE_LABELS = {
    "request": "request",
    "response": "response",
    "messages": "messages",
    "trajectory": "trajectory",
    "trajectories": "trajectories",
    "records": "records",
    "jsonl": "messages JSONL",
    "session": "JSONL",
}


@dataclass(frozen=True, slots=True)
class TranscriptFile:
    """A transcript file as read: its transcripts, and what :func:`write_back` needs.

    ``document`` is the parsed JSON (for ``jsonl``, the list of line objects;
    ``None`` for a Claude Code session); ``text`` the decoded file; ``reason`` why
    auto-detection chose the format (``None`` when the format was given).
    """

    source: str
    format: _Format
    shape: Shape
    transcripts: tuple[Transcript, ...]
    text: str
    document: Any
    reason: str | None = None
    bom: bool = False
    """The file began with a UTF-8 byte order mark (``text`` holds none): a Claude
    Code session is written back with it, so its first line stays byte-identical."""

    @property
    def label(self) -> str:
        """What the file was read as, e.g. ``OpenAI trajectories``."""
        return f"{_LABELS[self.format]} {_SHAPE_LABELS[self.shape]}"


def _read_text(path: Path, max_bytes: int | None) -> str:
    return read_text_file(
        path, "a transcript file", FormatError, max_bytes=max_bytes, raise_with=_RAISE_WITH
    )


def _starts_with_bom(path: Path) -> bool:
    """Whether a regular file begins with the UTF-8 byte order mark."""
    try:
        if not path.is_file():
            return False
        with path.open("rb") as f:
            return f.read(3) == b"\xef\xbb\xbf"
    except OSError:
        return False


def _messages_format(messages: Sequence[Any]) -> tuple[Literal["anthropic", "openai"], str]:
    for m in messages:
        if not isinstance(m, Mapping):
            continue
        if m.get("role") in ("system", "developer", "tool", "function"):
            return "openai", f"a {m['role']!r} message"
        for key in _OPENAI_MESSAGE_KEYS:
            if key in m:
                return "openai", f"a message with {key!r}"
        content = m.get("content")
        if "content" in m and content is None:
            # Anthropic requires content; Chat Completions sends null beside
            # tool calls, an audio reply, a refusal or a legacy function call
            return "openai", "a message whose content is null"
        if isinstance(content, list):
            for b in content:
                kind = b.get("type") if isinstance(b, Mapping) else None
                if not isinstance(kind, str):  # the codec says what is wrong with it
                    continue
                if kind in _ANTHROPIC_BLOCKS:
                    return "anthropic", f"a {kind!r} content block"
                if kind in _OPENAI_PARTS:
                    return "openai", f"a {kind!r} content part"
    return "anthropic", _NO_SIGNAL


_NO_SIGNAL = "no OpenAI role or field"
# Chat Completions request parameters the Messages API has no parameter of that name for
_OPENAI_REQUEST_KEYS = (
    "max_completion_tokens",
    "response_format",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "n",
    "seed",
    "modalities",
    "audio",
    "reasoning_effort",
    "parallel_tool_calls",
    "functions",
    "function_call",
    "stream_options",
    "prediction",
)


def _openai_request_key(doc: Mapping[str, Any]) -> str | None:
    """A request parameter only Chat Completions has (a function tool is one)."""
    for key in _OPENAI_REQUEST_KEYS:
        if key in doc:
            return key
    tools = doc.get("tools")
    if isinstance(tools, list) and any(
        isinstance(t, Mapping) and t.get("type") == "function" and "function" in t for t in tools
    ):
        return "tools"
    return None


def detect_format(
    path: str | Path, text: str | None = None, *, max_bytes: int | None = MAX_TRANSCRIPT_BYTES
) -> _Format:
    """The format of a transcript file, from its content (and extension as a hint)."""
    p = Path(path)
    return _detect(p, _read_text(p, max_bytes) if text is None else text)[0]


def _is_message_line(obj: Any) -> bool:
    return (
        isinstance(obj, Mapping)
        and isinstance(obj.get("role"), str)
        and obj["role"] in _ROLES
        and "type" not in obj
        and "message" not in obj
    )


def _first_line_json(stripped: str) -> tuple[bool, Any]:
    first = stripped.split("\n", 1)[0]
    try:
        return True, parse_json(first)
    except (json.JSONDecodeError, RecursionError):
        return False, None


def _has_event_line(stripped: str) -> bool:
    """Whether a line is a JSON object with a string ``type``, as every Claude Code
    event is (other JSONL, such as a tool catalog, is no session)."""
    for line in stripped.split("\n"):
        if '"type"' not in line:
            continue
        try:
            obj = parse_json(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(obj, Mapping) and isinstance(obj.get("type"), str):
            return True
    return False


def _looks_like_lines(p: Path, stripped: str) -> tuple[bool, Any]:
    """Whether the text is JSONL (by extension or several lines, the first JSON)."""
    ok, first = _first_line_json(stripped)
    multi_line = "\n" in stripped.rstrip()
    return p.suffix == ".jsonl" or (multi_line and ok), first


def _detect(p: Path, body: str) -> tuple[_Format, Any, Shape, str]:
    """The format, the parsed document (``None`` for Claude Code), shape and reason."""
    stripped = body.lstrip()
    if not stripped:
        raise UnknownFormatError(str(p), "empty file")
    lines, first = _looks_like_lines(p, stripped)
    if lines:
        if _is_message_line(first):
            objs = _parse_lines(body, str(p), "messages JSONL")
            fmt, why = _messages_format(objs)
            return fmt, objs, "jsonl", f"a message object per line, {why}"
        if not _has_event_line(stripped):
            raise UnknownFormatError(
                str(p),
                "JSONL, but no line is a message object (with 'role') or a Claude Code "
                "event (with a 'type')",
            )
        return "claude-code", None, "session", "JSONL whose first line is not a message object"
    try:
        doc = parse_json(body)
    except json.JSONDecodeError as exc:
        raise UnknownFormatError(
            str(p), f"not JSON or JSONL ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise FormatError(str(p), "JSON nested too deeply") from None
    shape = _shape(doc)
    if shape is None:
        raise UnknownFormatError(
            str(p), "no known transcript shape (request, response, messages list, JSONL)"
        )
    if shape == "jsonl":
        doc = [doc]
    if isinstance(doc, Mapping):
        if doc.get("object") == "chat.completion":
            return "openai", doc, shape, "object 'chat.completion'"
        if "traj" in doc:
            return "openai", doc, shape, "a 'traj' list (tau-bench)"
        if doc.get("type") == "message":
            return "anthropic", doc, shape, "type 'message'"
        if "system" in doc:
            return "anthropic", doc, shape, "a top-level 'system'"
        if isinstance(doc.get("messages"), list):
            fmt, why = _messages_format(doc["messages"])
            key = _openai_request_key(doc) if why == _NO_SIGNAL else None
            if key is not None:
                return "openai", doc, shape, f"a request with {key!r}"
            return fmt, doc, shape, why
        raise UnknownFormatError(
            str(p), "no known transcript shape (request, response, messages list, JSONL)"
        )
    if shape == "trajectories":
        return "openai", doc, shape, "a list of objects with 'traj' (tau-bench)"
    if shape == "records":
        msgs = [m for x in doc for m in x["messages"]]
        fmt, why = _messages_format(msgs)
        return fmt, doc, shape, f"a list of objects with 'messages', {why}"
    fmt, why = _messages_format(doc)
    return fmt, doc, shape, why


def _shape(doc: Any) -> Shape | None:
    if isinstance(doc, Mapping):
        if "traj" in doc:
            return "trajectory"
        if doc.get("object") == "chat.completion" or doc.get("type") == "message":
            return "response"
        if "messages" not in doc and _is_message_line(doc):
            return "jsonl"  # one message: a JSONL file of one line
        return "request"
    if isinstance(doc, list):
        if doc and all(isinstance(x, Mapping) and "traj" in x for x in doc):
            return "trajectories"
        if doc and all(
            isinstance(x, Mapping) and isinstance(x.get("messages"), list) and "role" not in x
            for x in doc
        ):
            return "records"
        return "messages"
    return None


def _parse_lines(text: str, source: str, what: str) -> list[Any]:
    objs: list[Any] = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = parse_json(line)
        except json.JSONDecodeError as exc:
            raise FormatError(
                source, f"not valid {what}: {exc.msg} (column {exc.colno})", line=lineno
            ) from None
        except RecursionError:
            raise FormatError(source, f"not valid {what}: nested too deeply", line=lineno) from None
        if not isinstance(obj, Mapping):
            raise FormatError(source, f"not valid {what}: a line must be an object", line=lineno)
        objs.append(obj)
    if not objs:
        raise FormatError(source, f"not valid {what}: no lines")
    return objs


def _line_numbers(text: str) -> list[int]:
    return [n for n, line in enumerate(text.split("\n"), start=1) if line.strip()]


def _session_bytes(file: TranscriptFile, text: str) -> bytes:
    """A Claude Code session's text as UTF-8, with the byte order mark it was read with."""
    data = text.encode("utf-8")
    return b"\xef\xbb\xbf" + data if file.bom else data


def read_transcript_file(
    path: str | Path,
    format: FormatName = "auto",
    *,
    max_bytes: int | None = MAX_TRANSCRIPT_BYTES,
    max_id_chars: int | None = MAX_ID_CHARS,
) -> TranscriptFile:
    """A transcript file: its transcripts, format, shape and parsed document.
    ``max_bytes`` is the largest file read, ``max_id_chars`` the longest id it may
    hold (``None``: no limit).

    Raises:
        UnknownFormatError: an unknown ``format`` name, or a file whose format
            cannot be detected.
        FormatError: a file that does not read or decode, is over ``max_bytes``
            (refused before it is read) or holds an id over ``max_id_chars``; the
            message names what it was read as (and why, when detected), ``line`` is
            set for JSONL.
    """
    if format not in FORMATS:
        raise UnknownFormatError(
            str(path), f"unknown format {format!r}; choose one of {', '.join(FORMATS)}"
        )
    p = Path(path)
    text = _read_text(p, max_bytes)
    source = str(p)
    reason: str | None = None
    fmt: _Format
    if format == "auto":
        fmt, doc, shape, reason = _detect(p, text)
    elif format == "claude-code":
        fmt, doc, shape = "claude-code", None, "session"
    else:
        fmt = format
        doc, shape = _parse_json(p, text, fmt)
    file = TranscriptFile(source, fmt, shape, (), text, doc, reason)
    try:
        if fmt == "claude-code":
            items = [claude_code.read_claude_code(text, source=source)]
        else:
            items = _decode(doc, shape, fmt, source, text)
        if max_id_chars is not None:
            for t in items:
                _check_ids(t, max_id_chars)
    except FormatError as exc:
        why = f" (auto-detected: {reason})" if reason else ""
        raise FormatError(
            exc.source, f"read as {file.label}{why}: {exc.detail}", line=exc.line
        ) from None
    bom = fmt == "claude-code" and _starts_with_bom(p)
    return TranscriptFile(source, fmt, shape, tuple(items), text, doc, reason, bom)


def _parse_json(p: Path, text: str, fmt: _Format) -> tuple[Any, Shape]:
    source = str(p)
    label = _LABELS[fmt]
    try:
        doc = parse_json(text)
    except json.JSONDecodeError as exc:
        lines, first = _looks_like_lines(p, text.lstrip())
        if lines and _is_message_line(first):
            return _parse_lines(text, source, f"{label} JSONL"), "jsonl"
        raise FormatError(
            source, f"not valid {label} JSON: {exc.msg} (column {exc.colno})", line=exc.lineno
        ) from None
    except RecursionError:
        raise FormatError(source, "JSON nested too deeply") from None
    shape = _shape(doc)
    if shape is None:
        raise FormatError(
            source, f"an {label} transcript is a request, a response or a messages list"
        )
    return ([doc] if shape == "jsonl" else doc), shape


def _decode(doc: Any, shape: Shape, fmt: _Format, source: str, text: str) -> list[Transcript]:
    codec: Any = openai if fmt == "openai" else anthropic
    if shape == "trajectories":
        return [
            codec.decode_messages(x["traj"], source=f"{source}[{i}]") for i, x in enumerate(doc)
        ]
    if shape == "records":
        return [
            codec.decode_messages(x["messages"], source=f"{source}[{i}]") for i, x in enumerate(doc)
        ]
    if shape == "trajectory":
        return [codec.decode_messages(doc["traj"], source=source)]
    if shape == "response":
        msg = codec.decode_response(doc, source=source)
        return [Transcript((msg,), source=source, format=fmt)]
    if shape == "request":
        return [codec.decode_request(doc, source=source)]
    if shape == "jsonl":
        try:
            return [codec.decode_messages(doc, source=source)]
        except FormatError as exc:
            m = re.match(r"message (\d+)\b", exc.detail)
            numbers = _line_numbers(text)
            if m and int(m.group(1)) < len(numbers) and len(numbers) == len(doc):
                raise FormatError(exc.source, exc.detail, line=numbers[int(m.group(1))]) from None
            raise
    return [codec.decode_messages(doc, source=source)]


def read_transcripts(
    path: str | Path,
    format: FormatName = "auto",
    *,
    max_bytes: int | None = MAX_TRANSCRIPT_BYTES,
    max_id_chars: int | None = MAX_ID_CHARS,
) -> list[Transcript]:
    """Every transcript in a file (one, except for trajectory and record lists).

    Each transcript's ``format`` says which format it was read as; ``max_bytes`` and
    ``max_id_chars`` as in :func:`read_transcript_file`.
    """
    file = read_transcript_file(path, format, max_bytes=max_bytes, max_id_chars=max_id_chars)
    return list(file.transcripts)


def read_transcript(
    path: str | Path,
    format: FormatName = "auto",
    *,
    index: int = 0,
    max_bytes: int | None = MAX_TRANSCRIPT_BYTES,
    max_id_chars: int | None = MAX_ID_CHARS,
) -> Transcript:
    """One transcript from a file; ``index`` picks one of a trajectory collection."""
    items = read_transcripts(path, format, max_bytes=max_bytes, max_id_chars=max_id_chars)
    if not -len(items) <= index < len(items):
        raise FormatError(
            str(path), f"holds {len(items)} transcript(s); index {index} is out of range"
        )
    return items[index]


# -- write-back -----------------------------------------------------------------


def write_back(file: TranscriptFile, edited: Mapping[int, Transcript]) -> tuple[bytes, Shape]:
    """The file's bytes with the ``edited`` transcripts (by index) written in, and
    the shape written (UTF-8, JSON indented by one space; JSONL one line each).

    Everything else is kept: the other trajectories or records unchanged, their
    other fields, a request's parameters. A response stays a response while it is
    one assistant message and becomes a request otherwise; an Anthropic messages
    list becomes a request when the transcript gained a system part (a bare list
    cannot hold one). A Claude Code session stays a session: the edited blocks are
    patched into its lines by :func:`ctxwise.formats.claude_code.patch_claude_code`
    (every other line byte-identical). A compaction is written back by
    :func:`ctxwise.compaction.write_back_compaction`.

    Raises:
        UsageError: an index out of range, or a transcript the shape cannot hold
            (a system part in Anthropic JSONL or records).
        ClaudeCodeWriteError: an edit of a Claude Code session that its events
            cannot hold (blocks added or removed).
    """
    n = len(file.transcripts)
    for i in edited:
        if not -n <= i < n:
            raise UsageError(f"{file.source} holds {n} transcript(s); index {i} is out of range")
    chosen = {i % n: t for i, t in edited.items()}
    if file.shape == "session":
        text = file.text
        if 0 in chosen:
            text = claude_code.patch_claude_code(text, chosen[0], source=file.source)
        return _session_bytes(file, text), "session"
    body, shape = _encode(file, chosen)
    if shape == "jsonl":
        return b"".join(_dumps(line, indent=None) for line in body), shape
    return _dumps(body, indent=1), shape


def save_transcript_file(
    file: TranscriptFile, data: bytes, out: str | Path, *, replace_source: bool = False
) -> None:
    """Write ``data`` (from :func:`write_back` or
    :func:`ctxwise.compaction.write_back_compaction`) to
    ``out`` atomically: a temporary file renamed over it, so an error never leaves a
    half-written output; ``-`` is standard output, a symbolic link's target is
    replaced, a FIFO or device written in place (:func:`ctxwise._io.write_output`).

    ``out`` may be the file ``data`` was read from only with ``replace_source``,
    and never when that file is a Claude Code session (Claude Code may still be
    appending to it). Call :func:`check_destination` first to fail before slow work.

    Raises:
        OutputError: ``out`` is the source file (see above), a directory or in a
            missing folder, or the write failed; ``out`` is then unchanged.
    """
    check_destination(file, out, replace_source=replace_source)
    write_output(out, data)


def check_destination(
    file: TranscriptFile, out: str | Path, *, replace_source: bool = False
) -> None:
    """Raise :class:`~ctxwise.errors.OutputError` when :func:`save_transcript_file`
    would refuse to write ``file``'s new bytes to ``out`` because ``out`` is the
    source file (symbolic links resolved)."""
    if not same_file(file.source, out):
        return
    if file.shape == "session":
        raise OutputError(
            str(out),
            "is the Claude Code session itself; Claude Code may still be appending to it. "
            "Write to another file",
        )
    if not replace_source:
        raise OutputError(str(out), "is the input file; write the result somewhere else")


def _encode(file: TranscriptFile, chosen: Mapping[int, Transcript]) -> tuple[Any, Shape]:
    doc, fmt, shape = file.document, file.format, file.shape
    if shape in ("trajectories", "records"):
        key = "traj" if shape == "trajectories" else "messages"
        return [
            {**x, key: _messages(fmt, chosen[i], file.source)} if i in chosen else x
            for i, x in enumerate(doc)
        ], shape
    if 0 not in chosen:
        return (doc, shape)
    t = chosen[0]
    if shape == "trajectory":
        return {**doc, "traj": _messages(fmt, t, file.source)}, shape
    if shape == "jsonl":
        return _messages(fmt, t, file.source), shape
    if shape == "response" and len(t.messages) == 1 and t.messages[0].role == "assistant":
        codec: Any = openai if fmt == "openai" else anthropic
        return codec.encode_response(t.messages[0]), shape
    if fmt == "openai":
        if shape == "messages":
            return openai.encode_messages(t), shape
        return openai.encode_request(t), "request"
    if shape == "messages" and not any(m.role == "system" for m in t.messages):
        return anthropic.encode_messages(t)[1], shape
    return anthropic.encode_request(t), "request"


def _messages(fmt: _Format, t: Transcript, source: str) -> list[dict[str, Any]]:
    if fmt == "openai":
        return openai.encode_messages(t)
    system, messages = anthropic.encode_messages(t)
    if system is not None:
        raise UsageError(
            f"{source}: a system part cannot be written into an Anthropic messages list here"
        )
    return messages


def _dumps(body: Any, *, indent: int | None) -> bytes:
    text = json.dumps(body, ensure_ascii=False, indent=indent) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # lone surrogates (a truncated emoji) are not UTF-8: write them as JSON escapes
        return (json.dumps(body, ensure_ascii=True, indent=indent) + "\n").encode("ascii")
