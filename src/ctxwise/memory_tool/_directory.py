"""Memory files on disk, confined to a root folder (:class:`DirectoryMemory`)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path

from ctxwise._io import fill_temporary, sweep_stale_once, temporary_name
from ctxwise.errors import UsageError
from ctxwise.memory_tool._backend import Entry, MemoryBackend
from ctxwise.memory_tool._paths import ROOT, Kind, Parts, addressable, show

__all__ = ["DirectoryMemory"]

_LEGACY_TMP = re.compile(r"\.tmp-[0-9a-f]{16}")
"""The temporary files of earlier versions, swept like today's."""


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
            f"Error: {show(parts)} leads outside {ROOT} through a symbolic link, so it is "
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
        raise UsageError(f"Error: {show(parts)} is not a regular file or folder.")

    def read(self, parts: Parts, limit: int) -> str:
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(self._real(parts), flags)
        with os.fdopen(fd, "rb") as fh:
            self._confined(fd, parts)
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise UsageError(f"Error: {show(parts)} is not a regular file.")
            data = fh.read(limit + 1)
        if len(data) > limit:
            raise UsageError(
                f"Error: {show(parts)} is over the {limit:,}-byte limit for a memory file and "
                f"cannot be read; delete it or ask the user to shorten it."
            )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"Error: {show(parts)} is not UTF-8 text.") from None

    def _check_parents(self, parts: Parts) -> None:
        for i in range(1, len(parts)):
            if self.kind(parts[:i]) == "file":
                raise UsageError(
                    f"Error: {show(parts[:i])} is a file, so {show(parts)} cannot be under it."
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

    def listing(self, parts: Parts, depth: int) -> list[Entry]:
        found: list[Entry] = []

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
                if not addressable(entry.name):
                    continue  # hidden, or a name no memory path can reach
                sub = (*prefix, entry.name)
                try:
                    st = os.stat(self._real((*parts, *sub)))
                except (UsageError, OSError):
                    continue  # a link out of the root, or gone meanwhile
                if stat.S_ISDIR(st.st_mode):
                    found.append(Entry(sub, True, st.st_size))
                    if level < depth:
                        walk((*parts, *sub), sub, level + 1)
                elif stat.S_ISREG(st.st_mode):
                    found.append(Entry(sub, False, st.st_size))

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
                    raise UsageError(f"Error: the destination {show(new)} already exists.")
                frm, frm_fd = source.at(name)
                os.rename(frm, to, src_dir_fd=frm_fd, dst_dir_fd=to_fd)
