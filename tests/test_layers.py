"""Layers point one way: the module import graph of ``ctxwise`` has no cycle.

The graph is built statically with :mod:`ast` (nothing is imported): every
``import ctxwise.x`` / ``from ctxwise.x import y`` and every relative import in
every module under ``src/ctxwise``, wherever it appears (module level or inside a
function), except imports under ``if TYPE_CHECKING:``, which never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "ctxwise"

# The bottom layer: these import nothing from ctxwise but each other, and errors
# imports nothing from ctxwise at all.
BOTTOM = ("ctxwise.errors", "ctxwise.messages", "ctxwise.text", "ctxwise.tokens")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(nodes: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node below ``nodes`` except the bodies of ``if TYPE_CHECKING:``."""
    for node in nodes:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _runtime_nodes(node.orelse)
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, field, None)
            if isinstance(children, list):
                yield from _runtime_nodes([c for c in children if isinstance(c, ast.stmt)])
                for child in children:
                    if isinstance(child, ast.ExceptHandler | ast.match_case):
                        yield from _runtime_nodes(child.body)


def _resolve(name: str, modules: set[str]) -> str | None:
    """The longest prefix of dotted ``name`` that is a ctxwise module."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _imports(path: Path, module: str, modules: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in _runtime_nodes(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, modules)
                if target is not None:
                    found.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join([*base, node.module] if node.module else base)
            elif node.module is not None:
                stem = node.module
            else:  # pragma: no cover - `from . import x` always has a level
                continue
            if not (stem == "ctxwise" or stem.startswith("ctxwise.")):
                continue
            for alias in node.names:
                # `from ctxwise.memory import sqlite` imports a submodule
                target = _resolve(f"{stem}.{alias.name}", modules) or _resolve(stem, modules)
                if target is not None:
                    found.add(target)
    found.discard(module)
    return found


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    modules = set(paths)
    graph = {m: _imports(p, m, modules) for m, p in paths.items()}
    # A module's package __init__ runs before the module itself, but that edge is
    # Python's, not the module's: only explicit imports count.
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle (as a path that returns to its start), or None."""
    white, grey, black = 0, 1, 2
    colour = dict.fromkeys(graph, white)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = grey
        stack.append(node)
        for nxt in sorted(graph[node]):
            if colour[nxt] == grey:
                return [*stack[stack.index(nxt) :], nxt]
            if colour[nxt] == white:
                cycle = visit(nxt)
                if cycle is not None:
                    return cycle
        stack.pop()
        colour[node] = black
        return None

    for node in sorted(graph):
        if colour[node] == white:
            cycle = visit(node)
            if cycle is not None:
                return cycle
    return None


GRAPH = _graph()


def test_graph_sees_the_package() -> None:
    # guard against a vacuous pass: the walk found the modules and their edges
    assert {"ctxwise", "ctxwise.tokens", "ctxwise.assembly", "ctxwise.memory"} <= set(GRAPH)
    assert "ctxwise.messages" in GRAPH["ctxwise.tokens"]
    assert "ctxwise.errors" in GRAPH["ctxwise.tokens"]


def test_no_import_cycle() -> None:
    # the package __init__ re-exports everything, so it sits at the top of the
    # graph; a module importing `from ctxwise import X` would close a cycle
    cycle = _find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("module", BOTTOM)
def test_bottom_layer_imports_only_the_bottom_layer(module: str) -> None:
    allowed = set() if module == "ctxwise.errors" else set(BOTTOM)
    outside = GRAPH[module] - allowed
    assert not outside, f"{module} imports from a higher layer: {sorted(outside)}"


def test_cycle_finder_reports_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _find_cycle(graph) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_type_checking_imports_are_excluded(tmp_path: Path) -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import ctxwise.errors\n"
        "if TYPE_CHECKING:\n"
        "    from ctxwise.assembly import Section\n"
        "else:\n"
        "    pass\n"
        "def f():\n"
        "    from .text import tokens\n"
        "    try:\n"
        "        from ctxwise.memory import sqlite\n"
        "    except ImportError:\n"
        "        from . import messages\n"
    )
    path = tmp_path / "mod.py"
    path.write_text(source, encoding="utf-8")
    modules = {
        "ctxwise",
        "ctxwise.errors",
        "ctxwise.assembly",
        "ctxwise.text",
        "ctxwise.memory",
        "ctxwise.memory.sqlite",
        "ctxwise.messages",
        "ctxwise.mod",
    }
    assert _imports(path, "ctxwise.mod", modules) == {
        "ctxwise.errors",
        "ctxwise.text",
        "ctxwise.memory.sqlite",
        "ctxwise.messages",
    }
