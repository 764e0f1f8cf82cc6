"""Install hints that work from a clone, and the license the project declares.

ctxwise is not published: a hint of the form ``pip install`` + the package name
and an extra would install whatever holds that name on PyPI. Every hint comes from
``MissingDependencyError.install_command``, which installs the clone's extra.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from ctxwise.errors import MissingDependencyError

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED_FORM = re.compile(r"ctxwise\[")


def test_the_hint_installs_the_clones_extra() -> None:
    err = MissingDependencyError("tiktoken", "tiktoken", "exact token counting")
    assert str(err) == (
        "exact token counting needs the 'tiktoken' package: pip install -e '.[tiktoken]'"
    )
    assert MissingDependencyError.install_command("postgres") == "pip install -e '.[postgres]'"
    assert MissingDependencyError.install_command("") == "pip install -e ."


def _shipped_texts() -> list[Path]:
    files = [ROOT / "README.md"]
    for folder, pattern in (("src", "*.py"), ("docs", "*.md"), ("examples", "*")):
        files += [p for p in (ROOT / folder).rglob(pattern) if p.is_file()]
    return [p for p in files if "__pycache__" not in p.parts]


@pytest.mark.parametrize("path", _shipped_texts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_hint_names_the_package_as_if_published(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    found = [n for n, line in enumerate(text.splitlines(), 1) if PUBLISHED_FORM.search(line)]
    assert not found, f"{path.relative_to(ROOT)} lines {found}: use pip install -e '.[extra]'"


def test_the_license_file_is_the_apache_license_the_project_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert declared["project"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    assert lines[:3] == [
        "Apache License",
        "Version 2.0, January 2004",
        "http://www.apache.org/licenses/",
    ]
    for heading in ("TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION",
                    "END OF TERMS AND CONDITIONS",
                    "APPENDIX: How to apply the Apache License to your work."):  # fmt: skip
        assert heading in lines
    # the nine sections of the terms, in order
    numbered = [line.split(".")[0] for line in lines if re.match(r"^\d\. [A-Z]", line)]
    assert numbered == [str(n) for n in range(1, 10)]
