"""Tools given on a turn (``Engine.turn(..., tools=...)``) are sent in the render's
shape, counted in the budget and listed in the trace: a request never leaves with
definitions the budget did not see (issue 30, item 2).

The catalog is the official GitHub MCP server's real ``tools/list`` (117 tools)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxwise import Engine, EngineConfig, Message
from ctxwise.errors import PinnedOverflowError, ToolCatalogError, UsageError
from ctxwise.tokens import TokenCounter
from ctxwise.tools import ResultStore
from ctxwise.tools.given import read_tools, render_given
from tests.conftest import DATA

GITHUB = DATA / "tools" / "mcp_listings" / "github-mcp-server.tools_list.json"

WEATHER_ANTHROPIC = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CLOCK_CHAT = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
}
STOCK_RESPONSES = {
    "type": "function",
    "name": "get_stock",
    "description": "A stock's last price.",
    "parameters": {"type": "object", "properties": {"ticker": {"type": "string"}}},
}
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}


def github_tools() -> list[dict[str, Any]]:
    if not GITHUB.is_file():
        pytest.skip(f"shared data not found at {DATA} (set CTXWISE_DATA)")
    listing = json.loads(GITHUB.read_text(encoding="utf-8"))
    tools = listing["tools"] if isinstance(listing, dict) else listing
    assert isinstance(tools, list)
    return tools


def engine(tmp_path: Path, render: str = "anthropic", budget: int = 200_000, **kw: Any) -> Engine:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = EngineConfig.model_validate(
        {"store": f"sqlite:///{tmp_path / 'c.db'}", "render": render, "budget": budget, **kw}
    )
    return Engine(config)


def sent_definition_tokens(tools: list[dict[str, Any]], counter: TokenCounter) -> int:
    """What the request's ``tools`` cost, counted here apart from the Engine's code."""
    return sum(
        counter.count(
            json.dumps({k: v for k, v in t.items() if k != "cache_control"}, ensure_ascii=False)
        )
        for t in tools
    )


@pytest.mark.parametrize("render", ["anthropic", "openai"])
def test_a_117_tool_catalog_given_as_tools_is_sent_counted_and_traced(
    tmp_path: Path, render: str
) -> None:
    tools = github_tools()
    assert len(tools) == 117
    eng = engine(tmp_path, render)
    result = eng.turn("s", "List my open pull requests.", tools=tools)
    sent = result.request["tools"]
    assert len(sent) == 117
    if render == "anthropic":
        assert [t["name"] for t in sent] == [t["name"] for t in tools]
        assert all("input_schema" in t for t in sent)
        assert sent[-1]["cache_control"] == {"type": "ephemeral"}
    else:
        assert [t["function"]["name"] for t in sent] == [t["name"] for t in tools]
        assert all(t["type"] == "function" for t in sent)
    trace = result.trace.tools
    assert trace is not None
    assert trace.given == [t["name"] for t in tools]
    assert trace.tokens == sent_definition_tokens(sent, eng.counter) > 20_000
    # the definitions are part of the request's total, and the total holds
    assert result.trace.tokens.tools == trace.tokens
    calibration = result.trace.calibration
    assert calibration is not None and calibration.margin > 0  # the default counter's
    assert result.trace.tokens.total <= calibration.limit < result.trace.tokens.available


def test_the_definitions_come_out_of_the_budget(tmp_path: Path) -> None:
    tools = github_tools()
    history = [Message.text_message("user", f"note {i}: " + "words " * 300) for i in range(60)]
    plain = engine(tmp_path / "a", budget=60_000).turn("s", history, warn_unanswered=False)
    given = engine(tmp_path / "b", budget=60_000).turn(
        "s", history, tools=tools, warn_unanswered=False
    )
    assert given.trace.tools is not None
    spent = given.trace.tools.tokens
    assert given.trace.tokens.tools == spent > 20_000
    assert given.trace.tokens.total <= given.trace.tokens.available
    assert plain.trace.tokens.tools == 0
    # the room the definitions take is history the window no longer carries
    assert given.trace.tokens.history < plain.trace.tokens.history


def test_definitions_larger_than_the_budget_are_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    eng = engine(tmp_path, budget=8_000)
    with pytest.raises(PinnedOverflowError):
        eng.turn("s", "hello", tools=github_tools())
    assert eng.sessions.version("s") == 0


def test_every_shape_is_read_and_sent_in_the_render_s_shape_in_order(tmp_path: Path) -> None:
    given = [WEATHER_ANTHROPIC, CLOCK_CHAT, STOCK_RESPONSES, WEB_SEARCH]
    a = engine(tmp_path / "a").turn("s", "hi", tools=given).request["tools"]
    assert [t["name"] for t in a] == ["get_weather", "get_time", "get_stock", "web_search"]
    assert a[1]["input_schema"] == {"type": "object", "properties": {}}
    assert a[3] == {**WEB_SEARCH, "cache_control": {"type": "ephemeral"}}
    o = engine(tmp_path / "o", "openai").turn("s", "hi", tools=given[:3]).request["tools"]
    assert [t["function"]["name"] for t in o] == ["get_weather", "get_time", "get_stock"]
    assert o[0]["function"]["parameters"] == WEATHER_ANTHROPIC["input_schema"]
    mcp = {"name": "m", "description": "", "inputSchema": {"type": "object"}}
    assert render_given(read_tools([mcp]), "anthropic") == [
        {"name": "m", "input_schema": {"type": "object"}}
    ]


def test_given_tools_come_before_ctxwise_s_own_and_are_traced_apart(tmp_path: Path) -> None:
    config = EngineConfig.model_validate(
        {
            "store": f"sqlite:///{tmp_path / 'c.db'}",
            "tool_results": {"store_over": 400, "page_size": 20},
        }
    )
    eng = Engine(config, results=ResultStore(b"k" * 32, clock=lambda: 1_000.0))
    result = eng.turn("s", "hi", tools=[WEATHER_ANTHROPIC])
    assert [t["name"] for t in result.request["tools"]] == ["get_weather", "fetch_more"]
    assert result.trace.tools is not None
    assert result.trace.tools.given == ["get_weather"]
    assert result.trace.tools.sent == ["get_weather", "fetch_more"]
    with pytest.raises(UsageError, match="fetch_more"):
        eng.turn("s", "again", tools=[{**WEATHER_ANTHROPIC, "name": "fetch_more"}])


@pytest.mark.parametrize(
    ("tools", "error"),
    [
        ({"name": "x"}, UsageError),
        ("get_weather", UsageError),
        ([42], UsageError),
        ([WEATHER_ANTHROPIC, WEATHER_ANTHROPIC], ToolCatalogError),
        ([{"name": "no_schema"}], ToolCatalogError),
        ([{**WEATHER_ANTHROPIC, "input_schema": {"type": "string"}}], ToolCatalogError),
        ([{"type": ["web_search"]}], UsageError),
    ],
)
def test_bad_definitions_are_refused_before_anything_is_written(
    tmp_path: Path, tools: Any, error: type[Exception]
) -> None:
    eng = engine(tmp_path)
    with pytest.raises(error):
        eng.turn("s", "hello", tools=tools)
    assert eng.sessions.version("s") == 0
