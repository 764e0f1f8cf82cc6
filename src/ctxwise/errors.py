"""The exception tree: every error ctxwise raises on purpose is defined here.

One root, two branches::

    CtxwiseError
    ├── UsageError                  the caller's mistake: fix the input and call again
    │   ├── BudgetError                 a budget that cannot hold anything
    │   ├── PinnedOverflowError         pinned sections alone exceed the budget
    │   ├── SpecError                   a malformed assembly spec file
    │   ├── FormatError                 a transcript or payload that does not decode
    │   │   ├── UnknownFormatError          a format name or file shape ctxwise does not know
    │   │   └── UnsupportedInputError       a turn's input of a type ctxwise does not take
    │   ├── OutputError                 an output path that cannot be written (a folder, no folder)
    │   ├── MissingDependencyError      an optional extra is not installed
    │   ├── PairingError                tool calls and results that do not pair up
    │   ├── EditParameterError          an edit parameter out of range or of the wrong type
    │   ├── SimulationError             a cost simulator parameter out of range
    │   ├── EmptyTranscriptError        a transcript with nothing to compact
    │   ├── CompactionBudgetError       what a compaction must keep exceeds the budget
    │   ├── CompactionThrashError       one item keeps refilling the window after compaction
    │   ├── ClaudeCodeWriteError        a compaction that cannot go back into its session file
    │   ├── NamespaceNotFoundError      a read of a memory namespace that holds nothing
    │   ├── StoreURLError               a store URL with an unknown scheme or no path
    │   ├── ConfigError                 an Engine config with a bad key or value
    │   ├── UnknownSessionError         a session id no turn was stored under
    │   ├── UnknownTurnError            a turn number a stored session never had
    │   ├── PointerError                a ledger pointer that does not parse
    │   ├── HistoryRewoundError         a framework's history that stops before its session does
    │   ├── CursorError                 a result cursor that is forged, expired or another session's
    │   ├── ToolCatalogError            a tool definition the catalog refuses, or an unknown tool
    │   ├── SubagentReportError         a subagent's report that is not the shape asked for
    │   ├── RelayError                  a relay spec, workload, table or step that cannot run
    │   ├── ProxyInputError             a proxied request the provider would refuse as malformed
    │   └── IntegrationError            a framework out of its supported range; an unmapped message
    └── BackendError                the environment failed: fix it, not the input
        ├── TokenizerUnavailableError   an exact tokenizer cannot load offline
        ├── ProviderError               an LLM provider call failed
        ├── StoreError                  a memory store failed (unreachable, corrupt, newer schema)
        │   ├── StoreDimensionError     a schema holding another embedder's vector dimension
        │   └── NewerSchemaError        a schema a newer ctxwise migrated (a SessionStoreError too)
        ├── SummarizerError             the summarizer raised or returned no text
        ├── CompactionArchiveError      archiving the transcript before compaction failed
        ├── SessionConflictError        another writer committed to the session first
        ├── SessionBusyError            another writer held the session's lock past the timeout
        ├── SessionStoreError           the session store failed
        ├── UpstreamError               the proxy's upstream did not answer (502) or in time (504)
        ├── StepError                   a turn's step raised an error that is not ctxwise's own
        ├── RelayStateError             a relay run's manifest or state files are damaged
        └── StepFailed                  a relay step could not produce an update (retried)

Warnings have a root of their own: something was done as asked, but is probably not
what was meant::

    CtxwiseWarning (a UserWarning)
    └── UnansweredTurnWarning       a turn began while the previous request was never answered

Every subclass carries structured fields so a program can react without parsing
the message, and pickles with them (``pickle.loads(pickle.dumps(e))`` gives the
same type, fields and message, so errors cross process pools). The CLI maps
every ``CtxwiseError`` to exit code 2 and one line.

The modules that raise these errors re-export them where they always lived
(``ctxwise.pairing.PairingError``, ``ctxwise.compaction.CompactionBudgetError``,
``ctxwise.memory.StoreError``, ...). This module imports nothing from ctxwise,
not even for type checking, so every module can import it: the values an error
carries from a higher layer (a pairing problem, a compaction's window item) are
typed by the small protocols below, which those values satisfy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol

__all__ = [
    "BackendError",
    "BudgetError",
    "ClaudeCodeWriteError",
    "CompactionArchiveError",
    "CompactionBudgetError",
    "CompactionThrashError",
    "ConfigError",
    "CtxwiseError",
    "CtxwiseWarning",
    "CursorError",
    "EditParameterError",
    "EmptyTranscriptError",
    "FormatError",
    "HistoryRewoundError",
    "IntegrationError",
    "MissingDependencyError",
    "NamespaceNotFoundError",
    "NewerSchemaError",
    "OutputError",
    "PairingError",
    "PinnedOverflowError",
    "PointerError",
    "ProviderError",
    "ProxyInputError",
    "RelayError",
    "RelayStateError",
    "SessionBusyError",
    "SessionConflictError",
    "SessionStoreError",
    "SimulationError",
    "SpecError",
    "StepError",
    "StepFailed",
    "StoreDimensionError",
    "StoreError",
    "StoreURLError",
    "SubagentReportError",
    "SummarizerError",
    "TokenizerUnavailableError",
    "ToolCatalogError",
    "UnansweredTurnWarning",
    "UnknownFormatError",
    "UnknownSessionError",
    "UnknownTurnError",
    "UnsupportedInputError",
    "UpstreamError",
    "UsageError",
]


class _PairingProblem(Protocol):
    """What :class:`PairingError` reads of a problem:
    :class:`ctxwise.messages.PairingProblem` is one."""

    @property
    def kind(self) -> StrEnum: ...
    @property
    def tool_use_id(self) -> str: ...
    @property
    def message_index(self) -> int: ...
    @property
    def detail(self) -> str: ...


class _WindowItem(Protocol):
    """What the compaction errors read of the item they name:
    :class:`ctxwise.compaction.WindowItem` is one."""

    @property
    def message_index(self) -> int: ...
    @property
    def role(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def tokens(self) -> int: ...
    @property
    def tool_name(self) -> str | None: ...
    @property
    def tool_use_id(self) -> str | None: ...
    def describe(self) -> str: ...


def _rebuild(
    cls: type[CtxwiseError], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> CtxwiseError:
    """Unpickle an error by calling its constructor again (see ``__reduce__``)."""
    return cls(*args, **kwargs)


class CtxwiseError(Exception):
    """Root of every error ctxwise raises on purpose."""

    def _reduced(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None = None
    ) -> tuple[Any, ...]:
        """A ``__reduce__`` value that rebuilds this error with ``cls(*args, **kwargs)``,
        then restores its attributes: subclasses whose constructor takes fields rather
        than the message pickle with it (as pydantic-ai's ``ModelAPIError`` does)."""
        return (_rebuild, (type(self), args, dict(kwargs or {})), dict(self.__dict__))


class UsageError(CtxwiseError):
    """The caller asked for something that cannot be done as asked."""


class BackendError(CtxwiseError):
    """Something outside the caller's input failed (a file, a service, a library)."""


# usage errors ---------------------------------------------------------------------------


class BudgetError(UsageError):
    """A token budget that is zero, negative, or smaller than its reserve."""

    def __init__(self, budget: int, detail: str) -> None:
        self.budget = budget
        self.detail = detail
        super().__init__(f"invalid budget {budget}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.budget, self.detail))


class PinnedOverflowError(UsageError):
    """Pinned sections alone need more tokens than the budget allows."""

    def __init__(self, budget: int, pinned_tokens: int, sections: Sequence[str]) -> None:
        self.budget = budget
        self.pinned_tokens = pinned_tokens
        self.sections = tuple(sections)
        names = ", ".join(self.sections) or "nothing"
        super().__init__(
            f"pinned sections need {pinned_tokens} tokens but the budget is {budget} "
            f"(pinned: {names}); raise the budget or unpin a section"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.budget, self.pinned_tokens, self.sections))


class SpecError(UsageError):
    """An assembly spec (YAML or JSON) that does not validate."""

    def __init__(self, source: str, detail: str) -> None:
        self.source = source
        self.detail = detail
        super().__init__(f"{source}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.source, self.detail))


class FormatError(UsageError):
    """A transcript, request or response that does not decode in its format."""

    def __init__(self, source: str, detail: str, *, line: int | None = None) -> None:
        self.source = source
        self.detail = detail
        self.line = line
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.source, self.detail), {"line": self.line})


class UnknownFormatError(FormatError):
    """A format name that is not supported, or a file whose format cannot be detected."""


class UnsupportedInputError(FormatError):
    """An input to a turn (:meth:`Engine.turn <ctxwise.engine.Engine.turn>`,
    :func:`ctxwise.formats.inputs.decode_input`) of a type ctxwise does not take:
    ``got`` names its type, ``index`` its place in the input (``None`` for a single
    item), and the message lists the types that are taken."""

    def __init__(self, got: str, accepted: str, *, index: int | None = None) -> None:
        self.got = got
        self.accepted = accepted
        self.index = index
        where = f"new_messages[{index}]" if index is not None else "new_messages"
        super().__init__("<input>", f"{where} is a {got}; a turn takes {accepted}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.got, self.accepted), {"index": self.index})


class OutputError(UsageError):
    """An output file that cannot be written: a directory, a missing folder, a
    failed write. The original file is then unchanged."""

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(f"cannot write {path}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.path, self.detail))


class MissingDependencyError(UsageError, ImportError):
    """An optional dependency is needed; the message names the install command."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        self.purpose = purpose
        super().__init__(f"{purpose} needs the '{package}' package: {self.install_command(extra)}")

    @staticmethod
    def install_command(extra: str) -> str:
        """The command that installs ``extra`` (``""``: ctxwise alone), the one place
        its wording lives. ctxwise is not published, and a package of its name on
        PyPI could be anyone's: the command installs the clone it is run in, from
        the clone's root folder."""
        return f"pip install -e '.[{extra}]'" if extra else "pip install -e ."

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.package, self.extra, self.purpose))


class PairingError(UsageError):
    """A transcript whose tool calls and results do not pair up, so no edit of it is valid.

    ``problems`` are the :class:`~ctxwise.messages.PairingProblem` found (raised
    by :mod:`ctxwise.pairing`) under ``placement``, the placement rule checked
    (``loose``, ``anthropic`` or ``openai``: :data:`ctxwise.messages.Placement`);
    ``repairable`` is false when a repair cannot fix them.
    """

    def __init__(
        self,
        problems: Sequence[_PairingProblem],
        placement: str,
        source: str | None = None,
        *,
        repairable: bool = True,
    ) -> None:
        self.problems = tuple(problems)
        self.placement = placement
        self.source = source
        self.repairable = repairable
        shown = "; ".join(
            f"message {p.message_index}: {p.kind.value} {p.tool_use_id} ({p.detail})"
            for p in self.problems[:5]
        )
        more = f"; and {len(self.problems) - 5} more" if len(self.problems) > 5 else ""
        hint = (
            "; pass repair=True (CLI: --repair) to drop orphan results, answer unanswered "
            "calls with an error result and rename reused ids"
            if repairable
            else "; misplaced results cannot be repaired"
        )
        where = f"{source}: " if source else ""
        super().__init__(
            f"{where}{len(self.problems)} tool pairing problem(s) under {placement!r} "
            f"placement: {shown}{more}{hint}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced(
            (self.problems, self.placement, self.source), {"repairable": self.repairable}
        )


def _shown(value: object, limit: int = 200) -> str:
    """``repr(value)`` for an error message, at most ``limit`` characters; never
    raises (an int of more than 4,300 digits has no ``repr`` by default)."""
    try:
        text = repr(value)
    except Exception:  # ValueError for a huge int; a broken __repr__
        text = f"<{type(value).__name__}>"
        if isinstance(value, int):
            text = f"<int of {value.bit_length():,} bits>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


class EditParameterError(UsageError):
    """A parameter of an edit that is out of range or of the wrong type."""

    def __init__(self, parameter: str, value: object, detail: str) -> None:
        self.parameter = parameter
        self.value = value
        self.detail = detail
        super().__init__(f"{parameter}={_shown(value)}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.parameter, self.value, self.detail))


class SimulationError(UsageError):
    """A simulator parameter that is out of range; ``parameter`` names it."""

    def __init__(self, parameter: str, value: object, detail: str) -> None:
        self.parameter = parameter
        self.value = value
        self.detail = detail
        super().__init__(f"{parameter}={_shown(value)}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.parameter, self.value, self.detail))


class EmptyTranscriptError(UsageError):
    """A transcript with no conversation message: there is nothing to compact."""

    def __init__(self, source: str | None, detail: str) -> None:
        self.source = source
        self.detail = detail
        where = f"{source}: " if source else ""
        super().__init__(f"{where}nothing to compact: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.source, self.detail))


class CompactionBudgetError(UsageError):
    """What a compaction must keep does not fit the total budget.

    ``parts`` names each part that must stay and its tokens (``system``: the
    system part; ``pinned``: the pinned facts and rules; ``latest user message``:
    the task, kept verbatim; ``summary framing``: the summary message's header and
    overhead; ``message framing``: the request's own overhead, when the least window
    is the system part and the task alone, with no summary; ``tail``: what cannot be
    cut), ``required`` their sum: a budget of ``required`` tokens compacts.
    ``largest`` is the largest item among them (a
    :class:`~ctxwise.compaction.WindowItem`). Nothing was compacted or archived.
    """

    def __init__(
        self,
        budget: int,
        parts: Mapping[str, int],
        largest: _WindowItem | None = None,
        *,
        source: str | None = None,
    ) -> None:
        self.budget = budget
        self.parts = dict(parts)
        self.required = sum(self.parts.values())
        self.largest = largest
        self.source = source
        named = ", ".join(f"{k} {v:,}" for k, v in self.parts.items() if v)
        biggest = f"; its largest item is {largest.describe()}" if largest else ""
        where = f"{source}: " if source else ""
        super().__init__(
            f"{where}budget {budget:,} tokens is too small: what a compaction must keep "
            f"needs {self.required:,} ({named}){biggest}; raise the budget"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.budget, self.parts, self.largest), {"source": self.source})


class CompactionThrashError(UsageError):
    """Compaction cannot keep the window under the trigger: one item keeps refilling it.

    ``attempts`` compactions in a row were followed by the window going over
    ``trigger_tokens`` again within a few messages (or a compaction could not get
    under it at all). ``item`` is the largest item that came in since the last
    compaction (or the largest one left in the window).
    """

    def __init__(
        self, attempts: int, trigger_tokens: int, tokens: int, item: _WindowItem | None, detail: str
    ) -> None:
        self.attempts = attempts
        self.trigger_tokens = trigger_tokens
        self.tokens = tokens
        self.item = item
        self.detail = detail
        culprit = f"; {item.describe()} refills it" if item else ""
        super().__init__(
            f"compaction is thrashing after {attempts} attempt(s): {detail} "
            f"({tokens:,} tokens, trigger {trigger_tokens:,}){culprit}; clear or trim that "
            "item, or raise the trigger"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced(
            (self.attempts, self.trigger_tokens, self.tokens, self.item, self.detail)
        )


class ClaudeCodeWriteError(UsageError):
    """A compaction that cannot be written back into its Claude Code session file.

    ``reason`` says why; ``repaired`` lists the pairing repairs that a file left
    unchanged would lose.
    """

    def __init__(self, source: str, reason: str, repaired: Sequence[str] = ()) -> None:
        self.source = source
        self.reason = reason
        self.repaired = tuple(repaired)
        super().__init__(f"cannot write the compaction of {source} as Claude Code JSONL: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.source, self.reason, self.repaired))


class NamespaceNotFoundError(UsageError):
    """A read named a namespace that holds nothing."""

    def __init__(self, namespace: tuple[str, ...]) -> None:
        self.namespace = namespace
        super().__init__(
            f"unknown namespace {'/'.join(namespace)!r}: nothing was ever stored there"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.namespace,))


_STORE_SCHEMES = "memory, sqlite:///PATH or postgresql://USER@HOST/DB"


def _redacted_url(url: str) -> str:
    """The URL without a password (``user:secret@`` → ``user:***@``)."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    auth, _, host = rest.rpartition("@")
    user, has_password, _ = auth.partition(":")
    return f"{scheme}://{user}{':***' if has_password else ''}@{host}"


class StoreURLError(UsageError):
    """A store URL this version cannot open (unknown scheme, no path).

    ``url`` is the URL as given; the message shows it without its password.
    """

    def __init__(self, url: str, *, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"bad store URL {_redacted_url(url)!r}: {reason}; use {_STORE_SCHEMES}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.url,), {"reason": self.reason})


# runtime (backend) errors -----------------------------------------------------------------


class TokenizerUnavailableError(BackendError):
    """An exact tokenizer's data cannot be loaded on this (offline) machine."""

    def __init__(self, encoding: str, detail: str) -> None:
        self.encoding = encoding
        self.detail = detail
        super().__init__(f"tokenizer {encoding!r} unavailable: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.encoding, self.detail))


class ProviderError(BackendError):
    """A call to an LLM provider failed (network, auth, rate limit, bad response)."""

    def __init__(self, provider: str, detail: str, *, status: int | None = None) -> None:
        self.provider = provider
        self.detail = detail
        self.status = status
        code = f" (HTTP {status})" if status is not None else ""
        super().__init__(f"{provider} call failed{code}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.provider, self.detail), {"status": self.status})


class StoreError(BackendError):
    """A store failed at run time (unreachable, corrupt, newer schema); ``detail`` says how."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.detail,))


class StoreDimensionError(StoreError):
    """A PostgreSQL schema that holds vectors of another dimension than the store was
    opened with: another embedder's. ``schema``, ``held`` and ``dim`` say which."""

    def __init__(self, schema: str, held: int, dim: int) -> None:
        self.schema = schema
        self.held = held
        self.dim = dim
        super().__init__(
            f"schema {schema!r} holds {held}-dimensional vectors, not {dim}: "
            "open it with that dim, or use another schema"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.schema, self.held, self.dim))


class SummarizerError(BackendError):
    """The summarizer raised, or returned no text. The transcript is unchanged.

    ``archive_id`` is set when the full transcript had already been archived
    (complete, in one atomic write) before the summarizer ran.
    """

    def __init__(
        self,
        summarizer: str,
        reason: str,
        *,
        archive_id: str | None = None,
        archived_messages: int = 0,
    ) -> None:
        self.summarizer = summarizer
        self.reason = reason
        self.archive_id = archive_id
        self.archived_messages = archived_messages
        archived = (
            f"; the full transcript ({archived_messages} messages) was archived first as "
            f"{archive_id!r} and stays in the store"
            if archive_id
            else "; nothing was archived"
        )
        super().__init__(
            f"summarizer {summarizer} failed: {reason}; the transcript is unchanged{archived}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced(
            (self.summarizer, self.reason),
            {"archive_id": self.archive_id, "archived_messages": self.archived_messages},
        )


class CompactionArchiveError(BackendError):
    """Archiving the transcript before compaction failed; nothing was compacted.

    The store's ``put_many`` is all-or-nothing, so no item of this archive was kept.
    """

    def __init__(self, namespace: Sequence[str], reason: str) -> None:
        self.namespace = tuple(namespace)
        self.reason = reason
        super().__init__(
            f"archiving the transcript to {'/'.join(self.namespace)!r} failed, so it was not "
            f"compacted (the write is all-or-nothing: nothing was archived): {reason}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.namespace, self.reason))


# the Engine and its sessions ------------------------------------------------------------


class ConfigError(UsageError):
    """An Engine config (``ctxwise.toml``) that does not validate: a bad key or value."""

    def __init__(self, source: str, detail: str) -> None:
        self.source = source
        self.detail = detail
        super().__init__(f"{source}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.source, self.detail))


class UnknownSessionError(UsageError):
    """A session id that no turn was ever stored under."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"unknown session {session_id!r}: no turn was stored under that id")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.session_id,))


class UnknownTurnError(UsageError):
    """A turn number the session ``session_id`` never had (it has ``turns``), or,
    with ``detail``, one that lacks what was asked of it (a ledger)."""

    def __init__(self, session_id: str, turn: int, *, turns: int, detail: str = "") -> None:
        self.session_id = session_id
        self.turn = turn
        self.turns = turns
        self.detail = detail
        has = f"turns 1 to {turns}" if turns else "no turns yet"
        super().__init__(
            f"turn {turn} of session {session_id!r} {detail}"
            if detail
            else f"session {session_id!r} has no turn {turn} (it has {has})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced(
            (self.session_id, self.turn), {"turns": self.turns, "detail": self.detail}
        )


class PointerError(UsageError):
    """A ledger pointer (``log:12``, ``summary:7``, ``memory:p12``, ``result:ID``) that
    does not parse: ``pointer`` as given, ``detail`` what is wrong with it."""

    def __init__(self, pointer: str, detail: str) -> None:
        self.pointer = pointer
        self.detail = detail
        super().__init__(f"pointer {pointer[:80]!r}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.pointer, self.detail))


class HistoryRewoundError(UsageError):
    """A framework's whole history that stops before its session does: the session
    holds ``gone`` later messages the history does not (the first known by ``first``,
    its sync key), after the history's message ``at``, the latest the session holds.
    The conversation was rewound or forked (a run from an earlier checkpoint, items
    popped, an earlier history given again); nothing was recorded."""

    def __init__(self, session_id: str, *, at: int, gone: int, first: str) -> None:
        self.session_id = session_id
        self.at = at
        self.gone = gone
        self.first = first
        super().__init__(
            f"the history stops before session {session_id!r} does: after its message {at} "
            f"(the latest one the session holds) the session holds {gone} later message(s) "
            f"the history does not (first {first!r}), so the conversation was rewound or "
            "forked. A ctxwise session only grows, and the model would get the turns the "
            "history left behind; run the fork under a new session id. Nothing was recorded"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced(
            (self.session_id,), {"at": self.at, "gone": self.gone, "first": self.first}
        )


class SessionConflictError(BackendError):
    """Another writer committed to the session first; nothing of this commit was written."""

    def __init__(self, session_id: str, *, expected: int, found: int) -> None:
        self.session_id = session_id
        self.expected = expected
        self.found = found
        super().__init__(
            f"session {session_id!r} is at version {found}, not {expected}: another writer "
            "committed first and nothing was written; re-read the session and apply again"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.session_id,), {"expected": self.expected, "found": self.found})


class SessionBusyError(BackendError):
    """Another writer held the session's lock for the whole time this one could wait
    (``waited``, the lock timeout in seconds); nothing of this turn was written."""

    def __init__(self, session_id: str, waited: float) -> None:
        self.session_id = session_id
        self.waited = waited
        super().__init__(
            f"session {session_id!r} is busy: another writer held its lock for the "
            f"{waited:g} s this call may wait, and nothing was written; try again later "
            "or give the Engine a longer lock_timeout"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.session_id, self.waited))


class ProxyInputError(UsageError):
    """A request to the proxy that the provider would refuse as malformed (a message
    that does not decode, tool calls and results that do not pair, no input): the
    client gets the provider's 400 shape and nothing is stored."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.detail,))


class UpstreamError(BackendError):
    """The proxy's upstream could not be reached (``status`` 502) or did not answer in
    time (504); ``detail`` says which, never a header or a body."""

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail
        super().__init__(detail)

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.status, self.detail))


class SessionStoreError(BackendError):
    """The session store failed (unreachable, corrupt, a newer schema); ``detail`` says how."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.detail,))


class NewerSchemaError(StoreError, SessionStoreError):
    """A database whose schema a newer ctxwise migrated: it is refused, untouched.

    ``store`` names it (a file, a PostgreSQL schema), ``found`` is the schema's
    version (migrations it records), ``known`` this code's, and ``unknown`` the
    recorded migrations this code does not know. A memory store and a session
    store both raise it, so it is a :class:`StoreError` and a
    :class:`SessionStoreError`.
    """

    def __init__(self, store: str, found: int, known: int, unknown: Sequence[str] = ()) -> None:
        self.store = store
        self.found = found
        self.known = known
        self.unknown = tuple(unknown)
        names = f" (unknown migrations: {', '.join(self.unknown)})" if self.unknown else ""
        super().__init__(
            f"{store} was written by a newer ctxwise: schema version {found}, this ctxwise "
            f"knows {known}{names}; upgrade ctxwise to open it"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.store, self.found, self.known, self.unknown))


_CURSOR_REASONS = {
    "forged": "it was not issued by this result store, or it was altered",
    "expired": "it has expired; run the tool again for a fresh result",
    "wrong_session": "it belongs to another session",
    "unknown_result": "the result it points to is no longer stored; run the tool again",
}


class CursorError(UsageError):
    """A cursor for a stored tool result that cannot be used.

    ``reason`` is ``"forged"`` (a bad signature or shape: made up or tampered with),
    ``"expired"`` (past its time to live), ``"wrong_session"`` (issued to another
    session) or ``"unknown_result"`` (the result is no longer stored).
    """

    def __init__(self, reason: str, *, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        why = _CURSOR_REASONS.get(reason, reason)
        super().__init__(f"bad cursor ({reason}): {why}" + (f"; {detail}" if detail else ""))

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.reason,), {"detail": self.detail})


_CATALOG_REASONS = {
    "duplicate": "the tool is already in the catalog",
    "invalid_schema": "its input schema is not usable",
    "bad_definition": "the definition is malformed",
    "unknown_tool": "no such tool",
    "ambiguous": "several tools have that name",
}


class ToolCatalogError(UsageError):
    """A tool definition that cannot join a :class:`~ctxwise.tools.ToolCatalog`, or a
    tool name the catalog does not know.

    ``reason`` is ``"duplicate"`` (the same name twice on one server),
    ``"invalid_schema"`` (an input schema that is not valid JSON Schema, not of
    type ``object``, names an unknown ``$schema``, has a ``$ref`` that resolves to
    nothing in it (none is fetched) or nests past 64 levels), ``"bad_definition"``
    (no name, a non-string description, a server tool), ``"unknown_tool"`` or
    ``"ambiguous"`` (a name on several servers);
    ``tool`` and ``server`` say which, ``detail`` says how.
    """

    def __init__(
        self, reason: str, *, tool: str | None = None, server: str | None = None, detail: str = ""
    ) -> None:
        self.reason = reason
        self.tool = tool
        self.server = server
        self.detail = detail
        what = "" if tool is None else (f" {server}/{tool}" if server else f" {tool}")
        why = _CATALOG_REASONS.get(reason, reason)
        super().__init__(f"tool{what}: {why}" + (f" ({detail})" if detail else ""))

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced(
            (self.reason,), {"tool": self.tool, "server": self.server, "detail": self.detail}
        )


class SubagentReportError(UsageError):
    """A subagent's report that does not parse or validate as a
    :class:`~ctxwise.handoff.report.SubagentReport`.

    ``problems`` holds one ``(path, problem)`` pair per error, the path naming the
    field (``findings[0].source.url``; ``(top level)`` when the text is not a JSON
    object); ``source`` says which report it was (a subtask, ``reports[2]``), when known.
    """

    def __init__(self, problems: Sequence[tuple[str, str]], *, source: str | None = None) -> None:
        self.problems = tuple((str(path), str(problem)) for path, problem in problems)
        self.source = source
        shown = "; ".join(f"{path}: {problem}" for path, problem in self.problems[:5])
        more = f"; and {len(self.problems) - 5} more" if len(self.problems) > 5 else ""
        where = f"{source}: " if source else ""
        count = len(self.problems)
        super().__init__(
            f"{where}malformed subagent report ({count} problem{'s' if count != 1 else ''}): "
            f"{shown}{more}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.problems,), {"source": self.source})


class RelayError(UsageError):
    """A relay job that cannot run as given.

    ``reason`` says which part is wrong: ``"spec"`` (a spec key or value),
    ``"workload"`` (a workload folder in the wrong shape), ``"table"`` (a state
    table schema or starting rows that break it), ``"step"`` (a step that returned
    something other than a :class:`~ctxwise.relay.StepResult`, or raised), ``"run"``
    (an unknown run id, a run started again, a resume of another job). ``detail``
    says how; ``path`` names the file or folder when there is one. The run's last
    committed state is untouched.
    """

    def __init__(self, reason: str, detail: str, *, path: str | None = None) -> None:
        self.reason = reason
        self.detail = detail
        self.path = path
        where = f"{path}: " if path else ""
        super().__init__(f"relay {reason}: {where}{detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.reason, self.detail), {"path": self.path})


class RelayStateError(BackendError):
    """A relay run's saved state is damaged: the manifest does not parse, or a state
    file is missing or does not match the hash the manifest recorded. ``path`` names
    it. Nothing is changed; the run cannot resume until the state is restored."""

    def __init__(self, detail: str, *, path: str | None = None) -> None:
        self.detail = detail
        self.path = path
        where = f"{path}: " if path else ""
        super().__init__(f"relay state: {where}{detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.detail,), {"path": self.path})


class StepFailed(BackendError):
    """Raised by a relay step that could not produce an update (a model's reply
    that does not parse, a call that gave up). The relay records ``reason`` and
    retries the step once; it is not an error of the run."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.reason,))


class IntegrationError(UsageError):
    """A framework integration that cannot do what it was asked.

    ``reason`` is ``"version"`` (the installed framework is outside ``supported``,
    the range ctxwise is tested with), ``"message"`` (a message or part type
    ctxwise cannot map, named in ``detail``; the history is left unchanged) or
    ``"config"`` (the integration was set up wrongly). ``framework`` names the
    distribution (``langchain``, ``pydantic-ai-slim``, ``openai-agents``, ...).
    """

    def __init__(
        self, framework: str, reason: str, detail: str, *, supported: str | None = None
    ) -> None:
        self.framework = framework
        self.reason = reason
        self.detail = detail
        self.supported = supported
        rng = f" (supported: {framework}{supported})" if supported else ""
        super().__init__(f"{framework}: {detail}{rng}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced(
            (self.framework, self.reason, self.detail), {"supported": self.supported}
        )


class StepError(BackendError):
    """A step of a turn (``step``, by name) raised an error that is not ctxwise's own
    (``detail``: its type and message); the turn was not committed."""

    def __init__(self, step: str, detail: str) -> None:
        self.step = step
        self.detail = detail
        super().__init__(f"turn step {step!r} failed, nothing was committed: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduced((self.step, self.detail))


# warnings ---------------------------------------------------------------------------------


class CtxwiseWarning(UserWarning):
    """Root of every warning ctxwise gives: something was done as asked, but is
    probably not what was meant."""


class UnansweredTurnWarning(CtxwiseWarning):
    """A turn of session ``session_id`` began with a user message while the request
    the previous turn built was never answered: the model's reply to it was neither
    passed to a turn (first in ``new_messages``) nor recorded
    (:meth:`Engine.record <ctxwise.engine.Engine.record>`), so the session, and every
    later request, leaves that reply out."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"session {session_id!r}: this turn begins with a user message, but the reply "
            "to the previous turn's request was never given to the Engine; pass the "
            "model's response first (engine.turn(session, [response, ...])) or record it "
            "(engine.record(session, response)), or the session leaves it out"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.session_id,), dict(self.__dict__))
