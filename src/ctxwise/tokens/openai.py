"""OpenAI Chat Completions counts: exact BPE plus the documented framing overheads.

OpenAI's cookbook ("How to count tokens with tiktoken", sections 6 and 7) gives the
rules its own examples match against ``usage.prompt_tokens``:

- every message costs ``3`` tokens of framing plus the tokens of its role and its
  content, and its ``name``'s tokens plus ``1`` more when it carries one;
- every reply is primed with ``<|start|>assistant<|message|>``: ``3`` tokens per
  request;
- function definitions passed as ``tools`` are rewritten into a system-prompt
  form: per function ``func_init`` (``7`` on the ``o200k_base`` models, ``10`` on
  ``gpt-4`` and ``gpt-3.5-turbo``) plus ``name:description`` (a trailing period
  dropped); when it has properties ``prop_init`` (``3``) and per property
  ``prop_key`` (``3``) plus ``name:type:description``, and per enum ``enum_init``
  (``-3``) plus ``enum_item`` (``3``) and the item's tokens for each item; and
  ``func_end`` (``12``) once for the list.

The cookbook documents no rule for tool calls inside messages: an assistant's
call is counted as its name and compact JSON arguments
(:func:`ctxwise.messages.block_text`), a tool result as its text, each inside
its message's framing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxwise.errors import UsageError
from ctxwise.messages import Message
from ctxwise.tokens._base import TiktokenBackend, TiktokenCounter

__all__ = ["OPENAI_CL100K_TOOLS", "OPENAI_O200K_TOOLS", "OpenAIChatCounter", "OpenAIToolOverheads"]


@dataclass(frozen=True, slots=True)
class OpenAIToolOverheads:
    """The cookbook's per-definition constants (see the module docstring)."""

    func_init: int
    prop_init: int = 3
    prop_key: int = 3
    enum_init: int = -3
    enum_item: int = 3
    func_end: int = 12


OPENAI_O200K_TOOLS = OpenAIToolOverheads(func_init=7)
"""The cookbook's constants for ``gpt-4o`` and ``gpt-4o-mini`` (``o200k_base``)."""
OPENAI_CL100K_TOOLS = OpenAIToolOverheads(func_init=10)
"""The cookbook's constants for ``gpt-4`` and ``gpt-3.5-turbo`` (``cl100k_base``)."""


def openai_encoding(model: str) -> str | None:
    """The BPE encoding of an OpenAI chat model name, ``None`` when it is not one.

    ``gpt-4o``, ``gpt-4.1``, ``gpt-4.5``, ``gpt-5``, ``chatgpt-4o`` and the
    reasoning models ``o1``, ``o3``, ``o4`` use ``o200k_base``; ``gpt-4`` and
    ``gpt-3.5`` use ``cl100k_base`` (as ``tiktoken.encoding_for_model`` maps them).
    A provider prefix (``openai/gpt-4o``) is ignored.
    """
    name = model.strip().lower().rsplit("/", 1)[-1]
    if name.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o", "gpt-oss")):
        return "o200k_base"
    if name[:2] in ("o1", "o3", "o4") and (len(name) == 2 or name[2] == "-"):
        return "o200k_base"
    if name.startswith(("gpt-4", "gpt-3.5", "gpt-35")):
        return "cl100k_base"
    return None


class OpenAIChatCounter(TiktokenCounter):
    """Exact counts for an OpenAI chat model: :class:`TiktokenCounter` with the
    encoding the model uses and the cookbook's message, name and tool overheads
    (see the module docstring). ``count_tools`` counts a ``tools`` list. The
    per-message and per-request overheads are :class:`TiktokenCounter`'s."""

    name_overhead = 1

    def __init__(
        self,
        model: str = "gpt-4o",
        *,
        backend: TiktokenBackend = "auto",
        cache_size: int = 65536,
    ) -> None:
        encoding = openai_encoding(model)
        if encoding is None:
            raise UsageError(
                f"{model!r} is not an OpenAI chat model name (gpt-4o, gpt-4.1, gpt-5, o3, "
                "gpt-4, gpt-3.5-turbo, ...)"
            )
        super().__init__(encoding, backend=backend, cache_size=cache_size)
        self.model = model
        self.tool_overheads = (
            OPENAI_O200K_TOOLS if encoding == "o200k_base" else OPENAI_CL100K_TOOLS
        )

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    def count_messages(self, messages: Sequence[Message]) -> int:
        if not messages:
            return 0
        total = self.request_overhead
        for m in messages:
            total += self.message_overhead + self.count(m.role) + self.count_block_text(m)
            name = m.extra.get("openai.name", m.extra.get("name"))
            if isinstance(name, str) and name:
                total += self.count(name) + self.name_overhead
        return total

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """The tokens a ``tools`` list adds to a request, by the cookbook's rule.

        Each item is a Chat Completions tool (``{"type": "function", "function":
        {...}}``) or a bare function (``{"name", "description", "parameters"}``);
        an Anthropic-style ``input_schema`` is read as ``parameters``. A property
        without a ``type`` or a ``description`` counts them as empty; a property
        whose type is a list (``["string", "null"]``) counts its JSON.
        """
        if not tools:
            return 0
        k = self.tool_overheads
        total = 0
        for tool in tools:
            fn = tool.get("function", tool)
            if not isinstance(fn, Mapping):
                raise UsageError(f"a tool must be an object, got {type(fn).__name__}")
            total += k.func_init
            desc = _str(fn.get("description")).removesuffix(".")
            total += self.count(f"{_str(fn.get('name'))}:{desc}")
            params = fn.get("parameters", fn.get("input_schema"))
            props = params.get("properties") if isinstance(params, Mapping) else None
            if not isinstance(props, Mapping) or not props:
                continue
            total += k.prop_init
            for key, schema in props.items():
                total += k.prop_key
                spec = schema if isinstance(schema, Mapping) else {}
                enum = spec.get("enum")
                if isinstance(enum, list):
                    total += k.enum_init
                    for item in enum:
                        total += k.enum_item + self.count(_str(item))
                p_type = spec.get("type", "")
                type_text = p_type if isinstance(p_type, str) else json.dumps(p_type)
                p_desc = _str(spec.get("description")).removesuffix(".")
                total += self.count(f"{key}:{type_text}:{p_desc}")
        return total + k.func_end

    def __repr__(self) -> str:
        return f"OpenAIChatCounter({self.model!r}, backend={self.backend!r})"


def _str(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value, ensure_ascii=False)
