"""decode_input: what a loop has at hand (SDK objects, their dicts, tool results, text)
as ctxwise messages, and the Engine taking them straight."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from ctxwise import Engine, EngineConfig, Message
from ctxwise.errors import FormatError, UnansweredTurnWarning, UnsupportedInputError
from ctxwise.formats.inputs import decode_input
from ctxwise.messages import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from tests._http import anthropic_message, http_module, mock_client, openai_completion

TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "lookup_order", "input": {"id": "4417"}}

RESPONSE_BODY: dict[str, Any] = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1741476542,
    "status": "completed",
    "model": "gpt-4.1",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Look."}]},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "lookup_order",
            "arguments": '{"id":"4417"}',
            "status": "completed",
        },
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "error": None,
    "incomplete_details": None,
    "instructions": None,
    "metadata": {},
    "usage": {"input_tokens": 36, "output_tokens": 87, "total_tokens": 123},
}

COMPLETION_MESSAGE = {
    "role": "assistant",
    "content": None,
    "refusal": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "lookup_order", "arguments": '{"id": "4417"}'},
        }
    ],
}


def _sdk_object(sdk: str, body: dict[str, Any]) -> Any:
    """The object the official SDK returns for ``body`` (over a mock transport)."""
    client = mock_client(sdk, lambda request: http_module(sdk).Response(200, json=body))
    if sdk == "anthropic":
        import anthropic

        api = anthropic.Anthropic(api_key="test", http_client=client)
        return api.messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "q"}]
        )
    import openai

    oai = openai.OpenAI(api_key="test", http_client=client)
    if body.get("object") == "response":
        return oai.responses.create(model="m", input="q")
    return oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])


def test_an_anthropic_sdk_message_is_its_assistant_message_without_null_fields() -> None:
    pytest.importorskip("anthropic")
    response = _sdk_object("anthropic", anthropic_message([TOOL_USE], "tool_use"))
    for given in (response, response.model_dump(), response.model_dump(mode="json")):
        (message,) = decode_input(given)
        assert message.role == "assistant"
        (use,) = message.content
        assert isinstance(use, ToolUseBlock)
        assert (use.id, use.name, dict(use.input)) == ("toolu_1", "lookup_order", {"id": "4417"})
        # model_dump() writes every optional field as null ("caller", "toolset_name"):
        # none of them goes back to the API
        assert all(value is not None for value in use.extra.values()), use.extra


def test_an_openai_chat_completion_object_and_its_dict() -> None:
    pytest.importorskip("openai")
    body = openai_completion(
        [{"index": 0, "message": COMPLETION_MESSAGE, "finish_reason": "tool_calls"}]
    )
    completion = _sdk_object("openai", body)
    for given in (completion, body):
        (message,) = decode_input(given)
        (use,) = message.content
        assert isinstance(use, ToolUseBlock) and use.id == "call_1"
        assert dict(use.input) == {"id": "4417"}


def test_an_openai_responses_response_is_its_output_items() -> None:
    pytest.importorskip("openai")
    response = _sdk_object("openai", RESPONSE_BODY)
    for given in (response, RESPONSE_BODY):
        (message,) = decode_input(given)
        assert message.role == "assistant"
        thinking, use = message.content
        assert isinstance(thinking, ThinkingBlock) and thinking.thinking == "Look."
        assert isinstance(use, ToolUseBlock) and use.id == "call_1"
    output = {"type": "function_call_output", "call_id": "call_1", "output": "delivered"}
    _, results = decode_input([response, output])
    (result,) = results.content
    assert isinstance(result, ToolResultBlock) and result.content == "delivered"


def test_text_and_tool_results_group_as_a_loop_needs_them() -> None:
    use = Message("assistant", (ToolUseBlock("t1", "a", {}), ToolUseBlock("t2", "b", {})))
    first = ToolResultBlock("t1", "one")
    second = {"type": "tool_result", "tool_use_id": "t2", "content": "two", "is_error": None}
    out = decode_input([use, first, second, "and then?"])
    assert [m.role for m in out] == ["assistant", "user", "user"]
    assert [b.tool_use_id for b in out[1].content if isinstance(b, ToolResultBlock)] == ["t1", "t2"]
    assert out[2].content == (TextBlock("and then?"),)
    assert decode_input("hello") == [Message.text_message("user", "hello")]
    assert decode_input(Message.text_message("user", "hi")) == [Message.text_message("user", "hi")]


def test_message_dicts_of_either_provider() -> None:
    anthropic_dicts = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{**TOOL_USE, "caller": None}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
        },
    ]
    out = decode_input(anthropic_dicts)
    assert [m.role for m in out] == ["user", "assistant", "user"]
    assert "anthropic.caller" not in out[1].content[0].extra
    openai_dicts = [
        {"role": "user", "content": "q"},
        COMPLETION_MESSAGE,
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]
    out = decode_input(openai_dicts)
    assert [m.role for m in out] == ["user", "assistant", "user"]
    assert isinstance(out[2].content[0], ToolResultBlock)


@pytest.mark.parametrize(
    ("given", "match"),
    [
        (3, r"^<input>: new_messages is a int; a turn takes ctxwise Messages"),
        (None, r"new_messages is a NoneType"),
        (["ok", object()], r"new_messages\[1\] is a object"),
        ({"hello": 1}, r"dict of an unknown shape \(keys: hello\)"),
        (Path("x.json"), r"new_messages is a pathlib\.\w*Path"),
    ],
)
def test_an_unknown_type_is_refused_naming_what_is_taken(given: Any, match: str) -> None:
    with pytest.raises(UnsupportedInputError, match=match) as info:
        decode_input(given)
    assert "OpenAI ChatCompletion or Response" in str(info.value)


def test_a_known_shape_that_does_not_decode_is_a_format_error() -> None:
    with pytest.raises(FormatError, match="output"):
        decode_input({"object": "response", "output": None})
    with pytest.raises(FormatError):
        decode_input({"type": "message", "role": "assistant", "content": [{"type": 3}]})


def _engine(tmp_path: Path, **config: Any) -> Engine:
    return Engine(EngineConfig(store=f"sqlite:///{tmp_path / 'ctxwise.db'}", budget=6000, **config))


def test_the_engine_takes_sdk_objects_and_the_answer_is_recorded(tmp_path: Path) -> None:
    pytest.importorskip("anthropic")
    call = _sdk_object("anthropic", anthropic_message([TOOL_USE], "tool_use"))
    answer = _sdk_object("anthropic", anthropic_message([{"type": "text", "text": "Delivered."}]))
    with _engine(tmp_path) as engine:
        engine.turn("s", "Where is order 4417?")
        result = engine.turn("s", [call, ToolResultBlock("toolu_1", "delivered on 2 May")])
        sent = json.dumps(result.request)
        assert '"caller"' not in sent and '"toolset_name"' not in sent
        engine.record("s", answer)
        roles = [m.role for m in engine.session_messages("s")]
        assert roles == ["user", "assistant", "user", "assistant"]


def test_a_turn_that_leaves_the_previous_request_unanswered_warns(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        engine.turn("s", "first question")
        with pytest.warns(UnansweredTurnWarning, match="session 's'") as caught:
            engine.turn("s", "second question")
        assert caught[0].message.session_id == "s"  # type: ignore[union-attr]
        # answered: no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            engine.turn("s", [Message.text_message("assistant", "ok"), "third"])
            engine.record("s", Message.text_message("assistant", "done"))
            engine.turn("s", "fourth")
