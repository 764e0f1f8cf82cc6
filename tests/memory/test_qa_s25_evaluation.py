"""Evaluation files the project was not built on: malformed turns and questions are
refused by ``load_conversations`` and ``ctxwise eval memory`` before anything is
written, in one line naming the file and the turn or question."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxwise.errors import FormatError, UsageError
from ctxwise.memory import SQLiteStore
from ctxwise.memory.evaluation import load_conversations
from tests._cli import assert_usage_error, run


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _conv(turns: list[Any], questions: list[Any]) -> dict[str, Any]:
    return {"conversations": [{"id": "c", "turns": turns, "questions": questions}]}


def _refused(tmp_path: Path, data: object, *words: str) -> None:
    """Refused by the loader (FormatError naming the file) and by the CLI (exit 2,
    one line), and nothing is written to the store."""
    path = _write(tmp_path, data)
    with pytest.raises(FormatError) as err:
        load_conversations(path)
    for word in (str(path), *words):
        assert word in str(err.value)
    db = tmp_path / "eval.db"
    assert_usage_error(
        run("eval", "memory", "--data", path, "--store", f"sqlite:///{db}"), str(path), *words
    )
    if db.exists():
        store = SQLiteStore(db)
        try:
            assert store.namespaces() == []
        finally:
            store.close()


def test_two_turns_with_one_id_are_refused(tmp_path: Path) -> None:
    """The second turn replaced the first in the store (evidence 'a' then named the
    dog turn) and a rerun on the same SQLite file was refused as 'holds items that
    are not this data's turns'."""
    data = _conv(
        [
            {"id": "a", "speaker": "Ann", "text": "I like apples"},
            {"id": "b", "speaker": "Bob", "text": "I like pears"},
            {"id": "a", "speaker": "Ann", "text": "I walk my dog"},
        ],
        [{"question": "who likes apples?", "evidence": ["a"]}],
    )
    _refused(tmp_path, data, "conversation 'c'", "two turns have the id 'a'")


def test_turn_ids_that_are_one_string_are_duplicates(tmp_path: Path) -> None:
    data = _conv(
        [{"id": 1, "text": "I like apples"}, {"id": "1", "text": "I like pears"}],
        [{"question": "apples?", "evidence": [1]}],
    )
    _refused(tmp_path, data, "two turns have the id '1'")


@pytest.mark.parametrize("text", [{"en": "I like apples"}, ["I", "like"], 42, True])
def test_a_turn_whose_text_is_not_a_string_is_refused(tmp_path: Path, text: object) -> None:
    """It was remembered as its Python repr ("Ann: {'en': 'I like apples'}")."""
    data = _conv(
        [{"id": "a", "speaker": "Ann", "text": "I like pears"}, {"id": "b", "text": text}],
        [{"question": "pears?", "evidence": ["a"]}],
    )
    _refused(tmp_path, data, "conversation 'c'", "turn 'b'", "not a string")


def test_a_turn_whose_text_is_null_has_no_text(tmp_path: Path) -> None:
    """It was remembered as the word 'None' (and recalled for a question about None)."""
    from ctxwise.memory.evaluation import turn_items

    data = _conv(
        [{"id": "a", "speaker": "Ann", "text": "I like pears"}, {"id": "b", "text": None}],
        [{"question": "pears?", "evidence": ["a"]}],
    )
    conversation = load_conversations(_write(tmp_path, data))["conversations"][0]
    assert [(it.id, it.text) for it in turn_items(conversation)] == [("a", "Ann: I like pears")]


@pytest.mark.parametrize("turn_id", ["", "  ", True])
def test_a_turn_id_that_names_nothing_is_refused(tmp_path: Path, turn_id: object) -> None:
    """An empty id made the store assign one, so evidence [''] was never found and
    recall was 0 without a word; true was read as the turn 'True'."""
    data = _conv(
        [{"id": turn_id, "speaker": "Ann", "text": "the secret code is pineapple"}],
        [{"question": "what is the secret code?", "evidence": [str(turn_id)]}],
    )
    _refused(tmp_path, data, "conversation 'c'", "non-empty string or an integer")


@pytest.mark.parametrize("question", ["", " \n\t"])
def test_a_blank_question_is_refused_before_anything_is_written(
    tmp_path: Path, question: str
) -> None:
    """It was 'empty query: there is nothing to recall', naming neither the file nor
    the question, raised after the conversations before it had been written."""
    ok = _conv(
        [{"id": "a", "text": "the secret code is pineapple"}],
        [{"question": "what is the secret code?", "evidence": ["a"]}],
    )["conversations"][0]
    data = {
        "conversations": [
            {**ok, "id": "first"},
            {**ok, "id": "second", "questions": [{"question": question, "evidence": ["a"]}]},
        ]
    }
    _refused(tmp_path, data, "conversation 'second'", "question 1 has no text")


@pytest.mark.parametrize("ks", [("5",), (1, "10"), "15", (1.5,), (True,), (0,), ()])
def test_k_values_that_are_not_positive_integers_are_a_usage_error(ks: Any) -> None:
    """('5',) raised TypeError comparing str and int; (1.5,) and (True,) were caught
    only by recall itself, after the conversation had been remembered."""
    from ctxwise.memory.evaluation import evaluate_recall

    data = _conv(
        [{"id": "a", "text": "the secret code is pineapple"}],
        [{"question": "what is the secret code?", "evidence": ["a"]}],
    )
    opened: list[object] = []

    def factory() -> SQLiteStore:
        opened.append(1)
        return SQLiteStore(":memory:")

    with pytest.raises(UsageError, match="k values must be positive integers"):
        evaluate_recall(data, ks, store_factory=factory)
    assert opened == []  # refused before a store was opened


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        ({"samples": []}, "LoCoMo data is a list of samples"),
        ([{"sample_id": "s1", "qa": []}], "a sample has no 'conversation'"),
    ],
    ids=["not-a-list", "no-conversation"],
)
def test_a_file_that_is_not_locomo_is_named_in_the_error(
    tmp_path: Path, data: object, detail: str
) -> None:
    """The line said 'locomo: LoCoMo data is a list of samples', naming no file."""
    _refused(tmp_path, data, "not LoCoMo or generic conversations", detail)


def test_a_locomo_turn_that_only_shares_an_image_is_its_caption() -> None:
    """A turn with text null (or none) and a caption was remembered as
    'None [shares a photo of a dog]'."""
    from ctxwise.memory.evaluation import locomo_to_generic

    turns = [
        {"speaker": "A", "dia_id": "D1:1", "text": None, "blip_caption": "a photo of a dog"},
        {"speaker": "B", "dia_id": "D1:2", "blip_caption": "a cat"},
        {"speaker": "A", "dia_id": "D1:3", "text": "Rex!", "blip_caption": "a dog"},
    ]
    sample = {"sample_id": "s", "conversation": {"session_1": turns}, "qa": []}
    got = locomo_to_generic([sample])["conversations"][0]["turns"]
    assert [t["text"] for t in got] == [
        "[shares a photo of a dog]",
        "[shares a cat]",
        "Rex! [shares a dog]",
    ]


@pytest.mark.parametrize("conversation_id", ["team/a", "nul\x00", "x" * 1300, ""])
def test_a_conversation_id_no_namespace_can_hold_is_refused_naming_it(
    tmp_path: Path, conversation_id: str
) -> None:
    """evaluate_recall raised "bad namespace part 'team/a'", which names no
    conversation, after opening the store; eval handoff, which needs no namespace,
    still takes such an id."""
    data = _conv(
        [{"id": "a", "text": "the secret code is pineapple"}],
        [{"question": "what is the secret code?", "evidence": ["a"]}],
    )
    data["conversations"][0]["id"] = conversation_id
    path = _write(tmp_path, data)
    db = tmp_path / "eval.db"
    assert_usage_error(
        run("eval", "memory", "--data", path, "--store", f"sqlite:///{db}"),
        "conversation 1's id",
        "cannot name its namespace eval/<id>",
    )
    assert not db.exists()  # refused before the store was opened
    handoff = run("eval", "handoff", "--data", path, "--json")
    assert handoff.exit_code == 0, handoff.stderr
