"""An OpenAI-compatible embeddings endpoint: OpenAI, Azure OpenAI, Ollama, vLLM, and
every server that answers ``POST {base_url}/embeddings``.

The request is ``{"model": MODEL, "input": [TEXT, ...]}`` (and ``"dimensions"``
when asked); the response is ``{"data": [{"embedding": [...], "index": I}, ...]}``,
each vector placed by its ``index``. Texts go in batches of ``batch_size``. A
429, a 5xx answer or a connection error is tried again ``retries`` times (waiting
the answer's ``Retry-After``, else :data:`BACKOFF` doubled at each try, at most
:data:`MAX_WAIT`); anything else,
and a response of another shape, is a :class:`~ctxwise.errors.ProviderError` with
the status and the server's own message. The API key is read from the environment
by the caller and sent as a header: it is never stored in a config, printed, or
part of an error.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from ctxwise.embeddings._base import Vectors, normalized
from ctxwise.errors import MissingDependencyError, ProviderError, UsageError

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
BACKOFF = 0.5
"""Seconds before the first retry when the answer gives no ``Retry-After``."""
MAX_WAIT = 30.0
"""The longest wait before a retry, in seconds."""
PROBE_TEXT = "dimension probe"
"""The text embedded to learn a model's width when ``dim`` is not given."""


class _Item(BaseModel):
    # strict: a number given as a string ("0.1") is not a vector value
    model_config = ConfigDict(extra="ignore", strict=True)
    embedding: list[float]
    index: int


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore")
    data: list[_Item]


def check_base_url(base_url: str) -> str:
    """``base_url`` without a trailing slash; :class:`UsageError` for one that is not
    an http(s) URL with a host, or that holds a user name or password (a key goes in
    the environment, never in a URL that errors and logs may show)."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"base_url {base_url!r} is not an http(s) URL with a host"
            " (e.g. https://api.openai.com/v1 or http://localhost:11434/v1)"
        )
    if parts.username or parts.password:
        raise UsageError(
            "base_url holds credentials: put the key in an environment variable and"
            " name it with api_key_env"
        )
    if parts.query or parts.fragment:
        raise UsageError(f"base_url {base_url!r} has a query or fragment; give api_version apart")
    return base_url.rstrip("/")


def _server_message(response: Any) -> str:
    """The error an OpenAI-compatible server sent (``{"error": {"message": ...}}``,
    ``{"error": "..."}`` or ``{"detail": ...}``), else the start of its body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error", body.get("detail"))
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:300]
        if isinstance(error, str):
            return error[:300]
    text = " ".join(str(response.text).split())
    return text[:300] or "(empty body)"


def _retry_after(response: Any, attempt: int) -> float:
    value = response.headers.get("retry-after") if response is not None else None
    if value is not None:
        try:
            seconds = float(value)
        except ValueError:
            seconds = math.nan
        if math.isfinite(seconds) and seconds >= 0:
            return min(seconds, MAX_WAIT)
    return min(BACKOFF * 2.0**attempt, MAX_WAIT)


class EndpointEmbedder:
    """Vectors from an OpenAI-compatible ``/embeddings`` endpoint (the module
    docstring says what is sent and read).

    ``base_url`` is the API root (``https://api.openai.com/v1``,
    ``http://localhost:11434/v1`` for Ollama, ``http://HOST:8000/v1`` for vLLM, or an
    Azure deployment, ``https://RESOURCE.openai.azure.com/openai/deployments/NAME``,
    with ``api_version`` and ``api_key_header="api-key"``). ``api_key`` is the key
    itself (None: no key header, as a local server wants). ``dim``: the width the
    model's vectors have, checked on every answer (0: learned from the first answer,
    or from one short request when :attr:`dim` is read first); with
    ``request_dim=True`` it is sent as ``dimensions`` (models that shorten their
    vectors, such as OpenAI's text-embedding-3). ``transport`` is an httpx transport
    (``httpx.MockTransport`` in tests). Install with ``pip install -e '.[endpoint]'``.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_header: str = "authorization",
        api_version: str = "",
        dim: int = 0,
        request_dim: bool = False,
        batch_size: int = 64,
        timeout: float = 30.0,
        retries: int = 2,
        transport: Any = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        try:
            import httpx
        except ImportError:
            raise MissingDependencyError(
                "httpx", "endpoint", "the OpenAI-compatible endpoint embedder"
            ) from None
        if not model:
            raise UsageError("the endpoint embedder needs the model's name (model)")
        if api_key_header not in ("authorization", "api-key"):
            raise UsageError(
                f"api_key_header is authorization (Bearer) or api-key (Azure), not"
                f" {api_key_header!r}"
            )
        if request_dim and dim < 1:
            raise UsageError("request_dim sends dim as dimensions: give dim too")
        if batch_size < 1 or retries < 0 or not timeout > 0:
            raise UsageError("batch_size must be at least 1, retries at least 0, timeout above 0")
        self.base_url = check_base_url(base_url)
        self.model = model
        self.batch_size = batch_size
        self.retries = retries
        self.request_dim = request_dim
        self._dim = dim
        self._sleep = sleep
        headers = {"content-type": "application/json"}
        if api_key:
            if api_key_header == "api-key":
                headers["api-key"] = api_key
            else:
                headers["authorization"] = f"Bearer {api_key}"
        self._url = f"{self.base_url}/embeddings"
        self._params = {"api-version": api_version} if api_version else {}
        self._httpx = httpx
        self._client = httpx.Client(headers=headers, timeout=timeout, transport=transport)

    @property
    def name(self) -> str:
        return f"endpoint:{self.model}@{self.base_url}"

    @property
    def dim(self) -> int:
        if not self._dim:
            self._post([PROBE_TEXT])
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            self._post(list(texts[lo : lo + self.batch_size]))
            for lo in range(0, len(texts), self.batch_size)
        ]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def _post(self, batch: list[str]) -> Vectors:
        body: dict[str, Any] = {"model": self.model, "input": batch}
        if self.request_dim:
            body["dimensions"] = self._dim
        response = None
        for attempt in range(self.retries + 1):
            try:
                response = self._client.post(self._url, json=body, params=self._params)
            except self._httpx.HTTPError as exc:
                if attempt == self.retries:
                    raise ProviderError(
                        "endpoint", f"{self._url}: {type(exc).__name__}: {exc}"
                    ) from None
                self._sleep(_retry_after(None, attempt))
                continue
            if response.status_code in RETRY_STATUSES and attempt < self.retries:
                self._sleep(_retry_after(response, attempt))
                continue
            break
        assert response is not None  # the loop ran at least once, and raised or answered
        if response.status_code >= 400:
            raise ProviderError(
                "endpoint",
                f"{self._url} answered {response.status_code}: {_server_message(response)}",
                status=response.status_code,
            )
        return self._read(response, len(batch))

    def _read(self, response: Any, count: int) -> Vectors:
        try:
            parsed = _Response.model_validate_json(response.content)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the body"
            raise ProviderError(
                "endpoint",
                f"{self._url}: the response is not an embeddings list ({where}: {first['msg']})",
                status=response.status_code,
            ) from None
        indices = sorted(item.index for item in parsed.data)
        if indices != list(range(count)):
            raise ProviderError(
                "endpoint",
                f"{self._url}: {count} text(s) sent, but the response's indices are"
                f" {indices[:10]}{'...' if len(indices) > 10 else ''}",
                status=response.status_code,
            )
        rows = [item.embedding for item in sorted(parsed.data, key=lambda item: item.index)]
        widths = {len(row) for row in rows}
        if len(widths) != 1 or 0 in widths:
            raise ProviderError(
                "endpoint",
                f"{self._url}: vectors of widths {sorted(widths)} in one response",
                status=response.status_code,
            )
        width = widths.pop()
        if not self._dim:
            self._dim = width
        elif width != self._dim:
            raise ProviderError(
                "endpoint",
                f"{self._url}: the model {self.model!r} gave vectors of {width} dimensions,"
                f" not dim = {self._dim}",
                status=response.status_code,
            )
        try:
            return normalized(rows, width, self.name)
        except UsageError as exc:
            raise ProviderError("endpoint", str(exc), status=response.status_code) from None

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:  # the key is never shown
        return f"EndpointEmbedder({self.name!r})"
