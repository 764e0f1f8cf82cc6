"""``ctxwise tools search``, ``tools budget`` and ``eval tools`` on real catalogs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxwise.cli import app
from tests._cli import assert_usage_error, ok_json, run, runner
from tests.conftest import DATA

TOOLS = DATA / "tools"
LIVEMCP = TOOLS / "livemcpbench" / "livemcp_tool_catalog.jsonl"
LIVEMCP_QUERIES = TOOLS / "livemcpbench" / "livemcp_queries_gold_tools.jsonl"
GITHUB = TOOLS / "mcp_listings" / "github-mcp-server.tools_list.json"

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name"}},
    "required": ["city"],
}
STOCKS = {"type": "object", "properties": {"ticker": {"type": "string"}}}


@pytest.fixture(scope="module")
def tools_data() -> Path:
    if not LIVEMCP.is_file() or not GITHUB.is_file():
        pytest.skip(f"tool catalogs not found under {TOOLS} (set CTXWISE_DATA)")
    return TOOLS


def n_queries() -> int:
    text = LIVEMCP_QUERIES.read_text(encoding="utf-8")
    return sum(1 for line in text.splitlines() if line.strip())


def write_queries(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# -- tools search ----------------------------------------------------------------


@pytest.mark.data
def test_search_livemcp_json(tools_data: Path) -> None:
    result = run(
        "tools", "search", LIVEMCP, "-q", "convert a word document to pdf", "-k", "5",
        "--skip-invalid", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["query"] == "convert a word document to pdf" and out["k"] == 5
    assert len(out["hits"]) == 5
    for hit in out["hits"]:
        assert set(hit) == {"name", "server", "wire_name", "score", "lexical_rank", "vector_rank"}
        assert hit["vector_rank"] is None  # no embedder: lexical only
    scores = [h["score"] for h in out["hits"]]
    assert scores == sorted(scores, reverse=True)
    assert any("pdf" in h["name"].lower() for h in out["hits"])
    assert result.stderr == ""  # every definition validates: nothing skipped


@pytest.mark.data
def test_the_shipped_livemcp_catalog_loads_without_skip_invalid(tools_data: Path) -> None:
    # read_pdf's schema has draft 4's boolean exclusiveMinimum: it was refused
    rows = [x for x in LIVEMCP.read_text(encoding="utf-8").splitlines() if x.strip()]
    found = ok_json("tools", "search", LIVEMCP, "-q", "read the pages of a pdf", "-k", "3")
    assert "read_pdf" in [h["name"] for h in found["hits"]]
    assert ok_json("tools", "budget", LIVEMCP)["tools"] == len(rows)
    evaluated = ok_json("eval", "tools", "--catalog", LIVEMCP, "--queries", LIVEMCP_QUERIES)
    assert evaluated["n"] == n_queries()


@pytest.mark.data
def test_search_livemcp_table(tools_data: Path) -> None:
    result = run("tools", "search", LIVEMCP, "-q", "weather forecast", "-k", "3", "--skip-invalid")
    assert result.exit_code == 0, result.stderr
    assert "rank" in result.stdout and "score" in result.stdout
    assert "weather" in result.stdout.lower()


@pytest.mark.data
def test_search_with_embedder(tools_data: Path) -> None:
    out = ok_json(
        "tools", "search", GITHUB, "-q", "open a new issue", "-k", "4", "--embedder", "hashing"
    )
    assert len(out["hits"]) == 4
    assert any(h["vector_rank"] is not None for h in out["hits"])


@pytest.mark.data
def test_search_github_listing(tools_data: Path) -> None:
    out = ok_json("tools", "search", GITHUB, "--query", "create a pull request", "-k", "5")
    names = [h["name"] for h in out["hits"]]
    assert "create_pull_request" in names
    # the listing's tools share one server, named after the file
    assert {h["server"] for h in out["hits"]} == {"github-mcp-server"}


# -- tools budget ----------------------------------------------------------------


def check_reduction(out: dict[str, Any]) -> None:
    assert set(out) == {
        "tools", "k", "queries", "all_tokens", "deferred_tokens", "reduction", "counts",
        "max_tokens", "max_reduction",
    }  # fmt: skip
    assert 0 < out["deferred_tokens"] < out["all_tokens"]
    assert out["reduction"] == pytest.approx(
        1 - out["deferred_tokens"] / out["all_tokens"], abs=1e-4
    )
    # the most a turn sends with k found: never less than what a query sends
    assert out["deferred_tokens"] <= out["max_tokens"] <= out["all_tokens"]
    assert out["max_reduction"] == pytest.approx(
        1 - out["max_tokens"] / out["all_tokens"], abs=1e-4
    )


@pytest.mark.data
def test_budget_livemcp_no_queries(tools_data: Path) -> None:
    out = ok_json("tools", "budget", LIVEMCP, "--skip-invalid")
    check_reduction(out)
    assert out["queries"] == 0 and out["k"] == 5 and out["tools"] == 527
    # without --queries no tool is found: it says so, and gives the most k found send
    assert out["counts"] == "always loaded + tool_search, before any tool is found"
    bigger = ok_json("tools", "budget", LIVEMCP, "--k", "10")
    assert bigger["deferred_tokens"] == out["deferred_tokens"]
    assert bigger["max_tokens"] > out["max_tokens"]


@pytest.mark.data
def test_budget_livemcp_queries(tools_data: Path) -> None:
    out = ok_json(
        "tools", "budget", LIVEMCP, "--queries", LIVEMCP_QUERIES, "--k", "5", "--skip-invalid"
    )
    check_reduction(out)
    assert out["queries"] == n_queries()
    assert (
        out["counts"] == f"always loaded + tool_search + 5 found, mean over {n_queries()} queries"
    )
    assert out["reduction"] >= 0.85
    bare = ok_json("tools", "budget", LIVEMCP, "--skip-invalid")
    assert out["deferred_tokens"] > bare["deferred_tokens"]  # the k found cost tokens


@pytest.mark.data
def test_budget_always_loaded_costs_tokens(tools_data: Path) -> None:
    bare = ok_json("tools", "budget", GITHUB)
    pinned = ok_json(
        "tools", "budget", GITHUB, "--always", "get_me", "--always", "create_pull_request"
    )
    check_reduction(pinned)
    assert pinned["deferred_tokens"] > bare["deferred_tokens"]


@pytest.mark.data
def test_budget_github_with_queries(tools_data: Path, tmp_path: Path) -> None:
    queries = write_queries(
        tmp_path / "q.jsonl",
        [
            {"query": "open a pull request", "gold_tools": [{"tool": "create_pull_request"}]},
            {"query": "list the issues of a repository", "gold_tools": [{"tool": "list_issues"}]},
            {"query": "search code", "gold_tools": [{"tool": "search_code"}]},
        ],
    )
    out = ok_json("tools", "budget", GITHUB, "--queries", queries, "--k", "3")
    check_reduction(out)
    assert out["queries"] == 3 and out["k"] == 3 and out["tools"] > 3


def wide(*args: str | Path) -> str:
    """``ctxwise ARGS…`` on a terminal wide enough that no cell wraps: its stdout."""
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.stderr
    return " ".join(result.stdout.split())


@pytest.mark.data
def test_budget_text_says_what_it_counts(tools_data: Path, tmp_path: Path) -> None:
    text = wide("tools", "budget", GITHUB, "--k", "5")
    assert "every definition, as is" in text
    assert "always loaded + tool_search, before any tool is found" in text
    assert "the 5 largest definitions" in text
    assert "no --queries" in text
    queries = write_queries(
        tmp_path / "q.jsonl",
        [{"query": "open a pull request", "gold_tools": [{"tool": "create_pull_request"}]}],
    )
    text = wide("tools", "budget", GITHUB, "--k", "5", "--queries", queries)
    assert "always loaded + tool_search + 5 found, mean over 1 queries" in text
    assert "no --queries" not in text


# -- eval tools ------------------------------------------------------------------


@pytest.mark.data
def test_eval_tools_livemcp(tools_data: Path) -> None:
    out = ok_json(
        "eval", "tools", "--catalog", LIVEMCP, "--queries", LIVEMCP_QUERIES,
        "--k", "5,10", "--skip-invalid",
    )  # fmt: skip
    assert set(out) == {
        "n",
        "tools",
        "skipped_tools",
        "search",
        "embedder",
        "embedding_cache",
        "recall_at",
        "any_at",
        "baseline_bm25",
        "p50_ms",
    }
    assert out["n"] == n_queries() and out["tools"] > 0 and out["skipped_tools"] >= 0
    assert (out["search"], out["embedder"], out["embedding_cache"]) == ("lexical", None, None)
    base = out["baseline_bm25"]
    assert set(base) == {"recall_at", "any_at", "p50_ms"}
    for figures in (out, base):
        for key in ("recall_at", "any_at"):
            assert list(figures[key]) == ["5", "10"]
            assert all(0.0 <= v <= 1.0 for v in figures[key].values())
            assert figures[key]["5"] <= figures[key]["10"]
        assert figures["p50_ms"] >= 0


@pytest.mark.data
def test_eval_tools_table(tools_data: Path) -> None:
    result = run(
        "eval", "tools", "--catalog", LIVEMCP, "--queries", LIVEMCP_QUERIES, "--skip-invalid"
    )
    assert result.exit_code == 0, result.stderr
    assert "recall@5" in result.stdout and "plain BM25" in result.stdout


# -- provider tools arrays ---------------------------------------------------------


def test_anthropic_tools_array(tmp_path: Path) -> None:
    path = tmp_path / "anthropic.json"
    path.write_text(
        json.dumps(
            [
                {"name": "get_weather", "description": "Current weather.", "input_schema": WEATHER},
                {"name": "get_stock_price", "description": "A quote.", "input_schema": STOCKS},
            ]
        ),
        encoding="utf-8",
    )
    out = ok_json("tools", "search", path, "-q", "weather in a city", "-k", "1")
    assert [h["name"] for h in out["hits"]] == ["get_weather"]
    assert out["hits"][0]["server"] is None
    budget = ok_json("tools", "budget", path)
    assert budget["tools"] == 2 and budget["all_tokens"] > 0


def test_openai_tools_array(tmp_path: Path) -> None:
    path = tmp_path / "openai.json"
    path.write_text(
        json.dumps(
            [
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "Weather.",
                        "parameters": WEATHER,
                    },
                },
                {
                    "type": "function",
                    "function": {"name": "get_stock_price", "description": "Stock quote."},
                },
            ]
        ),
        encoding="utf-8",
    )  # fmt: skip
    out = ok_json("tools", "search", path, "-q", "stock quote", "-k", "5")
    assert out["hits"][0]["name"] == "get_stock_price"
    queries = write_queries(
        tmp_path / "q.jsonl",
        [{"query": "weather for Paris", "gold_tools": [{"tool": "get_weather", "servers": []}]}],
    )
    evaluated = ok_json("eval", "tools", "--catalog", path, "--queries", queries, "--k", "1")
    assert evaluated["n"] == 1
    # a gold tool with no servers listed can never be found, and still counts
    assert evaluated["recall_at"] == {"1": 0.0}


# -- bad input -------------------------------------------------------------------


def test_missing_catalog(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    assert_usage_error(run("tools", "search", missing, "-q", "x"), "nope.json")
    assert_usage_error(run("tools", "budget", missing), "nope.json")
    queries = write_queries(tmp_path / "q.jsonl", [{"query": "x", "gold_tools": [{"tool": "a"}]}])
    assert_usage_error(run("eval", "tools", "--catalog", missing, "--queries", queries))


def test_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"tools": [', encoding="utf-8")
    assert_usage_error(run("tools", "search", path, "-q", "x"), "bad.json")


def test_invalid_schema_without_skip(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    bad = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "zero"}}}
    path.write_text(
        json.dumps(
            [
                {"name": "good", "description": "fine", "input_schema": WEATHER},
                {"name": "broken", "description": "bad schema", "input_schema": bad},
            ]
        ),
        encoding="utf-8",
    )
    # the error names the option that would leave the definition out
    assert_usage_error(run("tools", "budget", path), "broken", "--skip-invalid")
    queries = write_queries(tmp_path / "q.jsonl", [{"query": "x", "gold_tools": [{"tool": "a"}]}])
    result = run("eval", "tools", "--catalog", path, "--queries", queries)
    assert_usage_error(result, "broken", "--skip-invalid")
    assert_usage_error(run("tools", "search", path, "-q", "x"), "broken", "--skip-invalid")
    result = run("tools", "budget", path, "--skip-invalid", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["tools"] == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("skipped: ") and "broken" in lines[0]


def test_a_query_file_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    # json.loads raised RecursionError, which the CLI printed as a traceback
    path = tmp_path / "tools.json"
    path.write_text(
        json.dumps([{"name": "a", "description": "a", "input_schema": WEATHER}]), encoding="utf-8"
    )
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    for args in (
        ("tools", "budget", path, "--queries", deep),
        ("eval", "tools", "--catalog", path, "--queries", deep),
    ):
        assert_usage_error(run(*args), "deep.jsonl:1", "nested too deeply")


def test_duplicate_names(tmp_path: Path) -> None:
    path = tmp_path / "dup.json"
    tool = {"name": "same", "description": "twice", "input_schema": WEATHER}
    path.write_text(json.dumps([tool, tool]), encoding="utf-8")
    result = run("tools", "search", path, "-q", "x")
    assert_usage_error(result, "same")
    assert "--skip-invalid" not in result.stderr  # it would not help
    # --skip-invalid does not hide a duplicate
    assert_usage_error(run("tools", "search", path, "-q", "x", "--skip-invalid"), "same")


def test_bad_k(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_text(
        json.dumps([{"name": "a", "description": "a", "input_schema": WEATHER}]), encoding="utf-8"
    )
    queries = write_queries(tmp_path / "q.jsonl", [{"query": "a", "gold_tools": [{"tool": "a"}]}])
    assert_usage_error(run("tools", "search", path, "-q", "x", "-k", "0"), "--k")
    assert_usage_error(run("tools", "budget", path, "--k", "-1"), "--k")
    for bad in ("5,x", "0,5", ""):
        result = run("eval", "tools", "--catalog", path, "--queries", queries, "--k", bad)
        assert_usage_error(result, "--k")


def test_bad_queries_and_names(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_text(
        json.dumps([{"name": "a", "description": "a", "input_schema": WEATHER}]), encoding="utf-8"
    )
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"query": "no gold tools"}\n', encoding="utf-8")
    assert_usage_error(run("eval", "tools", "--catalog", path, "--queries", queries), "q.jsonl:1")
    assert_usage_error(run("tools", "budget", path, "--queries", queries), "q.jsonl:1")
    assert_usage_error(run("tools", "budget", path, "--always", "nope"), "nope")
    assert_usage_error(run("tools", "search", path, "-q", "a", "--embedder", "nope"), "nope")


def test_catalog_nested_too_deeply(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"tools": [' + '{"a": ' * 3000 + "1" + "}" * 3000 + "]}", encoding="utf-8")
    assert_usage_error(run("tools", "search", path, "-q", "x"), "deep.json", "nested too deeply")


@pytest.mark.parametrize(
    ("schema", "word"),
    [
        ({"type": "object", "$ref": "#/$defs/missing"}, "#/$defs/missing"),
        ({"type": "object", "$schema": "http://example.com/unknown"}, "unknown $schema"),
    ],
)
def test_catalog_schema_dangling_ref_or_unknown_draft(
    tmp_path: Path, schema: dict[str, Any], word: str
) -> None:
    path = tmp_path / "cat.json"
    path.write_text(json.dumps({"tools": [{"name": "a", "inputSchema": schema}]}), encoding="utf-8")
    assert_usage_error(run("tools", "search", path, "-q", "x"), word)
