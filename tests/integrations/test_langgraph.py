"""The classify → route → assemble graph on the real LangGraph with SqliteSaver:
a run interrupted after classify resumes in a new process with the same context."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("langgraph", reason="needs the langgraph extra: pip install -e '.[langgraph]'")
pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs langgraph-checkpoint-sqlite")

from ctxwise._demo import ROUTING_QUERIES, routing_pipeline
from ctxwise.integrations.langgraph import build_graph

SCRIPT = textwrap.dedent(
    """
    import json, sqlite3, sys
    from langgraph.checkpoint.sqlite import SqliteSaver
    from ctxwise._demo import routing_pipeline
    from ctxwise.integrations.langgraph import build_graph

    phase, db, query = sys.argv[1], sys.argv[2], sys.argv[3]
    conn = sqlite3.connect(db, check_same_thread=False)
    graph = build_graph(
        routing_pipeline(), checkpointer=SqliteSaver(conn), interrupt_after=["classify"]
    )
    config = {"configurable": {"thread_id": "turn-1"}}
    if phase == "start":
        out = graph.invoke({"query": query}, config)
    else:
        out = graph.invoke(None, config)
    snapshot = graph.get_state(config)
    print(json.dumps({"state": out, "next": list(snapshot.next)}))
    conn.close()
    """
)


def run(tmp: Path, phase: str, query: str) -> dict:  # type: ignore[type-arg]
    script = tmp / "graph_run.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script), phase, str(tmp / "checkpoints.sqlite"), query],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("query", [ROUTING_QUERIES[1], ROUTING_QUERIES[0]])
def test_interrupted_run_resumes_in_a_new_process(tmp_path: Path, query: str) -> None:
    first = run(tmp_path, "start", query)
    assert first["next"] == ["assemble"]  # stopped after classify, before assembling
    assert "context" not in first["state"]
    resumed = run(tmp_path, "resume", query)
    assert resumed["next"] == []
    direct = routing_pipeline().turn(query)
    assert resumed["state"]["context"] == direct.assembly.render_text()
    assert resumed["state"]["sources"] == list(direct.sources)
    assert resumed["state"]["report"]["tokens"] == direct.assembly.tokens


def test_refusal_takes_the_fallback_edge() -> None:
    from ctxwise.orchestrator import Pipeline
    from ctxwise.routing import BowScorer, IntentRouter
    from ctxwise.sources import StaticSource

    router = IntentRouter(BowScorer())
    router.add("billing", keywords=["refund", "charge"])
    router.add("cancel", keywords=["cancel", "charge"])
    pipeline = Pipeline(
        router, [StaticSource("a", "alpha"), StaticSource("b", "beta")], {"billing": ["a"]}, 100
    )
    graph = build_graph(pipeline)
    out = graph.invoke({"query": "cancel the refund charge"})
    assert out["label"] is None and out["reason"] == "ambiguous_tie"
    assert out["sources"] == ["a", "b"] and "ambiguous_tie" in out["fallback"]
    out = graph.invoke({"query": "refund please"})
    assert out["sources"] == ["a"] and out["fallback"] is None


def test_bad_input_and_setup_are_ctxwise_errors_that_say_what_is_wrong() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from ctxwise.errors import IntegrationError, UsageError

    graph = build_graph(routing_pipeline())
    with pytest.raises(UsageError, match="'query' string; it has no 'query'"):
        graph.invoke({})  # was a bare KeyError from inside the node
    with pytest.raises(UsageError, match="it has a query of type int"):
        graph.invoke({"query": 5})
    with pytest.raises(IntegrationError, match="Pipeline, got str") as info:
        build_graph("not a pipeline")  # type: ignore[arg-type]
    assert info.value.reason == "config"
    with pytest.raises(IntegrationError, match="got 'classify'"):
        build_graph(routing_pipeline(), interrupt_after="classify")  # type: ignore[arg-type]
    with pytest.raises(IntegrationError, match=r"'classfy' \(the nodes are classify"):
        build_graph(routing_pipeline(), interrupt_after=["classfy"])
    every = build_graph(routing_pipeline(), checkpointer=InMemorySaver(), interrupt_after="*")
    config = {"configurable": {"thread_id": "t"}}
    every.invoke({"query": ROUTING_QUERIES[0]}, config)
    assert list(every.get_state(config).next) == ["assemble"]
