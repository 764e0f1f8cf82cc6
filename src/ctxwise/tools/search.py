"""Tool search: what search sees of a tool, the catalog's search index, and the
``tool_search`` tool the model calls.

A tool is searched by its server, name (split at its camelCase boundaries by
:func:`ctxwise.text.split_identifier`), description, and parameter names and
descriptions; :class:`~ctxwise.search.BM25Index` ranks it lexically and, with an
embedder, its embedding by cosine (see :mod:`ctxwise.tools.catalog`).
:func:`search_tool_def` is the ``tool_search`` definition and :func:`run_search`
runs the model's call of it (:meth:`ToolCatalog.search_tool
<ctxwise.tools.catalog.ToolCatalog.search_tool>` and :meth:`ToolCatalog.run_search
<ctxwise.tools.catalog.ToolCatalog.run_search>` are how callers reach them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ctxwise.embeddings import Embedder
from ctxwise.messages import ContentBlock, OpaqueBlock, TextBlock, ToolResultBlock
from ctxwise.search import BM25Index
from ctxwise.text import Analyzer, split_identifier

if TYPE_CHECKING:
    from ctxwise.tools.catalog import ToolCatalog, ToolDef

__all__ = ["DEFAULT_K", "MAX_SEARCH_K", "SearchOutcome", "search_text"]

DEFAULT_K = 5
"""Tools found per query when the caller does not say."""

MAX_SEARCH_K = 20
"""The most tools one ``tool_search`` call may return."""

_SCHEMA_DEPTH = 8


def _schema_words(schema: Any, depth: int = 0) -> list[str]:
    """Parameter names and descriptions, nested ones included, in schema order."""
    if not isinstance(schema, Mapping) or depth > _SCHEMA_DEPTH:
        return []
    out: list[str] = []
    props = schema.get("properties")
    if isinstance(props, Mapping):
        for key, sub in props.items():
            out.append(str(key))
            if isinstance(sub, Mapping) and isinstance(sub.get("description"), str):
                out.append(sub["description"])
            out.extend(_schema_words(sub, depth + 1))
    items = schema.get("items")
    if isinstance(items, Mapping):
        out.extend(_schema_words(items, depth + 1))
    for combo in ("anyOf", "oneOf", "allOf"):
        parts = schema.get(combo)
        if isinstance(parts, list):
            for part in parts:
                out.extend(_schema_words(part, depth + 1))
    return out


def search_text(tool: ToolDef) -> str:
    """What search sees of ``tool``: server, name split into words, description,
    parameter names and descriptions."""
    parts = [tool.server or "", split_identifier(tool.name), tool.description]
    parts.extend(split_identifier(w) for w in _schema_words(tool.input_schema))
    return "\n".join(p for p in parts if p)


@dataclass(slots=True)
class _Index:
    lexical_index: BM25Index
    server_of: np.ndarray
    n_servers: int
    vectors: np.ndarray | None

    @classmethod
    def build(
        cls, tools: Sequence[ToolDef], analyzer: Analyzer, embedder: Embedder | None
    ) -> _Index:
        texts = [search_text(t) for t in tools]
        servers: dict[str, int] = {}
        server_of = np.array(
            [servers.setdefault(t.server or "", len(servers)) for t in tools], dtype=np.int64
        )
        vectors = None
        if embedder is not None and tools:
            vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
        return cls(BM25Index(analyzer, texts), server_of, len(servers), vectors)

    def lexical(self, terms: Sequence[str]) -> np.ndarray:
        return self.lexical_index.scores(terms)


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """A ``tool_search`` call run: the ``tool_result`` to send back, the tools it
    found (``()`` when the call was refused: then ``block.is_error`` is true)."""

    block: ToolResultBlock
    found: tuple[ToolDef, ...]
    query: str


def search_tool_def(name: str) -> dict[str, Any]:
    """The ``tool_search`` tool called ``name`` (Anthropic form)."""
    return {
        "name": name,
        "description": (
            "Search the catalog of tools not loaded yet. Describe the capability you "
            "need in a few words; the best matching tools become callable from your "
            "next step on. Search again with other words if none fits."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "What the tool should do, e.g. 'convert a docx to pdf'.",
                },
                "k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_SEARCH_K,
                    "description": f"How many tools to load (default {DEFAULT_K}).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    }


def run_search(
    catalog: ToolCatalog,
    tool_input: Any,
    tool_use_id: str,
    loaded: Iterable[ToolDef | str],
    provider: Literal["anthropic", "openai"],
) -> SearchOutcome:
    """The model's ``tool_search`` call run on ``catalog`` (what
    :meth:`ToolCatalog.run_search <ctxwise.tools.catalog.ToolCatalog.run_search>`
    says)."""
    query, k, problem = _search_args(tool_input)
    if problem is not None:
        text = f"{catalog.search_name}: {problem}"
        return SearchOutcome(ToolResultBlock(tool_use_id, text, is_error=True), (), query)
    have = [*catalog.always_loaded, *(catalog._member(item) for item in loaded)]
    hits = catalog.search(query, k, exclude=have)
    found = tuple(h.tool for h in hits)
    if not found:
        text = f"No tool matches {query!r}. Try other words for the capability you need."
        return SearchOutcome(ToolResultBlock(tool_use_id, text, is_error=False), (), query)
    names = [catalog.wire_name(t) for t in found]
    head = f"Found {len(found)} tool(s) for {query!r}: {', '.join(names)}. They are callable now."
    if provider == "anthropic":
        blocks: tuple[ContentBlock, ...] = (
            TextBlock(head),
            *(
                OpaqueBlock("tool_reference", {"type": "tool_reference", "tool_name": n})
                for n in names
            ),
        )
        return SearchOutcome(ToolResultBlock(tool_use_id, blocks, is_error=False), found, query)
    lines = [
        head,
        *(f"- {n}: {t.description.strip()[:300]}" for n, t in zip(names, found, strict=True)),
    ]
    return SearchOutcome(
        ToolResultBlock(tool_use_id, "\n".join(lines), is_error=False), found, query
    )


def _search_args(tool_input: Any) -> tuple[str, int, str | None]:
    if not isinstance(tool_input, Mapping):
        return "", DEFAULT_K, "pass an object with a 'query' string (and optionally 'k')"
    extra = sorted(set(tool_input) - {"query", "k"})
    if extra:
        return "", DEFAULT_K, f"unknown argument(s) {', '.join(extra)}; pass only 'query' and 'k'"
    query = tool_input.get("query")
    if not isinstance(query, str) or not query.strip():
        return "", DEFAULT_K, "'query' must be a non-empty string describing the tool you need"
    k = tool_input.get("k")
    if k is None:  # left out, or sent as null (some clients fill every field)
        k = DEFAULT_K
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SEARCH_K:
        return query, DEFAULT_K, f"'k' must be an integer from 1 to {MAX_SEARCH_K}"
    return query, k, None
