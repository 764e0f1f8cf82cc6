from __future__ import annotations

from pathlib import Path

import pytest

from ctxwise import SpecError, load_spec


def test_yaml_spec_with_file_section(tmp_path: Path) -> None:
    (tmp_path / "policy.txt").write_text("Refunds within 30 days.")
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "budget: 100\nreserve: 10\ncounter: word\norder: recall\nsections:\n"
        "  - {name: system, content: hi, pinned: true, stable: true, priority: 9}\n"
        "  - {name: policy, file: policy.txt}\n"
    )
    s, sections = load_spec(spec)
    assert s.counter == "word" and s.order == "recall"
    assert sections[1].content == "Refunds within 30 days."
    assert s.to_budget().available == 90
    assert s.to_budget(50).tokens == 50


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("budget: 10\nsections: []\n", "sections"),
        ("budget: 0\nsections: [{name: a, content: x}]\n", "budget"),
        ("budget: 10\nsections: [{name: a, content: x, priorty: 3}]\n", "priorty"),
        ("budget: 10\nsections: [{name: a}]\n", "exactly one"),
        ("budget: 10\nsections: [{name: a, content: x}, {name: a, content: y}]\n", "duplicate"),
        ("sections: [{name: a, content: x\n", "invalid YAML"),
        ("- just a list\n", "mapping"),
        ("budget: 10\nsections: [{name: a, file: nope.txt}]\n", "nope.txt: no such file"),
    ],
)
def test_bad_specs(tmp_path: Path, text: str, match: str) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    with pytest.raises(SpecError, match=match):
        load_spec(spec)


def test_a_missing_section_file_names_the_spec(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("budget: 10\nsections: [{name: a, file: nope.txt}]\n")
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    assert str(info.value).startswith(f"{spec}: section 'a': nope.txt: no such file")


def test_json_and_binary(tmp_path: Path) -> None:
    bad = tmp_path / "s.json"
    bad.write_text('{"budget": 10, "sections": [')
    with pytest.raises(SpecError, match="invalid JSON"):
        load_spec(bad)
    binary = tmp_path / "s.yaml"
    binary.write_bytes(b"\x00\x01\x02")
    with pytest.raises(SpecError, match="binary"):
        load_spec(binary)
