"""Error bodies, one per API the service speaks, so every client reads its own.

- the REST API (``/v1/sessions…``, ``/v1/memory…``): ``{"error": {"type", "message"}}``,
  one stable shape for every status;
- the Anthropic routes (``/v1/messages…``): the Messages API's own,
  ``{"type": "error", "error": {"type", "message"}}``, with its type names
  (``invalid_request_error``, ``authentication_error``, ``not_found_error``,
  ``request_too_large``, ``api_error``, ``timeout_error``…);
- the OpenAI routes (``/v1/chat/completions``, ``/v1/responses``):
  ``{"error": {"message", "type", "param", "code"}}``.

:func:`api_of` tells which API a path belongs to; :func:`error_body` writes the
body for a status and a message in that API's shape.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["API", "api_of", "error_body", "error_type"]

API = Literal["anthropic", "openai", "rest"]

_ANTHROPIC = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_OPENAI = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    502: "server_error",
    503: "server_error",
    504: "timeout",
}
_REST = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "request_too_large",
    422: "invalid_request",
    500: "internal_error",
    502: "upstream_error",
    503: "unavailable",
    504: "upstream_timeout",
}


def api_of(path: str) -> API:
    """Which API ``path`` belongs to (its error shape)."""
    if path == "/v1/messages" or path.startswith("/v1/messages/"):
        return "anthropic"
    if path in ("/v1/chat/completions", "/v1/responses") or path.startswith("/v1/responses/"):
        return "openai"
    return "rest"


def error_type(api: API, status: int) -> str:
    """The error type name ``api`` uses for ``status``."""
    table = {"anthropic": _ANTHROPIC, "openai": _OPENAI, "rest": _REST}[api]
    if status in table:
        return table[status]
    return table[400] if 400 <= status < 500 else table[500]


def error_body(api: API, status: int, message: str, *, kind: str | None = None) -> dict[str, Any]:
    """The JSON error body ``api`` sends for ``status`` (``kind`` overrides the type)."""
    name = kind if kind is not None else error_type(api, status)
    if api == "anthropic":
        return {"type": "error", "error": {"type": name, "message": message}}
    if api == "openai":
        return {"error": {"message": message, "type": name, "param": None, "code": None}}
    return {"error": {"type": name, "message": message}}
