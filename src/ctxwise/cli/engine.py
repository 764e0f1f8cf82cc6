"""CLI commands over the Engine: ``ctxwise replay`` and ``ctxwise trace``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from ctxwise.cli._cost import cost_tables, recorded_calls
from ctxwise.cli._progress import progress
from ctxwise.cli._store import (
    STORE_HELP,
    DbAlias,
    existing_session_store,
    given_store,
    sqlite_path,
    writable_store,
)
from ctxwise.cli._util import (
    MaxIdOpt,
    _buffered_console,
    _clip,
    _guard,
    _num_col,
    _print_json,
    _table,
    _text_col,
    _write,
    max_input_bytes,
    max_input_option,
)
from ctxwise.config import EngineConfig, load_config
from ctxwise.errors import UsageError
from ctxwise.formats import FORMATS, MAX_ID_CHARS, MAX_TRANSCRIPT_BYTES, read_transcripts
from ctxwise.formats.usage import most_used_model
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
            help="A ctxwise.toml for the Engine's other settings; when it names a store, "
            "the replayed session is kept there (--store replaces it).",
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
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help=f"Keep the replayed session in this store ({STORE_HELP}; a new SQLite "
            "file is created). Default: the --config's store when it names one, else memory.",
        ),
    ] = None,
    db: DbAlias = None,
    session: Annotated[
        str,
        typer.Option(
            "--session", help="The session id to replay into; it must not exist in the store yet."
        ),
    ] = "replay",
    max_input: Annotated[
        str | None, max_input_option("a transcript file", MAX_TRANSCRIPT_BYTES)
    ] = None,
    max_id_chars: MaxIdOpt = MAX_ID_CHARS,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    cost: Annotated[
        bool,
        typer.Option(
            "--cost",
            help="Price every turn with the provider's prompt cache simulated; for a "
            "Claude Code session, beside what the recording was billed.",
        ),
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="The model to price (and request) with; default: the config's, or for a "
            "Claude Code session without --config, the model most of its calls used.",
        ),
    ] = None,
) -> None:
    """Drive a recorded session through the Engine, checking every request.

    Before each assistant message the Engine builds the request it would send;
    each one is checked for the budget, for validity as the provider's request,
    and for every pinned fact and rule stated before it.
    """

    def run() -> tuple[ReplayReport, dict[str, Any]]:
        cfg = load_config(config) if config is not None else EngineConfig(store="memory")
        given = given_store(store, db)
        if given is not None:
            url, source = writable_store(given), "--store"
        elif config is not None and "store" in cfg.model_fields_set:
            # the config names its store: the session is kept there, as the Engine
            # keeps it (a relative SQLite path is the config folder's)
            url, source = writable_store(cfg.store_url()), "--config"
        else:
            url, source = "memory", "default"
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
        if model is not None and not model.strip():
            raise UsageError("--model must name a model")
        limit = max_input_bytes(max_input, MAX_TRANSCRIPT_BYTES)
        transcripts = read_transcripts(
            transcript,
            format,  # type: ignore[arg-type]
            max_bytes=limit,
            max_id_chars=max_id_chars,
        )
        if not -len(transcripts) <= index < len(transcripts):
            raise UsageError(
                f"--index {index} is out of range: {transcript} holds {len(transcripts)} "
                "transcript(s)"
            )
        chosen = transcripts[index]
        billed = (
            recorded_calls(transcript, limit) if cost and chosen.format == "claude-code" else []
        )
        if model is not None:
            cfg = cfg.model_copy(update={"model": model})
        elif cost and billed and (config is None or "model" not in cfg.model_fields_set):
            cfg = cfg.model_copy(update={"model": most_used_model(billed, cfg.model)})
        path = sqlite_path(url)
        where = {"kind": store_kind(url), "from": source, "path": path and str(path)}
        with progress(f"replaying {transcript.name}", enabled=not json_out) as report:
            result = replay(
                chosen,
                budget=budget,
                config=cfg,
                repair=repair,
                session_id=session,
                progress=report,
                cost=cost,
                recorded=billed,
            )
        return result, where

    report, where = _guard(run)
    data = {**report.to_dict(), "store": where}
    if json_out:
        _print_json(data)
        return
    console, buf = _buffered_console()
    table = _table(f"replay of {transcript.name} at {report.budget:,} tokens")
    _text_col(table, "key")
    _num_col(table, "value")
    for key in REPLAY_KEYS:
        value = data[key]
        table.add_row(key, f"{value:,}" if isinstance(value, int) else str(value))
    console.print(table)
    if report.cost is not None:
        console.print(cost_tables(report.cost))
    for line in report.problems:
        console.print(Text(f"  {_clip(line)}"))
    origin = " (the store --config names)" if where["from"] == "--config" else ""
    if where["path"] is not None:
        console.print(Text(f"session {session!r} kept in {where['path']}{origin}"))
        # one line whatever its length, so it can be copied as it is
        next_command = f"next: ctxwise trace {session} --store {where['path']}"
        console.print(Text(next_command), soft_wrap=True)
    elif where["kind"] == "postgresql":
        console.print(Text(f"session {session!r} kept in the PostgreSQL store{origin}"))
    _write(buf)


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


def trace_cmd(
    session: Annotated[str, typer.Argument(help="The session id.")],
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help=f"The store to read ({STORE_HELP}); it must exist: nothing is created.",
            show_default="ctxwise.db",
        ),
    ] = None,
    db: DbAlias = None,
    turn: Annotated[int | None, typer.Option("--turn", help="Only this turn.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show what each turn of a session did: route, sources, sections, edits, tokens."""

    def run() -> list[Trace]:
        # read-only: a store that does not exist is refused, never created
        url = existing_session_store(given_store(store, db) or "ctxwise.db")
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
    table = _table(f"session {session}")
    _num_col(table, "turn")
    _text_col(table, "route → sources")
    _text_col(table, "window")
    _text_col(table, "tools")
    _num_col(table, "tokens")
    _num_col(table, "prefix")
    _num_col(table, "ms")
    for t in traces:
        route = t.route.label or f"({t.route.reason})"
        kept = sum(s.status != "dropped" for s in t.sections)
        dropped = [s.name for s in t.sections if s.status == "dropped"]
        window = [f"{kept} kept" + (f", dropped {', '.join(dropped)}" if dropped else "")]
        if t.cleared is not None:
            window.append(f"cleared {t.cleared.tool_uses}")
        if t.compacted is not None:
            window.append(f"compacted {t.compacted.summarized_messages}")
        table.add_row(
            str(t.turn),
            Text(f"{route} → {', '.join(t.chosen) or '-'}"),
            Text("\n".join(window)),
            Text(_tool_events(t) or "-"),
            f"{t.tokens.total:,}/{t.tokens.available:,}",
            f"{t.tokens.stable_prefix:,}",
            f"{t.timings_ms.get('total', 0.0):.1f}",
        )
    console.print(table)
    console.print(
        Text(
            "window: sections kept (and dropped), tool uses cleared, messages compacted; "
            "tokens: sent/available; prefix: tokens of the cache-stable prefix",
            style="dim",
        )
    )
    _write(buf)
