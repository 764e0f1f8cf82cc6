"""``ctxwise inspect-ui``: the web inspector over one local store, without the service.

It serves :mod:`ctxwise.server.inspect` at ``/inspect`` on uvicorn (extra
``server``), reading ``--store`` the way ``ctxwise trace`` does: the store must
exist and hold ctxwise sessions, nothing is created, and a store a newer ctxwise
wrote is refused with its version. It asks for no key, so it listens on the
loopback address unless ``--host`` says otherwise. The memory store in the same
file (or database) is opened too when it can be read without writing to it, so
``memory:`` and ``result:`` pointers open (``--config``: the namespace and embedder
they were written with). A bad option or store fails
before anything listens: one line on standard error, exit code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ctxwise.cli._store import STORE_HELP, existing_session_store, read_only_memory
from ctxwise.cli._util import _guard
from ctxwise.config import EngineConfig, load_config

__all__ = ["inspect_ui_cmd"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def inspect_ui_cmd(
    store: Annotated[
        str,
        typer.Option("--store", help=f"The store to read ({STORE_HELP}); nothing is written."),
    ],
    host: Annotated[
        str, typer.Option("--host", help="The address to listen on (no keys: keep it local).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="The port to listen on.")] = 8788,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="The ctxwise.toml the sessions were written with: its memory namespace "
            "and embedder, to open memory and stored-result pointers.",
        ),
    ] = None,
) -> None:
    """Serve the web inspector over a local store, read-only (extra server)."""

    def build() -> tuple[str, Any]:
        from ctxwise.errors import UsageError
        from ctxwise.server.inspect import StoreSource, local_app
        from ctxwise.sessions import open_session_store

        if not 0 < port < 65536:
            raise UsageError(f"--port {port}: give a port from 1 to 65535")
        cfg = load_config(config) if config is not None else EngineConfig()
        url = existing_session_store(store)
        sessions = open_session_store(url)
        try:
            memory, _ = read_only_memory(url, cfg)
        except BaseException:
            sessions.close()
            raise
        return url, local_app(StoreSource(sessions, memory, namespace=cfg.memory.namespace))

    url, app = _guard(build)
    import uvicorn

    where = f"[{host}]" if ":" in host else host
    print(
        f"ctxwise inspect-ui: http://{where}:{port}/inspect/ (store {url}, read-only)",
        file=sys.stderr,
    )
    if host not in _LOOPBACK:
        print(
            "ctxwise inspect-ui: warning: no key is asked for; anyone who reaches "
            f"{host}:{port} reads every session of the store",
            file=sys.stderr,
        )
    uvicorn.run(app, host=host, port=port, log_level="info")
