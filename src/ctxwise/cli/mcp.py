"""``ctxwise mcp``: serve an Engine's memory, facts, rules and gates over MCP (stdio).

The server (:mod:`ctxwise.integrations.mcp_server`, extra ``mcp``) speaks the
Model Context Protocol on standard input and output, so an MCP client (Claude
Code, Claude Desktop, an agent framework) starts it as a subprocess. A bad
``--config`` or ``--db`` fails before the server starts: one line on standard
error, exit code 2. Once it serves, a bad tool call is an MCP tool error, never
an exit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ctxwise.cli._util import _guard

__all__ = ["mcp_cmd"]


def mcp_cmd(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="A ctxwise.toml for the Engine (gates, facts, memory, counter, …); "
            "default: every default.",
        ),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="The store: a SQLite file path or a URL (sqlite:///…, postgresql://…, "
            "memory); replaces the config's store (default: the config's, else ctxwise.db "
            "in the current folder).",
        ),
    ] = None,
) -> None:
    """Run the ctxwise MCP server over stdio (tools: remember, recall, facts, rules,
    select_context, compact, check_tool; resource: ctxwise://session/{id}/trace)."""
    from ctxwise.cli.engine import _store_url

    def run() -> tuple[Any, Any]:
        from ctxwise.config import EngineConfig, load_config
        from ctxwise.engine import Engine
        from ctxwise.integrations import mcp_server
        from ctxwise.memory.urls import store_kind

        cfg = load_config(config) if config is not None else EngineConfig()
        if db is not None:
            url = _store_url(db)
            store_kind(url)
            cfg = cfg.model_copy(update={"store": url})  # keeps the file's folder for paths
        return mcp_server, Engine(cfg)

    module, engine = _guard(run)
    try:
        module.serve(engine)
    finally:
        engine.close()
