"""The ``pre-compact`` archive: copies of a session's transcript, never replaced,
swept of stale temporaries and kept within a size cap (see
:mod:`ctxwise.integrations.claude_code_hooks`)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from ctxwise._io import (
    sweep_stale_once,
    temporary_name,
)
from ctxwise.errors import FormatError, UsageError

__all__ = [
    "Clock",
    "archive_transcript",
    "default_archive_dir",
    "latest_archive",
    "prune_archives",
    "sweep_archive",
    "utc_now",
]

Clock = Callable[[], datetime]

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def utc_now() -> datetime:
    return datetime.now(UTC)


def default_archive_dir() -> Path:
    """``~/.ctxwise/archive``."""
    return Path.home() / ".ctxwise" / "archive"


def _safe_name(session_id: str) -> str:
    name = _SAFE.sub("_", session_id.strip())[:200]
    return name if name.strip(".") else "unknown-session"


_ARCHIVE_NAME = re.compile(r"(\d{8}T\d{6}\.\d{6}Z)(?:-(\d+))?\.jsonl")
_LEGACY_TMP = re.compile(r"\.\d{8}T\d{6}\.\d{6}Z\.[a-z0-9_]{8}\.tmp")
"""The temporary copies of earlier versions (``tempfile.mkstemp``), swept like today's."""
_COPY_CHUNK = 1 << 20


def _claim(tmp: Path, target_dir: Path, stem: str) -> Path:
    """Move ``tmp`` to ``<stem>.jsonl`` (or ``<stem>-N.jsonl``) without replacing a file."""
    for n in range(1000):
        final = target_dir / (f"{stem}-{n}.jsonl" if n else f"{stem}.jsonl")
        try:
            os.link(tmp, final)  # fails when final exists: nothing is replaced
        except FileExistsError:
            continue
        except OSError:  # no hard links here: reserve the name, then move onto it
            try:
                fd = os.open(final, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            os.close(fd)
            try:
                os.replace(tmp, final)
            except BaseException:  # no empty copy left under the reserved name
                with contextlib.suppress(OSError):
                    final.unlink()
                raise
            return final
        tmp.unlink()
        return final
    raise UsageError(f"no free archive name for {stem} in {target_dir}")


def _cancelled(tmp: Path) -> OSError:
    return OSError(errno.ECANCELED, "the hook's deadline passed; copy abandoned", str(tmp))


def archive_transcript(
    transcript: str | Path,
    archive_dir: str | Path,
    session_id: str,
    *,
    clock: Clock = utc_now,
    cancel: threading.Event | None = None,
) -> Path:
    """Copy ``transcript`` to ``<archive_dir>/<session_id>/<UTC timestamp>.jsonl`` and
    return the copy's path.

    The copy is written under a temporary name in that folder
    (``.<timestamp>.ctxwise-<hex>.tmp``, readable by its owner only) and then linked
    to its final name, so a reader never sees half a file, and an existing file is
    never replaced (a second archive in the same microsecond gets ``-1``, ``-2``…).
    The session id keeps only ``A-Z a-z 0-9 . _ -``. Whatever stops the copy (an
    error, ``cancel`` set: it is checked between chunks of 1 MiB and before the
    copy is linked into place), the temporary file is removed. Temporary files a
    killed process left in that folder are removed first once they are
    :data:`ctxwise._io.STALE_TEMP_AGE` old by ``clock``.

    Raises:
        FormatError: the transcript cannot be read.
        OSError: the copy cannot be written; ``errno.ECANCELED`` when ``cancel`` was
            set. No file is left of it.
    """
    src = Path(transcript)
    if not src.is_file():
        raise FormatError(str(src), "no such transcript file")
    target = Path(archive_dir) / _safe_name(session_id)
    target.mkdir(parents=True, exist_ok=True)
    now = clock()
    sweep_stale_once(target, clock=now.timestamp, also=_LEGACY_TMP)
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        tmp = target / temporary_name(stamp)
        try:
            fd = os.open(tmp, flags, 0o600)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - 100 collisions of 32 random bits
        raise FileExistsError(errno.EEXIST, "cannot create a temporary file", str(target))
    try:
        with os.fdopen(fd, "wb") as out, src.open("rb") as inp:
            while chunk := inp.read(_COPY_CHUNK):
                if cancel is not None and cancel.is_set():
                    raise _cancelled(tmp)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        if cancel is not None and cancel.is_set():
            raise _cancelled(tmp)
        return _claim(tmp, target, stamp)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _archive_key(name: str) -> tuple[str, int] | None:
    """``(timestamp, N)`` of an archive copy's name (``<stamp>.jsonl``,
    ``<stamp>-N.jsonl``), the order they were written in; None for any other name."""
    m = _ARCHIVE_NAME.fullmatch(name)
    return (m.group(1), int(m.group(2) or 0)) if m else None


def prune_archives(archive_dir: str | Path, max_bytes: int, keep: str | Path) -> list[Path]:
    """Remove the oldest archive copies under ``archive_dir`` (every session's folder)
    until they hold at most ``max_bytes`` in all, and return the paths removed.

    Only copies named as :func:`archive_transcript` names them and written before
    ``keep`` (the copy just written) are removed: ``keep`` and newer copies stay,
    even when they alone pass ``max_bytes``. ``max_bytes`` 0 removes nothing.
    Order is by the UTC timestamp in the names, not by the clock of the file
    system; a copy that cannot be removed is skipped.
    """
    if max_bytes < 0:
        raise UsageError(f"max_bytes must be 0 (no cap) or more, got {max_bytes}")
    kept = _archive_key(Path(keep).name)
    if max_bytes == 0 or kept is None:
        return []
    copies: list[tuple[tuple[str, int], str, Path, int]] = []
    total = 0
    base = Path(archive_dir)
    try:
        folders = [e for e in os.scandir(base) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    for folder in folders:
        try:
            entries = list(os.scandir(folder.path))
        except OSError:
            continue
        for e in entries:
            key = _archive_key(e.name)
            if key is None:
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            total += st.st_size
            if key < kept:
                copies.append((key, folder.name, Path(e.path), st.st_size))
    removed: list[Path] = []
    for _, _, path, size in sorted(copies):
        if total <= max_bytes:
            break
        try:
            path.unlink()
        except OSError:
            continue
        total -= size
        removed.append(path)
    return removed


def sweep_archive(archive_dir: Path, clock: Clock) -> None:
    """Sweep every session folder of the archive for the temporary copies killed
    hooks left (each copy sweeps its own folder; a session that never compacts
    again would keep another's)."""
    now = clock().timestamp()
    with contextlib.suppress(OSError), os.scandir(archive_dir) as entries:
        folders = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        for folder in folders:
            sweep_stale_once(folder, clock=lambda: now, also=_LEGACY_TMP)


def latest_archive(archive_dir: Path, session_id: str) -> Path | None:
    """The session's latest archive; None when there is none, or when the payload
    names no session (its copies share ``unknown-session`` with every other such
    payload's, so they may be another session's)."""
    if not _SAFE.sub("_", session_id.strip())[:200].strip("."):
        return None
    folder = archive_dir / _safe_name(session_id)
    found = list(folder.glob("*.jsonl")) if folder.is_dir() else []

    def order(path: Path) -> tuple[str, int]:  # <stamp>.jsonl, then <stamp>-1.jsonl, …
        stamp, _, n = path.name.removesuffix(".jsonl").partition("-")
        return stamp, int(n) if n.isdigit() else 0

    return max(found, key=order) if found else None
