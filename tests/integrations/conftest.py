"""Fixtures shared by the integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty HOME for a hook run as a subprocess."""
    h = tmp_path / "home"
    h.mkdir()
    return h
