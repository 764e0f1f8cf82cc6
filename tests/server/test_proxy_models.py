"""The proxy counts, budgets and prices each request at the model it names
(:mod:`ctxwise.server.proxy._pools`): a pool per (render, model), the config's own
serving its own, a bound on how many models a worker makes pools for."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from ctxwise.config import EngineConfig
from ctxwise.pricing import TokenSplit, cost_usd, price_for
from ctxwise.server.proxy import _pools
from ctxwise.tokens import counter_for_model
from tests.server.test_proxy_anthropic import Proxy, body, make_proxy, user
from tests.server.test_proxy_openai import PATH as CHAT
from tests.server.test_proxy_openai import completion_answer, post

CONFIG_MODEL = EngineConfig().model
HAIKU = "claude-haiku-4-5"


def pools(proxy: Proxy) -> dict[tuple[str, str], Any]:
    state = proxy.client.app.state  # type: ignore[attr-defined]
    out: dict[tuple[str, str], Any] = getattr(state, "proxy_pools", {})
    return out


def ask(proxy: Proxy, model: str, session: str) -> dict[str, Any]:
    """One Messages API request for ``model``; its session's only trace."""
    r = proxy.post(body([user("Where is order 4417?")], model=model), session=session)
    assert r.status_code == 200, r.text
    assert "x-ctxwise-fail-open" not in r.headers
    assert proxy.upstream.sent()["model"] == model  # the client's model goes upstream
    (trace,) = proxy.traces(session)
    return trace


def test_each_request_is_counted_and_priced_at_the_model_it_names(proxy: Proxy) -> None:
    side = ask(proxy, HAIKU, "side")
    main = ask(proxy, CONFIG_MODEL, "main")
    for trace, model in ((side, HAIKU), (main, CONFIG_MODEL)):
        cache = trace["cache"]
        assert cache["model"] == model
        assert trace["calibration"]["counter"] == counter_for_model(model).name
        split = TokenSplit(uncached=cache["read"] + cache["write_5m"] + cache["uncached"])
        assert cache["uncached_usd"] == pytest.approx(cost_usd(split, price_for(model, {})))
    # priced apart: the same request, a different model's price
    assert price_for(HAIKU, {}) != price_for(CONFIG_MODEL, {})
    assert side["cache"]["uncached_usd"] != main["cache"]["uncached_usd"]
    # the config's model ran on the service's pool; Haiku on one of its own
    (made,) = pools(proxy).values()
    assert (made.config.render, made.config.model) == ("anthropic", HAIKU)
    assert tuple(pools(proxy)) == (("anthropic", HAIKU),)


@pytest.mark.parametrize(
    ("path", "sent"),
    [
        (CHAT, {"messages": [user("Where is order 4417?")]}),
        ("/v1/responses", {"input": "Where is order 4417?"}),
    ],
)
def test_an_openai_request_is_counted_with_the_openai_counter(
    sqlite_proxy: Proxy, path: str, sent: dict[str, Any]
) -> None:
    proxy = sqlite_proxy
    if path == CHAT:
        proxy.upstream.answer = completion_answer
    r = proxy.post({"model": "gpt-4.1", **sent}, session="o", path=path)
    assert r.status_code == 200, r.text
    assert "x-ctxwise-fail-open" not in r.headers
    (trace,) = proxy.traces("o")
    assert trace["cache"]["model"] == "gpt-4.1"
    counter = trace["calibration"]["counter"]
    assert counter == counter_for_model("gpt-4.1").name != counter_for_model(CONFIG_MODEL).name
    assert tuple(pools(proxy)) == (("openai", "gpt-4.1"),)


def test_one_model_on_both_renders_gets_a_pool_for_each(sqlite_proxy: Proxy) -> None:
    proxy = sqlite_proxy
    proxy.upstream.answer = completion_answer
    assert post(proxy, {"model": CONFIG_MODEL, "messages": [user("hi")]}).status_code == 200
    assert proxy.post(body([user("hi")], model=CONFIG_MODEL), session="m").status_code == 200
    # the config's model: the service's pool for Messages, one of the OpenAI render
    assert tuple(pools(proxy)) == (("openai", CONFIG_MODEL),)


def test_past_the_bound_requests_succeed_at_the_configs_model_and_pools_stop_growing(
    sqlite_proxy: Proxy, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = sqlite_proxy
    monkeypatch.setattr(_pools, "MAX_MODELS", 3)
    admitted = [f"claude-test-{i}" for i in range(3)]
    for i, model in enumerate(admitted):
        assert ask(proxy, model, f"in{i}")["cache"]["model"] == model
    made = dict(pools(proxy))
    assert [m for _, m in made] == admitted
    caplog.set_level(logging.WARNING, logger="ctxwise.server.proxy")
    for i in range(5):
        trace = ask(proxy, f"claude-bogus-{i}", f"out{i}")
        assert trace["cache"]["model"] == CONFIG_MODEL  # counted at the config's model
    ask(proxy, "claude-bogus-0", "again")  # warned once per model
    assert pools(proxy) == made
    # a model that has its pools is still served by them
    assert ask(proxy, admitted[1], "in1b")["cache"]["model"] == admitted[1]
    lines = [r.getMessage() for r in caplog.records if r.name == "ctxwise.server.proxy"]
    assert len(lines) == 5
    for i, line in enumerate(lines):
        assert f"'claude-bogus-{i}'" in line and CONFIG_MODEL in line
        assert proxy.key not in line


@pytest.mark.parametrize(
    "model",
    ["claude\x00haiku", "gpt-4.1\n", " gpt-4.1", "claude-" + "x" * 5000],
    ids=["nul", "newline", "padded", "long"],
)
def test_a_model_no_engine_is_configured_with_is_served_at_the_configs_model(
    sqlite_proxy: Proxy, caplog: pytest.LogCaptureFixture, model: str
) -> None:
    caplog.set_level(logging.WARNING, logger="ctxwise.server.proxy")
    trace = ask(sqlite_proxy, model, "w")
    assert trace["cache"]["model"] == CONFIG_MODEL
    assert pools(sqlite_proxy) == {}
    (line,) = [r.getMessage() for r in caplog.records if r.name == "ctxwise.server.proxy"]
    assert len(line) < 400  # a long name is cut short in the log


def test_a_name_the_config_refuses_falls_back_instead_of_failing(
    sqlite_proxy: Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = "claude-refused"
    replaced = _pools._replaced

    def refusing(cfg: EngineConfig, render: Any, model: str) -> EngineConfig:
        # as if EngineConfig refused this model name: a ConfigError from validation
        if model == refused:
            return replaced(cfg, render, "")
        return replaced(cfg, render, model)

    monkeypatch.setattr(_pools, "_replaced", refusing)
    assert ask(sqlite_proxy, refused, "r")["cache"]["model"] == CONFIG_MODEL
    assert pools(sqlite_proxy) == {}


def test_the_model_pools_close_with_the_app(tmp_path: Path) -> None:
    made, close = make_proxy(f"sqlite:///{tmp_path}/svc.db", tmp_path)
    state = made.client.app.state  # type: ignore[attr-defined]
    try:
        ask(made, HAIKU, "h")
        (pool,) = state.proxy_pools.values()
    finally:
        close()
    assert state.proxy_pools == {}
    assert pool._closed
