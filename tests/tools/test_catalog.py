"""ToolCatalog: loading every shared listing, refusing bad definitions, search,
per-turn selection, the rendered Anthropic and OpenAI tools arrays, and the
``tool_search`` tool's results."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise.embeddings import HashingEmbedder
from ctxwise.errors import FormatError, ToolCatalogError
from ctxwise.messages import OpaqueBlock, TextBlock, ToolResultBlock
from ctxwise.tools.catalog import (
    MAX_SEARCH_K,
    SERVER_SEARCH_TOOLS,
    TOOL_SEARCH,
    ToolCatalog,
    ToolDef,
    ToolTurn,
)
from tests.conftest import DATA

TOOLS = DATA / "tools"
LIVEMCP = TOOLS / "livemcpbench" / "livemcp_tool_catalog.jsonl"
LIVEMCP_QUERIES = TOOLS / "livemcpbench" / "livemcp_queries_gold_tools.jsonl"
GITHUB = TOOLS / "mcp_listings" / "github-mcp-server.tools_list.json"
SNAPSHOTS = TOOLS / "mcp_listings" / "mcp-proxy-snapshots"
WIRE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
OBJ: dict[str, Any] = {"type": "object", "properties": {}}


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared tool data not found at {path} (set CTXWISE_DATA)")
    return path


def _snapshots() -> list[Path]:
    return sorted(SNAPSHOTS.glob("*.json"))


@pytest.fixture(scope="module")
def livemcp() -> ToolCatalog:
    return ToolCatalog.load(_need(LIVEMCP), skip_invalid=True)


@pytest.fixture(scope="module")
def github() -> ToolCatalog:
    return ToolCatalog.load(_need(GITHUB))


def _tool(name: str, server: str | None = None, description: str = "") -> ToolDef:
    return ToolDef(name, description, OBJ, server)


def _small() -> ToolCatalog:
    cat = ToolCatalog()
    cat.add_mcp(
        {
            "tools": [
                {
                    "name": "read_file",
                    "description": "Read a text file from disk and return its contents.",
                    "inputSchema": {
                        "type": "object",
                        "properties": {"path": {"type": "string", "description": "file path"}},
                    },
                },
                {
                    "name": "write_file",
                    "description": "Write text to a file on disk, replacing it.",
                    "inputSchema": OBJ,
                },
                {
                    "name": "search",
                    "description": "Search files by name pattern.",
                    "inputSchema": OBJ,
                },
            ]
        },
        server="filesystem",
    )
    cat.add_mcp(
        {
            "tools": [
                {
                    "name": "create_issue",
                    "description": "Open a new issue in a GitHub repository.",
                    "inputSchema": OBJ,
                },
                {
                    "name": "list_pull_requests",
                    "description": "List pull requests of a repository.",
                    "inputSchema": OBJ,
                },
                {
                    "name": "search",
                    "description": "Search code across GitHub repositories.",
                    "inputSchema": OBJ,
                },
            ]
        },
        server="github",
    )
    cat.add_mcp(
        {
            "tools": [
                {
                    "name": "get_weather",
                    "description": "Current weather forecast for a city.",
                    "inputSchema": OBJ,
                }
            ]
        },
        server="weather",
    )
    return cat


# -- loading every shared listing -----------------------------------------------------


def test_livemcpbench_loads_whole_without_skip_invalid() -> None:
    # read_pdf writes draft 4's {"minimum": 0, "exclusiveMinimum": true}: it was refused
    catalog = ToolCatalog.load(_need(LIVEMCP))
    rows = [json.loads(x) for x in LIVEMCP.read_text(encoding="utf-8").splitlines() if x.strip()]
    assert len(catalog) == len(rows) == 527 and catalog.skipped == []
    assert {(r["server"], r["name"]) for r in rows} == {t.key for t in catalog}
    assert all(t.server for t in catalog)
    pdf = catalog.find("read_pdf")
    pages = pdf.input_schema["properties"]["sources"]["items"]["properties"]["pages"]
    # kept in the 2020-12 form the providers take: page numbers above 0
    assert pages["anyOf"][0]["items"] == {"type": "integer", "exclusiveMinimum": 0}
    (raw,) = [r for r in rows if r["name"] == "read_pdf"]
    assert raw["inputSchema"]["properties"]["sources"]["items"]["properties"]["pages"]["anyOf"][0][
        "items"
    ] == {"type": "integer", "exclusiveMinimum": True, "minimum": 0}


def test_livemcpbench_skip_invalid_skips_nothing(livemcp: ToolCatalog) -> None:
    assert len(livemcp) == 527 and livemcp.skipped == []


def test_github_listing(github: ToolCatalog) -> None:
    assert len(github) == 117
    (server,) = {t.server for t in github}  # the file's name (how much of it may vary)
    assert server and GITHUB.name.startswith(server)
    names = [t.name for t in github]
    assert [github.wire_name(t) for t in github] == names  # one server: plain names


@pytest.mark.parametrize("path", _snapshots(), ids=lambda p: p.name)
def test_every_mcp_proxy_snapshot(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    server = doc.get("server") or doc["server_info"]["name"]
    cat = ToolCatalog.load(path)
    assert len(cat) == len(doc["tools"]) > 0
    assert {t.server for t in cat} == {server}
    assert [t.name for t in cat] == [t["name"] for t in doc["tools"]]
    turn = cat.for_turn(None)
    assert all(WIRE.match(t["name"]) for t in cat.anthropic_tools(turn))


def test_the_snapshots_are_all_there() -> None:
    _need(SNAPSHOTS)
    assert len(_snapshots()) == 8


def test_snapshots_combined_one_server_per_file() -> None:
    _need(SNAPSHOTS)
    combined = ToolCatalog()
    for path in _snapshots():
        doc = json.loads(path.read_text(encoding="utf-8"))
        server = doc.get("server") or doc["server_info"]["name"]
        combined.add_mcp(doc, server=server)
    names = [combined.wire_name(t) for t in combined]
    assert len(set(names)) == len(names)
    assert all(WIRE.match(n) for n in names)
    for t in combined:
        assert combined.find(combined.wire_name(t)) is t


def test_load_server_argument_overrides_the_listing(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"server": "inside", "tools": [{"name": "a", "inputSchema": OBJ}]}))
    assert {t.server for t in ToolCatalog.load(path)} == {"inside"}
    assert {t.server for t in ToolCatalog.load(path, server="mine")} == {"mine"}


def test_add_anthropic_round_trip() -> None:
    tools = [
        {
            "name": "get_stock",
            "description": "Price of a ticker.",
            "input_schema": {
                "type": "object",
                "properties": {"ticker": {"type": "string"}},
                "required": ["ticker"],
            },
        },
        {"type": "custom", "name": "ping", "input_schema": OBJ},
    ]
    cat = ToolCatalog()
    defs = cat.add_anthropic(tools, always_loaded=True)
    assert [d.name for d in defs] == ["get_stock", "ping"]
    out = cat.anthropic_tools(cat.for_turn(None))
    by_name = {t["name"]: t for t in out}
    for raw in tools:
        got = by_name[raw["name"]]
        assert got.get("description") == raw.get("description")
        assert got["input_schema"] == raw["input_schema"]
        assert "defer_loading" not in got


def test_add_openai_round_trip_both_shapes() -> None:
    params = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    chat = [
        {
            "type": "function",
            "function": {"name": "find_docs", "description": "Find docs.", "parameters": params},
        }
    ]
    responses = [
        {"type": "function", "name": "find_code", "description": "Find code.", "parameters": params}
    ]
    cat = ToolCatalog()
    cat.add_openai(chat, always_loaded=True)
    cat.add_openai(responses, always_loaded=True)
    out = cat.openai_tools(cat.for_turn(None))
    fns = {t["function"]["name"]: t["function"] for t in out if t["type"] == "function"}
    assert fns["find_docs"]["description"] == "Find docs."
    assert fns["find_docs"]["parameters"] == params
    assert fns["find_code"]["description"] == "Find code."
    assert fns["find_code"]["parameters"] == params
    back = ToolCatalog()
    back.add_openai([t for t in out if t["function"]["name"] != TOOL_SEARCH])
    assert [(t.name, t.description, dict(t.input_schema)) for t in back] == [
        (t.name, t.description, dict(t.input_schema)) for t in cat
    ]


def test_openai_without_parameters_gets_an_empty_object_schema() -> None:
    cat = ToolCatalog()
    (tool,) = cat.add_openai([{"type": "function", "function": {"name": "now"}}])
    assert tool.input_schema == {"type": "object", "properties": {}}


def test_openai_null_parameters_get_an_empty_object_schema() -> None:
    # the Responses API types parameters as Optional: a dumped FunctionTool has null
    from openai.types.responses import FunctionTool

    dumped = FunctionTool(type="function", name="ping", parameters=None).model_dump()
    chat = {"type": "function", "function": {"name": "now", "parameters": None}}
    cat = ToolCatalog()
    for tool in cat.add_openai([dumped, chat]):
        assert tool.input_schema == {"type": "object", "properties": {}}
    assert [t.name for t in cat] == ["ping", "now"]


def test_add_mcp_takes_the_sdk_models() -> None:
    # ClientSession.list_tools() returns a ListToolsResult; it was refused ("has a
    # 'tools' list"), and its model_dump() has input_schema, not inputSchema
    from mcp.types import ListToolsResult, Tool, ToolAnnotations

    result = ListToolsResult(
        tools=[
            Tool(name="read", description="Read a file.", inputSchema=OBJ),
            Tool(name="ping", inputSchema=OBJ, annotations=ToolAnnotations(readOnlyHint=True)),
        ]
    )
    cat = ToolCatalog()
    defs = cat.add_mcp(result, server="fs")
    assert [(t.name, t.description, t.server) for t in defs] == [
        ("read", "Read a file.", "fs"),
        ("ping", "", "fs"),
    ]
    assert defs[1].annotations == {"readOnlyHint": True}
    other = ToolCatalog()
    assert other.add_mcp(list(result.tools), server="fs") == defs


def test_load_anthropic_and_openai_files(tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    a.write_text(json.dumps([{"name": "x", "description": "d", "input_schema": OBJ}]))
    o = tmp_path / "o.json"
    o.write_text(json.dumps([{"type": "function", "function": {"name": "y", "parameters": OBJ}}]))
    assert [t.name for t in ToolCatalog.load(a)] == ["x"]
    assert [t.name for t in ToolCatalog.load(o, server="s")] == ["y"]
    assert [t.server for t in ToolCatalog.load(o, server="s")] == ["s"]


# -- bad input: a typed error, and nothing added --------------------------------------


def _refused(cat: ToolCatalog, reason: str, fn: Any, *args: Any, **kwargs: Any) -> None:
    before = [t.key for t in cat]
    with pytest.raises(ToolCatalogError) as info:
        fn(*args, **kwargs)
    assert info.value.reason == reason, str(info.value)
    assert [t.key for t in cat] == before


def test_duplicate_in_one_batch() -> None:
    cat = _small()
    tools = [
        {"name": "new_one", "inputSchema": OBJ},
        {"name": "dup", "inputSchema": OBJ},
        {"name": "dup", "inputSchema": OBJ},
    ]
    _refused(cat, "duplicate", cat.add_mcp, {"tools": tools}, server="x")
    assert len(cat) == 7


def test_duplicate_against_existing() -> None:
    cat = _small()
    tools = [{"name": "fresh", "inputSchema": OBJ}, {"name": "read_file", "inputSchema": OBJ}]
    _refused(cat, "duplicate", cat.add_mcp, tools, server="filesystem")
    _refused(cat, "duplicate", cat.add, [_tool("fresh2", "github"), _tool("search", "github")])
    with pytest.raises(ToolCatalogError) as info:
        cat.add(_tool("read_file", "filesystem"))
    assert (info.value.tool, info.value.server) == ("read_file", "filesystem")


def test_duplicate_in_a_file_is_refused_even_when_skipping(tmp_path: Path) -> None:
    path = tmp_path / "dup.json"
    one = {"name": "a", "inputSchema": OBJ}
    path.write_text(json.dumps({"tools": [one, one]}))
    with pytest.raises(ToolCatalogError) as info:
        ToolCatalog.load(path, skip_invalid=True)
    assert info.value.reason == "duplicate"


def test_same_name_on_two_servers_is_two_tools_rendered_qualified() -> None:
    cat = _small()
    assert len(cat) == 7
    fs = cat.find("filesystem/search")
    gh = cat.find("github/search")
    assert fs is not gh
    assert cat.wire_name(fs) == "filesystem__search"
    assert cat.wire_name(gh) == "github__search"
    for t in cat:
        assert WIRE.match(cat.wire_name(t))
        if t.name != "search":
            assert cat.wire_name(t) == t.name
    turn = cat.for_turn("search files and code", k=7)
    names = [t["name"] for t in cat.anthropic_tools(turn)]
    assert "filesystem__search" in names
    assert "github__search" in names
    assert "search" not in names
    assert cat.find("filesystem__search") is fs


def test_tokens_follow_a_wire_name_qualified_by_a_later_add() -> None:
    # the count was cached under the old (shorter) wire name and never recounted
    cat = ToolCatalog([ToolDef("get", "Get a thing.", OBJ, "s1")])
    tool = cat.find("get")
    assert cat.tokens(tool) == cat.counter.count(
        json.dumps({"name": "get", "description": "Get a thing.", "input_schema": OBJ})
    )
    cat.add(ToolDef("get", "Get a thing.", OBJ, "s2"))
    assert cat.wire_name(tool) == "s1__get"
    fresh = ToolCatalog(
        [ToolDef("get", "Get a thing.", OBJ, "s1"), ToolDef("get", "Get a thing.", OBJ, "s2")]
    )
    assert cat.tokens(tool) == fresh.tokens(tool) > 0
    assert cat.all_tokens() == fresh.all_tokens()


def test_server_names_that_are_not_wire_safe() -> None:
    cat = ToolCatalog([_tool("go", "example-servers/puppeteer"), _tool("go", "my server.v2")])
    names = [cat.wire_name(t) for t in cat]
    assert all(WIRE.match(n) for n in names)
    assert len(set(names)) == 2
    assert cat.find("example-servers/puppeteer/go").server == "example-servers/puppeteer"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "nosuchtype"}}},
        {"type": "object", "required": "a"},
        {"type": "object", "properties": {"a": {"minimum": "zero"}}},
    ],
)
def test_schema_that_is_not_json_schema(schema: dict[str, Any]) -> None:
    cat = _small()
    good = {"name": "good", "inputSchema": OBJ}
    _refused(
        cat,
        "invalid_schema",
        cat.add_mcp,
        [good, {"name": "bad", "inputSchema": schema}],
        server="s",
    )


@pytest.mark.parametrize("schema", [{"type": "string"}, {"properties": {}}, [], "object", None])
def test_schema_whose_type_is_not_object(schema: Any) -> None:
    cat = _small()
    _refused(cat, "invalid_schema", cat.add_mcp, [{"name": "t", "inputSchema": schema}], server="s")


def test_schema_draft_is_the_schemas_own() -> None:
    # exclusiveMinimum as a boolean is draft 4; under 2020-12 it must be a number
    draft4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": True}},
    }
    cat = ToolCatalog()
    cat.add_mcp([{"name": "ok", "inputSchema": draft4}], server="s")
    assert cat.find("ok").input_schema == draft4  # checked as draft 4, kept as written
    # a schema that names 2020-12 means it: the boolean form is refused there
    named = {**draft4, "$schema": "https://json-schema.org/draft/2020-12/schema"}
    _refused(cat, "invalid_schema", cat.add_mcp, [{"name": "no", "inputSchema": named}], server="s")


def _number(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema of property ``n`` once a catalog has taken it (no ``$schema``)."""
    cat = ToolCatalog()
    obj = {"type": "object", "properties": {"n": schema}}
    cat.add_mcp([{"name": "t", "inputSchema": obj}], server="s")
    return dict(cat.find("t").input_schema["properties"]["n"])


def test_draft4_boolean_bounds_without_a_schema_uri_are_read_as_draft_4() -> None:
    assert _number({"type": "number", "minimum": 0, "exclusiveMinimum": True}) == {
        "type": "number",
        "exclusiveMinimum": 0,
    }
    assert _number({"maximum": 9.5, "exclusiveMaximum": True, "description": "d"}) == {
        "exclusiveMaximum": 9.5,
        "description": "d",
    }
    # false: the bound is inclusive, as minimum alone says
    assert _number({"minimum": 1, "exclusiveMinimum": False}) == {"minimum": 1}
    # the 2020-12 form and a schema without bounds are kept as they are
    assert _number({"exclusiveMinimum": 3}) == {"exclusiveMinimum": 3}
    assert _number({"type": "string", "minLength": 1}) == {"type": "string", "minLength": 1}


def test_draft4_bounds_are_rewritten_in_subschemas_only() -> None:
    data = {"minimum": 1, "exclusiveMinimum": True}  # data, not a schema: kept
    inclusive = {"minimum": 0, "exclusiveMinimum": False}
    schema = {
        "type": "object",
        "properties": {
            "exclusiveMinimum": {"type": "integer", "minimum": 2, "exclusiveMinimum": True},
            "choice": {"enum": [data], "default": data, "const": data},
            "list": {"prefixItems": [{"maximum": 5, "exclusiveMaximum": True}]},
            "any": {"anyOf": [{"$ref": "#/$defs/pos"}, {"not": inclusive}]},
        },
        "$defs": {"pos": {"minimum": 0, "exclusiveMinimum": True}},
    }  # fmt: skip
    cat = ToolCatalog()
    cat.add_mcp([{"name": "t", "inputSchema": schema}], server="s")
    got = cat.find("t").input_schema
    assert got["properties"]["exclusiveMinimum"] == {"type": "integer", "exclusiveMinimum": 2}
    assert got["properties"]["choice"] == {"enum": [data], "default": data, "const": data}
    assert got["properties"]["list"]["prefixItems"] == [{"exclusiveMaximum": 5}]
    assert got["properties"]["any"]["anyOf"][1] == {"not": {"minimum": 0}}
    assert got["$defs"] == {"pos": {"exclusiveMinimum": 0}}
    assert schema["$defs"] == {"pos": {"minimum": 0, "exclusiveMinimum": True}}  # not changed


@pytest.mark.parametrize(
    "bad",
    [
        {"exclusiveMinimum": True},  # draft 4 needs the minimum beside it
        {"exclusiveMaximum": False, "maximum": "9"},
        {"minimum": True, "exclusiveMinimum": True},
    ],
)
def test_draft4_boolean_bounds_without_a_number_are_refused(bad: dict[str, Any]) -> None:
    cat = ToolCatalog()
    schema = {"type": "object", "properties": {"n": bad}}
    _refused(cat, "invalid_schema", cat.add_mcp, [{"name": "t", "inputSchema": schema}], server="s")


@given(
    bound=st.one_of(st.integers(-5, 5), st.floats(-5, 5, allow_nan=False)),
    exclusive=st.booleans(),
    upper=st.booleans(),
    value=st.one_of(st.integers(-6, 6), st.floats(-6, 6, allow_nan=False)),
)
def test_draft4_bounds_keep_what_a_draft_4_validator_accepts(
    bound: float, exclusive: bool, upper: bool, value: float
) -> None:
    from jsonschema import Draft4Validator, Draft202012Validator

    flag, limit = ("exclusiveMaximum", "maximum") if upper else ("exclusiveMinimum", "minimum")
    written = {"type": "number", limit: bound, flag: exclusive}
    taken = _number(written)
    assert Draft202012Validator(taken).is_valid(value) == Draft4Validator(written).is_valid(value)


@pytest.mark.parametrize(
    "raw",
    [
        {"inputSchema": OBJ},
        {"name": "", "inputSchema": OBJ},
        {"name": "   ", "inputSchema": OBJ},
        {"name": 7, "inputSchema": OBJ},
        {"name": "has space", "inputSchema": OBJ},
        {"name": "x" * 129, "inputSchema": OBJ},
        {"name": "no_schema"},
        {"name": "t", "description": 42, "inputSchema": OBJ},
        {"name": "t", "description": ["a list"], "inputSchema": OBJ},
        "not an object",
    ],
)
def test_bad_definition(raw: Any) -> None:
    cat = _small()
    _refused(cat, "bad_definition", cat.add_mcp, [raw], server="s")


def test_anthropic_server_tool_is_refused() -> None:
    cat = _small()
    tools = [
        {"name": "fine", "input_schema": OBJ},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    ]
    _refused(cat, "bad_definition", cat.add_anthropic, tools)


def test_openai_non_function_tool_is_refused() -> None:
    cat = _small()
    _refused(cat, "bad_definition", cat.add_openai, [{"type": "web_search_preview"}])
    _refused(cat, "bad_definition", cat.add_openai, [{"type": "function", "function": "x"}])
    _refused(cat, "bad_definition", cat.add_openai, {"type": "function"})


def test_row_without_server_is_refused() -> None:
    cat = _small()
    _refused(cat, "bad_definition", cat.add_rows, [{"name": "x", "inputSchema": OBJ}])


def test_find_unknown_and_ambiguous() -> None:
    cat = _small()
    with pytest.raises(ToolCatalogError) as info:
        cat.find("nope")
    assert info.value.reason == "unknown_tool"
    with pytest.raises(ToolCatalogError) as info:
        cat.find("search")
    assert info.value.reason == "ambiguous"
    assert "filesystem" in str(info.value) and "github" in str(info.value)
    with pytest.raises(ToolCatalogError) as info:
        cat.find("weather/search")
    assert info.value.reason == "unknown_tool"
    assert cat.find("read_file").server == "filesystem"
    with pytest.raises(ToolCatalogError) as info:
        cat.set_always_loaded(["get_weather", "nope"])
    assert info.value.reason == "unknown_tool"
    assert cat.always_loaded == ()


def test_load_unknown_always_loaded_name(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"tools": [{"name": "a", "inputSchema": OBJ}]}))
    with pytest.raises(ToolCatalogError) as info:
        ToolCatalog.load(path, always_loaded=["b"])
    assert info.value.reason == "unknown_tool"
    assert [t.name for t in ToolCatalog.load(path, always_loaded=["a"]).always_loaded] == ["a"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json at all {",
        '{"tools": [}',
        '{"no_tools": []}',
        '{"result": {"items": []}}',
        "42",
        "[1, 2]",
        '[{"something": "else"}]',
    ],
)
def test_format_error_for_a_file_that_is_not_a_catalog(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(FormatError):
        ToolCatalog.load(path)


def test_format_error_for_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FormatError):
        ToolCatalog.load(tmp_path / "missing.json")


# -- search ---------------------------------------------------------------------------


def test_search_best_first_and_k(livemcp: ToolCatalog) -> None:
    hits = livemcp.search("convert a word document to pdf", 8)
    assert len(hits) == 8
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(h.lexical_rank is not None for h in hits[:3])
    assert all(h.vector_rank is None for h in hits)
    assert len({h.tool.key for h in hits}) == 8
    assert len(livemcp.search("convert a word document to pdf", 3)) == 3
    assert [h.tool for h in livemcp.search("convert a word document to pdf", 3)] == [
        h.tool for h in hits[:3]
    ]
    assert livemcp.search("convert a word document to pdf", 0) == []


def test_search_finds_the_obvious_tool() -> None:
    cat = _small()
    assert cat.search("weather forecast")[0].tool.name == "get_weather"
    assert cat.search("open an issue on github")[0].tool.name == "create_issue"


def test_search_exclude(livemcp: ToolCatalog) -> None:
    hits = livemcp.search("read a file", 5)
    rest = livemcp.search("read a file", 5, exclude=[h.tool for h in hits[:2]])
    assert len(rest) == 5
    assert not {h.tool.key for h in hits[:2]} & {h.tool.key for h in rest}
    assert [h.tool for h in rest[:3]] == [h.tool for h in hits[2:5]]


@pytest.mark.parametrize("query", ["", "   ", "?!", "-- ... --"])
def test_search_with_no_words_finds_nothing(query: str) -> None:
    cat = _small()
    assert cat.search(query) == []
    embedded = ToolCatalog(list(cat), embedder=HashingEmbedder(256))
    assert embedded.search(query) == []


def test_search_with_an_embedder_carries_vector_rank() -> None:
    cat = ToolCatalog(list(_small()), embedder=HashingEmbedder(256))
    hits = cat.search("weather forecast for a city", 7)
    assert hits
    assert all(h.vector_rank is not None for h in hits)
    assert hits[0].tool.name == "get_weather"
    assert hits[0].lexical_rank == 1


def test_search_with_an_embedder_on_the_real_catalog(livemcp: ToolCatalog) -> None:
    cat = ToolCatalog(list(livemcp), embedder=HashingEmbedder())
    hits = cat.search("take a screenshot of a web page", 10)
    assert len(hits) == 10
    assert any(h.vector_rank is not None for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


# -- for_turn -------------------------------------------------------------------------


def _check_tokens(cat: ToolCatalog, turn: ToolTurn) -> None:
    expected = sum(cat.tokens(t) for t in turn.sent)
    if turn.search:
        expected += cat.tokens(None)
    assert turn.tokens == expected
    assert turn.all_tokens == cat.all_tokens() == sum(cat.tokens(t) for t in cat)


def test_for_turn_order_and_tokens() -> None:
    cat = _small()
    cat.set_always_loaded(["get_weather"])
    loaded = ["list_pull_requests", "filesystem/read_file", "list_pull_requests", "get_weather"]
    turn = cat.for_turn("search files and code in a repository", k=3, loaded=loaded)
    assert [t.name for t in turn.always] == ["get_weather"]
    assert [t.label for t in turn.loaded] == ["github/list_pull_requests", "filesystem/read_file"]
    sent_keys = [t.key for t in turn.sent]
    assert len(sent_keys) == len(set(sent_keys))
    assert turn.sent[0].name == "get_weather"
    assert not {h.tool.key for h in turn.found} & {t.key for t in (*turn.always, *turn.loaded)}
    assert len(turn.found) == 3
    assert turn.search
    _check_tokens(cat, turn)
    assert turn.tokens < turn.all_tokens + cat.tokens(None)


def test_for_turn_without_search_tool() -> None:
    cat = _small()
    turn = cat.for_turn("weather", k=2, search=False)
    assert not turn.search
    _check_tokens(cat, turn)
    names = [t["name"] for t in cat.anthropic_tools(turn)]
    assert TOOL_SEARCH not in names
    assert not any(t.get("defer_loading") for t in cat.anthropic_tools(turn))
    assert TOOL_SEARCH not in [t["function"]["name"] for t in cat.openai_tools(turn)]


def test_for_turn_no_query_and_nothing_left() -> None:
    cat = _small()
    turn = cat.for_turn(None)
    assert turn.found == () and turn.loaded == () and turn.search
    assert turn.tokens == cat.tokens(None)
    everything = cat.for_turn(None, loaded=[cat.wire_name(t) for t in cat])
    assert not everything.search  # nothing left to find
    _check_tokens(cat, everything)


def test_for_turn_on_real_catalogs(livemcp: ToolCatalog, github: ToolCatalog) -> None:
    for cat, query in (
        (livemcp, "search the web for news"),
        (github, "list open pull requests and comment on one"),
    ):
        turn = cat.for_turn(query, k=5)
        assert len(turn.found) == 5
        _check_tokens(cat, turn)
        assert turn.tokens < turn.all_tokens


def test_for_turn_loaded_tool_not_in_the_catalog() -> None:
    cat = _small()
    with pytest.raises(ToolCatalogError) as info:
        cat.for_turn("weather", loaded=[_tool("elsewhere", "other")])
    assert info.value.reason == "unknown_tool"
    with pytest.raises(ToolCatalogError) as info:
        cat.run_search({"query": "weather"}, tool_use_id="t", loaded=[_tool("elsewhere")])
    assert info.value.reason == "unknown_tool"


# -- rendering: Anthropic ------------------------------------------------------------


def _turns(cat: ToolCatalog, queries: list[str]) -> list[ToolTurn]:
    tools = list(cat)
    cat.set_always_loaded([cat.wire_name(tools[0])])
    loaded = [tools[len(tools) // 2], tools[-1]]
    out = [cat.for_turn(None), cat.for_turn(None, loaded=loaded)]
    for q in queries:
        out.append(cat.for_turn(q, k=5))
        out.append(cat.for_turn(q, k=5, loaded=loaded))
    return out


def _fresh(cat: ToolCatalog) -> ToolCatalog:
    return ToolCatalog(list(cat))


QUERIES = [
    "list open pull requests in a repo",
    "convert a pdf to text",
    "search the web",
    "weather in paris",
]


def _check_client(cat: ToolCatalog, turn: ToolTurn, tools: list[dict[str, Any]]) -> None:
    names = [t["name"] for t in tools]
    assert len(names) == len(set(names))
    assert all(WIRE.match(n) for n in names)
    marked = [i for i, t in enumerate(tools) if "cache_control" in t]
    assert len(marked) == 1
    assert tools[marked[0]]["name"] == TOOL_SEARCH
    assert tools[marked[0]]["cache_control"] == {"type": "ephemeral"}
    head = len(turn.always) + 1
    assert marked[0] == head - 1
    live = [t for t in tools if not t.get("defer_loading")]
    assert len(live) == head + len(turn.loaded) + len(turn.found)
    assert tools[: len(live)] == live  # deferred ones come last
    assert [t["name"] for t in live[:head]] == [
        *(cat.wire_name(t) for t in turn.always),
        TOOL_SEARCH,
    ]
    assert [t["name"] for t in live[head:]] == [
        cat.wire_name(t) for t in (*turn.loaded, *(h.tool for h in turn.found))
    ]
    deferred = [t for t in tools if t.get("defer_loading")]
    assert all("cache_control" not in t for t in deferred)
    assert all(t["defer_loading"] is True for t in deferred)
    sent = {cat.wire_name(t) for t in turn.sent}
    assert {t["name"] for t in deferred} == {cat.wire_name(t) for t in cat} - sent
    assert len(deferred) == len(cat) - len(turn.sent)


@pytest.mark.parametrize("which", ["livemcp", "github"])
def test_anthropic_client_mode_rules(which: str, request: pytest.FixtureRequest) -> None:
    cat = _fresh(request.getfixturevalue(which))
    for turn in _turns(cat, QUERIES):
        assert turn.search
        _check_client(cat, turn, cat.anthropic_tools(turn))
    turn = cat.for_turn("pdf", k=3)
    tools = cat.anthropic_tools(turn, cache_ttl="1h")
    assert [t["cache_control"] for t in tools if "cache_control" in t] == [
        {"type": "ephemeral", "ttl": "1h"}
    ]


@pytest.mark.parametrize("which", ["livemcp", "github"])
@pytest.mark.parametrize("variant", ["bm25", "regex"])
def test_anthropic_server_mode_rules(
    which: str, variant: str, request: pytest.FixtureRequest
) -> None:
    cat = _fresh(request.getfixturevalue(which))
    for turn in _turns(cat, QUERIES):
        tools = cat.anthropic_tools(turn, mode="server", server_search=variant)  # type: ignore[arg-type]
        search = [t for t in tools if t.get("type", "").startswith("tool_search_tool_")]
        assert len(search) == 1
        body = {k: v for k, v in search[0].items() if k != "cache_control"}
        assert body == dict(SERVER_SEARCH_TOOLS[variant])
        assert body["name"] == f"tool_search_tool_{variant}"
        assert not search[0].get("defer_loading")
        assert any(not t.get("defer_loading") for t in tools)
        assert all("cache_control" not in t for t in tools if t.get("defer_loading"))
        always = {cat.wire_name(t) for t in cat.always_loaded}
        assert always
        for t in tools:
            if t["name"] in always:
                assert not t.get("defer_loading")
        custom = [t for t in tools if "type" not in t]
        assert {t["name"] for t in custom} == {cat.wire_name(t) for t in cat}
        assert len(custom) == len(cat)
        names = [t["name"] for t in tools]
        assert len(names) == len(set(names))


def test_server_search_tool_constant_is_not_mutated() -> None:
    cat = _small()
    cat.anthropic_tools(cat.for_turn(None), mode="server", cache_ttl="1h")
    assert SERVER_SEARCH_TOOLS["bm25"] == {
        "type": "tool_search_tool_bm25_20251119",
        "name": "tool_search_tool_bm25",
    }


def test_bad_mode_and_variant() -> None:
    from ctxwise.errors import UsageError

    cat = _small()
    turn = cat.for_turn(None)
    with pytest.raises(UsageError):
        cat.anthropic_tools(turn, mode="both")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        cat.anthropic_tools(turn, mode="server", server_search="glob")  # type: ignore[arg-type]


def test_a_bad_cache_ttl_is_refused_before_it_reaches_the_api() -> None:
    from ctxwise.errors import UsageError

    cat = _small()
    for mode in ("client", "server"):
        with pytest.raises(UsageError, match="cache_ttl"):
            cat.anthropic_tools(cat.for_turn(None), mode=mode, cache_ttl="2h")  # type: ignore[arg-type]


def test_a_turn_of_another_catalog_is_a_catalog_error() -> None:
    # rendering a turn made before the catalog was rebuilt raised a bare KeyError
    other = ToolCatalog([ToolDef("elsewhere", "A tool only the other catalog has.", OBJ)])
    turn = other.for_turn("elsewhere", k=1)
    cat = _small()
    for render in (
        lambda: cat.anthropic_tools(turn),
        lambda: cat.anthropic_tools(turn, mode="server"),
        lambda: cat.openai_tools(turn),
    ):
        with pytest.raises(ToolCatalogError) as info:
            render()
        assert info.value.reason == "unknown_tool"


def test_a_tool_named_like_a_server_search_tool_is_renamed() -> None:
    # two tools of one name in a request are refused by the API
    cat = ToolCatalog(
        [
            ToolDef("tool_search_tool_bm25", "A catalogued tool.", OBJ),
            ToolDef("other", "Another tool.", OBJ),
        ]
    )
    cat.set_always_loaded(["tool_search_tool_bm25"])
    tools = cat.anthropic_tools(cat.for_turn(None), mode="server")
    names = [t["name"] for t in tools]
    assert len(names) == len(set(names))
    assert (
        cat.find(cat.wire_name(cat.find("tool_search_tool_bm25"))).name == "tool_search_tool_bm25"
    )


def _typed_dict_keys(td: Any) -> set[str]:
    keys: set[str] = set(getattr(td, "__annotations__", {}))
    for base in getattr(td, "__orig_bases__", ()):
        keys |= set(getattr(base, "__annotations__", {}))
    return keys


def test_anthropic_shape_matches_the_sdk_types(livemcp: ToolCatalog) -> None:
    types = pytest.importorskip("anthropic.types")
    tool_keys = _typed_dict_keys(types.ToolParam)
    assert {"name", "description", "input_schema", "cache_control", "defer_loading"} <= tool_keys
    bm25_keys = _typed_dict_keys(types.ToolSearchToolBm25_20251119Param)
    regex_keys = _typed_dict_keys(types.ToolSearchToolRegex20251119Param)
    cat = _fresh(livemcp)
    for turn in _turns(cat, QUERIES):
        for mode in ("client", "server"):
            for tool in cat.anthropic_tools(turn, mode=mode):
                if "type" in tool:
                    allowed = bm25_keys if "bm25" in tool["type"] else regex_keys
                    assert set(tool) <= allowed, tool
                else:
                    assert set(tool) <= tool_keys, set(tool) - tool_keys
                    assert isinstance(tool["input_schema"], dict)
                    assert tool["input_schema"]["type"] == "object"
    tools = cat.anthropic_tools(turn, mode="server", server_search="regex")
    assert any(t.get("type") == "tool_search_tool_regex_20251119" for t in tools)


def test_openai_shape_matches_the_sdk_types(github: ToolCatalog) -> None:
    pytest.importorskip("openai")
    from openai.types.chat import ChatCompletionFunctionToolParam
    from openai.types.shared_params import FunctionDefinition

    tool_keys = _typed_dict_keys(ChatCompletionFunctionToolParam)
    fn_keys = _typed_dict_keys(FunctionDefinition)
    cat = _fresh(github)
    for turn in _turns(cat, QUERIES):
        out = cat.openai_tools(turn)
        assert len(out) == len(turn.sent) + turn.search
        names = [t["function"]["name"] for t in out]
        assert len(names) == len(set(names))
        assert all(WIRE.match(n) for n in names)
        for tool in out:
            assert set(tool) <= tool_keys
            assert tool["type"] == "function"
            assert set(tool["function"]) <= fn_keys
            assert tool["function"]["parameters"]["type"] == "object"
        assert names[: len(turn.always) + 1] == [
            *(cat.wire_name(t) for t in turn.always),
            TOOL_SEARCH,
        ]


# -- run_search -----------------------------------------------------------------------


def test_run_search_anthropic(livemcp: ToolCatalog) -> None:
    cat = _fresh(livemcp)
    out = cat.run_search({"query": "merge pdf files", "k": 4}, tool_use_id="tu_1")
    assert isinstance(out.block, ToolResultBlock)
    assert out.block.tool_use_id == "tu_1"
    assert out.block.is_error is False
    assert out.query == "merge pdf files"
    assert len(out.found) == 4
    content = out.block.content
    assert isinstance(content, tuple)
    assert isinstance(content[0], TextBlock)
    refs = content[1:]
    assert len(refs) == 4
    for ref, tool in zip(refs, out.found, strict=True):
        assert isinstance(ref, OpaqueBlock)
        assert ref.type == "tool_reference"
        assert ref.data == {"type": "tool_reference", "tool_name": cat.wire_name(tool)}
        assert cat.find(ref.data["tool_name"]) is tool
        assert cat.wire_name(tool) in content[0].text


def test_run_search_leaves_out_what_the_turn_has() -> None:
    cat = _small()
    cat.set_always_loaded(["get_weather"])
    out = cat.run_search(
        {"query": "weather file read", "k": 20}, tool_use_id="t", loaded=["filesystem/read_file"]
    )
    assert {t.name for t in out.found}.isdisjoint({"get_weather", "read_file"})
    assert out.found


def test_run_search_openai(github: ToolCatalog) -> None:
    out = github.run_search(
        {"query": "create a pull request"}, tool_use_id="call_1", provider="openai"
    )
    assert out.block.is_error is False
    assert isinstance(out.block.content, str)
    assert len(out.found) == 5  # the default k
    for tool in out.found:
        assert github.wire_name(tool) in out.block.content
        assert github.find(github.wire_name(tool)) is tool


def test_run_search_nothing_found() -> None:
    out = _small().run_search({"query": "zebra xylophone"}, tool_use_id="t")
    assert out.found == ()
    assert out.block.is_error is False
    assert "other words" in str(out.block.content)


@pytest.mark.parametrize(
    ("tool_input", "hint"),
    [
        ("merge pdf", "object"),
        (["merge pdf"], "object"),
        (None, "object"),
        ({}, "query"),
        ({"k": 3}, "query"),
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": 5}, "query"),
        ({"query": "pdf", "limit": 3}, "limit"),
        ({"query": "pdf", "k": 0}, f"1 to {MAX_SEARCH_K}"),
        ({"query": "pdf", "k": MAX_SEARCH_K + 1}, f"1 to {MAX_SEARCH_K}"),
        ({"query": "pdf", "k": True}, f"1 to {MAX_SEARCH_K}"),
        ({"query": "pdf", "k": "3"}, f"1 to {MAX_SEARCH_K}"),
        ({"query": "pdf", "k": 2.5}, f"1 to {MAX_SEARCH_K}"),
    ],
)
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_run_search_bad_input(tool_input: Any, hint: str, provider: str) -> None:
    cat = _small()
    out = cat.run_search(tool_input, tool_use_id="bad", provider=provider)  # type: ignore[arg-type]
    assert out.block.is_error is True
    assert out.found == ()
    assert isinstance(out.block.content, str)
    assert out.block.content.startswith(f"{TOOL_SEARCH}: ")
    assert hint in out.block.content


def test_run_search_reads_a_null_k_as_the_default() -> None:
    cat = _small()
    out = cat.run_search({"query": "file", "k": None}, tool_use_id="n")
    assert out.block.is_error is False
    assert out.found == cat.run_search({"query": "file"}, tool_use_id="d").found


def test_run_search_accepts_the_extremes_of_k(livemcp: ToolCatalog) -> None:
    assert len(livemcp.run_search({"query": "pdf", "k": 1}, tool_use_id="a").found) == 1
    big = livemcp.run_search({"query": "file", "k": MAX_SEARCH_K}, tool_use_id="b")
    assert len(big.found) == MAX_SEARCH_K


# -- property: wire names --------------------------------------------------------------

SERVERS = st.sampled_from([None, "fs", "github", "my server", "a.b", "a_b", "x" * 70])
NAMES = st.sampled_from(
    ["search", "read", "read_file", "tool_search", "a.b", "fs__search", "Ünïcode", "y" * 70, "-"]
) | st.text(alphabet="abcXY_-./ ", min_size=1, max_size=12)


@st.composite
def catalogs(draw: st.DrawFn) -> list[ToolDef]:
    pairs = draw(st.lists(st.tuples(SERVERS, NAMES), max_size=25))
    seen: set[tuple[str, str]] = set()
    out = []
    for server, name in pairs:
        key = (server or "", name)
        if key not in seen:
            seen.add(key)
            out.append(ToolDef(name, "", OBJ, server))
    return out


@given(catalogs())
def test_wire_names_are_unique_valid_and_found(tools: list[ToolDef]) -> None:
    cat = ToolCatalog(tools)
    names = [cat.wire_name(t) for t in cat]
    assert len(set(names)) == len(names)
    assert TOOL_SEARCH not in names
    for t, n in zip(cat, names, strict=True):
        assert WIRE.match(n), n
        assert cat.find(n) is t
    counts: dict[str, int] = {}
    for t in tools:
        counts[t.name] = counts.get(t.name, 0) + 1
    for i, (t, n) in enumerate(zip(cat, names, strict=True)):
        if counts[t.name] == 1 and WIRE.match(t.name) and t.name != TOOL_SEARCH:
            # a unique wire-safe name stays plain unless an earlier tool's wire took it
            assert n == t.name or t.name in names[:i]


def test_a_tool_the_query_names_word_for_word_comes_first() -> None:
    catalog = ToolCatalog.load(GITHUB)
    assert catalog.search("get_me", 3)[0].tool.name == "get_me"
    hits = catalog.search("list_pull_requests, then merge_pull_request", 2)
    assert [h.tool.name for h in hits] == ["list_pull_requests", "merge_pull_request"]
    assert catalog.search("who am I? call github-mcp-server/get_me", 1)[0].tool.name == "get_me"


# -- QA: deep files, unknown drafts, dangling $ref ------------------------------------


def _nested_schema(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_a_file_nested_too_deeply_for_json_is_a_format_error(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"deep{suffix}"
    path.write_text('{"tools": [' + '{"a": ' * 3000 + "1" + "}" * 3000 + "]}")
    with pytest.raises(FormatError, match="nested too deeply") as info:
        ToolCatalog.load(path)
    assert str(path) in str(info.value)


def test_a_deep_but_parseable_schema_is_refused_not_a_recursion_error() -> None:
    cat = _small()
    tool = {"name": "deep", "inputSchema": _nested_schema(400)}
    _refused(cat, "invalid_schema", cat.add_mcp, [tool], server="s")
    cat.add_mcp([{"name": "fine", "inputSchema": _nested_schema(20)}], server="s")


def test_schema_with_an_unknown_draft_is_refused() -> None:
    cat = _small()
    schema = {"type": "object", "$schema": "http://example.com/unknown"}
    _refused(cat, "invalid_schema", cat.add_mcp, [{"name": "t", "inputSchema": schema}], server="s")
    draft7 = {"type": "object", "$schema": "http://json-schema.org/draft-07/schema"}
    cat.add_mcp([{"name": "ok", "inputSchema": draft7}], server="s")


@pytest.mark.parametrize(
    "ref",
    ["#/$defs/missing", "#nosuchanchor", "http://example.com/remote.json", "other.json"],
)
def test_schema_with_a_dangling_ref_is_refused(ref: str) -> None:
    cat = _small()
    schema = {
        "type": "object",
        "$defs": {"a": {"type": "string"}},
        "properties": {"x": {"$ref": ref}},
    }
    with pytest.raises(ToolCatalogError) as info:
        cat.add_mcp([{"name": "t", "inputSchema": schema}], server="s")
    assert info.value.reason == "invalid_schema"
    assert ref in str(info.value)


@pytest.mark.parametrize(
    "schema",
    [
        {
            "type": "object",
            "$defs": {"a": {"type": "string"}},
            "properties": {"x": {"$ref": "#/$defs/a"}},
        },
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "definitions": {"a": {"type": "string"}},
            "properties": {"x": {"$ref": "#/definitions/a"}},
        },
        {"type": "object", "properties": {"x": {"$ref": "#"}}},
        {
            "type": "object",
            "$defs": {"a": {"$anchor": "foo"}},
            "properties": {"x": {"$ref": "#foo"}},
        },
        # a "$ref" inside enum data is not a reference
        {"type": "object", "properties": {"x": {"enum": [{"$ref": "#/nowhere"}]}}},
        {
            "$id": "https://example.com/root",
            "type": "object",
            "$defs": {"a": {"$id": "sub", "$defs": {"b": {}}, "items": {"$ref": "#/$defs/b"}}},
            "properties": {"x": {"$ref": "sub"}},
        },
    ],
)
def test_schema_refs_that_resolve_are_accepted(schema: dict[str, Any]) -> None:
    cat = _small()
    cat.add_mcp([{"name": "t", "inputSchema": schema}], server="s")
    assert len(cat) == len(_small()) + 1
