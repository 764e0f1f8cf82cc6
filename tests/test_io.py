"""``_io``: reading text in any Unicode encoding a BOM names; writing output safely."""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxwise._io import decode_text, parse_json, read_text_file, same_file, write_output
from ctxwise.errors import FormatError, OutputError

TEXT = '{"messages": [{"role": "user", "content": "héllo \U0001f600"}]}\n'


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def files_in(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


# -- reading ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bom", "codec", "name"),
    [
        (b"", "utf-8", None),
        (codecs.BOM_UTF8, "utf-8", "UTF-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16-LE"),
        (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16-BE"),
        (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32-LE"),
        (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32-BE"),
    ],
)
def test_every_bom_is_decoded(tmp_path: Path, bom: bytes, codec: str, name: str | None) -> None:
    data = bom + TEXT.encode(codec)
    assert decode_text(data) == (TEXT, name)
    p = tmp_path / "t.json"
    p.write_bytes(data)
    assert read_text_file(p, "a transcript file", FormatError) == TEXT


def test_bad_bytes_name_the_encoding_and_the_byte(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(FormatError, match=r"not UTF-8 text \(byte 7"):
        read_text_file(p, "a transcript file", FormatError)
    p.write_bytes(codecs.BOM_UTF16_LE + "ab".encode("utf-16-le") + b"\x00")  # odd length
    with pytest.raises(FormatError, match=r"not UTF-16-LE text \(byte 6"):
        read_text_file(p, "a transcript file", FormatError)
    p.write_bytes(b"PK\x03\x04\x00\x00")
    with pytest.raises(FormatError, match="binary file"):
        read_text_file(p, "a transcript file", FormatError)


class _Reads:
    """Counts the bytes ``os.read`` returns while it is patched in."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bytes = 0
        real = os.read

        def counting(fd: int, n: int) -> bytes:
            data = real(fd, n)
            self.bytes += len(data)
            return data

        monkeypatch.setattr(os, "read", counting)


def test_a_file_over_the_cap_is_refused_from_its_size_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "huge.jsonl"
    with p.open("wb") as f:  # sparse: no disk, and reading it would take 1 GiB
        f.truncate(2**30)
    reads = _Reads(monkeypatch)
    with pytest.raises(FormatError) as info:
        read_text_file(
            p, "a transcript file", FormatError, max_bytes=2**20, raise_with="--max-input-bytes"
        )
    assert reads.bytes == 0
    detail = info.value.detail
    assert "1.0 GiB" in detail and "1.0 MiB" in detail and "--max-input-bytes" in detail
    assert "\n" not in str(info.value)


def test_a_binary_file_is_refused_from_its_first_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "disk.img"
    with p.open("wb") as f:
        f.write(b"\x7fELF\x02\x01\x01\x00")
        f.truncate(64 * 2**20)
    reads = _Reads(monkeypatch)
    with pytest.raises(FormatError, match="binary file"):
        read_text_file(p, "a transcript file", FormatError)
    assert 0 < reads.bytes <= 2**20  # one chunk, not 64 MiB
    q = tmp_path / "latin1.txt"  # not UTF-8 at its start: refused there too
    q.write_bytes(b"caf\xe9 " * (2**20))
    reads.bytes = 0
    with pytest.raises(FormatError, match=r"not UTF-8 text \(byte 3"):
        read_text_file(q, "a transcript file", FormatError)
    assert reads.bytes <= 2**20


def test_a_character_cut_at_the_first_chunk_is_not_an_error(tmp_path: Path) -> None:
    text = "a" * (2**20 - 1) + "é" + "ü" * 10  # é straddles the first 1 MiB read
    p = tmp_path / "t.txt"
    p.write_bytes(text.encode("utf-8"))
    assert read_text_file(p, "a text file", FormatError) == text
    u16 = tmp_path / "t16.txt"  # UTF-16 with a BOM: the first chunk ends mid-unit
    u16.write_bytes(codecs.BOM_UTF16_LE + ("x" * 2**20).encode("utf-16-le"))
    assert read_text_file(u16, "a text file", FormatError) == "x" * 2**20


@pytest.mark.parametrize("sign", ["", "-"])
def test_parse_json_refuses_a_long_integer_as_json_that_does_not_decode(sign: str) -> None:
    text = '{"a": 1,\n "b": [2, ' + sign + "9" * 5000 + "]}"
    with pytest.raises(json.JSONDecodeError) as info:
        parse_json(text)
    err = info.value
    assert (err.lineno, err.colno) == (2, 11)
    assert "5,000 digits" in err.msg and f"{sys.get_int_max_str_digits():,}" in err.msg
    assert "PYTHONINTMAXSTRDIGITS" in err.msg
    assert parse_json(text.replace("9" * 5000, "9" * 4000))["b"][1] == int(sign + "9" * 4000)
    assert parse_json(b'{"n": -12, "f": 1.5}') == {"n": -12, "f": 1.5}


# -- writing ------------------------------------------------------------------


def test_new_file_respects_the_umask(tmp_path: Path, umask_022: None) -> None:
    p = tmp_path / "out.json"
    write_output(p, b"data\n")
    assert p.read_bytes() == b"data\n"
    assert stat.S_IMODE(p.stat().st_mode) == 0o644
    assert files_in(tmp_path) == {"out.json"}
    os.umask(0o077)
    q = tmp_path / "private.json"
    write_output(q, b"x")
    assert stat.S_IMODE(q.stat().st_mode) == 0o600


def test_existing_file_keeps_its_mode_and_is_replaced_whole(tmp_path: Path) -> None:
    p = tmp_path / "out.json"
    p.write_bytes(b"old contents, longer than the new ones")
    p.chmod(0o640)
    inode = p.stat().st_ino
    write_output(p, b"new")
    assert p.read_bytes() == b"new"
    assert stat.S_IMODE(p.stat().st_mode) == 0o640
    assert p.stat().st_ino != inode  # a new file renamed over the old one
    assert files_in(tmp_path) == {"out.json"}


def test_symlink_target_is_replaced_and_the_link_kept(tmp_path: Path) -> None:
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    target = real_dir / "target.json"
    target.write_bytes(b"old")
    target.chmod(0o604)
    link = tmp_path / "link.json"
    link.symlink_to(Path("real") / "target.json")  # relative, as users make them
    chain = tmp_path / "chain.json"
    chain.symlink_to(link)
    write_output(chain, b"new")
    assert chain.is_symlink() and link.is_symlink()
    assert os.readlink(link) == str(Path("real") / "target.json")
    assert target.read_bytes() == b"new" and not target.is_symlink()
    assert stat.S_IMODE(target.stat().st_mode) == 0o604
    assert files_in(tmp_path) == {"real", "link.json", "chain.json"}
    assert files_in(real_dir) == {"target.json"}  # the temporary file was in its folder


def test_dangling_symlink_creates_its_target(tmp_path: Path, umask_022: None) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "made.json")
    write_output(link, b"x")
    assert link.is_symlink() and (tmp_path / "made.json").read_bytes() == b"x"
    assert stat.S_IMODE((tmp_path / "made.json").stat().st_mode) == 0o644


def test_fifo_is_written_in_place_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def reader() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    # opening for writing would block without a reader: the thread is one
    write_output(fifo, b"through the pipe\n")
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert got == [b"through the pipe\n"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert files_in(tmp_path) == {"pipe"}


def test_fifo_behind_a_symlink_is_written_in_place(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    # a reader and writer on one O_RDWR descriptor: the write cannot block
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        write_output(link, b"abc")
        assert os.read(fd, 100) == b"abc"
    finally:
        os.close(fd)
    assert link.is_symlink() and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_character_device_is_written_in_place() -> None:
    null = Path("/dev/null")
    if not null.exists():
        pytest.skip("no /dev/null")
    before = os.stat(null)
    write_output(null, b"discarded")
    after = os.stat(null)
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_dash_is_stdout(capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    write_output("-", b"to stdout\n")
    assert capfdbinary.readouterr().out == b"to stdout\n"


def test_dev_stdout_is_written_not_replaced(capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    dev = Path("/dev/stdout")
    if not dev.exists():
        pytest.skip("no /dev/stdout")
    was_link = dev.is_symlink()
    write_output(dev, b"via /dev/stdout\n")
    assert capfdbinary.readouterr().out == b"via /dev/stdout\n"
    assert dev.is_symlink() == was_link


def test_errors_leave_nothing_behind(tmp_path: Path) -> None:
    (tmp_path / "keep.json").write_bytes(b"keep")
    with pytest.raises(OutputError, match="is a directory") as info:
        write_output(tmp_path, b"x")
    assert info.value.path == str(tmp_path)
    with pytest.raises(OutputError, match="does not exist"):
        write_output(tmp_path / "no" / "such" / "out.json", b"x")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if not os.access(locked, os.W_OK):  # root writes anywhere: nothing to test
            with pytest.raises(OutputError, match="Permission denied"):
                write_output(locked / "out.json", b"x")
        assert files_in(locked) == set()
    finally:
        locked.chmod(0o700)
    assert files_in(tmp_path) == {"keep.json", "locked"}


def test_a_failed_write_keeps_the_original(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "out.json"
    p.write_bytes(b"original")

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OutputError, match="No space left") as info:
        write_output(p, b"new contents")
    assert info.value.detail == "No space left on device"
    assert p.read_bytes() == b"original"
    assert files_in(tmp_path) == {"out.json"}


def test_same_file(tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    a.write_text("{}")
    link = tmp_path / "l.json"
    link.symlink_to(a)
    assert same_file(a, link) and same_file(a, tmp_path / "." / "a.json")
    assert not same_file(a, tmp_path / "b.json") and not same_file(a, "-")


def test_output_error_pickles_with_its_fields() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(OutputError("/x/out.json", "is a directory")))
    assert (err.path, err.detail, str(err)) == (
        "/x/out.json",
        "is a directory",
        "cannot write /x/out.json: is a directory",
    )


# -- temporaries --------------------------------------------------------------

HOUR = 3600.0
T0 = 1_000_000_000.0  # the seconds since the epoch the injected clocks start from


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _aged(path: Path, mtime: float) -> Path:
    os.utime(path, (mtime, mtime), follow_symlinks=False)
    return path


def _stale_folder(folder: Path) -> dict[str, bool]:
    """Files and folders named and aged for a sweep at T0 + 1 hour + 1 s; whether
    each must go."""
    folder.mkdir(exist_ok=True)
    made: dict[str, bool] = {}

    def file(name: str, mtime: float, goes: bool) -> None:
        (folder / name).write_bytes(b"partial")
        _aged(folder / name, mtime)
        made[name] = goes

    file(".out.json.ctxwise-0123abcd.tmp", T0, True)  # a killed replace's
    file(".ctxwise-89abcdef.tmp", T0, True)  # a killed memory tool write's
    file(".out.json.ctxwise-fedcba98.tmp", T0 + 1.0, False)  # one hour old, not more
    file(".out.json.0123abcd.tmp", T0, False)  # an earlier version's: not this pattern
    for other in ("notes.tmp", ".hidden", "out.json", ".x.ctxwise-0123ABCD.tmp"):
        file(other, T0, False)
    file(".x.ctxwise-0123abc.tmp", T0, False)  # seven digits
    file(".x.ctxwise-0123abcd.tmp.bak", T0, False)
    relay = folder / ".job.ctxwise-00000000.tmp"  # a killed workload write's folder
    (relay / "chunks").mkdir(parents=True)
    (relay / "chunks" / "0000.txt").write_text("chunk")
    _aged(relay, T0)
    made[relay.name] = True
    outside = folder.parent / f"{folder.name}-kept.txt"
    outside.write_text("not ours")
    link = folder / ".link.ctxwise-11111111.tmp"  # a link is never followed nor removed
    link.symlink_to(outside)
    _aged(link, T0)
    made[link.name] = False
    return made


@pytest.mark.parametrize("by", ["path", "descriptor"])
def test_a_sweep_removes_only_ctxwise_s_stale_temporaries(tmp_path: Path, by: str) -> None:
    import ctxwise._io as io_mod

    folder = tmp_path / "out"
    made = _stale_folder(folder)
    clock = Clock(T0 + HOUR + 1.0)
    assert io_mod.STALE_TEMP_AGE == HOUR
    if by == "path":
        removed = io_mod.sweep_temporaries(folder, clock=clock)
    else:
        fd = os.open(folder, os.O_RDONLY)
        try:
            removed = io_mod.sweep_temporaries(fd, clock=clock)
        finally:
            os.close(fd)
    assert sorted(removed) == sorted(n for n, goes in made.items() if goes)
    assert files_in(folder) == {n for n, goes in made.items() if not goes}
    assert (tmp_path / "out-kept.txt").read_text() == "not ours"
    # an earlier version's names, when the writer names them
    legacy = re.compile(r"\.out\.json\.[0-9a-f]{8}\.tmp")
    assert io_mod.sweep_temporaries(folder, clock=clock, also=legacy) == [".out.json.0123abcd.tmp"]
    # nothing is stale by a clock an hour earlier
    assert io_mod.sweep_temporaries(folder, clock=Clock(T0 + 1.0)) == []


def test_replace_file_sweeps_its_folder_once_an_hour(tmp_path: Path) -> None:
    import ctxwise._io as io_mod

    clock = Clock(T0 + HOUR + 1.0)
    left = tmp_path / ".a.json.ctxwise-0123abcd.tmp"  # a killed write's
    left.write_bytes(b"part")
    _aged(left, T0)
    older = tmp_path / ".a.json.deadbeef.tmp"  # an earlier version's, for this file
    older.write_bytes(b"part")
    _aged(older, T0)
    other = tmp_path / ".b.json.deadbeef.tmp"  # an earlier version's, for another
    other.write_bytes(b"part")
    _aged(other, T0)
    io_mod.replace_file(tmp_path / "a.json", b"{}", clock=clock)
    assert files_in(tmp_path) == {"a.json", other.name}
    # within the hour the folder is not listed again; after it, it is
    again = tmp_path / ".c.ctxwise-00000001.tmp"
    again.write_bytes(b"part")
    _aged(again, T0)
    clock.now += 10
    io_mod.replace_file(tmp_path / "a.json", b"[]", clock=clock)
    assert again.exists()
    clock.now += HOUR
    io_mod.replace_file(tmp_path / "a.json", b"[1]", clock=clock)
    assert files_in(tmp_path) == {"a.json", other.name}
    assert (tmp_path / "a.json").read_bytes() == b"[1]"


def test_a_name_of_the_longest_length_is_written(tmp_path: Path) -> None:
    # the temporary file was named after the whole target name, so a name near the
    # file system's 255 bytes could not be written
    for name in ("a" * 255, "é" * 127):
        target = tmp_path / name
        write_output(str(target), b"data")
        assert target.read_bytes() == b"data"
    assert files_in(tmp_path) == {"a" * 255, "é" * 127}
