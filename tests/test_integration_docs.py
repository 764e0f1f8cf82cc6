"""Every ```python block of the integration pages (docs/integrations/*.md) runs as
pasted, offline, in a fresh folder: each page's example is the framework's fake
model driving ctxwise. Blocks fenced ```py are fragments (they need a key or a
real model) and are not run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGES = sorted((Path(__file__).resolve().parents[1] / "docs" / "integrations").glob("*.md"))
BLOCKS = [
    (page, i, code)
    for page in PAGES
    for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text("utf-8"), re.S))
]
NEEDS = {
    "langchain.md": "langchain",
    "pydantic-ai.md": "pydantic_ai",
    "openai-agents.md": "agents",
    "claude-agent-sdk.md": "claude_agent_sdk",
    "mcp.md": "mcp",
}


def test_every_integration_page_has_a_runnable_example() -> None:
    assert {p.name for p in PAGES} == set(NEEDS)
    assert {p.name for p, _, _ in BLOCKS} == set(NEEDS)


@pytest.mark.parametrize(("page", "i", "code"), BLOCKS, ids=[f"{p.stem}-{i}" for p, i, _ in BLOCKS])
def test_an_integration_example_runs(
    page: Path, i: int, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = NEEDS[page.name]
    pytest.importorskip(module, reason=f"needs the extra for {page.name}")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{page}[{i}]", "exec"), {"__name__": "__docs__"})
