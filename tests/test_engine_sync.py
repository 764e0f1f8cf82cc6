"""Engine.sync: what of a framework's whole history a session has not had yet, and a
rewound or forked history refused, on real SQLite files."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ctxwise import HistoryRewoundError, SyncKeys, SyncResult
from ctxwise.config import EngineConfig
from ctxwise.engine import Engine
from ctxwise.errors import SessionConflictError, UsageError
from ctxwise.formats import read_transcript
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from ctxwise.sessions import SQLiteSessionStore

USER = Message.text_message


def _engine(tmp_path: Path, **objects: Any) -> Engine:
    config = EngineConfig.model_validate(
        {"store": f"sqlite:///{tmp_path / 'ctxwise.db'}", "budget": 4000}
    )
    return Engine(config, **objects)


def _call(id_: str, name: str = "lookup") -> Message:
    return Message("assistant", (TextBlock("Looking."), ToolUseBlock(id_, name, {"q": id_})))


def _result(id_: str, text: str) -> Message:
    return Message("user", (ToolResultBlock(id_, text),))


CONVERSATION = [
    USER("user", "Where is order 1?"),
    _call("c1"),
    _result("c1", "Order 1 shipped on Monday."),
    USER("assistant", "Order 1 shipped on Monday."),
    USER("user", "And order 2?"),
]


def _turn(engine: Engine, session: str, history: Sequence[Message]) -> SyncResult:
    """What an integration does on a model call: sync, then a turn on what is new."""
    found = engine.sync(session, history)
    engine.turn(session, found.new, expected_version=found.version, warn_unanswered=False)
    return found


def test_a_new_session_has_everything_new(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        found = engine.sync("s", CONVERSATION[:1])
    assert found == SyncResult(tuple(CONVERSATION[:1]), 0, 0, 0)


def test_each_call_gives_only_what_is_new(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        assert _turn(engine, "s", CONVERSATION[:1]).start == 0
        found = _turn(engine, "s", CONVERSATION[:3])
        assert (found.start, found.new) == (1, tuple(CONVERSATION[1:3]))
        found = _turn(engine, "s", CONVERSATION)
        assert (found.start, found.new) == (3, tuple(CONVERSATION[3:]))
        assert engine.session_messages("s") == CONVERSATION
        unchanged = engine.sync("s", CONVERSATION)
        assert unchanged.new == () and unchanged.start == len(CONVERSATION)
        assert unchanged.version == engine.sessions.version("s")
        assert unchanged.held == len(CONVERSATION)


def test_a_rewound_history_is_refused_and_nothing_recorded(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        _turn(engine, "s", CONVERSATION)
        version = engine.sessions.version("s")
        # the app takes the last answer and question out and asks something else
        rewound = [*CONVERSATION[:3], USER("user", "Cancel order 1.")]
        with pytest.raises(HistoryRewoundError, match="new session id") as info:
            engine.sync("s", rewound)
        assert (info.value.at, info.value.gone) == (2, 2)
        assert info.value.session_id == "s" and info.value.first.startswith("h:")
        assert "rewound" in str(info.value) and "Nothing was recorded" in str(info.value)
        assert engine.sessions.version("s") == version
        # the fork goes on under a session of its own
        assert engine.sync("s-fork", rewound).new == tuple(rewound)


def test_a_fork_that_changes_a_reply_is_refused(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        _turn(engine, "s", CONVERSATION)
        forked = [*CONVERSATION[:3], USER("assistant", "It is on its way."), USER("user", "ok")]
        with pytest.raises(HistoryRewoundError) as info:
            engine.sync("s", forked)
        assert info.value.gone == 2  # the answer and the question after it


def test_a_history_back_at_the_first_message_is_refused(tmp_path: Path) -> None:
    """Content keys: the session's first message and something else after it."""
    with _engine(tmp_path) as engine:
        _turn(engine, "s", CONVERSATION)
        with pytest.raises(HistoryRewoundError):
            engine.sync("s", [CONVERSATION[0], USER("user", "Cancel it.")])


def test_new_input_alone_is_new_even_when_it_repeats_the_user(tmp_path: Path) -> None:
    """A framework that passes only what this run adds: a user saying again what they
    said first is new input, not a rewind (content keys prove nothing without a
    message only a model makes)."""
    with _engine(tmp_path) as engine:
        _turn(engine, "s", CONVERSATION[:4])
        assert engine.sync("s", [USER("user", "Thanks")]).new == (USER("user", "Thanks"),)
        again = engine.sync("s", CONVERSATION[:1])
        assert again.new == tuple(CONVERSATION[:1]) and again.start == 0


def test_a_history_trimmed_at_its_start_lines_up_with_the_end(tmp_path: Path) -> None:
    """The last items only (a history read with a limit, a compacted history written
    back with a summary of its own at the start)."""
    with _engine(tmp_path) as engine:
        _turn(engine, "s", CONVERSATION)
        summary = USER("user", "Summary: order 1 shipped.")
        trimmed = [summary, *CONVERSATION[3:], USER("assistant", "Looking."), USER("user", "ok")]
        found = engine.sync("s", trimmed)
        assert found.start == 3 and found.new == tuple(trimmed[3:])


def test_system_messages_are_compared_like_any_other(tmp_path: Path) -> None:
    system = USER("system", "You are the support agent.")
    with _engine(tmp_path) as engine:
        _turn(engine, "s", [system, *CONVERSATION[:1]])
        assert engine.session_messages("s") == CONVERSATION[:1]  # a system text, not history
        found = engine.sync("s", [system, *CONVERSATION[:3]])
        assert found.start == 2
        # nothing the session holds: new input (a framework passing only that)
        other = [USER("system", "You are a pirate."), USER("user", "Hi")]
        assert engine.sync("s", other).start == 0


def _no_system(message: Message) -> tuple[str, ...]:
    return () if message.role == "system" else SyncKeys().of(message)


BODY_ONLY = SyncKeys(_no_system)


def test_messages_without_keys_are_not_compared(tmp_path: Path) -> None:
    """An integration whose system prompt changes from call to call leaves it out."""
    with _engine(tmp_path) as engine:
        engine.record("s", [USER("system", "Prompt of call 1."), *CONVERSATION[:1]])
        found = engine.sync(
            "s", [USER("system", "Prompt of call 2."), *CONVERSATION[:3]], BODY_ONLY
        )
        assert found.start == 2 and found.new == tuple(CONVERSATION[1:3])


def test_tool_results_are_new_once_and_a_changed_one_is_a_fork(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        engine.record("s", CONVERSATION[:2])  # the model's call, recorded as it came
        found = _turn(engine, "s", CONVERSATION[:3])
        assert found.new == (CONVERSATION[2],)
        other = [*CONVERSATION[:2], _result("c1", "Order 1 was lost."), CONVERSATION[3]]
        with pytest.raises(HistoryRewoundError):
            engine.sync("s", other)


def _ids(message: Message) -> tuple[str, ...]:
    return tuple(str(i) for i in message.extra.get("ids", ()))


BY_ID = SyncKeys(_ids, ids=True)


def _with_ids(message: Message, *ids: str) -> Message:
    return Message(message.role, message.content, extra={"ids": list(ids)})


def test_id_keys_prove_a_shared_history_with_one_user_message(tmp_path: Path) -> None:
    first, question = _with_ids(CONVERSATION[0], "h1"), _with_ids(CONVERSATION[4], "h2")
    answer = _with_ids(CONVERSATION[3], "a1")
    with _engine(tmp_path) as engine:
        engine.record("s", [first, answer, question])
        with pytest.raises(HistoryRewoundError):
            engine.sync("s", [first, _with_ids(USER("user", "Hi"), "h3")], BY_ID)
        # trimmed from the front is fine
        found = engine.sync("s", [question, _with_ids(USER("assistant", "ok"), "a2")], BY_ID)
        assert found.start == 1


def test_a_message_of_several_items_is_new_as_a_whole_when_some_are(tmp_path: Path) -> None:
    """One message may stand for several framework items (parallel calls stored as
    two messages): the cut is at messages, and a message only partly known is new."""
    with _engine(tmp_path) as engine:
        engine.record("s", [_with_ids(CONVERSATION[0], "h1"), _with_ids(_call("c1"), "a1")])
        grown = [_with_ids(CONVERSATION[0], "h1"), _with_ids(_call("c1"), "a1", "a2")]
        assert engine.sync("s", grown, BY_ID).start == 1
        per_item = [
            _with_ids(CONVERSATION[0], "h1"),
            _with_ids(_call("c1"), "a1"),
            USER("user", "x"),
        ]
        assert engine.sync("s", per_item, BY_ID).start == 2


@pytest.mark.parametrize("name", ["short.jsonl", "tool_heavy.jsonl", "subagent.jsonl"])
def test_real_sessions_given_whole_on_every_model_call(
    data_dir: Path, tmp_path: Path, name: str
) -> None:
    """A Claude Code session handed over whole before each model call (every assistant
    message): each call gives exactly the messages since the last, the session ends up
    holding the transcript, and the history cut before its last exchange is refused."""
    messages = list(read_transcript(data_dir / "transcripts" / "claude_code" / name).messages)
    calls = [i for i, m in enumerate(messages) if m.role == "assistant" and i > 0]
    with _engine(tmp_path) as engine:
        last = 0
        for i in [*calls, len(messages)]:
            found = engine.sync("s", messages[:i])
            assert (found.start, found.new) == (last, tuple(messages[last:i]))
            engine.record("s", found.new)
            last = i
        assert engine.sync("s", messages).new == ()
        cut = calls[-1]
        with pytest.raises(HistoryRewoundError):
            engine.sync("s", [*messages[:cut], USER("assistant", "A reply of another branch.")])


class CountingStore(SQLiteSessionStore):
    """A real SQLite session store that counts the log rows it reads."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.rows_read = 0

    def log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        rows = super().log(session_id, start, stop)
        self.rows_read += len(rows)
        return rows


def test_each_call_reads_only_the_log_rows_written_since_the_last(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "sessions.db")
    history: list[Message] = []
    with _engine(tmp_path, sessions=store) as engine:
        for n in range(30):
            history += [USER("user", f"question {n}"), USER("assistant", f"answer {n}")]
            _turn(engine, "s", history)
            _turn(engine, "s", history)  # nothing new: no row read
        assert store.rows_read == len(history)  # each row once, over 60 calls
    store.close()


def test_another_writer_on_the_same_store_is_seen(tmp_path: Path) -> None:
    with _engine(tmp_path) as first, _engine(tmp_path) as second:
        _turn(first, "s", CONVERSATION[:3])
        _turn(second, "s", CONVERSATION)  # the other worker moved the session on
        found = first.sync("s", [*CONVERSATION, USER("assistant", "It ships today.")])
        assert found.start == len(CONVERSATION)
        with pytest.raises(HistoryRewoundError):
            first.sync("s", CONVERSATION[:3])


def test_the_version_it_gives_catches_a_writer_in_between(tmp_path: Path) -> None:
    with _engine(tmp_path) as first, _engine(tmp_path) as second:
        _turn(first, "s", CONVERSATION[:1])
        found = first.sync("s", CONVERSATION[:3])
        _turn(second, "s", CONVERSATION[:3])
        with pytest.raises(SessionConflictError):
            first.turn("s", found.new, expected_version=found.version)
        assert first.sync("s", CONVERSATION[:3]).new == ()


@pytest.mark.parametrize(
    ("history", "keys", "said"),
    [
        ("Where is order 1?", None, "sequence of Messages"),
        (CONVERSATION[0], None, "sequence of Messages"),
        ([CONVERSATION[0], {"role": "user"}], None, r"full_history\[1\] is a dict"),
        (CONVERSATION, _ids, "keys is a SyncKeys"),
    ],
)
def test_bad_input_is_named_and_nothing_read(
    tmp_path: Path, history: Any, keys: Any, said: str
) -> None:
    with _engine(tmp_path) as engine, pytest.raises(UsageError, match=said):
        engine.sync("s", history, keys)


def test_the_error_pickles_with_its_fields() -> None:
    error = HistoryRewoundError("s", at=3, gone=2, first="id:m5")
    again = pickle.loads(pickle.dumps(error))
    assert (again.at, again.gone, again.first, str(again)) == (3, 2, "id:m5", str(error))
