"""Reading user-supplied text files with one clear error for every way it fails."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ctxwise.errors import UsageError


def read_text_file(path: str | Path, what: str, error: Callable[[str, str], UsageError]) -> str:
    """The UTF-8 text of ``path``; ``error(source, detail)`` builds the exception for a
    missing file, a directory, an unreadable or binary file, or text that is not UTF-8."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise error(str(p), "no such file") from None
    except IsADirectoryError:
        raise error(str(p), f"is a directory, not {what}") from None
    except OSError as exc:
        raise error(str(p), f"cannot read: {exc.strerror}") from None
    except ValueError as exc:  # e.g. a NUL byte in the path
        raise error(repr(str(p)), f"invalid path: {exc}") from None
    if b"\x00" in data[:8192]:
        raise error(str(p), f"binary file (contains NUL bytes), not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(str(p), f"not UTF-8 text (byte {exc.start})") from None
