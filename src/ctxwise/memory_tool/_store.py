"""Memory files as items of a ctxwise memory store, with an index item
(:class:`StoreMemory`)."""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ctxwise.errors import StoreError, UsageError
from ctxwise.memory.store import MAX_KEY_BYTES, MemoryItem, NewItem, Store, check_namespace
from ctxwise.memory_tool._backend import Entry, MemoryBackend
from ctxwise.memory_tool._paths import ROOT, Kind, Parts, addressable, show

__all__ = ["StoreMemory"]

_INDEX_VERSION = 1
_LOCK_TRIES = 100
_LOCK_PAUSE = 0.01
# Threads of this process take one of these (by the lock name's hash) before the
# store's lock, so they queue for it instead of being refused by it.
_STRIPES = tuple(threading.RLock() for _ in range(64))


def _index_files(metadata: Mapping[str, Any]) -> dict[str, int] | None:
    """The files an index item lists (relative path: size in UTF-8 bytes), or
    ``None`` when it is not an index this version reads."""
    version = metadata.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > _INDEX_VERSION:
        raise StoreError(
            f"the memory tool index is version {version}, written by a newer ctxwise; this "
            f"one reads version {_INDEX_VERSION}"
        )
    files = metadata.get("files")
    if version != _INDEX_VERSION or not isinstance(files, dict):
        return None
    if not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in files.items()
    ):
        return None
    return dict(files)  # a copy: a store may hand out what it holds


class StoreMemory(MemoryBackend):
    """Memory files as items of a ctxwise :class:`~ctxwise.memory.Store`, one per
    file, in ``namespace`` (use one namespace per tenant and session).

    An item's id and text are the file's path (``/memories/notes.md``); its
    metadata holds the content under ``"content"``. One more item, ``/memories``
    (the root folder's path, which no file has), is the index: the path and size
    of every file (metadata ``{"memory_tool": "/memories", "version": 1, "files":
    {"notes.md": 12, ...}}``). A command reads the index and the files it names,
    never the others, so its cost does not grow with what the other files hold (the
    index itself grows with their number and the length of their paths).
    Folders exist while a file is in them. A namespace written before the index
    existed is indexed once, from its items, on first use; after that a file item
    put into the store directly, not through the tool, is not seen.

    A command that changes files holds the store's lock
    (:meth:`~ctxwise.memory.Store.exclusive`) ``ctxwise.memory_tool:<namespace>`` (its
    parts joined by ``/``)
    while it reads the index and stores the change, so two writers never lose one
    another's change to the index; threads of this process wait their turn, and a
    command that cannot get the lock from another process within about a second is
    refused (nothing changed). A new or changed file is stored in one
    ``put_many`` with the index; a deleted or moved file leaves the index first,
    so a failure in between leaves an item no path shows, never a path to nothing.
    """

    def __init__(self, store: Store, namespace: Sequence[str]) -> None:
        if not isinstance(store, Store):
            raise UsageError(f"store must be a ctxwise memory Store, got {type(store).__name__}")
        self.store = store
        self.namespace = check_namespace(namespace)
        self._lock_name = "ctxwise.memory_tool:" + "/".join(self.namespace)

    # -- the index -----------------------------------------------------------------

    def _indexed(self) -> dict[str, int] | None:
        """The index's files; ``{}`` for an empty namespace; ``None`` when the
        namespace has items but no index this version reads."""
        item = self.store.get(self.namespace, ROOT)
        if item is not None:
            return _index_files(item.metadata)
        return {} if self.store.count(self.namespace) == 0 else None

    def _scan(self) -> dict[str, int]:
        """Every file, from every item of the namespace (for one without an index)."""
        n = self.store.count(self.namespace)
        files: dict[str, int] = {}
        for item in self.store.recent(self.namespace, n) if n else []:
            rel = item.id[len(ROOT) + 1 :]
            if item.id.startswith(ROOT + "/") and all(addressable(x) for x in rel.split("/")):
                files[rel] = len(str(item.metadata.get("content", "")).encode("utf-8"))
        return files

    def _index_item(self, files: Mapping[str, int]) -> NewItem:
        metadata = {"memory_tool": ROOT, "version": _INDEX_VERSION, "files": dict(files)}
        return NewItem(text=ROOT, id=ROOT, metadata=metadata)

    def _files(self) -> dict[str, int]:
        """The files, for a command that changes nothing."""
        files = self._indexed()
        if files is not None:
            return files
        try:
            with self._locked(tries=1):
                return self._files_locked()
        except UsageError:  # another writer holds the lock: read without saving
            return self._scan()

    def _files_locked(self) -> dict[str, int]:
        """The files, under the lock: an index missing or unreadable is made from
        the items and saved."""
        files = self._indexed()
        if files is None:
            files = self._scan()
            self.store.put(self.namespace, self._index_item(files))
        return files

    @contextlib.contextmanager
    def _locked(self, tries: int = _LOCK_TRIES) -> Iterator[None]:
        busy = UsageError(
            "Error: another program is changing these memory files right now; nothing was "
            "changed. Try the command again."
        )
        digest = hashlib.sha256(self._lock_name.encode("utf-8")).digest()
        with _STRIPES[int.from_bytes(digest[:4], "big") % len(_STRIPES)]:
            for attempt in range(tries):
                with contextlib.ExitStack() as stack:
                    try:
                        stack.enter_context(
                            self.store.exclusive(self._lock_name, busy=lambda: busy)
                        )
                    except UsageError as exc:
                        if exc is not busy:
                            raise
                        if attempt + 1 < tries:
                            time.sleep(_LOCK_PAUSE)
                        continue
                    yield
                    return
        raise busy

    # -- reading -------------------------------------------------------------------

    @staticmethod
    def _key(parts: Parts) -> str:
        return "/".join(parts)

    @staticmethod
    def _below(files: Mapping[str, int], parts: Parts) -> list[str]:
        prefix = "/".join(parts) + "/" if parts else ""
        return [k for k in files if k.startswith(prefix)]

    def kind(self, parts: Parts) -> Kind:
        if not parts:
            return "dir"
        files = self._files()
        if self._key(parts) in files:
            return "file"
        return "dir" if self._below(files, parts) else None

    def read(self, parts: Parts, limit: int) -> str:
        item = self.store.get(self.namespace, show(parts))
        if item is None:
            raise UsageError(f"Error: the path {show(parts)} does not exist.")
        text = str(item.metadata.get("content", ""))
        size = len(text.encode("utf-8"))
        if size > limit:
            raise UsageError(
                f"Error: {show(parts)} is over the {limit:,}-byte limit for a memory file and "
                f"cannot be read; delete it or ask the user to shorten it."
            )
        return text

    def names(self, parts: Parts) -> list[str]:
        k = len(parts)
        return sorted({tuple(p.split("/"))[k] for p in self._below(self._files(), parts)})

    def listing(self, parts: Parts, depth: int) -> list[Entry]:
        k = len(parts)
        sizes: dict[Parts, int] = {}
        dirs: set[Parts] = set()
        files = self._files()
        for key in self._below(files, parts):
            rel = tuple(key.split("/"))[k:]
            size = files[key]
            for i in range(1, len(rel)):
                if len(rel[:i]) <= depth:
                    dirs.add(rel[:i])
                    sizes[rel[:i]] = sizes.get(rel[:i], 0) + size
            if len(rel) <= depth:
                sizes[rel] = size
        found = [Entry(rel, rel in dirs, size) for rel, size in sizes.items()]
        return sorted(found, key=lambda e: e.parts)

    # -- changing ------------------------------------------------------------------

    def _check_parents(self, files: Mapping[str, int], parts: Parts) -> None:
        for i in range(1, len(parts)):
            if self._key(parts[:i]) in files:
                raise UsageError(
                    f"Error: {show(parts[:i])} is a file, so {show(parts)} cannot be under it."
                )

    def _item(self, parts: Parts, text: str) -> NewItem:
        path = show(parts)
        size = len(path.encode("utf-8"))
        if size > MAX_KEY_BYTES:
            raise UsageError(
                f"Error: the path {show(parts)} is {size:,} bytes long in UTF-8, over the "
                f"{MAX_KEY_BYTES:,} bytes a store keys a file by; use shorter names."
            )
        return NewItem(text=path, id=path, metadata={"content": text, "memory_tool": ROOT})

    def write(self, parts: Parts, text: str) -> None:
        with self._locked():
            files = self._files_locked()
            self._check_parents(files, parts)
            if self._below(files, parts):
                raise UsageError(f"Error: {show(parts)} is a folder, not a file.")
            files[self._key(parts)] = len(text.encode("utf-8"))
            self.store.put_many(self.namespace, [self._item(parts, text), self._index_item(files)])

    def remove(self, parts: Parts) -> None:
        with self._locked():
            files = self._files_locked()
            key = self._key(parts)
            gone = [key] if key in files else self._below(files, parts)
            if not gone:
                raise UsageError(f"Error: the path {show(parts)} does not exist.")
            for k in gone:
                del files[k]
            self.store.put(self.namespace, self._index_item(files))
            self.store.delete(self.namespace, [f"{ROOT}/{k}" for k in gone])

    def move(self, old: Parts, new: Parts) -> None:
        with self._locked():
            files = self._files_locked()
            self._check_parents(files, new)
            if self._key(new) in files or self._below(files, new):
                raise UsageError(f"Error: the destination {show(new)} already exists.")
            key = self._key(old)
            moving = [key] if key in files else self._below(files, old)
            if not moving:
                raise UsageError(f"Error: the path {show(old)} does not exist.")
            k = len(old)
            found: list[MemoryItem] = self.store.get_many(
                self.namespace, [f"{ROOT}/{m}" for m in moving]
            )
            items: list[NewItem] = []
            for item in found:
                rel = tuple(item.id[len(ROOT) + 1 :].split("/"))
                to = (*new, *rel[k:])
                text = str(item.metadata.get("content", ""))
                files.pop(self._key(rel), None)
                files[self._key(to)] = len(text.encode("utf-8"))
                items.append(self._item(to, text))
            for m in moving:  # listed, but its item is gone: nothing to move
                files.pop(m, None)
            self.store.put_many(self.namespace, [*items, self._index_item(files)])
            self.store.delete(self.namespace, [f"{ROOT}/{m}" for m in moving])
