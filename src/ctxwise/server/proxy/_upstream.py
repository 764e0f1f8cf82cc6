"""The upstream call: the client's provider headers forwarded, the answer passed back.

Headers: every request header goes upstream except the hop-by-hop ones, ``host``,
``content-length`` (the body may change), ``accept-encoding`` (the proxy asks for
an uncompressed body, which it reads as it passes through) and ctxwise's own
(``x-ctxwise-*``: the tenant's key and the session stay here). So the client's
provider key (``x-api-key``, ``authorization``), ``anthropic-version`` and
``anthropic-beta`` reach the provider as sent. They live in the request only: the
proxy never stores or logs a header. The response comes back with the upstream's
status, body bytes and headers, minus the hop-by-hop ones and the framing the
server writes again (``content-length``, ``content-encoding``).

An upstream that cannot be reached is :class:`UpstreamError` (502, or 504 for a
timeout), which the route answers in the provider's error shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import httpx

from ctxwise.errors import UpstreamError

__all__ = ["open_upstream", "request_headers", "response_headers"]

_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_NOT_FORWARDED = _HOP | {"host", "content-length", "accept-encoding", "cookie"}
_NOT_RETURNED = _HOP | {"content-length", "content-encoding", "set-cookie"}


def request_headers(
    headers: Iterable[tuple[str, str]], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The headers to send upstream (module docstring); ``extra`` are the Engine's
    (``anthropic-beta`` is joined to the client's, each value once)."""
    out: dict[str, str] = {}
    for name, value in headers:
        low = name.lower()
        if low in _NOT_FORWARDED or low.startswith("x-ctxwise-"):
            continue
        out[low] = f"{out[low]}, {value}" if low in out else value
    out["accept-encoding"] = "identity"
    for name, value in (extra or {}).items():
        low = name.lower()
        if low == "anthropic-beta" and low in out:
            have = [v.strip() for v in out[low].split(",") if v.strip()]
            add = [v.strip() for v in value.split(",") if v.strip() and v.strip() not in have]
            out[low] = ",".join([*have, *add])
        else:
            out[low] = value
    return out


def response_headers(headers: httpx.Headers) -> dict[str, str]:
    """The upstream's response headers to pass back (module docstring)."""
    out: dict[str, str] = {}
    for name, value in headers.multi_items():
        low = name.lower()
        if low not in _NOT_RETURNED:
            out[low] = f"{out[low]}, {value}" if low in out else value
    return out


async def open_upstream(
    client: httpx.AsyncClient, url: str, body: bytes, headers: Mapping[str, str]
) -> httpx.Response:
    """POST ``body`` to ``url`` and return the response once its headers are in (the
    body is read by the caller, then closed: ``aclose``).

    Raises:
        UpstreamError: a timeout (504) or a connection failure (502).
    """
    request = client.build_request("POST", url, content=body, headers=dict(headers))
    try:
        return await client.send(request, stream=True)
    except httpx.TimeoutException as exc:
        raise UpstreamError(504, f"the upstream did not answer in time ({_name(exc)})") from None
    except httpx.HTTPError as exc:
        raise UpstreamError(502, f"the upstream could not be reached ({_name(exc)})") from None


def _name(exc: BaseException) -> str:
    return type(exc).__name__
