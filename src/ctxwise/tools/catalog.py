"""A tool catalog with deferred loading and tool search.

Tool definitions cost input tokens on every request, whether the model uses them or
not. A :class:`ToolCatalog` holds every tool an agent could call and sends few of
them: the ones marked *always loaded*, the ones the session has *loaded* (found by a
search the model ran, kept for the rest of the session), the ``k`` best matches for
this turn's query, and a small ``tool_search`` tool for the rest.

**Registering.** Definitions come from an MCP ``tools/list`` result
(:meth:`ToolCatalog.add_mcp`), an Anthropic or OpenAI ``tools`` array
(:meth:`~ToolCatalog.add_anthropic`, :meth:`~ToolCatalog.add_openai`), LiveMCPBench's
catalog rows (:meth:`~ToolCatalog.add_rows`), or a file of any of these
(:meth:`ToolCatalog.load`). Tools are kept apart by server: the same name on two
servers is two tools, and both are *rendered* server-qualified
(``{server}__{name}``, cut to the providers' 64 characters with a hash suffix when
needed); a name that is unique stays as it is, unless it is a search tool's name
(``tool_search``, ``tool_search_tool_bm25``, …) or of a tool the Engine adds
(``fetch_more``, ``memory``), which gets a hash suffix. The same
name twice on one server, or an input schema that is not valid JSON Schema (checked
against the schema's own ``$schema`` draft, 2020-12 when it names none, with the
``jsonschema`` package; in a schema that names none, draft 4's boolean
``exclusiveMinimum`` / ``exclusiveMaximum`` beside a ``minimum`` / ``maximum``, which
older MCP servers still write, is read as draft 4 reads it and kept in the 2020-12
form, ``{"exclusiveMinimum": 0}``), that names a ``$schema`` jsonschema does not know, has a
``$ref`` that resolves to nothing (nothing is fetched: a remote ``$ref`` is one),
nests more than 64 levels, or whose top-level ``type`` is not ``"object"``, raises
:class:`~ctxwise.errors.ToolCatalogError` and adds nothing.

**Search** (:meth:`ToolCatalog.search`) ranks tools for a query over their server,
name (``snake_case``, ``kebab-case`` and ``camelCase`` split into words),
description, and parameter names and descriptions (nested ones included), all
through :mod:`ctxwise.text`'s analyzer:

1. lexical: BM25 (:class:`ctxwise.search.BM25Index`, the stores' formula) over
   the query's terms without stopwords;
2. vector, when the catalog has an embedder: cosine between the query's and each
   tool's embedding;
3. the rankings (``pool`` deep each) are fused by weighted reciprocal rank fusion,
   ``weight / (rrf_k + rank)`` (lexical only when there is no embedder);
4. server affinity: each tool gains ``server_weight`` times the best fused score of
   its server, so the tools of a server a query needs travel together (an agent
   task that needs one tool of a server often needs its siblings). Ties keep
   catalog order;
5. a tool the query names word for word (``get_me``, ``github/get_me``, its wire
   name) comes first, in order of mention.

**Per turn** (:meth:`ToolCatalog.for_turn`): a :class:`ToolTurn` of what to send.
:meth:`ToolCatalog.anthropic_tools` and :meth:`~ToolCatalog.openai_tools` render it:

- ``mode="client"`` (the default; both providers): the always-loaded tools and
  ``tool_search`` first, with Anthropic's cache breakpoint on the last of them
  (``tool_search``), then the session's loaded tools and this turn's found ones
  after the breakpoint. For Anthropic, every other tool follows with
  ``defer_loading: true``: the API keeps such a definition out of the context until
  a ``tool_reference`` block names it, which is what :meth:`ToolCatalog.run_search`
  returns in its ``tool_result`` (the client-side form of Anthropic's tool search).
  For OpenAI, which has no deferred tools in Chat Completions, the search result
  lists the tools found and their definitions join the next request.
- ``mode="server"`` (Anthropic only): Anthropic's own tool search runs on its side
  (``tool_search_tool_bm25_20251119`` or ``tool_search_tool_regex_20251119``); the
  always-loaded tools are sent as they are and every other tool with
  ``defer_loading: true``. The search tool itself is never deferred, so at least one
  tool is not, and no deferred tool carries ``cache_control``.

**Definition tokens** (:meth:`ToolCatalog.tokens`) count each definition's Anthropic
JSON form (name, description, input schema) with the catalog's token counter; a
deferred definition costs nothing until it is loaded, as the providers bill it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ctxwise.embeddings import Embedder
from ctxwise.errors import FormatError, ToolCatalogError, UsageError
from ctxwise.search import reciprocal_rank_fusion
from ctxwise.text import DEFAULT_ANALYZER, Analyzer
from ctxwise.tokens import CharCounter, TokenCounter
from ctxwise.tools._catalog_files import _array, _mcp_tools, _parse_catalog, _wire_form
from ctxwise.tools._schema_check import _check_schema, _check_text
from ctxwise.tools.render import (
    _WIRE,
    SERVER_SEARCH_TOOLS,
    Mode,
    _anthropic_def,
    _qualified,
    _wire,
    anthropic_tools,
    openai_tools,
)
from ctxwise.tools.search import (
    DEFAULT_K,
    MAX_SEARCH_K,
    SearchOutcome,
    _Index,
    run_search,
    search_tool_def,
)

__all__ = [
    "DEFAULT_K",
    "MAX_CATALOG_BYTES",
    "MAX_SEARCH_K",
    "SERVER_SEARCH_TOOLS",
    "TOOL_SEARCH",
    "SearchOutcome",
    "ToolCatalog",
    "ToolDef",
    "ToolHit",
    "ToolTurn",
]

MAX_CATALOG_BYTES = 64 * 2**20
"""The largest catalog file :meth:`ToolCatalog.load` reads by default (64 MiB): a
larger one is refused from its size, before a byte is read. Raise it with
``max_bytes`` (``None``: no limit), on the command line with ``--max-input-bytes``,
in an Engine's config with ``[tools] max_catalog_bytes``.
Every definition is parsed, validated and indexed for search, so a catalog costs
several times its size in memory."""

TOOL_SEARCH = "tool_search"
"""The name of the search tool ctxwise gives the model (client mode)."""

ENGINE_TOOL_NAMES = ("fetch_more", "memory")
"""The tools an :class:`~ctxwise.Engine` sends beside its catalog (the stored
results' ``fetch_more`` and the client-side ``memory`` tool): a catalog tool of
either name gets a hash suffix, as a search tool's name does."""

RRF_K = 10
"""Default ``k`` of reciprocal rank fusion."""

SERVER_WEIGHT = 0.25
"""Default share of its server's best score a tool gains (server affinity)."""

POOL = 100
"""How deep each ranking goes into the fusion."""

_NAME_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]*")
_MAX_NAME = 128


@dataclass(frozen=True, slots=True)
class ToolDef:
    """One tool: its name on its server, what it does, and its JSON Schema input.

    ``server`` is ``None`` for a tool that belongs to no server (one given in
    code). ``annotations`` are MCP's hints (``readOnlyHint``, ``title``, …), kept
    but never sent.
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    server: str | None = None
    annotations: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        """``(server or "", name)``: what tells two tools apart."""
        return (self.server or "", self.name)

    @property
    def label(self) -> str:
        """``server/name`` (or just ``name``), for messages and reports."""
        return f"{self.server}/{self.name}" if self.server else self.name


@dataclass(frozen=True, slots=True)
class ToolHit:
    """A search result: the tool, its fused score, and its rank (1-based) in each
    ranking that found it (``None``: not in that ranking's pool)."""

    tool: ToolDef
    score: float
    lexical_rank: int | None
    vector_rank: int | None


@dataclass(frozen=True, slots=True)
class ToolTurn:
    """What one turn sends: ``always`` (always loaded), ``loaded`` (by the session's
    searches), ``found`` (this turn's best matches that are neither), whether the
    ``tool_search`` tool goes too, and the definition tokens (``tokens``: what is
    sent; ``all_tokens``: every definition in the catalog)."""

    query: str | None
    always: tuple[ToolDef, ...]
    loaded: tuple[ToolDef, ...]
    found: tuple[ToolHit, ...]
    search: bool
    tokens: int
    all_tokens: int

    @property
    def sent(self) -> tuple[ToolDef, ...]:
        """Every tool whose full definition is in this turn's context, in order."""
        return (*self.always, *self.loaded, *(h.tool for h in self.found))


# -- definitions ---------------------------------------------------------------------


def _make(raw: Mapping[str, Any], server: str | None, schema_key: str) -> ToolDef:
    """A :class:`ToolDef` from an MCP or Anthropic shaped definition."""
    if not isinstance(raw, Mapping):
        raise ToolCatalogError("bad_definition", detail="a tool definition must be an object")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > _MAX_NAME:
        raise ToolCatalogError(
            "bad_definition",
            tool=str(name),
            server=server,
            detail=f"a tool needs a name of 1 to {_MAX_NAME} characters",
        )
    if any(c.isspace() or not c.isprintable() for c in name):
        raise ToolCatalogError(
            "bad_definition", tool=name, server=server, detail="a name has no spaces or controls"
        )
    if schema_key not in raw:
        raise ToolCatalogError(
            "bad_definition", tool=name, server=server, detail=f"no {schema_key!r}"
        )
    description = _check_text(raw.get("description"), "the description", name, server)
    annotations = raw.get("annotations")
    return ToolDef(
        name,
        description,
        _check_schema(raw[schema_key], name, server),
        server,
        dict(annotations) if isinstance(annotations, Mapping) else None,
    )


# -- the catalog ---------------------------------------------------------------------


class ToolCatalog:
    """Every tool an agent could call, with deferred loading and tool search (see
    the module docstring).

    ``embedder``: the vector half of the search (``None``, the default: lexical
    only; :func:`ctxwise.embeddings.get_embedder` ``("minilm")`` is the measured
    choice, see the benchmarks page). ``analyzer``: the lexical terms
    (:data:`ctxwise.text.DEFAULT_ANALYZER`). ``counter``: definition tokens
    (:class:`~ctxwise.tokens.CharCounter` by default). ``weights`` (lexical,
    vector), ``rrf_k``, ``server_weight`` and ``pool``: the fusion.
    ``search_name``: the name of the search tool (``tool_search``).
    """

    def __init__(
        self,
        tools: Iterable[ToolDef] = (),
        *,
        embedder: Embedder | None = None,
        analyzer: Analyzer | None = None,
        counter: TokenCounter | None = None,
        weights: tuple[float, float] = (1.0, 1.0),
        rrf_k: int = RRF_K,
        server_weight: float = SERVER_WEIGHT,
        pool: int = POOL,
        search_name: str = TOOL_SEARCH,
    ) -> None:
        if (
            not isinstance(weights, tuple)
            or len(weights) != 2
            or not all(isinstance(w, int | float) and w >= 0 for w in weights)
        ):
            raise UsageError(f"weights are (lexical, vector), two numbers >= 0; got {weights!r}")
        for name, value in (("rrf_k", rrf_k), ("pool", pool)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(server_weight, int | float) or server_weight < 0:
            raise UsageError(f"server_weight must be a number >= 0, got {server_weight!r}")
        if not isinstance(search_name, str) or not _WIRE.match(search_name):
            raise UsageError(f"search_name must match ^[A-Za-z0-9_-]{{1,64}}$, got {search_name!r}")
        self.embedder = embedder
        self.analyzer = analyzer if analyzer is not None else DEFAULT_ANALYZER
        self.counter: TokenCounter = counter if counter is not None else CharCounter()
        self.weights = (float(weights[0]), float(weights[1]))
        self.rrf_k = rrf_k
        self.server_weight = float(server_weight)
        self.pool = pool
        self.search_name = search_name
        self._tools: list[ToolDef] = []
        self._index: dict[tuple[str, str], int] = {}
        self._always: set[tuple[str, str]] = set()
        self._built: _Index | None = None
        self._names: dict[tuple[str, str], str] | None = None
        self._by_wire: dict[str, tuple[str, str]] | None = None
        self._name_index: dict[str, list[int]] | None = None
        self._tokens: dict[tuple[str, str], int] = {}
        self.skipped: list[ToolCatalogError] = []
        """Definitions :meth:`load` left out with ``skip_invalid=True``, and why."""
        self.add(tools)

    # -- registering -------------------------------------------------------------

    def add(self, tools: ToolDef | Iterable[ToolDef], *, always_loaded: bool = False) -> None:
        """Add ``tools``; all or nothing (a duplicate leaves the catalog unchanged).

        Raises:
            ToolCatalogError: a tool's (server, name) is in the catalog or twice in
                ``tools`` (``reason="duplicate"``).
        """
        batch = [tools] if isinstance(tools, ToolDef) else list(tools)
        seen: set[tuple[str, str]] = set()
        for tool in batch:
            if not isinstance(tool, ToolDef):
                raise UsageError(f"expected ToolDef, got {type(tool).__name__}")
            if tool.key in self._index or tool.key in seen:
                raise ToolCatalogError(
                    "duplicate",
                    tool=tool.name,
                    server=tool.server,
                    detail="a server cannot have two tools of one name",
                )
            seen.add(tool.key)
        for tool in batch:
            self._index[tool.key] = len(self._tools)
            self._tools.append(tool)
            if always_loaded:
                self._always.add(tool.key)
        if batch:
            self._built = None
            self._names = None
            self._by_wire = None
            self._name_index = None
            self._tokens.clear()  # a new name elsewhere can qualify an old tool's wire name

    def add_mcp(
        self,
        listing: Mapping[str, Any] | Sequence[Any],
        *,
        server: str,
        always_loaded: bool = False,
    ) -> list[ToolDef]:
        """Add the tools of an MCP ``tools/list`` result (``{"tools": [...]}``, or the
        JSON-RPC response around it, or the ``tools`` array itself), as JSON or as
        the MCP SDK's models (what ``ClientSession.list_tools()`` returns)."""
        tools = [_wire_form(t) for t in _mcp_tools(listing, server)]
        defs = [_make(t, server, "inputSchema") for t in tools]
        self.add(defs, always_loaded=always_loaded)
        return defs

    def add_anthropic(
        self, tools: Sequence[Any], *, server: str | None = None, always_loaded: bool = False
    ) -> list[ToolDef]:
        """Add an Anthropic ``tools`` array (``name``, ``description``, ``input_schema``).
        Server tools (``web_search_…``, ``tool_search_tool_…``: a ``type`` other than
        ``custom``) have no schema to catalogue and are refused."""
        defs = [_anthropic_row(raw, server) for raw in _array(tools, "an Anthropic tools array")]
        self.add(defs, always_loaded=always_loaded)
        return defs

    def add_openai(
        self, tools: Sequence[Any], *, server: str | None = None, always_loaded: bool = False
    ) -> list[ToolDef]:
        """Add an OpenAI ``tools`` array: Chat Completions (``{"type": "function",
        "function": {...}}``) or Responses (``{"type": "function", "name": ...}``)."""
        defs = [_openai_row(raw, server) for raw in _array(tools, "an OpenAI tools array")]
        self.add(defs, always_loaded=always_loaded)
        return defs

    def add_rows(
        self, rows: Iterable[Mapping[str, Any]], *, always_loaded: bool = False
    ) -> list[ToolDef]:
        """Add catalog rows as in LiveMCPBench's JSONL: ``server``, ``name``,
        ``description``, ``inputSchema`` (other keys are ignored)."""
        defs = []
        for raw in rows:
            if not isinstance(raw, Mapping) or not isinstance(raw.get("server"), str):
                raise ToolCatalogError("bad_definition", detail="a catalog row needs a 'server'")
            defs.append(_make(raw, raw["server"], "inputSchema"))
        self.add(defs, always_loaded=always_loaded)
        return defs

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        server: str | None = None,
        skip_invalid: bool = False,
        always_loaded: Iterable[str] = (),
        max_bytes: int | None = MAX_CATALOG_BYTES,
        **options: Any,
    ) -> ToolCatalog:
        """A catalog from a file: a LiveMCPBench JSONL (one row a line), an MCP
        ``tools/list`` JSON, or an Anthropic or OpenAI tools array (detected from
        the content). ``server`` names the server of the definitions: an MCP listing
        defaults to its own ``server`` / ``server_info.name``, then the file name
        up to its first dot; a tools array has no server unless given; JSONL rows
        name their own. ``skip_invalid``: leave out definitions that do not validate
        (listed in :attr:`skipped`) instead of refusing the file. ``always_loaded``:
        names (``name`` or ``server/name``) to mark. ``max_bytes``: the largest file
        read (``None``: any size). ``options`` go to the constructor.

        Raises:
            FormatError: the file cannot be read, is over ``max_bytes`` (refused
                before it is read), is not JSON, or is none of these.
            ToolCatalogError: a definition does not validate (without
                ``skip_invalid``), or a name in ``always_loaded`` is unknown.
        """
        from ctxwise._io import read_text_file

        source = str(path)
        text = read_text_file(
            source,
            "a tool catalog",
            FormatError,
            max_bytes=max_bytes,
            raise_with="--max-input-bytes (max_bytes in Python, tools.max_catalog_bytes "
            "in a config)",
        )
        catalog = cls(**options)
        rows, kind, default_server = _parse_catalog(text, source)
        srv = server if server is not None else (default_server or Path(source).name.split(".")[0])
        defs: list[ToolDef] = []
        for raw in rows:
            try:
                if kind == "rows":
                    if not isinstance(raw, Mapping) or not isinstance(raw.get("server"), str):
                        raise ToolCatalogError("bad_definition", detail="a row needs a 'server'")
                    defs.append(_make(raw, raw["server"], "inputSchema"))
                elif kind == "mcp":
                    defs.append(_make(raw, srv, "inputSchema"))
                elif kind == "anthropic":
                    defs.append(_anthropic_row(raw, server))
                else:
                    defs.append(_openai_row(raw, server))
            except ToolCatalogError as e:
                if not skip_invalid or e.reason == "duplicate":
                    raise
                catalog.skipped.append(e)
        catalog.add(defs)
        catalog.set_always_loaded(always_loaded)
        return catalog

    def set_always_loaded(self, names: Iterable[str]) -> None:
        """Mark tools always loaded by ``name`` (unique in the catalog) or
        ``server/name``; the rest stay as they were.

        Raises:
            ToolCatalogError: a name matches no tool, or several (``reason``
                ``"unknown_tool"`` / ``"ambiguous"``).
        """
        keys = [self.find(n).key for n in names]
        self._always.update(keys)

    def find(self, name: str) -> ToolDef:
        """The tool called ``name`` (unique in the catalog), ``server/name``, or its
        rendered (wire) name.

        Raises:
            ToolCatalogError: no tool, or several, match (``"unknown_tool"``,
                ``"ambiguous"``).
        """
        if not isinstance(name, str):
            raise ToolCatalogError("unknown_tool", tool=str(name), detail="a name is a string")
        self._wire_names()
        assert self._by_wire is not None
        key = self._by_wire.get(name)
        if key is not None:
            return self._tools[self._index[key]]
        plain = [t for t in self._tools if t.name == name]
        if len(plain) == 1:
            return plain[0]
        if len(plain) > 1:
            servers = ", ".join(str(t.server) for t in plain)
            raise ToolCatalogError(
                "ambiguous", tool=name, detail=f"on servers {servers}; say server/name"
            )
        server, sep, rest = name.rpartition("/")
        if sep and (server, rest) in self._index:
            return self._tools[self._index[(server, rest)]]
        raise ToolCatalogError("unknown_tool", tool=name, detail="not in the catalog")

    def get(self, key: tuple[str, str]) -> ToolDef | None:
        """The tool whose :attr:`ToolDef.key` is ``key``, or ``None``."""
        i = self._index.get(tuple(key))  # type: ignore[arg-type]
        return None if i is None else self._tools[i]

    def _member(self, item: ToolDef | str) -> ToolDef:
        if isinstance(item, ToolDef):
            if item.key not in self._index:
                raise ToolCatalogError(
                    "unknown_tool", tool=item.name, server=item.server, detail="not in the catalog"
                )
            return item
        return self.find(item)

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[ToolDef]:
        return iter(self._tools)

    def is_always_loaded(self, tool: ToolDef) -> bool:
        return tool.key in self._always

    @property
    def always_loaded(self) -> tuple[ToolDef, ...]:
        """The always-loaded tools, in catalog order."""
        return tuple(t for t in self._tools if t.key in self._always)

    # -- names and tokens ----------------------------------------------------------

    def _wire_names(self) -> dict[tuple[str, str], str]:
        if self._names is None:
            counts: dict[str, int] = {}
            for t in self._tools:
                counts[t.name] = counts.get(t.name, 0) + 1
            names: dict[tuple[str, str], str] = {}
            # the search tools' names too, and the tools the Engine adds beside a
            # catalog: the API refuses two tools of one name
            taken: set[str] = {
                self.search_name,
                *(t["name"] for t in SERVER_SEARCH_TOOLS.values()),
                *ENGINE_TOOL_NAMES,
            }
            for t in self._tools:
                if counts[t.name] > 1 and t.server:
                    wire = _qualified(t.server, t.name)
                else:
                    wire = _wire(t.name)
                if wire in taken:  # a clash after cleaning: make it unique, stably
                    digest = hashlib.sha256(f"{t.server}\n{t.name}".encode()).hexdigest()[:8]
                    wire = f"{wire[:55]}_{digest}"
                taken.add(wire)
                names[t.key] = wire
            self._names = names
            self._by_wire = {wire: key for key, wire in names.items()}
        return self._names

    def _named_in(self, query: str) -> list[int]:
        """The tools ``query`` names word for word (a tool's name, ``server/name`` or
        wire name, as one token), in order of first mention."""
        if self._name_index is None:
            by_name: dict[str, list[int]] = {}
            for key, wire in self._wire_names().items():
                i = self._index[key]
                tool = self._tools[i]
                for form in {tool.name, wire, f"{tool.server}/{tool.name}" if tool.server else ""}:
                    if form:
                        by_name.setdefault(form.casefold(), []).append(i)
            self._name_index = by_name
        out: list[int] = []
        for token in _NAME_TOKEN.findall(query):
            for i in self._name_index.get(token.strip(".-/").casefold(), ()):
                if i not in out:
                    out.append(i)
        return out

    def wire_name(self, tool: ToolDef) -> str:
        """The name ``tool`` is sent (and called) by: its own name, server-qualified
        when another server has a tool of the same name."""
        return self._wire_names()[tool.key]

    def tokens(self, tool: ToolDef | None = None) -> int:
        """Definition tokens of ``tool`` (``None``: of the ``tool_search`` tool)."""
        if tool is None:
            return self.counter.count(json.dumps(self.search_tool(), ensure_ascii=False))
        cached = self._tokens.get(tool.key)
        if cached is None:
            body = _anthropic_def(tool, self.wire_name(tool))
            cached = self.counter.count(json.dumps(body, ensure_ascii=False))
            self._tokens[tool.key] = cached
        return cached

    def all_tokens(self) -> int:
        """Definition tokens of every tool in the catalog, sent as they are."""
        return sum(self.tokens(t) for t in self._tools)

    # -- search --------------------------------------------------------------------

    def _index_built(self) -> _Index:
        if self._built is None:
            self._built = _Index.build(self._tools, self.analyzer, self.embedder)
        return self._built

    def build_index(self) -> None:
        """Build the search index now (embedding every tool when the catalog has an
        embedder); otherwise the first :meth:`search` builds it."""
        self._index_built()

    def search(
        self, query: str, k: int = DEFAULT_K, *, exclude: Iterable[ToolDef] = ()
    ) -> list[ToolHit]:
        """The ``k`` best tools for ``query``, best first (see the module docstring),
        leaving out ``exclude``. A query with no words finds nothing."""
        if not isinstance(query, str):
            raise UsageError(f"query must be a string, got {type(query).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise UsageError(f"k must be an integer >= 0, got {k!r}")
        skip = {t.key for t in exclude}
        if k == 0 or not self._tools:
            return []
        idx = self._index_built()
        terms = self.analyzer.query_terms(query)
        lexical = idx.lexical(terms)
        lex_order = [int(i) for i in np.argsort(-lexical, kind="stable") if lexical[i] > 0]
        vec_order: list[int] = []
        if self.embedder is not None and idx.vectors is not None and terms:
            qv = self.embedder.embed([query])[0]
            sims = idx.vectors @ qv
            vec_order = [int(i) for i in np.argsort(-sims, kind="stable")]
        scores, (lex_rank, vec_rank) = reciprocal_rank_fusion(
            [lex_order, vec_order], self.weights, self.rrf_k, self.pool
        )
        fused = np.zeros(len(self._tools))
        for i, score in scores.items():
            fused[i] = score
        if self.server_weight:
            best = np.zeros(idx.n_servers)
            np.maximum.at(best, idx.server_of, fused)
            fused = fused + self.server_weight * best[idx.server_of] * (fused > 0)
        named = self._named_in(query)
        if named:  # a tool the query names word for word comes first, in order of mention
            top = float(fused.max()) + 1.0
            for j, i in enumerate(named):
                fused[i] = top + (len(named) - j)
        hits: list[ToolHit] = []
        for i in np.argsort(-fused, kind="stable"):
            if fused[i] <= 0 or len(hits) == k:
                break
            tool = self._tools[int(i)]
            if tool.key in skip:
                continue
            hits.append(ToolHit(tool, float(fused[i]), lex_rank.get(int(i)), vec_rank.get(int(i))))
        return hits

    # -- one turn ------------------------------------------------------------------

    def for_turn(
        self,
        query: str | None,
        k: int = DEFAULT_K,
        *,
        loaded: Iterable[ToolDef | str] = (),
        search: bool = True,
    ) -> ToolTurn:
        """What to send this turn: the always-loaded tools, the session's ``loaded``
        ones (tools or names, in load order), the ``k`` best matches for ``query``
        among the rest (none when ``query`` is ``None``), and the ``tool_search``
        tool unless ``search`` is false or nothing is left to find."""
        always = self.always_loaded
        seen = {t.key for t in always}
        kept: list[ToolDef] = []
        for item in loaded:
            tool = self._member(item)
            if tool.key not in seen:
                seen.add(tool.key)
                kept.append(tool)
        exclude = [self._tools[self._index[key]] for key in seen if key in self._index]
        found = tuple(self.search(query, k, exclude=exclude)) if query else ()
        rest = len(self._tools) - len(seen) - len(found)
        with_search = search and rest > 0
        tokens = sum(self.tokens(t) for t in (*always, *kept, *(h.tool for h in found)))
        if with_search:
            tokens += self.tokens(None)
        return ToolTurn(query, always, tuple(kept), found, with_search, tokens, self.all_tokens())

    def search_tool(self) -> dict[str, Any]:
        """The ``tool_search`` tool (Anthropic form; :meth:`openai_tools` converts it)."""
        return search_tool_def(self.search_name)

    def run_search(
        self,
        tool_input: Any,
        *,
        tool_use_id: str,
        loaded: Iterable[ToolDef | str] = (),
        provider: Literal["anthropic", "openai"] = "anthropic",
    ) -> SearchOutcome:
        """Run the model's ``tool_search`` call. The result leaves out the tools the
        turn already has (always-loaded and ``loaded``). For Anthropic its content is
        one ``tool_reference`` block per tool found (after a line saying what was
        found); for OpenAI it is that text with each tool's name and description,
        and the caller adds the found definitions to the next request. A call with
        a missing, empty or extra argument gets an ``is_error`` result saying what
        to send instead; nothing is loaded."""
        return run_search(self, tool_input, tool_use_id, loaded, provider)

    # -- rendering -----------------------------------------------------------------

    def _check_turn(self, turn: ToolTurn) -> None:
        if not isinstance(turn, ToolTurn):
            raise UsageError(f"expected a ToolTurn from for_turn, got {type(turn).__name__}")
        for tool in turn.sent:
            if self.get(tool.key) is None:
                raise ToolCatalogError(
                    "unknown_tool",
                    tool=tool.name,
                    server=tool.server,
                    detail="the turn was made by another catalog; call for_turn on this one",
                )

    def anthropic_tools(
        self,
        turn: ToolTurn,
        *,
        mode: Mode = "client",
        server_search: Literal["bm25", "regex"] = "bm25",
        cache_ttl: Literal["5m", "1h"] | None = None,
    ) -> list[dict[str, Any]]:
        """The Messages API ``tools`` array for ``turn`` (see the module docstring).

        Raises:
            ToolCatalogError: ``turn`` names a tool this catalog does not hold (a turn
                of another catalog, or of this one before it was rebuilt).
            UsageError: ``mode``, ``server_search`` or ``cache_ttl`` is none of its values.
        """
        return anthropic_tools(self, turn, mode, server_search, cache_ttl)

    def openai_tools(self, turn: ToolTurn) -> list[dict[str, Any]]:
        """The Chat Completions ``tools`` array for ``turn``: what it sends, the
        search tool with the always-loaded ones first (a stable prefix).

        Raises:
            ToolCatalogError: ``turn`` names a tool this catalog does not hold.
        """
        return openai_tools(self, turn)


# -- reading files -------------------------------------------------------------------


def _anthropic_row(raw: Any, server: str | None) -> ToolDef:
    kind = raw.get("type") if isinstance(raw, Mapping) else None
    if kind not in (None, "custom"):
        raise ToolCatalogError(
            "bad_definition",
            tool=str(raw.get("name")),
            server=server,
            detail=f"{kind!r} is a server tool: send it yourself, it is not catalogued",
        )
    return _make(raw, server, "input_schema")


def _openai_row(raw: Any, server: str | None) -> ToolDef:
    if not isinstance(raw, Mapping) or raw.get("type") != "function":
        raise ToolCatalogError(
            "bad_definition",
            tool=str(raw.get("name") if isinstance(raw, Mapping) else raw),
            server=server,
            detail='only {"type": "function"} tools can be catalogued',
        )
    fn = raw.get("function", raw)
    if not isinstance(fn, Mapping):
        raise ToolCatalogError("bad_definition", server=server, detail="bad function")
    body = dict(fn)
    if body.get("parameters") is None:  # left out, or null (the Responses API allows it)
        body["parameters"] = {"type": "object", "properties": {}}
    return _make(body, server, "parameters")
