"""Mutated real transcripts and catalogs through every reader and CLI command (issue 33).

The corpus is made here, deterministically: slices of the shared data (Claude Code
sessions, a tau-bench trajectory file, an Anthropic request written from a
session, a LiveMCPBench catalog and an MCP ``tools/list``; provenance in
``../shared/data/README.md``), each mutated by every mutator below with a seeded
:class:`random.Random` (truncation, byte flips, invalid UTF-8, byte order marks,
type swaps, deep nesting, huge strings and integers, duplicate ids, cyclic parent
links). Each mutated file goes through the readers (every format) and the CLI
commands in process. The only acceptable outcomes are a result, one of ctxwise's
own errors (:class:`~ctxwise.errors.CtxwiseError`), or, from the CLI, exit 0 or a
clean exit 2: one ``ctxwise: error:`` line on stderr, nothing on stdout and no
output file. Anything else (a traceback, exit 1, a half-written output) fails the
test, naming the seed, the mutator, the case and the command, so it can be rerun.
"""

from __future__ import annotations

import codecs
import json
import random
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ctxwise.cli import main
from ctxwise.errors import CtxwiseError, CtxwiseWarning
from ctxwise.formats import FORMATS, read_transcript_file
from ctxwise.formats.claude_code import read_claude_code
from ctxwise.tools.catalog import ToolCatalog
from tests.conftest import DATA, TRANSCRIPTS

pytestmark = pytest.mark.data

CASES_PER_MUTATOR = 3
"""Mutated files per seed and mutator: the suite's bound on this test's time."""

BIG = 1_000_000
"""Characters of a huge string (and, as ``[``, of the deepest nesting)."""


@dataclass(frozen=True, slots=True)
class Seed:
    name: str
    suffix: str
    data: bytes
    kind: str  # "jsonl" (one JSON object a line), "json" or "catalog"


def _lines(path: Path, start: int = 0, stop: int | None = None) -> bytes:
    lines = path.read_bytes().split(b"\n")
    return b"\n".join(lines[start:stop]).rstrip(b"\n") + b"\n"


SEEDS = ("short", "tool_heavy", "subagent", "compacted", "tau", "anthropic", "livemcp", "mcp_list")


def _seed(name: str) -> Seed:
    """A slice of the shared data to mutate (read when the test runs, so a checkout
    without the data skips it instead of failing to collect)."""
    cc = TRANSCRIPTS / "claude_code"
    tools = DATA / "tools"
    if name in ("short", "tool_heavy"):
        return Seed(name, ".jsonl", (cc / f"{name}.jsonl").read_bytes(), "jsonl")
    if name == "subagent":
        return Seed(name, ".jsonl", _lines(cc / "subagent.jsonl", 0, 30), "jsonl")
    if name == "compacted":  # around Claude Code's own compaction, at line 754
        long = cc / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
        return Seed(name, ".jsonl", _lines(long, 735, 775), "jsonl")
    if name == "tau":
        tau = json.loads((TRANSCRIPTS / "tau_bench" / "gpt-4o-airline.json").read_text("utf-8"))
        return Seed(name, ".json", json.dumps(tau[:1], indent=1).encode(), "json")
    if name == "anthropic":  # a request written from a real session
        from ctxwise.formats import anthropic

        t = read_transcript_file(cc / "tool_heavy.jsonl").transcripts[0]
        return Seed(name, ".json", json.dumps(anthropic.encode_request(t)).encode(), "json")
    if name == "livemcp":
        rows = _lines(tools / "livemcpbench" / "livemcp_tool_catalog.jsonl", 0, 12)
        return Seed(name, ".jsonl", rows, "catalog")
    listing = json.loads((tools / "mcp_listings" / "github-mcp-server.tools_list.json").read_text())
    body = listing.get("result", listing)
    return Seed(name, ".json", json.dumps({**body, "tools": body["tools"][:8]}).encode(), "catalog")


# -- mutators -----------------------------------------------------------------------

RAW = "\x00raw\x00"
"""A string node standing for raw JSON text spliced in after dumping (deep nesting,
numbers Python's json cannot write)."""


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, value) below ``value``, the root excluded."""
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, child in items:
        yield (*path, key), child
        yield from _nodes(child, (*path, key))


def _set(doc: Any, path: tuple[Any, ...], new: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = new


_ID_KEYS = ("id", "uuid", "tool_use_id", "tool_call_id", "parentUuid", "name", "type", "role")


def _pick(rng: random.Random, doc: Any, keys: tuple[str, ...] = ()) -> tuple[Any, ...] | None:
    """A random node's path; one whose key is in ``keys`` when there is one."""
    nodes = [p for p, _ in _nodes(doc)]
    if keys:
        keyed = [p for p in nodes if p[-1] in keys]
        nodes = keyed or nodes
    return rng.choice(nodes) if nodes else None


def _dump(doc: Any, raw: str) -> str:
    return json.dumps(doc, ensure_ascii=False).replace(json.dumps(RAW), raw, 1)


def _structural(
    edit: Callable[[random.Random, Any], str | None],
) -> Callable[[random.Random, bytes, Seed], bytes]:
    """A mutator that edits parsed JSON: one or a few lines of JSONL, or the document."""

    def mutate(rng: random.Random, data: bytes, seed: Seed) -> bytes:
        text = data.decode("utf-8")
        if seed.kind != "json":
            lines = text.split("\n")
            full = [i for i, line in enumerate(lines) if line.strip()]
            for i in rng.sample(full, min(len(full), rng.choice((1, 1, 3)))):
                doc = json.loads(lines[i])
                out = edit(rng, doc)
                lines[i] = out if out is not None else json.dumps(doc, ensure_ascii=False)
            return "\n".join(lines).encode("utf-8", "surrogatepass")
        doc = json.loads(text)
        out = edit(rng, doc)
        return (out if out is not None else json.dumps(doc)).encode("utf-8", "surrogatepass")

    return mutate


def truncate(rng: random.Random, data: bytes, seed: Seed) -> bytes:
    return data[: rng.randrange(len(data))]


def flip_bytes(rng: random.Random, data: bytes, seed: Seed) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 12)):
        out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def invalid_utf8(rng: random.Random, data: bytes, seed: Seed) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        bad = rng.choice([b"\xff", b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"])
        at = rng.randrange(len(out))
        out[at:at] = bad
    return bytes(out)


def byte_order_mark(rng: random.Random, data: bytes, seed: Seed) -> bytes:
    text = data.decode("utf-8")
    choice = rng.randrange(5)
    if choice == 0:
        return codecs.BOM_UTF8 + data
    if choice == 1:
        return codecs.BOM_UTF16_LE + text.encode("utf-16-le")
    if choice == 2:
        return codecs.BOM_UTF32_BE + text.encode("utf-32-be")
    if choice == 3:  # a mark the text does not follow
        return codecs.BOM_UTF16_BE + data
    lines = data.split(b"\n")  # a mark at the start of a line inside the file
    at = rng.randrange(len(lines))
    lines[at] = codecs.BOM_UTF8 + lines[at]
    return b"\n".join(lines)


_SWAPS: tuple[Any, ...] = ({}, [], "", 0, -1, 2.5, True, None, "x" * 40, [{}], {"type": {}}, [[]])


@_structural
def type_swap(rng: random.Random, doc: Any) -> str | None:
    for _ in range(rng.randint(1, 3)):
        path = _pick(rng, doc, (*_ID_KEYS, "content", "message", "messages", "traj", "input"))
        if path is not None:
            _set(doc, path, rng.choice(_SWAPS))
    return None


@_structural
def deep_nesting(rng: random.Random, doc: Any) -> str | None:
    path = _pick(rng, doc)
    if path is None:
        return None
    depth = rng.choice((900, 5_000, BIG))
    _set(doc, path, RAW)
    if rng.random() < 0.5:
        return _dump(doc, "[" * depth + "]" * depth)
    return _dump(doc, '{"a":' * depth + "1" + "}" * depth)


@_structural
def huge_string(rng: random.Random, doc: Any) -> str | None:
    path = _pick(rng, doc, ("text", "content", "id", "name", "uuid", "tool_use_id", "description"))
    if path is None:
        return None
    _set(doc, path, rng.choice(("A" * BIG, "é" * (BIG // 2), "\U0001f600 " * (BIG // 4))))
    return None


@_structural
def huge_number(rng: random.Random, doc: Any) -> str | None:
    path = _pick(rng, doc)
    if path is None:
        return None
    _set(doc, path, RAW)
    sign = rng.choice(("", "-"))
    number = rng.choice(
        (sign + "9" * rng.choice((4_301, 20_000)), "1e400", "-0", "NaN", "-Infinity", "1" * 400)
    )
    return _dump(doc, number)


@_structural
def lone_surrogate(rng: random.Random, doc: Any) -> str | None:
    """A string holding a lone surrogate as a JSON escape (valid UTF-8, as a truncated
    emoji is written), which no UTF-8 output can hold as it is."""
    path = _pick(rng, doc, ("text", "content", "id", "name", "uuid"))
    if path is None:
        return None
    _set(doc, path, RAW)
    return _dump(doc, json.dumps(rng.choice(("\ud83d", "a\udc00b", "\ud800" * 10))))


def duplicate_ids(rng: random.Random, data: bytes, seed: Seed) -> bytes:
    text = data.decode("utf-8")
    if seed.kind != "json":  # events or rows again: replayed copies, reused uuids and names
        lines = [line for line in text.split("\n") if line.strip()]
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(lines) + 1)
            lines.insert(at, rng.choice(lines))
        return ("\n".join(lines) + "\n").encode()
    doc = json.loads(text)
    ids = [(p, v) for p, v in _nodes(doc) if p[-1] in _ID_KEYS[:4] and isinstance(v, str)]
    if ids:
        same = rng.choice(ids)[1]
        for p, _ in rng.sample(ids, min(len(ids), rng.randint(2, 6))):
            _set(doc, p, same)
    return json.dumps(doc).encode()


def cyclic_parents(rng: random.Random, data: bytes, seed: Seed) -> bytes:
    if seed.kind == "json":
        return duplicate_ids(rng, data, seed)
    lines = data.decode("utf-8").split("\n")
    events = [(i, json.loads(line)) for i, line in enumerate(lines) if line.strip()]
    uuids = [e["uuid"] for _, e in events if isinstance(e, dict) and isinstance(e.get("uuid"), str)]
    if not uuids:
        return data
    for i, e in events:
        if not isinstance(e, dict) or rng.random() > 0.4:
            continue
        key = rng.choice(("parentUuid", "logicalParentUuid", "leafUuid"))
        # a later entry (a cycle), itself, or a uuid no entry has
        e[key] = rng.choice((rng.choice(uuids), e.get("uuid"), "no-such-entry"))
        lines[i] = json.dumps(e, ensure_ascii=False)
    return "\n".join(lines).encode()


MUTATORS: dict[str, Callable[[random.Random, bytes, Seed], bytes]] = {
    "truncate": truncate,
    "flip_bytes": flip_bytes,
    "invalid_utf8": invalid_utf8,
    "byte_order_mark": byte_order_mark,
    "type_swap": type_swap,
    "deep_nesting": deep_nesting,
    "huge_string": huge_string,
    "huge_number": huge_number,
    "lone_surrogate": lone_surrogate,
    "duplicate_ids": duplicate_ids,
    "cyclic_parents": cyclic_parents,
}


def corpus(seed: Seed) -> Iterator[tuple[str, int, bytes]]:
    """(mutator, case, bytes) of every mutated file of ``seed``; the same on every run."""
    for name, mutate in MUTATORS.items():
        for case in range(CASES_PER_MUTATOR):
            rng = random.Random(f"{seed.name}:{name}:{case}")
            yield name, case, mutate(rng, seed.data, seed)


# -- what runs on each file ---------------------------------------------------------

_TRANSCRIPT_COMMANDS = (
    ("inspect", "--json"),
    ("clear", "--keep-last", "1", "--out", "{out}"),
    ("compact", "--budget", "3000", "--out", "{out}"),
    ("replay", "--budget", "8000"),
    ("handoff", "select", "--task", "which files changed", "--budget", "500"),
)
_CATALOG_COMMANDS = (
    ("tools", "search", "--query", "create an issue"),
    ("tools", "budget", "--k", "3"),
)


def _readers(path: Path, seed: Seed) -> list[tuple[str, Callable[[], object]]]:
    if seed.kind == "catalog":
        return [("ToolCatalog.load", lambda: ToolCatalog.load(path, skip_invalid=True))]
    calls: list[tuple[str, Callable[[], object]]] = [
        (f"read_transcript_file({fmt})", lambda fmt=fmt: read_transcript_file(path, fmt))
        for fmt in FORMATS
    ]
    calls.append(
        ("read_claude_code", lambda: read_claude_code(path.read_bytes().decode("utf-8", "replace")))
    )
    return calls


def _commands(path: Path, out: Path, seed: Seed, case: int) -> list[list[str]]:
    """The CLI commands run on one file: text ``inspect`` always (it lays out every
    id and name), and the other commands in turn."""
    if seed.kind == "catalog":
        name, *rest = _CATALOG_COMMANDS[case % len(_CATALOG_COMMANDS)]
        return [[name, rest[0], str(path), *rest[1:]]]
    chosen = _TRANSCRIPT_COMMANDS[case % len(_TRANSCRIPT_COMMANDS)]
    picked = [["inspect", str(path)]]
    args = [a.replace("{out}", str(out)) for a in chosen]
    at = 2 if chosen[0] == "handoff" else 1  # the file goes after the (sub)command
    picked.append([*args[:at], str(path), *args[at:]])
    return picked


def _ctxwise(args: list[str]) -> tuple[int, str, str, Exception | None]:
    """``ctxwise ARGS`` in process through :func:`ctxwise.cli.main`, the console
    script's entry point (it maps errors to exit codes and sets up the streams):
    the exit code, stdout, stderr and an exception that escaped it."""
    with CliRunner().isolation() as (out, err, _):
        escaped: Exception | None = None
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except Exception as exc:  # the very thing this test looks for
            code, escaped = 1, exc
        return code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode(), escaped


def _check_cli(args: list[str], out: Path) -> str | None:
    """What is wrong with running ``ctxwise ARGS`` (``None``: nothing)."""
    code, stdout, stderr, escaped = _ctxwise(args)
    if code == 0 and escaped is None:
        return None
    if code != 2 or escaped is not None:
        return f"exit {code}: {escaped!r}"
    lines = stderr.splitlines()
    if stdout or len(lines) != 1 or not lines[0].startswith("ctxwise: error: "):
        return f"exit 2 but not one error line: stdout {stdout[:200]!r}, stderr {lines[:3]}"
    if out.exists():
        return "exit 2 but the output file was written"
    return None


@pytest.mark.parametrize("name", SEEDS)
def test_mutated_inputs_give_a_result_or_a_ctxwise_error(
    name: str, data_dir: Path, tmp_path: Path
) -> None:
    seed = _seed(name)
    failures: list[str] = []
    for mutator, case, data in corpus(seed):
        where = f"{seed.name}/{mutator}/{case}"
        path = tmp_path / f"{mutator}-{case}{seed.suffix}"
        path.write_bytes(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CtxwiseWarning)
            for label, read in _readers(path, seed):
                try:
                    read()
                except CtxwiseError:
                    pass
                except Exception as exc:  # the very thing this test looks for
                    failures.append(f"{where} {label}: {exc!r}"[:500])
            out = tmp_path / f"out-{mutator}-{case}{seed.suffix}"
            for args in _commands(path, out, seed, case):
                wrong = _check_cli(args, out)
                if wrong is not None:
                    failures.append(f"{where} ctxwise {' '.join(args[:2])}: {wrong}"[:500])
                out.unlink(missing_ok=True)
        path.unlink()
    assert not failures, "\n".join(failures)
