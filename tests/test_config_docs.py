"""Every EngineConfig key is documented, with its default, where users read it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

import ctxwise.config as config_module
from ctxwise.config import EngineConfig

DOCS = Path(__file__).resolve().parents[1] / "docs" / "engine.md"
SECTIONED = {
    "router",
    "memory",
    "facts",
    "gates",
    "clearing",
    "compaction",
    "sources",
    "routes",
    "tools",
    "tool_results",
    "memory_tool",
    "embedder",
}


def _keys(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, object]]:
    out = []
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        ann = field.annotation
        sub = next(
            (
                a
                for a in getattr(ann, "__args__", (ann,))
                if isinstance(a, type) and issubclass(a, BaseModel)
            ),
            None,
        )
        if sub is not None and getattr(ann, "__origin__", None) is dict:
            out += _keys(sub, f"{prefix}{name}.*.")
        elif sub is not None:
            out += _keys(sub, f"{prefix}{name}.")
        elif name not in ("routes", "sources"):
            out.append((prefix, name, field.default))
    return out


def _toml_block(text: str) -> str:
    blocks = re.findall(r"```toml\n(.*?)```", text, re.S)
    assert blocks, "no toml block"
    return max(blocks, key=len)


@pytest.mark.parametrize(
    "where",
    [DOCS.read_text(encoding="utf-8"), config_module.__doc__ or ""],
    ids=["docs/engine.md", "ctxwise.config docstring"],
)
def test_every_key_is_documented(where: str) -> None:
    text = _toml_block(where) if "```toml" in where else where
    missing = []
    for prefix, name, _ in _keys(EngineConfig):
        section = prefix.rstrip(".")
        if section.endswith(".*"):
            if f"[{section[:-2]}." not in text:
                missing.append(f"[{section}]")
        elif section and f"[{section}]" not in text:
            missing.append(f"[{section}]")
        if not re.search(rf"^\s*{name}\s*=", text, re.M):
            missing.append(prefix + name)
    assert not missing, f"undocumented keys: {missing}"


def test_documented_defaults_match_the_model() -> None:
    text = _toml_block(DOCS.read_text(encoding="utf-8"))
    current = ""
    wrong = []
    defaults = {(p.rstrip("."), n): d for p, n, d in _keys(EngineConfig)}
    for line in text.splitlines():
        head = re.match(r"^\[([a-z_.]+)\]", line)
        if head:
            current = head.group(1) if head.group(1) in SECTIONED else ""
            continue
        m = re.match(r"^([a-z_]+)\s*=\s*([^#]+?)\s*(#|$)", line)
        if not m or (current, m.group(1)) not in defaults:
            continue
        default = defaults[(current, m.group(1))]
        value = m.group(2)
        if isinstance(default, bool):
            ok = value == str(default).lower()
        elif isinstance(default, int | float):
            ok = float(value) == float(default)
        elif isinstance(default, str):
            ok = value == f'"{default}"'
        else:
            continue
        if not ok:
            wrong.append(f"{current}.{m.group(1)}: docs say {value}, default is {default!r}")
    assert not wrong, wrong


EXAMPLE = DOCS.parents[1] / "examples" / "ctxwise.toml"


def test_the_reference_block_is_the_shipped_example() -> None:
    assert _toml_block(DOCS.read_text(encoding="utf-8")) == EXAMPLE.read_text(encoding="utf-8")


def test_the_shipped_example_loads_and_builds_an_engine(tmp_path: Path) -> None:
    from ctxwise import Engine
    from ctxwise.config import load_config

    copy = tmp_path / "ctxwise.toml"  # its store is relative to the file: keep it out of the repo
    copy.write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    assert load_config(copy).router is not None
    with Engine.from_file(str(copy)) as engine:
        result = engine.turn("s", "I was charged twice, I want a refund")
        assert result.trace.route is not None and result.trace.route.label == "billing"
    assert (tmp_path / "ctxwise.db").is_file()
