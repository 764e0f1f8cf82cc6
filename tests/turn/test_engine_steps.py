"""The Engine's turn as steps: inserted steps, a failing step, a retry that does not
pay the summarizer twice, the embedder reaching memory recall."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ctxwise.config import EngineConfig
from ctxwise.embeddings import HashingEmbedder
from ctxwise.engine import Engine
from ctxwise.errors import ConfigError, SessionConflictError, StepError
from ctxwise.messages import Message
from ctxwise.turn import FunctionStep, TurnContext, TurnState, default_steps, step

from ._build import assistant, user


def _engine(tmp_path: Path, **config: object) -> Engine:
    return Engine(EngineConfig(store=f"sqlite:///{tmp_path / 'c.db'}", **config))  # type: ignore[arg-type]


def test_turn_reads_in_forty_lines() -> None:
    tree = ast.parse(textwrap.dedent(inspect.getsource(Engine.turn)))
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    body = fn.body[1:] if isinstance(fn.body[0], ast.Expr) else fn.body  # past the docstring
    lines = body[-1].end_lineno - body[0].lineno + 1  # type: ignore[operator]
    assert lines <= 40


def test_the_default_steps_in_order() -> None:
    assert [s.name for s in default_steps()] == [
        "append",
        "observe",
        "calibrate",
        "route",
        "tools",
        "budget",
        "edit",
        "gather",
        "assemble",
        "render",
        "cost",
        "ledger",
        "trace",
        "estimate",
    ]


def test_an_inserted_step_runs_and_is_in_the_trace(tmp_path: Path) -> None:
    seen: list[str | None] = []

    @step("audit")
    def audit(state: TurnState, ctx: TurnContext) -> TurnState:
        seen.append(state.route.label if state.route else "unrouted")
        return state

    with _engine(tmp_path) as engine:
        engine.steps.insert(audit, after="route")
        result = engine.turn("s", "hello")
    assert seen == [None]  # after route: no router, so no label
    assert "audit" in result.trace.timings_ms
    assert list(result.trace.timings_ms)[:5] == [
        "append",
        "observe",
        "calibrate",
        "route",
        "audit",
    ]


def test_a_replaced_and_a_wrapped_step(tmp_path: Path) -> None:
    calls: list[str] = []

    def wrapper(inner: FunctionStep) -> FunctionStep:
        def run(state: TurnState, ctx: TurnContext) -> TurnState:
            calls.append("before")
            return inner(state, ctx)

        return FunctionStep("ignored-name", run)

    @step("render")
    def no_render(state: TurnState, ctx: TurnContext) -> TurnState:
        return state.but(request={"model": "x", "messages": []})

    with _engine(tmp_path) as engine:
        engine.steps.wrap("edit", wrapper)  # type: ignore[arg-type]
        engine.steps.replace("render", no_render)
        result = engine.turn("s", "hello")
    assert calls == ["before"]
    assert result.request == {"model": "x", "messages": []}
    assert "edit" in result.trace.timings_ms


def test_a_failing_step_names_itself_and_commits_nothing(tmp_path: Path) -> None:
    @step("explode")
    def explode(state: TurnState, ctx: TurnContext) -> TurnState:
        raise ValueError("boom")

    with _engine(tmp_path) as engine:
        engine.turn("s", "first")
        engine.steps.insert(explode, before="trace")
        with pytest.raises(StepError, match="explode") as info:
            engine.turn("s", [assistant("reply"), user("second")])
        assert info.value.step == "explode" and "boom" in info.value.detail
        assert engine.sessions.version("s") == 1
        assert len(engine.session_messages("s")) == 1
        engine.steps.remove("explode")
        assert engine.turn("s", [assistant("reply"), user("second")]).version == 2


class _CountingSummarizer:
    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, previous: str, turns: Sequence[Message], budget: int) -> str:
        self.calls += 1
        return f"Summary of {len(turns)} turns."


def test_a_retry_calls_the_summarizer_once(tmp_path: Path) -> None:
    summarizer = _CountingSummarizer()
    url = f"sqlite:///{tmp_path / 'c.db'}"
    cfg = EngineConfig(store=url, budget=1_500)
    with Engine(cfg, summarizer=summarizer) as engine, Engine(cfg) as other:
        for i in range(12):
            engine.record("s", [user(f"question {i} " + "word " * 60), assistant("ok " * 60)])
        raced: list[int] = []

        @step("race")
        def race(state: TurnState, ctx: TurnContext) -> TurnState:
            if state.attempt == 1:  # another writer commits while this turn runs
                raced.append(other.record("s", []))
            return state

        engine.steps.insert(race, after="edit")
        result = engine.turn("s", user("and now?"))
    assert raced and result.trace.attempts == 2
    assert result.trace.compacted is not None
    assert summarizer.calls == 1


def test_expected_version_refuses_a_moved_session(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        engine.turn("s", "hi")
        with pytest.raises(SessionConflictError):
            engine.turn("s", [assistant("a"), user("b")], expected_version=0)


class _CountingEmbedder:
    def __init__(self) -> None:
        self.inner = HashingEmbedder(256)
        self.texts: list[str] = []

    @property
    def name(self) -> str:
        return "counting:256"

    @property
    def dim(self) -> int:
        return 256

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.embed(texts)


def test_the_engine_embedder_reaches_memory_recall(tmp_path: Path) -> None:
    embedder = _CountingEmbedder()
    cfg = EngineConfig(store=f"sqlite:///{tmp_path / 'c.db'}", budget=1_500)
    with Engine(cfg, embedder=embedder) as engine:
        traces = [
            engine.turn("s", user("my order number is 8812 and the parcel is late " * 4)).trace
        ]
        for i in range(14):
            new = [assistant("noted " * 60), user(f"another question {i} " * 10)]
            traces.append(engine.turn("s", new).trace)
        asked = "what was my order number?"
        result = engine.turn("s", [assistant("ok"), user(asked)])
    assert any(t.compacted for t in traces)
    assert asked in embedder.texts  # the query was embedded by the Engine's embedder
    assert any("8812" in t for t in embedder.texts)  # so were the compacted turns
    recalled = [s for s in result.trace.sections if s.name == "recalled"]
    assert recalled and recalled[0].tokens > 0


def test_a_preset_fit_to_another_embedder_is_refused(tmp_path: Path) -> None:
    # in the config, the preset and [embedder] disagree
    with pytest.raises(ConfigError, match="minilm"):
        EngineConfig(store="sqlite:///x.db", memory={"preset": "dialogue-minilm"})  # type: ignore[arg-type]
    # in code, an embedder given to the Engine disagrees with the config's preset
    minilm = EngineConfig(
        store=f"sqlite:///{tmp_path / 'c.db'}",
        embedder={"kind": "minilm"},  # type: ignore[arg-type]
        memory={"preset": "dialogue-minilm"},  # type: ignore[arg-type]
    )
    with pytest.raises(ConfigError, match="minilm"):
        Engine(minilm, embedder=HashingEmbedder())
    assert not (tmp_path / "c.db").exists()


def _compacting_loop(engine: Engine) -> list[dict[str, object]]:
    requests = [engine.turn("s", user("my order number is 8812 and the parcel is late " * 4))]
    for i in range(14):
        requests.append(engine.turn("s", [assistant("noted " * 60), user(f"question {i} " * 10)]))
    requests.append(engine.turn("s", [assistant("ok"), user("what was my order number?")]))
    return [r.request for r in requests]


def test_background_effects_change_no_request(tmp_path: Path) -> None:
    def cfg(name: str) -> EngineConfig:
        return EngineConfig(store=f"sqlite:///{tmp_path / name}", budget=1_500)

    with Engine(cfg("a.db")) as background, Engine(cfg("b.db"), effects="inline") as inline:
        assert _compacting_loop(background) == _compacting_loop(inline)
        background.wait()
        namespace = background._namespace("s")
        assert background.memory is not None and inline.memory is not None
        assert background.memory.count(namespace) == inline.memory.count(namespace) > 0


def test_a_failed_effect_is_run_again_by_the_next_recall(tmp_path: Path) -> None:
    with Engine(EngineConfig(store=f"sqlite:///{tmp_path / 'c.db'}", budget=1_500)) as engine:
        assert engine.memory is not None
        real = engine.memory.put_many
        failures: list[int] = []

        def failing(namespace: object, items: object) -> list[str]:
            failures.append(1)
            raise OSError("disk full")

        engine.memory.put_many = failing  # type: ignore[method-assign]
        turns = [engine.turn("s", user("my order number is 8812 " * 8))]
        for i in range(14):
            turns.append(engine.turn("s", [assistant("noted " * 60), user(f"q {i} " * 10)]))
            engine.wait()
            if failures:
                break
        assert failures  # a compaction's effect failed after its commit
        engine.memory.put_many = real  # type: ignore[method-assign]
        engine.turn("s", [assistant("ok"), user("what was my order number?")])
        engine.wait()
        assert engine.memory.count(engine._namespace("s")) > 0
        assert engine._load("s").remembered > 0
