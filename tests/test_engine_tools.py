"""Tools in the Engine: a deferred catalog with tool search, results trimmed or stored
behind cursors, the memory tool — and the session the issue asks for: the model calls
``tool_search``, then the tool it found, then ``fetch_more`` by cursor, through the
Engine, every request valid and every step in the trace.

The Anthropic session goes through the official SDK on a mock transport (the
provider cannot be reached from CI): each request the Engine builds is sent with
``client.messages.create(**request)``, and the scripted replies are shaped as the
Messages API documents them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxwise import Engine, EngineConfig, Message
from ctxwise.errors import ConfigError, PinnedOverflowError
from ctxwise.formats import anthropic as anthropic_format
from ctxwise.formats import openai as openai_format
from ctxwise.memory_tool import DirectoryMemory, MemoryTool
from ctxwise.messages import OpaqueBlock, ToolResultBlock, ToolUseBlock
from ctxwise.replay import _request_problem
from ctxwise.tools import ResultStore, ToolCatalog, ToolDef
from tests._cli import run as run_cli
from tests._http import mock_client, response
from tests.conftest import DATA

CATALOG = DATA / "tools" / "livemcpbench" / "livemcp_tool_catalog.jsonl"
KEY = b"k" * 32

ORDER_TOOL = ToolDef(
    "get_order_history",
    "List every order a customer placed: order id, date, item, quantity and status.",
    {
        "type": "object",
        "properties": {"customer_id": {"type": "string", "description": "The customer's id"}},
        "required": ["customer_id"],
    },
    server="Shop",
)


def _orders(n: int = 212) -> list[dict[str, Any]]:
    items = ["hiking boots", "tent", "rain jacket", "stove", "headlamp", "sleeping bag"]
    return [
        {
            "order_id": f"O-{1000 + i}",
            "date": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}",
            "item": items[i % len(items)],
            "quantity": 1 + i % 3,
            "status": "delivered" if i % 5 else "returned",
        }
        for i in range(n)
    ]


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


def _catalog() -> ToolCatalog:
    if not CATALOG.is_file():
        pytest.skip(f"shared data not found at {DATA} (set CTXWISE_DATA)")
    catalog = ToolCatalog.load(CATALOG, skip_invalid=True)
    catalog.add(ORDER_TOOL)
    return catalog


def _engine(tmp_path: Path, render: str = "anthropic", **tools: Any) -> tuple[Engine, Clock]:
    clock = Clock()
    config = EngineConfig.model_validate(
        {
            "store": f"sqlite:///{tmp_path / 'ctxwise.db'}",
            "render": render,
            "budget": 60_000,
            "system": "You are a shop assistant. Use the tools.",
            "tools": {"k": 0, **tools},
            "tool_results": {"store_over": 400, "page_size": 20},
        }
    )
    results = ResultStore(KEY, clock=clock, page_size=20)
    engine = Engine(config, catalog=_catalog(), results=results, now=clock)
    return engine, clock


def _check_anthropic(request: dict[str, Any]) -> None:
    """Valid as a Messages API body, and the tool rules Anthropic documents hold."""
    assert _request_problem(request, "anthropic") is None
    tools = request["tools"]
    names = [t["name"] for t in tools]
    assert len(names) == len(set(names)), "tool names are unique"
    deferred = {t["name"] for t in tools if t.get("defer_loading")}
    assert any(not t.get("defer_loading") for t in tools), "at least one tool is not deferred"
    assert not any(t.get("cache_control") for t in tools if t.get("defer_loading"))
    marks = sum(1 for t in tools if "cache_control" in t)
    marks += sum(1 for b in request.get("system", []) if "cache_control" in b)
    for m in request["messages"]:
        if isinstance(m["content"], list):
            marks += sum(1 for b in m["content"] if "cache_control" in b)
    assert marks <= 4, "at most four cache breakpoints"
    referenced: set[str] = set()
    for m in request["messages"]:
        if not isinstance(m["content"], list):
            continue
        for b in m["content"]:
            if b["type"] == "tool_result" and isinstance(b.get("content"), list):
                for part in b["content"]:
                    if part["type"] == "tool_reference":
                        assert part["tool_name"] in names, "a reference names a sent tool"
                        referenced.add(part["tool_name"])
            if b["type"] == "tool_use":
                callable_ = b["name"] not in deferred or b["name"] in referenced
                assert callable_, f"{b['name']} was called before it was loaded"


def _reply(content: list[dict[str, Any]], stop: str = "tool_use") -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def test_search_then_the_found_tool_then_fetch_more_through_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    anthropic = pytest.importorskip("anthropic")
    engine, _ = _engine(tmp_path)
    sent: list[dict[str, Any]] = []
    replies: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        sent.append(json.loads(request.content))
        return response("anthropic", 200, replies.pop(0))

    client = anthropic.Anthropic(api_key="test", http_client=mock_client("anthropic", handler))

    def call(request: dict[str, Any]) -> Message:
        _check_anthropic(request)
        reply = client.messages.create(**request)
        return anthropic_format.decode_response(reply.model_dump(mode="json", exclude_none=True))

    sid = "alice"
    question = "Which of my orders were hiking boots that I returned? I am customer c-118."
    first = engine.turn(sid, [Message.text_message("user", question)])
    tools = first.trace.tools
    assert tools is not None and tools.mode == "client"
    assert "tool_search" in tools.sent and "fetch_more" in tools.sent
    assert "get_order_history" not in tools.sent and tools.deferred == len(engine.catalog or ())
    assert tools.tokens < tools.all_tokens
    assert first.trace.tokens.tools == tools.tokens

    # 1. the model searches
    replies.append(
        _reply(
            [
                {
                    "type": "tool_use",
                    "id": "toolu_01",
                    "name": "tool_search",
                    "input": {"query": "a customer's order history"},
                }
            ]
        )
    )
    searching = call(first.request)
    found = engine.run_tool(sid, searching.tool_uses[0])
    assert found is not None and not found.is_error
    refs = [b for b in found.content if isinstance(b, OpaqueBlock)]
    assert {"type": "tool_reference", "tool_name": "get_order_history"} in [r.data for r in refs]

    second = engine.turn(sid, [searching, Message("user", (found,))])
    assert [e.kind for e in second.trace.tool_events] == ["search"]
    assert "get_order_history" in second.trace.tool_events[0].found
    assert second.trace.tools is not None
    assert "get_order_history" in second.trace.tools.loaded
    listed = {t["name"]: t for t in second.request["tools"]}
    assert not listed["get_order_history"].get("defer_loading")

    # 2. the model calls the tool it found; 212 orders come back, one page goes in
    replies.append(
        _reply(
            [
                {
                    "type": "tool_use",
                    "id": "toolu_02",
                    "name": "get_order_history",
                    "input": {"customer_id": "c-118"},
                }
            ]
        )
    )
    using = call(second.request)
    use = using.tool_uses[0]
    assert engine.run_tool(sid, use) is None  # not one of ctxwise's: the app runs it
    page_one = engine.tool_result(sid, use, _orders())
    shown = json.loads(page_one.content if isinstance(page_one.content, str) else "")
    assert len(shown["items"]) == 20 and shown["next_cursor"]
    third = engine.turn(sid, [using, Message("user", (page_one,))])
    stored = third.trace.tool_events
    assert [e.kind for e in stored] == ["stored"]
    assert stored[0].tokens_after < stored[0].tokens_before

    # 3. the model pages on with the cursor
    replies.append(
        _reply(
            [
                {
                    "type": "tool_use",
                    "id": "toolu_03",
                    "name": "fetch_more",
                    "input": {"cursor": shown["next_cursor"]},
                }
            ]
        )
    )
    paging = call(third.request)
    page_two = engine.run_tool(sid, paging.tool_uses[0])
    assert page_two is not None and not page_two.is_error
    body = json.loads(page_two.content if isinstance(page_two.content, str) else "")
    assert body["items"][0] == _orders()[20]
    fourth = engine.turn(sid, [paging, Message("user", (page_two,))])
    assert [e.kind for e in fourth.trace.tool_events] == ["fetch_more"]

    replies.append(_reply([{"type": "text", "text": "Orders O-1000 and O-1030."}], "end_turn"))
    answer = call(fourth.request)
    engine.record(sid, [answer])
    assert len(sent) == 4

    # every step is in the stored traces, in order
    kinds = [[e.kind for e in t.tool_events] for t in engine.traces(sid)]
    assert kinds == [[], ["search"], ["stored"], ["fetch_more"]]
    engine.close()
    # and `ctxwise trace` shows them, one turn each (wide enough for one line a row)
    monkeypatch.setenv("COLUMNS", "300")
    shown = run_cli("trace", sid, "--db", str(tmp_path / "ctxwise.db"))
    assert shown.exit_code == 0, shown.stderr
    rows = [line for line in shown.stdout.splitlines() if line.startswith("│")]
    assert "search found" in rows[1] and "stored get_order_history" in rows[2]
    assert "fetch_more" in rows[3] and "search" not in rows[0]


def test_a_forged_or_foreign_cursor_gets_an_error_the_model_can_act_on(tmp_path: Path) -> None:
    engine, clock = _engine(tmp_path)
    engine.turn("a", [Message.text_message("user", "my orders please")])
    use = ToolUseBlock("toolu_1", "get_order_history", {"customer_id": "c-1"})
    page = engine.tool_result("a", use, _orders())
    cursor = json.loads(str(page.content))["next_cursor"]
    forged = cursor[:-4] + ("AAAA" if not cursor.endswith("AAAA") else "BBBB")
    for sid, value, reason in (("a", forged, "forged"), ("b", cursor, "wrong_session")):
        out = engine.run_tool(sid, ToolUseBlock("toolu_x", "fetch_more", {"cursor": value}))
        assert out is not None and out.is_error and reason in str(out.content)
    clock.t += 10_000
    late = engine.run_tool("a", ToolUseBlock("toolu_y", "fetch_more", {"cursor": cursor}))
    assert late is not None and late.is_error and "expired" in str(late.content)
    missing = engine.run_tool("a", ToolUseBlock("toolu_z", "fetch_more", {}))
    assert missing is not None and missing.is_error
    engine.close()


def test_a_rotated_cursor_key_still_opens_the_cursors_the_old_one_signed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = "the-old-cursor-key-0123", "the-new-cursor-key-4567"

    def engine(**results: Any) -> Engine:
        config = EngineConfig.model_validate(
            {
                "store": f"sqlite:///{tmp_path / 'ctxwise.db'}",
                "tools": {"k": 0},
                "tool_results": {"store_over": 400, "page_size": 20, **results},
            }
        )
        return Engine(config, catalog=_catalog(), now=Clock())

    monkeypatch.setenv("CTXWISE_CURSOR_KEY", old)
    with engine() as first:
        first.turn("a", [Message.text_message("user", "my orders please")])
        use = ToolUseBlock("toolu_1", "get_order_history", {"customer_id": "c-1"})
        cursor = json.loads(str(first.tool_result("a", use, _orders()).content))["next_cursor"]
    monkeypatch.setenv("CTXWISE_CURSOR_KEY", new)
    fetch = ToolUseBlock("toolu_2", "fetch_more", {"cursor": cursor})
    with engine() as rotated_only:  # the old key dropped: the cursor is refused
        out = rotated_only.run_tool("a", fetch)
        assert out is not None and out.is_error and "forged" in str(out.content)
    monkeypatch.setenv("CTXWISE_OLD_CURSOR_KEY", old)
    with engine(previous_key_envs=["CTXWISE_OLD_CURSOR_KEY"]) as rotated:
        out = rotated.run_tool("a", fetch)
        assert out is not None and not out.is_error
        assert json.loads(str(out.content))["items"][0]["order_id"] == "O-1020"
    monkeypatch.setenv("CTXWISE_OLD_CURSOR_KEY", "short")
    with pytest.raises(ConfigError, match="CTXWISE_OLD_CURSOR_KEY"):
        engine(previous_key_envs=["CTXWISE_OLD_CURSOR_KEY"])


def test_a_bad_search_call_loads_nothing(tmp_path: Path) -> None:
    engine, _ = _engine(tmp_path)
    engine.turn("s", [Message.text_message("user", "hello")])
    for bad in ({}, {"query": ""}, {"query": "pdf", "extra": 1}, {"query": "pdf", "k": 99}):
        out = engine.run_tool("s", ToolUseBlock("toolu_b", "tool_search", bad))
        assert out is not None and out.is_error
    assert engine._load("s").loaded_tools == ()
    engine.close()


def test_openai_session_adds_the_found_definitions_to_the_next_request(tmp_path: Path) -> None:
    engine, _ = _engine(tmp_path, render="openai")
    first = engine.turn("o", [Message.text_message("user", "I need my order history")])
    names = [t["function"]["name"] for t in first.request["tools"]]
    assert "tool_search" in names and "get_order_history" not in names
    assert _request_problem(first.request, "openai") is None
    use = ToolUseBlock("call_1", "tool_search", {"query": "customer order history"})
    result = engine.run_tool("o", use)
    assert result is not None and isinstance(result.content, str)
    assert "get_order_history" in result.content
    second = engine.turn("o", [Message("assistant", (use,)), Message("user", (result,))])
    assert _request_problem(second.request, "openai") is None
    names = [t["function"]["name"] for t in second.request["tools"]]
    assert "get_order_history" in names
    decoded = openai_format.decode_request(second.request)
    assert decoded.problems("openai") == []
    engine.close()


def test_server_mode_defers_everything_but_the_always_loaded(tmp_path: Path) -> None:
    engine, _ = _engine(tmp_path, mode="server", always=["Shop/get_order_history"])
    out = engine.turn("srv", [Message.text_message("user", "orders?")])
    tools = out.request["tools"]
    _check_anthropic(out.request)
    kinds = [t.get("type") for t in tools]
    assert "tool_search_tool_bm25_20251119" in kinds
    by_name = {t["name"]: t for t in tools}
    assert not by_name["get_order_history"].get("defer_loading")
    assert by_name["tool_search_tool_bm25"].get("cache_control")
    assert sum(1 for t in tools if t.get("defer_loading")) == len(engine.catalog or ()) - 1
    assert out.trace.tools is not None and out.trace.tools.mode == "server"
    engine.close()


def test_a_tool_the_model_calls_stays_loaded(tmp_path: Path) -> None:
    engine, _ = _engine(tmp_path, k=3)
    first = engine.turn("p", [Message.text_message("user", "show my order history")])
    assert first.trace.tools is not None
    assert "get_order_history" in first.trace.tools.found
    use = ToolUseBlock("toolu_1", "get_order_history", {"customer_id": "c"})
    result = engine.tool_result("p", use, [{"order_id": "O-1"}])
    later = engine.turn(
        "p",
        [
            Message("assistant", (use,)),
            Message("user", (result,)),
            Message.text_message("user", "now convert a word document to pdf"),
        ],
    )
    assert later.trace.tools is not None
    assert "get_order_history" in later.trace.tools.loaded
    engine.close()


def test_trim_settings_cut_a_result_and_the_trace_says_so(tmp_path: Path) -> None:
    config = EngineConfig.model_validate(
        {
            "store": f"sqlite:///{tmp_path / 'db.sqlite'}",
            "tool_results": {
                "trim": {"get_order_history": {"fields": ["order_id", "status"], "max_items": 5}}
            },
        }
    )
    engine = Engine(config)
    engine.turn("t", [Message.text_message("user", "orders")])
    use = ToolUseBlock("toolu_1", "get_order_history", {})
    out = engine.tool_result("t", use, _orders(30))
    data = json.loads(str(out.content))
    assert data[0] == {"order_id": "O-1000", "status": "returned"}
    assert data[-1] == "… 25 more items"
    nxt = engine.turn("t", [Message("assistant", (use,)), Message("user", (out,))])
    (event,) = nxt.trace.tool_events
    assert event.kind == "trimmed" and event.tokens_after < event.tokens_before
    # an error result is passed on as it is
    err = engine.tool_result("t", use, "boom", is_error=True)
    assert err.is_error and err.content == "boom"
    engine.close()


def test_a_result_nested_past_the_json_decoder_is_stored_by_lines(tmp_path: Path) -> None:
    # a text result over store_over that is JSON nested deeper than json.loads goes:
    # it raised RecursionError and ended the turn; it is paged by lines, as text is
    config = EngineConfig.model_validate(
        {"store": f"sqlite:///{tmp_path / 'db.sqlite'}", "tool_results": {"store_over": 50}}
    )
    with Engine(config, results=ResultStore(KEY, clock=Clock(), page_size=20)) as engine:
        engine.turn("n", [Message.text_message("user", "dump it")])
        use = ToolUseBlock("toolu_1", "dump", {})
        deep = "\n".join(["[" * 100_000 + "]" * 100_000, *(f"line {i}" for i in range(200))])
        out = engine.tool_result("n", use, deep)
        assert "fetch_more" in str(out.content) or "cursor" in str(out.content)
        assert len(str(out.content)) < len(deep)
        engine.turn("n", [Message("assistant", (use,)), Message("user", (out,))])


def test_the_memory_tool_runs_in_the_engine(tmp_path: Path) -> None:
    config = EngineConfig.model_validate(
        {"store": f"sqlite:///{tmp_path / 'm.sqlite'}", "memory_tool": {"enabled": True}}
    )
    engine = Engine(config)
    first = engine.turn("m", [Message.text_message("user", "note that photo is verified")])
    assert {"type": "memory_20250818", "name": "memory"} in [
        {k: v for k, v in t.items() if k != "cache_control"} for t in first.request["tools"]
    ]
    create = ToolUseBlock(
        "toolu_1",
        "memory",
        {"command": "create", "path": "/memories/case.md", "file_text": "photo verified\n"},
    )
    done = engine.run_tool("m", create)
    assert done is not None and not done.is_error
    view = engine.run_tool(
        "m", ToolUseBlock("toolu_2", "memory", {"command": "view", "path": "/memories/case.md"})
    )
    assert view is not None and "photo verified" in str(view.content)
    bad = engine.run_tool(
        "m", ToolUseBlock("toolu_3", "memory", {"command": "view", "path": "/etc/passwd"})
    )
    assert bad is not None and bad.is_error
    # another session has its own notes
    other = engine.run_tool(
        "n", ToolUseBlock("toolu_4", "memory", {"command": "view", "path": "/memories/case.md"})
    )
    assert other is not None and other.is_error
    engine.close()


def test_directory_memory_tool_given_in_code(tmp_path: Path) -> None:
    tool = MemoryTool(DirectoryMemory(tmp_path / "mem"))
    config = EngineConfig.model_validate(
        {"store": f"sqlite:///{tmp_path / 'd.sqlite'}", "memory_tool": {"enabled": True}}
    )
    engine = Engine(config, memory_tool=tool)
    engine.run_tool(
        "d",
        ToolUseBlock(
            "toolu_1", "memory", {"command": "create", "path": "/memories/a.txt", "file_text": "x"}
        ),
    )
    assert (tmp_path / "mem" / "a.txt").read_text() == "x"
    engine.close()


def test_bad_tool_config_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXWISE_CURSOR_KEY", raising=False)
    store = f"sqlite:///{tmp_path / 'x.sqlite'}"
    with pytest.raises(ConfigError, match="CTXWISE_CURSOR_KEY"):
        Engine(EngineConfig.model_validate({"store": store, "tool_results": {"store_over": 10}}))
    monkeypatch.setenv("CTXWISE_CURSOR_KEY", "a-key-of-at-least-16-bytes")
    with Engine(
        EngineConfig.model_validate({"store": store, "tool_results": {"store_over": 10}})
    ) as engine:
        assert engine.results is not None
    for bad in (
        {"tools": {"mode": "server"}, "render": "openai"},
        {"memory_tool": {"enabled": True}, "render": "openai"},
        {"tools": {"k": -1}},
    ):
        with pytest.raises(ConfigError):
            from ctxwise.config import config_from_dict

            config_from_dict({"store": store, **bad})
    tiny = EngineConfig.model_validate({"store": store, "budget": 150})
    with Engine(tiny, catalog=_catalog()) as engine:
        engine.catalog.set_always_loaded(["get_order_history", "bing_search", "fetch_webpage"])  # type: ignore[union-attr]
        with pytest.raises(PinnedOverflowError, match="tool definitions"):
            engine.turn("z", [Message.text_message("user", "hi")])


def test_tool_result_is_a_result_block(tmp_path: Path) -> None:
    engine, _ = _engine(tmp_path)
    engine.turn("r", [Message.text_message("user", "orders")])
    out = engine.tool_result("r", ToolUseBlock("toolu_1", "get_order_history", {}), {"a": 1})
    assert isinstance(out, ToolResultBlock) and out.content == '{"a": 1}'
    engine.close()


@pytest.mark.parametrize("render", ["anthropic", "openai"])
def test_catalog_tools_named_like_the_engines_own_are_renamed(tmp_path: Path, render: str) -> None:
    # a catalog tool named fetch_more or memory was sent beside the Engine's own
    # tool of that name, and the API refuses two tools of one name
    schema = {"type": "object", "properties": {}}
    catalog = ToolCatalog()
    catalog.add(
        [ToolDef("fetch_more", "Fetch more news.", schema), ToolDef("memory", "Recall.", schema)],
        always_loaded=True,
    )
    config = EngineConfig.model_validate(
        {
            "store": f"sqlite:///{tmp_path / 'r.sqlite'}",
            "render": render,
            "tools": {"k": 0},
            "tool_results": {"store_over": 400},
            "memory_tool": {"enabled": render == "anthropic"},
        }
    )
    results = ResultStore(KEY, clock=Clock())
    with Engine(config, catalog=catalog, results=results) as engine:
        request = engine.turn("n", [Message.text_message("user", "news?")]).request
    names = [t.get("name") or t["function"]["name"] for t in request["tools"]]
    assert len(names) == len(set(names)), names
    assert {"fetch_more", *(["memory"] if render == "anthropic" else [])} <= set(names)
    wires = {catalog.wire_name(t) for t in catalog}
    assert wires <= set(names) and not wires & {"fetch_more", "memory"}


def test_a_session_id_with_a_slash_stores_and_pages_its_tool_results(tmp_path: Path) -> None:
    # issue 33: the result store put the raw session id into the namespace, where
    # every other store escapes it, so an id holding '/' failed with store_over set
    config = EngineConfig.model_validate(
        {
            "store": f"sqlite:///{tmp_path / 'db.sqlite'}",
            "tool_results": {"store_over": 400, "page_size": 20},
        }
    )
    with Engine(config, results=ResultStore(KEY, clock=Clock(), page_size=20)) as engine:
        use = ToolUseBlock("toolu_1", "get_order_history", {})
        pages = {}
        for sid in ("team/alice", "team%2Falice"):  # escaped apart: never one namespace
            engine.turn(sid, [Message.text_message("user", "list my orders")])
            out = engine.tool_result(sid, use, _orders() if sid == "team/alice" else _orders(50))
            pages[sid] = json.loads(out.content if isinstance(out.content, str) else "")
        first = pages["team/alice"]
        assert first["showing"] == "items 1-20 of 212"
        assert pages["team%2Falice"]["showing"] == "items 1-20 of 50"
        more = ToolUseBlock("toolu_2", "fetch_more", {"cursor": first["next_cursor"]})
        page_two = engine.run_tool("team/alice", more)
        assert page_two is not None and not page_two.is_error
        body = json.loads(page_two.content if isinstance(page_two.content, str) else "")
        assert body["items"][0] == _orders()[20]
        # another session cannot open it, even one whose escaped id looks alike
        foreign = engine.run_tool("team%2Falice", more)
        assert foreign is not None and foreign.is_error


@pytest.mark.parametrize("backend", ["store", "directory"])
def test_the_memory_tool_s_file_limit_is_a_config_key(tmp_path: Path, backend: str) -> None:
    # issue 33: every limit a config key or a flag; the memory file's was neither
    config = EngineConfig.model_validate(
        {
            "store": f"sqlite:///{tmp_path / 'm.sqlite'}",
            "memory_tool": {
                "enabled": True,
                "backend": backend,
                "directory": str(tmp_path / "mem"),
                "max_file_bytes": 16,
            },
        }
    )
    with Engine(config) as engine:
        tool = engine._memory_tool("m")
        assert tool is not None and tool.max_file_bytes == 16

        def create(text: str) -> ToolResultBlock:
            use = ToolUseBlock(
                "toolu_1",
                "memory",
                {"command": "create", "path": "/memories/a.md", "file_text": text},
            )
            out = engine.run_tool("m", use)
            assert out is not None
            return out

        refused = create("x" * 17)
        assert refused.is_error and "16-byte limit" in str(refused.content)
        assert not create("x" * 16).is_error
    with pytest.raises(ConfigError, match="max_file_bytes"):
        EngineConfig.model_validate({"memory_tool": {"max_file_bytes": 0}})
    default = EngineConfig().memory_tool.max_file_bytes
    from ctxwise.memory_tool import DEFAULT_MAX_FILE_BYTES

    assert default == DEFAULT_MAX_FILE_BYTES
