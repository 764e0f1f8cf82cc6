"""Engine configs the project was not built on: each bad one is a ConfigError
naming the key, from a file and from code alike, before anything is opened."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxwise import Engine, EngineConfig, Message
from ctxwise.config import SourceConfig, config_from_dict, load_config
from ctxwise.errors import ConfigError, UsageError
from ctxwise.sources import StaticSource

from ._cli import assert_usage_error, run
from .conftest import DATA

LIVEMCP_CATALOG = DATA / "tools" / "livemcpbench" / "livemcp_tool_catalog.jsonl"
INVALID_CATALOG = Path(__file__).parent / "data" / "invalid_tool_catalog.jsonl"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_priority_that_is_not_finite_is_refused_by_key(tmp_path: Path, value: str) -> None:
    path = tmp_path / "ctxwise.toml"
    path.write_text(f'store = "memory"\n[sources.faq]\ntext = "x"\npriority = {value}\n')
    with pytest.raises(ConfigError, match=r"sources\.faq\.priority: .*finite"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"SourceConfig: priority: .*finite"):
        SourceConfig(text="x", priority=float(value))
    with pytest.raises(ConfigError, match=r"sources\.faq\.priority"):
        EngineConfig(sources={"faq": {"text": "x", "priority": float(value)}})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"routes": {"billing": ["faq", "memory", "faq"]}},
            r"route 'billing' names source\(s\) more than once: faq",
        ),
        ({"fallback": ["memory", "faq", "memory"]}, r"fallback names source\(s\) more than once"),
    ],
)
def test_a_source_named_twice_in_a_route_or_the_fallback_is_refused(
    data: dict[str, Any], message: str
) -> None:
    full = {"store": "memory", "sources": {"faq": {"text": "Refunds take 5 days."}}, **data}
    with pytest.raises(ConfigError, match=f"^config: {message}"):
        config_from_dict(full)
    with pytest.raises(ConfigError, match=f"^EngineConfig: {message}"):
        EngineConfig(**full)


def test_each_source_once_still_runs_every_turn() -> None:
    cfg = config_from_dict(
        {
            "store": "memory",
            "router": {"keywords": {"billing": ["refund"]}},
            "routes": {"billing": ["faq", "memory"]},
            "fallback": ["faq"],
            "sources": {"faq": {"text": "Refunds take 5 days."}},
        }
    )
    with Engine(cfg) as engine:
        result = engine.turn("s", [Message.text_message("user", "a refund please")])
    assert [s.name for s in result.trace.sections] == ["faq"]


@pytest.mark.parametrize("name", ["system", "rules", "case facts", "recalled"])
def test_a_source_named_as_a_section_the_engine_adds_is_refused(name: str) -> None:
    # the config was accepted and every turn failed once the session had a
    # system prompt, a stated rule, a case fact or recalled memory
    data = {"store": "memory", "system": "You help.", "sources": {name: {"text": "x"}}}
    with pytest.raises(ConfigError, match=f"source name '{name}' is the name of a section"):
        config_from_dict(data)
    with pytest.raises(ConfigError, match=f"^EngineConfig: source name '{name}'"):
        EngineConfig(**data)
    with pytest.raises(UsageError, match=f"source name '{name}' is the name of a section"):
        Engine(EngineConfig(store="memory"), sources=[StaticSource(name, "x")])


def test_an_empty_source_name_is_refused_by_key(tmp_path: Path) -> None:
    path = tmp_path / "ctxwise.toml"
    path.write_text('store = "memory"\n[sources.""]\ntext = "x"\n')
    with pytest.raises(ConfigError, match=r"sources: a source needs a name"):
        load_config(path)


@pytest.mark.parametrize("sources", [[object()], "faq", [StaticSource("faq", "x"), 3]])
def test_sources_given_in_code_that_are_not_sources_are_a_usage_error(sources: Any) -> None:
    with pytest.raises(UsageError, match="sources"):
        Engine(EngineConfig(store="memory"), sources=sources)


@pytest.mark.parametrize(
    ("extra", "error", "message"),
    [
        ({"tools": {"catalog": "tools.jsonl"}}, UsageError, "tools.catalog: no such file"),
        (
            {"tools": {"catalog": str(INVALID_CATALOG), "embedder": "hashing"}},
            UsageError,
            "broken_tool",  # its schema does not validate
        ),
        (
            {"tool_results": {"store_over": 100, "key_env": "CTXWISE_QA_S25_NO_SUCH_KEY"}},
            ConfigError,
            r"tool_results\.key_env: store_over > 0 needs a cursor key",
        ),
    ],
)
def test_a_refused_config_creates_no_sqlite_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    extra: dict[str, Any],
    error: type,
    message: str,
) -> None:
    if not LIVEMCP_CATALOG.is_file():
        pytest.skip(f"shared data not found at {DATA} (set CTXWISE_DATA)")
    monkeypatch.delenv("CTXWISE_QA_S25_NO_SUCH_KEY", raising=False)
    path = tmp_path / "ctxwise.toml"
    path.write_text('store = "sqlite:///ctxwise.db"\n', encoding="utf-8")
    cfg = config_from_dict({**load_config(path).model_dump(), **extra}, base_dir=str(tmp_path))
    with pytest.raises(error, match=message):
        Engine(cfg)
    # the SQLite file (and its -wal, -shm) was created and left open before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ctxwise.toml"]
    with Engine(config_from_dict({"store": "sqlite:///ctxwise.db"}, base_dir=str(tmp_path))):
        pass
    assert (tmp_path / "ctxwise.db").is_file()


def _files(tmp_path: Path) -> None:
    (tmp_path / "binary.md").write_bytes(b"PK\x03\x04\x00\x00zip")
    (tmp_path / "latin1.md").write_bytes("Rückgabe binnen 30 Tagen".encode("latin-1"))
    (tmp_path / "folder.md").mkdir()
    (tmp_path / "dangling.md").symlink_to(tmp_path / "gone.md")
    (tmp_path / "notarouter.json").write_text('{"hello": 1}', encoding="utf-8")


@pytest.mark.parametrize(
    ("toml", "where"),
    [
        ('[sources.faq]\nfile = "missing.md"', r"missing\.md: sources\.faq\.file: no such file"),
        ('[sources.faq]\nfile = "dangling.md"', r"sources\.faq\.file: no such file"),
        ('[sources.faq]\nfile = "folder.md"', r"sources\.faq\.file: is a directory"),
        ('[sources.faq]\nfile = "binary.md"', r"sources\.faq\.file: binary file"),
        ('[sources.faq]\nfile = "latin1.md"', r"sources\.faq\.file: not UTF-8 text"),
        ('[router]\nfile = "router.json"', r"router\.json: router\.file: no such file"),
        ('[router]\nfile = "notarouter.json"', r"notarouter\.json: router\.file: "),
        ("[router]\nkeywords = {billing = []}", r"router\.keywords: label 'billing' has no"),
    ],
)
def test_a_file_or_router_the_config_names_is_refused_naming_the_key(
    tmp_path: Path, toml: str, where: str
) -> None:
    _files(tmp_path)
    path = tmp_path / "ctxwise.toml"
    path.write_text(f'store = "memory"\n{toml}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=where):
        Engine.from_file(str(path))


def test_the_replay_command_names_the_key_in_one_line(tmp_path: Path, data_dir: Path) -> None:
    path = tmp_path / "ctxwise.toml"
    path.write_text('[sources.faq]\nfile = "faq.md"\n', encoding="utf-8")
    transcript = data_dir / "transcripts" / "claude_code" / "short.jsonl"
    result = run("replay", transcript, "--budget", "20000", "--config", path)
    assert_usage_error(result, str(tmp_path / "faq.md"), "sources.faq.file: no such file")


@pytest.mark.parametrize(
    ("make", "detail"),
    [
        (lambda p: None, "system_file: no such file"),
        (lambda p: p.mkdir(), "system_file: is a directory"),
        (lambda p: p.write_bytes(b"caf\xe9 \xfd"), "system_file: not UTF-8 text"),
    ],
)
def test_a_system_file_that_cannot_be_read_fails_when_the_engine_is_built(
    tmp_path: Path, make: Any, detail: str
) -> None:
    make(tmp_path / "system.txt")
    path = tmp_path / "ctxwise.toml"
    path.write_text('system_file = "system.txt"\n', encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    # it was accepted, and the first turn failed after the store was created
    with pytest.raises(ConfigError, match=detail):
        Engine.from_file(str(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize(
    ("body", "path", "message"),
    [
        (None, "ctx\x00wise.toml", r"^'.*ctx\\x00wise\.toml': invalid path"),
        ("a = " + "[" * 20_000 + "]" * 20_000, "deep.toml", r"bad TOML: nested too deeply"),
        ("a = " + "{b = " * 5_000 + "1" + "}" * 5_000, "deep.toml", r"nested too deeply"),
    ],
)
def test_a_config_path_or_file_python_cannot_read_is_a_config_error(
    tmp_path: Path, body: str | None, path: str, message: str
) -> None:
    # ValueError (embedded null byte) and RecursionError escaped load_config
    target = tmp_path / path
    if body is not None:
        target.write_text(body, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_config(target)
    with pytest.raises(ConfigError, match=message):
        Engine.from_file(str(target))


def test_a_config_path_that_is_not_a_path_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="a config path is a str or a Path"):
        load_config(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("store", ["sqlite:///\ud800.db", "sqlite:///caf\udce9.db"])
def test_a_store_url_with_a_lone_surrogate_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    # Engine(...) raised UnicodeEncodeError from sqlite3.connect
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="store: holds a lone surrogate"):
        EngineConfig(store=store)
    assert list(tmp_path.iterdir()) == []


def test_an_integer_too_long_to_convert_is_a_config_error(tmp_path: Path) -> None:
    # tomllib raises a bare ValueError (past int()'s 4300 digits), not TOMLDecodeError
    path = tmp_path / "ctxwise.toml"
    path.write_text("budget = " + "9" * 5_000 + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"ctxwise\.toml: bad TOML: .*digits"):
        load_config(path)


def test_the_documented_router_default_of_empty_is_no_default(tmp_path: Path) -> None:
    # docs/engine.md gives `default = ""`; a keyword router then "matched" every
    # other query to label '' (reason match), and a file router refused the key
    path = tmp_path / "ctxwise.toml"
    path.write_text(
        'store = "memory"\n[router]\nkeywords = {billing = ["refund"]}\ndefault = ""\n'
        '[routes]\nbilling = ["memory"]\n',
        encoding="utf-8",
    )
    with Engine.from_file(str(path)) as engine:
        route = engine.turn("s", [Message.text_message("user", "hello there")]).trace.route
    assert (route.label, route.reason) == (None, "low_confidence")
    assert route.fallback == "router refused (low_confidence)"
    assert EngineConfig(router={"file": "router.json", "default": ""}).router is not None


def _documented_block() -> str:
    import re

    docs = Path(__file__).resolve().parents[1] / "docs" / "engine.md"
    blocks = re.findall(r"```toml\n(.*?)```", docs.read_text(encoding="utf-8"), re.S)
    return str(max(blocks, key=len))


def test_the_documented_config_block_loads(tmp_path: Path) -> None:
    # `file = "router.json"` beside `keywords = {}` was refused as giving both; the
    # block is now examples/ctxwise.toml, with a keyword router (the file a comment)
    path = tmp_path / "ctxwise.toml"
    path.write_text(_documented_block(), encoding="utf-8")
    cfg = load_config(path)
    assert cfg.router is not None
    assert cfg.router.file is None and cfg.router.keywords == {"billing": ["refund", "invoice"]}


def test_empty_keywords_alone_are_no_router() -> None:
    with pytest.raises(ConfigError, match="router: give exactly one of 'file' or 'keywords'"):
        EngineConfig(router={"keywords": {}})


def test_a_route_for_a_label_the_keyword_router_never_gives_is_refused() -> None:
    # a typo in a route's label: the route was never used, and every billing
    # query fell back ('no route for label billing') without a word
    data = {
        "store": "memory",
        "router": {"keywords": {"billing": ["refund"], "shipping": ["parcel"]}},
        "routes": {"biling": ["memory"], "shipping": ["memory"]},
    }
    with pytest.raises(ConfigError, match=r"routes: 'biling' is no label of the router"):
        config_from_dict(data)
    # the default label is one the router gives
    data["router"]["default"] = "biling"  # type: ignore[index]
    assert config_from_dict(data).routes["biling"] == ["memory"]


def test_a_route_for_a_label_the_router_file_never_gives_is_refused(
    tmp_path: Path, data_dir: Path
) -> None:
    import json

    from ctxwise.routing import IntentRouter

    rows = json.loads((data_dir / "clinc150" / "data_full.json").read_text(encoding="utf-8"))
    wanted = {"translate", "bill_balance", "pay_bill"}
    router = IntentRouter.from_labeled((t, lab) for t, lab in rows["train"] if lab in wanted)
    router.save(tmp_path / "router.json")
    path = tmp_path / "ctxwise.toml"
    path.write_text(
        'store = "memory"\n[router]\nfile = "router.json"\n'
        '[routes]\ntranslate = ["memory"]\nbil_balance = ["memory"]\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"router\.json: routes: 'bil_balance' is no label"):
        Engine.from_file(str(path))
    path.write_text(path.read_text().replace("bil_balance", "bill_balance"), encoding="utf-8")
    with Engine.from_file(str(path)) as engine:
        assert set(engine.routes) == {"translate", "bill_balance"}


def test_a_relative_st_embedder_folder_is_relative_to_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    # tools.embedder = "st:DIR" was looked for in the working folder, unlike every
    # other path of the file: here it is missing, and the error names where it was sought
    pytest.importorskip("sentence_transformers")
    folder = tmp_path / "project"
    folder.mkdir()
    catalog = data_dir / "tools" / "livemcpbench" / "livemcp_tool_catalog.jsonl"
    path = folder / "ctxwise.toml"
    path.write_text(
        f'store = "memory"\n[tools]\ncatalog = "{catalog}"\nskip_invalid = true\n'
        'embedder = "st:models/mini"\n',
        encoding="utf-8",
    )
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "models" / "mini").mkdir(parents=True)  # no model: never to be read
    monkeypatch.chdir(elsewhere)
    with pytest.raises(UsageError, match=f"model path {folder / 'models' / 'mini'} is not"):
        Engine.from_file(str(path))


@pytest.mark.parametrize("name", ["bogus", "Hashing", "hashing:abc", "hashing:64:bigrams", "st:"])
def test_an_unknown_tools_embedder_is_refused_without_a_catalog_too(name: str) -> None:
    # it was built only with a catalog, so without one a typo passed silently
    with pytest.raises(ConfigError, match=rf"tools\.embedder: unknown embedder '{name}'"):
        config_from_dict({"tools": {"embedder": name}})


@pytest.mark.parametrize("name", ["none", "hashing", "hashing:64", "hashing:64:unigrams", "minilm"])
def test_every_documented_embedder_name_is_taken(name: str) -> None:
    assert config_from_dict({"tools": {"embedder": name}}).tools.embedder == name


@pytest.mark.parametrize(
    "encode",
    [
        lambda t: b"\xef\xbb\xbf" + t.encode("utf-8"),  # as Notepad saves UTF-8
        lambda t: t.encode("utf-16"),  # with its byte order mark
    ],
    ids=["utf-8-bom", "utf-16"],
)
def test_a_config_saved_with_a_byte_order_mark_loads(tmp_path: Path, encode: Any) -> None:
    # it was 'bad TOML: Invalid statement (at line 1, column 1)' and 'not UTF-8 text',
    # though every source, system and spec file ctxwise reads may carry the mark
    path = tmp_path / "ctxwise.toml"
    path.write_bytes(encode('store = "memory"\nbudget = 5000\n[sources.faq]\ntext = "Rückgabe"\n'))
    cfg = load_config(path)
    assert (cfg.budget, cfg.sources["faq"].text) == (5000, "Rückgabe")


def test_a_config_with_a_nul_byte_or_bad_utf8_names_what_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "ctxwise.toml"
    path.write_bytes(b"budget = 5\x00\n")
    with pytest.raises(ConfigError, match="binary file"):
        load_config(path)
    path.write_bytes(b'system = "caf\xe9"\n')
    with pytest.raises(ConfigError, match=r"not UTF-8 text \(byte 13"):
        load_config(path)


REFUND = {"kind": "forbid", "name": "no-refund", "text": "Never refund.", "tools": ["issue_refund"]}


@pytest.mark.parametrize(
    ("gates", "message"),
    [
        ({"file": "missing.json"}, r"missing\.json: gates\.file: no such file"),
        ({"file": "."}, r"gates\.file: is a directory"),
        # the index was the rule's among the file's and the inline rules together
        (
            {"file": "gates.json", "rules": [{"kind": "forbid", "name": "x"}]},
            r"^config: gates\.rules\[0\]\.text: missing",
        ),
        ({"rules": [REFUND, REFUND]}, r"^config: gates\.rules\[1\]: a rule named 'no-refund'"),
        (
            {"file": "gates.json", "rules": [REFUND]},
            r"gates\.json: gates\.rules and gates\.file: a rule named 'no-refund' is already",
        ),
    ],
)
def test_a_bad_gate_names_its_key(tmp_path: Path, gates: dict[str, Any], message: str) -> None:
    import json

    (tmp_path / "gates.json").write_text(json.dumps({"version": 1, "rules": [REFUND]}))
    cfg = config_from_dict({"store": "memory", "gates": gates}, base_dir=str(tmp_path))
    with pytest.raises(ConfigError, match=message):
        Engine(cfg)


def test_a_gate_file_and_inline_rules_still_join(tmp_path: Path) -> None:
    import json

    (tmp_path / "gates.json").write_text(json.dumps({"version": 1, "rules": [REFUND]}))
    other = {**REFUND, "name": "no-cancel", "tools": ["cancel_order"]}
    cfg = config_from_dict(
        {"store": "memory", "gates": {"file": "gates.json", "rules": [other]}},
        base_dir=str(tmp_path),
    )
    with Engine(cfg) as engine:
        engine.record("s", [Message.text_message("user", "Please refund order 4417.")])
        assert not engine.check_tool("s", "issue_refund", {})
        assert not engine.check_tool("s", "cancel_order", {})
        assert engine.check_tool("s", "lookup_order", {})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (None, r"tools\.jsonl: tools\.catalog: no such file"),
        (
            '{"name": "a", "description": "x", "inputSchema": {"type": "object"}}\n{bad\n',
            r"tools\.jsonl:2: tools\.catalog: not JSON",
        ),
    ],
)
def test_a_catalog_that_does_not_read_names_tools_catalog(
    tmp_path: Path, body: str | None, message: str
) -> None:
    # a FormatError naming only the file (and not the line of a JSON lines file)
    if body is not None:
        (tmp_path / "tools.jsonl").write_text(body, encoding="utf-8")
    cfg = config_from_dict(
        {"store": "memory", "tools": {"catalog": "tools.jsonl"}}, base_dir=str(tmp_path)
    )
    with pytest.raises(ConfigError, match=message):
        Engine(cfg)


def test_a_route_and_the_fallback_may_name_a_source_given_in_code() -> None:
    # the config refused every name without a [sources] table, so a source given to
    # the Engine in code (its extension point) could never be routed to
    cfg = EngineConfig(
        store="memory",
        router={"keywords": {"kb": ["docs"]}},
        routes={"kb": ["kb", "memory"]},
        fallback=["kb"],
    )
    with Engine(cfg, sources=[StaticSource("kb", "Knowledge base text")]) as engine:
        routed = engine.turn("s", [Message.text_message("user", "read the docs")]).trace
        answer = Message.text_message("assistant", "Here is what the docs say.")
        fell = engine.turn("s", [answer, Message.text_message("user", "something else")]).trace
    assert (routed.route.label, [s.name for s in routed.sections]) == ("kb", ["kb"])
    assert (fell.route.fallback is not None, [s.name for s in fell.sections]) == (True, ["kb"])


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[routes]\nbilling = ["faq", "kb"]', r"route 'billing' names unknown source\(s\) kb"),
        ('fallback = ["kb"]', r"fallback names unknown source\(s\) kb; known: faq, memory"),
    ],
)
def test_an_unknown_source_still_fails_before_a_store_is_opened(
    tmp_path: Path, toml: str, message: str
) -> None:
    path = tmp_path / "ctxwise.toml"
    path.write_text(
        f'store = "sqlite:///ctxwise.db"\n{toml}\n[sources.faq]\ntext = "x"\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=message):
        Engine.from_file(str(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ctxwise.toml"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"counter": "char"}, r"counter must be a TokenCounter, got 'char'"),
        ({"router": "router.json"}, r"router must have a route\(query\) method"),
        ({"router": {"billing": ["refund"]}}, r"router must have a route\(query\) method"),
    ],
)
def test_a_counter_or_router_given_in_code_is_checked_when_the_engine_is_built(
    kwargs: dict[str, Any], message: str
) -> None:
    # counter="char" raised AttributeError ('str' has no 'name'); a router without
    # route() was taken and every turn raised AttributeError
    with pytest.raises(UsageError, match=message):
        Engine(EngineConfig(store="memory"), **kwargs)


@pytest.mark.parametrize(
    ("directory", "message"),
    [
        ("afile", r"afile: memory_tool\.directory: the memory root .* is not a folder"),
        ("afile/sub", r"memory_tool\.directory: cannot create the memory root"),
    ],
)
def test_a_memory_tool_folder_that_cannot_be_one_names_the_key(
    tmp_path: Path, directory: str, message: str
) -> None:
    (tmp_path / "afile").write_text("not a folder", encoding="utf-8")
    cfg = config_from_dict(
        {
            "store": "memory",
            "memory_tool": {"enabled": True, "backend": "directory", "directory": directory},
        },
        base_dir=str(tmp_path),
    )
    with pytest.raises(ConfigError, match=message):
        Engine(cfg)


def test_always_sent_tools_without_a_catalog_are_refused() -> None:
    # they were never sent, without a word: the request held no tools at all
    with pytest.raises(ConfigError, match=r"tools\.always names get_order but there is no tool"):
        Engine(EngineConfig(store="memory", tools={"always": ["get_order"]}))
