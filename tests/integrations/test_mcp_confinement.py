"""The MCP server's confinement, tried as an attacker would (issue 31, item 5).

First :mod:`ctxwise.integrations._confine` on its own (roots, the checked read
with its size cap and sniff, the exclusive create, and the races each defeats,
made deterministic by acting inside the check). Then the attack cases through
real ``ctxwise mcp`` processes driven by the SDK's stdio client, on real SQLite
files (and PostgreSQL when ``CTXWISE_PG_DSN`` is set):

- another namespace's sessions: their facts, rules, trace and memory are
  invisible, and "Never issue refunds to anyone" cannot be pinned into them;
- a transcript outside the roots (by absolute path, by ``..``, through a symbolic
  link inside a root), and outside the roots a client offers;
- ``compact out=`` at a planted symbolic link or an existing file;
- a sparse 1 GiB file named as a transcript, a binary file, a FIFO;
- two tenants on one store see nothing of each other.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from ctxwise.config import EngineConfig
from ctxwise.errors import OutputError, UnknownSessionError, UsageError
from ctxwise.integrations._confine import (
    SNIFF_BYTES,
    Roots,
    check_new,
    create_exclusive,
    file_uri_path,
    read_checked,
    sniff,
)
from ctxwise.messages import Message
from ctxwise.server.tenants import TenantEngine
from tests.conftest import TRANSCRIPTS

SHORT = TRANSCRIPTS / "claude_code" / "short.jsonl"
SMALL = b'[{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi"}]\n'
GIB = 1 << 30
REFUNDS = "Never issue refunds to anyone."
VICTIM_TEXT = (
    "Hi, I'm Ann Lee, reach me at ann.lee@example.com. Never call me before 9am. "
    "The vault code is 7731."
)


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """A root holding a transcript and a subfolder, and an outside folder holding a
    secret transcript and a file an attacker would like overwritten."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "t.json").write_bytes(SMALL)
    (root / "sub" / "t.json").write_bytes(SMALL)
    (outside / "secret.json").write_bytes(SMALL)
    (outside / "victim.txt").write_text("precious\n")
    return {"root": root, "outside": outside}


# ---------------------------------------------------------------- _confine alone


def test_roots_must_be_existing_folders(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not an existing folder"):
        Roots.of([tmp_path / "missing"])
    (tmp_path / "f").write_text("x")
    with pytest.raises(UsageError, match="not an existing folder"):
        Roots.of([tmp_path / "f"])
    link = tmp_path / "link"
    link.symlink_to(tmp_path, target_is_directory=True)
    assert Roots.of([link]).paths == (os.path.realpath(tmp_path),)


def test_no_root_refuses_every_path(tree: dict[str, Path]) -> None:
    with pytest.raises(UsageError, match="--root FOLDER"):
        read_checked(tree["root"] / "t.json", Roots.of([]))
    with pytest.raises(UsageError, match="--root FOLDER"):
        create_exclusive(tree["root"] / "new.json", b"{}", Roots.of([]))
    assert not (tree["root"] / "new.json").exists()


def test_read_inside_a_root(tree: dict[str, Path]) -> None:
    real, data = read_checked(tree["root"] / "sub" / "t.json", Roots.of([tree["root"]]))
    assert data == SMALL and real == os.path.realpath(tree["root"] / "sub" / "t.json")
    inner = tree["root"] / "inner.json"  # a link that stays inside the root is followed
    inner.symlink_to(tree["root"] / "t.json")
    assert read_checked(inner, Roots.of([tree["root"]]))[1] == SMALL


def test_read_outside_the_roots_is_refused(tree: dict[str, Path]) -> None:
    roots = Roots.of([tree["root"]])
    secret = tree["outside"] / "secret.json"
    dotdot = f"{tree['root']}/../outside/secret.json"
    link = tree["root"] / "alias.json"
    link.symlink_to(secret)
    folder_link = tree["root"] / "out"
    folder_link.symlink_to(tree["outside"], target_is_directory=True)
    for path in (secret, dotdot, link, folder_link / "secret.json"):
        with pytest.raises(UsageError, match="outside the folders this server may read"):
            read_checked(path, roots)
    # a root named through a prefix of another folder's name is not that folder
    twin = tree["root"].parent / "root2"
    twin.mkdir()
    (twin / "t.json").write_bytes(SMALL)
    with pytest.raises(UsageError, match="outside the folders"):
        read_checked(twin / "t.json", roots)


def test_read_outside_the_client_roots_is_refused(tree: dict[str, Path]) -> None:
    roots = Roots.of([tree["root"]])
    sub = [os.path.realpath(tree["root"] / "sub")]
    assert read_checked(tree["root"] / "sub" / "t.json", roots, client=sub)[1] == SMALL
    with pytest.raises(UsageError, match="outside the roots the client offered"):
        read_checked(tree["root"] / "t.json", roots, client=sub)
    with pytest.raises(UsageError, match="outside the roots the client offered"):
        read_checked(tree["root"] / "t.json", roots, client=[])
    # a client root wider than the configured ones widens nothing
    with pytest.raises(UsageError, match="outside the folders"):
        read_checked(tree["outside"] / "secret.json", roots, client=["/"])


def test_a_sparse_gibibyte_file_is_refused_by_its_size(tree: dict[str, Path]) -> None:
    huge = tree["root"] / "huge.jsonl"
    with huge.open("wb") as f:
        f.truncate(GIB)  # a hole: no disk used
    with pytest.raises(UsageError, match=r"too large \(1\.0 GiB, over .* 16\.0 MiB"):
        read_checked(huge, Roots.of([tree["root"]]))
    small_cap = tree["root"] / "ok.json"
    small_cap.write_bytes(SMALL)
    with pytest.raises(UsageError, match="too large"):
        read_checked(small_cap, Roots.of([tree["root"]]), max_bytes=len(SMALL) - 1)
    assert read_checked(small_cap, Roots.of([tree["root"]]), max_bytes=len(SMALL))[1] == SMALL


def test_what_is_not_a_transcript_is_refused_by_the_sniff(tree: dict[str, Path]) -> None:
    roots = Roots.of([tree["root"]])
    png = tree["root"] / "pic.jsonl"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 64)
    with pytest.raises(UsageError, match=r"does not look like a transcript.*NUL bytes"):
        read_checked(png, roots)
    text = tree["root"] / "notes.jsonl"
    text.write_text("root:x:0:0:root:/root:/bin/bash\n" * 1000)
    with pytest.raises(UsageError, match=r"does not look like a transcript.*starts with 'root"):
        read_checked(text, roots)
    latin = tree["root"] / "latin.json"
    latin.write_bytes(b'{"a": "caf\xe9"}')
    with pytest.raises(UsageError, match="not text"):
        read_checked(latin, roots)


@pytest.mark.parametrize(
    ("head", "refused"),
    [
        (b'{"a": 1}', None),
        (b'  \n[{"role": "user"}]', None),
        (b"\xef\xbb\xbf{}", None),
        ('\ufeff[{"x": 1}]'.encode("utf-16-le"), None),
        (b"", "empty"),
        (b"   \n", "empty"),
        (b" " * SNIFF_BYTES, "blank space only"),
        (b"{\x00}", "NUL bytes"),
        (b"\xc3\x28{", "not text"),
        (b"hello {", "starts with 'hello {'"),
        (b'{"cut": "caf\xc3', None),  # a character cut at the end of the sniff is fine
    ],
)
def test_sniff(head: bytes, refused: str | None) -> None:
    why = sniff(head)
    if refused is None:
        assert why is None
    else:
        assert why is not None and refused in why


def test_a_fifo_or_a_folder_is_refused_without_blocking(tree: dict[str, Path]) -> None:
    roots = Roots.of([tree["root"]])
    fifo = tree["root"] / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="is a FIFO"):
        read_checked(fifo, roots)
    with pytest.raises(UsageError, match="is a directory"):
        read_checked(tree["root"] / "sub", roots)
    with pytest.raises(UsageError, match="is a directory"):
        read_checked(tree["root"], roots)
    with pytest.raises(UsageError, match="no such file"):
        read_checked(tree["root"] / "missing.json", roots)
    with pytest.raises(UsageError, match="no such file"):
        read_checked(tree["root"] / "nofolder" / "missing.json", roots)


class _Racing(Roots):
    """Roots whose check passes and then lets ``act`` change the tree (the swap an
    attacker races to make between the check and the open)."""

    act: Callable[[], None] = staticmethod(lambda: None)

    def check(self, path: str | Path, client: Sequence[str] | None = None) -> tuple[str, str]:
        checked = super().check(path, client)
        type(self).act()
        return checked


def _racing(root: Path, act: Callable[[], None]) -> Roots:
    cls = type("Race", (_Racing,), {"act": staticmethod(act)})
    racing: Roots = cls(Roots.of([root]).paths)
    return racing


def test_a_file_swapped_for_a_link_after_the_check_is_refused(tree: dict[str, Path]) -> None:
    target = tree["root"] / "t.json"

    def swap() -> None:
        target.unlink()
        target.symlink_to(tree["outside"] / "secret.json")

    with pytest.raises(UsageError, match="symbolic link"):
        read_checked(target, _racing(tree["root"], swap))


def test_a_folder_swapped_for_a_link_after_the_check_is_refused(tree: dict[str, Path]) -> None:
    sub = tree["root"] / "sub"

    def swap() -> None:
        sub.rename(tree["root"] / "sub-old")
        sub.symlink_to(tree["outside"], target_is_directory=True)
        (tree["outside"] / "t.json").write_bytes(b'{"secret": true}')

    with pytest.raises(UsageError, match="changed into a symbolic link"):
        read_checked(sub / "t.json", _racing(tree["root"], swap))


def test_create_writes_a_new_owner_only_file(tree: dict[str, Path]) -> None:
    out = tree["root"] / "sub" / "new.json"
    real = create_exclusive(out, b'{"ok": true}\n', Roots.of([tree["root"]]))
    assert real == os.path.realpath(out)
    assert out.read_bytes() == b'{"ok": true}\n'
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_create_never_replaces_a_file_or_follows_a_link(tree: dict[str, Path]) -> None:
    roots = Roots.of([tree["root"]])
    victim = tree["outside"] / "victim.txt"
    existing = tree["root"] / "t.json"
    with pytest.raises(OutputError, match="exists: only a new file"):
        create_exclusive(existing, b"{}", roots)
    assert existing.read_bytes() == SMALL
    link = tree["root"] / "out.json"
    link.symlink_to(victim)
    dangling = tree["root"] / "dangling.json"
    dangling.symlink_to(tree["outside"] / "created-through-link.txt")
    for path in (link, dangling):
        with pytest.raises(OutputError, match="exists"):
            check_new(path, roots)
        with pytest.raises(OutputError, match="exists"):
            create_exclusive(path, b"{}", roots)
    assert victim.read_text() == "precious\n"
    assert not (tree["outside"] / "created-through-link.txt").exists()
    with pytest.raises(UsageError, match="outside the folders"):
        create_exclusive(tree["outside"] / "new.json", b"{}", roots)
    with pytest.raises(UsageError, match="outside the folders"):
        create_exclusive(f"{tree['root']}/../outside/new.json", b"{}", roots)
    assert not (tree["outside"] / "new.json").exists()
    with pytest.raises(OutputError, match="its folder does not exist"):
        create_exclusive(tree["root"] / "nofolder" / "x.json", b"{}", roots)


def test_a_link_planted_after_the_check_is_refused_by_the_create(tree: dict[str, Path]) -> None:
    # the race `compact out=` lost in the issue: the name is free when checked, a
    # link to an existing file is planted before the write; O_EXCL | O_NOFOLLOW
    # make the kernel refuse it
    roots = Roots.of([tree["root"]])
    out = tree["root"] / "out.json"
    victim = tree["outside"] / "victim.txt"
    assert check_new(out, roots) == os.path.realpath(out)
    out.symlink_to(victim)
    with pytest.raises(OutputError, match="exists"):
        create_exclusive(out, b'{"overwritten": true}', roots)
    assert victim.read_text() == "precious\n"
    assert out.is_symlink()


def test_a_folder_swapped_for_a_link_before_the_create_is_refused(
    tree: dict[str, Path],
) -> None:
    sub = tree["root"] / "sub"

    def swap() -> None:
        sub.rename(tree["root"] / "sub-old")
        sub.symlink_to(tree["outside"], target_is_directory=True)

    with pytest.raises(UsageError, match="changed into a symbolic link"):
        create_exclusive(sub / "new.json", b"{}", _racing(tree["root"], swap))
    assert not (tree["outside"] / "new.json").exists()


def test_a_failed_write_removes_only_the_file_it_created(tree: dict[str, Path]) -> None:
    # a file size limit makes the write fail part-way (EFBIG): the new file is removed
    script = (
        "import resource, signal, sys\n"
        "from ctxwise.integrations._confine import Roots, create_exclusive\n"
        "from ctxwise.errors import OutputError\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "try:\n"
        "    create_exclusive(sys.argv[1], b'x' * 100000, Roots.of([sys.argv[2]]))\n"
        "except OutputError as e:\n"
        "    print(e)\n"
    )
    out = tree["root"] / "big.json"
    run = subprocess.run(
        [sys.executable, "-c", script, str(out), str(tree["root"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "the write failed" in run.stdout, run.stderr
    assert not out.exists()
    assert (tree["root"] / "t.json").read_bytes() == SMALL


def test_file_uri_path() -> None:
    assert file_uri_path("file:///home/ann/my%20work") == "/home/ann/my work"
    assert file_uri_path("file://localhost/srv") == "/srv"
    assert file_uri_path("file://other-host/srv") is None
    assert file_uri_path("https://example.com/x") is None
    assert file_uri_path("file:relative") is None


# ---------------------------------------------------------------- through MCP


def _mcp() -> None:
    pytest.importorskip("mcp", reason="needs the mcp extra: pip install -e '.[mcp]'")


@asynccontextmanager
async def _client(
    args: list[str], cwd: Path, *, roots: list[str] | None = None
) -> AsyncIterator[Any]:
    """A ``ClientSession`` on a fresh ``ctxwise mcp ARGS`` process; ``roots`` (file
    URIs) are offered through the roots capability when given."""
    from mcp import types
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(
            roots=[types.Root(uri=u) for u in roots or []]  # type: ignore[arg-type]
        )

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ctxwise.cli", "mcp", *args], cwd=str(cwd)
    )
    with (cwd / f"server-{uuid.uuid4().hex[:6]}.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(
                read, write, list_roots_callback=list_roots if roots is not None else None
            ) as client,
        ):
            await client.initialize()
            yield client


def _text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, _text(result)
    data: dict[str, Any] = result.structured_content
    return data


def _refused(result: Any, says: str) -> str:
    assert result.is_error, result.structured_content
    assert says in _text(result), _text(result)
    return _text(result)


def _config(store: str) -> EngineConfig:
    return EngineConfig(store=store)


@pytest.fixture
def victim(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Tenant ``acme``, namespace ``team-a``: a session ``case-1`` written by the agent
    loop (a fact, a standing rule, a trace)."""
    _mcp()
    store = f"sqlite:///{tmp_path / 'ctxwise.db'}"
    with TenantEngine(_config(store), "acme") as owner:
        owner.engine.turn("team-a/case-1", [Message.text_message("user", VICTIM_TEXT)])
    yield {"store": store, "tmp": tmp_path}


async def _attack_sessions(tmp: Path, store: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    base = ["--store", store, "--tenant", "acme"]
    # the victim's own server stores notes for its session and for the namespace
    async with _client([*base, "--namespace", "team-a"], tmp) as a:
        out["a_note"] = await a.call_tool(
            "remember", {"text": "The vault code is 7731.", "session": "case-1"}
        )
        out["a_shared"] = await a.call_tool("remember", {"text": "Vault codes rotate monthly."})
        out["a_facts"] = await a.call_tool("facts", {"session": "case-1"})
    async with _client([*base, "--namespace", "team-b"], tmp) as b:

        async def call(key: str, name: str, args: dict[str, Any]) -> None:
            out[key] = await b.call_tool(name, args)

        for n, sid in enumerate(["team-a/case-1", "../team-a/case-1", "/team-a/case-1"]):
            await call(f"facts_{n}", "facts", {"session": sid})
            await call(f"rules_add_{n}", "rules", {"session": sid, "add": REFUNDS})
            await call(f"check_{n}", "check_tool", {"session": sid, "tool": "x", "input": {}})
            await call(f"select_{n}", "select_context", {"session": sid, "task": "the vault code?"})
            await call(f"recall_{n}", "recall", {"query": "vault code", "session": sid})
            await call(f"remember_{n}", "remember", {"text": "planted", "session": sid})
        await call("facts_same_id", "facts", {"session": "case-1"})
        await call("recall_same_id", "recall", {"query": "vault code", "session": "case-1"})
        await call("recall_shared", "recall", {"query": "vault codes"})
        await call("rules_own", "rules", {"session": "case-1", "add": REFUNDS})
        traces = {}
        for sid in ("case-1", "team-a%2Fcase-1", "..%2Fteam-a%2Fcase-1"):
            from mcp.shared.exceptions import MCPError

            try:
                traces[sid] = await b.read_resource(f"ctxwise://session/{sid}/trace")
            except MCPError as exc:
                traces[sid] = exc
        out["traces"] = traces
    # a server allowed one session of team-a only
    async with _client([*base, "--namespace", "team-a", "--session", "case-1"], tmp) as c:
        out["allowed"] = await c.call_tool("facts", {"session": "case-1"})
        out["not_allowed"] = await c.call_tool("rules", {"session": "case-2", "add": REFUNDS})
    return out


def test_another_namespace_is_out_of_reach(victim: dict[str, Any]) -> None:
    out = asyncio.run(_attack_sessions(victim["tmp"], victim["store"]))
    assert "ann.lee@example.com" in _text(out["a_facts"])
    for n in range(3):
        for key in ("facts", "rules_add", "check", "select", "recall", "remember"):
            _refused(out[f"{key}_{n}"], "confined to this server's namespace 'team-b'")
    # the same client id in team-b is another session: unknown, nothing of team-a's
    _refused(out["facts_same_id"], "unknown session 'team-b/case-1'")
    assert _ok(out["recall_same_id"])["items"] == []
    assert _ok(out["recall_shared"])["items"] == []
    # the refunds rule lands in team-b's own case-1, never in team-a's
    assert _ok(out["rules_own"])["added"] == [REFUNDS]
    traces = out["traces"]
    assert all(not hasattr(got, "contents") for got in traces.values())  # MCPErrors only
    assert "has no turn yet" in str(traces["case-1"])  # team-b's own, just started
    assert "confined to this server's namespace 'team-b'" in str(traces["team-a%2Fcase-1"])
    assert "Unknown resource" in str(traces["..%2Fteam-a%2Fcase-1"])
    assert "ann.lee" not in str(traces)
    _ok(out["allowed"])
    _refused(out["not_allowed"], "outside this server's scope")
    with TenantEngine(_config(victim["store"]), "acme") as owner:
        engine = owner.engine
        rules_a = [r["text"] for r in engine.rules("team-a/case-1").to_dict()["rules"]]
        assert rules_a == ["Never call me before 9am."]
        rules_b = [r["text"] for r in engine.rules("team-b/case-1").to_dict()["rules"]]
        assert rules_b == [REFUNDS]
        assert len(engine.session_messages("team-a/case-1")) == 1
        with pytest.raises(UnknownSessionError):
            engine.facts("team-a/case-2")


def _file_server_args(tmp: Path, root: Path) -> list[str]:
    return ["--store", f"sqlite:///{tmp / 'ctxwise.db'}", "--root", str(root)]


async def _attack_files(tmp: Path, root: Path, outside: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    args = _file_server_args(tmp, root)
    link = root / "alias.jsonl"
    link.symlink_to(outside / "secret.jsonl")
    planted = root / "planted.jsonl"
    planted.symlink_to(outside / "victim.txt")
    huge = root / "huge.jsonl"
    with huge.open("wb") as f:
        f.truncate(GIB)
    (root / "pic.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 4096)
    os.mkfifo(root / "pipe.jsonl")
    task = "What happened?"
    async with _client(args, tmp) as s:

        async def call(key: str, name: str, a: dict[str, Any]) -> None:
            out[key] = await s.call_tool(name, a)

        await call("inside", "select_context", {"transcript": str(root / "t.jsonl"), "task": task})
        await call(
            "relative", "select_context", {"transcript": "root/t.jsonl", "task": task}
        )  # the server's working folder is tmp
        for key, path in [
            ("abs", outside / "secret.jsonl"),
            ("dotdot", f"{root}/../outside/secret.jsonl"),
            ("dotdot_rel", "root/../outside/secret.jsonl"),
            ("link", link),
            ("etc", "/etc/passwd"),
        ]:
            await call(f"read_{key}", "select_context", {"transcript": str(path), "task": task})
            await call(f"compact_{key}", "compact", {"transcript": str(path), "budget": 4000})
        await call(
            "out_link",
            "compact",
            {"transcript": str(root / "t.jsonl"), "budget": 4000, "out": str(planted)},
        )
        await call(
            "out_existing",
            "compact",
            {"transcript": str(root / "t.jsonl"), "budget": 4000, "out": str(root / "t.jsonl")},
        )
        await call(
            "out_outside",
            "compact",
            {
                "transcript": str(root / "t.jsonl"),
                "budget": 4000,
                "out": str(outside / "new.jsonl"),
            },
        )
        await call(
            "out_new",
            "compact",
            {"transcript": str(root / "t.jsonl"), "budget": 4000, "out": str(root / "new.jsonl")},
        )
        await call("huge", "select_context", {"transcript": str(huge), "task": task})
        await call("huge_compact", "compact", {"transcript": str(huge), "budget": 4000})
        await call(
            "binary", "select_context", {"transcript": str(root / "pic.jsonl"), "task": task}
        )
        await call("fifo", "select_context", {"transcript": str(root / "pipe.jsonl"), "task": task})
        await call("after", "select_context", {"transcript": str(root / "t.jsonl"), "task": task})
        await call(  # the client's roots come from the roots capability, not an argument
            "roots_argument",
            "select_context",
            {"transcript": str(outside / "secret.jsonl"), "task": task, "roots": ["file:///"]},
        )
    # a client offering roots narrows the configured ones, and cannot widen them
    sub_uri = (root / "sub").resolve().as_uri()
    async with _client(args, tmp, roots=[sub_uri, "file:///"]) as c:
        out["client_sub"] = await c.call_tool(
            "select_context", {"transcript": str(root / "sub" / "t.jsonl"), "task": task}
        )
        out["client_outside"] = await c.call_tool(
            "select_context", {"transcript": str(outside / "secret.jsonl"), "task": task}
        )
    async with _client(args, tmp, roots=[sub_uri]) as c:
        out["client_narrow"] = await c.call_tool(
            "select_context", {"transcript": str(root / "t.jsonl"), "task": task}
        )
    async with _client(["--store", "memory"], tmp) as n:
        out["no_root"] = await n.call_tool(
            "select_context", {"transcript": str(root / "t.jsonl"), "task": task}
        )
    return out


def test_files_outside_the_roots_and_the_races_are_refused(tmp_path: Path, data_dir: Path) -> None:
    _mcp()
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    for where in (root / "t.jsonl", root / "sub" / "t.jsonl", outside / "secret.jsonl"):
        shutil.copy(SHORT, where)
    (outside / "victim.txt").write_text("precious\n")
    out = asyncio.run(_attack_files(tmp_path, root, outside))

    assert _ok(out["inside"])["report"]["tokens"] > 0
    assert _ok(out["relative"])["prompt"] == _ok(out["inside"])["prompt"]
    for key in ("abs", "dotdot", "dotdot_rel", "link", "etc"):
        _refused(out[f"read_{key}"], "outside the folders this server may read")
        _refused(out[f"compact_{key}"], "outside the folders this server may read")
    # compact out=: a planted link, an existing file, a folder outside: refused
    _refused(out["out_link"], "planted.jsonl: exists: only a new file is written")
    assert (outside / "victim.txt").read_text() == "precious\n"
    assert (root / "planted.jsonl").is_symlink()
    _refused(out["out_existing"], "t.jsonl: exists: only a new file is written")
    assert (root / "t.jsonl").read_bytes() == SHORT.read_bytes()
    _refused(out["out_outside"], "outside the folders")
    assert not (outside / "new.jsonl").exists()
    written = _ok(out["out_new"])
    assert written["out"] == str(root / "new.jsonl")
    assert stat.S_IMODE((root / "new.jsonl").stat().st_mode) == 0o600
    # a sparse 1 GiB file: refused from its size, before a byte is read
    _refused(out["huge"], "too large (1.0 GiB, over this server's limit of 16.0 MiB")
    _refused(out["huge_compact"], "nothing was read")
    _refused(out["binary"], "does not look like a transcript")
    _refused(out["fifo"], "is a FIFO")
    _ok(out["after"])
    _refused(out["roots_argument"], "unknown argument(s) 'roots'")
    # client roots
    _ok(out["client_sub"])
    _refused(out["client_outside"], "outside the folders")
    _refused(out["client_narrow"], "outside the roots the client offered")
    _refused(out["no_root"], "start it with --root FOLDER")


async def _tenant_calls(tmp: Path, store: str, tenants: tuple[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    a_args = ["--store", store, "--tenant", tenants[0]]
    b_args = ["--store", store, "--tenant", tenants[1]]
    async with _client(a_args, tmp) as a:
        out["a_remember"] = await a.call_tool("remember", {"text": "Tenant A's launch is in May."})
        out["a_session_note"] = await a.call_tool(
            "remember", {"text": "Launch code is blue.", "session": "case-1"}
        )
        out["a_rule"] = await a.call_tool("rules", {"session": "case-1", "add": REFUNDS})
        out["a_recall"] = await a.call_tool("recall", {"query": "launch"})
    async with _client(b_args, tmp) as b:
        out["b_recall"] = await b.call_tool("recall", {"query": "launch"})
        out["b_recall_session"] = await b.call_tool(
            "recall", {"query": "launch code", "session": "case-1"}
        )
        out["b_rules"] = await b.call_tool("rules", {"session": "case-1"})
        out["b_facts"] = await b.call_tool("facts", {"session": "case-1"})
    return out


def _drop_schemas(dsn: str, tenants: tuple[str, ...]) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for t in tenants:
            conn.execute(f"DROP SCHEMA IF EXISTS ctxwise_t_{t} CASCADE")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_tenants_on_one_store_see_nothing_of_each_other(tmp_path: Path, kind: str) -> None:
    _mcp()
    tenants = (f"a{uuid.uuid4().hex[:10]}", f"b{uuid.uuid4().hex[:10]}")
    if kind == "sqlite":
        store = f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        from tests._stores import postgres_dsn

        store = postgres_dsn()
    try:
        out = asyncio.run(_tenant_calls(tmp_path, store, tenants))
    finally:
        if kind == "postgres":
            _drop_schemas(store, tenants)
    assert _ok(out["a_recall"])["items"][0]["text"] == "Tenant A's launch is in May."
    assert _ok(out["a_rule"])["added"] == [REFUNDS]
    assert _ok(out["b_recall"])["items"] == []
    assert _ok(out["b_recall_session"])["items"] == []
    _refused(out["b_rules"], "unknown session")
    _refused(out["b_facts"], "unknown session")
    if kind == "sqlite":  # one file per tenant beside the store, none in the store itself
        folder = tmp_path / "shared.tenants"
        assert sorted(p.name for p in folder.glob("*.db")) == sorted(f"{t}.db" for t in tenants)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--tenant", "Bad Name"], "bad tenant name"),
        (["--namespace", "a/b"], "bad namespace"),
        (["--session", "x/y"], "bad session id"),
        (["--root", "missing-folder"], "not an existing folder"),
    ],
)
def test_a_bad_scope_fails_before_serving(tmp_path: Path, args: list[str], says: str) -> None:
    _mcp()
    run = subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", "mcp", "--store", str(tmp_path / "s.db"), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert run.stdout == ""
    assert says in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "s.tenants").exists()  # nothing was created
