"""The OpenAI-compatible endpoint embedder over httpx.MockTransport, answering as the
documented API does: ``{"object": "list", "data": [{"object": "embedding",
"embedding": [...], "index": i}], "model": ..., "usage": {...}}``, and errors as
``{"error": {"message": ..., "type": ..., "code": ...}}``."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ctxwise.embeddings import EndpointEmbedder, build_embedder
from ctxwise.errors import ProviderError, UsageError

httpx = pytest.importorskip("httpx")

Handler = Callable[[Any], Any]


def _vector(text: str, dim: int = 4) -> list[float]:
    """A made-up vector that depends on the text alone."""
    return [float(len(text) + i) for i in range(dim)]


def _answer(request: Any, *, dim: int = 4, shuffle: bool = True) -> Any:
    body = json.loads(request.content)
    data = [
        {"object": "embedding", "embedding": _vector(t, dim), "index": i}
        for i, t in enumerate(body["input"])
    ]
    if shuffle:
        data.reverse()  # the API orders by index; a client must not count on the list's order
    return httpx.Response(
        200,
        json={
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": 3, "total_tokens": 3},
        },
    )


class Recorder:
    def __init__(self, handler: Handler = _answer) -> None:
        self.requests: list[Any] = []
        self.handler = handler

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        return self.handler(request)


def _embedder(recorder: Recorder, **kw: Any) -> EndpointEmbedder:
    kw.setdefault("sleep", lambda _s: None)
    return EndpointEmbedder(
        "http://localhost:11434/v1/",
        "nomic-embed-text",
        transport=httpx.MockTransport(recorder),
        **kw,
    )


def test_request_and_response_shape_and_order_by_index() -> None:
    rec = Recorder()
    emb = _embedder(rec)
    out = emb.embed(["a", "bbb"])
    assert out.dtype == np.float32 and out.shape == (2, 4)
    expected = np.array([_vector("a"), _vector("bbb")], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    (request,) = rec.requests
    assert request.method == "POST"
    assert str(request.url) == "http://localhost:11434/v1/embeddings"
    assert json.loads(request.content) == {"model": "nomic-embed-text", "input": ["a", "bbb"]}
    assert "authorization" not in request.headers  # no key given: none sent
    assert emb.dim == 4 and emb.name == "endpoint:nomic-embed-text@http://localhost:11434/v1"


def test_batches_are_split_and_joined_in_order() -> None:
    rec = Recorder()
    emb = _embedder(rec, batch_size=2)
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    out = emb.embed(texts)
    assert [json.loads(r.content)["input"] for r in rec.requests] == [
        ["a", "bb"],
        ["ccc", "dddd"],
        ["eeeee"],
    ]
    single = _embedder(Recorder(), batch_size=64).embed(texts)
    np.testing.assert_array_equal(out, single)


def test_dim_is_learned_by_a_probe_when_read_first() -> None:
    rec = Recorder(lambda r: _answer(r, dim=6))
    emb = _embedder(rec)
    assert emb.dim == 6
    assert len(rec.requests) == 1
    assert emb.embed([]).shape == (0, 6)


def test_bearer_and_azure_keys_and_api_version() -> None:
    rec = Recorder()
    _embedder(rec, api_key="sk-test").embed(["x"])
    assert rec.requests[-1].headers["authorization"] == "Bearer sk-test"
    _embedder(rec, api_key="az-test", api_key_header="api-key", api_version="2024-02-01").embed(
        ["x"]
    )
    last = rec.requests[-1]
    assert last.headers["api-key"] == "az-test" and "authorization" not in last.headers
    assert last.url.params["api-version"] == "2024-02-01"


def test_request_dim_sends_dimensions_and_checks_the_width() -> None:
    rec = Recorder(lambda r: _answer(r, dim=json.loads(r.content)["dimensions"]))
    emb = _embedder(rec, dim=3, request_dim=True)
    assert emb.embed(["x"]).shape == (1, 3)
    assert json.loads(rec.requests[0].content)["dimensions"] == 3
    wrong = _embedder(Recorder(lambda r: _answer(r, dim=5)), dim=3)
    with pytest.raises(ProviderError, match="gave vectors of 5 dimensions, not dim = 3"):
        wrong.embed(["x"])


def test_an_error_answer_is_a_provider_error_with_the_server_message() -> None:
    def refuse(request: Any) -> Any:
        return httpx.Response(
            401,
            json={
                "error": {
                    "message": "Incorrect API key provided.",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
        )

    rec = Recorder(refuse)
    with pytest.raises(ProviderError) as info:
        _embedder(rec, api_key="sk-secret-value").embed(["x"])
    assert info.value.status == 401
    assert "Incorrect API key provided." in str(info.value)
    assert "sk-secret-value" not in str(info.value)
    assert len(rec.requests) == 1  # a 401 is not tried again
    again = pickle.loads(pickle.dumps(info.value))
    assert str(again) == str(info.value)


def test_429_and_5xx_are_retried_with_retry_after_then_give_up() -> None:
    answers = iter(
        [
            httpx.Response(429, headers={"retry-after": "2"}, json={"error": "slow down"}),
            httpx.Response(503, text="busy"),
        ]
    )
    waits: list[float] = []
    rec = Recorder(lambda r: next(answers, None) or _answer(r))
    out = _embedder(rec, sleep=waits.append).embed(["x"])
    assert out.shape == (1, 4) and len(rec.requests) == 3
    assert waits == [2.0, 1.0]  # Retry-After, then the backoff of a second try

    rec = Recorder(lambda r: httpx.Response(500, text="<html>oops</html>"))
    with pytest.raises(ProviderError, match=r"answered 500: <html>oops</html>"):
        _embedder(rec, retries=1).embed(["x"])
    assert len(rec.requests) == 2


def test_a_connection_error_is_retried_then_a_provider_error() -> None:
    def down(request: Any) -> Any:
        raise httpx.ConnectError("connection refused", request=request)

    rec = Recorder(down)
    with pytest.raises(ProviderError, match="ConnectError: connection refused"):
        _embedder(rec, retries=2).embed(["x"])
    assert len(rec.requests) == 3


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"object": "list"}, r"not an embeddings list \(data: Field required"),
        ({"data": [{"embedding": "abc", "index": 0}]}, "not an embeddings list"),
        ({"data": []}, r"1 text\(s\) sent, but the response's indices are \[\]"),
        (
            {"data": [{"embedding": [1.0], "index": 0}, {"embedding": [1.0], "index": 0}]},
            r"indices are \[0, 0\]",
        ),
    ],
)
def test_a_response_of_another_shape_is_refused(body: dict[str, Any], message: str) -> None:
    rec = Recorder(lambda r: httpx.Response(200, json=body))
    with pytest.raises(ProviderError, match=message):
        _embedder(rec).embed(["x"])


def test_ragged_or_non_finite_vectors_are_refused() -> None:
    def ragged(request: Any) -> Any:
        return httpx.Response(
            200,
            json={
                "data": [{"embedding": [1.0, 2.0], "index": 0}, {"embedding": [1.0], "index": 1}]
            },
        )

    with pytest.raises(ProviderError, match=r"widths \[1, 2\]"):
        _embedder(Recorder(ragged)).embed(["x", "y"])

    def nan(request: Any) -> Any:
        return httpx.Response(
            200,
            content=b'{"data": [{"embedding": [NaN, 1.0], "index": 0}]}',
            headers={"content-type": "application/json"},
        )

    with pytest.raises(ProviderError):
        _embedder(Recorder(nan)).embed(["x"])


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("localhost:11434/v1", "not an http"),
        ("ftp://example.org/v1", "not an http"),
        ("https://user:secret@example.org/v1", "holds credentials"),
        ("https://example.org/v1?api-version=1", "query or fragment"),
    ],
)
def test_a_bad_base_url_is_refused(url: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        EndpointEmbedder(url, "m")
    assert "secret" not in str(info.value)


def test_build_embedder_reads_the_key_from_the_named_variable_only() -> None:
    rec = Recorder()
    settings = "endpoint:text-embedding-3-small@https://api.example.test/v1"
    emb = build_embedder(settings, transport=httpx.MockTransport(rec))
    emb.embed(["x"])
    assert "authorization" not in rec.requests[-1].headers

    from ctxwise.config import EmbedderConfig

    config = EmbedderConfig(
        kind="endpoint",
        base_url="https://api.example.test/v1",
        model="text-embedding-3-small",
        api_key_env="CTXWISE_TEST_EMBED_KEY",
    )
    env = {"CTXWISE_TEST_EMBED_KEY": "sk-from-env"}
    emb = build_embedder(config, environ=env, transport=httpx.MockTransport(rec))
    emb.embed(["x"])
    assert rec.requests[-1].headers["authorization"] == "Bearer sk-from-env"
    assert "sk-from-env" not in repr(emb) and "sk-from-env" not in emb.name
    with pytest.raises(UsageError, match="CTXWISE_TEST_EMBED_KEY is not set"):
        build_embedder(config, environ={}, transport=httpx.MockTransport(rec))
