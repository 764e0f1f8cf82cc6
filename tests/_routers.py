"""Test helpers for saved routers."""

from __future__ import annotations

import json
from pathlib import Path


def saved_arrays(path: Path) -> Path | None:
    """The arrays file the router saved at ``path`` names (``None`` when it names none)."""
    state = json.loads(path.read_text(encoding="utf-8")).get("state")
    return None if state is None else path.resolve().with_name(state["file"])


def legacy_arrays(path: Path) -> Path:
    """``PATH.npz``: the arrays name before arrays were named by content (still loads)."""
    return path.with_name(path.name + ".npz")
