"""The contract every memory tool backend fulfils (:class:`MemoryBackend`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from ctxwise.errors import UsageError
from ctxwise.memory_tool._paths import Kind, Parts, show

__all__ = ["Entry", "MemoryBackend", "too_big"]


@dataclass(frozen=True, slots=True)
class Entry:
    parts: Parts
    is_dir: bool
    size: int


class MemoryBackend(ABC):
    """Where memory files live. Paths come in validated, as segments below the root;
    a method refuses what it cannot do by raising
    :class:`~ctxwise.errors.UsageError`, which :class:`MemoryTool` turns into an error result."""

    @abstractmethod
    def kind(self, parts: Parts) -> Kind:
        """``"file"``, ``"dir"``, or ``None`` when nothing is there."""

    @abstractmethod
    def read(self, parts: Parts, limit: int) -> str:
        """The text of a file of at most ``limit`` UTF-8 bytes."""

    @abstractmethod
    def write(self, parts: Parts, text: str) -> None:
        """Create or replace a file, creating the folders above it."""

    @abstractmethod
    def listing(self, parts: Parts, depth: int) -> list[Entry]:
        """What a folder holds, ``depth`` levels deep, sorted by path."""

    @abstractmethod
    def remove(self, parts: Parts) -> None:
        """Delete a file, or a folder with everything in it."""

    @abstractmethod
    def move(self, old: Parts, new: Parts) -> None:
        """Move a file or folder to a path where nothing is."""

    def names(self, parts: Parts) -> list[str]:
        """The names directly in the folder ``parts`` (none when it is not a folder),
        which :class:`MemoryTool` checks a new name against for a difference only in
        letter case. This default lists the folder one level deep; a backend that can
        name its entries more cheaply overrides it."""
        if self.kind(parts) != "dir":
            return []
        return [e.parts[0] for e in self.listing(parts, 1)]


def too_big(parts: Parts, size: int, limit: int) -> UsageError:
    return UsageError(
        f"Error: {show(parts)} would be {size:,} bytes, over the {limit:,}-byte limit for a "
        f"memory file. Keep it shorter or split it into several files."
    )
