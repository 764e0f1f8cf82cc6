"""Framework middleware: how many model inputs each one hands the model are invalid.

Two methods edit a LangChain agent's history before each model call:
``langchain.SummarizationMiddleware`` (LangChain's own, run through its
``before_model`` hook as ``create_agent`` runs it, with a fake summarizer that
returns a short summary) and ``ctxwise.CtxwiseMiddleware`` (through its
``wrap_model_call``, capturing the request the handler gets). Both get the same
token budget, counted by the same counter (the Engine's ``char`` counter, over the
system prompt and the messages): SummarizationMiddleware is triggered at the
budget (``trigger=("tokens", budget)``) and keeps half of it
(``keep=("tokens", budget // 2)``), as ctxwise compacts to half its history room;
its ``token_counter`` is the same counter.

Case sets:

- ``issue-38352``: langchain-ai/langchain#38352: parallel tool calls A and B as
  two consecutive ``AIMessage``\\ s (as the issue reproduces it), then ``Tool(A)``,
  ``Tool(B)``, with a small keep (one or two messages, or the last two messages'
  tokens), and the same calls in one ``AIMessage`` for reference; the case is
  smaller than the main budget, so it gets its own (``ISSUE_BUDGET``, below its
  size, so both methods must act);
- ``transcripts``: every Claude Code session in ``../shared/data`` (top-level
  ``*.jsonl`` and ``*/subagents/*.jsonl``; each compaction segment on its own, as
  the API saw it) and the first 50 tau-bench trajectories (``gpt-4o-airline.json``;
  reused tool ids renamed by :func:`ctxwise.pairing.repair_pairing` first, for both
  methods). At every point along each transcript where a model call happens
  (after a user turn whose calls are all answered), the messages so far
  are given as LangChain messages (one ``AIMessage`` per assistant message, one
  ``ToolMessage`` per tool result) and each method's model input is captured.
  ctxwise keeps one session per transcript across its cut points, as a live agent.
  ``edited`` counts the inputs where the method changed the history (summarized;
  cleared or compacted), so both are seen doing work at this budget.

An input is invalid when it holds an orphan tool result, a tool call with no
result before the next assistant message (``ctxwise.pairing.problems``, each
LangChain message on its own), or, for the method that promises the budget
(ctxwise), more tokens than the budget. ``over_budget`` counts inputs over the
budget for both; ``refused`` counts inputs a method declined to build (an error
instead of a model call).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware import ModelRequest, ModelResponse, SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

import ctxwise
from _common import (
    claude_code_files,
    print_table,
    tau_bench_transcripts,
    write_results,
)
from ctxwise.config import EngineConfig
from ctxwise.engine import Engine
from ctxwise.integrations.langchain import CtxwiseMiddleware, from_langchain, to_langchain
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Transcript
from ctxwise.pairing import problems, repair_pairing
from ctxwise.tokens import get_counter

BUDGET = 6000
ISSUE_BUDGET = 200
"""The issue-38352 case is small: its budget is below its size, so both methods act."""
TAU = 50
SUMMARIZATION = "langchain.SummarizationMiddleware"
CTXWISE = "ctxwise.CtxwiseMiddleware"
COUNTER = get_counter("char")


def _count(messages: Sequence[Any]) -> int:
    """Tokens of LangChain messages, as the Engine counts them."""
    return COUNTER.count_messages(from_langchain(list(messages)))


def _strict(messages: Sequence[BaseMessage]) -> list[Message]:
    """Each LangChain message as its own neutral message (for the pairing check)."""
    out: list[Message] = []
    for m in messages:
        if isinstance(m, ToolMessage):
            out.append(Message("user", (ToolResultBlock(m.tool_call_id, str(m.content)),)))
        elif isinstance(m, AIMessage):
            calls = tuple(ToolUseBlock(str(c["id"]), c["name"], c["args"]) for c in m.tool_calls)
            out.append(Message("assistant", calls or (TextBlock("x"),)))
        elif isinstance(m, SystemMessage):
            continue
        else:
            out.append(Message.text_message("user", "x"))
    return out


def _verdict(
    system: SystemMessage | None, messages: Sequence[BaseMessage], budget: int = BUDGET
) -> tuple[bool, bool]:
    """(pairing problems?, over the budget?) of one model input."""
    bad = bool(problems(_strict(messages), "loose"))
    tokens = _count([*([system] if system is not None else []), *messages])
    return bad, tokens > budget


def _fake_summarizer() -> FakeListChatModel:
    return FakeListChatModel(responses=["Short summary: the user asked; tools answered."])


def summarization_input(
    system: SystemMessage | None,
    messages: list[AnyMessage],
    *,
    keep: Any = None,
    budget: int = BUDGET,
) -> list[AnyMessage]:
    """The messages SummarizationMiddleware's before_model leaves for the model."""
    room = budget - (_count([system]) if system is not None else 0)
    mw = SummarizationMiddleware(
        _fake_summarizer(),
        trigger=("tokens", max(1, room)),
        keep=keep if keep is not None else ("tokens", max(1, room // 2)),
        token_counter=_count,
    )
    update = mw.before_model({"messages": list(messages)}, None)  # type: ignore[arg-type]
    if update is None:
        return list(messages)
    return list(update["messages"][1:])  # after RemoveMessage(REMOVE_ALL_MESSAGES)


class _Capture:
    def __init__(self) -> None:
        self.request: ModelRequest | None = None

    def __call__(self, request: ModelRequest) -> ModelResponse:
        self.request = request
        return ModelResponse(result=[AIMessage("ok")])


def ctxwise_input(
    mw: CtxwiseMiddleware, system: SystemMessage | None, messages: list[AnyMessage]
) -> tuple[SystemMessage | None, list[AnyMessage]]:
    capture = _Capture()
    request = ModelRequest(
        model=_fake_summarizer(),
        messages=list(messages),
        system_message=system,
        state={"messages": list(messages)},
    )
    mw.wrap_model_call(request, capture)
    assert capture.request is not None
    return capture.request.system_message, list(capture.request.messages)


# ---------------------------------------------------------------- cases


def _issue_cases() -> list[tuple[str, list[AnyMessage], Any]]:
    def call(i: str, name: str) -> dict[str, Any]:
        return {"name": name, "args": {"q": i}, "id": i, "type": "tool_call"}

    head: list[AnyMessage] = [
        HumanMessage("Look up the weather and the news for Paris, then tell me both."),
    ]
    two: list[AnyMessage] = [
        *head,
        AIMessage("", tool_calls=[call("A", "weather")]),
        AIMessage("", tool_calls=[call("B", "news")]),
        ToolMessage("Sunny, 21C. " * 20, tool_call_id="A"),
        ToolMessage("Parliament in session. " * 20, tool_call_id="B"),
    ]
    one: list[AnyMessage] = [
        *head,
        AIMessage("", tool_calls=[call("A", "weather"), call("B", "news")]),
        two[3],
        two[4],
    ]
    cases = []
    for name, msgs in (("two AIMessages", two), ("one AIMessage", one)):
        for keep in (("messages", 1), ("messages", 2), ("tokens", _count(msgs[-2:]))):
            fresh = [m.model_copy(update={"id": f"m{i}"}) for i, m in enumerate(msgs)]
            cases.append((f"{name}, keep={keep}", fresh, keep))
    return cases


def _cut_points(messages: Sequence[Message]) -> list[int]:
    """Prefix lengths where a model call happens."""
    ok = []
    pending: set[str] = set()
    for i, m in enumerate(messages):
        for b in m.content:
            if isinstance(b, ToolUseBlock):
                pending.add(b.id)
            elif isinstance(b, ToolResultBlock):
                pending.discard(b.tool_use_id)
        if m.role == "user" and not pending and i > 0:
            ok.append(i + 1)
    return ok


def _transcripts() -> list[tuple[str, Transcript]]:
    out: list[tuple[str, Transcript]] = []
    for path in claude_code_files():
        t = ctxwise.read_transcript(path)
        for j, seg in enumerate(t.segments()):
            out.append((f"{path.name}#{j}", seg))
    for i, t in enumerate(tau_bench_transcripts()[:TAU]):
        fixed, _ = repair_pairing(t, placement="loose")
        out.append((f"tau-bench#{i}", fixed))
    return out


def _lc(name: str, messages: Sequence[Message]) -> tuple[SystemMessage | None, list[AnyMessage]]:
    """The messages as LangChain messages with stable ids (as LangGraph's state gives
    every message one; SummarizationMiddleware would otherwise assign random ones)."""
    system = None
    body: list[AnyMessage] = []
    for i, m in enumerate(to_langchain([m for m in messages if m.role != "system"])):
        body.append(m.model_copy(update={"id": f"{name}:{i}"}))  # type: ignore[arg-type]
    texts = [m.text for m in messages if m.role == "system" and m.text]
    if texts:
        system = SystemMessage("\n\n".join(texts))
    return system, body


# ---------------------------------------------------------------- run


def main() -> None:
    t0 = time.perf_counter()
    tally: dict[tuple[str, str], dict[str, int]] = {}

    def add(
        method: str, cases: str, bad_pairs: bool, over: bool, refused: bool, edited: bool = False
    ) -> None:
        row = tally.setdefault(
            (method, cases),
            {"inputs": 0, "invalid": 0, "pairing": 0, "over_budget": 0, "refused": 0, "edited": 0},
        )
        row["edited"] += edited
        if refused:
            row["refused"] += 1
            return
        row["inputs"] += 1
        row["pairing"] += bad_pairs
        row["over_budget"] += over
        row["invalid"] += bad_pairs or (over and method == CTXWISE)

    details: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        # counted by char with no safety margin, as the committed figures were measured
        config = EngineConfig(
            store=f"sqlite:///{Path(tmp) / 'bench.db'}",
            budget=BUDGET,
            counter="char",
            safety_margin=0,
        )
        small = EngineConfig(
            store=f"sqlite:///{Path(tmp) / 'issue.db'}",
            budget=ISSUE_BUDGET,
            counter="char",
            safety_margin=0,
        )
        with Engine(small) as engine:
            for n, (name, msgs, keep) in enumerate(_issue_cases()):
                out = summarization_input(None, msgs, keep=keep, budget=ISSUE_BUDGET)
                bad, over = _verdict(None, out, ISSUE_BUDGET)
                add(SUMMARIZATION, "issue-38352", bad, over, False, out != msgs)
                mw = CtxwiseMiddleware(engine, session_id=f"issue-{n}")
                system, window = ctxwise_input(mw, None, msgs)
                cbad, cover = _verdict(system, window, ISSUE_BUDGET)
                trace = mw.last.trace if mw.last is not None else None
                edited = trace is not None and (bool(trace.cleared) or bool(trace.compacted))
                add(CTXWISE, "issue-38352", cbad, cover, False, edited)
                details.append(
                    {
                        "case": name,
                        "summarization_kept": [_describe(m) for m in out],
                        "summarization_problems": [p.to_dict() for p in problems(_strict(out))],
                        "ctxwise_kept": [_describe(m) for m in window],
                        "ctxwise_problems": [p.to_dict() for p in problems(_strict(window))],
                    }
                )
        with Engine(config) as engine:
            for name, t in _transcripts():
                mw = CtxwiseMiddleware(engine, session_id=f"replay-{name}")
                for cut in _cut_points(t.messages):
                    system, lc = _lc(name, t.messages[:cut])
                    out = summarization_input(system, lc)
                    bad, over = _verdict(system, out)
                    add(SUMMARIZATION, "transcripts", bad, over, False, out != lc)
                    try:
                        csys, window = ctxwise_input(mw, system, lc)
                    except ctxwise.CtxwiseError as exc:
                        print(f"{name} cut {cut}: ctxwise refused: {exc}", file=sys.stderr)
                        add(CTXWISE, "transcripts", False, False, True)
                        continue
                    cbad, cover = _verdict(csys, window)
                    trace = mw.last.trace if mw.last is not None else None
                    edited = trace is not None and (bool(trace.cleared) or bool(trace.compacted))
                    add(CTXWISE, "transcripts", cbad, cover, False, edited)
    rows = [{"method": m, "cases": c, **v} for (m, c), v in sorted(tally.items(), key=_order)]
    write_results(
        "bench_frameworks",
        {
            "budget": BUDGET,
            "issue_38352_budget": ISSUE_BUDGET,
            "counter": "char",
            "tau_bench_trajectories": TAU,
            "rows": rows,
            "issue_38352": details,
            "seconds": round(time.perf_counter() - t0, 1),
        },
        packages=("langchain", "langchain-core", "langgraph"),
    )
    print_table(
        f"model inputs after each middleware (budget {BUDGET} tokens)",
        ["method", "cases", "inputs", "invalid", "pairing", "over_budget", "refused", "edited"],
        [
            [
                r["method"],
                r["cases"],
                r["inputs"],
                r["invalid"],
                r["pairing"],
                r["over_budget"],
                r["refused"],
                r["edited"],
            ]
            for r in rows
        ],
        align="llrrrrrr",
    )


def _order(item: tuple[tuple[str, str], dict[str, int]]) -> tuple[int, int]:
    (method, cases), _ = item
    return (0 if cases == "issue-38352" else 1, 0 if method == SUMMARIZATION else 1)


def _describe(m: BaseMessage) -> str:
    if isinstance(m, ToolMessage):
        return f"Tool({m.tool_call_id})"
    if isinstance(m, AIMessage) and m.tool_calls:
        return "AI(" + ",".join(str(c["id"]) for c in m.tool_calls) + ")"
    return type(m).__name__.removesuffix("Message")


if __name__ == "__main__":
    main()
