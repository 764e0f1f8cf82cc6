"""``python -m ctxwise`` runs the same command as the ``ctxwise`` script."""

from __future__ import annotations

import subprocess
import sys

import ctxwise


def test_python_m_ctxwise_is_the_cli() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ctxwise", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert ctxwise.__version__ in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "ctxwise", "eval", "memory", "--data", "/nonexistent/x.json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
