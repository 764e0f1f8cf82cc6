"""Assembly spec files the project was not built on: each bad one is a SpecError
naming the key, and the CLI prints one line with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxwise import SpecError, load_spec

from ._cli import assert_usage_error, run


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("s.yaml", "budget: 100\nsections:\n  - {name: a, content: hi, priority: .nan}\n"),
        ("s.yaml", "budget: 100\nsections:\n  - {name: a, content: hi, priority: -.inf}\n"),
        ("s.json", '{"budget": 100, "sections": [{"name": "a", "content": "x", "priority": NaN}]}'),
        (
            "s.json",
            '{"budget": 100, "sections": [{"name": "a", "content": "x", "priority": 1e999}]}',
        ),
    ],
)
def test_a_priority_that_is_not_finite_is_a_spec_error_naming_it(
    tmp_path: Path, name: str, text: str
) -> None:
    # it was a UsageError from Section naming neither the spec nor the key
    spec = tmp_path / name
    spec.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError, match=r"s\.(yaml|json): sections\.0\.priority: .*finite"):
        load_spec(spec)
    assert_usage_error(run("assemble", spec), "sections.0.priority")


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("s.json", '{"budget": ' + "9" * 5_000 + ', "sections": []}'),
        ("s.yaml", "budget: " + "9" * 5_000 + "\nsections: []\n"),
    ],
)
def test_an_integer_too_long_to_convert_is_a_spec_error(
    tmp_path: Path, name: str, text: str
) -> None:
    # json.loads and yaml.safe_load raise a bare ValueError past 4300 digits
    spec = tmp_path / name
    spec.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError, match=r"invalid (JSON|YAML)\b.*digits"):
        load_spec(spec)
    assert_usage_error(run("assemble", spec), "digits")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "s.yaml",
            "budget: 100\nsections:\n  - {name: a, content: hi}\nbudget: 5\n",
            r"invalid YAML at line 4: duplicate key 'budget'",
        ),
        (
            "s.yaml",
            "budget: 100\nsections:\n  - name: a\n    content: hi\n    pinned: true\n"
            "    pinned: false\n",
            r"invalid YAML at line 6: duplicate key 'pinned'",
        ),
        (
            "s.json",
            '{"budget": 100, "sections": [{"name": "a", "content": "x", "content": "y"}]}',
            r"invalid JSON: duplicate key 'content'",
        ),
    ],
)
def test_a_key_given_twice_is_a_spec_error(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    # the last one silently won (a second budget: replaced the first), though
    # the schema refuses unknown keys so that a typo never passes silently
    spec = tmp_path / name
    spec.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError, match=message):
        load_spec(spec)
    assert_usage_error(run("assemble", spec), "duplicate key")


def test_yaml_merge_keys_and_anchors_still_load(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "budget: 100\nsections:\n  - &a {name: a, content: hi, priority: 5}\n"
        "  - {<<: *a, name: b}\n",
        encoding="utf-8",
    )
    _, sections = load_spec(spec)
    assert [(s.name, s.content, s.priority) for s in sections] == [("a", "hi", 5), ("b", "hi", 5)]
