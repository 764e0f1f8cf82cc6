"""Router files with values the schema alone let through: refused at load, with
the ``malformed router file`` error naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxwise.errors import FormatError, UsageError
from ctxwise.routing import IntentRouter
from tests._cli import assert_usage_error, run

ROUTER: dict[str, Any] = {
    "format": "ctxwise-router",
    "version": 2,
    "scorer": {"name": "bow", "params": {}},
    "state": None,
    "calibration": {"threshold": 0.3, "margin": 0.05, "per_intent": {}},
    "max_query_chars": 20000,
    "intents": [
        {"name": "billing", "utterances": ["refund my money"], "keywords": []},
        {"name": "cancel", "utterances": ["cancel my plan"], "keywords": []},
    ],
    "negatives": [],
}

BAD = [
    ({"max_query_chars": -1}, "max_query_chars"),
    ({"max_query_chars": 0}, "max_query_chars"),
    (
        {"calibration": {"threshold": 0.3, "margin": 0.05, "per_intent": {"nope": 0.3}}},
        "calibration.per_intent.nope",
    ),
    (
        {
            "calibration": {
                "threshold": 0.3,
                "margin": 0.05,
                "per_intent": {"billing": float("nan")},
            }
        },
        "calibration.per_intent.billing",
    ),
    ({"scorer": {"name": "lexical", "params": None}}, "state"),
    ({"scorer": {"name": "embedding", "params": {"c": "abc"}}}, "scorer"),
    ({"scorer": {"name": "embedding", "params": {"c": -1}}}, "scorer"),
    ({"scorer": {"name": "embedding", "params": {"embedder": 5}}}, "scorer"),
    ({"scorer": {"name": "embedding", "params": {"embedder": ["hashing"]}}}, "scorer"),
]


def _write(tmp_path: Path, edit: dict[str, Any]) -> Path:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**ROUTER, **edit}), encoding="utf-8")
    return path


@pytest.mark.parametrize(("edit", "field"), BAD)
def test_load_refuses_the_bad_value(tmp_path: Path, edit: dict[str, Any], field: str) -> None:
    path = _write(tmp_path, edit)
    with pytest.raises(FormatError) as info:
        IntentRouter.load(path)
    assert info.value.source == str(path)
    assert info.value.detail.startswith(f"malformed router file: {field}"), info.value.detail


@pytest.mark.parametrize(("edit", "field"), BAD)
def test_cli_route_refuses_the_bad_value(tmp_path: Path, edit: dict[str, Any], field: str) -> None:
    path = _write(tmp_path, edit)
    result = run("route", path, "--query", "refund my money")
    assert_usage_error(result, "r.json", "malformed router file", field)


def test_good_values_still_load(tmp_path: Path) -> None:
    cal = {"threshold": 0.3, "margin": 0.05, "per_intent": {"billing": 0.2}}
    router = IntentRouter.load(_write(tmp_path, {"calibration": cal}))
    assert router.calibration.per_intent == {"billing": 0.2}
    assert router.route("refund my money").label == "billing"
    # a bow router has no saved parameters: "state": null is what save writes
    saved = tmp_path / "saved.json"
    router.save(saved)
    assert json.loads(saved.read_text())["state"] is None
    assert IntentRouter.load(saved).route("refund my money").label == "billing"


def test_from_dict_of_to_dict_still_refits(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    data = {**ROUTER, "scorer": {"name": "lexical", "params": None}}
    router = IntentRouter.from_dict(data)  # documented: re-fits on first use
    assert router.route("refund my money").label in {"billing", None}


@pytest.mark.parametrize("value", [-1, 0, 1.5, True, "9"])
def test_constructor_refuses_a_bad_max_query_chars(value: Any) -> None:
    with pytest.raises(UsageError, match="max_query_chars"):
        IntentRouter(max_query_chars=value)


@pytest.mark.parametrize(
    ("name", "params", "match"),
    [
        ("lexical", {"c": float("inf")}, "c must be a positive number"),
        ("lexical", {"char_ngrams": "no"}, "char_ngrams must be true or false"),
        ("hybrid", {"embedder": "hashing", "embedding_weight": float("nan")}, "embedding_weight"),
        ("hybrid", {"embedder": "hashing", "embedding_weight": -1}, "embedding_weight"),
        ("embedding", {"head": "linear", "c": float("nan")}, "c must be a positive number"),
    ],
)
def test_scorer_parameters_are_checked_before_a_fit(
    tmp_path: Path, name: str, params: dict[str, Any], match: str
) -> None:
    """Each reached scikit-learn, which raised its own error (or a NaN ValueError)
    on the first route, or was taken as true."""
    pytest.importorskip("sklearn")
    from ctxwise.routing import make_scorer

    with pytest.raises(UsageError, match=match):
        make_scorer(name, params)
    doc = {**ROUTER, "version": 1, "scorer": {"name": name, "params": params}}
    del doc["state"]
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(FormatError, match=match):
        IntentRouter.load(path)
