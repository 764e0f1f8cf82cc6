"""A FIFO or a device named where ctxwise reads a file is refused at once.

Every entry point that reads a file the user named (a config and the files it
names, an assembly spec and its section files, a transcript, a router, a relay
spec and workload, CLINC150 data, Claude Code's settings) runs in a child process
with a deadline and a memory limit: a read that waits for a FIFO's writer, or
reads ``/dev/zero`` until memory runs out, fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxwise._io import read_user_file
from ctxwise.errors import ConfigError, FormatError, SpecError, UsageError

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")

DEADLINE = 60  # seconds: an import and one refusal take about one
MEMORY = 2 * 2**30  # bytes of address space: reading /dev/zero hits it in seconds


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _child(
    args: list[str], cwd: Path, stdin: int | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, *args],
            cwd=cwd,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args} did not return within {DEADLINE} s: it blocked on the file")


def _cli(
    cwd: Path, *args: str | Path, stdin: int | None = None
) -> subprocess.CompletedProcess[str]:
    return _child(["-m", "ctxwise.cli", *map(str, args)], cwd, stdin)


def _refused(done: subprocess.CompletedProcess[str], bad: str | Path) -> str:
    """Exit 2, nothing on stdout, one error line naming ``bad`` as not a regular file."""
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("ctxwise: error: ")
    assert str(bad) in lines[0]
    assert "not a regular file" in lines[0]
    return lines[0]


@pytest.fixture(params=["fifo", "dev-zero"])
def bad(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A FIFO no one writes to (an open for reading blocks) or ``/dev/zero``
    (endless)."""
    if request.param == "dev-zero":
        return Path("/dev/zero")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    return fifo


def _spec(tmp_path: Path, section_file: str | Path) -> Path:
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps({"budget": 100, "sections": [{"name": "doc", "file": str(section_file)}]}),
        encoding="utf-8",
    )
    return spec


def _transcript(tmp_path: Path) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"role": "user", "content": "hello"}]), encoding="utf-8")
    return path


# -- the CLI ----------------------------------------------------------------------


def test_assemble_spec(tmp_path: Path, bad: Path) -> None:
    _refused(_cli(tmp_path, "assemble", bad), bad)


def test_assemble_section_file(tmp_path: Path, bad: Path) -> None:
    _refused(_cli(tmp_path, "assemble", _spec(tmp_path, bad)), bad)


def test_replay_config(tmp_path: Path, bad: Path) -> None:
    line = _refused(
        _cli(tmp_path, "replay", _transcript(tmp_path), "--budget", "1000", "--config", bad), bad
    )
    assert "TOML config" in line


@pytest.mark.parametrize(
    "toml",
    ['system_file = "{bad}"', '[sources.doc]\nfile = "{bad}"', '[gates]\nfile = "{bad}"'],
    ids=["system_file", "sources.file", "gates.file"],
)
def test_replay_files_the_config_names(tmp_path: Path, bad: Path, toml: str) -> None:
    config = tmp_path / "ctxwise.toml"
    config.write_text(toml.format(bad=bad) + "\n", encoding="utf-8")
    _refused(
        _cli(tmp_path, "replay", _transcript(tmp_path), "--budget", "1000", "--config", config), bad
    )


def test_inspect_transcript(tmp_path: Path, bad: Path) -> None:
    _refused(_cli(tmp_path, "inspect", bad), bad)


def test_route_router(tmp_path: Path, bad: Path) -> None:
    _refused(_cli(tmp_path, "route", bad, "--query", "hello"), bad)


def test_relay_run_spec(tmp_path: Path, bad: Path) -> None:
    _refused(_cli(tmp_path, "relay", "run", bad), bad)


def test_data_clinc150(tmp_path: Path, bad: Path) -> None:
    _refused(_cli(tmp_path, "data", "clinc150", bad, tmp_path / "out"), bad)
    assert not (tmp_path / "out").exists()


def test_hook_install_settings(tmp_path: Path, bad: Path) -> None:
    (tmp_path / ".claude").mkdir()
    settings = tmp_path / ".claude" / "settings.json"
    if bad.name == "pipe":
        os.mkfifo(settings)
    else:
        settings.symlink_to(bad)
    line = _refused(_cli(tmp_path, "hook", "install"), "settings.json")
    assert "left unchanged" in line
    assert not settings.is_file()  # still the FIFO or the link to the device


def test_dev_stdin_on_a_pipe(tmp_path: Path) -> None:
    """``/dev/stdin`` is no stand-in for a file: on a pipe no one writes to, the
    read would wait forever."""
    read_end, write_end = os.pipe()
    try:
        done = _cli(tmp_path, "assemble", "/dev/stdin", stdin=read_end)
    finally:
        os.close(read_end)
        os.close(write_end)
    _refused(done, "/dev/stdin")


def test_mcp_config(tmp_path: Path, bad: Path) -> None:
    """The server never starts on a config it cannot read."""
    _refused(_cli(tmp_path, "mcp", "--config", bad), bad)


# -- the library -------------------------------------------------------------------


def _library(tmp_path: Path, call: str) -> str:
    """Run ``call`` in a child; the type and message of what it raised."""
    code = (
        "import sys\n"
        "try:\n"
        f"    {call}\n"
        "except Exception as e:\n"
        "    print(type(e).__name__); print(e); sys.exit(3)\n"
    )
    done = _child(["-c", code], tmp_path)
    assert done.returncode == 3, done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize(
    ("call", "error"),
    [
        ("from ctxwise.config import load_config; load_config({bad!r})", "ConfigError"),
        ("from ctxwise.spec import load_spec; load_spec({bad!r})", "SpecError"),
        ("from ctxwise.relay import load_spec; load_spec({bad!r})", "RelayError"),
        (
            "from ctxwise.formats import read_transcript_file; read_transcript_file({bad!r})",
            "FormatError",
        ),
        ("from ctxwise.routing import IntentRouter; IntentRouter.load({bad!r})", "FormatError"),
    ],
    ids=["load_config", "load_spec", "relay.load_spec", "read_transcript_file", "router"],
)
def test_library_entry_points(tmp_path: Path, bad: Path, call: str, error: str) -> None:
    out = _library(tmp_path, call.format(bad=str(bad)))
    kind, message = out.splitlines()[:2]
    assert kind == error
    assert str(bad) in message and "not a regular file" in message


def test_relay_workload_file(tmp_path: Path, bad: Path) -> None:
    from ctxwise.relay import generate, write_workload

    folder = tmp_path / "workload"
    write_workload(generate(1, variant="counting", chunks=3), folder)
    target = folder / "chunks" / "0001.txt"
    target.unlink()
    if bad.name == "pipe":
        os.mkfifo(target)
    else:
        target.symlink_to(bad)
    out = _library(
        tmp_path, f"from ctxwise.relay import load_workload; load_workload({str(folder)!r})"
    )
    kind, message = out.splitlines()[:2]
    assert kind == "RelayError"
    assert "chunks/0001.txt" in message and "not a regular file" in message


# -- the shared check, in process (a regular file is never refused for being one) ---


def test_regular_file_reads_and_a_symlink_to_one_too(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"abc")
    link = tmp_path / "link"
    link.symlink_to(path)
    assert read_user_file(path, "a text file", FormatError) == b"abc"
    assert read_user_file(link, "a text file", FormatError) == b"abc"


def test_a_cap_refuses_a_larger_file_and_reads_one_at_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"x" * 10)
    assert read_user_file(path, "a text file", FormatError, max_bytes=10) == b"x" * 10
    with pytest.raises(FormatError, match="too large"):
        read_user_file(path, "a text file", FormatError, max_bytes=9)


@pytest.mark.parametrize(
    ("loader", "error", "what"),
    [
        ("ctxwise.config:load_config", ConfigError, "TOML"),
        ("ctxwise.spec:load_spec", SpecError, "spec"),
    ],
)
def test_config_and_spec_are_capped(
    tmp_path: Path, loader: str, error: type[UsageError], what: str
) -> None:
    import importlib

    module, _, name = loader.partition(":")
    load: Callable[[Path], object] = getattr(importlib.import_module(module), name)
    cap = {"ctxwise.config": "MAX_CONFIG_BYTES", "ctxwise.spec": "MAX_SPEC_BYTES"}[module]
    limit: int = getattr(importlib.import_module(module), cap)
    path = tmp_path / "big.json"
    with path.open("wb") as f:
        f.truncate(limit + 1)  # sparse: no disk used
    with pytest.raises(error, match="too large") as info:
        load(path)
    assert str(path) in str(info.value) and what in str(info.value)


def test_a_directory_is_named_as_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        read_user_file(tmp_path, "a TOML config", ConfigError)
