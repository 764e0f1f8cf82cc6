"""The adapters' boundary with the SDKs: what goes out, what comes back.

The SDKs build their response objects without validating them, so a truncated,
empty, ``null`` or oddly shaped body would surface as a raw ``JSONDecodeError``,
``AttributeError`` or ``TypeError`` deep in an adapter. The adapters ask for the raw
response instead and parse its body here: anything that is not JSON, or lacks a
field the adapter reads with the type it needs, becomes a
:class:`~ctxwise.errors.ProviderError` that names the field.

An HTTP error becomes a ProviderError with the status and what the provider said
(the error envelope's type and message, the request id, ``retry-after``); a prompt
is checked and made sendable (lone surrogates as U+FFFD) before it goes out; an
async client, which the adapters cannot await, is refused.
"""

from __future__ import annotations

import inspect
import re
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxwise._io import parse_json
from ctxwise.errors import ProviderError, UsageError

__all__ = [
    "AnthropicCount",
    "AnthropicMessage",
    "OpenAIChatCompletion",
    "OpenAIScoredCompletion",
    "check_prompt",
    "connection_error",
    "parse_body",
    "raw_body",
    "sendable",
    "status_error",
    "sync_client",
]

_M = TypeVar("_M", bound=BaseModel)

# A log probability is ln(p) for p in (0, 1]: finite and at most 0. A value a hair
# above 0 is rounding and is clamped to 0; anything larger is not a log probability.
LOGPROB_EPSILON = 1e-6


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


# -- Anthropic Messages API ---------------------------------------------------------


class AnthropicMessage(_Model):
    """``content`` is a list of blocks; a block of ``type`` "text" must hold a string ``text``."""

    content: list[dict[str, Any]]
    stop_reason: Any = None

    def text(self, provider: str) -> str:
        parts: list[str] = []
        for i, block in enumerate(self.content):
            if block.get("type") != "text":
                continue
            text = block.get("text")
            if not isinstance(text, str):
                got = "missing" if "text" not in block else f"a {type(text).__name__}"
                raise ProviderError(
                    provider, f"malformed response: content[{i}].text is {got}, not a string"
                )
            parts.append(text)
        return "".join(parts)


class AnthropicCount(_Model):
    input_tokens: Annotated[int, Field(strict=True, ge=0)]


# -- OpenAI Chat Completions ---------------------------------------------------------


class _OpenAIMessage(_Model):
    content: Annotated[str, Field(strict=True)] | None = None
    refusal: Any = None


class _OpenAIChatChoice(_Model):
    message: _OpenAIMessage
    finish_reason: Any = None


class OpenAIChatCompletion(_Model):
    choices: Annotated[list[_OpenAIChatChoice], Field(min_length=1)]
    usage: Any = None

    def reasoning_tokens(self) -> int | None:
        """``usage.completion_tokens_details.reasoning_tokens``, when the body has it."""
        details = (
            self.usage.get("completion_tokens_details") if isinstance(self.usage, dict) else None
        )
        n = details.get("reasoning_tokens") if isinstance(details, dict) else None
        return n if isinstance(n, int) and not isinstance(n, bool) else None


class _TopLogprob(_Model):
    token: Annotated[str, Field(strict=True)]
    logprob: Annotated[float, Field(strict=True, allow_inf_nan=False, le=LOGPROB_EPSILON)]


class _TokenLogprob(_Model):
    top_logprobs: list[_TopLogprob] | None = None


class _Logprobs(_Model):
    content: list[_TokenLogprob] | None = None


class _OpenAIScoredChoice(_Model):
    logprobs: _Logprobs | None = None
    message: Any = None  # read only for a refusal, so any shape is let through

    def refusal(self) -> str | None:
        said = self.message.get("refusal") if isinstance(self.message, dict) else None
        return said.strip() if isinstance(said, str) and said.strip() else None


class OpenAIScoredCompletion(_Model):
    choices: Annotated[list[_OpenAIScoredChoice], Field(min_length=1)]


# -- parsing -------------------------------------------------------------------------


_JSON_KINDS = {
    type(None): "null",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    str: "a string",
    list: "an array",
}


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_body(provider: str, body: bytes, model: type[_M]) -> _M:
    """``body`` (a 200 response's bytes) as ``model``, or a ProviderError saying what is wrong."""
    try:
        data = parse_json(body)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        what = "empty" if not body.strip() else "not JSON"
        raise ProviderError(provider, f"malformed response: the body is {what}") from exc
    except RecursionError as exc:  # no documented response nests this deep
        raise ProviderError(
            provider, "malformed response: the body nests too deeply for the JSON decoder"
        ) from exc
    if not isinstance(data, dict):
        kind = _JSON_KINDS.get(type(data), type(data).__name__)
        raise ProviderError(provider, f"malformed response: the body is {kind}, not an object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        said = _envelope(data)
        if said is not None:  # an error envelope sent with status 200 (a proxy, a gateway)
            raise ProviderError(provider, f"the response is an error: {said}") from exc
        errors = exc.errors(include_url=False)
        shown = "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in errors[:3])
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise ProviderError(provider, f"malformed response: {shown}{more}") from exc


# -- HTTP errors -----------------------------------------------------------------------

_SHOWN = 300
"""The most characters of an error body that is not the documented envelope shown."""


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _envelope(data: Any) -> str | None:
    """The error of a documented error body: Anthropic's ``{"type": "error", "error":
    {"type", "message"}}``, OpenAI's ``{"error": {"message", "type", "code"}}``."""
    if not isinstance(data, dict) or "error" not in data:
        return None
    error = data["error"]
    if isinstance(error, str) and error.strip():
        return _cut(error)
    if not isinstance(error, dict):
        return None
    kinds = [k for k in (error.get("type"), error.get("code")) if isinstance(k, str) and k]
    label = "/".join(dict.fromkeys(kinds))
    message = error.get("message")
    if isinstance(message, str) and message.strip():
        return f"{label}: {message.strip()}" if label else message.strip()
    return label or None


def _body_text(content: bytes, content_type: str) -> tuple[str, str | None]:
    """What an error body says (the envelope's type and message, else the body cut
    short: an HTML error page by its title, or its text without tags) and the
    request id the envelope holds."""
    text = content.decode("utf-8", errors="replace").strip()
    if not text:
        return "the response has no body", None
    try:
        data = parse_json(text)
    except (ValueError, RecursionError):
        data = None
    said = _envelope(data)
    if said is not None:
        request_id = data.get("request_id") if isinstance(data, dict) else None
        return said, request_id if isinstance(request_id, str) and request_id else None
    if "html" in content_type.lower() or text.startswith("<"):
        title = re.search(r"<title[^>]*>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
        shown = title.group(1) if title and title.group(1).strip() else ""
        shown = shown or re.sub(r"<[^>]*>", " ", text)
        return f"an HTML page: {_cut(shown) or '(no text)'}", None
    return _cut(text), None


def status_error(provider: str, status: int, response: Any) -> ProviderError:
    """A ProviderError for an HTTP error ``response`` (an ``httpx`` response): what the
    body says, the request id and the ``retry-after`` the provider sent."""
    headers = response.headers
    try:
        content = response.content
    except Exception:  # a body that was never read (httpx ResponseNotRead)
        content = b""
    detail, in_body = _body_text(content, headers.get("content-type", ""))
    notes: list[str] = []
    location = headers.get("location")
    if 300 <= status < 400 and location:  # the SDKs do not follow redirects
        notes.append(f"redirected to {location}: point the client's base_url there")
    request_id = headers.get("request-id") or headers.get("x-request-id") or in_body
    if request_id:
        notes.append(f"request id {request_id}")
    retry = headers.get("retry-after")
    if retry:
        seconds = re.fullmatch(r"\d+(\.\d+)?", retry.strip())
        notes.append(f"retry after {retry.strip()}{' s' if seconds else ''}")
    elif headers.get("retry-after-ms"):
        notes.append(f"retry after {headers['retry-after-ms'].strip()} ms")
    if notes:
        detail += f" ({'; '.join(notes)})"
    return ProviderError(provider, detail, status=status)


def connection_error(provider: str, exc: BaseException) -> ProviderError:
    """A ProviderError for a call that got no HTTP response (a timeout, a refused
    connection, a body that does not decode), naming the underlying error."""
    detail = str(exc)
    cause = exc.__cause__
    if cause is not None and str(cause) not in detail:
        detail += (
            f" ({type(cause).__name__}: {cause})" if str(cause) else f" ({type(cause).__name__})"
        )
    return ProviderError(provider, detail)


# -- requests --------------------------------------------------------------------------


def check_prompt(**texts: object) -> None:
    """A UsageError naming the first of ``texts`` that is not a string: the SDKs send
    whatever they get (``None`` as null, a number as a number) or raise ``TypeError``
    (bytes) while writing the request."""
    for name, text in texts.items():
        if not isinstance(text, str):
            raise UsageError(f"{name} must be a string, got {type(text).__name__}")


def sendable(value: Any) -> Any:
    """``value`` (a string, or JSON of lists and dicts) with every lone surrogate (half
    of an emoji cut in two, as tool output and Claude Code transcripts hold) as U+FFFD.

    UTF-8 cannot encode a lone surrogate, so the SDKs raised ``UnicodeEncodeError``
    while writing the request. Two halves that make a pair become their character.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, list):
        return [sendable(v) for v in value]
    if isinstance(value, dict):
        return {sendable(k): sendable(v) for k, v in value.items()}
    return value


# -- clients ---------------------------------------------------------------------------

_SYNC = {
    "anthropic": ("anthropic.Anthropic", "AsyncAnthropic"),
    "openai": ("openai.OpenAI", "AsyncOpenAI"),
}


def sync_client(adapter: str, sdk: Any, client: Any) -> Any:
    """``client``, refused when it is the SDK's asynchronous client: the adapters call
    it synchronously, so its calls return coroutines nothing awaits."""
    expected, async_name = _SYNC[sdk.__name__]
    async_cls = getattr(sdk, async_name, None)
    if isinstance(async_cls, type) and isinstance(client, async_cls):
        raise UsageError(
            f"{adapter} needs a synchronous client ({expected}), got {type(client).__name__}"
        )
    return client


def raw_body(adapter: str, sdk: str, raw: Any) -> bytes:
    """The body of the SDK's raw response; a UsageError when the call returned an
    awaitable (an asynchronous client that :func:`sync_client` did not know)."""
    if inspect.isawaitable(raw):
        close = getattr(raw, "close", None)
        if callable(close):
            close()  # never awaited: closed, so no "never awaited" warning follows
        expected = _SYNC[sdk][0]
        raise UsageError(f"{adapter} needs a synchronous client ({expected}); this one is async")
    body: bytes = raw.http_response.content
    return body
