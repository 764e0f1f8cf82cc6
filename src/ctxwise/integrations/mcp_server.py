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
  compacted file's text when asked; a file is written only to ``out``, a new
  file (a call never replaces one);
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

**Scope.** A server serves one tenant and one namespace in it. The Engine it
wraps should be a tenant's (``ctxwise mcp --tenant`` builds it with
:class:`ctxwise.server.tenants.TenantEngine`, so the only stores it reaches are that
tenant's partition). Every session id a client names is confined to the server's
``namespace``: the Engine stores the client's ``ID`` as ``NAMESPACE/ID``
(:func:`session_key`), an id holding ``/`` is refused, so no tool or resource can
name a session of another namespace, and ``sessions`` (an allow-list of the
client's ids), when given, narrows that further. Nothing lists sessions.

Memory written by ``remember`` lives in the Engine's store under
``(memory.namespace, "notes", NAMESPACE, "session", ID)`` or, without a session,
``(memory.namespace, "notes", NAMESPACE, "shared")``; it is kept apart from the
compacted turns the Engine itself remembers.

**Files.** ``select_context`` and ``compact`` read and write files only inside
``roots`` (:mod:`ctxwise.integrations._confine`): none by default; the client's own
roots (the MCP roots capability), when it offers them, narrow the configured ones
and never widen them. An input is read only when it is a regular file of at most
``max_file_bytes`` whose first bytes look like JSON or JSONL, without following a
symbolic link below its root; ``compact``'s ``out`` is created with ``O_EXCL`` and
``O_NOFOLLOW``, so an existing file or a planted link is refused, never replaced.

A rule given to ``rules`` is recorded in the session as a user message stating
it (the way a rule enters a session: it is in the log, pinned in every window
and, with ``[gates] vocabulary`` in the config, compiled into a gate rule that
``check_tool`` enforces). Text ctxwise does not read as a standing rule is
refused, and nothing is written.

The Engine is used from one thread at a time (a lock around each call).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import Field, ValidationError

from ctxwise.errors import CtxwiseError, FormatError, UnknownFormatError, UsageError
from ctxwise.integrations._framework import require_framework

SUPPORTED = ">=2.3,<3"
"""The ``mcp`` releases this server is written against (the ``mcp`` extra)."""

MCP_VERSION = require_framework("mcp", SUPPORTED, "mcp", "the ctxwise MCP server")

import anyio.to_thread  # noqa: E402  (a dependency of mcp)
from mcp.server import MCPServer  # noqa: E402
from mcp.server.mcpserver import Context, ListRoots, Resolve  # noqa: E402
from mcp.server.mcpserver.exceptions import (  # noqa: E402
    ResourceError,
    ResourceNotFoundError,
    ToolError,
    UnexpectedToolError,
)
from mcp.types import CallToolResult, InputRequiredResult, ListRootsResult  # noqa: E402

from ctxwise import __version__  # noqa: E402
from ctxwise.engine import Engine  # noqa: E402
from ctxwise.integrations._confine import (  # noqa: E402
    MAX_FILE_BYTES,
    Roots,
    check_new,
    create_exclusive,
    file_uri_path,
    read_checked,
)
from ctxwise.memory.facts import Rules  # noqa: E402
from ctxwise.memory.longterm import LongTermMemory  # noqa: E402
from ctxwise.memory.store import Store, namespace_part  # noqa: E402
from ctxwise.messages import Message  # noqa: E402
from ctxwise.sessions import check_session_id  # noqa: E402

if TYPE_CHECKING:
    from ctxwise.formats import TranscriptFile

__all__ = [
    "DEFAULT_NAMESPACE",
    "MAX_FILE_BYTES",
    "MCP_VERSION",
    "SUPPORTED",
    "TOOLS",
    "TRACE_URI",
    "Scope",
    "build_server",
    "check_namespace",
    "serve",
    "session_key",
]

TOOLS = ("remember", "recall", "facts", "rules", "select_context", "compact", "check_tool")
"""The tools the server lists, in order."""

TRACE_URI = "ctxwise://session/{session_id}/trace"
"""The resource template of a session's window report (its last turn's trace)."""

DEFAULT_NAMESPACE = "default"
"""The namespace a server serves unless told another (``ctxwise mcp --namespace``)."""

_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])

Session = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="The session id (within this server's namespace; no '/').",
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
        description="A transcript file on the server's machine, inside the server's roots: "
        "Claude Code JSONL, an Anthropic or OpenAI request or messages list, tau-bench, "
        "LiveMCPBench (detected). Relative paths are relative to the server's working folder.",
    ),
]


def check_namespace(name: object) -> str:
    """``name`` when it is a valid namespace (letters, digits, ``_``, ``.`` and ``-``,
    starting with a letter or digit, at most 64 characters), else a
    :class:`~ctxwise.errors.UsageError` saying what one is."""
    if not isinstance(name, str) or not _NAMESPACE.fullmatch(name):
        raise UsageError(
            f"bad namespace {str(name)[:40]!r}: letters, digits, _, . and -, starting "
            "with a letter or digit, at most 64 characters"
        )
    return name


def session_key(namespace: str, session: str) -> str:
    """The id the Engine stores the client's session ``session`` of ``namespace``
    under: ``NAMESPACE/SESSION``. An agent loop that writes the sessions an MCP
    client reads writes them under this id.

    Raises:
        UsageError: a bad namespace, a bad session id, or one holding ``/`` (a
            client names sessions of its own namespace only).
    """
    check_namespace(namespace)
    check_session_id(session)
    if "/" in session:
        raise UsageError(
            f"bad session id {session[:40]!r}: sessions are confined to this server's "
            f"namespace {namespace!r}; name one without '/'"
        )
    return check_session_id(f"{namespace}/{session}")


_NO_ROOTS = Roots(())


@dataclass(frozen=True, slots=True)
class Scope:
    """What one server lets a client reach: the sessions of ``namespace`` (only the
    client ids in ``sessions`` when that is not ``None``), and files inside ``roots``
    (none by default) of at most ``max_file_bytes``. Build one with :meth:`of`."""

    namespace: str = DEFAULT_NAMESPACE
    sessions: frozenset[str] | None = None
    roots: Roots = _NO_ROOTS
    max_file_bytes: int = MAX_FILE_BYTES

    @classmethod
    def of(
        cls,
        namespace: str = DEFAULT_NAMESPACE,
        *,
        sessions: Iterable[str] | None = None,
        roots: Iterable[str | Path] = (),
        max_file_bytes: int = MAX_FILE_BYTES,
    ) -> Scope:
        """A checked scope; ``roots`` are resolved now (symbolic links followed).

        Raises:
            UsageError: a bad namespace or session id, a root that is not an existing
                folder, or ``max_file_bytes`` under one.
        """
        check_namespace(namespace)
        allowed = None
        if sessions is not None:
            allowed = frozenset(sessions)
            for s in allowed:
                session_key(namespace, s)
        if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int):
            raise UsageError(f"max_file_bytes is a whole number of bytes, got {max_file_bytes!r}")
        if max_file_bytes < 1:
            raise UsageError(f"max_file_bytes must be at least 1, got {max_file_bytes}")
        return cls(namespace, allowed, Roots.of(roots), max_file_bytes)

    def key(self, session: str) -> str:
        """The stored id of the client's ``session``; a UsageError outside the scope."""
        key = session_key(self.namespace, session)
        if self.sessions is not None and session not in self.sessions:
            raise UsageError(
                f"session {session[:40]!r} is outside this server's scope (it serves only "
                "the sessions it was started with, --session)"
            )
        return key


def _client_roots(ctx: Context[Any, Any]) -> ListRoots | None:
    """Ask for the client's roots when it offers the roots capability."""
    caps = ctx.client_capabilities
    if caps is None or caps.roots is None:
        return None
    return ListRoots()


_ClientRoots = Annotated[ListRootsResult | None, Resolve(_client_roots)]
"""The client's roots (``None``: it offers none), filled in by the SDK, not an argument."""


def _root_paths(result: ListRootsResult | None) -> list[str] | None:
    """The client's roots as resolved local folders (``None``: it offers none; a root
    that is not a local ``file://`` URI is left out, so it allows nothing)."""
    if result is None:
        return None
    paths = []
    for root in result.roots:
        local = file_uri_path(str(root.uri))
        if local is not None:
            paths.append(os.path.realpath(local))
    return paths


def _renamed(source: str | None, copy: str, shown: str) -> str | None:
    """``source`` with the private copy's path replaced by the path the client gave."""
    if source is not None and source.startswith(copy):
        return shown + source[len(copy) :]
    return source


class _Tools:
    """The tool bodies over one Engine and scope (each call holds the lock)."""

    def __init__(self, engine: Engine, scope: Scope) -> None:
        self.engine = engine
        self.scope = scope
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
        scope: tuple[str, ...] = ("shared",)
        if session is not None:
            self.scope.key(session)
            scope = ("session", namespace_part(session))
        cfg = self.engine.config
        return LongTermMemory(
            self.store(),
            (cfg.memory.namespace, "notes", self.scope.namespace, *scope),
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
        facts = self.engine.facts(self.scope.key(session))
        return {"session": session, "facts": facts.to_dict()["facts"]}

    def rules(self, session: str, add: str | None) -> dict[str, Any]:
        key = self.scope.key(session)
        added: list[str] = []
        if add is not None:
            found = Rules().capture(add)
            if not found:
                raise UsageError(
                    f"{add[:80]!r} is not a standing rule ctxwise recognizes: state it as "
                    "'always …', 'never …', 'do not …', 'from now on …' (nothing was recorded)"
                )
            self.engine.record(key, [Message.text_message("user", add)])
            added = found
        rules = self.engine.rules(key)
        return {"session": session, "rules": rules.to_dict()["rules"], "added": added}

    def check_tool(self, session: str, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        decision = self.engine.check_tool(self.scope.key(session), tool, tool_input)
        out = {"session": session, **decision.to_dict()}
        if not decision.allowed:
            out["rule_text"] = decision.rule.text
        return out

    def trace(self, session: str) -> str:
        traces = self.engine.traces(self.scope.key(session))
        if not traces:
            raise UsageError(f"session {session!r} has no turn yet: no window report to show")
        return json.dumps(traces[-1].to_dict(), indent=2, ensure_ascii=False)

    # ------------------------------------------------------------ transcripts

    def read(self, path: str, client: Sequence[str] | None) -> TranscriptFile:
        """The transcript file ``path``, read through the confinement (inside the roots,
        capped, sniffed; :func:`~ctxwise.integrations._confine.read_checked`).

        The formats reader takes a path, so the bytes read from the checked
        descriptor are parsed from a private copy (a fresh owner-only folder): what is
        parsed is exactly what was checked, whatever happens to ``path`` meanwhile.
        """
        from ctxwise.formats import read_transcript_file

        cap = self.scope.max_file_bytes
        real, data = read_checked(path, self.scope.roots, client=client, max_bytes=cap)
        with tempfile.TemporaryDirectory(prefix="ctxwise-mcp-") as folder:
            copy = os.path.join(folder, os.path.basename(real))
            with open(copy, "xb") as f:
                f.write(data)
            try:
                file = read_transcript_file(copy, max_bytes=cap)
            except FormatError as exc:
                kind = UnknownFormatError if isinstance(exc, UnknownFormatError) else FormatError
                shown = _renamed(exc.source, copy, path) or path
                raise kind(shown, exc.detail.replace(copy, path), line=exc.line) from None
        items = tuple(
            dataclasses.replace(t, source=_renamed(t.source, copy, path)) for t in file.transcripts
        )
        return dataclasses.replace(file, source=path, transcripts=items)

    def select_context(
        self,
        task: str,
        budget: int,
        transcript: str | None,
        session: str | None,
        client: Sequence[str] | None,
    ) -> dict[str, Any]:
        from ctxwise.handoff.select import select_context

        if (transcript is None) == (session is None):
            raise UsageError("give exactly one of 'transcript' (a file path) and 'session'")
        if session is not None:
            handoff = self.engine.handoff(self.scope.key(session), task, budget)
        else:
            assert transcript is not None
            t = self.read(transcript, client).transcripts[0]
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
        client: Sequence[str] | None,
    ) -> dict[str, Any]:
        from ctxwise.compaction import compact, write_back_compaction
        from ctxwise.memory.facts import FactExtractor
        from ctxwise.summarize import ExtractiveSummarizer

        if out is not None and out.strip() in ("", "-"):
            raise UsageError(
                "out is a file path (standard output carries the MCP protocol; "
                "use include_transcript to get the text back)"
            )
        if out is not None:  # fail before slow work; the exclusive create decides
            check_new(out, self.scope.roots, client=client)
        extractor = None if facts == "none" else FactExtractor.preset(facts)
        file = self.read(transcript, client)
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
            create_exclusive(out, data, self.scope.roots, client=client)
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


def build_server(
    engine: Engine, *, name: str = "ctxwise", scope: Scope | None = None
) -> MCPServer[Any]:
    """An ``MCPServer`` whose tools and resource run on ``engine`` (the module docstring
    lists them), confined to ``scope`` (default ``Scope()``: the namespace
    ``default``, any of its sessions, no files). ``engine`` should be a tenant's
    (:class:`ctxwise.server.tenants.TenantEngine`). The caller owns ``engine`` and
    closes it after the server stops."""
    return _build(engine, name, scope if scope is not None else Scope())[0]


def _build(engine: Engine, name: str, scope: Scope) -> tuple[MCPServer[Any], _Tools]:
    if not isinstance(engine, Engine):
        raise UsageError(f"build_server takes an Engine, got {type(engine).__name__}")
    if not isinstance(scope, Scope):
        raise UsageError(f"scope is a Scope (Scope.of(...)), got {type(scope).__name__}")
    tools = _Tools(engine, scope)
    server: MCPServer[Any] = _Server(
        name,
        version=__version__,
        instructions=(
            "ctxwise: long-term memory (remember, recall), a session's case facts and "
            "standing rules (facts, rules), policy gates checked before a tool runs "
            "(check_tool), and transcript handoffs and compaction (select_context, compact). "
            f"A session's last window report is the resource {TRACE_URI}. Sessions are "
            "this server's namespace's only; files are read and written only inside its roots."
        ),
    )

    async def in_thread(fn: Callable[[], _T]) -> _T:
        return await anyio.to_thread.run_sync(lambda: tools.run(fn))

    @_tool(server)
    def remember(
        text: Annotated[str, Field(min_length=1, description="What to remember, verbatim.")],
        session: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=200,
                description="Remember it for this session only (default: shared by the "
                "namespace's sessions).",
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
    async def select_context(
        task: Annotated[str, Field(min_length=1, description="What the subagent must do.")],
        budget: Budget = 20_000,
        transcript: Annotated[
            TranscriptPath | None, Field(description="Select from this transcript file…")
        ] = None,
        session: Annotated[
            str | None,
            Field(min_length=1, max_length=200, description="…or from this session's log."),
        ] = None,
        *,
        roots: _ClientRoots,
    ) -> dict[str, Any]:
        """The parts of a transcript (a file, or a session's whole log) a subagent given
        'task' needs, verbatim and in order, under 'budget' tokens: the prompt and a
        report of what was taken and left out."""
        client = _root_paths(roots)
        return await in_thread(
            lambda: tools.select_context(task, budget, transcript, session, client)
        )

    @_tool(server)
    async def compact(
        transcript: TranscriptPath,
        budget: Budget,
        out: Annotated[
            str | None,
            Field(
                min_length=1,
                description="Write the compacted transcript to this new file inside the "
                "server's roots, in the input's format (an existing file or link is refused; "
                "default: write nothing).",
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
        *,
        roots: _ClientRoots,
    ) -> dict[str, Any]:
        """Summarize the older part of a transcript and keep a verbatim tail so the
        whole window fits 'budget' tokens (tool pairs never split; facts and rules
        pinned). Returns the report; writes a file only when 'out' is given."""
        client = _root_paths(roots)
        return await in_thread(
            lambda: tools.compact(
                transcript, budget, out, index, summary_tokens, facts, include_transcript, client
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


def serve(engine: Engine, *, name: str = "ctxwise", scope: Scope | None = None) -> None:
    """Run the server over stdio until the client closes the connection (``scope`` as
    :func:`build_server` takes it; the caller closes ``engine`` afterwards)."""
    server, tools = _build(engine, name, scope if scope is not None else Scope())
    try:
        server.run("stdio")
    finally:
        tools.close()
