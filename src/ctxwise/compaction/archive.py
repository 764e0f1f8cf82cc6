"""Archiving a transcript before it is compacted: one store item per message."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from ctxwise.compaction.errors import CompactionArchiveError
from ctxwise.compaction.result import dropped_media
from ctxwise.memory.store import MAX_TEXT_CHARS, NewItem, Store
from ctxwise.messages import ToolResultBlock, ToolUseBlock, Transcript
from ctxwise.summarize import render_turns

__all__ = ["archive"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def _archive_items(t: Transcript, archive_id: str) -> list[NewItem]:
    items: list[NewItem] = []
    names: dict[str, str] = {}
    for i, m in enumerate(t.messages):
        uses = [b for b in m.content if isinstance(b, ToolUseBlock)]
        for b in uses:
            names[b.id] = b.name
        result_ids = [b.tool_use_id for b in m.content if isinstance(b, ToolResultBlock)]
        text = _SURROGATE.sub("\ufffd", render_turns([m]))
        if not text.strip():
            text = f"({m.role} message without text)"
        chunks = [text[k : k + MAX_TEXT_CHARS] for k in range(0, len(text), MAX_TEXT_CHARS)]
        chunks = [c for c in chunks if c.strip()]
        media = [d.to_dict() for d in dropped_media(t.messages, i, i + 1)]
        for part, chunk in enumerate(chunks):
            meta: dict[str, Any] = {
                "archive_id": archive_id,
                "message_index": i,
                "part": part,
                "parts": len(chunks),
                "role": m.role,
                "kind": m.kind,
                "message_id": m.id,
                "timestamp": m.timestamp,
                "source": t.source,
                "format": t.format,
                "tool_use_ids": [b.id for b in uses] + result_ids,
                "tools": sorted({b.name for b in uses} | {names.get(r, "?") for r in result_ids}),
                "media": media,
            }
            item_id = f"{archive_id}:{i}" + (f".{part}" if part else "")
            items.append(NewItem(chunk, meta, id=item_id))
    return items


def _archive_id(items: Sequence[NewItem], t: Transcript) -> str:
    h = hashlib.sha256()
    h.update(f"{t.source}\x00{t.format}\x00{len(t.messages)}\x00".encode())
    for item in items:
        h.update(f"{item.metadata['role']}\x00{item.metadata['kind']}\x00".encode())
        h.update(item.text.encode("utf-8"))
        h.update(b"\x01")
    return "compaction-" + h.hexdigest()[:20]


def archive(store: Store, namespace: Sequence[str], t: Transcript) -> str:
    draft = _archive_items(t, "")
    archive_id = _archive_id(draft, t)
    items = [
        NewItem(
            it.text,
            {**it.metadata, "archive_id": archive_id},
            id=archive_id + (it.id or ""),
        )
        for it in draft
    ]
    try:
        store.put_many(namespace, items)
    except Exception as exc:
        raise CompactionArchiveError(namespace, f"{type(exc).__name__}: {exc}") from exc
    return archive_id
