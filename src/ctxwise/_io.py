"""Reading user-supplied text files and writing output files safely.

:func:`read_user_file` is the one way ctxwise reads a file the user named (a
config, a spec, a source or section file, a transcript, a CLI input): it opens
the path without blocking and refuses anything but a regular file (a FIFO, a
character or block device such as ``/dev/zero`` or ``/dev/urandom``, a socket,
``/dev/stdin`` when standard input is a pipe or a terminal) before reading a byte,
so a read never waits for a writer nor grows without bound; with ``max_bytes`` a
file larger than that is refused too (reading stops one byte past the cap, so a
file that grows while it is read is bounded as well).

:func:`read_text_file` reads through it, gives one clear error for every way a
read fails and decodes UTF-8 (with or without a byte order mark) and, when a byte
order mark says so, UTF-16 and UTF-32 in either byte order. A binary file (NUL
bytes in its first 8 KiB) or bytes that are not text in the encoding read are
refused from the first chunk read, before the rest of the file is.

:func:`parse_json` is the one way ctxwise parses JSON it did not write (a file, a
transcript line, a tool call's arguments, a hook payload, a model's reply): an
integer longer than Python converts (``sys.get_int_max_str_digits()``, 4,300 digits
unless ``PYTHONINTMAXSTRDIGITS`` says otherwise) is a
:class:`json.JSONDecodeError` at its place, like any other JSON that does not
decode, so every caller's own handler turns it into its typed error.

:func:`write_output` writes a file the user named so that an error never leaves
it half-written and never replaces what is not a regular file:

- ``-`` is standard output;
- a regular file, or a new one, is written to a temporary file in the same
  folder, flushed to disk and renamed over it (``os.replace``). A new file gets
  the mode ``0o666`` less the umask, like any file a program creates (the
  temporary file is created with that mode, so the kernel applies the umask and
  the umask is never read or changed); an existing file keeps its mode (and, when
  run as root, its owner);
- a symbolic link is followed: its final target is replaced the same way and the
  link stays a link;
- a FIFO, a character or block device, a socket, or a descriptor alias
  (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``) is opened and written in
  place, never replaced;
- a directory, or a path whose folder does not exist, raises
  :class:`~ctxwise.errors.OutputError` before anything is written.

:func:`replace_file` is the atomic replace underneath, for files the library owns
(the memory store's ANN index): the same temporary file and rename, the path
itself replaced, errors left as :class:`OSError`.

Temporary files never outlive a run. Every temporary file or folder ctxwise makes is
named by :func:`temporary_name` (``.<name>.ctxwise-<8 hex digits>.tmp``), and every
error path removes it. A process killed outright (``SIGKILL``, a power cut) runs no
cleanup, so the next ctxwise write in that folder (the first one in a process, and
again once :data:`STALE_TEMP_AGE` has passed) calls :func:`sweep_temporaries`: it
removes the files and folders of that name whose last change is more than
:data:`STALE_TEMP_AGE` (one hour) old by an injectable clock, and nothing else.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import json
import os
import re
import secrets
import shutil
import stat
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxwise.errors import OutputError, UsageError

__all__ = [
    "STALE_TEMP_AGE",
    "STDOUT",
    "decode_text",
    "format_size",
    "is_stdout",
    "parse_json",
    "read_text_file",
    "read_user_file",
    "replace_file",
    "same_file",
    "sweep_stale_once",
    "sweep_temporaries",
    "temporary_name",
    "write_output",
]

STDOUT = "-"

# Longest first: the UTF-32-LE mark starts with the UTF-16-LE one.
_BOMS: tuple[tuple[bytes, str, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32-LE"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32-BE"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16-LE"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16-BE"),
)


def decode_text(data: bytes) -> tuple[str, str | None]:
    """The text of ``data`` and the encoding its byte order mark names (``None``:
    no mark, read as UTF-8). Raises ``UnicodeDecodeError`` (byte offsets count
    from the start of ``data``) or ``ValueError`` for NUL bytes in unmarked data."""
    for bom, codec, name in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(codec), name
            except UnicodeDecodeError as exc:
                raise UnicodeDecodeError(
                    exc.encoding, data, exc.start + len(bom), exc.end + len(bom), exc.reason
                ) from None
    if _binary(data):
        raise ValueError("contains NUL bytes")
    return data.decode("utf-8"), None


_PROBE = 8192
"""How many leading bytes of unmarked data are looked at for NUL bytes."""


def _binary(data: bytes) -> bool:
    """Whether unmarked data is binary: a NUL byte among its first bytes."""
    return b"\x00" in data[:_PROBE]


def _check_start(data: bytes) -> None:
    """Raise what :func:`decode_text` would for ``data``, the first chunk of a file,
    when it already shows the file is binary or not text: NUL bytes (``ValueError``)
    or bytes that do not decode (``UnicodeDecodeError``; a character cut at the end
    of the chunk is not an error)."""
    for bom, codec, _ in _BOMS:
        if data.startswith(bom):
            try:
                codecs.getincrementaldecoder(codec)().decode(data[len(bom) :], final=False)
            except UnicodeDecodeError as exc:
                raise UnicodeDecodeError(
                    exc.encoding, data, exc.start + len(bom), exc.end + len(bom), exc.reason
                ) from None
            return
    if _binary(data):
        raise ValueError("contains NUL bytes")
    codecs.getincrementaldecoder("utf-8")().decode(data, final=False)


_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once instead of waiting for a writer
    | getattr(os, "O_NOCTTY", 0)  # a terminal never becomes the controlling one
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)  # Windows: no newline translation
)
_READ_CHUNK = 1 << 20


def _kind(mode: int) -> str:
    """What a file that is not regular is, in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _check_regular(
    name: str, mode: int, what: str, error: Callable[[str, str], UsageError]
) -> None:
    if stat.S_ISDIR(mode):
        raise error(name, f"is a directory, not {what}")
    if not stat.S_ISREG(mode):
        raise error(name, f"is {_kind(mode)}, not a regular file: not read as {what}")


def format_size(n: int) -> str:
    """A byte count as people read it: ``512 bytes``, ``1.5 MiB``, ``2.0 GiB``."""
    if n >= 2**30:
        return f"{n / 2**30:.1f} GiB"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def _too_large(what: str, size: int | None, max_bytes: int, raise_with: str | None) -> str:
    """The refusal of a file over ``max_bytes``, in one line: what it was read as, its
    size when known (``None``: it grew past the limit while it was read), the limit
    and the setting that raises it."""
    was = "" if size is None else f"{format_size(size)}, "
    hint = f"; raise it with {raise_with}" if raise_with else ""
    return f"too large for {what}: {was}over the limit of {format_size(max_bytes)}{hint}"


def read_user_file(
    path: str | Path,
    what: str,
    error: Callable[[str, str], UsageError],
    *,
    max_bytes: int | None = None,
    raise_with: str | None = None,
) -> bytes:
    """The bytes of the regular file ``path``, a file the user named as ``what``
    (``"a TOML config"``); ``error(source, detail)`` builds the exception, with
    ``source`` the path, for a missing or unreadable file, a directory, anything
    that is not a regular file (a FIFO, a device, a socket: refused before any read,
    see the module docstring) and, with ``max_bytes``, a file larger than that:
    refused from its size before a byte is read, and again if it grows past it while
    it is read. ``raise_with`` names the setting that raises the limit (``"--max-input-bytes"``);
    the refusal says so.

    The path is opened without blocking and checked on the open descriptor, so a
    FIFO swapped in after a check cannot make the read wait. ``-`` is a file named
    ``-`` here: a caller that documents ``-`` as standard input reads it itself.
    """
    return _read_file(path, what, error, max_bytes, raise_with, None)


def _read_file(
    path: str | Path,
    what: str,
    error: Callable[[str, str], UsageError],
    max_bytes: int | None,
    raise_with: str | None,
    check_start: Callable[[bytes], None] | None,
) -> bytes:
    """:func:`read_user_file`, with ``check_start`` called on the first chunk read
    (before the rest is): an exception it raises ends the read and is raised."""
    p = Path(path)
    name = str(p)
    try:  # a device is not even opened (opening some has effects: a tape rewinds)
        first: os.stat_result | None = os.stat(p)
    except (OSError, ValueError):  # the open below says what is wrong
        first = None
    if first is not None:
        _check_regular(name, first.st_mode, what, error)
    try:
        fd = os.open(p, _OPEN_FLAGS)
    except FileNotFoundError:
        raise error(name, "no such file") from None
    except IsADirectoryError:
        raise error(name, f"is a directory, not {what}") from None
    except OSError as exc:
        if os.path.isdir(p):  # Windows opens no folder: say what it is
            raise error(name, f"is a directory, not {what}") from None
        raise error(name, f"cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:  # e.g. a NUL byte in the path
        raise error(repr(name), f"invalid path: {exc}") from None
    try:
        st = os.fstat(fd)  # again on the descriptor: the path may have been swapped
        _check_regular(name, st.st_mode, what, error)
        if max_bytes is not None and st.st_size > max_bytes:
            raise error(name, _too_large(what, st.st_size, max_bytes, raise_with))
        chunks: list[bytes] = []
        total = 0
        limit = None if max_bytes is None else max_bytes + 1
        while True:
            want = _READ_CHUNK if limit is None else min(_READ_CHUNK, limit - total)
            if want <= 0:
                break
            chunk = os.read(fd, want)
            if not chunk:
                break
            if not chunks and check_start is not None:
                check_start(chunk)
            chunks.append(chunk)
            total += len(chunk)
        if max_bytes is not None and total > max_bytes:  # it grew while it was read
            raise error(name, _too_large(what, None, max_bytes, raise_with))
        return b"".join(chunks)
    except OSError as exc:
        raise error(name, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_text_file(
    path: str | Path,
    what: str,
    error: Callable[[str, str], UsageError],
    *,
    max_bytes: int | None = None,
    raise_with: str | None = None,
) -> str:
    """The text of ``path``, read by :func:`read_user_file` (so only a regular file,
    at most ``max_bytes`` when given, the refusal naming ``raise_with``);
    ``error(source, detail)`` builds the exception for a missing file, a directory, a
    FIFO or device, an unreadable or binary file, or text that does not decode.
    UTF-8 is read with or without a byte order mark; UTF-16 and UTF-32 (LE or BE)
    are read when their byte order mark says so. A binary file, or one whose first
    chunk is not text, is refused from that chunk, before the rest is read."""
    p = Path(path)
    try:
        data = _read_file(p, what, error, max_bytes, raise_with, _check_start)
        text, _ = decode_text(data)
    except ValueError as exc:
        if isinstance(exc, UnicodeDecodeError):
            enc = "UTF-8" if exc.encoding == "utf-8" else exc.encoding.upper()
            raise error(str(p), f"not {enc} text (byte {exc.start}: {exc.reason})") from None
        raise error(str(p), f"binary file (contains NUL bytes), not {what}") from None
    return text


# -- parsing --------------------------------------------------------------------


def _at(text: str, literal: str) -> int:
    """Where the number ``literal`` is in ``text`` (best effort: its first place
    not inside a longer run of digits, else 0)."""
    found = re.search(rf"(?<![0-9]){re.escape(literal)}(?![0-9])", text)
    return found.start() if found else 0


def parse_json(text: str | bytes, **options: Any) -> Any:
    """``json.loads(text, **options)`` for JSON ctxwise did not write (see the module
    docstring). Raises :class:`json.JSONDecodeError` for text that is not JSON and for
    an integer of more digits than ``sys.get_int_max_str_digits()`` (Python's own
    limit on converting one; the message names it and ``PYTHONINTMAXSTRDIGITS``, the
    setting that raises it), and :class:`RecursionError` for JSON nested past the
    decoder."""
    too_long: list[str] = []

    def parse_int(digits: str) -> int:
        try:
            return int(digits)
        except ValueError:  # more digits than sys.get_int_max_str_digits()
            too_long.append(digits)
            return 0  # the document is refused below, once it has been read

    value = json.loads(text, parse_int=parse_int, **options)
    if too_long:
        literal = too_long[0]
        digits = len(literal.lstrip("-"))
        limit = sys.get_int_max_str_digits()
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError(
            f"an integer of {digits:,} digits, over Python's limit of {limit:,} "
            "(raise it with PYTHONINTMAXSTRDIGITS)",
            doc,
            _at(doc, literal),
        )
    return value


# -- writing --------------------------------------------------------------------


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether writing to ``b`` would overwrite ``a`` (symbolic links resolved;
    ``-``, standard output, is never a file)."""
    if os.fspath(a) == STDOUT or os.fspath(b) == STDOUT:
        return False
    try:
        if os.path.realpath(a) == os.path.realpath(b):
            return True
        return os.path.exists(b) and os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def is_stdout(path: str | Path) -> bool:
    """Whether writing to ``path`` writes to this process's standard output: ``-``,
    or a name of the file or pipe it is (``/dev/stdout``, ``/dev/fd/1``, the file it
    is redirected to, ...). A command that writes its output there sends its report
    to standard error, so the two do not mix."""
    name = os.fspath(path)
    if name == STDOUT:
        return True
    try:
        mine, theirs = os.fstat(1), os.stat(name)
    except (OSError, ValueError):
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)


_FD_ALIAS = re.compile(r"^/(?:proc/(?:self|thread-self|\d+)/fd|dev/fd)/\d+$")
_MAX_LINKS = 40  # as the kernel's limit on nested symbolic links


def _is_fd_alias(path: str) -> bool:
    return path in ("/dev/stdout", "/dev/stderr") or bool(_FD_ALIAS.match(path))


def _through_fd_alias(path: str) -> bool:
    """Whether ``path`` or a symbolic link it leads through is a descriptor alias."""
    current = os.path.abspath(path)
    for _ in range(_MAX_LINKS):
        if _is_fd_alias(current):
            return True
        try:
            link = os.readlink(current)
        except OSError:  # not a link (or missing): the end of the chain
            return False
        current = os.path.join(os.path.dirname(current), link)
        current = os.path.join(
            os.path.realpath(os.path.dirname(current)), os.path.basename(current)
        )
    raise OutputError(path, "too many levels of symbolic links")


def write_output(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` safely (see the module docstring); ``-`` is stdout.

    Raises:
        OutputError: ``path`` is a directory, its folder does not exist, or the
            write failed; the original file is then unchanged and no temporary
            file is left behind.
    """
    name = os.fspath(path)
    if name == STDOUT:
        _write_stdout(data)
        return
    if not name or "\x00" in name:
        raise OutputError(repr(name), "invalid path")
    alias = _through_fd_alias(name)
    try:
        st: os.stat_result | None = os.stat(name)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(name, exc.strerror or str(exc)) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(name, "is a directory")
    if st is not None and (alias or not stat.S_ISREG(st.st_mode)):
        _write_in_place(name, data, st)
        return
    # a symbolic link: replace its final target, the link stays
    _replace_atomically(name, os.path.realpath(name), data, st)


def _write_stdout(data: bytes) -> None:
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is not None:
        buffer.write(data)
        buffer.flush()
    else:  # a text-only stream (some test harnesses)
        sys.stdout.write(data.decode("utf-8", "surrogateescape"))
        sys.stdout.flush()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def fill_temporary(fd: int, data: bytes, st: os.stat_result | None) -> None:
    """Fill a new temporary file that will replace one: the replaced file's mode
    (and, as root, owner) from its status ``st`` when there was one, then ``data``,
    flushed to disk."""
    if st is not None:
        os.fchmod(fd, stat.S_IMODE(st.st_mode))
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            with contextlib.suppress(OSError):
                os.fchown(fd, st.st_uid, st.st_gid)
    _write_all(fd, data)
    os.fsync(fd)


def _write_in_place(name: str, data: bytes, st: os.stat_result) -> None:
    """A FIFO, device, socket or descriptor alias: open it and write, never replace.
    A descriptor alias of a regular file (``/dev/stdout`` redirected to a file) is
    appended to, as the shell's own redirection would be written."""
    flags = os.O_WRONLY | getattr(os, "O_NOCTTY", 0)
    if stat.S_ISREG(st.st_mode):
        flags |= os.O_APPEND
    try:
        fd = os.open(name, flags)
    except OSError as exc:
        raise OutputError(name, exc.strerror or str(exc)) from None
    try:
        _write_all(fd, data)
    except OSError as exc:
        raise OutputError(name, exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def _replace_atomically(name: str, target: str, data: bytes, st: os.stat_result | None) -> None:
    folder = os.path.dirname(target) or "."
    if not os.path.isdir(folder):
        raise OutputError(name, f"folder {folder} does not exist")
    try:
        replace_file(target, data, st)
    except OSError as exc:
        raise OutputError(name, exc.strerror or str(exc)) from None


def replace_file(
    target: str | Path,
    data: bytes,
    st: os.stat_result | None = None,
    *,
    clock: Callable[[], float] = time.time,
) -> None:
    """Replace ``target`` by ``data`` atomically: a temporary file in its folder,
    flushed to disk and renamed over it (``os.replace``), then the folder synced.

    The one atomic writer behind :func:`write_output`, for files the library owns
    (a cache, an index) rather than one a user named: ``target`` itself is replaced
    (a symbolic link there is replaced, not followed) and errors are the plain
    :class:`OSError`. ``st`` is the existing file's status, whose mode (and, as
    root, owner) the new file keeps; with None the new file gets ``0o666`` less the
    umask. Whatever fails, ``target`` is unchanged and no temporary file is left.
    Stale temporaries in the folder are swept first (:func:`sweep_stale_once`, ages
    by ``clock``, seconds since the epoch), with those an earlier version left for
    this same file (``.<name>.<8 hex digits>.tmp``).
    """
    target = os.fspath(target)
    folder = os.path.dirname(target) or "."
    base = os.path.basename(target)
    sweep_stale_once(folder, clock=clock, also=re.compile(re.escape(f".{base}.") + _LEGACY_HEX))
    # a new file: 0o666, the kernel applies the umask; an existing one: set below
    create_mode = 0o666 if st is None else 0o600
    tmp = ""
    fd = -1
    try:
        for _ in range(100):
            candidate = os.path.join(folder, temporary_name(base))
            try:
                fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, create_mode)
            except FileExistsError:
                continue
            tmp = candidate
            break
        else:
            raise FileExistsError(errno.EEXIST, "cannot create a temporary file", folder)
        fill_temporary(fd, data, st)
        os.close(fd)
        fd = -1
        os.replace(tmp, target)
        tmp = ""
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    _fsync_folder(folder)


# -- temporary files ----------------------------------------------------------------

STALE_TEMP_AGE = 3600.0
"""Seconds after its last change that a temporary file or folder ctxwise left behind
is stale (one hour). A writer killed outright leaves its temporary behind; the next
ctxwise write in that folder removes it once it is this old. A live writer changes
its file all the time (and a replace takes well under a second), so no temporary of
a run still going is this old."""

_TEMP_NAME = re.compile(r"\.(?:.*\.)?ctxwise-[0-9a-f]{8}\.tmp", re.DOTALL)
_LEGACY_HEX = r"[0-9a-f]{8}\.tmp"
_TEMP_BASE_BYTES = 200
"""The most bytes of the name a temporary is named after: the whole name must fit
the 255 bytes a file system allows."""
_SWEPT_FOLDERS = 4096
_swept: dict[tuple[int, int], float] = {}
_swept_lock = threading.Lock()


def temporary_name(base: str = "") -> str:
    """A new name for a temporary file or folder ctxwise writes in a folder:
    ``.<base>.ctxwise-<8 hex digits>.tmp`` (``base``, the name it will become, cut
    to 200 bytes), or ``.ctxwise-<8 hex digits>.tmp`` without one. The pattern is
    how :func:`sweep_temporaries` tells ctxwise's own temporaries from any other
    file; the caller creates it exclusively (``O_EXCL``) and draws another name when
    it exists."""
    tag = f"ctxwise-{secrets.token_hex(4)}.tmp"
    if not base:
        return f".{tag}"
    base = base[:_TEMP_BASE_BYTES]
    while len(os.fsencode(base)) > _TEMP_BASE_BYTES:
        base = base[:-1]
    return f".{base}.{tag}"


def sweep_temporaries(
    folder: str | os.PathLike[str] | int,
    *,
    clock: Callable[[], float] = time.time,
    max_age: float = STALE_TEMP_AGE,
    also: re.Pattern[str] | None = None,
) -> list[str]:
    """Remove ctxwise's stale temporaries in ``folder`` (a path, or an open folder's
    descriptor) and return their names.

    Removed: each regular file or folder (a link is never followed) named as
    :func:`temporary_name` names them, or as ``also`` matches whole (the names an
    earlier version used there), whose last change is more than ``max_age``
    seconds before ``clock()`` (seconds since the epoch). Anything else is left,
    and so is whatever cannot be read or removed: a sweep never fails.
    """
    now = clock()
    removed: list[str] = []
    dir_fd = folder if isinstance(folder, int) else None
    where = "" if isinstance(folder, int) else os.fspath(folder)
    try:
        with os.scandir(folder) as entries:
            found = [e.name for e in entries]
    except OSError:
        return removed
    for name in found:
        if not (_TEMP_NAME.fullmatch(name) or (also is not None and also.fullmatch(name))):
            continue
        path = name if dir_fd is not None else os.path.join(where, name)
        try:
            st = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
            if not now - st.st_mtime > max_age:
                continue
            if stat.S_ISREG(st.st_mode):
                os.unlink(path, dir_fd=dir_fd)
            elif stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path, dir_fd=dir_fd)
            else:
                continue
        except (OSError, NotImplementedError):  # gone meanwhile, not ours to remove, …
            continue
        removed.append(name)
    return removed


def sweep_stale_once(
    folder: str | os.PathLike[str] | int,
    *,
    clock: Callable[[], float] = time.time,
    also: re.Pattern[str] | None = None,
) -> list[str]:
    """:func:`sweep_temporaries` on ``folder`` (a path or an open folder's
    descriptor) unless this process swept it less than :data:`STALE_TEMP_AGE`
    seconds ago (by ``clock``): what a ctxwise write calls before it makes a
    temporary there, so a folder written to often is listed once an hour, not on
    every write."""
    try:
        st = os.fstat(folder) if isinstance(folder, int) else os.stat(folder)
    except OSError:
        return []
    key = (st.st_dev, st.st_ino)
    now = clock()
    with _swept_lock:
        last = _swept.get(key)
        if last is not None and 0 <= now - last < STALE_TEMP_AGE:
            return []
        if len(_swept) >= _SWEPT_FOLDERS:
            _swept.clear()
        _swept[key] = now
    return sweep_temporaries(folder, clock=lambda: now, also=also)


def _fsync_folder(folder: str) -> None:
    """Make the rename durable (best effort: not every platform can open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
