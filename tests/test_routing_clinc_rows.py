"""``clinc150_splits`` on small hand-made files: every row is checked before any
file is written, so bad data leaves no half-written split folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxwise.errors import FormatError
from ctxwise.routing.evaluation import clinc150_splits, load_labeled
from tests._cli import assert_usage_error, run


def _data(tmp_path: Path, **override: Any) -> Path:
    data: dict[str, Any] = {
        "train": [["book a flight", "flight"], ["play a song", "music"]],
        "val": [["fly me to rome", "flight"]],
        "test": [["put on jazz", "music"]],
        "oos_train": [["what is love", "oos"]],
        "oos_val": [["how tall is it", "oos"]],
        "oos_test": [["x", "oos"]],
    }
    data.update(override)
    path = tmp_path / "data_full.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


BAD_ROWS = [
    ("oos_test", [["x", "oos"], 5], "oos_test[1]"),
    ("oos_test", [["x", 5]], "oos_test[0]"),
    ("oos_test", [[["x"], "oos"]], "oos_test[0]"),
    ("val", [["a", "b", "c"]], "val[0]"),
    ("train", [["a", None]], "train[0]"),
    ("test", "not rows", "'test'"),
]


@pytest.mark.parametrize(("key", "rows", "where"), BAD_ROWS)
def test_a_malformed_row_is_refused_and_nothing_is_written(
    tmp_path: Path, key: str, rows: Any, where: str
) -> None:
    src = _data(tmp_path, **{key: rows})
    out = tmp_path / "out"
    with pytest.raises(FormatError) as info:
        clinc150_splits(src, out)
    assert where in str(info.value)
    assert not out.exists()


def test_a_malformed_row_leaves_an_existing_folder_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "out"
    counts = clinc150_splits(_data(tmp_path), out)
    assert counts == {"train": 3, "fit": 2, "test": 2}
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(FormatError):
        clinc150_splits(_data(tmp_path, oos_test=[["new", "oos"], 5]), out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert load_labeled(out / "test.jsonl") == [("put on jazz", "music"), ("x", "oos")]


@pytest.mark.parametrize(("key", "rows", "where"), BAD_ROWS[:3])
def test_cli_malformed_row(tmp_path: Path, key: str, rows: Any, where: str) -> None:
    out = tmp_path / "cl"
    result = run("data", "clinc150", _data(tmp_path, **{key: rows}), out)
    assert_usage_error(result, "data_full.json", where)
    assert not out.exists()


def test_an_offset_without_a_held_out_split_is_refused(tmp_path: Path) -> None:
    """It was ignored: the full split was written as if no offset had been given."""
    from ctxwise.errors import UsageError

    src = _data(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(UsageError, match="hold_out_every"):
        clinc150_splits(src, out, offset=3)
    assert_usage_error(run("data", "clinc150", src, out, "--offset", "3"), "--hold-out-every")
    assert not out.exists()
    assert clinc150_splits(src, out, hold_out_every=2, offset=1)["held_out"] == 1
