"""``ctxwise explain``: one turn's ledger in the terminal, and "where is this now?".

The store is only read, as ``ctxwise trace`` reads it: a file that does not exist,
or holds no ctxwise sessions, is refused and left as it was. Memory and stored-result
pointers (``memory:ID``, ``result:ID``) are resolved from the Engine's memory store,
which the Engine keeps in the same SQLite file or PostgreSQL database as its sessions
(``--config`` names the store and ``[memory] namespace`` it used). That store is
opened only when it is already there and up to date, so nothing is created or
migrated; otherwise each such pointer says why it cannot be read, and the ledger is
shown all the same.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from ctxwise.cli._store import (
    STORE_HELP,
    existing_session_store,
    given_store,
    read_only_memory,
)
from ctxwise.cli._util import (
    _buffered_console,
    _guard,
    _num_col,
    _print_json,
    _table,
    _text_col,
    _write,
)
from ctxwise.config import EngineConfig, load_config
from ctxwise.ledger import Found, Ledger, LedgerEntry, LedgerReader, Original
from ctxwise.memory.store import Store
from ctxwise.sessions import open_session_store

__all__ = ["explain_cmd"]

NO_GIVEN_MEMORY = "no memory store was given to read it from"
"""What :meth:`LedgerReader.original` says when it has no memory store: replaced
by why this command has none."""


# ------------------------------------------------------------------- memory store


# ------------------------------------------------------------------------- runs


@dataclass(frozen=True, slots=True)
class _Run:
    """Consecutive messages of one fate (and one summary, one memory item)."""

    first: LedgerEntry
    last: LedgerEntry
    count: int
    tokens_before: int
    tokens_after: int


def _run_key(e: LedgerEntry) -> tuple[Any, ...]:
    pointer = e.pointer or ""
    # a stored result's pointer is its own: such messages are never merged
    own = pointer if not pointer.startswith("log:") else ""
    return (e.fate, e.into, e.refs, own)


def _runs(messages: Sequence[LedgerEntry]) -> Iterator[_Run]:
    run: list[LedgerEntry] = []
    for e in messages:
        if run and _run_key(run[-1]) != _run_key(e):
            yield _made_run(run)
            run = []
        run.append(e)
    if run:
        yield _made_run(run)


def _made_run(run: list[LedgerEntry]) -> _Run:
    return _Run(
        first=run[0],
        last=run[-1],
        count=len(run),
        tokens_before=sum(e.tokens_before for e in run),
        tokens_after=sum(e.tokens_after for e in run),
    )


def _span(a: int | None, b: int | None) -> str:
    return f"{a}" if a == b else f"{a}–{b}"


def _ranges(positions: Sequence[int], limit: int = 8) -> str:
    """Log positions as ranges (``3–7, 12, 20–21``); past ``limit`` ranges, how many more."""
    if not positions:
        return "-"
    spans: list[tuple[int, int]] = []
    for p in sorted(positions):
        if spans and p == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], p)
        else:
            spans.append((p, p))
    shown = ", ".join(_span(a, b) for a, b in spans[:limit])
    more = len(spans) - limit
    return shown + (f" and {more} more range(s)" if more > 0 else "")


def _tokens(before: int, after: int) -> str:
    return f"{before:,} → {after:,}"


# ------------------------------------------------------------------ the command


class _Pointers:
    """Resolves pointers once each, with this command's reason for a missing memory store."""

    def __init__(self, reader: LedgerReader, no_memory: str) -> None:
        self.reader = reader
        self.no_memory = no_memory
        self._seen: dict[str, Original] = {}

    def original(self, pointer: str) -> Original:
        got = self._seen.get(pointer)
        if got is None:
            got = self.reader.original(pointer)
            if got.gone == NO_GIVEN_MEMORY:
                got = Original(pointer, None, self.no_memory)
            self._seen[pointer] = got
        return got

    def gone(self, pointers: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for p in dict.fromkeys(pointers):
            if not p.startswith("log:"):
                why = self.original(p).gone
                if why is not None:
                    out[p] = why
        return out


def _pointers_of(entries: Sequence[LedgerEntry]) -> list[str]:
    out: list[str] = []
    for e in entries:
        if e.pointer is not None:
            out.append(e.pointer)
        if e.into is not None and ":" in e.into:
            out.append(e.into)
        out.extend(e.refs)
    return out


@contextmanager
def _reader(
    session: str, store: str | None, config: Path | None
) -> Iterator[tuple[LedgerReader, str]]:
    """The session's ledger reader (and why memory pointers cannot be read, if so)."""
    cfg = load_config(config) if config is not None else EngineConfig()
    if store is not None:
        url = existing_session_store(store)
    elif config is not None and "store" in cfg.model_fields_set:
        url = existing_session_store(cfg.store_url())
    else:
        url = existing_session_store("ctxwise.db")
    sessions = open_session_store(url)
    memory: Store | None = None
    try:
        memory, no_memory = read_only_memory(url, cfg)
        reader = LedgerReader.of_store(
            sessions, session, memory=memory, namespace=cfg.memory.namespace
        )
        yield reader, no_memory
    finally:
        if memory is not None:
            memory.close()
        sessions.close()


def explain_cmd(
    session: Annotated[str, typer.Argument(help="The session id.")],
    turn: Annotated[
        int | None, typer.Option("--turn", help="The turn to explain (default: the latest).")
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help=f"The store to read ({STORE_HELP}); it must exist: nothing is created. "
            "Default: the --config's store, else ctxwise.db.",
        ),
    ] = None,
    find: Annotated[
        str | None,
        typer.Option(
            "--find",
            help="Where is this text now? Every message (and summary) holding it, with its "
            "fate and pointer; exit code 1 when none does.",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="The ctxwise.toml the Engine ran with: its store, and the memory "
            "namespace (memory.namespace) its memory and stored results are under.",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show what one turn did with every message, summary, section and tool definition.

    Each message's fate (sent, truncated, cleared, summarized, recalled,
    dropped), why, its tokens before and after, and a pointer to its
    original; the diff from the turn before. With --find, where a text is
    now; the exit code is then 0 when it is found, 1 when it is not, 2 on
    an error (as grep's).
    """
    if find is not None:
        _guard(lambda: _find(session, turn, given_store(store, None), config, find, json_out))
        return

    def run() -> tuple[Ledger, int, dict[str, str]]:
        with _reader(session, given_store(store, None), config) as (reader, no_memory):
            ledger = reader.ledger(turn)
            pointers = _Pointers(reader, no_memory)
            gone = pointers.gone(_pointers_of(ledger.entries))
            return ledger, reader.turns, gone

    ledger, turns, gone = _guard(run)
    if json_out:
        _print_json({**ledger.to_dict(), "turns": turns, "gone": gone})
        return
    _print_ledger(ledger, turns, gone)


def _header(ledger: Ledger, turns: int) -> list[Text]:
    t = ledger.trace
    counts = ledger.counts()
    n = len(ledger.messages)
    fates = ", ".join(f"{k} {v:,}" for k, v in counts.items() if v)
    lines = [
        Text(f"session {ledger.session_id}, turn {ledger.turn} of {turns}", style="bold"),
        Text(f"tokens sent {t.tokens.total:,} of {t.tokens.available:,} available"),
        Text(f"{n:,} message(s) in the log: {fates or 'none'}"),
    ]
    d = ledger.diff
    since = f"turn {d.before}" if d.before is not None else "nothing (the first turn)"
    lines.append(Text(f"since {since}:"))
    lines.append(Text(f"  entered log {_ranges(d.entered)}"))
    lines.append(Text(f"  left log {_ranges(d.left)}"))
    lines.append(Text(f"  cleared log {_ranges(d.cleared)}"))
    lines.append(
        Text(
            f"  sections in: {', '.join(d.sections_entered) or '-'}; "
            f"out: {', '.join(d.sections_left) or '-'}"
        )
    )
    if d.first_change is None:
        first = "the history only grew (the prefix is unchanged)"
    else:
        at = f" (log {d.first_change_log})" if d.first_change_log is not None else " (a summary)"
        first = f"the history first differs at message {d.first_change}{at}"
    lines.append(Text(f"  {first}"))
    if d.cache is not None:
        lines.append(Text(f"  the cached prefix first differs at: {d.cache}"))
    return lines


def _print_ledger(ledger: Ledger, turns: int, gone: dict[str, str]) -> None:
    console, buf = _buffered_console()
    for line in _header(ledger, turns):
        console.print(line)

    def shown(pointer: str | None) -> str:
        if pointer is None:
            return "-"
        return pointer if pointer not in gone else f"{pointer} (gone: {gone[pointer]})"

    table = _table(f"ledger of turn {ledger.turn}")
    _text_col(table, "entry")
    _text_col(table, "fate")
    _num_col(table, "tokens")
    _text_col(table, "pointer")
    for r in _runs(ledger.messages):
        a, b = r.first.position, r.last.position
        entry = f"log {_span(a, b)}" + (f", {r.count} msgs" if r.count > 1 else "")
        if r.count == 1:
            entry = _where(r.first)
        fate = r.first.fate + (f" → {r.first.into}" if r.first.into is not None else "")
        pointer = r.first.pointer or ""
        if pointer.startswith("log:"):
            pointer = f"log:{_span(a, b)}"
        cell = shown(pointer or None)
        if r.first.refs:
            cell += " from " + ", ".join(shown(x) for x in r.first.refs)
        table.add_row(Text(entry), Text(fate), _tokens(r.tokens_before, r.tokens_after), Text(cell))
    for e in ledger.entries:
        if e.kind == "message":
            continue
        what = {"summary": "", "section": "section ", "tools": "tools: "}[e.kind]
        entry = f"{what}{e.name or '-'}"
        if e.kind == "section":
            entry += f" ({e.reason})" if e.reason else ""
        cell = shown(e.pointer)
        if e.refs:
            refs = [shown(x) for x in e.refs]
            cell = ", ".join(refs) if e.pointer is None else cell + ", " + ", ".join(refs)
        table.add_row(
            Text(entry), Text(e.fate), _tokens(e.tokens_before, e.tokens_after), Text(cell)
        )
    console.print(table)
    for why, reason in _reasons(ledger.messages):
        console.print(Text(f"{why}: {reason}", style="dim"))
    console.print(
        Text(
            "tokens: before → after, as the counter counts them; a log:N pointer is the "
            "message as the session was given it",
            style="dim",
        )
    )
    _write(buf)


def _reasons(messages: Sequence[LedgerEntry]) -> list[tuple[str, str]]:
    """Why, once per fate (the first message's reason; a summarized message's names
    its summary, shown in the table)."""
    seen: dict[str, str] = {}
    for e in messages:
        seen.setdefault(e.fate, e.reason)
    return list(seen.items())


# ------------------------------------------------------------------------- find


def _find(
    session: str,
    turn: int | None,
    store: str | None,
    config: Path | None,
    text: str,
    json_out: bool,
) -> None:
    with _reader(session, store, config) as (reader, no_memory):
        found = reader.find(text, turn)
        at = turn if turn is not None else reader.turns
        pointers = _Pointers(reader, no_memory)
        gone = pointers.gone(_pointers_of([f.entry for f in found]))
    if json_out:
        _print_json(
            {
                "session_id": session,
                "turn": at,
                "turns": reader.turns,
                "text": text,
                "found": [f.to_dict() for f in found],
                "gone": gone,
            }
        )
    else:
        _print_found(session, at, text, found, gone)
    if not found:
        raise typer.Exit(1)


def _where(e: LedgerEntry) -> str:
    if e.kind == "summary":
        return e.name or "a summary"
    out = f"log {e.position}" + (f" {e.role}" if e.role else "")
    return out + (f" ({', '.join(e.tools)})" if e.tools else "")


def _print_found(
    session: str, turn: int, text: str, found: Sequence[Found], gone: dict[str, str]
) -> None:
    console, buf = _buffered_console()

    def shown(pointer: str) -> str:
        return pointer if pointer not in gone else f"{pointer} (gone: {gone[pointer]})"

    if not found:
        console.print(Text(f"no message of session {session} holds {text!r} (turn {turn})"))
        _write(buf)
        return
    console.print(Text(f"{len(found)} place(s) hold {text!r} on turn {turn} of session {session}:"))
    for f in found:
        e = f.entry
        fate = e.fate + (f" into {e.into}" if e.into is not None else "")
        where = f"{_where(e)}: {fate}"
        if e.pointer is not None:
            where += f", original at {shown(e.pointer)}"
        if e.refs:
            where += ", recalled from " + ", ".join(shown(x) for x in e.refs)
        console.print(Text(where, style="bold"))
        console.print(Text(f"  {f.snippet}"))
    _write(buf)
