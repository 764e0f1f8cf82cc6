"""Shared by the framework integrations: the supported-version check and the import guard."""

from __future__ import annotations

import importlib.metadata
import re

from ctxwise.errors import IntegrationError, MissingDependencyError

__all__ = ["require_framework"]


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
        MissingDependencyError: it is not installed (naming ``pip install 'ctxwise[extra]'``).
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
