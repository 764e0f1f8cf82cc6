"""The CLI's input and output as a user meets them: files agents write, ``--out``
as a symlink, a FIFO or ``-``, the umask, bad input, and one token total."""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ctxwise import composition, get_counter, read_transcripts
from tests._cli import assert_usage_error, run, runner
from tests.conftest import DATA, TAU, TRANSCRIPTS, claude_code_files
from tests.formats.test_readers import TestMessagesJSONL, livemcp_task


def ctxwise(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxwise.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        input=stdin,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "120", "NO_COLOR": "1"},
    )


def ok(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert res.returncode == 0, res.stderr
    return res


def one_error_line(res: subprocess.CompletedProcess[str], *words: str) -> str:
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctxwise: error: "), res.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def heavy_task(i: int) -> dict[str, Any]:
    """A LiveMCPBench task with enough tool results for clear and compact to act on,
    and a second user turn (compaction cuts before a user turn)."""
    task = livemcp_task(i, calls=6)
    task["messages"].insert(10, {"role": "user", "content": "Also add a word cloud."})
    return task


@pytest.fixture
def results_file(tmp_path: Path) -> Path:
    p = tmp_path / "claude-sonnet-4_Qwen3-Embedding-0.6B.json"
    p.write_text(json.dumps([heavy_task(i) for i in range(3)], ensure_ascii=False, indent=4))
    return p


# -- files agents write ---------------------------------------------------------


def test_livemcpbench_results_through_inspect_clear_compact(
    results_file: Path, tmp_path: Path
) -> None:
    original = json.loads(results_file.read_text())
    report = json.loads(ok(ctxwise("inspect", results_file, "--index", "1", "--json")).stdout)
    assert (report["format"], report["shape"]) == ("openai", "records")
    assert report["transcripts"] == 3 and report["index"] == 1
    assert report["tools"]["route"]["calls"] == 6
    table = ok(ctxwise("inspect", results_file, "--index", "-1")).stdout
    assert "openai records, transcript 2 of 3" in " ".join(table.split())

    out = tmp_path / "cleared.json"
    args: list[str | Path] = ["--index", "1", "--keep-last", "1", "--out", out, "--json"]
    cleared = json.loads(ok(ctxwise("clear", results_file, *args)).stdout)
    assert cleared["shape"] == "records" and cleared["cleared_tool_uses"] == 5
    assert cleared["tokens_before"] == report["total_tokens"]
    body = json.loads(out.read_text())
    assert body[0] == original[0] and body[2] == original[2]
    assert {k: v for k, v in body[1].items() if k != "messages"} == {
        k: v for k, v in original[1].items() if k != "messages"
    }
    assert len(body[1]["messages"]) == len(original[1]["messages"])

    out2 = tmp_path / "compacted.json"
    args = ["--index", "1", "--keep-tail-tokens", "1000", "--out", out2, "--json"]
    compacted = json.loads(ok(ctxwise("compact", results_file, *args)).stdout)
    assert compacted["written_as"] == "openai:records" and compacted["compacted"]
    assert compacted["tokens_before"] == report["total_tokens"]
    body = json.loads(out2.read_text())
    assert body[0] == original[0] and body[2] == original[2]
    assert len(body[1]["messages"]) < len(original[1]["messages"])
    assert read_transcripts(out2)[1].problems("openai") == []


def test_openai_jsonl_through_inspect_clear_compact(tmp_path: Path) -> None:
    lines = heavy_task(0)["messages"]
    src = tmp_path / "chat.jsonl"
    src.write_text("".join(json.dumps(m) + "\n" for m in lines))
    report = json.loads(ok(ctxwise("inspect", src, "--json")).stdout)
    assert (report["format"], report["shape"]) == ("openai", "jsonl")
    out = tmp_path / "out.jsonl"
    cleared = json.loads(
        ok(ctxwise("clear", src, "--keep-last", "2", "--out", out, "--json")).stdout
    )
    assert cleared["shape"] == "jsonl" and cleared["tokens_before"] == report["total_tokens"]
    written = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(written) == len(lines) and written[0] == lines[0]
    assert (
        sum(m.get("content") != o.get("content") for m, o in zip(written, lines, strict=True)) == 4
    )
    out2 = tmp_path / "compacted.jsonl"
    compacted = json.loads(
        ok(ctxwise("compact", src, "--keep-tail-tokens", "1000", "--out", out2, "--json")).stdout
    )
    assert compacted["written_as"] == "openai:jsonl"
    assert compacted["tokens_before"] == report["total_tokens"]
    assert all(json.loads(x)["role"] for x in out2.read_text().splitlines())


@pytest.mark.parametrize(
    ("bom", "codec"),
    [
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
    ],
)
def test_bom_files_are_read_and_written_back_as_utf8(
    tmp_path: Path, bom: bytes, codec: str
) -> None:
    src = tmp_path / "chat.json"
    doc = [heavy_task(0)]
    src.write_bytes(bom + json.dumps(doc, ensure_ascii=False, indent=4).encode(codec))
    report = json.loads(ok(ctxwise("inspect", src, "--json")).stdout)
    assert report["shape"] == "records"
    out = tmp_path / "out.json"
    ok(ctxwise("clear", src, "--out", out))
    data = out.read_bytes()
    assert not data.startswith(codecs.BOM_UTF8)
    body = json.loads(data.decode("utf-8"))
    assert {k: v for k, v in body[0].items() if k != "messages"} == {
        k: v for k, v in doc[0].items() if k != "messages"
    }
    jl = tmp_path / "chat.jsonl"
    text = "".join(json.dumps(m) + "\n" for m in TestMessagesJSONL.LINES)
    jl.write_bytes(bom + text.encode(codec))
    assert json.loads(ok(ctxwise("inspect", jl, "--json")).stdout)["shape"] == "jsonl"


# -- --out ----------------------------------------------------------------------


def test_out_dash_writes_the_transcript_to_stdout(results_file: Path) -> None:
    res = ok(ctxwise("clear", results_file, "--index", "0", "--keep-last", "1", "--out", "-"))
    body = json.loads(res.stdout)
    assert len(body) == 3 and body[1] == json.loads(results_file.read_text())[1]
    assert "wrote -" in res.stderr
    res = ok(ctxwise("clear", results_file, "--out", "-", "--json"))
    assert json.loads(res.stderr)["out"] == "-" and len(json.loads(res.stdout)) == 3
    res = ok(ctxwise("compact", results_file, "--keep-tail-tokens", "1000", "--out", "-", "--json"))
    assert json.loads(res.stderr)["written_as"] == "openai:records"
    assert len(json.loads(res.stdout)[0]["messages"]) < len(heavy_task(0)["messages"])
    res = ok(ctxwise("compact", results_file, "--keep-tail-tokens", "1000", "--out", "-"))
    assert json.loads(res.stdout) and "wrote -" in res.stderr


def test_out_dev_stdout_is_written_not_replaced(results_file: Path) -> None:
    dev = Path("/dev/stdout")
    if not dev.exists():
        pytest.skip("no /dev/stdout")
    was_link = dev.is_symlink()
    res = ok(ctxwise("clear", results_file, "--out", dev, "--json"))
    body = json.loads(res.stdout)  # only the transcript: the report goes to stderr
    assert len(body) == 3 and json.loads(res.stderr)["out"] == str(dev)
    assert dev.is_symlink() == was_link
    assert not stat.S_ISREG(os.lstat(dev).st_mode)  # never replaced by a regular file


def test_out_dash_with_a_claude_code_session(tmp_path: Path) -> None:
    events = [
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}},
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "text", "text": "hello"}],
            },
        },
    ]
    src = tmp_path / "s.jsonl"
    src.write_text("".join(json.dumps(e) + "\n" for e in events))
    res = ok(ctxwise("clear", src, "--out", "-"))
    assert res.stdout == src.read_text()


def test_out_symlink_replaces_the_target_and_keeps_the_link(
    results_file: Path, tmp_path: Path
) -> None:
    target = tmp_path / "target.json"
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target.name)
    ok(ctxwise("clear", results_file, "--out", link))
    assert link.is_symlink() and os.readlink(link) == "target.json"
    assert len(json.loads(target.read_text())) == 3
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    # the input behind a link is still the input
    in_link = tmp_path / "in.json"
    in_link.symlink_to(results_file)
    res = ctxwise("compact", results_file, "--keep-tail-tokens", "1000", "--out", in_link)
    one_error_line(res, "is the input file")


def test_out_fifo_is_written_in_place(results_file: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def reader() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    res = ctxwise("clear", results_file, "--out", fifo)
    thread.join(timeout=30)
    assert not thread.is_alive(), "the reader never saw end of file"
    ok(res)
    assert len(json.loads(got[0])) == 3
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert {p.name for p in tmp_path.iterdir()} == {results_file.name, "pipe"}


def test_new_out_file_respects_the_umask(results_file: Path, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        for cmd in (["clear"], ["compact", "--keep-tail-tokens", "1000"]):
            out = tmp_path / f"{cmd[0]}.json"
            ok(ctxwise(cmd[0], results_file, *cmd[1:], "--out", out))
            assert stat.S_IMODE(out.stat().st_mode) == 0o644, cmd
    finally:
        os.umask(old)


# -- bad input --------------------------------------------------------------------


def test_bad_input_is_one_line_exit_2_and_nothing_written(
    results_file: Path, tmp_path: Path
) -> None:
    text = results_file.read_text()
    half = tmp_path / "half.json"
    half.write_text(text[: len(text) // 2])
    half_jsonl = tmp_path / "half.jsonl"
    rows = "".join(json.dumps(m) + "\n" for m in TestMessagesJSONL.LINES)
    half_jsonl.write_text(rows[: rows.index('"role": "tool"')])
    broken = tmp_path / "broken.json"
    tasks = [heavy_task(0), heavy_task(1)]
    tasks[1]["messages"][2]["tool_calls"][0].pop("id")
    broken.write_text(json.dumps(tasks))
    utf16_odd = tmp_path / "odd.json"
    utf16_odd.write_bytes(codecs.BOM_UTF16_LE + b"[\x00]")
    out = tmp_path / "out.json"
    out.write_text("precious")
    cases: list[tuple[Path, tuple[str, ...]]] = [
        (half, ("not JSON or JSONL", "line")),
        (half_jsonl, ("half.jsonl:4:", "not valid messages JSONL")),
        (broken, ("broken.json[1]", "read as OpenAI records", "message 2", "'id'")),
        (utf16_odd, ("not UTF-16-LE text (byte 4",)),
    ]
    if Path("/proc/self/mem").exists():
        cases.append((Path("/proc/self/mem"), ("cannot read",)))
    before = sorted(p.name for p in tmp_path.iterdir())
    for src, words in cases:
        cmds: list[list[str | Path]] = [
            ["inspect", src],
            ["clear", src, "--out", out],
            ["compact", src, "--keep-tail-tokens", "1000", "--out", out],
        ]
        for cmd in cmds:
            one_error_line(ctxwise(*cmd), *words)
        assert out.read_text() == "precious"
    for dst, words in (
        (tmp_path, ("is a directory",)),
        (tmp_path / "missing" / "out.json", ("does not exist",)),
    ):
        one_error_line(ctxwise("clear", results_file, "--out", dst), "cannot write", *words)
        res = ctxwise("compact", results_file, "--keep-tail-tokens", "1000", "--out", dst)
        one_error_line(res, "cannot write", *words)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_router_build_writes_through_a_symlink(tmp_path: Path) -> None:
    train = tmp_path / "train.jsonl"
    rows = [("book a flight to Paris", "travel"), ("what is my balance", "bank")] * 5
    rows += [(f"tell me joke number {i}", "oos") for i in range(5)]
    train.write_text("".join(json.dumps({"text": t, "label": lb}) + "\n" for t, lb in rows))
    target = tmp_path / "router.json"
    target.write_text("old")
    link = tmp_path / "current.json"
    link.symlink_to(target)
    ok(ctxwise("router", "build", "--train", train, "--out", link))
    assert link.is_symlink() and json.loads(target.read_text())["format"]
    assert len(list(tmp_path.glob("router.json.*.npz"))) == 1  # beside the link's target
    for path in (link, target):
        ok(ctxwise("route", path, "--query", "a flight to Rome"))
    one_error_line(
        ctxwise("router", "build", "--train", train, "--out", tmp_path), "is a directory"
    )


# -- one token total --------------------------------------------------------------


def _total(*args: str | Path) -> int:
    return int(json.loads(ok(ctxwise(*args, "--json")).stdout)["total_tokens"])


def _before(*args: str | Path) -> int:
    return int(json.loads(ok(ctxwise(*args, "--json")).stdout)["tokens_before"])


@pytest.mark.data
@pytest.mark.parametrize("path", claude_code_files(), ids=lambda p: p.name)
def test_inspect_clear_compact_agree_on_claude_code(
    path: Path, data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    live = _total("inspect", path, "--live")
    assert live == _before("clear", path, "--live", "--out", out)
    assert live == _before("compact", path, "--keep-tail-tokens", "100000000", "--out", out)
    assert _total("inspect", path) == _before("clear", path, "--out", out)


@pytest.mark.data
@pytest.mark.parametrize("counter", ["char", "tiktoken"])
def test_inspect_clear_compact_agree_on_tau_bench(
    counter: str, data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.json"
    c = ["--index", "7", "--counter", counter]
    total = _total("inspect", TAU, *c)
    assert total == _before("clear", TAU, *c, "--out", out)
    assert total == _before("compact", TAU, *c, "--keep-tail-tokens", "100000000", "--out", out)


@pytest.mark.data
def test_every_tau_trajectory_counts_the_same_in_the_library(data_dir: Path) -> None:
    from ctxwise.compaction import compact
    from ctxwise.editing import clear_tool_uses
    from ctxwise.summarize import ExtractiveSummarizer

    ctr = get_counter("char")
    for i, t in enumerate(read_transcripts(TAU)):
        c = composition(t, ctr)
        assert c.total_tokens == sum(c.by_kind.values()) == ctr.count_messages(t.messages), i
        assert (
            c.total_tokens
            == clear_tool_uses(t, trigger_tokens=0, counter=ctr, repair=True).tokens_before
        )
        summarizer = ExtractiveSummarizer(ctr)
        result = compact(t, summarizer, keep_tail_tokens=20000, counter=ctr, repair=True)
        assert c.total_tokens == result.tokens_before, i


def test_livemcpbench_tasks_as_published_compact_to_a_budget(tmp_path: Path) -> None:
    """One user prompt, then the tool loop: the cut falls inside the loop."""
    src = tmp_path / "results.json"
    tasks = [livemcp_task(i, calls=6) for i in range(2)]
    src.write_text(json.dumps(tasks, ensure_ascii=False, indent=4))
    live = json.loads(ok(ctxwise("inspect", src, "--index", "0", "--json")).stdout)
    budget = live["total_tokens"] // 2
    out = tmp_path / "out.json"
    args: list[str | Path] = ["--index", "0", "--budget", str(budget), "--out", out, "--json"]
    report = json.loads(ok(ctxwise("compact", src, *args)).stdout)
    assert report["compacted"] and report["mid_turn"] and report["tokens_after"] <= budget
    assert report["segments"] == [
        {
            "index": 0,
            "messages": report["kept_messages"],
            "tokens": report["tokens_after"],
            "problems": 0,
        }
    ]
    body = json.loads(out.read_text())
    assert body[1] == tasks[1]
    prompt = next(m["content"] for m in tasks[0]["messages"] if m["role"] == "user")
    written = read_transcripts(out)[0]
    assert written.problems("openai") == []
    text = "\n".join(m.text for m in written.messages)
    assert all(
        f"user] {line}" in text or line in text for line in prompt.splitlines() if line.strip()
    )


# -- hostile input: one line and exit 2, never a traceback (issue 33) -----------

SHORT = TRANSCRIPTS / "claude_code" / "short.jsonl"
CATALOG = DATA / "tools" / "livemcpbench" / "livemcp_tool_catalog.jsonl"
LONG_INT = "9" * 5000  # past Python's 4,300-digit int() limit


def _commands(path: Path, out: Path) -> dict[str, list[str | Path]]:
    """Every command that reads a transcript, with the arguments to run it on ``path``."""
    return {
        "inspect": ["inspect", path],
        "clear": ["clear", path, "--out", out],
        "compact": ["compact", path, "--out", out, "--budget", "500"],
        "replay": ["replay", path, "--budget", "5000"],
        "handoff select": ["handoff", "select", path, "--task", "what was done"],
    }


def _with_long_integer(tmp_path: Path, kind: str) -> Path:
    if kind == "claude-code":
        p = tmp_path / "session.jsonl"
        event = '{"type": "progress", "n": ' + LONG_INT + "}\n"
        p.write_text(SHORT.read_text(encoding="utf-8") + event, encoding="utf-8")
    elif kind == "messages":
        p = tmp_path / "request.json"
        p.write_text(
            '{"messages": [{"role": "user", "content": "hi", "n": ' + LONG_INT + "}]}",
            encoding="utf-8",
        )
    else:  # an OpenAI tool call whose arguments hold the integer: read as text
        p = tmp_path / "chat.jsonl"
        p.write_text(
            "\n".join(
                json.dumps(m)
                for m in [
                    {"role": "user", "content": "add"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "add", "arguments": '{"n": ' + LONG_INT + "}"},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                    {"role": "assistant", "content": "done"},
                ]
            )
            + "\n",
            encoding="utf-8",
        )
    return p


@pytest.mark.parametrize("command", ["inspect", "clear", "compact", "replay", "handoff select"])
@pytest.mark.parametrize("kind", ["claude-code", "messages"])
def test_a_huge_json_integer_is_one_line_and_exit_2(
    data_dir: Path, tmp_path: Path, command: str, kind: str
) -> None:
    path = _with_long_integer(tmp_path, kind)
    result = run(*_commands(path, tmp_path / "out.json")[command])
    assert_usage_error(result, str(path), "5,000 digits", "PYTHONINTMAXSTRDIGITS")
    assert not (tmp_path / "out.json").exists()


def test_a_huge_integer_in_tool_call_arguments_reads_them_as_text(tmp_path: Path) -> None:
    path = _with_long_integer(tmp_path, "arguments")
    report = json.loads(run("inspect", path, "--json").stdout)
    assert report["tools"]["add"]["calls"] == 1


@pytest.mark.parametrize("command", ["search", "budget"])
def test_a_huge_integer_in_a_catalog_is_one_line_and_exit_2(
    data_dir: Path, tmp_path: Path, command: str
) -> None:
    row = json.loads(CATALOG.read_text(encoding="utf-8").splitlines()[0])
    text = json.dumps(row).replace('"inputSchema": {', '"inputSchema": {"n": ' + LONG_INT + ", ", 1)
    path = tmp_path / "catalog.jsonl"
    path.write_text(text + "\n", encoding="utf-8")
    extra = ["--query", "x"] if command == "search" else []
    assert_usage_error(run("tools", command, path, *extra), str(path), "5,000 digits")


def test_inspect_refuses_a_transcript_over_the_default_limit_unread(tmp_path: Path) -> None:
    from ctxwise.formats import MAX_TRANSCRIPT_BYTES

    path = tmp_path / "huge.jsonl"
    with path.open("wb") as f:  # sparse: reading it would take the whole size in memory
        f.truncate(MAX_TRANSCRIPT_BYTES + 1)
    for command in ("inspect", "clear", "compact", "replay", "handoff select"):
        args = _commands(path, tmp_path / "out.json")[command]
        assert_usage_error(run(*args), str(path), "256.0 MiB", "--max-input-bytes")
    # the flag the message names is one the command has
    args = [*_commands(SHORT, tmp_path / "out.json")["handoff select"], "--max-input-bytes", "1KiB"]
    assert_usage_error(run(*args), "over the limit of 1,024 bytes", "--max-input-bytes")


def test_max_input_bytes_lowers_and_raises_the_limit(data_dir: Path) -> None:
    size = SHORT.stat().st_size
    assert_usage_error(
        run("inspect", SHORT, "--max-input-bytes", "1KiB"),
        "over the limit of 1,024 bytes",
        "--max-input-bytes",
    )
    assert run("inspect", SHORT, "--max-input-bytes", str(size), "--json").exit_code == 0
    assert_usage_error(run("tools", "search", CATALOG, "-q", "x", "--max-input-bytes", "1kb"))
    assert run("tools", "search", CATALOG, "-q", "x", "--max-input-bytes", "1GiB").exit_code == 0
    for bad in ("lots", "1.5", "0", "2 TB", "-1"):
        assert_usage_error(run("inspect", SHORT, "--max-input-bytes", bad), "--max-input-bytes")


def _long_id_session(tmp_path: Path, long_id: str, *, orphan: bool = True) -> Path:
    """A session whose tool call has an id and a name of ``len(long_id)`` characters,
    and a result answering another such id (an orphan: a pairing problem line), or
    with ``orphan=False`` the call's own."""
    events = [
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "go"}},
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": long_id, "name": long_id, "input": {}}],
            },
        },
        {
            "type": "user",
            "uuid": "u2",
            "parentUuid": "a1",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": ("x" if orphan else "") + long_id,
                        "content": "ok",
                    }
                ],
            },
        },
    ]
    p = tmp_path / "ids.jsonl"
    p.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return p


def test_text_inspect_cuts_long_ids_and_json_keeps_them(tmp_path: Path) -> None:
    from ctxwise.cli._util import MAX_CELL_CHARS

    long_id = "toolu_" + "A" * 20_000
    path = _long_id_session(tmp_path, long_id)
    result = run("inspect", path, "--max-id-chars", "30000")
    assert result.exit_code == 0, result.stderr
    assert long_id not in result.stdout and "A" * (2 * MAX_CELL_CHARS) not in result.stdout
    assert "toolu_AAAA" in result.stdout and "…" in result.stdout
    report = json.loads(run("inspect", path, "--json", "--max-id-chars", "30000").stdout)
    assert long_id in report["tools"]
    assert any(p["tool_use_id"] == "x" + long_id for p in report["problems"])


@pytest.mark.parametrize("command", ["inspect", "clear", "compact", "replay"])
def test_an_id_over_max_id_chars_is_refused_in_one_line(tmp_path: Path, command: str) -> None:
    from ctxwise.formats import MAX_ID_CHARS

    path = _long_id_session(tmp_path, "toolu_" + "A" * MAX_ID_CHARS, orphan=False)
    args = _commands(path, tmp_path / "out.json")[command]
    line = f"{MAX_ID_CHARS + 6:,} characters, over the limit of {MAX_ID_CHARS:,}"
    assert_usage_error(run(*args), str(path), "message 1: a tool_use id", line, "--max-id-chars")
    assert not (tmp_path / "out.json").exists()
    result = run(*args, "--max-id-chars", str(MAX_ID_CHARS + 7))
    assert result.exit_code == 0, result.stderr


def run_with_input(args: list[str], stdin: str) -> Any:
    from ctxwise.cli import app

    return runner.invoke(app, args, input=stdin)


def test_a_hook_payload_over_the_limit_stops_the_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import ctxwise.cli.hook as hook
    from ctxwise.errors import FormatError

    monkeypatch.setattr(hook, "MAX_PAYLOAD_BYTES", 2**20)
    r, w = os.pipe()

    def feed() -> None:  # three times the limit, more than a pipe holds
        with os.fdopen(w, "wb") as f, contextlib.suppress(BrokenPipeError):
            f.write(b"{" * (3 * 2**20))

    writer = threading.Thread(target=feed)
    writer.start()
    with os.fdopen(r, "rb") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        with pytest.raises(FormatError, match=r"hook payload: over the limit of 1\.0 MiB"):
            hook._stdin()
    writer.join()
    # as Claude Code runs it: nothing printed, exit 0, one line in the hook log
    log = tmp_path / "hooks.log"
    monkeypatch.setenv("CTXWISE_HOOK_LOG", str(log))
    result = run_with_input(["hook", "session-start"], "x" * (2**20 + 1))
    assert (result.exit_code, result.stdout) == (0, "")
    assert "over the limit of 1.0 MiB" in log.read_text(encoding="utf-8")
