"""LangGraph integration (extra ``langgraph``): classify → conditional edge → assemble.

:func:`build_graph` turns a :class:`~ctxwise.orchestrator.Pipeline` into a real
``StateGraph``. The ``classify`` node routes the query; a conditional edge sends a
routed label to ``assemble`` and a refusal to ``fallback`` (the broader source
set, never a guess). State holds only JSON-ready values, so any LangGraph
checkpointer can persist it; with ``SqliteSaver`` a run interrupted after
``classify`` resumes in a new process and produces the same context.

    from langgraph.checkpoint.sqlite import SqliteSaver
    graph = build_graph(pipeline, checkpointer=SqliteSaver(conn))
    out = graph.invoke({"query": "..."}, {"configurable": {"thread_id": "t1"}})
    out["context"]   # the assembled window text
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypedDict

from ctxwise.errors import IntegrationError, MissingDependencyError, UsageError
from ctxwise.orchestrator import Pipeline

try:
    from langgraph.graph import END, START, StateGraph
except ImportError:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("langgraph", "langgraph", "the LangGraph integration") from None

__all__ = ["NODES", "ContextState", "build_graph"]

FRAMEWORK = "langgraph"
NODES = ("classify", "assemble", "fallback")
"""The graph's nodes (what ``interrupt_after`` may name)."""


class ContextState(TypedDict, total=False):
    """The graph's state: JSON-ready values only."""

    query: str
    label: str | None
    reason: str
    decision: dict[str, Any]
    sources: list[str]
    fallback: str | None
    context: str
    report: dict[str, Any]
    tokens_by_source: dict[str, int]


def build_graph(
    pipeline: Pipeline,
    *,
    checkpointer: Any = None,
    interrupt_after: Sequence[str] | Literal["*"] | None = None,
) -> Any:
    """A compiled ``StateGraph``: ``classify`` → (``assemble`` | ``fallback``) → END.

    Raises:
        IntegrationError: (reason ``"config"``) ``pipeline`` is not a
            :class:`~ctxwise.orchestrator.Pipeline`, or ``interrupt_after`` is not a
            list of node names (:data:`NODES`) or ``"*"`` (every node).

    Running the graph on a state without a ``query`` string is a
    :class:`~ctxwise.errors.UsageError` saying so.
    """
    if not isinstance(pipeline, Pipeline):
        raise IntegrationError(
            FRAMEWORK,
            "config",
            f"pipeline must be a ctxwise Pipeline, got {type(pipeline).__name__}",
        )
    after: list[str] | Literal["*"] | None = None
    if interrupt_after == "*":  # LangGraph's "every node"
        after = "*"
    elif interrupt_after:
        if (
            isinstance(interrupt_after, str)
            or not isinstance(interrupt_after, Sequence)
            or not all(isinstance(n, str) for n in interrupt_after)
        ):
            raise IntegrationError(
                FRAMEWORK,
                "config",
                f"interrupt_after is a list of node names ({', '.join(NODES)}), "
                f"got {interrupt_after!r}",
            )
        after = list(interrupt_after)
        unknown = [n for n in after if n not in NODES]
        if unknown:
            raise IntegrationError(
                FRAMEWORK,
                "config",
                f"interrupt_after names no node of the graph: {', '.join(map(repr, unknown))} "
                f"(the nodes are {', '.join(NODES)})",
            )

    def query_of(state: ContextState) -> str:
        query = state.get("query")
        if not isinstance(query, str):
            got = (
                "no 'query'" if "query" not in state else f"a query of type {type(query).__name__}"
            )
            raise UsageError(f"the graph's input needs a 'query' string; it has {got}")
        return query

    def classify(state: ContextState) -> dict[str, Any]:
        decision = pipeline.router.route(query_of(state))
        return {
            "label": decision.label,
            "reason": decision.reason.value,
            "decision": decision.to_dict(),
        }

    def after_classify(state: ContextState) -> Literal["assemble", "fallback"]:
        label = state.get("label")
        return "assemble" if label is not None and label in pipeline.routes else "fallback"

    def _assemble(state: ContextState, fallback: bool) -> dict[str, Any]:
        label = state.get("label")
        if fallback:
            chosen = pipeline.fallback
            why = (
                f"router refused ({state.get('reason')})"
                if label is None
                else f"no route for label {label!r}"
            )
        else:
            assert label is not None
            chosen, why = pipeline.routes[label], None
        assembly, by_source = pipeline.assemble_sources(chosen, query_of(state))
        return {
            "sources": list(chosen),
            "fallback": why,
            "context": assembly.render_text(),
            "report": assembly.to_dict(),
            "tokens_by_source": by_source,
        }

    def assemble(state: ContextState) -> dict[str, Any]:
        return _assemble(state, fallback=False)

    def fallback(state: ContextState) -> dict[str, Any]:
        return _assemble(state, fallback=True)

    graph = StateGraph(ContextState)
    graph.add_node("classify", classify)
    graph.add_node("assemble", assemble)
    graph.add_node("fallback", fallback)
    graph.add_edge(START, "classify")
    graph.add_conditional_edges(
        "classify", after_classify, {"assemble": "assemble", "fallback": "fallback"}
    )
    graph.add_edge("assemble", END)
    graph.add_edge("fallback", END)
    return graph.compile(checkpointer=checkpointer, interrupt_after=after)
