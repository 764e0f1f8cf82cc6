"""The Engine's side of a proxied request: sync the incoming history, run the turn,
record the upstream's answer. API-agnostic: each route decodes its own body.

:func:`prepare` runs in a worker thread on one of the tenant's Engines: it finds
what of the history the session has not had (:meth:`Engine.sync
<ctxwise.engine.Engine.sync>` with the proxy's keys), follows a rewound or forked
history to its fork session (:mod:`ctxwise.server.proxy._naming`), and runs
:meth:`Engine.turn <ctxwise.engine.Engine.turn>` on what is new, holding the
session's write lock from the sync to the commit. The client's malformed input (a
message that does not decode, tool calls and results that do not pair) is
:class:`~ctxwise.errors.ProxyInputError`, to
answer with the provider's 400; any other exception is ctxwise's own failure, which
the route answers by forwarding the original request unchanged (fail open).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxwise._sync import SyncResult
from ctxwise.engine import Engine, TurnResult
from ctxwise.errors import (
    FormatError,
    HistoryRewoundError,
    PairingError,
    ProxyInputError,
    UsageError,
)
from ctxwise.formats import neutral
from ctxwise.formats.inputs import decode_input
from ctxwise.messages import Message
from ctxwise.server.proxy._naming import (
    MAX_FORK_DEPTH,
    PROXY_KEYS,
    fork_session,
    message_key,
)

__all__ = [
    "TAIL_CHECK",
    "Prepared",
    "fail_reason",
    "prepare",
    "record",
]

TAIL_CHECK = 16
"""Messages before the new ones compared with the session's last ones: sync matches a
history at the latest message the session holds, and a fork whose branch repeats a
message of the session (the same short reply in both) must not continue it."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """The session that served the request and the Engine's turn on it."""

    session: str
    result: TurnResult
    new: int
    """How many of the history's messages were new to the session."""
    forked_from: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


def _diverges(
    engine: Engine, session: str, history: Sequence[Message], found: SyncResult
) -> int | None:
    """Where ``history`` leaves the session although sync matched it: the index of
    the last message both hold before the first of the :data:`TAIL_CHECK` messages
    before the new ones that differs from the session's last ones, else ``None``."""
    start, held = found.start, found.held
    k = min(start, held, TAIL_CHECK)
    if k == 0:
        return None
    tail = neutral.decode_messages(engine.sessions.log(session, held - k, held))
    for i, (given, had) in enumerate(zip(history[start - k : start], tail, strict=True)):
        if message_key(given) != message_key(had):
            return start - k + i - 1
    return None


def _sync_session(
    engine: Engine, session: str, history: Sequence[Message]
) -> tuple[str, SyncResult]:
    """The session ``history`` continues (a fork when it was rewound) and what sync found.

    A history that holds nothing of a session that is not empty does not continue it:
    a client sends its whole conversation every time, so that is another conversation
    under the same name (Claude Code's own compaction starts again from its summary).
    It goes to a fork named from its first message, which its next requests find again,
    never appended after the session's last turn (where it would answer nothing the
    session asked, or bury the summary under the history it replaced)."""
    for _ in range(MAX_FORK_DEPTH + 1):
        try:
            found = engine.sync(session, history, PROXY_KEYS)
        except HistoryRewoundError as exc:
            session = fork_session(session, history, exc.at)
            continue
        if found.held and found.start == 0 and found.new:
            session = fork_session(session, history, -1)
            continue
        at = _diverges(engine, session, history, found)
        if at is None:
            return session, found
        session = fork_session(session, history, at)
    raise UsageError(f"the history forks more than {MAX_FORK_DEPTH} times from its session")


def prepare(
    engine: Engine,
    session_id: str,
    history: Sequence[Message],
    *,
    system: str | None,
    tools: Sequence[Mapping[str, Any]] | None,
) -> Prepared:
    """Sync ``history`` into the session (or its fork) and run the turn (module
    docstring), holding the session's write lock from the sync to the commit, so no
    other writer (another request of the conversation, the recording of an answer)
    can come between what sync found new and the turn that appends it. Raises
    :class:`~ctxwise.errors.ProxyInputError` for the client's malformed input."""
    with engine.sessions.lock(session_id, timeout=engine.lock_timeout):
        session, found = _sync_session(engine, session_id, history)
        try:
            # the fork's own lock is taken inside; the named session's is held (re-entry)
            result = engine.turn(
                session,
                list(found.new),
                system=system,
                tools=tools,
                warn_unanswered=False,
            )
        except (FormatError, PairingError) as exc:
            raise ProxyInputError(str(exc)) from None
    forked = None if session == session_id else session_id
    return Prepared(session, result, len(found.new), forked, dict(result.headers))


def record(
    engine: Engine, session: str, history: Sequence[Message], response: Mapping[str, Any]
) -> int | None:
    """Append the upstream's ``response`` to the request's ``history`` in the session
    (its usage calibrates the counter); the session's version, or ``None`` when the
    session holds the answer already or has moved past it: the client's next request
    can reach the Engine before this answer is recorded (an agent that runs its tools
    at once), and its turn appends the answer as the client sent it back. The usage
    of that answer is then not learned, and nothing is recorded twice: the sync and
    the record run under the session's write lock, so that next request's turn comes
    wholly before or wholly after them."""
    answer = decode_input([dict(response)])
    with engine.sessions.lock(session, timeout=engine.lock_timeout):
        try:
            found = engine.sync(session, [*history, *answer], PROXY_KEYS)
        except HistoryRewoundError:  # the session went on past the answer
            return None
        if not found.new or found.start < len(history):
            return None
        return engine.record(session, list(found.new))


_UNPRINTABLE = re.compile(r"[^\x20-\x7e]+")


def fail_reason(exc: BaseException) -> str:
    """A short, one-line, ASCII reason for the ``x-ctxwise-fail-open`` header."""
    text = _UNPRINTABLE.sub(" ", str(exc)).strip()
    reason = type(exc).__name__ + (f": {text}" if text else "")
    return reason[:160]
