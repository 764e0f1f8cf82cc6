"""The proxy under load, loopback only: ``ctxwise serve`` between clients and a fake upstream.

Per configuration (SQLite with one worker; PostgreSQL with four, when
``CTXWISE_PG_DSN`` names a server), ``--clients`` concurrent clients run
``--turns`` turns each over ``--sessions`` conversations through ``POST /v1/messages``
(each request the conversation's whole history plus a new user message, named by
``x-ctxwise-session``), the upstream a :class:`ctxwise.testing.upstream.FakeUpstream`.
A conversation is a sequence: a client takes one that no other client is extending
(chosen with a seeded generator), sends its next turn, appends the reply, and lets
it go, so the server sees consistent histories while every session is written by
many clients and the workers serve several sessions at once.

Measured in the same run:

- per request, proxied: latency through ``ctxwise serve`` to the fake and back;
- per request, direct (the baseline): the same clients, schedule and conversations
  sent straight to the fake upstream, before the proxied run; the overhead is the
  difference of the two distributions' p50 and p99, and their ratio;
- errors (any status but 200, any transport error) and, afterwards, every session's
  log read from the tenant's partition: each acknowledged user turn there exactly once
  and in order (lost and duplicated turns counted).

With ``--kill`` (PostgreSQL, several workers), one worker is sent SIGKILL halfway
through; clients whose request died with it retry it once the service answers again,
and the log check covers every turn acknowledged before and after.

Writes ``benchmarks/results/bench_proxy.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from _common import fmt_ms, percentile, print_table, ratio, say, write_results
from ctxwise.server.keys import KeyStore
from ctxwise.sessions import open_session_store
from ctxwise.tenancy import partition
from ctxwise.testing.upstream import FakeUpstream

MODEL = "claude-sonnet-4-5"


@dataclass
class Conversation:
    session: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    acknowledged: list[str] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass
class Run:
    proxied_ns: list[int] = field(default_factory=list)
    direct_ns: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    retried: int = 0
    killed: list[int] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(
    store: str, workers: int, upstream: str, config: Path
) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    cmd = [
        sys.executable, "-m", "ctxwise", "serve", "--store", store, "--port", str(port),
        "--workers", str(workers), "--anthropic-upstream", upstream, "--config", str(config),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return proc, base
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"ctxwise serve failed: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
        time.sleep(0.1)
    raise SystemExit("ctxwise serve did not become ready")


def _busiest_worker(master: int) -> int | None:
    """The uvicorn worker of ``master`` that has used the most CPU (not the
    multiprocessing resource tracker), or ``None``."""
    out = subprocess.run(
        ["ps", "-o", "pid=,time=,args=", "--ppid", str(master)], capture_output=True, text=True
    )
    workers = [
        (line.split(None, 2)[1], int(line.split(None, 2)[0]))
        for line in out.stdout.splitlines()
        if line.strip() and "resource_tracker" not in line
    ]
    return max(workers)[1] if workers else None


async def _turn(
    client: httpx.AsyncClient,
    base: str,
    key: str | None,
    conv: Conversation,
    n: int,
    samples: list[int],
    run: Run,
) -> None:
    text = f"turn {n} of {conv.session}: please check order {1000 + n} and report"
    body = {
        "model": MODEL,
        "max_tokens": 256,
        "messages": [*conv.messages, {"role": "user", "content": text}],
    }
    headers = {"x-api-key": "sk-fake"}
    if key is not None:  # through ctxwise (else straight to the fake: the baseline)
        headers |= {"x-ctxwise-key": key, "x-ctxwise-session": conv.session}
    for attempt in range(200):  # a killed worker: wait until the service answers again
        start = time.perf_counter_ns()
        try:
            r = await client.post(f"{base}/v1/messages", json=body, headers=headers)
        except httpx.TransportError as e:
            run.retried += 1
            if attempt == 199:
                run.errors.append(f"{conv.session} turn {n}: {type(e).__name__}")
                return
            await asyncio.sleep(0.05)
            continue
        samples.append(time.perf_counter_ns() - start)
        if r.status_code != 200:
            run.errors.append(f"{conv.session} turn {n}: HTTP {r.status_code} {r.text[:200]}")
            return
        reply = r.json()
        conv.messages = [*body["messages"], {"role": "assistant", "content": reply["content"]}]
        conv.acknowledged.append(text)
        return


async def _load(
    base: str, key: str | None, args: argparse.Namespace, run: Run, kill: int | None
) -> list[Conversation]:
    """``args.clients`` clients, ``args.turns`` turns each, over ``args.sessions``
    conversations (module docstring), against ``base``: ctxwise when ``key`` is
    given, else the fake upstream itself. The same seed gives the same schedule."""
    rng = random.Random(args.seed)
    convs = [Conversation(f"s{i:02d}") for i in range(args.sessions)]
    samples = run.proxied_ns if key is not None else run.direct_ns
    limits = httpx.Limits(max_connections=args.clients * 2, max_keepalive_connections=args.clients)
    total = args.clients * args.turns
    done = 0
    killed = False

    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def worker(seed: int) -> None:
            nonlocal done, killed
            mine = random.Random(seed)
            for _ in range(args.turns):
                while True:
                    conv = convs[mine.randrange(len(convs))]
                    if not conv.lock.locked():
                        break
                    await asyncio.sleep(0)
                async with conv.lock:
                    await _turn(client, base, key, conv, len(conv.acknowledged), samples, run)
                done += 1
                if kill is not None and not killed and done >= total // 2:
                    killed = True
                    victim = _busiest_worker(kill)
                    if victim is not None:
                        os.kill(victim, signal.SIGKILL)
                        run.killed.append(victim)
                        say(f"  SIGKILL worker {victim} at {done} of {total} turns")

        await asyncio.gather(*(worker(rng.randrange(2**32)) for _ in range(args.clients)))
    return convs


def _check_logs(store: str, tenant: str, convs: list[Conversation]) -> tuple[int, int]:
    """Acknowledged user turns missing from, and repeated in, the sessions' logs."""
    part = partition(store, tenant)
    sessions = open_session_store(part.url, schema=part.schema)
    lost = duplicated = 0
    try:
        for conv in convs:
            texts = [
                "".join(b.get("text", "") for b in m.get("content", []) if isinstance(b, dict))
                for m in sessions.log(conv.session)
                if m.get("role") == "user"
            ]
            for text in conv.acknowledged:
                found = texts.count(text)
                lost += found == 0
                duplicated += max(0, found - 1)
    finally:
        sessions.close()
    return lost, duplicated


def configuration(
    name: str, store: str, workers: int, args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    say(f"{name}: {args.clients} clients x {args.turns} turns over {args.sessions} sessions")
    config = tmp / f"{name}.toml"
    config.write_text(f'model = "{MODEL}"\nbudget = 8000\n')
    tenant = f"bench_{uuid.uuid4().hex[:12]}"  # a fresh partition per run
    with KeyStore(store) as keys:
        _, key = keys.create(tenant, f"bench_proxy {name}")
    with FakeUpstream() as fake:
        run = Run()
        asyncio.run(_load(fake.url, None, args, run, None))  # the baseline, same load
        proc, base = _serve(store, workers, fake.url, config)
        try:
            kill = proc.pid if args.kill and workers > 1 else None
            started = time.perf_counter()
            convs = asyncio.run(_load(base, key, args, run, kill))
            seconds = time.perf_counter() - started
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    lost, duplicated = _check_logs(store, tenant, convs)
    if store.startswith("postgres"):
        with psycopg.connect(store, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS ctxwise_t_{tenant} CASCADE")
    p = {q: percentile(run.proxied_ns, q * 100) / 1e6 for q in (0.5, 0.99)}
    d = {q: percentile(run.direct_ns, q * 100) / 1e6 for q in (0.5, 0.99)}
    return {
        "name": name,
        "workers": workers,
        "turns": sum(len(c.acknowledged) for c in convs),
        "errors": len(run.errors),
        "error_samples": run.errors[:5],
        "retried_transport_errors": run.retried,
        "lost": lost,
        "duplicated": duplicated,
        "seconds": round(seconds, 1),
        "proxied_ms": {"p50": round(p[0.5], 2), "p99": round(p[0.99], 2)},
        "direct_ms": {"p50": round(d[0.5], 2), "p99": round(d[0.99], 2)},
        "overhead_ms": {"p50": round(p[0.5] - d[0.5], 2), "p99": round(p[0.99] - d[0.99], 2)},
        "ratio": {"p50": round(ratio(p[0.5], d[0.5]), 2), "p99": round(ratio(p[0.99], d[0.99]), 2)},
        "killed_a_worker": bool(run.killed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kill", action="store_true", help="SIGKILL a worker halfway (PostgreSQL)")
    parser.add_argument("--only", choices=("sqlite", "postgres"), default=None)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "sqlite"):
            rows.append(configuration("sqlite-1", f"sqlite:///{tmp}/svc.db", 1, args, Path(tmp)))
        dsn = os.environ.get("CTXWISE_PG_DSN")
        if args.only in (None, "postgres"):
            if not dsn:
                say("no CTXWISE_PG_DSN: the PostgreSQL configuration is skipped")
            else:
                rows.append(configuration("postgres-4", dsn, 4, args, Path(tmp)))
    print_table(
        "proxy under load (loopback; ms per request)",
        [
            "config",
            "turns",
            "errors",
            "lost",
            "dup",
            "proxied p50/p99",
            "direct p50/p99",
            "overhead p50/p99",
        ],
        [
            [
                r["name"],
                r["turns"],
                r["errors"],
                r["lost"],
                r["duplicated"],
                f"{fmt_ms(r['proxied_ms']['p50'])} / {fmt_ms(r['proxied_ms']['p99'])}",
                f"{fmt_ms(r['direct_ms']['p50'])} / {fmt_ms(r['direct_ms']['p99'])}",
                f"{fmt_ms(r['overhead_ms']['p50'])} / {fmt_ms(r['overhead_ms']['p99'])}",
            ]
            for r in rows
        ],
    )
    write_results(
        "bench_proxy", {"args": vars(args), "configurations": rows}, ["fastapi", "uvicorn", "httpx"]
    )


if __name__ == "__main__":
    main()
