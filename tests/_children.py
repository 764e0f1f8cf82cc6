"""A second process for lock tests: started with pipes, read line by line under a
deadline, and always killed and reaped at the end."""

from __future__ import annotations

import contextlib
import selectors
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEADLINE = 120.0  # seconds for a child to start (an import, a store, a step) or to be seen gone


def child_line(child: subprocess.Popen[str], deadline: float = DEADLINE) -> str:
    """The child's next line of output, or fail (it died, or said nothing in time)."""
    assert child.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(child.stdout, selectors.EVENT_READ)
        if not sel.select(deadline):
            child.kill()
            pytest.fail(f"the child said nothing in {deadline:.0f} s")
    return child.stdout.readline().strip()


@contextlib.contextmanager
def python_child(code: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """``python -c code args…`` in the repository, with piped standard streams;
    killed at the end if it still runs, and its pipes closed."""
    child = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        for pipe in (child.stdin, child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()
