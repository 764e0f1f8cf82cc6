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
