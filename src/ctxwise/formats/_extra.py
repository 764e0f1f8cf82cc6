"""Namespaced ``extra`` keys: each codec keeps the fields it has no model for under
its own prefix and writes back only its own, so a transcript converted from one
format to another never carries fields the target format would reject."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def keep(prefix: str, d: Mapping[str, Any], known: set[str]) -> dict[str, Any]:
    """The unknown keys of ``d``, namespaced as ``prefix.key``."""
    return {f"{prefix}.{k}": v for k, v in d.items() if k not in known}


def own(prefix: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The keys this codec wrote, without their prefix."""
    p = prefix + "."
    return {k[len(p) :]: v for k, v in extra.items() if k.startswith(p)}
