"""Memory: stores behind one contract, and long-term recall over them."""

from ctxwise.memory.longterm import LongTermMemory, Recalled, RecallMode
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

__all__ = [
    "InMemoryStore",
    "LongTermMemory",
    "MemoryItem",
    "Namespace",
    "NamespaceNotFoundError",
    "NewItem",
    "Pinned",
    "RecallMode",
    "Recalled",
    "SQLiteStore",
    "Store",
    "StoreError",
    "TieredMemory",
]
