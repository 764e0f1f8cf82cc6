"""MCP server (extra ``mcp``): ctxwise's memory, facts, rules, gates and handoffs as MCP tools.

:func:`build_server` wraps an :class:`~ctxwise.Engine` in the official SDK's
``mcp.server.MCPServer`` (mcp 2.x; ``FastMCP`` of 1.x is gone) and
:func:`serve` runs it over stdio, which is what ``ctxwise mcp`` does. Tools:

- ``remember`` (text, session?, metadata?) → the id of the stored item;
- ``recall`` (query, k, session?) → the best items, with their scores;
- ``facts`` (session) → the session's case facts;
- ``rules`` (session, add?) → the session's standing rules; ``add`` states one;
- ``select_context`` (task, budget, transcript | session) → the subagent prompt
  (:func:`ctxwise.handoff.select_context`) and its report;
- ``compact`` (transcript, budget, out?) → the compaction's report, the
  compacted file's text when asked; a file is written only to ``out``, a path
  that does not exist yet (a call never replaces a file);
- ``check_tool`` (session, tool, input) → the policy gate's decision: allowed,
  or blocked with the rule that objects.

The resource template ``ctxwise://session/{session_id}/trace`` is a session's
window report: the :class:`~ctxwise.trace.Trace` of its last turn, as JSON.

Every tool declares a JSON schema for its arguments (the SDK derives it from
the signatures below and validates each call against it). A call with bad
arguments (an argument the tool does not declare included), an unknown session,
a missing file or any :class:`~ctxwise.errors.CtxwiseError`
comes back as a tool result with ``isError`` set and one clear line; the server
keeps answering. A failure ctxwise did not anticipate is a tool error too (the
SDK hides its text from the client and logs it on standard error).

Memory written by ``remember`` lives in the Engine's store under
``(memory.namespace, "notes", "session", ID)`` (the session id, ``/`` and ``%``
escaped) or, without a session, ``(memory.namespace, "notes", "shared")``; it is
kept apart from the compacted turns the Engine itself remembers.

A rule given to ``rules`` is recorded in the session as a user message stating
it (the way a rule enters a session: it is in the log, pinned in every window
and, with ``[gates] vocabulary`` in the config, compiled into a gate rule that
``check_tool`` enforces). Text ctxwise does not read as a standing rule is
refused, and nothing is written.

The Engine is used from one thread at a time (a lock around each call).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, ValidationError

from ctxwise.errors import CtxwiseError, UsageError
from ctxwise.integrations._framework import require_framework

SUPPORTED = ">=2.3,<3"
"""The ``mcp`` releases this server is written against (the ``mcp`` extra)."""

MCP_VERSION = require_framework("mcp", SUPPORTED, "mcp", "the ctxwise MCP server")

from mcp.server import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import (  # noqa: E402
    ResourceError,
    ResourceNotFoundError,
    ToolError,
    UnexpectedToolError,
)
from mcp.types import CallToolResult, InputRequiredResult  # noqa: E402

from ctxwise import __version__  # noqa: E402
from ctxwise.engine import Engine  # noqa: E402
from ctxwise.memory.facts import Rules  # noqa: E402
from ctxwise.memory.longterm import LongTermMemory  # noqa: E402
from ctxwise.memory.store import Store, namespace_part  # noqa: E402
from ctxwise.messages import Message  # noqa: E402

__all__ = ["MCP_VERSION", "SUPPORTED", "TOOLS", "TRACE_URI", "build_server", "serve"]

TOOLS = ("remember", "recall", "facts", "rules", "select_context", "compact", "check_tool")
"""The tools the server lists, in order."""

TRACE_URI = "ctxwise://session/{session_id}/trace"
"""The resource template of a session's window report (its last turn's trace)."""

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])

Session = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="The session id (as the Engine stores it).",
    ),
]
Budget = Annotated[
    int,
    Field(strict=True, ge=1, description="Tokens (counted by the Engine's counter)."),
]
TranscriptPath = Annotated[
    str,
    Field(
        min_length=1,
        description="A transcript file on the server's machine: Claude Code JSONL, an "
        "Anthropic or OpenAI request or messages list, tau-bench, LiveMCPBench "
        "(detected). Relative paths are relative to the server's working folder.",
    ),
]


def _scope(session: str | None) -> tuple[str, ...]:
    """The namespace parts after ``(memory.namespace, "notes")``."""
    if session is None:
        return ("shared",)
    return ("session", namespace_part(session))


class _Tools:
    """The tool bodies over one Engine (each call holds the lock)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._store: Store | None = engine.memory
        self._own_store = False

    def close(self) -> None:
        if self._own_store and self._store is not None:
            self._store.close()
            self._store = None

    def run(self, fn: Callable[[], _T]) -> _T:
        """``fn()`` under the lock, every ctxwise error as a tool error."""
        with self._lock:
            try:
                return fn()
            except CtxwiseError as exc:
                raise ToolError(str(exc)) from exc

    # ------------------------------------------------------------ memory

    def store(self) -> Store:
        if self._store is None:
            from ctxwise.memory.urls import open_store

            self._store = open_store(self.engine.config.store_url(), dim=self.engine.embedder.dim)
            self._own_store = True
        return self._store

    def memory(self, session: str | None) -> LongTermMemory:
        if session is not None:
            from ctxwise.sessions import check_session_id

            check_session_id(session)
        cfg = self.engine.config
        return LongTermMemory(
            self.store(),
            (cfg.memory.namespace, "notes", *_scope(session)),
            self.engine.embedder,
            preset=cfg.memory.preset,
        )

    def remember(
        self, text: str, session: str | None, metadata: dict[str, Any] | None
    ) -> dict[str, Any]:
        if not text.strip():
            raise UsageError("empty text: there is nothing to remember")
        memory = self.memory(session)
        item_id = memory.remember(text, metadata or {})
        return {"id": item_id, "session": session, "namespace": list(memory.namespace)}

    def recall(self, query: str, k: int, session: str | None) -> dict[str, Any]:
        from ctxwise.memory.store import NamespaceNotFoundError

        memory = self.memory(session)
        try:
            hits = memory.recall(query, k=k)
        except NamespaceNotFoundError:
            hits = []
        return {
            "session": session,
            "items": [
                {
                    "id": h.item.id,
                    "text": h.item.text,
                    "score": round(h.score, 6),
                    "lexical_rank": h.lexical_rank,
                    "vector_rank": h.vector_rank,
                    "metadata": dict(h.item.metadata),
                }
                for h in hits
            ],
        }

    # ------------------------------------------------------------ session state

    def facts(self, session: str) -> dict[str, Any]:
        facts = self.engine.facts(session)
        return {"session": session, "facts": facts.to_dict()["facts"]}

    def rules(self, session: str, add: str | None) -> dict[str, Any]:
        added: list[str] = []
        if add is not None:
            found = Rules().capture(add)
            if not found:
                raise UsageError(
                    f"{add[:80]!r} is not a standing rule ctxwise recognizes: state it as "
                    "'always …', 'never …', 'do not …', 'from now on …' (nothing was recorded)"
                )
            self.engine.record(session, [Message.text_message("user", add)])
            added = found
        rules = self.engine.rules(session)
        return {"session": session, "rules": rules.to_dict()["rules"], "added": added}

    def check_tool(self, session: str, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        decision = self.engine.check_tool(session, tool, tool_input)
        out = {"session": session, **decision.to_dict()}
        if not decision.allowed:
            out["rule_text"] = decision.rule.text
        return out

    def trace(self, session: str) -> str:
        traces = self.engine.traces(session)
        if not traces:
            raise UsageError(f"session {session!r} has no turn yet: no window report to show")
        return json.dumps(traces[-1].to_dict(), indent=2, ensure_ascii=False)

    # ------------------------------------------------------------ transcripts

    def select_context(
        self, task: str, budget: int, transcript: str | None, session: str | None
    ) -> dict[str, Any]:
        from ctxwise.formats import read_transcript
        from ctxwise.handoff.select import select_context

        if (transcript is None) == (session is None):
            raise UsageError("give exactly one of 'transcript' (a file path) and 'session'")
        if session is not None:
            handoff = self.engine.handoff(session, task, budget)
        else:
            assert transcript is not None
            t = read_transcript(transcript)
            handoff = select_context(t, task, budget, counter=self.engine.counter)
        return {"prompt": handoff.render(), "report": handoff.report()}

    def compact(
        self,
        transcript: str,
        budget: int,
        out: str | None,
        index: int,
        summary_tokens: int,
        facts: str,
        include_transcript: bool,
    ) -> dict[str, Any]:
        from ctxwise.compaction import compact, write_back_compaction
        from ctxwise.formats import (
            check_destination,
            read_transcript_file,
            save_transcript_file,
        )
        from ctxwise.memory.facts import FactExtractor
        from ctxwise.summarize import ExtractiveSummarizer

        if out is not None and out.strip() in ("", "-"):
            raise UsageError(
                "out is a file path (standard output carries the MCP protocol; "
                "use include_transcript to get the text back)"
            )
        if out is not None and os.path.lexists(out):
            raise UsageError(f"{out} exists: compact writes only a new file (nothing was written)")
        extractor = None if facts == "none" else FactExtractor.preset(facts)
        file = read_transcript_file(transcript)
        if out is not None:
            check_destination(file, out)
        items = file.transcripts
        if not 0 <= index < len(items):
            raise UsageError(
                f"{transcript} holds {len(items)} transcript(s); index {index} is out of range"
            )
        t = items[index]
        if file.format == "claude-code":
            t = t.live_window()
        counter = self.engine.counter
        result = compact(
            t,
            ExtractiveSummarizer(counter),
            budget=budget,
            summary_tokens=summary_tokens,
            counter=counter,
            extract=extractor is not None,
            extractor=extractor,
        )
        data, shape = write_back_compaction(file, result, index)
        if out is not None:
            save_transcript_file(file, data, out)
        report: dict[str, Any] = {
            "source": transcript,
            "format": file.format,
            "written_as": "claude-code"
            if file.format == "claude-code"
            else f"{file.format}:{shape}",
            "out": out,
            **result.to_dict(),
        }
        if include_transcript:
            report["transcript"] = data.decode("utf-8", "backslashreplace")
        return report


def _argument_errors(name: str, exc: ValidationError) -> str:
    """One line naming each bad argument and why (without pydantic's links)."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        what = err["msg"]
        if err["type"] != "missing":
            got = repr(err.get("input"))
            what += f" (got {got[:60] + '…' if len(got) > 60 else got})"
        parts.append(f"{where}: {what}")
    return f"bad arguments for {name}: " + "; ".join(parts)


class _Server(MCPServer[Any]):
    """``MCPServer`` that refuses arguments a tool does not declare, and whose
    argument errors read as one line per bad argument."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> CallToolResult | InputRequiredResult:
        declared = {t.name: t.input_schema.get("properties", {}) for t in await self.list_tools()}
        if name in declared:
            unknown = sorted(set(arguments) - set(declared[name]))
            if unknown:
                raise ToolError(
                    f"bad arguments for {name}: unknown argument(s) "
                    f"{', '.join(map(repr, unknown))}; {name} takes "
                    f"{', '.join(declared[name])}"
                )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                raise ToolError(_argument_errors(name, cause)) from cause
            raise


def _tool(server: MCPServer[Any]) -> Callable[[_F], _F]:
    """Register a function as a tool, its docstring (on one line) as the description."""

    def register(fn: _F) -> _F:
        server.add_tool(fn, description=" ".join((fn.__doc__ or "").split()))
        return fn

    return register


def build_server(engine: Engine, *, name: str = "ctxwise") -> MCPServer[Any]:
    """An ``MCPServer`` whose tools and resource run on ``engine`` (the module docstring
    lists them). The caller owns ``engine`` and closes it after the server stops."""
    return _build(engine, name)[0]


def _build(engine: Engine, name: str) -> tuple[MCPServer[Any], _Tools]:
    if not isinstance(engine, Engine):
        raise UsageError(f"build_server takes an Engine, got {type(engine).__name__}")
    tools = _Tools(engine)
    server: MCPServer[Any] = _Server(
        name,
        version=__version__,
        instructions=(
            "ctxwise: long-term memory (remember, recall), a session's case facts and "
            "standing rules (facts, rules), policy gates checked before a tool runs "
            "(check_tool), and transcript handoffs and compaction (select_context, compact). "
            f"A session's last window report is the resource {TRACE_URI}."
        ),
    )

    @_tool(server)
    def remember(
        text: Annotated[str, Field(min_length=1, description="What to remember, verbatim.")],
        session: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=200,
                description="Remember it for this session only (default: shared by all).",
            ),
        ] = None,
        metadata: Annotated[
            dict[str, Any] | None,
            Field(description="JSON values kept with the item (date, time, source, …)."),
        ] = None,
    ) -> dict[str, Any]:
        """Store a text in ctxwise's long-term memory; recall finds it by meaning and words."""
        return tools.run(lambda: tools.remember(text, session, metadata))

    @_tool(server)
    def recall(
        query: Annotated[str, Field(min_length=1, description="What to look for.")],
        k: Annotated[int, Field(strict=True, ge=1, le=100, description="Items to return.")] = 5,
        session: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=200,
                description="Search what was remembered for this session (default: shared).",
            ),
        ] = None,
    ) -> dict[str, Any]:
        """The remembered items that best match a query (hybrid lexical and vector
        ranking), best first, with their scores."""
        return tools.run(lambda: tools.recall(query, k, session))

    @_tool(server)
    def facts(session: Session) -> dict[str, Any]:
        """A session's case facts (key, value, where it was said): what stays pinned in
        every window."""
        return tools.run(lambda: tools.facts(session))

    @_tool(server)
    def rules(
        session: Session,
        add: Annotated[
            str | None,
            Field(
                min_length=1,
                description="A standing rule to state in the session ('Never call before "
                "9am', 'Do not refund order 4417 until the address check is done').",
            ),
        ] = None,
    ) -> dict[str, Any]:
        """A session's standing rules (kept verbatim, pinned in every window); with
        'add', state a new one first (recorded as a user message of the session; a new
        session id starts the session)."""
        return tools.run(lambda: tools.rules(session, add))

    @_tool(server)
    def select_context(
        task: Annotated[str, Field(min_length=1, description="What the subagent must do.")],
        budget: Budget = 20_000,
        transcript: Annotated[
            TranscriptPath | None, Field(description="Select from this transcript file…")
        ] = None,
        session: Annotated[
            str | None,
            Field(min_length=1, max_length=200, description="…or from this session's log."),
        ] = None,
    ) -> dict[str, Any]:
        """The parts of a transcript (a file, or a session's whole log) a subagent given
        'task' needs, verbatim and in order, under 'budget' tokens: the prompt and a
        report of what was taken and left out."""
        return tools.run(lambda: tools.select_context(task, budget, transcript, session))

    @_tool(server)
    def compact(
        transcript: TranscriptPath,
        budget: Budget,
        out: Annotated[
            str | None,
            Field(
                min_length=1,
                description="Write the compacted transcript to this new file, in the "
                "input's format (an existing file is refused; default: write nothing).",
            ),
        ] = None,
        index: Annotated[
            int, Field(strict=True, ge=0, description="Which transcript of a multi-file.")
        ] = 0,
        summary_tokens: Annotated[
            int, Field(strict=True, ge=50, description="The summary's token budget.")
        ] = 4000,
        facts: Annotated[
            Literal["prose", "support", "none"],
            Field(
                description="Which case facts to pin: prose (dates and e-mails), support "
                "(orders, amounts, flights, tool output too) or none.",
            ),
        ] = "prose",
        include_transcript: Annotated[
            bool, Field(strict=True, description="Return the compacted file's text too.")
        ] = False,
    ) -> dict[str, Any]:
        """Summarize the older part of a transcript and keep a verbatim tail so the
        whole window fits 'budget' tokens (tool pairs never split; facts and rules
        pinned). Returns the report; writes a file only when 'out' is given."""
        return tools.run(
            lambda: tools.compact(
                transcript, budget, out, index, summary_tokens, facts, include_transcript
            )
        )

    @_tool(server)
    def check_tool(
        session: Session,
        tool: Annotated[str, Field(min_length=1, description="The tool the agent wants to call.")],
        input: Annotated[
            dict[str, Any], Field(description="The tool call's input (a JSON object).")
        ],
    ) -> dict[str, Any]:
        """May this tool call run now? The session's policy gates decide from its case
        facts: allowed, or blocked with the rule that objects (fails closed)."""
        return tools.run(lambda: tools.check_tool(session, tool, input))

    @server.resource(
        TRACE_URI,
        name="session-trace",
        description="A session's window report: the trace of its last turn (what was "
        "included, dropped, truncated, cleared or compacted, and why, with tokens).",
        mime_type="application/json",
    )
    def session_trace(session_id: str) -> str:
        with tools._lock:
            try:
                return tools.trace(session_id)
            except CtxwiseError as exc:
                raise ResourceNotFoundError(str(exc)) from exc
            except Exception as exc:  # pragma: no cover - a store failure
                raise ResourceError(f"cannot read the trace of {session_id!r}") from exc

    return server, tools


def serve(engine: Engine, *, name: str = "ctxwise") -> None:
    """Run the server over stdio until the client closes the connection (the caller
    closes ``engine`` afterwards)."""
    server, tools = _build(engine, name)
    try:
        server.run("stdio")
    finally:
        tools.close()
