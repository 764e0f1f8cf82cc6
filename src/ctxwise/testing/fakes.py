"""Test doubles beside the seams: a scripted chat model and a deterministic embedder.

:class:`FakeChatModel` is a :class:`~ctxwise.providers.ChatModel` (what the LLM
summarizer and the relay call) that answers from a script and counts its calls; its
:meth:`~FakeChatModel.handler` answers HTTP requests in the Anthropic Messages and
OpenAI Chat Completions shapes, for an ``httpx.MockTransport`` under the official
SDKs. :class:`FakeEmbedder` is an :class:`~ctxwise.embeddings.Embedder` whose
vectors depend on the text alone (SHA-256), so every run embeds alike.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from ctxwise.errors import ProviderError, UsageError

__all__ = ["ChatCall", "FakeChatModel", "FakeEmbedder", "Reply"]

Reply: TypeAlias = "str | BaseException | Callable[[str, str], str]"
"""One scripted reply: the text, an exception to raise, or a function of
(system, user) that returns the text."""


@dataclass(frozen=True, slots=True)
class ChatCall:
    """One call the fake model answered: its prompt and ``max_tokens``."""

    system: str
    user: str
    max_tokens: int


def _tokens(text: str) -> int:
    """A deterministic token estimate for the fake usage figures: words, at least 1."""
    return max(1, len(text.split()))


class FakeChatModel:
    """A chat model that answers from ``replies`` in order and records every call.

    ``repeat=True`` answers with the last reply once the script runs out; otherwise
    an exhausted script is a :class:`~ctxwise.errors.ProviderError` (a test that
    calls more often than it meant to fails loudly). An exception in the script is
    raised for that call, as a provider failure would be.
    """

    def __init__(
        self, replies: Iterable[Reply], *, name: str = "fake-chat", repeat: bool = False
    ) -> None:
        self.replies: list[Reply] = list(replies)
        if not self.replies:
            raise UsageError("FakeChatModel needs at least one scripted reply")
        self.model = name
        self.repeat = repeat
        self.calls: list[ChatCall] = []

    @property
    def name(self) -> str:
        return f"fake:{self.model}"

    @property
    def call_count(self) -> int:
        return len(self.calls)

    def _next(self, system: str, user: str) -> str:
        index = len(self.calls) - 1
        if index >= len(self.replies):
            if not self.repeat:
                raise ProviderError(
                    self.name, f"the script holds {len(self.replies)} replies; call {index + 1}"
                )
            index = len(self.replies) - 1
        reply = self.replies[index]
        if isinstance(reply, BaseException):
            raise reply
        return reply(system, user) if callable(reply) else reply

    def complete(self, system: str, user: str, max_tokens: int) -> str:
        """The next scripted reply (the :class:`~ctxwise.providers.ChatModel` call)."""
        self.calls.append(ChatCall(system, user, max_tokens))
        return self._next(system, user)

    # provider response shapes ---------------------------------------------------------

    def anthropic_message(self, text: str, *, input_tokens: int = 1) -> dict[str, Any]:
        """A Messages API response body holding ``text``, as Anthropic documents it."""
        return {
            "id": f"msg_fake_{len(self.calls)}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": _tokens(text)},
        }

    def openai_completion(self, text: str, *, prompt_tokens: int = 1) -> dict[str, Any]:
        """A Chat Completions response body holding ``text``, as OpenAI documents it."""
        completion = _tokens(text)
        return {
            "id": f"chatcmpl-fake-{len(self.calls)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion,
                "total_tokens": prompt_tokens + completion,
            },
        }

    def handler(self, request: Any) -> Any:
        """Answer one HTTP request (an ``httpx`` or ``httpx2`` request, whichever the
        SDK uses): ``…/messages`` in the Anthropic shape, ``…/chat/completions`` in the
        OpenAI shape, from the script, recording the call. Pass it to
        ``httpx.MockTransport`` and hand the client to the SDK."""
        http = importlib.import_module(type(request).__module__.partition(".")[0])
        body = json.loads(request.content or b"{}")
        system, user = _prompt(body)
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        path = request.url.path
        if not (path.endswith("/messages") or path.endswith("/chat/completions")):
            return http.Response(404, json={"error": {"message": f"no fake route {path}"}})
        self.calls.append(ChatCall(system, user, max_tokens))
        try:
            text = self._next(system, user)
        except ProviderError as exc:
            return http.Response(500, json={"error": {"message": exc.detail}})
        used = _tokens(system + " " + user)
        if path.endswith("/messages"):
            return http.Response(200, json=self.anthropic_message(text, input_tokens=used))
        return http.Response(200, json=self.openai_completion(text, prompt_tokens=used))


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, Mapping))
    return ""


def _prompt(body: Mapping[str, Any]) -> tuple[str, str]:
    """(system, last user text) of an Anthropic or OpenAI request body."""
    system = _text_of(body.get("system", ""))
    user = ""
    for message in body.get("messages", []):
        if message.get("role") in ("system", "developer"):
            system = _text_of(message.get("content"))
        elif message.get("role") == "user":
            user = _text_of(message.get("content"))
    return system, user


class FakeEmbedder:
    """Deterministic unit vectors of ``dim`` floats: a text's vector is drawn from a
    generator seeded by its SHA-256, unless ``vectors`` names it. Records every text
    it embedded (``texts``) and the number of calls."""

    def __init__(self, dim: int = 16, vectors: Mapping[str, Sequence[float]] | None = None) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise UsageError(f"dim must be a positive integer, got {dim!r}")
        self._dim = dim
        self.vectors = {k: np.asarray(v, dtype=np.float32) for k, v in (vectors or {}).items()}
        for text, vector in self.vectors.items():
            if vector.shape != (dim,):
                raise UsageError(f"the vector for {text!r} has shape {vector.shape}, not ({dim},)")
        self.texts: list[str] = []
        self.calls = 0

    @property
    def name(self) -> str:
        return f"fake:{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _vector(self, text: str) -> npt.NDArray[np.float32]:
        fixed = self.vectors.get(text)
        if fixed is not None:
            return fixed
        seed = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8])
        return np.random.default_rng(seed).standard_normal(self._dim).astype(np.float32)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        self.texts.extend(texts)
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i] = self._vector(text)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out
