"""The CLI as a user runs it: a real subprocess, real files, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, TAU, long_sessions

EXAMPLE = ROOT / "examples" / "support.yaml"


def ctxwise(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "120", "NO_COLOR": "1"},
    )


def test_assemble_json() -> None:
    out = ctxwise("assemble", EXAMPLE, "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert {"budget", "tokens", "included", "truncated", "dropped", "sections"} <= set(report)
    assert report["tokens"] <= report["budget"] - report["reserve"]
    for s in report["sections"]:
        assert {"name", "priority", "pinned", "tokens", "status"} <= set(s)
    assert "system" in report["included"] and "case facts" in report["included"]
    assert report["truncated"] == ["earlier chat"] and report["dropped"] == ["marketing"]


def test_assemble_budget_override_and_counter() -> None:
    out = ctxwise("assemble", EXAMPLE, "--budget", "2000", "--counter", "word", "--json")
    report = json.loads(out.stdout)
    assert report["budget"] == 2000 and report["counter"] == "word"
    assert report["dropped"] == [] and report["truncated"] == []


def test_assemble_table() -> None:
    out = ctxwise("assemble", EXAMPLE)
    assert out.returncode == 0, out.stderr
    for word in ("system", "case facts", "truncated", "dropped", "█"):
        assert word in out.stdout


@pytest.mark.data
def test_inspect_long_session(data_dir: Path) -> None:
    path = long_sessions()[0]
    out = ctxwise("inspect", path, "--json")
    assert out.returncode == 0, out.stderr
    c = json.loads(out.stdout)
    assert {"total_tokens", "by_kind", "by_tool", "largest", "problems"} <= set(c)
    assert sum(c["by_kind"].values()) == c["total_tokens"]
    assert max(c["by_kind"], key=c["by_kind"].get) == "tool_result"
    assert len(c["largest"]) == 10 and c["problems"] == []
    assert sum(c["by_tool"].values()) == c["by_kind"]["tool_result"] + c["by_kind"]["tool_use"]
    table = ctxwise("inspect", path, "--live")
    assert table.returncode == 0 and "tool_result" in table.stdout


@pytest.mark.data
def test_inspect_tau_trajectory(data_dir: Path) -> None:
    out = ctxwise("inspect", TAU, "--index", "3", "--format", "openai", "--json")
    assert out.returncode == 0, out.stderr
    c = json.loads(out.stdout)
    assert c["format"] == "openai" and c["by_kind"]["system"] > 0


def _bad_inputs(tmp: Path) -> list[tuple[str, list[str | Path]]]:
    malformed = tmp / "bad.yaml"
    malformed.write_text("budget: 10\nsections: [{name: a, content: x, pinned: maybe}]\n")
    truncated = tmp / "cut.jsonl"
    truncated.write_text(
        '{"type": "user", "message": {"role": "user", "content": "hi"}}\n{"type": "assis'
    )
    binary = tmp / "blob.json"
    binary.write_bytes(bytes(range(256)))
    deep = tmp / "deep.json"
    deep.write_text("[" * 100_000)
    surrogate_spec = tmp / "blobfile.yaml"
    surrogate_spec.write_text("budget: 10\nsections: [{name: a, file: blob.json}]\n")
    bool_budget = tmp / "bool.yaml"
    bool_budget.write_text("budget: true\nsections: [{name: a, content: x}]\n")
    inf = tmp / "inf.jsonl"
    inf.write_text(
        '{"type": "user", "message": {"role": "user", "content": "hi"}}\n{"type": "assis'
    )
    return [
        ("deeply nested JSON", ["inspect", deep]),
        ("section file is binary", ["assemble", surrogate_spec]),
        ("boolean budget", ["assemble", bool_budget]),
        ("directory", ["inspect", tmp]),
        ("malformed spec", ["assemble", malformed]),
        ("budget 0", ["assemble", EXAMPLE, "--budget", "0"]),
        ("budget below 0", ["assemble", EXAMPLE, "--budget", "-5"]),
        ("unknown counter", ["assemble", EXAMPLE, "--counter", "bpe"]),
        ("unknown format", ["inspect", truncated, "--format", "gemini"]),
        ("truncated JSONL line", ["inspect", truncated]),
        ("binary transcript", ["inspect", binary]),
        ("binary spec", ["assemble", binary]),
        ("missing file", ["inspect", tmp / "nope.jsonl"]),
        ("unknown option", ["assemble", EXAMPLE, "--bugdet", "3"]),
        ("missing argument", ["inspect"]),
        ("not a number", ["assemble", EXAMPLE, "--budget", "lots"]),
    ]


def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path: Path) -> None:
    before = sorted(p.name for p in tmp_path.iterdir()) if tmp_path.exists() else []
    cases = _bad_inputs(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    for label, args in cases:
        out = ctxwise(*args)
        assert out.returncode == 2, (label, out.returncode, out.stderr)
        assert out.stdout == "", label
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ctxwise: error: "), (label, out.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_truncated_line_error_names_the_line(tmp_path: Path) -> None:
    cases = dict(_bad_inputs(tmp_path))
    out = ctxwise(*cases["truncated JSONL line"])
    assert "cut.jsonl:2" in out.stderr


def test_lone_surrogates_print_escaped(tmp_path: Path) -> None:
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps([{"role": "user", "content": "cut emoji \ud83d here"}]))
    for args in ([path, "--json"], [path]):
        out = ctxwise("inspect", *args)
        assert out.returncode == 0, out.stderr
    assert "cut emoji \ufffd here" in ctxwise("inspect", path, "--json").stdout


def test_markup_in_names_is_shown_literally(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("budget: 50\nsections: [{name: '[/red] x', content: hello}]\n")
    out = ctxwise("assemble", spec)
    assert out.returncode == 0, out.stderr
    assert "[/red] x" in out.stdout


def test_demo() -> None:
    """As `make demo` runs it: a temp folder, a table, every check passed."""
    out = ctxwise("demo")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "✓" in text and "✗" not in text and "every one present" in text
    assert "issue_refund(order_id='4417') → Blocked" in text and "→ Allowed" in text
    assert "fewer" in text and "kitchen sink" in text


def test_help_and_no_args() -> None:
    for args in ([], ["--help"]):
        out = ctxwise(*args)
        assert out.returncode == 0 and "assemble" in out.stdout and "inspect" in out.stdout


def test_version() -> None:
    from importlib.metadata import version

    import ctxwise as package

    out = ctxwise("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"ctxwise {package.__version__}\n" and out.stderr == ""
    assert package.__version__ == version("ctxwise")  # the installed metadata agrees
