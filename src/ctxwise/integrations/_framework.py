"""Shared by the framework integrations: the supported-version check, the import guard,
and taking texts out of a window's system part (the call's own prompt, which the
integration sends as the framework gave it, and the prompts an older ctxwise recorded
in a session)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Sequence

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ctxwise.errors import IntegrationError, MissingDependencyError

__all__ = ["require_framework", "without_texts"]


def require_framework(distribution: str, supported: str, extra: str, purpose: str) -> str:
    """The installed version of ``distribution`` when it is within ``supported``, a PEP 440
    specifier set such as ``">=1.5,<2"`` (read by ``packaging``).

    A pre-release or development release is outside every range that does not name one
    itself, as pip chooses versions: ``2.0rc1`` is refused by ``">=1.5,<2"`` and ``1.5rc1`` by
    ``">=1.5"``. A version that is not PEP 440 is outside every range.

    Raises:
        MissingDependencyError: it is not installed (naming ``pip install -e '.[extra]'``).
        IntegrationError: (reason ``"version"``) it is installed outside ``supported``.
            (reason ``"config"``) ``supported`` is not a specifier set.
    """
    try:
        spec = SpecifierSet(supported)
    except InvalidSpecifier:
        raise IntegrationError(
            distribution, "config", f"{purpose} names a bad version range {supported!r}"
        ) from None
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise MissingDependencyError(distribution, extra, purpose) from None
    try:
        # explicit: packaging's own default for pre-releases changed between releases
        within = spec.contains(Version(version), prereleases=bool(spec.prereleases))
    except InvalidVersion:
        within = False
    if not within:
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
