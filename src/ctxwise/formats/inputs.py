"""What an agent loop has at hand, as ctxwise messages.

:func:`decode_input` is how :meth:`Engine.turn <ctxwise.engine.Engine.turn>` and
:meth:`Engine.record <ctxwise.engine.Engine.record>` read their input, so a loop
passes the official SDKs' objects as they come back, without a codec call of its own:

============================================ =============================================
given                                        read as
============================================ =============================================
a ctxwise :class:`~ctxwise.messages.Message` itself
a ``str``                                    a user message of that text
an Anthropic ``Message`` (SDK object or      the assistant message
dict with ``"type": "message"``)             (:func:`ctxwise.formats.anthropic.decode_response`)
an OpenAI ``ChatCompletion`` (object or      its choice's assistant message
dict, ``"object": "chat.completion"``)       (:func:`ctxwise.formats.openai.decode_response`)
an OpenAI ``Response`` (object or dict,      its ``output`` items
``"object": "response"``)                    (:func:`ctxwise.formats.responses.to_messages`)
a :class:`~ctxwise.messages.ToolResultBlock`  a tool result; consecutive results are one
or an Anthropic ``tool_result`` block dict   user message, as the Messages API wants them
Responses API items (``function_call``,      :func:`ctxwise.formats.responses.to_messages`
``function_call_output``, ``reasoning``,
message items with ``input_text`` parts)
message dicts (``{"role": …, "content": …}``) the Anthropic or Chat Completions codec,
                                             told apart as files are (a ``tool`` role,
                                             ``tool_calls``, an OpenAI part type, …)
============================================ =============================================

A provider response keeps the usage the provider reported on the assistant message
it decodes to (:func:`response_usage` reads it): an Anthropic ``Message``'s under
``anthropic-response.usage``, a ``ChatCompletion``'s in ``openai-response.response``
(as its codec keeps every response field), a Responses API response's on its last
assistant message under :data:`RESPONSES_USAGE_KEY`. The Engine compares it with its
estimate of the request (:mod:`ctxwise.turn.calibrate`); no render sends it back.

One item of these, or a list (any iterable) of them. An SDK object is read from the
fields the API sent (the SDKs' ``to_dict()``: unset fields left out), and a block
field whose value is ``null`` is dropped from an Anthropic block, so a body dumped
with ``model_dump()`` (every optional field as ``null``: ``"caller": null`` in a
``tool_use``) does not send those nulls back. Anything else is an
:class:`~ctxwise.errors.UnsupportedInputError` naming the accepted types; a dict of
a known shape that does not decode is a :class:`~ctxwise.errors.FormatError` from
its codec. Nothing is written by a failed read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeAlias

from pydantic import BaseModel

from ctxwise.errors import FormatError, UnsupportedInputError
from ctxwise.formats import _messages_format, anthropic, openai, responses
from ctxwise.messages import Message, ToolResultBlock

__all__ = ["ACCEPTED", "RESPONSES_USAGE_KEY", "TurnInput", "decode_input", "response_usage"]

TurnInput: TypeAlias = object
"""What a turn takes: one item or an iterable of items of the kinds in the table above,
checked when it is read (the SDKs' own types are not imported to name them)."""

ACCEPTED = (
    "ctxwise Messages, str (a user message), ToolResultBlocks, an Anthropic Message, "
    "an OpenAI ChatCompletion or Response (SDK objects or their dicts), Anthropic "
    "tool_result blocks, Responses API items or message dicts, one or a list of them"
)

RESPONSES_USAGE_KEY = "openai-responses-response.usage"
"""Where a Responses API response's ``usage`` is kept: on the last assistant
message of its output (a key of no codec's namespace, so nothing sends it)."""

_RESPONSES_ITEMS = frozenset({"function_call", "function_call_output", "reasoning"})
_RESPONSES_PARTS = frozenset({"input_text", "output_text", "input_image", "input_file"})
_ANTHROPIC_MESSAGE_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
_SINGLE = (str, bytes, Message, ToolResultBlock, Mapping, BaseModel)  # a model iterates its fields


def _as_dict(value: Any) -> Any:
    """An SDK object (a pydantic model) as the JSON the API sent (unset fields left
    out, as the SDKs' own ``to_dict()`` gives it); anything else as it is."""
    if not isinstance(value, BaseModel):
        return value
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        try:
            return to_dict(mode="json")
        except TypeError:  # a to_dict of another signature: the plain dump below
            pass
    return value.model_dump(mode="json", by_alias=True, exclude_unset=True)


def _without_nulls(block: Any) -> Any:
    """An Anthropic block dict without its ``null`` fields (nested tool-result content
    too): the API reads an absent optional field as null, and refuses some nulls."""
    if not isinstance(block, Mapping):
        return block
    out = {k: v for k, v in block.items() if v is not None}
    content = out.get("content")
    if out.get("type") == "tool_result" and isinstance(content, list):
        out["content"] = [_without_nulls(b) for b in content]
    return out


def _anthropic_response(d: Mapping[str, Any]) -> dict[str, Any]:
    content = d.get("content")
    blocks = [_without_nulls(b) for b in content] if isinstance(content, list) else content
    return {**d, "content": blocks}


def _kind(value: Any) -> str:
    """Which reader takes one input item (a dict after :func:`_as_dict`)."""
    if isinstance(value, Message):
        return "message"
    if isinstance(value, str):
        return "text"
    if isinstance(value, ToolResultBlock):
        return "result"
    if not isinstance(value, Mapping):
        return "unknown"
    kind = value.get("type")
    if value.get("object") == "chat.completion":
        return "chat.completion"
    if value.get("object") == "response":
        return "response"
    if kind == "tool_result":
        return "tool_result"
    if kind in _RESPONSES_ITEMS:
        return "item"
    if kind == "message":
        content = value.get("content")
        parts = (
            {p.get("type") for p in content if isinstance(p, Mapping)}
            if isinstance(content, list)
            else set()
        )
        if (
            value.get("role") == "assistant"
            and isinstance(content, list)
            and not (parts & _RESPONSES_PARTS)
        ):
            return "anthropic.message"
        return "item"
    if "role" in value:
        content = value.get("content")
        if isinstance(content, list) and any(
            isinstance(p, Mapping) and p.get("type") in _RESPONSES_PARTS for p in content
        ):
            return "item"
        return "dict"
    return "unknown"


def _type_name(value: Any) -> str:
    if isinstance(value, Mapping):
        keys = ", ".join(sorted(map(str, value))[:6])
        return f"dict of an unknown shape (keys: {keys})" if keys else "empty dict"
    cls = type(value)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"


def _message_dicts(run: list[Mapping[str, Any]]) -> list[Message]:
    fmt, _why = _messages_format(run)
    if fmt == "openai":
        return list(openai.decode_messages(run, source="<input>").messages)
    cleaned = [
        {**m, "content": [_without_nulls(b) for b in m["content"]]}
        if isinstance(m.get("content"), list)
        else m
        for m in run
    ]
    return list(anthropic.decode_messages(cleaned, source="<input>").messages)


def decode_input(new: Any) -> list[Message]:
    """``new`` (one item or an iterable of items; see the module docstring) as
    ctxwise messages, in order."""
    if isinstance(new, _SINGLE) or not isinstance(new, Iterable):
        values: list[Any] = [new]
        single = True
    else:
        values = list(new)
        single = False
    out: list[Message] = []
    results: list[ToolResultBlock] = []
    items: list[Any] = []
    dicts: list[Mapping[str, Any]] = []
    pending = ""

    def flush(keep: str = "") -> None:
        nonlocal pending
        if pending == "result" and keep != "result" and results:
            out.append(Message("user", tuple(results)))
            results.clear()
        if pending == "item" and keep != "item" and items:
            out.extend(responses.to_messages(items))
            items.clear()
        if pending == "dict" and keep != "dict" and dicts:
            out.extend(_message_dicts(dicts))
            dicts.clear()
        pending = keep

    for index, raw in enumerate(values):
        value = _as_dict(raw)
        kind = _kind(value)
        if kind == "unknown":
            raise UnsupportedInputError(_type_name(raw), ACCEPTED, index=None if single else index)
        if kind in ("result", "tool_result"):
            flush("result")
            block = (
                value
                if isinstance(value, ToolResultBlock)
                else anthropic.decode_block(_without_nulls(value), "<input>")
            )
            assert isinstance(block, ToolResultBlock)
            results.append(block)
        elif kind == "item":
            flush("item")
            items.append(value)
        elif kind == "dict":
            flush("dict")
            dicts.append(value)
        else:
            flush()
            if kind == "message":
                out.append(value)
            elif kind == "text":
                out.append(Message.text_message("user", value))
            elif kind == "anthropic.message":
                out.append(anthropic.decode_response(_anthropic_response(value), source="<input>"))
            elif kind == "chat.completion":
                out.append(openai.decode_response(value, source="<input>"))
            else:  # a Responses API response: its output items
                output = value.get("output")
                if not isinstance(output, list):
                    raise FormatError("<input>", "a Responses API response has an 'output' list")
                decoded = responses.to_messages(output)
                usage = value.get("usage")
                last = max(
                    (i for i, m in enumerate(decoded) if m.role == "assistant"), default=None
                )
                if isinstance(usage, Mapping) and last is not None:
                    m = decoded[last]
                    decoded[last] = replace(m, extra={**m.extra, RESPONSES_USAGE_KEY: usage})
                out.extend(decoded)
    flush()
    return out


def response_usage(message: Message) -> Mapping[str, Any] | None:
    """The usage the provider reported with the response ``message`` was decoded
    from (see the module docstring), ``None`` when it carried none or ``message`` is
    no assistant message. Only a provider response's usage is read: a message read
    from a transcript file (Claude Code's ``claude_code.usage``) records the usage
    of the recording program's request, not of one the Engine built."""
    if message.role != "assistant":
        return None
    for key in ("anthropic-response.usage", RESPONSES_USAGE_KEY):
        value = message.extra.get(key)
        if isinstance(value, Mapping):
            return value
    chat = message.extra.get("openai-response.response")
    if isinstance(chat, Mapping):
        usage = chat.get("usage")
        if isinstance(usage, Mapping):
            return usage
    return None
