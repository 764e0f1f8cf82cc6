"""The memory tool's commands over a backend (:class:`MemoryTool`)."""

from __future__ import annotations

import errno
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxwise.errors import UsageError
from ctxwise.memory_tool._adapter import adapter_class
from ctxwise.memory_tool._backend import MemoryBackend, too_big
from ctxwise.memory_tool._paths import (
    ROOT,
    Parts,
    bounded,
    brief,
    human_size,
    parse_path,
    quote,
    show,
    split_lines,
)

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_VIEW_CHARS",
    "LINE_NUMBER_WIDTH",
    "LISTING_DEPTH",
    "MAX_MATCH_LINES",
    "MemoryResult",
    "MemoryTool",
]

DEFAULT_MAX_FILE_BYTES = 1 << 20
DEFAULT_MAX_VIEW_CHARS = 16_000
MAX_MATCH_LINES = 10
"""The most line numbers a str_replace error lists for an old_str found more than once."""
LISTING_DEPTH = 2
LINE_NUMBER_WIDTH = 6

_COMMANDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "view": (("path",), ("view_range",)),
    "create": (("path", "file_text"), ()),
    "str_replace": (("path", "old_str", "new_str"), ()),
    "insert": (("path", "insert_line", "insert_text"), ()),
    "delete": (("path",), ()),
    "rename": (("old_path", "new_path"), ()),
}
_STRING_PARAMS = ("path", "file_text", "old_str", "new_str", "insert_text", "old_path", "new_path")


@dataclass(frozen=True, slots=True)
class MemoryResult:
    """What a command returns: the tool result's text, and whether it is an error."""

    text: str
    is_error: bool = False


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a positive integer, got {value!r}")
    return value


class MemoryTool:
    """Runs memory tool commands over a backend; see the module docstring."""

    def __init__(
        self,
        backend: MemoryBackend,
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_view_chars: int = DEFAULT_MAX_VIEW_CHARS,
    ) -> None:
        if not isinstance(backend, MemoryBackend):
            raise UsageError(
                "backend must be a MemoryBackend (DirectoryMemory or StoreMemory), "
                f"got {type(backend).__name__}"
            )
        self.backend = backend
        self.max_file_bytes = _positive("max_file_bytes", max_file_bytes)
        self.max_view_chars = _positive("max_view_chars", max_view_chars)

    def anthropic(self, *, cache_control: Any = None) -> Any:
        """This tool as the SDK's ``BetaAbstractMemoryTool`` (extra ``anthropic``)."""
        return adapter_class(MemoryTool)(self, cache_control=cache_control)

    def execute(self, command: Mapping[str, Any]) -> MemoryResult:
        """Run one command (the tool_use block's ``input``) and return its result."""
        try:
            return MemoryResult(self._run(command))
        except UsageError as exc:
            return MemoryResult(bounded(str(exc)), is_error=True)
        except OSError as exc:
            reason = exc.strerror or errno.errorcode.get(exc.errno or 0, "") or str(exc)
            return MemoryResult(
                f"Error: the memory operation failed ({reason}); nothing more was changed. "
                f"Check the path and try again.",
                is_error=True,
            )

    # -- parsing ------------------------------------------------------------------

    def _params(self, command: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        if not isinstance(command, Mapping):
            raise UsageError(f"Error: a memory command is an object, got {type(command).__name__}.")
        name = command.get("command")
        known = ", ".join(_COMMANDS)
        if not isinstance(name, str) or name not in _COMMANDS:
            raise UsageError(f"Error: unknown command {brief(name, 40)}; use one of {known}.")
        required, optional = _COMMANDS[name]
        given = {k: v for k, v in command.items() if k != "command" and v is not None}
        missing = [k for k in required if k not in given]
        extra = sorted(str(k) for k in given if k not in required and k not in optional)
        if missing or extra:
            problems = []
            if missing:
                problems.append(f"missing {', '.join(missing)}")
            if extra:
                shown = [quote(k, 40) for k in extra[:5]]
                more = f" and {len(extra) - 5:,} more" if len(extra) > 5 else ""
                problems.append(f"unknown {', '.join(shown)}{more}")
            takes = ", ".join([*required, *(f"{o} (optional)" for o in optional)])
            raise UsageError(
                f"Error: the {name} command has {'; '.join(problems)}; it takes {takes}. "
                f"Nothing was changed."
            )
        for key in _STRING_PARAMS:
            if key in given and not isinstance(given[key], str):
                raise UsageError(
                    f"Error: `{key}` must be a string, got {type(given[key]).__name__}. "
                    f"Nothing was changed."
                )
        return name, given

    def _run(self, command: Mapping[str, Any]) -> str:
        name, p = self._params(command)
        if name == "rename":
            return self._rename(
                parse_path(p["old_path"], "old_path"), parse_path(p["new_path"], "new_path")
            )
        parts = parse_path(p["path"], "path")
        if name == "view":
            return self._view(parts, p.get("view_range"))
        if name == "create":
            return self._create(parts, p["file_text"])
        if name == "str_replace":
            return self._str_replace(parts, p["old_str"], p["new_str"])
        if name == "insert":
            return self._insert(parts, p["insert_line"], p["insert_text"])
        return self._delete(parts)

    # -- commands -----------------------------------------------------------------

    def _need_file(self, parts: Parts) -> str:
        kind = self.backend.kind(parts)
        if kind is None:
            raise UsageError(
                f"Error: the path {show(parts)} does not exist. View {ROOT} to see what is there."
            )
        if kind == "dir":
            raise UsageError(f"Error: the path {show(parts)} is a folder, not a file.")
        return self.backend.read(parts, self.max_file_bytes)

    def _write(self, parts: Parts, text: str) -> None:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise UsageError("Error: the text is not valid Unicode (lone surrogates).") from None
        if size > self.max_file_bytes:
            raise too_big(parts, size, self.max_file_bytes)
        self.backend.write(parts, text)

    def _view(self, parts: Parts, view_range: object) -> str:
        kind = self.backend.kind(parts)
        if kind is None:
            raise UsageError(
                f"Error: the path {show(parts)} does not exist. View {ROOT} to see what is there."
            )
        if kind == "dir":
            if view_range is not None:
                raise UsageError(
                    f"Error: view_range applies to files; {show(parts)} is a folder. "
                    f"View it without view_range."
                )
            return self._listing(parts)
        content = self.backend.read(parts, self.max_file_bytes)
        lines = split_lines(content)
        start, end = self._range(parts, view_range, len(lines))
        header = f"Here's the content of {show(parts)} with line numbers:"
        body: list[str] = []
        used = 0
        last = start - 1
        for number in range(start, end + 1):
            row = f"{str(number).rjust(LINE_NUMBER_WIDTH)}\t{lines[number - 1]}"
            if body and used + len(row) + 1 > self.max_view_chars:
                break
            if not body and len(row) > self.max_view_chars:
                body.append(row[: self.max_view_chars])
                last = number
                body.append(
                    f"[line {number} is longer than {self.max_view_chars:,} characters "
                    "and was cut; str_replace can still edit it]"
                )
                break
            body.append(row)
            used += len(row) + 1
            last = number
        text = "\n".join([header, *body])
        if last < end:
            text += (
                f"\n[Showing lines {start}-{last} of {len(lines)}. To read the rest, call view "
                f"with view_range [{last + 1}, {end if end < len(lines) else -1}].]"
            )
        return text

    def _range(self, parts: Parts, view_range: object, n: int) -> tuple[int, int]:
        if view_range is None:
            return 1, n
        ok = (
            isinstance(view_range, list | tuple)
            and len(view_range) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in view_range)
        )
        if not ok:
            raise UsageError(
                f"Error: view_range must be two integers [start, end] (end -1: to the end of the "
                f"file), got {brief(view_range, 80)}."
            )
        start, end = view_range[0], view_range[1]  # type: ignore[index]
        end_given = end
        if end == -1:
            if n == 0 and start == 1:
                return 1, 0  # an empty file read to its end: no lines, not an error
            end = n
        if start < 1 or start > max(n, 1) or end < start or end > n:
            raise UsageError(
                f"Error: invalid view_range {brief([start, end_given], 80)} for {show(parts)}, "
                f"which has {n} lines; use [start, end] with 1 <= start <= end <= {n}, or end -1."
            )
        return start, end

    def _listing(self, parts: Parts) -> str:
        shown = show(parts)
        entries = self.backend.listing(parts, LISTING_DEPTH)
        header = (
            f"Here're the files and directories up to {LISTING_DEPTH} levels deep in {shown}, "
            "excluding hidden items:"
        )
        total = sum(e.size for e in entries if not e.is_dir)
        rows = [f"{human_size(total)}\t{shown}"]
        used = len(rows[0])
        for i, e in enumerate(entries):
            row = f"{human_size(e.size)}\t{shown}/{'/'.join(e.parts)}{'/' if e.is_dir else ''}"
            if used + len(row) + 1 > self.max_view_chars:
                rows.append(
                    f"[{len(entries) - i} more entries not shown; view a folder below {shown} "
                    "to see them.]"
                )
                break
            rows.append(row)
            used += len(row) + 1
        return "\n".join([header, *rows])

    def _check_case(self, parts: Parts, moving: Parts = ()) -> None:
        """Refuse a new path with a name that differs only in letter case from an
        entry of its folder (two files on this system, one where case is ignored).
        Each folder down to the first new name is asked; ``moving`` (the entry a
        rename moves) may be the one that differs."""
        for i, name in enumerate(parts):
            names = self.backend.names(parts[:i])
            if name in names:
                continue
            key = name.casefold()
            clash = next((n for n in sorted(names) if n.casefold() == key), None)
            if clash is not None and (*parts[:i], clash) != moving:
                new, old = show(parts[: i + 1]), show((*parts[:i], clash))
                raise UsageError(
                    f"Error: {new} differs only in letter case from {old}, which exists (a "
                    f"file system that ignores case would hold one of them); use {old} or "
                    f"another name."
                )
            return

    def _create(self, parts: Parts, text: str) -> str:
        if not parts:
            raise UsageError(f"Error: {ROOT} is the memory folder; create a file inside it.")
        kind = self.backend.kind(parts)
        if kind == "dir":
            raise UsageError(f"Error: {show(parts)} is a folder; choose a file name.")
        if kind == "file":
            raise UsageError(
                f"Error: File {show(parts)} already exists. Use str_replace or insert to edit "
                "it, or delete it first."
            )
        self._check_case(parts)
        self._write(parts, text)
        return f"File created successfully at: {show(parts)}"

    def _str_replace(self, parts: Parts, old: str, new: str) -> str:
        content = self._need_file(parts)
        if not old:
            raise UsageError("Error: old_str is empty; give the exact text to replace.")
        # the first two occurrences say 0, 1 or more; str.count and the line numbers
        # of the first few are read only for an error, each in one pass
        at = content.find(old)
        if at == -1:
            raise UsageError(
                f"No replacement was performed, old_str `{quote(old)}` did not appear "
                f"verbatim in {show(parts)}."
            )
        if content.find(old, at + len(old)) != -1:
            raise UsageError(self._many(content, old, at))
        updated = content[:at] + new + content[at + len(old) :]
        self._write(parts, updated)
        changed = content.count("\n", 0, at)
        lines = updated.split("\n")
        first, stop = max(0, changed - 2), min(len(lines), changed + new.count("\n") + 3)
        snippet = "\n".join(
            f"{str(i + 1).rjust(LINE_NUMBER_WIDTH)}\t{lines[i]}" for i in range(first, stop)
        )
        if len(snippet) > self.max_view_chars:
            snippet = (
                f"{snippet[: self.max_view_chars]}\n[the snippet is cut at "
                f"{self.max_view_chars:,} characters; view {show(parts)} to read the change]"
            )
        return (
            "The memory file has been edited. Here is the snippet showing the change "
            "(with line numbers):\n" + snippet
        )

    @staticmethod
    def _many(content: str, old: str, at: int) -> str:
        """The error for an ``old_str`` found more than once (first at ``at``): the
        lines of the first :data:`MAX_MATCH_LINES` occurrences, and how many in all."""
        found: list[int] = []
        line = content.count("\n", 0, at) + 1
        while at != -1 and len(found) < MAX_MATCH_LINES:
            found.append(line)
            after = content.find(old, at + len(old))
            if after != -1:
                line += content.count("\n", at, after)
            at = after
        total = content.count(old)
        more = f" and {total - len(found):,} more ({total:,} in all)" if total > len(found) else ""
        return (
            f"No replacement was performed. Multiple occurrences of old_str `{quote(old)}` in "
            f"lines: {', '.join(map(str, found))}{more}. Please ensure it is unique"
        )

    def _insert(self, parts: Parts, line: object, text: str) -> str:
        if isinstance(line, bool) or not isinstance(line, int):
            raise UsageError(f"Error: insert_line must be an integer, got {brief(line, 80)}.")
        content = self._need_file(parts)
        lines = split_lines(content)
        if line < 0 or line > len(lines):
            raise UsageError(
                f"Invalid `insert_line` parameter: {brief(line, 80)}. It should be within the "
                f"range [0, {len(lines)}]."
            )
        lines.insert(line, text.removesuffix("\n"))
        self._write(parts, "\n".join(lines) + "\n")
        return f"The file {show(parts)} has been edited."

    def _delete(self, parts: Parts) -> str:
        if not parts:
            raise UsageError(f"Error: cannot delete the {ROOT} directory itself.")
        if self.backend.kind(parts) is None:
            raise UsageError(f"Error: the path {show(parts)} does not exist.")
        self.backend.remove(parts)
        return f"Successfully deleted {show(parts)}"

    def _rename(self, old: Parts, new: Parts) -> str:
        if not old or not new:
            raise UsageError(f"Error: cannot rename the {ROOT} directory itself, or onto it.")
        kind = self.backend.kind(old)
        if kind is None:
            raise UsageError(f"Error: the path {show(old)} does not exist.")
        if self.backend.kind(new) is not None:
            raise UsageError(f"Error: the destination {show(new)} already exists.")
        if new[: len(old)] == old:
            raise UsageError(f"Error: cannot move {show(old)} into itself ({show(new)}).")
        self._check_case(new, moving=old)
        self.backend.move(old, new)
        return f"Successfully renamed {show(old)} to {show(new)}"
