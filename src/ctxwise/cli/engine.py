"""CLI commands over the Engine: ``ctxwise replay`` and ``ctxwise trace``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ctxwise.cli._util import _buffered_console, _guard, _print_json, _write
from ctxwise.config import EngineConfig, load_config
from ctxwise.errors import UsageError
from ctxwise.formats import FORMATS, read_transcripts
from ctxwise.memory.urls import store_kind
from ctxwise.replay import ReplayReport, replay
from ctxwise.sessions import open_session_store
from ctxwise.trace import Trace

__all__ = ["REPLAY_KEYS", "replay_cmd", "trace_cmd"]

REPLAY_KEYS = (
    "turns",
    "max_window_tokens",
    "over_budget_turns",
    "invalid_requests",
    "pinned_missing",
    "compactions",
    "clears",
    "tokens_sent",
    "tokens_full",
    "sent_ratio",
    "p50_ms",
    "p99_ms",
)


def replay_cmd(
    transcript: Annotated[
        Path,
        typer.Argument(
            help="A recorded session: Claude Code JSONL, Anthropic or OpenAI messages, "
            "tau-bench or LiveMCPBench."
        ),
    ],
    budget: Annotated[int, typer.Option("--budget", help="Tokens of each request.")],
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="A ctxwise.toml for the Engine's other settings (its store is replaced by "
            "an in-memory one unless --db is given).",
        ),
    ] = None,
    index: Annotated[
        int, typer.Option("--index", help="Which transcript of a multi-transcript file.")
    ] = 0,
    format: Annotated[
        str, typer.Option("--format", help=f"One of: {', '.join(FORMATS)}.")
    ] = "auto",
    render: Annotated[
        str | None, typer.Option("--render", help="anthropic | openai (default: the config's).")
    ] = None,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Repair tool pairing problems in the recording (reused ids, orphan results) "
            "instead of refusing it.",
        ),
    ] = False,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Keep the replayed session in this store URL (default: memory)."),
    ] = None,
    session: Annotated[
        str,
        typer.Option(
            "--session", help="The session id to replay into; it must not exist in --db yet."
        ),
    ] = "replay",
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Drive a recorded session through the Engine, checking every request.

    Before each assistant message the Engine builds the request it would send;
    each one is checked for the budget, for validity as the provider's request,
    and for every pinned fact and rule stated before it.
    """

    def run() -> ReplayReport:
        cfg = load_config(config) if config is not None else EngineConfig(store="memory")
        url = db if db is not None else "memory"
        if db is not None:
            store_kind(db)
            scheme, _, rest = db.partition("://")
            relative = rest[1:] if rest.startswith("/") and rest[1:2] != "/" else ""
            if scheme == "sqlite" and relative not in ("", ":memory:"):
                # a relative --db path is the shell's, not the config folder's (where
                # the config's own relative paths resolve)
                url = f"sqlite:///{Path(relative).resolve()}"
        # base_dir is no key of the dump: without it the config's relative files
        # (system_file, router.file, gates.file) were looked for in the working folder
        update: dict[str, Any] = {"store": url, "base_dir": cfg.base_dir}
        if render is not None:
            if render not in ("anthropic", "openai"):
                raise UsageError(f"unknown render target {render!r}; choose anthropic or openai")
            update["render"] = render
        cfg = EngineConfig.model_validate({**cfg.model_dump(), **update})
        if isinstance(budget, bool) or budget < 1:
            raise UsageError(f"--budget must be a positive number of tokens, got {budget}")
        transcripts = read_transcripts(transcript, format)  # type: ignore[arg-type]
        if not -len(transcripts) <= index < len(transcripts):
            raise UsageError(
                f"--index {index} is out of range: {transcript} holds {len(transcripts)} "
                "transcript(s)"
            )
        return replay(
            transcripts[index], budget=budget, config=cfg, repair=repair, session_id=session
        )

    report = _guard(run)
    data = report.to_dict()
    if json_out:
        _print_json(data)
        return
    console, buf = _buffered_console()
    # a file name or a recording's text can hold '[...]': shown as text, not rich markup
    table = Table(title=escape(f"replay of {transcript.name} at {report.budget:,} tokens"))
    table.add_column("key")
    table.add_column("value", justify="right")
    for key in REPLAY_KEYS:
        value = data[key]
        table.add_row(key, f"{value:,}" if isinstance(value, int) else str(value))
    console.print(table)
    for line in report.problems:
        console.print(Text(f"  {line}"))
    _write(buf)


def _store_url(db: str) -> str:
    """A store URL, or a plain path taken as a SQLite file."""
    if "://" in db or db in ("memory",):
        return db
    return f"sqlite:///{Path(db).resolve()}"


def _tool_events(t: Trace) -> str:
    """What ctxwise did with tool calls since the turn before, one item each:
    ``search found N``, ``fetch_more``, ``memory``, ``trimmed NAME A→B``, ``stored
    NAME A→B`` (tokens as the tool gave the result and as the model gets it)."""
    out = []
    for e in t.tool_events:
        if e.kind == "search":
            out.append(f"search found {len(e.found)}")
        elif e.kind in ("trimmed", "stored"):
            out.append(f"{e.kind} {e.name} {e.tokens_before:,}→{e.tokens_after:,}")
        else:
            out.append(e.kind)
        if e.is_error:
            out[-1] += " (error)"
    return ", ".join(out)


def _require_session_file(path: Path, db: str) -> None:
    """A UsageError unless ``path`` is a SQLite file holding ctxwise's session tables:
    it is looked at read-only first, so ``trace`` never adds tables to a file that
    is not a ctxwise store (opening a store migrates it)."""
    import sqlite3

    if path.is_dir():
        raise UsageError(f"no store at {db!r}: it is a folder, not a SQLite file")
    if not path.is_file():
        raise UsageError(f"no store at {db!r}: the file does not exist")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table'"
                " AND name = 'ctxwise_session_migrations'"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise UsageError(f"{db!r} is not a ctxwise store: {e}") from None
    if found is None:
        raise UsageError(f"{db!r} is not a ctxwise store: it holds no sessions")


def trace_cmd(
    session: Annotated[str, typer.Argument(help="The session id.")],
    db: Annotated[
        str,
        typer.Option(
            "--db", help="The store: a SQLite file path or a URL (sqlite:///…, postgresql://…)."
        ),
    ] = "ctxwise.db",
    turn: Annotated[int | None, typer.Option("--turn", help="Only this turn.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show what each turn of a session did: route, sources, sections, edits, tokens."""

    def run() -> list[Trace]:
        url = _store_url(db)
        kind = store_kind(url)
        if kind == "sqlite":
            _require_session_file(Path(url.partition("://")[2][1:]), db)
        sessions = open_session_store(url)
        try:
            sessions.require(session)
            traces = [Trace.from_stored(t, session_id=session) for t in sessions.traces(session)]
        finally:
            sessions.close()
        if turn is not None:
            traces = [t for t in traces if t.turn == turn]
            if not traces:
                raise UsageError(f"session {session!r} has no turn {turn}")
        return traces

    traces = _guard(run)
    if json_out:
        _print_json([t.to_dict() for t in traces])
        return
    console, buf = _buffered_console()
    # a session id, a label or a section name can hold '[...]' ('s[/]' raised MarkupError)
    table = Table(title=escape(f"session {session}"))
    for name in (
        "turn",
        "route",
        "sources",
        "sections",
        "edits",
        "tools",
        "tokens",
        "prefix",
        "ms",
    ):
        table.add_column(
            name, justify="right" if name in ("turn", "tokens", "prefix", "ms") else "left"
        )
    for t in traces:
        route = t.route.label or f"({t.route.reason})"
        kept = sum(s.status != "dropped" for s in t.sections)
        dropped = [s.name for s in t.sections if s.status == "dropped"]
        sections = f"{kept} kept" + (f", dropped {', '.join(dropped)}" if dropped else "")
        edits = []
        if t.cleared is not None:
            edits.append(f"cleared {t.cleared.tool_uses}")
        if t.compacted is not None:
            edits.append(f"compacted {t.compacted.summarized_messages}")
        table.add_row(
            str(t.turn),
            Text(route),
            Text(", ".join(t.chosen) or "-"),
            Text(sections),
            ", ".join(edits) or "-",
            Text(_tool_events(t) or "-"),
            f"{t.tokens.total:,}/{t.tokens.available:,}",
            f"{t.tokens.stable_prefix:,}",
            f"{t.timings_ms.get('total', 0.0):.1f}",
        )
    console.print(table)
    _write(buf)
