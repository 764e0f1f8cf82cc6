"""What of a framework's whole history a session has not had yet, and whether the
history was rewound (:meth:`Engine.sync <ctxwise.engine.Engine.sync>`).

An agent framework holds the conversation itself and hands it over whole on every
model call. The session records each message once, so each call must find what is new
since the last one, and refuse a history that no longer holds messages the session
has after some point (a run from an earlier checkpoint, items popped, an earlier
history given again): the model would get the turns the history left behind.

Messages are compared by **sync keys**: a key function gives the keys of the framework
items a message stands for (an id a framework gives each message, a hash of an item's
content; one message may stand for several items, and a message with no key is not
compared). The same function reads the session's log, so the session's keys are the
history's keys as they were recorded. They are kept per Engine, session and key
function, and grown from the log's new rows only: a call reads the rows written since
the last one (none after this Engine's own turn but the turn's), never the whole log
again.

The rule, on the flat sequence of keys (the history's ``G``, the session's ``K``):

- ``G`` starts with all of ``K``: what follows is new (the common case, one pass of
  string comparisons);
- else the latest key of ``G`` that ``K`` holds marks where the two meet: what follows
  it in ``G`` is new, provided ``K`` holds nothing after that point that ``G`` lacks
  (a history trimmed at its start, a compacted history written back, a window sent
  before stay fine);
- when ``K`` does hold later keys ``G`` lacks, the history was rewound:
  :class:`~ctxwise.errors.HistoryRewoundError`. With content keys (the default
  ``SyncKeys``) a user may say again what they said before, so a match proves a shared
  history only when it holds a message only a model run makes (an assistant message, a tool result)
  or starts where the session starts and goes on past it; a history of repeated user
  words is new input;
- no key of ``G`` in ``K``: all of it is new (a framework that passes only its new
  input).

A message some of whose keys are new and some not is new as a whole (the Engine then
refuses a result it already has, loudly, rather than lose the new part): pass one
message per framework item for an exact cut.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ctxwise.errors import HistoryRewoundError, UsageError
from ctxwise.formats import neutral
from ctxwise.messages import Message, ToolResultBlock
from ctxwise.sessions import check_session_id

if TYPE_CHECKING:
    from ctxwise.engine import Engine

__all__ = ["SyncKeys", "SyncResult", "message_keys", "sync"]

MAX_INDEXES = 256
"""Sessions whose keys an Engine keeps per key function (the least recently synced go)."""


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What :meth:`Engine.sync <ctxwise.engine.Engine.sync>` found: the messages of the
    history the session has not had (``new``, ``full_history[start:]``), and the
    session's ``version`` they were worked out at (pass it as the turn's
    ``expected_version``: another writer's commit in between changes what is new).
    ``held``: how many sync keys the session holds."""

    new: tuple[Message, ...]
    start: int
    version: int
    held: int = 0


def message_keys(message: Message) -> tuple[str, ...]:
    """The default sync key: ``id:`` and the message's id when it has one, else ``h:``
    and a SHA-256 of its role and content (extras included: what a codec keeps of an
    item tells it apart)."""
    if message.id:
        return (f"id:{message.id}",)
    encoded = neutral.encode_message(Message(message.role, message.content, kind=message.kind))
    body = json.dumps(encoded, sort_keys=True, ensure_ascii=False, default=str)
    return ("h:" + hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:32],)


@dataclass(frozen=True, slots=True)
class SyncKeys:
    """How :meth:`Engine.sync <ctxwise.engine.Engine.sync>` compares messages: ``of``
    gives a message's sync keys, one per framework item it stands for (none: the
    message is not compared), and reads the session's log the same way; ``ids`` says
    the keys name messages (ids a framework gives them) rather than their content, so
    any key the session holds proves a shared history. Use one object (or one ``of``)
    per integration: the session's keys are kept per ``SyncKeys``."""

    of: Callable[[Message], Sequence[str]] = message_keys
    ids: bool = False


@dataclass(slots=True)
class _Index:
    """A session's sync keys, read from its log up to ``log_length``."""

    log_length: int = 0
    keys: list[str] = field(default_factory=list)
    at: dict[str, list[int]] = field(default_factory=dict)

    def grow(self, messages: Sequence[Message], keys: SyncKeys, length: int) -> None:
        for m in messages:
            for k in keys.of(m):
                self.at.setdefault(k, []).append(len(self.keys))
                self.keys.append(k)
        self.log_length = length


_Indexes = OrderedDict[tuple[str, SyncKeys], _Index]
_indexes: weakref.WeakKeyDictionary[Engine, _Indexes] = weakref.WeakKeyDictionary()


def _index(engine: Engine, session_id: str, log_length: int, keys: SyncKeys) -> _Index:
    """The session's keys up to ``log_length``, grown from the log's new rows."""
    kept = _indexes.setdefault(engine, OrderedDict())
    index = kept.pop((session_id, keys), None)
    if index is None or index.log_length > log_length:  # a new or a replaced session
        index = _Index()
    if index.log_length < log_length:
        rows = engine.sessions.log(session_id, index.log_length, log_length)
        index.grow(neutral.decode_messages(rows), keys, log_length)
    kept[(session_id, keys)] = index
    while len(kept) > MAX_INDEXES:
        kept.popitem(last=False)
    return index


def _made(message: Message) -> bool:
    """Only a model run makes it: an assistant message, or one holding a tool result."""
    return message.role == "assistant" or any(
        isinstance(b, ToolResultBlock) for b in message.content
    )


def _meet(held: list[str], at: dict[str, list[int]], flat: list[str], j: int) -> int:
    """Where ``flat[j]`` stands in ``held``: its latest place whose key before it is the
    key before ``flat[j]`` too, else its latest place."""
    places = at[flat[j]]
    if j > 0:
        for p in reversed(places):
            if p > 0 and held[p - 1] == flat[j - 1]:
                return p
    return places[-1]


def _start(owner: list[int], matched: int) -> int:
    """The first new message when the first ``matched`` keys are known."""
    if matched == 0:
        return 0
    last = owner[matched - 1]
    if matched < len(owner) and owner[matched] == last:
        return last  # a message holding known and new keys is new as a whole
    return last + 1


def sync(
    engine: Engine,
    session_id: str,
    full_history: Sequence[Message],
    keys: SyncKeys | None = None,
) -> SyncResult:
    """See :meth:`Engine.sync <ctxwise.engine.Engine.sync>` and the module docstring."""
    check_session_id(session_id)
    if isinstance(full_history, (str, bytes, Message)) or not isinstance(full_history, Sequence):
        raise UsageError(
            f"full_history is a sequence of Messages, got {type(full_history).__name__}"
        )
    history = tuple(full_history)
    for i, m in enumerate(history):
        if not isinstance(m, Message):
            raise UsageError(f"full_history[{i}] is a {type(m).__name__}, not a Message")
    keys = SyncKeys() if keys is None else keys
    if not isinstance(keys, SyncKeys) or not callable(keys.of):
        raise UsageError(f"keys is a SyncKeys with a function of a Message, got {keys!r}")
    session = engine._load(session_id)
    index = _index(engine, session_id, session.log_length, keys)
    held = index.keys
    flat: list[str] = []
    owner: list[int] = []
    for i, m in enumerate(history):
        for k in keys.of(m):
            flat.append(k)
            owner.append(i)

    def result(start: int) -> SyncResult:
        return SyncResult(history[start:], start, session.version, len(held))

    size = len(held)
    if not size or (len(flat) >= size and flat[size - 1] == held[-1] and flat[:size] == held):
        return result(_start(owner, size))
    j = next((i for i in range(len(flat) - 1, -1, -1) if flat[i] in index.at), None)
    if j is None:  # nothing the session holds: a framework passing only its new input
        return result(0)
    p = _meet(held, index.at, flat, j)
    given = set(flat)
    gone = [k for k in held[p + 1 :] if k not in given]
    if not gone:
        return result(_start(owner, j + 1))
    if not keys.ids:
        known = [i for i in range(j + 1) if flat[i] in index.at]
        proven = any(_made(history[owner[i]]) for i in known)
        from_start = flat[0] == held[0] and (len(known) >= 2 or len(flat) > j + 1)
        if not (proven or from_start):  # a user saying again what they said: new input
            return result(0)
    raise HistoryRewoundError(session_id, at=owner[j], gone=len(gone), first=gone[0])
