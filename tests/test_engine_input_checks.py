"""Bad input to the Engine is a typed error (UsageError / ConfigError) and writes nothing."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from ctxwise.config import EngineConfig
from ctxwise.engine import Engine
from ctxwise.errors import ConfigError, UnknownSessionError, UsageError
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from ctxwise.tools import ResultStore

KEY = b"k" * 32


def _engine(tmp_path: Path, **overrides: Any) -> Engine:
    config = EngineConfig.model_validate(
        {
            "store": f"sqlite:///{tmp_path / 'ctxwise.db'}",
            "budget": 4000,
            "system": "You are the support agent of Northwind.",
            **overrides,
        }
    )
    return Engine(config)


def _use(input_: Any, id_: str = "toolu_1") -> Message:
    return Message("assistant", (ToolUseBlock(id_, "lookup", input_),))


BAD_TURNS: list[tuple[Any, str]] = [
    (None, "new_messages is a NoneType; a turn takes ctxwise Messages, str"),
    (42, "new_messages is a int; a turn takes"),
    (b"raw", "new_messages is a bytes; a turn takes"),
    ([Message.text_message("user", "hi"), 3.5], r"new_messages\[1\] is a float; a turn takes"),
    ({"role": "user"}, r"message 0"),
    ([Message("user", "hello")], r"new_messages\[0\]: content is a str"),  # type: ignore[arg-type]
    ([Message.text_message("user", None)], r"new_messages\[0\]: content\[0\].*TextBlock"),  # type: ignore[arg-type]
    ([Message.text_message("tool", "x")], r"new_messages\[0\]: role 'tool'"),  # type: ignore[arg-type]
    (
        [Message.text_message("user", "hi"), _use(None)],
        r"new_messages\[1\]: content\[0\].*input is a NoneType",
    ),
    ([_use({"a": object()})], r"new_messages\[0\].*not JSON data"),
    ([_use({}, id_="")], r"new_messages\[0\].*empty or non-string id"),
    (
        [_use({}), Message("user", (ToolResultBlock("toolu_1", None),))],  # type: ignore[arg-type]
        r"new_messages\[1\]: content\[0\].*content is a NoneType",
    ),
    (
        [_use({}), Message("user", (ToolResultBlock("", "ok"),))],
        r"new_messages\[1\].*empty or non-string tool_use_id",
    ),
    (
        [Message("user", (ToolResultBlock("toolu_1", (TextBlock(3),)),))],  # type: ignore[arg-type]
        r"new_messages\[0\]: content\[0\]\.content\[0\]",
    ),
    ([Message("user", ("hi",))], r"new_messages\[0\]: content\[0\] is a str"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("messages", "match"), BAD_TURNS)
def test_a_malformed_message_is_a_usage_error_naming_it_and_nothing_is_written(
    tmp_path: Path, messages: Any, match: str
) -> None:
    with _engine(tmp_path) as engine:
        with pytest.raises(UsageError, match=match):
            engine.turn("s", messages)
        with pytest.raises(UsageError, match=match):
            engine.record("s", messages)
        assert engine.sessions.version("s") == 0
        engine.turn("t", [Message.text_message("user", "hello")])
        with pytest.raises(UsageError, match=match):
            engine.turn("t", messages)
        assert engine.sessions.version("t") == 1


def test_well_formed_tool_messages_still_pass(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        engine.turn("s", [Message.text_message("user", "look it up")])
        result = ToolResultBlock("toolu_1", (TextBlock("found"),), is_error=False)
        engine.turn("s", [_use({"q": [1, "x", None]}), Message("user", (result,))])
        assert engine.sessions.version("s") == 2


@pytest.mark.parametrize("bad", ["1", -1, True, False, 1.0])
def test_expected_version_must_be_a_non_negative_int(tmp_path: Path, bad: Any) -> None:
    with _engine(tmp_path) as engine:
        engine.turn("s", [Message.text_message("user", "hello")])
        with pytest.raises(UsageError, match="expected_version"):
            engine.turn("s", [Message.text_message("user", "again")], expected_version=bad)
        assert engine.sessions.version("s") == 1
        reply = Message.text_message("assistant", "hi")
        engine.turn("s", [reply, Message.text_message("user", "again")], expected_version=1)


@pytest.mark.parametrize("bad", [datetime.date(2026, 1, 1), b"raw", {1, 2}, {"when": object()}])
@pytest.mark.parametrize("is_error", [False, True])
def test_a_tool_result_that_is_not_json_is_a_usage_error(
    tmp_path: Path, bad: Any, is_error: bool
) -> None:
    with _engine(tmp_path) as engine:
        engine.turn("s", [Message.text_message("user", "hello")])
        use = ToolUseBlock("toolu_1", "lookup", {})
        with pytest.raises(UsageError, match="not JSON-serialisable"):
            engine.tool_result("s", use, bad, is_error=is_error)
        # text is kept as it is, JSON data is written as JSON
        assert engine.tool_result("s", use, "plain text").content == "plain text"
        assert engine.tool_result("s", use, {"a": [1]}).content == '{"a": [1]}'


def _tool_engine(tmp_path: Path) -> Engine:
    config = EngineConfig.model_validate(
        {
            "store": f"sqlite:///{tmp_path / 'ctxwise.db'}",
            "budget": 60_000,
            "memory_tool": {"enabled": True},
            "tool_results": {"store_over": 400},
        }
    )
    return Engine(config, results=ResultStore(KEY, clock=lambda: 1000.0))


BAD_CALLS = [
    ToolUseBlock("m1", "memory", None),  # type: ignore[arg-type]
    ToolUseBlock("m2", "memory", {"command": "view", "path": "/etc/passwd"}),
    ToolUseBlock("f1", "fetch_more", {}),
    ToolUseBlock("f2", "fetch_more", None),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("call", BAD_CALLS, ids=lambda c: c.id)
def test_a_bad_ctxwise_tool_call_on_an_unknown_session_writes_nothing(
    tmp_path: Path, call: ToolUseBlock
) -> None:
    with _tool_engine(tmp_path) as engine:
        out = engine.run_tool("ghost", call)
        assert out is not None and out.is_error and out.tool_use_id == call.id
        assert engine.sessions.version("ghost") == 0
        with pytest.raises(UnknownSessionError):
            engine.check_tool("ghost", call.name, {})


def test_a_malformed_call_on_an_existing_session_gets_an_error_and_writes_nothing(
    tmp_path: Path,
) -> None:
    with _tool_engine(tmp_path) as engine:
        engine.turn("s", [Message.text_message("user", "hello")])
        out = engine.run_tool("s", ToolUseBlock("m1", "memory", None))  # type: ignore[arg-type]
        assert out is not None and out.is_error
        assert engine.sessions.version("s") == 1
        # a well-formed call on a new session still runs (and creates it)
        create = {"command": "create", "path": "/memories/a.md", "file_text": "x\n"}
        done = engine.run_tool("n", ToolUseBlock("m2", "memory", create))
        assert done is not None and not done.is_error
        assert engine.sessions.version("n") == 1


@pytest.mark.parametrize("text", ["{not json", "[1, 2", '{"version": 1, "rules": [{"kind": "?"}]}'])
def test_a_corrupt_gate_file_is_a_config_error_naming_the_file(tmp_path: Path, text: str) -> None:
    gates = tmp_path / "gates.json"
    gates.write_text(text)
    toml = tmp_path / "ctxwise.toml"
    toml.write_text('store = "memory"\n[gates]\nfile = "gates.json"\n')
    with pytest.raises(ConfigError) as caught:
        Engine.from_file(str(toml))
    assert str(gates) in str(caught.value) and "gates.file" in str(caught.value)


@pytest.mark.parametrize("is_error", [False, True])
def test_a_tool_result_over_max_chars_is_refused_naming_the_limit(
    tmp_path: Path, is_error: bool
) -> None:
    """The largest tool result the Engine accepts is ``[tool_results] max_chars``
    (issue 33): a larger one, text or JSON, is refused in one line that names it."""
    with _engine(tmp_path, tool_results={"max_chars": 100}) as engine:
        engine.turn("s", [Message.text_message("user", "hello")])
        use = ToolUseBlock("toolu_1", "lookup", {})
        assert engine.tool_result("s", use, "x" * 100, is_error=is_error).content == "x" * 100
        for big in ("x" * 101, {"rows": ["y" * 90]}):
            with pytest.raises(UsageError) as info:
                engine.tool_result("s", use, big, is_error=is_error)
            message = str(info.value)
            assert "over the limit of 100" in message and "tool_results.max_chars" in message
            assert "\n" not in message
    with _engine(tmp_path, tool_results={"max_chars": 0}) as engine:  # 0: no limit
        engine.turn("t", [Message.text_message("user", "hello")])
        assert len(str(engine.tool_result("t", use, "z" * 100_000).content)) == 100_000


def test_a_catalog_over_max_catalog_bytes_is_a_config_error_naming_the_key(
    tmp_path: Path,
) -> None:
    catalog = tmp_path / "tools.json"
    tools = [
        {"name": f"t{i}", "description": "d", "input_schema": {"type": "object"}} for i in range(9)
    ]
    catalog.write_text(json.dumps(tools), encoding="utf-8")
    size = catalog.stat().st_size
    with pytest.raises(ConfigError) as info:
        _engine(tmp_path, tools={"catalog": str(catalog), "max_catalog_bytes": size - 1})
    assert "tools.catalog" in str(info.value) and "tools.max_catalog_bytes" in str(info.value)
    with _engine(tmp_path, tools={"catalog": str(catalog), "max_catalog_bytes": size}) as engine:
        assert engine.catalog is not None and len(engine.catalog) == 9
