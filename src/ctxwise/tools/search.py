"""Tool search: what search sees of a tool, and the catalog's search index.

A tool is searched by its server, name (split at its camelCase boundaries by
:func:`ctxwise.text.split_identifier`), description, and parameter names and
descriptions; :class:`~ctxwise.search.BM25Index` ranks it lexically and, with an
embedder, its embedding by cosine (see :mod:`ctxwise.tools.catalog`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxwise.embeddings import Embedder
from ctxwise.search import BM25Index
from ctxwise.text import Analyzer, split_identifier

if TYPE_CHECKING:
    from ctxwise.tools.catalog import ToolDef

__all__ = ["search_text"]

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
