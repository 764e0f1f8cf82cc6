"""Shared by the framework integrations: the supported-version check, the import guard,
and taking texts out of a window's system part (the call's own prompt, which the
integration sends as the framework gave it, and the prompts an older ctxwise recorded
in a session)."""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterable, Sequence

from ctxwise.errors import IntegrationError, MissingDependencyError

__all__ = ["require_framework", "without_texts"]


def _release(version: str) -> tuple[int, ...]:
    """The release numbers of a version string (``1.5.2rc1`` → ``(1, 5, 2)``)."""
    out = []
    for part in version.split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group()))
        if m.group() != part:
            break
    return tuple(out)


def _holds(version: tuple[int, ...], clause: str) -> bool:
    m = re.fullmatch(r"(>=|<=|<|>|==)\s*([0-9][0-9.]*)", clause.strip())
    if not m:
        raise ValueError(f"bad version clause {clause!r}")
    op, bound = m.group(1), _release(m.group(2))
    width = max(len(version), len(bound))
    a = version + (0,) * (width - len(version))
    b = bound + (0,) * (width - len(bound))
    return {
        ">=": a >= b,
        "<=": a <= b,
        "<": a < b,
        ">": a > b,
        "==": a == b,
    }[op]


def require_framework(distribution: str, supported: str, extra: str, purpose: str) -> str:
    """The installed version of ``distribution`` when it is within ``supported``
    (comma-separated clauses such as ``">=1.5,<2"``).

    Raises:
        MissingDependencyError: it is not installed (naming ``pip install -e '.[extra]'``).
        IntegrationError: (reason ``"version"``) it is installed outside ``supported``.
    """
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise MissingDependencyError(distribution, extra, purpose) from None
    release = _release(version)
    if not all(_holds(release, clause) for clause in supported.split(",")):
        raise IntegrationError(
            distribution,
            "version",
            f"{purpose} does not support {distribution} {version}",
            supported=supported,
        )
    return version


def without_texts(blocks: Sequence[str], texts: Iterable[str]) -> list[str]:
    """``blocks`` (a window's system part, one text per section) without ``texts``, in
    their order: each is taken out where it first stands whole, between blank-line
    separators (the Engine joins its system texts with one, the turn's ``system``
    first), with one separator. A block left empty is dropped; a text found nowhere
    changes nothing."""
    out = list(blocks)
    for text in texts:
        if not text:
            continue
        for i, block in enumerate(out):
            at = _whole(block, text)
            if at is None:
                continue
            end = at + len(text)
            if end < len(block):
                end += len(SEPARATOR)  # the separator after it
            elif at > 0:
                at -= len(SEPARATOR)  # the last one: the separator before it
            out[i] = block[:at] + block[end:]
            break
    return [b for b in out if b]


SEPARATOR = "\n\n"


def _whole(block: str, text: str) -> int | None:
    start = 0
    while (at := block.find(text, start)) >= 0:
        end = at + len(text)
        before = at == 0 or block[:at].endswith(SEPARATOR)
        after = end == len(block) or block[end:].startswith(SEPARATOR)
        if before and after:
            return at
        start = at + 1
    return None
