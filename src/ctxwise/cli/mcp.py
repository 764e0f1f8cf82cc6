"""``ctxwise mcp``: serve an Engine's memory, facts, rules and gates over MCP (stdio).

The server (:mod:`ctxwise.integrations.mcp_server`, extra ``mcp``) speaks the
Model Context Protocol on standard input and output, so an MCP client (Claude
Code, Claude Desktop, an agent framework) starts it as a subprocess.

It serves one tenant (``--tenant``, default ``default``): its Engine is built on
that tenant's partition of the store (:class:`ctxwise.server.tenants.TenantEngine`),
never on the store's root. Within it, one namespace (``--namespace``): a client's
session ``ID`` is the stored session ``NAMESPACE/ID``, and ``--session`` (repeated)
narrows the sessions a client may name to a list. The file tools read and write
only inside the ``--root`` folders (none by default: they refuse), files of at
most ``--max-file-bytes``.

A bad ``--config``, ``--store``, tenant, namespace, session or root fails before
the server starts: one line on standard error, exit code 2. Once it serves, a bad
tool call is an MCP tool error, never an exit.
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
            help=f"The store ({STORE_HELP}); replaces the config's store (default: the "
            "config's, else ctxwise.db in the current folder). The server uses the "
            "tenant's partition of it: for SQLite the file TENANT.db in the folder "
            "NAME.tenants beside it, for PostgreSQL the schema ctxwise_t_TENANT.",
        ),
    ] = None,
    db: DbAlias = None,
    tenant: Annotated[
        str,
        typer.Option(
            "--tenant",
            help="The tenant served (lowercase letters, digits, _): the only "
            "partition of the store the server opens.",
        ),
    ] = "default",
    namespace: Annotated[
        str,
        typer.Option(
            "--namespace",
            help="The namespace served: a client's session ID is the stored session "
            "NAMESPACE/ID, and it can name no other.",
        ),
    ] = "default",
    session: Annotated[
        list[str] | None,
        typer.Option(
            "--session",
            help="Serve only this session id of the namespace (repeat for more; "
            "default: any of its sessions).",
        ),
    ] = None,
    root: Annotated[
        list[Path] | None,
        typer.Option(
            "--root",
            help="A folder whose files select_context and compact may read and write "
            "(repeat for more; default: none, and those tools refuse files). A client "
            "offering MCP roots narrows them further.",
        ),
    ] = None,
    max_file_bytes: Annotated[
        int,
        typer.Option(
            "--max-file-bytes",
            min=1,
            help="The largest transcript file read; a larger one is refused before it is read.",
        ),
    ] = 16 * 2**20,
) -> None:
    """Run the ctxwise MCP server over stdio on one tenant and namespace (tools:
    remember, recall, facts, rules, select_context, compact, check_tool; resource:
    ctxwise://session/{id}/trace)."""

    def run() -> tuple[Any, Any, Any]:
        from ctxwise.config import EngineConfig, load_config
        from ctxwise.integrations import mcp_server
        from ctxwise.server.tenants import TenantEngine

        cfg = load_config(config) if config is not None else EngineConfig()
        given = given_store(store, db)
        url = writable_store(given if given is not None else cfg.store_url())
        cfg = cfg.model_copy(update={"store": url})  # keeps the file's folder for paths
        scope = mcp_server.Scope.of(
            namespace, sessions=session, roots=root or (), max_file_bytes=max_file_bytes
        )
        return mcp_server, scope, TenantEngine(cfg, tenant)

    module, scope, owner = _guard(run)
    try:
        module.serve(owner.engine, scope=scope)
    finally:
        owner.close()
