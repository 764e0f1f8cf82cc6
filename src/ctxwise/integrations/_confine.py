"""File access confined to configured folders: what the MCP server reads and writes.

A client of the MCP server names paths on the server's machine. Everything it may
reach goes through this module:

- :class:`Roots` holds the folders the operator allowed (``ctxwise mcp --root``),
  resolved once (symbolic links followed) when the server starts. A path is inside
  them when its resolved form (``os.path.realpath``) is one of them or below one.
  The client's own roots (the MCP roots capability), when it offers them, only
  narrow that set: a path must then be inside a configured root *and* inside one of
  the client's (:meth:`Roots.check` with ``client``). With no configured root every
  path is refused.
- :func:`read_checked` opens a file for reading without following a symbolic link
  anywhere below the root: the folders from the root down are opened one by one
  relative to the previous one (``dir_fd``), each with ``O_NOFOLLOW``, and the file
  last, so a folder or the file swapped for a link after the check makes the open
  fail instead of leaving the root. Anything but a regular file (a FIFO, a device,
  a socket) is refused before it is opened; the open descriptor is checked again
  (``fstat``): a regular file, at most ``max_bytes`` (refused from its size before a
  byte is read). Its first bytes are sniffed (text, starting with ``{`` or ``[`` as
  JSON and JSONL do) before the rest is read, and the read stops one byte past the
  cap, so a file growing while it is read is bounded too.
- :func:`create_exclusive` writes a new file the same way: its folder opened down
  from the root without following links, the file created with
  ``O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW`` (mode ``0o600``), so an existing
  file, or a symbolic link planted at the name, is refused by the kernel itself and
  never replaced; the data is written in full and flushed to disk, and a failed
  write removes the file this call created (and nothing else).

It needs a system whose ``os.open`` takes ``dir_fd`` and ``O_NOFOLLOW`` (Linux,
macOS, the BSDs); elsewhere every path is refused.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from ctxwise._io import format_size
from ctxwise.errors import OutputError, UsageError

__all__ = [
    "MAX_FILE_BYTES",
    "SNIFF_BYTES",
    "Roots",
    "check_new",
    "create_exclusive",
    "file_uri_path",
    "read_checked",
    "sniff",
]

MAX_FILE_BYTES = 16 * 2**20
"""The largest file :func:`read_checked` reads by default (16 MiB)."""

SNIFF_BYTES = 4096
"""How many leading bytes are sniffed before the rest of a file is read."""

_SUPPORTED = (
    os.open in os.supports_dir_fd
    and os.stat in os.supports_dir_fd
    and os.unlink in os.supports_dir_fd
    and hasattr(os, "O_NOFOLLOW")
    and hasattr(os, "O_DIRECTORY")
)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | _CLOEXEC
_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in opens at once, then is refused
    | getattr(os, "O_NOCTTY", 0)
    | _CLOEXEC
)
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | _CLOEXEC
_CHUNK = 1 << 20
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def _inside(path: str, root: str) -> bool:
    """Whether the resolved ``path`` is ``root`` or below it (both absolute, resolved)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def file_uri_path(uri: str) -> str | None:
    """The local path a ``file://`` URI names (``None`` for another scheme or host)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    path = unquote(parsed.path)
    return path if os.path.isabs(path) and "\x00" not in path else None


@dataclass(frozen=True, slots=True)
class Roots:
    """The folders files may be read from and written to: absolute, symbolic links
    resolved, longest first (see the module docstring)."""

    paths: tuple[str, ...]

    @classmethod
    def of(cls, folders: Iterable[str | Path]) -> Roots:
        """The roots ``folders`` name (resolved now). Raises
        :class:`~ctxwise.errors.UsageError` for one that is not an existing folder."""
        resolved: set[str] = set()
        for folder in folders:
            real = os.path.realpath(os.path.abspath(folder))
            if not os.path.isdir(real):
                raise UsageError(f"root {str(folder)!r} is not an existing folder")
            resolved.add(real)
        return cls(tuple(sorted(resolved, key=lambda p: (-len(p), p))))

    def _root_of(self, real: str) -> str | None:
        return next((r for r in self.paths if _inside(real, r)), None)

    def check(self, path: str | Path, client: Sequence[str] | None = None) -> tuple[str, str]:
        """``(root, real)``: the resolved ``path`` (relative to the working folder) and
        the configured root it is in. ``client`` (resolved paths) are the client's
        roots when it offers them: the path must be inside one of those as well.

        Raises:
            UsageError: no root is configured, or the path is outside the roots.
        """
        name = str(path)
        if not _SUPPORTED:
            raise UsageError(
                f"{name}: file access is refused on this system (it needs os.open with "
                "dir_fd and O_NOFOLLOW)"
            )
        if not self.paths:
            raise UsageError(
                f"{name}: this server reads and writes no files (start it with "
                "--root FOLDER to allow a folder)"
            )
        if "\x00" in name:
            raise UsageError(f"{name!r}: invalid path (a NUL byte)")
        real = os.path.realpath(os.path.abspath(name))
        root = self._root_of(real)
        if root is None:
            raise UsageError(
                f"{name}: outside the folders this server may read and write (its --root "
                "folders, symbolic links resolved); nothing was read or written"
            )
        if client is not None and not any(_inside(real, c) for c in client):
            raise UsageError(
                f"{name}: outside the roots the client offered; nothing was read or written"
            )
        return root, real


def _walk(root: str, folder: str, name: str) -> int:
    """A descriptor of ``folder`` (resolved, inside ``root``), opened from ``root``
    one folder at a time without following a symbolic link."""
    rel = os.path.relpath(folder, root)
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in [] if rel == "." else rel.split(os.sep):
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UsageError(
                f"{name}: a folder on its path changed into a symbolic link or a file "
                "while it was checked; refused"
            ) from None
        if exc.errno == errno.ENOENT:
            raise UsageError(f"{name}: no such file (its folder does not exist)") from None
        raise UsageError(f"{name}: cannot open its folder: {exc.strerror or exc}") from None
    return fd


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def sniff(head: bytes) -> str | None:
    """Why ``head``, the first bytes of a file, is not JSON or JSONL text (``None``:
    it may be): empty, NUL bytes, bytes that do not decode, or a first character
    other than ``{`` or ``[``."""
    codec = "utf-8"
    body = head
    marked = False
    for bom, name in _BOMS:
        if head.startswith(bom):
            codec, body, marked = name, head[len(bom) :], True
            break
    if not marked and b"\x00" in body:
        return "binary (it contains NUL bytes)"
    try:
        text = codecs.getincrementaldecoder(codec)().decode(body, final=False)
    except UnicodeDecodeError as exc:
        return f"not text (byte {exc.start}: {exc.reason})"
    stripped = text.lstrip()
    if not stripped:
        return "empty" if len(head) < SNIFF_BYTES else "it starts with blank space only"
    if stripped[0] not in "{[":
        return f"it starts with {stripped[:12]!r}, where JSON or JSONL starts with {{ or ["
    return None


def read_checked(
    path: str | Path,
    roots: Roots,
    *,
    client: Sequence[str] | None = None,
    max_bytes: int = MAX_FILE_BYTES,
    what: str = "a transcript (JSON or JSONL)",
) -> tuple[str, bytes]:
    """``(real, data)``: the resolved path and bytes of the regular file ``path``,
    read as the module docstring says (inside ``roots`` and ``client``'s roots, no
    symbolic link followed below the root, at most ``max_bytes``, sniffed first).

    Raises:
        UsageError: the path is outside the roots, missing, not a regular file, over
            ``max_bytes``, does not look like ``what``, or cannot be read.
    """
    root, real = roots.check(path, client)
    name = str(path)
    folder, base = os.path.split(real)
    if real == root or not base:
        raise UsageError(f"{name}: is a directory, not {what}")
    dfd = _walk(root, folder, name)
    try:
        try:
            before = os.stat(base, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            raise UsageError(f"{name}: no such file") from None
        except OSError as exc:
            raise UsageError(f"{name}: cannot read: {exc.strerror or exc}") from None
        if not stat.S_ISREG(before.st_mode):  # a device is not even opened
            raise UsageError(f"{name}: is {_kind(before.st_mode)}, not {what}")
        try:
            fd = os.open(base, _READ_FLAGS, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UsageError(
                    f"{name}: changed into a symbolic link while it was checked; refused"
                ) from None
            raise UsageError(f"{name}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(dfd)
    try:
        return real, _read_fd(fd, name, what, max_bytes, before)
    finally:
        os.close(fd)


def _read_fd(fd: int, name: str, what: str, max_bytes: int, before: os.stat_result) -> bytes:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{name}: is {_kind(st.st_mode)}, not {what}")
    if not _same(st, before):
        raise UsageError(f"{name}: was replaced while it was checked; refused")
    if st.st_size > max_bytes:
        raise UsageError(
            f"{name}: too large ({format_size(st.st_size)}, over this server's limit of "
            f"{format_size(max_bytes)}, --max-file-bytes); nothing was read"
        )
    chunks: list[bytes] = []
    total = 0
    try:
        head = b""
        while len(head) < SNIFF_BYTES:  # a short read is not the end of the file
            part = os.read(fd, SNIFF_BYTES - len(head))
            if not part:
                break
            head += part
        why = sniff(head)
        if why is not None:
            raise UsageError(f"{name}: does not look like {what}: {why}; not read further")
        chunks.append(head)
        total = len(head)
        while total <= max_bytes:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise UsageError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if total > max_bytes:
        raise UsageError(
            f"{name}: grew past this server's limit of {format_size(max_bytes)} "
            "(--max-file-bytes) while it was read; refused"
        )
    return b"".join(chunks)


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _target(path: str | Path, roots: Roots, client: Sequence[str] | None) -> tuple[str, str]:
    """``(root, real)`` for a file to create at ``path``: its folder resolved and
    inside the roots, existing; ``real`` is that folder joined with the name."""
    name = str(path)
    if "\x00" in name:
        raise UsageError(f"{name!r}: invalid path (a NUL byte)")
    folder, base = os.path.split(os.path.abspath(name))
    if not base or base in (".", "..") or name.endswith(os.sep):
        raise OutputError(name, "names a folder, not a new file")
    root, real_folder = roots.check(folder, client)
    if not os.path.isdir(real_folder):
        raise OutputError(name, "its folder does not exist")
    return root, os.path.join(real_folder, base)


def check_new(path: str | Path, roots: Roots, *, client: Sequence[str] | None = None) -> str:
    """The resolved path of a new file at ``path``: its folder inside the roots and
    nothing at its name yet. A check before slow work: the exclusive create of
    :func:`create_exclusive` is what decides.

    Raises:
        UsageError: the folder is outside the roots.
        OutputError: the name is taken (a file, a link, anything) or the folder is
            missing.
    """
    real = _target(path, roots, client)[1]
    if os.path.lexists(real):
        raise OutputError(str(path), _EXISTS)
    return real


_EXISTS = "exists: only a new file is written (nothing was written)"


def create_exclusive(
    path: str | Path, data: bytes, roots: Roots, *, client: Sequence[str] | None = None
) -> str:
    """Write ``data`` to the new file ``path`` (see the module docstring) and return
    its resolved path. Whatever is at the name when the file is created (a file, a
    symbolic link, anything) makes the create fail: nothing is replaced.

    Raises:
        UsageError: the folder is outside the roots, or changed into a link.
        OutputError: the name exists, the folder is missing, or the write failed
            (the file this call created is removed).
    """
    name = str(path)
    root, real = _target(path, roots, client)
    folder, base = os.path.split(real)
    dfd = _walk(root, folder, name)
    try:
        try:
            fd = os.open(base, _CREATE_FLAGS, 0o600, dir_fd=dfd)
        except FileExistsError:
            raise OutputError(name, _EXISTS) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a link at the name, as some systems say it
                raise OutputError(name, _EXISTS) from None
            raise OutputError(name, exc.strerror or str(exc)) from None
        try:
            _fill(fd, base, dfd, data, name)
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):  # some file systems cannot flush a folder
            os.fsync(dfd)
    finally:
        os.close(dfd)
    return real


def _fill(fd: int, base: str, dfd: int, data: bytes, name: str) -> None:
    """Write ``data`` in full to the new file ``fd`` and flush it to disk; on any
    failure remove the file (``base`` in the folder ``dfd``) if it is still this one."""
    mine = os.fstat(fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException as exc:
        try:
            if _same(os.stat(base, dir_fd=dfd, follow_symlinks=False), mine):
                os.unlink(base, dir_fd=dfd)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OutputError(name, f"the write failed: {exc.strerror or exc}") from None
        raise
