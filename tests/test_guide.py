"""The guide's Python quickstart runs as written, from the repository's root."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_python_quickstart_runs_from_the_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    section = guide.split("## Python quickstart", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {"__name__": "guide_quickstart"}
    exec(compile(code.group(1), "guide.md", "exec"), namespace)
    request = namespace["request"]
    assert isinstance(request, dict) and request["messages"][-1]["role"] == "user"
    assert os.getcwd() == str(ROOT)
