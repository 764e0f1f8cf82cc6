"""Measured figures live in benchmark output and docs, not in docstrings (issue 12).

A benchmark figure written into a docstring drifts from the code and the data:
the benchmark is rerun, the docs are regenerated (``scripts/bench_docs.py``), and
the docstring keeps the old number. So every docstring of ``src/ctxwise`` (module,
class, function, and the string after an assignment that documents it) and every
comment is checked for what looks like a measured result: a percentage, a
p50/p99, a time (ms, us, s, minutes), a rate (items/s, MB/s), a ``recall@k`` figure,
or a benchmark dataset's name followed by a number in the same sentence. Sizes are
not checked: a provider's documented limit (PostgreSQL's 1 MB ``tsvector``) is
stated the same way. A docstring says what the code does
and points to the benchmark (``benchmarks/bench_*.py``, docs/benchmarks.md).

Defaults written next to the name they belong to (``user_share`` (25%)) are not
figures and are skipped. Anything else that must stay goes in :data:`ALLOWED`,
with the reason.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "ctxwise"

ALLOWED: dict[str, str] = {
    "ctxwise.costs.simulate_compaction": (
        "worked example: the percentages follow from the docstring's inputs and the "
        "function's own formula, not from a measurement"
    ),
}
"""``module.qualname`` (``module`` alone for a module docstring; ``module#comment``
for its comments) → why its figures are not measured results."""

NUMBER = r"\d[\d,]*(?:\.\d+)?"
_DEFAULT = re.compile(rf"``[A-Za-z_][\w.]*``\s*\(\s*{NUMBER}\s*%?\s*\)")
"""A default next to its name, ``name`` (25%): what the code does, not a figure."""

PATTERNS: dict[str, re.Pattern[str]] = {
    "percentage": re.compile(rf"{NUMBER}\s?%"),
    "percentile": re.compile(r"\bp(?:50|90|95|99|999)\b", re.IGNORECASE),
    "time": re.compile(rf"{NUMBER}\s?(?:ms|us|µs|ns|s|seconds?|min|minutes?|hours?)\b"),
    "rate": re.compile(rf"{NUMBER}\s?(?:[A-Za-z]+)?/s\b"),
    "recall@k": re.compile(r"recall@\s?\d+", re.IGNORECASE),
    "benchmark dataset": re.compile(
        # a number after the name, in the same sentence; the number is a decimal or
        # has two digits or more ("categories 1–4" describes the data, "0.761" and
        # "760 questions" report a run)
        r"(?:LoCoMo|CLINC150|tau-bench)(?:(?![.;](?:\s|$))[^\n]|\n(?!\s*\n))*?"
        r"(?<![\w.])(?:\d+\.\d+|\d{2,}(?:,\d{3})*)(?![\w])",
        re.IGNORECASE,
    ),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _docstrings(tree: ast.Module, module: str) -> Iterator[tuple[str, int, str]]:
    """``(qualname, line, text)`` of every docstring, attribute docstrings included."""

    def visit(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, str]]:
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            return
        previous: ast.stmt | None = None
        for i, stmt in enumerate(body):
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                value = stmt.value.value
                if isinstance(value, str):
                    if i == 0 and isinstance(
                        node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
                    ):
                        yield prefix, stmt.lineno, value
                    elif isinstance(previous, ast.Assign | ast.AnnAssign):
                        targets = (
                            previous.targets
                            if isinstance(previous, ast.Assign)
                            else [previous.target]
                        )
                        names = [t.id for t in targets if isinstance(t, ast.Name)]
                        name = f"{prefix}.{names[0]}" if names else prefix
                        yield name, stmt.lineno, value
            if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                yield from visit(stmt, f"{prefix}.{stmt.name}")
            elif isinstance(stmt, ast.If | ast.Try | ast.With):
                yield from visit(stmt, prefix)
            previous = stmt

    yield from visit(tree, module)


def _comments(source: str, module: str) -> Iterator[tuple[str, int, str]]:
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield f"{module}#comment", tok.start[0], tok.string


def figures(text: str) -> list[tuple[str, str]]:
    """``(kind, match)`` for everything in ``text`` that looks like a measured result."""
    text = _DEFAULT.sub("``default``", text)
    return [(kind, m.group(0)) for kind, p in PATTERNS.items() for m in p.finditer(text)]


def _collect() -> list[tuple[str, str, int, str]]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        module = _module_name(path)
        texts = [*_docstrings(ast.parse(source), module), *_comments(source, module)]
        for name, line, text in texts:
            if name in ALLOWED:
                continue
            for kind, match in figures(text):
                snippet = " ".join(match.split())
                found.append(
                    (f"{path.relative_to(SRC.parent)}:{line}", name, line, f"{kind}: {snippet!r}")
                )
    return found


def test_no_measured_figures_in_docstrings_or_comments() -> None:
    found = _collect()
    assert not found, (
        "measured figures belong in benchmark output and docs (issue 12); point to the "
        "benchmark instead, or add the docstring to ALLOWED with a reason:\n"
        + "\n".join(f"  {where} ({name}): {what}" for where, name, _, what in found)
    )


def test_every_allowed_entry_still_exists() -> None:
    names = set()
    for path in sorted(SRC.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        module = _module_name(path)
        names.update(n for n, _, _ in _docstrings(ast.parse(source), module))
        names.add(f"{module}#comment")
    assert not set(ALLOWED) - names


@pytest.mark.parametrize(
    "text",
    [
        "overall it undercounts by about 8% (Σchar/Σexact = 0.92)",
        "takes 44-50 ms p50 there",
        "hybrid recall@10 from 0.722 to 0.761",
        "takes ~5 ms here",
        "2,000 namespaces: 35 MB, opened in 0.18 s",
        "one thread: 100k vectors in ~20 s, 1M in ~7 min",
        "576 items/s into an indexed 100k namespace",
        "a lookbehind scans at about 50 MB/s",
        "scoring a candidate costs ~10 us here",
        "On LoCoMo dev (760 questions, categories 1–4), stemming helps",
        "the lexical scorer on CLINC150 reaches 0.87",
        "the files shrink to 53-63% of their size",
    ],
)
def test_measured_figures_are_caught(text: str) -> None:
    assert figures(text)


@pytest.mark.parametrize(
    "text",
    [
        "``k`` (10) items are recalled",
        "Of the summary's budget, ``user_share`` (25%) goes first",
        "``DF_DRIFT`` (2%) of the count",
        "trigger 150,000 tokens, a 0.5 share",
        "``p50_ms`` and ``p99_ms`` are the per-turn overhead",
        "converts LoCoMo (categories 1–4; evidence strings are parsed)",
        "Write CLINC150 as ``train.jsonl``. Of the 150 intents",
        "the 1 MB tsvector limit; a lexeme of more than 2,047 bytes",
        "recall@k reads the first k of them",
        "``media_tokens`` (default 1,600, the cost of a ~1.15 megapixel image)",
        "a half-life in seconds; 5-minute cache writes cost 1.25x",
    ],
)
def test_code_facts_are_not_figures(text: str) -> None:
    assert not figures(text)
