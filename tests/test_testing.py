"""ctxwise.testing: the conformance suites run on a store written outside ctxwise,
and the test doubles behave as documented."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from ctxwise.errors import ProviderError, UsageError
from ctxwise.memory import InMemoryStore, MemoryItem, NewItem, Store
from ctxwise.sessions import InMemorySessionStore
from ctxwise.testing import (
    ASYNC_TWINS,
    STORE_CHECKS,
    Capability,
    FakeChatModel,
    FakeEmbedder,
    validate_session_store,
    validate_store,
)
from ctxwise.testing.suite import StoreConformance
from tests._http import mock_client
from tests.third_party_store import DictStore


def test_a_third_party_store_passes_the_conformance_suite() -> None:
    report = validate_store(DictStore)
    report.assert_ok()
    assert report.backend == "DictStore"
    assert len(report.passed) == len(STORE_CHECKS) - 1
    # it keeps nothing to release, so close() is the base's: that check is skipped
    (skipped,) = report.skipped
    assert skipped.capability is Capability.CLOSE and "does not offer close" in skipped.detail
    assert "0 failed" in report.summary()


class TestThirdPartyStoreUnderPytest(StoreConformance):
    """The same suite as pytest tests, on the third-party store."""

    @pytest.fixture
    def make_store(self) -> Iterator[Callable[[], Store]]:
        store = DictStore()
        yield lambda: store


def test_a_store_that_breaks_the_contract_fails_by_name() -> None:
    class ForgetsNamespaces(DictStore):
        def count(self, namespace: Any) -> int:
            return len(self.items)  # every namespace's items

    report = validate_store(ForgetsNamespaces, skip={"ranking"})
    assert not report.ok
    failed = {r.name for r in report.failed}
    assert "namespaces_isolate" in failed and "put_get_delete_and_order" not in failed
    assert all(
        r.capability is not Capability.RANKING for r in report.results if r.outcome != "skipped"
    )
    with pytest.raises(AssertionError, match="FAILED namespaces_isolate"):
        report.assert_ok()


def test_the_store_core_is_six_abstract_methods() -> None:
    """What a backend must write; get_many, by_seq, count and every async twin
    are derived (DictStore writes only these six and passes the suite)."""
    assert Store.__abstractmethods__ == {
        "put_many", "delete", "recent", "namespaces", "lexical_search", "vector_search",
    }  # fmt: skip
    for name in ("get_many", "by_seq", "count"):
        assert name not in vars(DictStore)


class NativeAsyncStore(DictStore):
    """Async twins of its own, on the event loop (no worker thread)."""

    async def aput_many(self, namespace: Any, items: Any) -> list[str]:
        await asyncio.sleep(0)
        return self.put_many(namespace, items)

    async def alexical_search(
        self, namespace: Any, query: str, k: int, filters: Any = None
    ) -> list[tuple[MemoryItem, float]]:
        await asyncio.sleep(0)
        return self.lexical_search(namespace, query, k, filters)


def test_a_natively_async_store_passes_the_async_checks() -> None:
    report = validate_store(NativeAsyncStore)
    report.assert_ok()
    assert {r.name for r in report.passed if r.capability is Capability.ASYNC} == {
        "async_twins_give_what_the_sync_methods_give",
        "async_calls_may_run_together",
    }


def test_an_async_twin_that_disagrees_fails_by_name() -> None:
    class Forgets(DictStore):
        async def acount(self, namespace: Any) -> int:
            return 0

    report = validate_store(Forgets, skip={"ranking"})
    assert [r.name for r in report.failed] == ["async_twins_give_what_the_sync_methods_give"]


def test_a_store_without_async_twins_skips_the_async_checks() -> None:
    twins = {name: (lambda self, *a, **kw: None) for name in ASYNC_TWINS}
    SyncOnly = type("SyncOnly", (DictStore,), twins)
    report = validate_store(SyncOnly, skip={"ranking"})
    assert report.ok
    assert {r.name for r in report.skipped if r.capability is Capability.ASYNC} == {
        "async_twins_give_what_the_sync_methods_give",
        "async_calls_may_run_together",
    }


def test_the_async_twins_run_the_sync_methods_off_the_event_loop() -> None:
    seen: list[int] = []

    class Recording(DictStore):
        def recent(self, namespace: Any, n: int) -> list[MemoryItem]:
            seen.append(threading.get_ident())
            return super().recent(namespace, n)

    store = Recording()
    store.put_many(("a",), [NewItem("x", {}, "i")])

    async def run() -> tuple[int, MemoryItem | None]:
        return threading.get_ident(), await store.aget(("a",), "i")

    loop_thread, got = asyncio.run(run())
    assert got is not None and got.id == "i"  # aget -> aget_many -> get_many -> recent
    assert seen and loop_thread not in seen


def test_a_backend_may_yield_handles_on_one_database() -> None:
    opened: list[int] = []

    @contextmanager
    def backend() -> Iterator[Callable[[], Store]]:
        shared = InMemoryStore()
        opened.append(1)
        yield lambda: shared
        shared.close()

    report = validate_store(backend, name="memory", skip={"ranking", "validation"})
    assert report.ok and len(opened) == len(STORE_CHECKS)
    assert {r.capability for r in report.skipped} == {Capability.RANKING, Capability.VALIDATION}


def test_the_session_suite_runs_without_pytest_too() -> None:
    report = validate_session_store(InMemorySessionStore)
    report.assert_ok()
    assert report.passed and not report.skipped


def test_importing_ctxwise_imports_neither_testing_nor_pytest() -> None:
    code = (
        "import sys, ctxwise; "
        "print(any(m == 'pytest' or m.startswith('ctxwise.testing') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# the fake chat model ------------------------------------------------------------------


def test_fake_chat_model_answers_from_its_script_and_counts() -> None:
    model = FakeChatModel(
        ["first", lambda system, user: f"echo {user}", ProviderError("x", "down")]
    )
    assert model.complete("sys", "hello", 50) == "first"
    assert model.complete("sys", "again", 50) == "echo again"
    with pytest.raises(ProviderError, match="down"):
        model.complete("sys", "third", 50)
    with pytest.raises(ProviderError, match="script holds 3 replies"):
        model.complete("sys", "fourth", 50)
    assert model.call_count == 4 and model.calls[1].user == "again"
    assert FakeChatModel(["only"], repeat=True).complete("s", "u", 1) == "only"
    with pytest.raises(UsageError):
        FakeChatModel([])


def test_fake_chat_model_counts_an_llm_summarizer_s_calls() -> None:
    from ctxwise.messages import Message
    from ctxwise.summarize import LLMSummarizer

    model = FakeChatModel(["The user asked about order 8812; it shipped."])
    summary = LLMSummarizer(model).summarize(
        "",
        [
            Message.text_message("user", "where is order 8812?"),
            Message.text_message("assistant", "it shipped"),
        ],
        200,
    )
    assert "8812" in summary and model.call_count == 1
    assert "8812" in model.calls[0].user


def test_fake_chat_model_serves_the_anthropic_and_openai_sdks() -> None:
    anthropic = pytest.importorskip("anthropic")
    openai = pytest.importorskip("openai")
    from ctxwise.providers import AnthropicChat, OpenAIChat

    model = FakeChatModel(["from claude", "from gpt"], name="test-model")
    claude = anthropic.Anthropic(
        api_key="k", http_client=mock_client("anthropic", model.handler), max_retries=0
    )
    assert AnthropicChat(claude, "test-model").complete("be brief", "hi", 20) == "from claude"
    gpt = openai.OpenAI(
        api_key="k", http_client=mock_client("openai", model.handler), max_retries=0
    )
    assert OpenAIChat(gpt, "test-model").complete("be brief", "hello", 20) == "from gpt"
    assert [(c.system, c.user, c.max_tokens) for c in model.calls] == [
        ("be brief", "hi", 20),
        ("be brief", "hello", 20),
    ]
    body = model.anthropic_message("x")
    assert (
        body["content"] == [{"type": "text", "text": "x"}] and body["usage"]["output_tokens"] == 1
    )
    assert model.openai_completion("y z")["choices"][0]["message"]["content"] == "y z"


# the fake embedder --------------------------------------------------------------------


def test_fake_embedder_is_deterministic_unit_and_counts() -> None:
    emb = FakeEmbedder(8, vectors={"pinned": [1, 0, 0, 0, 0, 0, 0, 0]})
    a = emb.embed(["hello", "pinned", "hello"])
    b = FakeEmbedder(8).embed(["hello"])
    assert a.dtype == np.float32 and a.shape == (3, 8)
    assert np.array_equal(a[0], a[2]) and np.array_equal(a[0], b[0])
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0)
    assert a[1].tolist() == [1, 0, 0, 0, 0, 0, 0, 0]
    assert emb.calls == 1 and emb.texts == ["hello", "pinned", "hello"] and emb.name == "fake:8"
    with pytest.raises(UsageError):
        FakeEmbedder(0)
    with pytest.raises(UsageError, match="shape"):
        FakeEmbedder(4, vectors={"x": [1.0]})
