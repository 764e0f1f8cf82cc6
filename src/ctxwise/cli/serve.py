"""``ctxwise serve`` (the HTTP service: proxy and REST API) and ``ctxwise keys``.

``serve`` runs :mod:`ctxwise.server.app` on uvicorn (extra ``server``): ``--store``
holds the API keys and every tenant's partition (a SQLite file for one worker on
one host, PostgreSQL for several workers or hosts), ``--config`` the Engine
settings every tenant's Engine is built from. A bad option, config or store fails
before the server starts: one line on standard error, exit code 2.

``keys create TENANT`` prints a new key once (only its digest is stored);
``keys list`` shows ids, tenants, labels and whether each is revoked, never a
secret; ``keys revoke ID`` ends a key at once.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ctxwise.cli._store import STORE_HELP, writable_store
from ctxwise.cli._util import _buffered_console, _guard, _print_json, _write

if TYPE_CHECKING:
    from ctxwise.server.keys import ApiKey
    from ctxwise.server.settings import ServeSettings

__all__ = ["keys_app", "serve_cmd"]

keys_app = typer.Typer(
    help="API keys of ctxwise serve: one tenant each, stored as a digest.", no_args_is_help=True
)

StoreOpt = Annotated[
    str,
    typer.Option(
        "--store",
        help=f"The service's store ({STORE_HELP}): keys and every tenant's partition.",
    ),
]


def serve_cmd(
    store: StoreOpt = "ctxwise.db",
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="A ctxwise.toml for every tenant's Engine (its store is replaced by --store).",
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="The port to listen on.")] = 8787,
    workers: Annotated[
        int, typer.Option("--workers", help="Worker processes (above 1: a PostgreSQL store).")
    ] = 1,
    max_body_bytes: Annotated[
        int, typer.Option("--max-body-bytes", help="Larger request bodies get 413.")
    ] = 32 * 1024 * 1024,
    anthropic_upstream: Annotated[
        str, typer.Option("--anthropic-upstream", help="Where Anthropic requests go.")
    ] = "https://api.anthropic.com",
    openai_upstream: Annotated[
        str, typer.Option("--openai-upstream", help="Where OpenAI requests go.")
    ] = "https://api.openai.com",
    upstream_timeout: Annotated[
        float, typer.Option("--upstream-timeout", help="Seconds to wait for the upstream.")
    ] = 600.0,
) -> None:
    """Serve the provider-compatible proxy and the REST API (extra server)."""

    def build() -> tuple[ServeSettings, Any]:
        from pydantic import ValidationError

        from ctxwise.errors import UsageError
        from ctxwise.server.app import SETTINGS_ENV, create_app
        from ctxwise.server.settings import ServeSettings

        url = writable_store(store)
        if workers > 1 and url.startswith(("sqlite", "memory")):
            raise UsageError("--workers above 1 needs a PostgreSQL --store (SQLite: one worker)")
        try:
            cfg = ServeSettings(
                store=url,
                config=config.resolve() if config is not None else None,
                host=host,
                port=port,
                workers=workers,
                max_body_bytes=max_body_bytes,
                anthropic_upstream=anthropic_upstream,
                openai_upstream=openai_upstream,
                upstream_timeout=upstream_timeout,
            )
        except ValidationError as e:
            first = e.errors()[0]
            name = str(first["loc"][0]).replace("_", "-")
            raise UsageError(f"--{name}: {first['msg']}") from None
        cfg.engine_config()  # a bad --config fails here, before anything listens
        os.environ[SETTINGS_ENV] = cfg.model_dump_json()
        # one worker serves this app; several build theirs from SETTINGS_ENV
        return cfg, create_app(cfg) if workers == 1 else None

    cfg, app = _guard(build)
    import uvicorn

    print(f"ctxwise serve: http://{cfg.host}:{cfg.port} (store {cfg.store})", file=sys.stderr)
    if app is not None:
        uvicorn.run(app, host=cfg.host, port=cfg.port, log_level="info")
        return
    uvicorn.run(
        "ctxwise.server.app:app_from_env",
        factory=True,
        host=cfg.host,
        port=cfg.port,
        workers=cfg.workers,
        log_level="info",
    )


def _key_json(key: ApiKey) -> dict[str, object]:
    return {
        "key_id": key.key_id,
        "tenant": key.tenant,
        "label": key.label,
        "created_at": key.created_at,
        "revoked_at": key.revoked_at,
    }


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return dt.datetime.fromtimestamp(stamp, dt.UTC).strftime("%Y-%m-%d %H:%M")


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Argument(help="The tenant the key opens.")],
    store: StoreOpt = "ctxwise.db",
    label: Annotated[str, typer.Option("--label", help="A note on whose key it is.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Create a key for TENANT and print it (this once: only its digest is kept)."""
    from ctxwise.server.keys import KeyStore

    def create() -> tuple[ApiKey, str]:
        with KeyStore(writable_store(store)) as keys:
            return keys.create(tenant, label)

    info, plain = _guard(create)
    if as_json:
        _print_json({**_key_json(info), "key": plain})
        return
    print(plain)
    print(f"ctxwise: key {info.key_id} for tenant {info.tenant}: shown once", file=sys.stderr)


@keys_app.command("list")
def keys_list(
    store: StoreOpt = "ctxwise.db",
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the keys (ids, tenants, labels, created and revoked; never a secret)."""
    from rich.table import Table

    from ctxwise.server.keys import KeyStore

    def read() -> list[ApiKey]:
        with KeyStore(writable_store(store)) as keys:
            return keys.list(tenant)

    found = _guard(read)
    if as_json:
        _print_json({"keys": [_key_json(k) for k in found]})
        return
    table = Table("key id", "tenant", "label", "created (UTC)", "revoked (UTC)")
    for k in found:
        table.add_row(k.key_id, k.tenant, k.label, _when(k.created_at), _when(k.revoked_at))
    console, buf = _buffered_console()
    console.print(table)
    _write(buf)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (as keys list shows it).")],
    store: StoreOpt = "ctxwise.db",
) -> None:
    """Revoke a key: it authenticates nothing from now on (it stays listed)."""
    from ctxwise.server.keys import KeyStore

    def revoke() -> ApiKey:
        with KeyStore(writable_store(store)) as keys:
            return keys.revoke(key_id)

    info = _guard(revoke)
    print(f"ctxwise: key {info.key_id} of tenant {info.tenant} revoked", file=sys.stderr)
