"""The memory tool as the Anthropic SDK's ``BetaAbstractMemoryTool`` (extra
``anthropic``), built on first use."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from ctxwise.errors import MissingDependencyError, UsageError

__all__ = ["adapter_class"]


@functools.cache
def adapter_class(tool_type: type[Any]) -> type[Any]:
    """The adapter class over ``tool_type`` (:class:`~ctxwise.memory_tool.MemoryTool`,
    given by its module so this one imports nothing of the tool)."""
    try:
        from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError
    except ImportError as exc:
        raise MissingDependencyError("anthropic", "anthropic", "the memory tool adapter") from exc

    class AnthropicMemoryTool(BetaAbstractMemoryTool):
        """The SDK's memory tool, delegating every command to a :class:`MemoryTool`.
        An error result is raised as the SDK's ``ToolError``, which the tool runner
        sends back with ``is_error: true``."""

        def __init__(self, memory: Any, *, cache_control: Any = None) -> None:
            if not isinstance(memory, tool_type):
                raise UsageError(f"memory must be a MemoryTool, got {type(memory).__name__}")
            super().__init__(cache_control=cache_control)
            self.memory = memory

        def _send(self, command: object) -> str:
            if not isinstance(command, Mapping):
                to_dict = getattr(command, "to_dict", None)
                command = to_dict(exclude_none=True) if callable(to_dict) else command
            result = self.memory.execute(command)
            if result.is_error:
                raise ToolError(result.text)
            text: str = result.text
            return text

        def call(self, input: object) -> str:
            # the raw input, so missing and unknown parameters are reported as such
            return self._send(input)

        def view(self, command: Any) -> str:
            return self._send(command)

        def create(self, command: Any) -> str:
            return self._send(command)

        def str_replace(self, command: Any) -> str:
            return self._send(command)

        def insert(self, command: Any) -> str:
            return self._send(command)

        def delete(self, command: Any) -> str:
            return self._send(command)

        def rename(self, command: Any) -> str:
            return self._send(command)

    AnthropicMemoryTool.__module__ = "ctxwise.memory_tool"  # its public home
    return AnthropicMemoryTool
