"""A backend for Anthropic's client-side memory tool (``memory_20250818``).

The model asks for one command at a time on paths under ``/memories``; the
application runs it and sends the text back as the tool result. :class:`MemoryTool`
runs those commands over one of two backends:

- :class:`DirectoryMemory` keeps each file as a file under a root folder on disk,
  written atomically (a temporary file renamed over the old one);
- :class:`StoreMemory` keeps each file as one item of a ctxwise memory
  :class:`~ctxwise.memory.Store`, keyed by its path, in one namespace (one per tenant
  and session), with one more item that indexes the paths, so a command reads the
  index and the files it names, never the others. Folders are implied by the paths
  of the files in them.

Commands (the SDK's ``BetaMemoryTool20250818*Command`` types)::

    view         path, view_range?      a file with line numbers, or a folder listing
    create       path, file_text        a new file (an existing one is refused)
    str_replace  path, old_str, new_str replace the one occurrence of old_str
    insert       path, insert_line, insert_text   insert after line insert_line (0: at the top)
    delete       path                   a file or a folder with everything in it
    rename       old_path, new_path     a file or a folder, to a path that does not exist

:meth:`MemoryTool.execute` never raises for a model's command: a bad command comes
back as ``MemoryResult(text, is_error=True)`` whose text names the path and what to
do instead, and nothing is changed. A missing or unknown parameter is such an error.
A bad constructor argument raises :class:`~ctxwise.errors.UsageError`.

Paths are confined to ``/memories`` and the folders below it. Refused: any other
path (relative, another absolute path, ``/memoriesX``), ``.`` and ``..`` segments
and every name starting with a dot, empty segments, backslashes, NUL and other
control or format characters, names that start or end with a space or end with a
dot (Windows drops those, so ``a.md.`` would be ``a.md``), percent escapes (``%2e``,
``%252e``, ``%2f``), names that Unicode normalization (NFKC) would change (dot
look-alikes such as U+2024, U+2025, U+FF0E and fullwidth forms such as U+FF0F) and
other dot-like characters, slash and backslash look-alikes (U+2215 ``∕``, U+2044
``⁄``, U+29F8 ``⧸``, U+2571 ``╱``, U+2216 ``∖`` and the others Unicode lists as
confusable with them, so ``/memories/∕..∕etc`` does not read as traversal), names
Windows cannot hold (the device names ``CON``, ``PRN``, ``AUX``, ``NUL``,
``CONIN$``, ``CONOUT$``, ``COM0``-``COM9``, ``LPT0``-``LPT9`` in any case and with
any extension, and ``< > : " | ? *``: ``a.md:x`` is an alternate data stream
there), and a new name (``create``, the destination of ``rename``, and the folders
they make) that differs only in letter case (``str.casefold``) from a name already
in its folder: ``Case.md`` beside ``case.md`` would be one file where case is
ignored (a rename that changes only the case of its own name is allowed). So the
files of a memory can be copied to any file system. On disk a path
is resolved with its symbolic links and refused unless the real path stays under
the root, so no link leads out; the folder (or file) is then opened and checked
again where it really is, and used through that descriptor, so a link swapped in
after the check does not lead out either. One trailing slash is accepted (``/memories/``).

Files are capped (``max_file_bytes`` of UTF-8, by default 1 MiB) and a view is cut
into pages of ``max_view_chars``; a cut page ends with the ``view_range`` that
reads the rest. Every result goes back into the model's window, so none grows with
what the model sent: the snippet after ``str_replace`` is cut at ``max_view_chars``;
an error quotes a string the model sent by its first :data:`MAX_QUOTE_CHARS`
characters and its length (``zzz…(500,000 characters)``), lists the lines of at
most :data:`MAX_MATCH_LINES` occurrences of an ``old_str`` found more than once
(and how many there are in all), and is cut at :data:`MAX_ERROR_CHARS` characters.
``str_replace`` finds at most two occurrences to know whether ``old_str`` is
unique, so it takes one pass whatever the number of matches. Return strings follow
the SDK's local filesystem tool (``anthropic.lib.tools.BetaLocalFilesystemMemoryTool``).

:class:`AnthropicMemoryTool` (extra ``anthropic``) subclasses the SDK's
``BetaAbstractMemoryTool``, so the SDK's tool runner drives a :class:`MemoryTool`::

    tool = MemoryTool(DirectoryMemory("./memory")).anthropic()
    client.beta.messages.tool_runner(model=..., max_tokens=..., messages=..., tools=[tool])
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import re
import shutil
import stat
import threading
import time
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ctxwise._io import fill_temporary, sweep_stale_once, temporary_name
from ctxwise.errors import MissingDependencyError, StoreError, UsageError
from ctxwise.memory.store import MAX_KEY_BYTES, MemoryItem, NewItem, Store, check_namespace

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_VIEW_CHARS",
    "MAX_ERROR_CHARS",
    "MAX_MATCH_LINES",
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "MAX_QUOTE_CHARS",
    "ROOT",
    "AnthropicMemoryTool",  # noqa: F822 - built on first access (extra anthropic)
    "DirectoryMemory",
    "MemoryBackend",
    "MemoryResult",
    "MemoryTool",
    "StoreMemory",
    "check_path",
]

ROOT = "/memories"
DEFAULT_MAX_FILE_BYTES = 1 << 20
DEFAULT_MAX_VIEW_CHARS = 16_000
MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255
_DEVICE_NAMES = frozenset(
    {
        "CON",
        "PRN",
        "AUX",
        "NUL",
        "CONIN$",
        "CONOUT$",
        *(f"{p}{i}" for p in ("COM", "LPT") for i in range(10)),
    }
)
MAX_QUOTE_CHARS = 200
"""The most characters of a string the model sent that an error quotes back."""
MAX_ERROR_CHARS = 4_000
"""The most characters of an error result (a longer one is cut, saying so)."""
MAX_MATCH_LINES = 10
"""The most line numbers a str_replace error lists for an old_str found more than once."""
_NOT_PORTABLE = frozenset('<>:"|?*')
_LEGACY_TMP = re.compile(r"\.tmp-[0-9a-f]{16}")
"""The temporary files of earlier versions, swept like today's."""
LISTING_DEPTH = 2
LINE_NUMBER_WIDTH = 6

Parts: TypeAlias = tuple[str, ...]
Kind: TypeAlias = Literal["file", "dir"] | None

_COMMANDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "view": (("path",), ("view_range",)),
    "create": (("path", "file_text"), ()),
    "str_replace": (("path", "old_str", "new_str"), ()),
    "insert": (("path", "insert_line", "insert_text"), ()),
    "delete": (("path",), ()),
    "rename": (("old_path", "new_path"), ()),
}
_STRING_PARAMS = ("path", "file_text", "old_str", "new_str", "insert_text", "old_path", "new_path")
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
# Characters that read as a dot but survive NFKC unchanged.
_DOT_LIKE = frozenset(
    "\u00b7\u0387\u05c3\u06d4\u0701\u0702\u0830\u1362\u166e\u1803\u1809\u2022\u2027"
    "\u2218\u2219\u22c5\u2e2e\u2e3c\u3002\ua4f8\ua60e\ua6f3\U00010a56\U0001da88"
)
# Characters that read as '/' or '\' but survive NFKC unchanged (those it changes,
# such as U+FF0F and U+FE68, are refused as normalization-changing): the symbols
# and strokes Unicode's confusables list for the two, the solidus operators and
# overlays. Letters that resemble a stroke (katakana NO, CJK 丿 and 丶) are words'
# letters, not refused.
_SLASH_LIKE = frozenset(
    "\u0337\u0338\u1735\u2041\u2044\u20e5\u20eb\u2215\u2216\u244a\u2571\u2572"
    "\u27cb\u27cd\u29f5\u29f6\u29f7\u29f8\u29f9\u2afb\u2afd\u2e4a\u3033\u31d3\u31d4"
    "\U0001d20f\U0001d23a\U0001d23b\U0001f67c\U0001f67d"
)


@dataclass(frozen=True, slots=True)
class MemoryResult:
    """What a command returns: the tool result's text, and whether it is an error."""

    text: str
    is_error: bool = False


def _quote(text: str, limit: int = MAX_QUOTE_CHARS) -> str:
    """``text`` whole when it is short, else its first ``limit`` characters and its length."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def _brief(value: object, limit: int = MAX_QUOTE_CHARS) -> str:
    """``repr(value)``, cut as :func:`_quote` cuts; for a value ``repr`` cannot show
    (an integer over 4,300 digits, a list nested too deeply), its type."""
    if isinstance(value, str):  # the repr of a cut string: escapes can make it 10x longer
        text = repr(value[: limit + 1])
        if len(value) <= limit and len(text) <= limit:
            return text
        return f"{text[:limit]}… ({len(value):,} characters)"
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        what = "an integer" if isinstance(value, int) else f"a {type(value).__name__}"
        return f"{what} too large to show"
    return _quote(text, limit)


def _bounded(text: str) -> str:
    """An error result's text, cut at :data:`MAX_ERROR_CHARS` (saying so)."""
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return f"{text[:MAX_ERROR_CHARS]}… (error cut: {len(text):,} characters)"


def check_path(path: object) -> Parts:
    """The segments of a memory path below ``/memories`` (``()`` for the root
    itself), or a :class:`UsageError` saying why the path is refused."""
    return _parse(path, "path")


def _parse(path: object, param: str) -> Parts:
    if not isinstance(path, str):
        raise UsageError(
            f"Error: `{param}` must be a string path under {ROOT}, got {_brief(path)}."
        )
    shown = _brief(path)
    fix = f"Use a path like {ROOT}/notes.md."
    if len(path) > MAX_PATH_CHARS:
        raise UsageError(f"Error: the path is longer than {MAX_PATH_CHARS} characters. {fix}")
    if "\x00" in path:
        raise UsageError(f"Error: the path {shown} contains a NUL byte. {fix}")
    if "\\" in path:
        raise UsageError(
            f"Error: the path {shown} contains a backslash; separate folders with '/'."
        )
    if _PERCENT_ESCAPE.search(path):
        raise UsageError(
            f"Error: the path {shown} contains a percent escape; write the characters "
            f"themselves (paths are not URL-encoded). {fix}"
        )
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise UsageError(
            f"Error: the path {shown} is outside {ROOT}; every path starts with {ROOT}/. {fix}"
        )
    rest = path[len(ROOT) + 1 :]
    if rest.endswith("/"):
        rest = rest[:-1]
    if not rest:
        if path not in (ROOT, ROOT + "/"):
            raise UsageError(f"Error: the path {shown} has an empty segment ('//'); remove it.")
        return ()
    parts = tuple(rest.split("/"))
    for name in parts:
        _check_name(name, shown)
    return parts


def _check_name(name: str, shown: str) -> None:
    if not name:
        raise UsageError(f"Error: the path {shown} has an empty segment ('//'); remove it.")
    if name.startswith("."):
        raise UsageError(
            f"Error: the path {shown} has the segment {_brief(name)}: names may not start with '.' "
            f"('.' and '..' are not allowed). Name the file without the leading dot."
        )
    if name[0].isspace() or name[-1].isspace() or name.endswith("."):
        raise UsageError(
            f"Error: the path {shown} has the segment {_brief(name)}, which starts or ends with a "
            f"space or ends with a dot (invisible in a listing, and dropped by some file "
            f"systems, so two names would be one file); remove them."
        )
    stem = name.split(".", 1)[0].rstrip(" ").upper()
    if stem in _DEVICE_NAMES:
        raise UsageError(
            f"Error: the path {shown} has the segment {_brief(name)}: {stem} is a device name on "
            f"Windows (CON, PRN, AUX, NUL, CONIN$, CONOUT$, COM0-9, LPT0-9, with any extension "
            f"and in any case), so the file could not be written or copied there; choose "
            f"another name."
        )
    bad = sorted({ch for ch in name if ch in _NOT_PORTABLE})
    if bad:
        raise UsageError(
            f"Error: the path {shown} has the segment {_brief(name)} with {' '.join(bad)}, which "
            f"Windows file names cannot hold; use letters, digits, '-', '_' or '.'."
        )
    if unicodedata.normalize("NFKC", name) != name:
        raise UsageError(
            f"Error: the path {shown} has the segment {_brief(name)}, which Unicode normalization "
            f"changes (look-alike or compatibility characters); use plain characters."
        )
    for ch in name:
        if ch in _SLASH_LIKE:
            raise UsageError(
                f"Error: the path {shown} contains {ch!r} (U+{ord(ch):04X}), which looks like "
                f"a slash or backslash; separate folders with '/' only, and name them with "
                f"letters, digits, '-', '_' or '.'."
            )
        if ch in _DOT_LIKE:
            raise UsageError(
                f"Error: the path {shown} contains {ch!r} (U+{ord(ch):04X}), which looks like "
                f"a dot; use '.' only inside a name, such as notes.md."
            )
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            raise UsageError(
                f"Error: the path {shown} contains the control or invisible character "
                f"U+{ord(ch):04X}; use visible characters only."
            )
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise UsageError(f"Error: a name in {shown} is longer than {MAX_NAME_BYTES} bytes.")


def _addressable(name: str) -> bool:
    """Whether a memory path can name ``name`` (a listing shows nothing else: a name
    with a newline would forge rows, one that is not Unicode cannot be sent)."""
    try:
        _check_name(name, repr(name))
    except UsageError:
        return False
    return True


def _show(parts: Parts) -> str:
    return "/".join((ROOT, *parts))


def _size(n: int) -> str:
    if n < 1024:
        return f"{n}B"
    value = float(n)
    for unit in "KMG":
        value /= 1024
        if value < 1024 or unit == "G":
            break
    return f"{value:.1f}".removesuffix(".0") + unit


def _lines(content: str) -> list[str]:
    """Lines split on LF (a CR stays), without the empty tail of a final newline."""
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# ---------------------------------------------------------------- backends --------


@dataclass(frozen=True, slots=True)
class _Entry:
    parts: Parts
    is_dir: bool
    size: int


class MemoryBackend(ABC):
    """Where memory files live. Paths come in validated, as segments below the root;
    a method refuses what it cannot do by raising
    :class:`~ctxwise.errors.UsageError`, which :class:`MemoryTool` turns into an error result."""

    @abstractmethod
    def kind(self, parts: Parts) -> Kind:
        """``"file"``, ``"dir"``, or ``None`` when nothing is there."""

    @abstractmethod
    def read(self, parts: Parts, limit: int) -> str:
        """The text of a file of at most ``limit`` UTF-8 bytes."""

    @abstractmethod
    def write(self, parts: Parts, text: str) -> None:
        """Create or replace a file, creating the folders above it."""

    @abstractmethod
    def listing(self, parts: Parts, depth: int) -> list[_Entry]:
        """What a folder holds, ``depth`` levels deep, sorted by path."""

    @abstractmethod
    def remove(self, parts: Parts) -> None:
        """Delete a file, or a folder with everything in it."""

    @abstractmethod
    def move(self, old: Parts, new: Parts) -> None:
        """Move a file or folder to a path where nothing is."""

    def names(self, parts: Parts) -> list[str]:
        """The names directly in the folder ``parts`` (none when it is not a folder),
        which :class:`MemoryTool` checks a new name against for a difference only in
        letter case. This default lists the folder one level deep; a backend that can
        name its entries more cheaply overrides it."""
        if self.kind(parts) != "dir":
            return []
        return [e.parts[0] for e in self.listing(parts, 1)]


def _too_big(parts: Parts, size: int, limit: int) -> UsageError:
    return UsageError(
        f"Error: {_show(parts)} would be {size:,} bytes, over the {limit:,}-byte limit for a "
        f"memory file. Keep it shorter or split it into several files."
    )


class _Folder:
    """An open folder of the memory root: its real path, and a descriptor (``None``
    where the platform cannot open folders) that the names below it are used through,
    so a link swapped in after the check cannot redirect them."""

    __slots__ = ("fd", "path")

    def __init__(self, path: str, fd: int | None) -> None:
        self.path = path
        self.fd = fd

    def at(self, name: str) -> tuple[str, int | None]:
        """``(path, dir_fd)`` arguments naming ``name`` in this folder."""
        return (name, self.fd) if self.fd is not None else (os.path.join(self.path, name), None)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> _Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# os.replace takes dir_fd arguments too where os.rename does (it is not listed)
_AT = {os.open, os.stat, os.mkdir, os.unlink, os.rename} <= os.supports_dir_fd and (
    shutil.rmtree.avoids_symlink_attacks
)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)


def _where(fd: int) -> str | None:
    """Where an open file or folder really is now, or ``None`` when the system cannot
    say (Linux: ``/proc/self/fd``; macOS: ``F_GETPATH``)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    getpath = getattr(fcntl, "F_GETPATH", None)
    if getpath is None:  # pragma: no cover - neither Linux nor macOS
        return None
    try:  # pragma: no cover - macOS
        raw = fcntl.fcntl(fd, getpath, b"\0" * 1024)
    except OSError:  # pragma: no cover
        return None
    return os.fsdecode(raw.split(b"\0", 1)[0])  # pragma: no cover


class DirectoryMemory(MemoryBackend):
    """Memory files under ``root`` on disk (``/memories/a.md`` is ``root/a.md``).

    Every path is resolved with its symbolic links and refused unless the real path
    stays under the root's real path. The folder an operation works in is then opened
    (without following a link at its last step) and asked where it really is, and the
    file is created, opened, replaced, renamed or deleted through that descriptor, so
    a link swapped in between the check and the use cannot lead out of the root. Writes
    go through a temporary file renamed over the target, so a file is never
    half-written; a temporary that a killed process left in the folder written to is
    removed by the next write there once it is :data:`ctxwise._io.STALE_TEMP_AGE`
    old by ``clock`` (seconds since the epoch).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        create: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(root, str | os.PathLike):
            raise UsageError(f"root must be a folder path, got {type(root).__name__}")
        path = Path(root)
        if create and not path.exists():
            try:
                path.mkdir(parents=True, mode=0o700)
            except OSError as exc:
                raise UsageError(f"cannot create the memory root {path}: {exc.strerror}") from None
        if not path.is_dir():
            raise UsageError(f"the memory root {path} is not a folder")
        self.root = path
        self._real_root = os.path.realpath(path)
        self._clock = clock

    def _inside(self, real: str) -> bool:
        return real == self._real_root or real.startswith(self._real_root + os.sep)

    def _escape(self, parts: Parts) -> UsageError:
        return UsageError(
            f"Error: {_show(parts)} leads outside {ROOT} through a symbolic link, so it is "
            f"refused. Use another path."
        )

    def _real(self, parts: Parts) -> str:
        real = os.path.realpath(os.path.join(self._real_root, *parts))
        if not self._inside(real):
            raise self._escape(parts)
        return real

    def _confined(self, fd: int, parts: Parts) -> None:
        """Refuse an open descriptor that is not under the root (a link swapped in
        after the path was checked)."""
        where = _where(fd)
        if where is not None and not self._inside(where):
            raise self._escape(parts)

    def _open_folder(self, real: str, parts: Parts) -> _Folder:
        """The folder at the checked real path ``real``, opened and confined."""
        if not _AT:  # pragma: no cover - no descriptor-relative calls (Windows)
            return _Folder(real, None)
        fd = os.open(real, _DIR_FLAGS)
        try:
            self._confined(fd, parts)
        except BaseException:
            os.close(fd)
            raise
        return _Folder(real, fd)

    def _parent(self, parts: Parts) -> tuple[_Folder, str]:
        """The open folder that holds the entry ``parts`` (a link there is not
        followed), and its name in it."""
        self._real(parts)
        return self._open_folder(self._real(parts[:-1]), parts), parts[-1]

    def kind(self, parts: Parts) -> Kind:
        try:
            st = os.stat(self._real(parts))
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISDIR(st.st_mode):
            return "dir"
        if stat.S_ISREG(st.st_mode):
            return "file"
        raise UsageError(f"Error: {_show(parts)} is not a regular file or folder.")

    def read(self, parts: Parts, limit: int) -> str:
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(self._real(parts), flags)
        with os.fdopen(fd, "rb") as fh:
            self._confined(fd, parts)
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise UsageError(f"Error: {_show(parts)} is not a regular file.")
            data = fh.read(limit + 1)
        if len(data) > limit:
            raise UsageError(
                f"Error: {_show(parts)} is over the {limit:,}-byte limit for a memory file and "
                f"cannot be read; delete it or ask the user to shorten it."
            )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"Error: {_show(parts)} is not UTF-8 text.") from None

    def _check_parents(self, parts: Parts) -> None:
        for i in range(1, len(parts)):
            if self.kind(parts[:i]) == "file":
                raise UsageError(
                    f"Error: {_show(parts[:i])} is a file, so {_show(parts)} cannot be under it."
                )

    def _make_folders(self, parts: Parts) -> None:
        """Create the missing folders of ``parts``, each inside a confined open parent."""
        for i in range(1, len(parts) + 1):
            if self.kind(parts[:i]) is not None:
                continue
            with self._open_folder(self._real(parts[: i - 1]), parts[:i]) as parent:
                path, dir_fd = parent.at(parts[i - 1])
                with contextlib.suppress(FileExistsError):  # made meanwhile
                    os.mkdir(path, 0o700, dir_fd=dir_fd)

    def write(self, parts: Parts, text: str) -> None:
        self._check_parents(parts)
        self._make_folders(parts[:-1])
        real = self._real(parts)  # a link to a file inside the root: its target
        folder, name = os.path.split(real)
        with self._open_folder(folder, parts) as parent:
            self._replace(parent, name, text.encode("utf-8"))

    def _replace(self, parent: _Folder, name: str, data: bytes) -> None:
        """Replace ``name`` in ``parent`` atomically: a temporary file (a short name,
        so a name of the longest length still fits) flushed and renamed over it."""
        path, dir_fd = parent.at(name)
        sweep_stale_once(
            parent.fd if parent.fd is not None else parent.path, clock=self._clock, also=_LEGACY_TMP
        )
        try:
            st: os.stat_result | None = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        tmp = ""
        fd = -1
        try:
            for _ in range(100):
                candidate = temporary_name()
                try:
                    # a new file: 0o666 less the umask; an existing one keeps its mode
                    mode = 0o666 if st is None else 0o600
                    fd = os.open(parent.at(candidate)[0], flags, mode, dir_fd=dir_fd)
                except FileExistsError:
                    continue
                tmp = candidate
                break
            else:  # pragma: no cover - 100 collisions of 32 random bits
                raise FileExistsError(errno.EEXIST, "cannot create a temporary file")
            fill_temporary(fd, data, st)
            os.close(fd)
            fd = -1
            os.replace(parent.at(tmp)[0], path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            tmp = ""
        finally:
            if fd >= 0:
                os.close(fd)
            if tmp:
                with contextlib.suppress(OSError):
                    os.unlink(parent.at(tmp)[0], dir_fd=dir_fd)
        if parent.fd is not None:
            with contextlib.suppress(OSError):
                os.fsync(parent.fd)

    def listing(self, parts: Parts, depth: int) -> list[_Entry]:
        found: list[_Entry] = []

        def walk(sub_parts: Parts, prefix: Parts, level: int) -> None:
            try:
                with self._open_folder(self._real(sub_parts), sub_parts) as folder:
                    entries = sorted(
                        os.scandir(folder.fd if folder.fd is not None else folder.path),
                        key=lambda e: e.name,
                    )
            except (UsageError, OSError):
                return
            for entry in entries:
                if not _addressable(entry.name):
                    continue  # hidden, or a name no memory path can reach
                sub = (*prefix, entry.name)
                try:
                    st = os.stat(self._real((*parts, *sub)))
                except (UsageError, OSError):
                    continue  # a link out of the root, or gone meanwhile
                if stat.S_ISDIR(st.st_mode):
                    found.append(_Entry(sub, True, st.st_size))
                    if level < depth:
                        walk((*parts, *sub), sub, level + 1)
                elif stat.S_ISREG(st.st_mode):
                    found.append(_Entry(sub, False, st.st_size))

        walk(parts, (), 1)
        return found

    def names(self, parts: Parts) -> list[str]:
        # every name, hidden or not a memory name too: a clash in case with any of
        # them would be one file on a file system that does not tell case apart
        try:
            with self._open_folder(self._real(parts), parts) as folder:
                return os.listdir(folder.fd if folder.fd is not None else folder.path)
        except (FileNotFoundError, NotADirectoryError):
            return []

    def remove(self, parts: Parts) -> None:
        parent, name = self._parent(parts)
        with parent:
            path, dir_fd = parent.at(name)
            st = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path, dir_fd=dir_fd)
            else:
                os.unlink(path, dir_fd=dir_fd)

    def move(self, old: Parts, new: Parts) -> None:
        self._check_parents(new)
        self._real(new)
        self._make_folders(new[:-1])
        source, name = self._parent(old)
        with source:
            target, new_name = self._parent(new)
            with target:
                to, to_fd = target.at(new_name)
                try:
                    os.stat(to, dir_fd=to_fd, follow_symlinks=False)
                except FileNotFoundError:
                    pass
                else:
                    raise UsageError(f"Error: the destination {_show(new)} already exists.")
                frm, frm_fd = source.at(name)
                os.rename(frm, to, src_dir_fd=frm_fd, dst_dir_fd=to_fd)


_INDEX_VERSION = 1
_LOCK_TRIES = 100
_LOCK_PAUSE = 0.01
# Threads of this process take one of these (by the lock name's hash) before the
# store's lock, so they queue for it instead of being refused by it.
_STRIPES = tuple(threading.RLock() for _ in range(64))


def _index_files(metadata: Mapping[str, Any]) -> dict[str, int] | None:
    """The files an index item lists (relative path: size in UTF-8 bytes), or
    ``None`` when it is not an index this version reads."""
    version = metadata.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > _INDEX_VERSION:
        raise StoreError(
            f"the memory tool index is version {version}, written by a newer ctxwise; this "
            f"one reads version {_INDEX_VERSION}"
        )
    files = metadata.get("files")
    if version != _INDEX_VERSION or not isinstance(files, dict):
        return None
    if not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in files.items()
    ):
        return None
    return dict(files)  # a copy: a store may hand out what it holds


class StoreMemory(MemoryBackend):
    """Memory files as items of a ctxwise :class:`~ctxwise.memory.Store`, one per
    file, in ``namespace`` (use one namespace per tenant and session).

    An item's id and text are the file's path (``/memories/notes.md``); its
    metadata holds the content under ``"content"``. One more item, ``/memories``
    (the root folder's path, which no file has), is the index: the path and size
    of every file (metadata ``{"memory_tool": "/memories", "version": 1, "files":
    {"notes.md": 12, ...}}``). A command reads the index and the files it names,
    never the others, so its cost does not grow with what the other files hold (the
    index itself grows with their number and the length of their paths).
    Folders exist while a file is in them. A namespace written before the index
    existed is indexed once, from its items, on first use; after that a file item
    put into the store directly, not through the tool, is not seen.

    A command that changes files holds the store's lock
    (:meth:`~ctxwise.memory.Store.exclusive`) ``ctxwise.memory_tool:<namespace>`` (its
    parts joined by ``/``)
    while it reads the index and stores the change, so two writers never lose one
    another's change to the index; threads of this process wait their turn, and a
    command that cannot get the lock from another process within about a second is
    refused (nothing changed). A new or changed file is stored in one
    ``put_many`` with the index; a deleted or moved file leaves the index first,
    so a failure in between leaves an item no path shows, never a path to nothing.
    """

    def __init__(self, store: Store, namespace: Sequence[str]) -> None:
        if not isinstance(store, Store):
            raise UsageError(f"store must be a ctxwise memory Store, got {type(store).__name__}")
        self.store = store
        self.namespace = check_namespace(namespace)
        self._lock_name = "ctxwise.memory_tool:" + "/".join(self.namespace)

    # -- the index -----------------------------------------------------------------

    def _indexed(self) -> dict[str, int] | None:
        """The index's files; ``{}`` for an empty namespace; ``None`` when the
        namespace has items but no index this version reads."""
        item = self.store.get(self.namespace, ROOT)
        if item is not None:
            return _index_files(item.metadata)
        return {} if self.store.count(self.namespace) == 0 else None

    def _scan(self) -> dict[str, int]:
        """Every file, from every item of the namespace (for one without an index)."""
        n = self.store.count(self.namespace)
        files: dict[str, int] = {}
        for item in self.store.recent(self.namespace, n) if n else []:
            rel = item.id[len(ROOT) + 1 :]
            if item.id.startswith(ROOT + "/") and all(_addressable(x) for x in rel.split("/")):
                files[rel] = len(str(item.metadata.get("content", "")).encode("utf-8"))
        return files

    def _index_item(self, files: Mapping[str, int]) -> NewItem:
        metadata = {"memory_tool": ROOT, "version": _INDEX_VERSION, "files": dict(files)}
        return NewItem(text=ROOT, id=ROOT, metadata=metadata)

    def _files(self) -> dict[str, int]:
        """The files, for a command that changes nothing."""
        files = self._indexed()
        if files is not None:
            return files
        try:
            with self._locked(tries=1):
                return self._files_locked()
        except UsageError:  # another writer holds the lock: read without saving
            return self._scan()

    def _files_locked(self) -> dict[str, int]:
        """The files, under the lock: an index missing or unreadable is made from
        the items and saved."""
        files = self._indexed()
        if files is None:
            files = self._scan()
            self.store.put(self.namespace, self._index_item(files))
        return files

    @contextlib.contextmanager
    def _locked(self, tries: int = _LOCK_TRIES) -> Iterator[None]:
        busy = UsageError(
            "Error: another program is changing these memory files right now; nothing was "
            "changed. Try the command again."
        )
        digest = hashlib.sha256(self._lock_name.encode("utf-8")).digest()
        with _STRIPES[int.from_bytes(digest[:4], "big") % len(_STRIPES)]:
            for attempt in range(tries):
                with contextlib.ExitStack() as stack:
                    try:
                        stack.enter_context(
                            self.store.exclusive(self._lock_name, busy=lambda: busy)
                        )
                    except UsageError as exc:
                        if exc is not busy:
                            raise
                        if attempt + 1 < tries:
                            time.sleep(_LOCK_PAUSE)
                        continue
                    yield
                    return
        raise busy

    # -- reading -------------------------------------------------------------------

    @staticmethod
    def _key(parts: Parts) -> str:
        return "/".join(parts)

    @staticmethod
    def _below(files: Mapping[str, int], parts: Parts) -> list[str]:
        prefix = "/".join(parts) + "/" if parts else ""
        return [k for k in files if k.startswith(prefix)]

    def kind(self, parts: Parts) -> Kind:
        if not parts:
            return "dir"
        files = self._files()
        if self._key(parts) in files:
            return "file"
        return "dir" if self._below(files, parts) else None

    def read(self, parts: Parts, limit: int) -> str:
        item = self.store.get(self.namespace, _show(parts))
        if item is None:
            raise UsageError(f"Error: the path {_show(parts)} does not exist.")
        text = str(item.metadata.get("content", ""))
        size = len(text.encode("utf-8"))
        if size > limit:
            raise UsageError(
                f"Error: {_show(parts)} is over the {limit:,}-byte limit for a memory file and "
                f"cannot be read; delete it or ask the user to shorten it."
            )
        return text

    def names(self, parts: Parts) -> list[str]:
        k = len(parts)
        return sorted({tuple(p.split("/"))[k] for p in self._below(self._files(), parts)})

    def listing(self, parts: Parts, depth: int) -> list[_Entry]:
        k = len(parts)
        sizes: dict[Parts, int] = {}
        dirs: set[Parts] = set()
        files = self._files()
        for key in self._below(files, parts):
            rel = tuple(key.split("/"))[k:]
            size = files[key]
            for i in range(1, len(rel)):
                if len(rel[:i]) <= depth:
                    dirs.add(rel[:i])
                    sizes[rel[:i]] = sizes.get(rel[:i], 0) + size
            if len(rel) <= depth:
                sizes[rel] = size
        found = [_Entry(rel, rel in dirs, size) for rel, size in sizes.items()]
        return sorted(found, key=lambda e: e.parts)

    # -- changing ------------------------------------------------------------------

    def _check_parents(self, files: Mapping[str, int], parts: Parts) -> None:
        for i in range(1, len(parts)):
            if self._key(parts[:i]) in files:
                raise UsageError(
                    f"Error: {_show(parts[:i])} is a file, so {_show(parts)} cannot be under it."
                )

    def _item(self, parts: Parts, text: str) -> NewItem:
        path = _show(parts)
        size = len(path.encode("utf-8"))
        if size > MAX_KEY_BYTES:
            raise UsageError(
                f"Error: the path {_show(parts)} is {size:,} bytes long in UTF-8, over the "
                f"{MAX_KEY_BYTES:,} bytes a store keys a file by; use shorter names."
            )
        return NewItem(text=path, id=path, metadata={"content": text, "memory_tool": ROOT})

    def write(self, parts: Parts, text: str) -> None:
        with self._locked():
            files = self._files_locked()
            self._check_parents(files, parts)
            if self._below(files, parts):
                raise UsageError(f"Error: {_show(parts)} is a folder, not a file.")
            files[self._key(parts)] = len(text.encode("utf-8"))
            self.store.put_many(self.namespace, [self._item(parts, text), self._index_item(files)])

    def remove(self, parts: Parts) -> None:
        with self._locked():
            files = self._files_locked()
            key = self._key(parts)
            gone = [key] if key in files else self._below(files, parts)
            if not gone:
                raise UsageError(f"Error: the path {_show(parts)} does not exist.")
            for k in gone:
                del files[k]
            self.store.put(self.namespace, self._index_item(files))
            self.store.delete(self.namespace, [f"{ROOT}/{k}" for k in gone])

    def move(self, old: Parts, new: Parts) -> None:
        with self._locked():
            files = self._files_locked()
            self._check_parents(files, new)
            if self._key(new) in files or self._below(files, new):
                raise UsageError(f"Error: the destination {_show(new)} already exists.")
            key = self._key(old)
            moving = [key] if key in files else self._below(files, old)
            if not moving:
                raise UsageError(f"Error: the path {_show(old)} does not exist.")
            k = len(old)
            found: list[MemoryItem] = self.store.get_many(
                self.namespace, [f"{ROOT}/{m}" for m in moving]
            )
            items: list[NewItem] = []
            for item in found:
                rel = tuple(item.id[len(ROOT) + 1 :].split("/"))
                to = (*new, *rel[k:])
                text = str(item.metadata.get("content", ""))
                files.pop(self._key(rel), None)
                files[self._key(to)] = len(text.encode("utf-8"))
                items.append(self._item(to, text))
            for m in moving:  # listed, but its item is gone: nothing to move
                files.pop(m, None)
            self.store.put_many(self.namespace, [*items, self._index_item(files)])
            self.store.delete(self.namespace, [f"{ROOT}/{m}" for m in moving])


# ---------------------------------------------------------------- the tool --------


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
        return _adapter_class()(self, cache_control=cache_control)

    def execute(self, command: Mapping[str, Any]) -> MemoryResult:
        """Run one command (the tool_use block's ``input``) and return its result."""
        try:
            return MemoryResult(self._run(command))
        except UsageError as exc:
            return MemoryResult(_bounded(str(exc)), is_error=True)
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
            raise UsageError(f"Error: unknown command {_brief(name, 40)}; use one of {known}.")
        required, optional = _COMMANDS[name]
        given = {k: v for k, v in command.items() if k != "command" and v is not None}
        missing = [k for k in required if k not in given]
        extra = sorted(str(k) for k in given if k not in required and k not in optional)
        if missing or extra:
            problems = []
            if missing:
                problems.append(f"missing {', '.join(missing)}")
            if extra:
                shown = [_quote(k, 40) for k in extra[:5]]
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
                _parse(p["old_path"], "old_path"), _parse(p["new_path"], "new_path")
            )
        parts = _parse(p["path"], "path")
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
                f"Error: the path {_show(parts)} does not exist. View {ROOT} to see what is there."
            )
        if kind == "dir":
            raise UsageError(f"Error: the path {_show(parts)} is a folder, not a file.")
        return self.backend.read(parts, self.max_file_bytes)

    def _write(self, parts: Parts, text: str) -> None:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise UsageError("Error: the text is not valid Unicode (lone surrogates).") from None
        if size > self.max_file_bytes:
            raise _too_big(parts, size, self.max_file_bytes)
        self.backend.write(parts, text)

    def _view(self, parts: Parts, view_range: object) -> str:
        kind = self.backend.kind(parts)
        if kind is None:
            raise UsageError(
                f"Error: the path {_show(parts)} does not exist. View {ROOT} to see what is there."
            )
        if kind == "dir":
            if view_range is not None:
                raise UsageError(
                    f"Error: view_range applies to files; {_show(parts)} is a folder. "
                    f"View it without view_range."
                )
            return self._listing(parts)
        content = self.backend.read(parts, self.max_file_bytes)
        lines = _lines(content)
        start, end = self._range(parts, view_range, len(lines))
        header = f"Here's the content of {_show(parts)} with line numbers:"
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
                f"file), got {_brief(view_range, 80)}."
            )
        start, end = view_range[0], view_range[1]  # type: ignore[index]
        end_given = end
        if end == -1:
            if n == 0 and start == 1:
                return 1, 0  # an empty file read to its end: no lines, not an error
            end = n
        if start < 1 or start > max(n, 1) or end < start or end > n:
            raise UsageError(
                f"Error: invalid view_range {_brief([start, end_given], 80)} for {_show(parts)}, "
                f"which has {n} lines; use [start, end] with 1 <= start <= end <= {n}, or end -1."
            )
        return start, end

    def _listing(self, parts: Parts) -> str:
        shown = _show(parts)
        entries = self.backend.listing(parts, LISTING_DEPTH)
        header = (
            f"Here're the files and directories up to {LISTING_DEPTH} levels deep in {shown}, "
            "excluding hidden items:"
        )
        total = sum(e.size for e in entries if not e.is_dir)
        rows = [f"{_size(total)}\t{shown}"]
        used = len(rows[0])
        for i, e in enumerate(entries):
            row = f"{_size(e.size)}\t{shown}/{'/'.join(e.parts)}{'/' if e.is_dir else ''}"
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
                new, old = _show(parts[: i + 1]), _show((*parts[:i], clash))
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
            raise UsageError(f"Error: {_show(parts)} is a folder; choose a file name.")
        if kind == "file":
            raise UsageError(
                f"Error: File {_show(parts)} already exists. Use str_replace or insert to edit "
                "it, or delete it first."
            )
        self._check_case(parts)
        self._write(parts, text)
        return f"File created successfully at: {_show(parts)}"

    def _str_replace(self, parts: Parts, old: str, new: str) -> str:
        content = self._need_file(parts)
        if not old:
            raise UsageError("Error: old_str is empty; give the exact text to replace.")
        # the first two occurrences say 0, 1 or more; str.count and the line numbers
        # of the first few are read only for an error, each in one pass
        at = content.find(old)
        if at == -1:
            raise UsageError(
                f"No replacement was performed, old_str `{_quote(old)}` did not appear "
                f"verbatim in {_show(parts)}."
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
                f"{self.max_view_chars:,} characters; view {_show(parts)} to read the change]"
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
            f"No replacement was performed. Multiple occurrences of old_str `{_quote(old)}` in "
            f"lines: {', '.join(map(str, found))}{more}. Please ensure it is unique"
        )

    def _insert(self, parts: Parts, line: object, text: str) -> str:
        if isinstance(line, bool) or not isinstance(line, int):
            raise UsageError(f"Error: insert_line must be an integer, got {_brief(line, 80)}.")
        content = self._need_file(parts)
        lines = _lines(content)
        if line < 0 or line > len(lines):
            raise UsageError(
                f"Invalid `insert_line` parameter: {_brief(line, 80)}. It should be within the "
                f"range [0, {len(lines)}]."
            )
        lines.insert(line, text.removesuffix("\n"))
        self._write(parts, "\n".join(lines) + "\n")
        return f"The file {_show(parts)} has been edited."

    def _delete(self, parts: Parts) -> str:
        if not parts:
            raise UsageError(f"Error: cannot delete the {ROOT} directory itself.")
        if self.backend.kind(parts) is None:
            raise UsageError(f"Error: the path {_show(parts)} does not exist.")
        self.backend.remove(parts)
        return f"Successfully deleted {_show(parts)}"

    def _rename(self, old: Parts, new: Parts) -> str:
        if not old or not new:
            raise UsageError(f"Error: cannot rename the {ROOT} directory itself, or onto it.")
        kind = self.backend.kind(old)
        if kind is None:
            raise UsageError(f"Error: the path {_show(old)} does not exist.")
        if self.backend.kind(new) is not None:
            raise UsageError(f"Error: the destination {_show(new)} already exists.")
        if new[: len(old)] == old:
            raise UsageError(f"Error: cannot move {_show(old)} into itself ({_show(new)}).")
        self._check_case(new, moving=old)
        self.backend.move(old, new)
        return f"Successfully renamed {_show(old)} to {_show(new)}"


# ---------------------------------------------------------------- the SDK adapter --


@functools.cache
def _adapter_class() -> type[Any]:
    try:
        from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError
    except ImportError as exc:
        raise MissingDependencyError("anthropic", "anthropic", "the memory tool adapter") from exc

    class AnthropicMemoryTool(BetaAbstractMemoryTool):
        """The SDK's memory tool, delegating every command to a :class:`MemoryTool`.
        An error result is raised as the SDK's ``ToolError``, which the tool runner
        sends back with ``is_error: true``."""

        def __init__(self, memory: MemoryTool, *, cache_control: Any = None) -> None:
            if not isinstance(memory, MemoryTool):
                raise UsageError(f"memory must be a MemoryTool, got {type(memory).__name__}")
            super().__init__(cache_control=cache_control)
            self.memory = memory

        def _send(self, command: object) -> str:
            if not isinstance(command, Mapping):
                to_dict = getattr(command, "to_dict", None)
                command = to_dict(exclude_none=True) if callable(to_dict) else command
            result = self.memory.execute(command)  # type: ignore[arg-type]
            if result.is_error:
                raise ToolError(result.text)
            return result.text

        def call(self, input: object) -> str:
            # the raw input, so missing and unknown parameters are reported as such
            return self._send(input)

        def view(self, command: Any) -> str:
            return self._send(command)

        def create(self, command: Any) -> str:
            return self._send(command)

        def str_replace(self, command: Any) -> str:
            return self._send(command)

        def insert(self, command: Any) -> str:
            return self._send(command)

        def delete(self, command: Any) -> str:
            return self._send(command)

        def rename(self, command: Any) -> str:
            return self._send(command)

    AnthropicMemoryTool.__module__ = __name__
    return AnthropicMemoryTool


def __getattr__(name: str) -> Any:
    if name == "AnthropicMemoryTool":
        return _adapter_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
