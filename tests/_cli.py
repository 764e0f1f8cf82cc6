"""Running the ``ctxwise`` app in process, for the CLI tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ctxwise.cli import app

runner = CliRunner()


def run(*args: str | Path) -> Any:
    """``ctxwise ARGS…`` in process; the click result (exit code, stdout, stderr)."""
    return runner.invoke(app, [str(a) for a in args])


def ok_json(*args: str | Path) -> Any:
    """``ctxwise ARGS… --json``, which must succeed; its parsed output."""
    result = run(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def assert_usage_error(result: Any, *words: str) -> None:
    """Exit 2, nothing on stdout, one ``ctxwise: error:`` line holding ``words``."""
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("ctxwise: error: ")
    for word in words:
        assert word in lines[0]
