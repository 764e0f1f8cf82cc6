"""Layers point one way: every module of ``ctxwise`` sits in a layer, imports only
from its own layer and the ones below, and the runtime import graph has no cycle.

The graph is built statically with :mod:`ast` (nothing is imported): every
``import ctxwise.x`` / ``from ctxwise.x import y`` and every relative import in
every module under ``src/ctxwise``, wherever it appears (module level, inside a
function, under ``if TYPE_CHECKING:``). The layer rule reads every edge, the ones
under ``TYPE_CHECKING`` too: an annotation that names a higher layer is a
dependency on it, even if it never runs. The cycle check reads the runtime edges
alone (a cycle under ``TYPE_CHECKING`` never runs; one across layers is refused
by the layer rule anyway).

:data:`LAYERS` is the table of docs/architecture.md, checked against it below.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = SRC / "ctxwise"
DOC = ROOT / "docs" / "architecture.md"

# Each layer may import from itself and the layers below it, never from one above.
# An entry places a module and every module below it (``ctxwise.memory`` places
# ``ctxwise.memory.sqlite``); the package itself, ``ctxwise``, places only its
# ``__init__``. An entry may name a module that does not exist yet (a package
# being built).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "ctxwise.errors",
            "ctxwise.messages",
            "ctxwise.tokens",
            "ctxwise.text",
            "ctxwise._io",
            "ctxwise._migrations",
            "ctxwise._schema",
            "ctxwise._sqlite",
            "ctxwise._version",
        ),
    ),
    (
        "building blocks",
        (
            "ctxwise.formats",
            "ctxwise.pairing",
            "ctxwise.assembly",
            "ctxwise.search",
            "ctxwise.embeddings",
            "ctxwise.embedding_cache",
            "ctxwise.summarize",
            "ctxwise._extractive",
            "ctxwise.pricing",
            "ctxwise.prompt_cache",
            "ctxwise.providers",
            "ctxwise.costs",
            "ctxwise.calibration",
            "ctxwise.composition",
            "ctxwise.retention",
            "ctxwise.trace",
            "ctxwise.sources",
            "ctxwise.spec",
            "ctxwise._policy_schema",
            "ctxwise._northwind",
            "ctxwise._scripted",
        ),
    ),
    (
        "subsystems",
        (
            "ctxwise.routing",
            "ctxwise.memory",
            "ctxwise.sessions",
            "ctxwise.editing",
            "ctxwise.compaction",
            "ctxwise.policy",
            "ctxwise.tools",
            "ctxwise.handoff",
            "ctxwise.relay",
            "ctxwise.memory_tool",
            "ctxwise.provenance",
            "ctxwise.tenancy",
            "ctxwise._bm25",
            "ctxwise._session_state",
        ),
    ),
    # config sits above the subsystems it describes: it checks their settings
    # against each other (a memory preset against the embedder), and no subsystem
    # reads the Engine's TOML schema
    ("the turn", ("ctxwise.turn", "ctxwise.orchestrator", "ctxwise.config")),
    (
        "the engine",
        ("ctxwise.engine", "ctxwise._engine_parts", "ctxwise._engine_tools", "ctxwise._sync"),
    ),
    ("the public API", ("ctxwise", "ctxwise.replay", "ctxwise.ledger", "ctxwise.testing")),
    (
        "front ends",
        (
            "ctxwise.integrations",
            "ctxwise.server",
            "ctxwise.cli",
            "ctxwise._demo",
            "ctxwise.__main__",
        ),
    ),
)

PLACE: dict[str, int] = {m: i for i, (_, entries) in enumerate(LAYERS) for m in entries}


def _layer_of(module: str, place: dict[str, int] | None = None) -> int | None:
    """The layer of ``module``: its own entry, or its nearest placed package's
    (never the bare ``ctxwise``, which places only the package's ``__init__``)."""
    table = PLACE if place is None else place
    parts = module.split(".")
    while len(parts) > 1:
        found = table.get(".".join(parts))
        if found is not None:
            return found
        parts.pop()
    return table.get(module)


def _describe(layer: int) -> str:
    return f"L{layer} ({LAYERS[layer][0]})"


@dataclass(frozen=True, slots=True)
class Edge:
    """One import of ``target`` by ``source`` at ``line``."""

    source: str
    target: str
    line: int
    typing_only: bool
    """The import sits under ``if TYPE_CHECKING:`` and never runs."""
    exists: bool = True
    """``target`` is a module under src/ctxwise (else the import would fail)."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _nodes(nodes: list[ast.stmt], typing_only: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every node below ``nodes``, with whether it sits under ``if TYPE_CHECKING:``."""
    for node in nodes:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _nodes(node.body, True)
            yield from _nodes(node.orelse, typing_only)
            continue
        yield node, typing_only
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, field, None)
            if isinstance(children, list):
                stmts = [c for c in children if isinstance(c, ast.stmt)]
                yield from _nodes(stmts, typing_only)
                for child in children:
                    if isinstance(child, ast.ExceptHandler | ast.match_case):
                        yield from _nodes(child.body, typing_only)


def _edges(path: Path, module: str, modules: set[str]) -> list[Edge]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: dict[tuple[str, int, bool], Edge] = {}
    for node, typing_only in _nodes(tree.body):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.partition(".")[0] == "ctxwise"]
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
            # `from ctxwise.memory import sqlite` imports a submodule; a stem that
            # is no module stays as it is, reported by the missing-module test
            targets = [
                f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in modules else stem
                for alias in node.names
            ]
        line = getattr(node, "lineno", 0)
        for target in targets:
            if target != module:
                found.setdefault(
                    (target, line, typing_only),
                    Edge(module, target, line, typing_only, target in modules),
                )
    return list(found.values())


def _imports(path: Path, module: str, modules: set[str]) -> set[str]:
    """The modules ``module`` imports at run time (not under ``TYPE_CHECKING``)."""
    return {e.target for e in _edges(path, module, modules) if e.exists and not e.typing_only}


def _all_edges() -> dict[str, list[Edge]]:
    paths = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    modules = set(paths)
    # A module's package __init__ runs before the module itself, but that edge is
    # Python's, not the module's: only explicit imports count.
    return {m: _edges(p, m, modules) for m, p in paths.items()}


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


def _upward(edges: dict[str, list[Edge]], place: dict[str, int] | None = None) -> list[str]:
    """Every edge from a module to a module of a higher layer, as a line to read."""
    out = []
    for module in sorted(edges):
        for e in edges[module]:
            if not e.exists:
                continue
            low, high = _layer_of(e.source, place), _layer_of(e.target, place)
            if low is not None and high is not None and high > low:
                how = " under TYPE_CHECKING" if e.typing_only else ""
                out.append(
                    f"{e.source} ({_describe(low)}) imports {e.target} ({_describe(high)}) "
                    f"at line {e.line}{how}"
                )
    return out


EDGES = _all_edges()
GRAPH = {
    m: {e.target for e in edges if e.exists and not e.typing_only} for m, edges in EDGES.items()
}


def test_graph_sees_the_package() -> None:
    # guard against a vacuous pass: the walk found the modules and their edges
    assert {"ctxwise", "ctxwise.tokens", "ctxwise.assembly", "ctxwise.memory"} <= set(GRAPH)
    assert "ctxwise.messages" in GRAPH["ctxwise.tokens._base"]
    assert "ctxwise.errors" in GRAPH["ctxwise.tokens._base"]
    assert any(e.typing_only for edges in EDGES.values() for e in edges)
    assert all(_layer_of(m) is not None for m in ("ctxwise.memory.sqlite", "ctxwise.cli.compact"))


def test_every_module_is_placed() -> None:
    missing = []
    for module in sorted(EDGES):
        if _layer_of(module) is not None:
            continue
        # the lowest layer its imports allow: at or above every module it imports
        below = [_layer_of(e.target) for e in EDGES[module]]
        lowest = max((layer for layer in below if layer is not None), default=0)
        missing.append(
            f"{module} is in no layer: add it (or its package) to LAYERS in "
            f"tests/test_layers.py and to the table in docs/architecture.md; "
            f"its imports allow {_describe(lowest)} or above"
        )
    assert not missing, "\n".join(missing)


def test_no_module_imports_from_a_higher_layer() -> None:
    upward = _upward(EDGES)
    assert not upward, "imports against the layers (docs/architecture.md):\n" + "\n".join(upward)


def test_every_import_names_a_module() -> None:
    # an import of a module that is not under src/ctxwise fails at run time (or,
    # under TYPE_CHECKING, in the type checker): often a new file not added to git
    missing = [
        f"{e.source} imports {e.target} at line {e.line}, which is no module under src/ctxwise"
        for edges in EDGES.values()
        for e in edges
        if not e.exists
    ]
    assert not missing, "\n".join(missing)


def test_errors_imports_nothing_from_ctxwise() -> None:
    # the exception tree is the one module every other can import: not even its
    # annotations name another module (they use protocols instead)
    assert EDGES["ctxwise.errors"] == []


def test_no_import_cycle() -> None:
    # the package __init__ re-exports everything, so it sits at the top of the
    # graph; a module importing `from ctxwise import X` would close a cycle
    cycle = _find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _documented_layers() -> list[set[str]]:
    """The modules of each row of docs/architecture.md's layer table, in order."""
    rows = [
        line
        for line in DOC.read_text(encoding="utf-8").splitlines()
        if re.match(r"\|\s*L\d+\s*\|", line)
    ]
    return [
        {
            f"ctxwise.{n}" if n != "ctxwise" else n
            for n in re.findall(r"`([\w.]+)`", row.split("|")[3])
        }
        for row in rows
    ]


def test_the_docs_show_the_same_table() -> None:
    documented = _documented_layers()
    assert len(documented) == len(LAYERS), "one row per layer in docs/architecture.md"
    for i, (name, entries) in enumerate(LAYERS):
        assert documented[i] == set(entries), (
            f"docs/architecture.md's row L{i} ({name}) differs from LAYERS: "
            f"only in the docs {sorted(documented[i] - set(entries))}, "
            f"only in the test {sorted(set(entries) - documented[i])}"
        )


# -- the checker itself --------------------------------------------------------------


def test_cycle_finder_reports_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _find_cycle(graph) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_layer_of_places_submodules_but_not_under_the_bare_package() -> None:
    place = {"ctxwise": 5, "ctxwise.memory": 2, "ctxwise.memory.sqlite": 3}
    assert _layer_of("ctxwise", place) == 5
    assert _layer_of("ctxwise.memory", place) == 2
    assert _layer_of("ctxwise.memory.facts", place) == 2
    assert _layer_of("ctxwise.memory.sqlite.x", place) == 3
    assert _layer_of("ctxwise.unplaced", place) is None


def test_an_upward_import_is_reported_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "low.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from ctxwise import low2\n"
        "if TYPE_CHECKING:\n"
        "    from ctxwise.high import Thing\n",
        encoding="utf-8",
    )
    modules = {"ctxwise", "ctxwise.low", "ctxwise.low2", "ctxwise.high"}
    edges = {"ctxwise.low": _edges(tmp_path / "low.py", "ctxwise.low", modules)}
    place = {"ctxwise.low": 0, "ctxwise.low2": 0, "ctxwise.high": 2}
    assert _upward(edges, place) == [
        "ctxwise.low (L0 (foundation)) imports ctxwise.high (L2 (subsystems)) "
        "at line 4 under TYPE_CHECKING"
    ]


def test_type_checking_imports_are_marked(tmp_path: Path) -> None:
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
    typing_only = {e.target for e in _edges(path, "ctxwise.mod", modules) if e.typing_only}
    assert typing_only == {"ctxwise.assembly"}


def test_an_import_of_a_missing_module_is_not_read_as_its_package(tmp_path: Path) -> None:
    path = tmp_path / "mod.py"
    path.write_text(
        "from ctxwise._gone import x\nimport ctxwise.memory.gone\nfrom ctxwise.memory import y\n",
        encoding="utf-8",
    )
    modules = {"ctxwise", "ctxwise.memory", "ctxwise.mod"}
    edges = _edges(path, "ctxwise.mod", modules)
    assert [(e.target, e.exists) for e in edges] == [
        ("ctxwise._gone", False),
        ("ctxwise.memory.gone", False),
        ("ctxwise.memory", True),
    ]
