"""``ctxwise mcp``: serve an Engine's memory, facts, rules and gates over MCP (stdio).

The server (:mod:`ctxwise.integrations.mcp_server`, extra ``mcp``) speaks the
Model Context Protocol on standard input and output, so an MCP client (Claude
Code, Claude Desktop, an agent framework) starts it as a subprocess. A bad
``--config`` or ``--store`` fails before the server starts: one line on standard
error, exit code 2. Once it serves, a bad tool call is an MCP tool error, never
an exit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ctxwise.cli._store import STORE_HELP, DbAlias, given_store, writable_store
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
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help=f"The store ({STORE_HELP}; a new SQLite file is created); replaces the "
            "config's store (default: the config's, else ctxwise.db in the current folder).",
        ),
    ] = None,
    db: DbAlias = None,
) -> None:
    """Run the ctxwise MCP server over stdio (tools: remember, recall, facts, rules,
    select_context, compact, check_tool; resource: ctxwise://session/{id}/trace)."""

    def run() -> tuple[Any, Any]:
        from ctxwise.config import EngineConfig, load_config
        from ctxwise.engine import Engine
        from ctxwise.integrations import mcp_server

        cfg = load_config(config) if config is not None else EngineConfig()
        given = given_store(store, db)
        url = writable_store(given if given is not None else cfg.store_url())
        cfg = cfg.model_copy(update={"store": url})  # keeps the file's folder for paths
        return mcp_server, Engine(cfg)

    module, engine = _guard(run)
    try:
        module.serve(engine)
    finally:
        engine.close()
