"""Memory: stores behind one contract, and long-term recall over them.

``PostgresStore`` lives in :mod:`ctxwise.memory.postgres` (extra ``postgres``) and is
loaded on first use, so importing this package never needs psycopg.
"""

from typing import Any

from ctxwise.memory.facts import (
    CaseFacts,
    Extraction,
    Extractor,
    Fact,
    FactExtractor,
    Rule,
    Rules,
)
from ctxwise.memory.longterm import PRESETS, LongTermMemory, Recalled, RecallMode, RecallSettings
from ctxwise.memory.sqlite import SQLiteStore
from ctxwise.memory.store import (
    InMemoryStore,
    MemoryItem,
    Namespace,
    NamespaceNotFoundError,
    NewItem,
    Store,
    StoreError,
)
from ctxwise.memory.tiered import Pinned, TieredMemory
from ctxwise.memory.urls import StoreURLError, open_store

__all__ = [
    "PRESETS",
    "CaseFacts",
    "Extraction",
    "Extractor",
    "Fact",
    "FactExtractor",
    "InMemoryStore",
    "LongTermMemory",
    "MemoryItem",
    "Namespace",
    "NamespaceNotFoundError",
    "NewItem",
    "Pinned",
    "RecallMode",
    "RecallSettings",
    "Recalled",
    "Rule",
    "Rules",
    "SQLiteStore",
    "Store",
    "StoreError",
    "StoreURLError",
    "TieredMemory",
    "open_store",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":
        from ctxwise.memory.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module 'ctxwise.memory' has no attribute {name!r}")
