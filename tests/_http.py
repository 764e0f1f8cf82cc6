"""Mock HTTP for the provider SDKs: the providers cannot be reached from CI.

The official SDKs moved from ``httpx`` to its fork ``httpx2`` (same API); the mock
transport must come from the module the installed SDK uses.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any


def http_module(sdk: str) -> ModuleType:
    requires = importlib.metadata.requires(sdk) or []
    uses_httpx2 = any(re.match(r"httpx2\b", r) for r in requires)
    return importlib.import_module("httpx2" if uses_httpx2 else "httpx")


def mock_client(sdk: str, handler: Callable[[Any], Any]) -> Any:
    http = http_module(sdk)
    return http.Client(transport=http.MockTransport(handler))


def response(sdk: str, status: int, payload: Any) -> Any:
    return http_module(sdk).Response(status, json=payload)


def anthropic_message(content: Any, stop_reason: str = "end_turn") -> dict[str, Any]:
    """A Messages API response body, as Anthropic documents it."""
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 3},
    }


def openai_completion(choices: Any, completion_tokens: int = 1) -> dict[str, Any]:
    """A Chat Completions response body, as OpenAI documents it."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini",
        "choices": choices,
        "usage": {
            "prompt_tokens": 40,
            "completion_tokens": completion_tokens,
            "total_tokens": 40 + completion_tokens,
        },
    }
