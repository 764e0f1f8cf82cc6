"""Relay workloads: the directory format, and a synthetic equipment log to test with.

A workload is a folder (documented in the guide's Relay section)::

    workload.json     what the job is: instruction, examples, the state table
    chunks/0000.txt   the input, one file per chunk, lines separated by "\\n"
    chunks/0001.txt   ...
    answers.json      optional: the needle lines and the final table, for scoring

:func:`generate` builds the synthetic workload of the relay experiment: an
equipment log in which a few lines per chunk record that responsibility for an
asset passed from one person to another (the needles), among filler lines that
name the same assets and people, some of them near misses ("will take over …
next month", "discussed a handover of …"). The handover phrasing comes from many
templates, so no single word marks a needle. Every line starts with a date, a
time and a random entry id of one shape, so the id is no cue either.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxwise._io import read_user_file, sweep_stale_once, temporary_name
from ctxwise._schema import describe
from ctxwise.errors import RelayError
from ctxwise.tokens import CharCounter, TokenCounter

__all__ = [
    "WORKLOAD_FORMAT",
    "Answers",
    "Examples",
    "HandoverParser",
    "NeedleLine",
    "TableSpec",
    "Workload",
    "generate",
    "load_workload",
    "write_workload",
]

WORKLOAD_FORMAT = "ctxwise-relay-workload"
ColumnType = Literal["str", "int", "float", "bool"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Examples(_Model):
    """Lines that show what to keep (``keep``) and what to leave out (``skip``)."""

    keep: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()


class ColumnSpec(_Model):
    """One column of the state table: its type, whether every row must have it,
    and whether it is a counter (a value that never decreases)."""

    type: ColumnType = "str"
    required: bool = True
    counter: bool = False


class TableSpec(_Model):
    """The state table a job keeps: rows keyed by ``key``, typed ``columns``, and the
    ``rows`` it starts with."""

    key: str
    columns: dict[str, ColumnSpec]
    rows: tuple[dict[str, Any], ...] = ()


class NeedleLine(_Model):
    """A line the job must keep: chunk index, line index within the chunk, text."""

    chunk: int = Field(ge=0)
    line: int = Field(ge=0)
    text: str


class Answers(_Model):
    """What a perfect run ends with: every needle line, and the final table."""

    needles: tuple[NeedleLine, ...] = ()
    table: tuple[dict[str, Any], ...] = ()


class _WorkloadFile(_Model):
    format: Literal["ctxwise-relay-workload"]
    version: Literal[1]
    name: str = "workload"
    instruction: str = Field(min_length=1)
    examples: Examples = Examples()
    table: TableSpec | None = None
    chunks: int = Field(ge=1)
    generator: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Workload:
    """A long input and what the job is. ``answers`` is None when the folder has none."""

    instruction: str
    chunks: tuple[str, ...]
    examples: Examples = field(default_factory=Examples)
    table: TableSpec | None = None
    answers: Answers | None = None
    name: str = "workload"
    generator: Mapping[str, Any] | None = None


# -- the directory format ------------------------------------------------------


def _chunk_name(i: int) -> str:
    return f"{i:04d}.txt"


def write_workload(
    workload: Workload, folder: str | Path, *, clock: Callable[[], float] = time.time
) -> Path:
    """Write ``workload`` into ``folder`` (created; it must be empty or missing).

    It is written in a hidden temporary folder beside it, then renamed into place; a
    temporary folder a killed process left there is removed once it is
    :data:`ctxwise._io.STALE_TEMP_AGE` old by ``clock`` (seconds since the epoch).

    Raises:
        RelayError: ``folder`` exists and is not an empty folder.
        OSError: writing failed; nothing is left of what was written.
    """
    out = Path(folder)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RelayError("workload", f"{out} exists and is not an empty folder", path=str(out))
    # written in a hidden folder beside it, then renamed into place (over the
    # empty folder, if there is one, through a link to it): a failure halfway
    # leaves nothing behind
    dest = out.resolve() if out.exists() else out
    dest.parent.mkdir(parents=True, exist_ok=True)
    legacy = re.compile(re.escape(f".{dest.name}.") + r"[0-9a-f]{8}\.tmp")
    sweep_stale_once(dest.parent, clock=clock, also=legacy)
    for _ in range(100):
        tmp = dest.parent / temporary_name(dest.name)
        try:
            tmp.mkdir()  # 0o777 less the umask, like the folder itself would get
            break
        except FileExistsError:
            continue
    else:
        raise RelayError("workload", "cannot create a temporary folder", path=str(dest.parent))
    try:
        (tmp / "chunks").mkdir()
        meta = _WorkloadFile(
            format="ctxwise-relay-workload",
            version=1,
            name=workload.name,
            instruction=workload.instruction,
            examples=workload.examples,
            table=workload.table,
            chunks=len(workload.chunks),
            generator=dict(workload.generator) if workload.generator is not None else None,
        )
        for i, text in enumerate(workload.chunks):
            (tmp / "chunks" / _chunk_name(i)).write_bytes(text.encode("utf-8"))
        if workload.answers is not None:
            (tmp / "answers.json").write_bytes(
                (workload.answers.model_dump_json(indent=1) + "\n").encode("utf-8")
            )
        (tmp / "workload.json").write_bytes(
            (meta.model_dump_json(indent=2, exclude_none=True) + "\n").encode("utf-8")
        )
        os.rename(tmp, dest)  # fails if dest was filled meanwhile: nothing is replaced
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def load_workload(folder: str | Path) -> Workload:
    """Read a workload folder (see the module docstring).

    Raises:
        RelayError: (reason ``"workload"``) the folder is missing, ``workload.json``
            is not valid, a chunk file is missing or not UTF-8, there are chunk files
            ``workload.json`` does not count, or ``answers.json`` is not valid.
    """
    root = Path(folder)

    def bad(detail: str) -> RelayError:
        return RelayError("workload", detail, path=str(root))

    def read(name: str) -> bytes:  # a FIFO or device in the folder: refused, not read
        def error(_where: str, detail: str) -> RelayError:
            return bad(f"cannot read {name} ({detail})")

        return read_user_file(root / name, name, error)

    if not root.is_dir():
        raise bad("not a folder")
    meta_path = root / "workload.json"
    raw = read(meta_path.name)
    try:
        meta = _WorkloadFile.model_validate_json(raw)
    except ValidationError as exc:
        raise bad(f"workload.json: {describe(exc)}") from None
    chunk_dir = root / "chunks"
    expected = {_chunk_name(i) for i in range(meta.chunks)}
    present = {p.name for p in chunk_dir.iterdir()} if chunk_dir.is_dir() else set()
    missing = sorted(expected - present)
    if missing:
        raise bad(f"chunks/{missing[0]} is missing ({len(missing)} of {meta.chunks} missing)")
    extra = sorted(n for n in present - expected if not n.startswith("."))
    if extra:
        raise bad(f"chunks/{extra[0]} is not counted by workload.json (chunks = {meta.chunks})")
    chunks = []
    for i in range(meta.chunks):
        try:
            chunks.append(read(f"chunks/{_chunk_name(i)}").decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise bad(f"chunks/{_chunk_name(i)} is not UTF-8 (byte {exc.start})") from None
    answers = None
    answers_path = root / "answers.json"
    if answers_path.exists():
        try:
            answers = Answers.model_validate_json(read(answers_path.name))
        except ValidationError as exc:
            raise bad(f"answers.json: {describe(exc)}") from None
    if meta.table is not None:
        _check_table_spec(meta.table, bad)
    return Workload(
        instruction=meta.instruction,
        chunks=tuple(chunks),
        examples=meta.examples,
        table=meta.table,
        answers=answers,
        name=meta.name,
        generator=meta.generator,
    )


def _check_table_spec(spec: TableSpec, bad: Any) -> None:
    if spec.key not in spec.columns:
        raise bad(f"table.key {spec.key!r} is not one of its columns")
    for name, col in spec.columns.items():
        if col.counter and col.type not in ("int", "float"):
            raise bad(f"table column {name!r} is a counter but of type {col.type}")


# -- the synthetic equipment log ---------------------------------------------

_FIRST = (
    "Ana",
    "Bea",
    "Carl",
    "Dara",
    "Emil",
    "Fern",
    "Gus",
    "Hana",
    "Ivo",
    "Jana",
    "Kofi",
    "Lena",
    "Milo",
    "Nia",
    "Omar",
    "Pia",
    "Quinn",
    "Rosa",
    "Sven",
    "Tara",
    "Uma",
    "Vik",
    "Wes",
    "Xena",
    "Yuri",
    "Zoe",
    "Arlo",
    "Bram",
    "Cleo",
    "Dev",
)
_LAST = (
    "Ruiz",
    "Okafor",
    "Lindqvist",
    "Moreau",
    "Tanaka",
    "Novak",
    "Haddad",
    "Kowalski",
    "Silva",
    "Brennan",
    "Petrov",
    "Achebe",
    "Duval",
    "Iqbal",
    "Sato",
    "Weber",
)
_KINDS = (
    ("pump", "P"),
    ("compressor", "C"),
    ("forklift", "FL"),
    ("generator", "G"),
    ("chiller", "CH"),
    ("boiler", "B"),
    ("crane", "CR"),
    ("conveyor", "CV"),
    ("press", "PR"),
    ("mixer", "MX"),
)

# {g} the giver, {r} the receiver, {a} the asset. Every template names all three.
HANDOVER_TEMPLATES: tuple[str, ...] = (
    "{g} handed {a} over to {r}.",
    "{r} took over responsibility for {a} from {g}.",
    "Custody of {a} passed from {g} to {r}.",
    "{a} is now {r}'s responsibility; {g} signed it off.",
    "{g} transferred ownership of {a} to {r}.",
    "Reassigned: {a}, {g} -> {r}.",
    "{r} relieved {g} as keeper of {a}.",
    "{g} passed the keys for {a} to {r}, who holds it from now on.",
    "As of this shift {r}, not {g}, answers for {a}.",
    "{a} changed hands: {g} gave it to {r}.",
    "Handover complete - {a} from {g} to {r}.",
    "{r} signed for {a}, released by {g}.",
    "{g} released {a} into the care of {r}.",
    "{r} is the new custodian of {a} (previously {g}).",
    "Duty for {a} rotated from {g} to {r}.",
    "{g} delegated {a} to {r} and stepped away from it.",
    "{r} accepted {a} from {g}.",
    "Responsibility for {a}: {g} out, {r} in.",
    "{g} turned {a} over to {r} at the end of the shift.",
    "{a} now sits with {r}; {g} no longer holds it.",
    "Keeper change on {a}: {r} replaces {g}.",
    "{g} entrusted {a} to {r}.",
    "{r} inherits {a} from {g}, effective immediately.",
    "Ownership record for {a} updated: {g} => {r}.",
)

# {p} and {q} people, {a} an asset, {h} the asset's current holder, {n} {t} numbers.
_FILLER_ROUTINE: tuple[str, ...] = (
    "{p} inspected {a} and found no leaks.",
    "{p} and {q} recalibrated {a}; readings within tolerance.",
    "{a} pressure {n} kPa, temperature {t} C, checked by {p}.",
    "{p} logged a vibration alarm on {a}; {q} acknowledged it.",
    "{p} replaced the filter on {a} while {q} held the ladder.",
    "Oil level on {a} topped up by {p}.",
    "{p} cleaned the intake of {a} and noted {n} hours run.",
    "{q} photographed the nameplate of {a} for {p}.",
    "{a} ran idle for {t} minutes; {p} restarted it.",
    "{p} ordered spare belts for {a}, ticket {n}.",
    "{p} walked {q} through the lockout steps on {a}.",
    "Safety check on {a} passed; signed by {p} and {q}.",
    "{p} measured {t} dB next to {a}.",
    "{a} was moved to bay {n} by {p} for cleaning.",
    "{p} reported a loose guard on {a}; {q} tightened it.",
    "{q} read the meter on {a}: {n} units.",
    "{p} greased the bearings of {a}.",
    "{p} noted rust on the frame of {a} and told {q}.",
    "{a} tripped its breaker at {t}; {p} reset it.",
    "{p} updated the manual for {a} with {q}'s notes.",
    "Weekly test of {a} by {p}: all green.",
    "{p} borrowed the torque wrench from {q} to service {a}.",
    "{q} swapped the gauge on {a}; {p} verified it.",
    "{p} booked {a} for a calibration on day {n}.",
)
_FILLER_NEAR_MISS: tuple[str, ...] = (
    "{p} asked {q} to look at {a} tomorrow.",
    "{p} discussed a possible handover of {a} with {q}; nothing changed yet.",
    "{h} still holds {a}; {q} only borrowed the manual.",
    "{q} will take over {a} next month if {h} agrees.",
    "{p} handed {q} the inspection checklist for {a}.",
    "{q} offered to take {a} off {h}'s hands, but {h} declined.",
    "A transfer of {a} to {q} was requested by {p} and is pending approval.",
    "{h} remains responsible for {a}, confirmed with {q}.",
    "{p} passed {q} a note about the noise from {a}.",
    "{q} covered for {h} on {a} for an hour; {h} is back.",
)
_NEAR_MISS_SHARE = 0.2


def _people(rng: random.Random, n: int) -> list[str]:
    names = [f"{f} {last}" for f in _FIRST for last in _LAST]
    rng.shuffle(names)
    return names[:n]


def _assets(rng: random.Random, n: int) -> list[str]:
    out: list[str] = []
    taken: set[str] = set()
    while len(out) < n:
        kind, code = _KINDS[rng.randrange(len(_KINDS))]
        name = f"{kind} {code}-{rng.randrange(10, 1000)}"
        if name not in taken:
            taken.add(name)
            out.append(name)
    return out


_ID_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


class _Log:
    """A running equipment log: time, entry ids, holders."""

    def __init__(self, rng: random.Random, people: list[str], assets: list[str]) -> None:
        self.rng = rng
        self.people = people
        self.assets = assets
        self.holder = {a: rng.choice(people) for a in assets}
        self.initial = dict(self.holder)
        self.minute = 0
        self.ids: set[str] = set()

    def _prefix(self) -> str:
        self.minute += self.rng.randrange(1, 4)
        day, rest = divmod(self.minute, 24 * 60)
        hour, minute = divmod(rest, 60)
        while True:
            entry = "".join(self.rng.choice(_ID_ALPHABET) for _ in range(6))
            if entry not in self.ids:
                self.ids.add(entry)
                break
        place = f"hall {self.rng.choice('ABCDEF')}, bay {self.rng.randrange(1, 40):02d}"
        return f"day {day + 1:03d} {hour:02d}:{minute:02d} [{entry}] {place}: "

    def _other(self, *not_these: str) -> str:
        while True:
            p = self.rng.choice(self.people)
            if p not in not_these:
                return p

    def handover(self, asset: str | None = None) -> tuple[str, str, str, str]:
        a = asset if asset is not None else self.rng.choice(self.assets)
        g = self.holder[a]
        r = self._other(g)
        self.holder[a] = r
        template = self.rng.choice(HANDOVER_TEMPLATES)
        return self._prefix() + template.format(g=g, r=r, a=a), a, g, r

    def filler(self) -> str:
        rng = self.rng
        pool = _FILLER_NEAR_MISS if rng.random() < _NEAR_MISS_SHARE else _FILLER_ROUTINE
        template = rng.choice(pool)
        a = rng.choice(self.assets)
        h = self.holder[a]
        p = rng.choice(self.people)
        q = self._other(p, h)
        body = template.format(
            p=p,
            q=q,
            a=a,
            h=h,
            n=rng.randrange(2, 9999),
            t=f"{rng.randrange(10, 99)}.{rng.randrange(10)}",
        )
        return self._prefix() + body


def _spread(rng: random.Random, total: int, chunks: int, low: int, high: int) -> list[int]:
    """``total`` split over ``chunks`` with each part in [low, high], seeded."""
    if not low * chunks <= total <= high * chunks:
        raise RelayError(
            "workload",
            f"{total} needles do not fit {chunks} chunks of {low}-{high} each",
        )
    parts = [low] * chunks
    left = total - low * chunks
    while left:
        i = rng.randrange(chunks)
        if parts[i] < high:
            parts[i] += 1
            left -= 1
    return parts


_INSTRUCTION = (
    "Read the equipment log chunk by chunk. Keep, verbatim, every line that records that "
    "responsibility for an asset passed from one person to another (a handover): who gave "
    "it, who received it, which asset. Keep the state table current: for every asset, the "
    "person who holds it now and how many handovers it has had. Routine maintenance, "
    "readings, requests, plans and discussions of a handover that did not happen are not "
    "handovers."
)

VARIANTS: dict[str, dict[str, int]] = {
    "needles": {"needles": 497, "assets": 40, "low": 2, "high": 8},
    "counting": {"needles": 1536, "assets": 40, "low": 16, "high": 16},
}
"""The experiment's two shapes: 497 handover lines at 2-8 per chunk, and the counting
run (40 assets, 1,536 handovers, 16 per chunk). The needle counts are for 96
chunks; with another chunk count and no needles given, :func:`generate` scales
them in proportion."""

_REFERENCE_CHUNKS = 96  # the chunk count the needle counts of VARIANTS are given for


def _default_needles(variant: str, chunks: int) -> int:
    """The handover lines ``variant`` has in ``chunks`` chunks when none are given: its
    count at 96 chunks scaled to ``chunks``, rounded half up
    (``round(n * chunks / 96)``), so the per-chunk rate stays the variant's and the
    count at 96 chunks is the variant's own."""
    n = VARIANTS[variant]["needles"]
    return (2 * n * chunks + _REFERENCE_CHUNKS) // (2 * _REFERENCE_CHUNKS)


def generate(
    seed: int = 0,
    *,
    variant: Literal["needles", "counting"] = "needles",
    chunks: int = 96,
    chunk_tokens: int = 4000,
    needles: int | None = None,
    assets: int | None = None,
    examples_per_template: int = 1,
    counter: TokenCounter | None = None,
) -> Workload:
    """The synthetic equipment log, seeded (the same seed gives the same bytes).

    ``variant`` picks the needle count, per-chunk spread and asset count of
    :data:`VARIANTS`; ``needles`` and ``assets`` override them. Without
    ``needles`` the count is the variant's at 96 chunks scaled to ``chunks``,
    rounded half up (497 × chunks / 96 for needles, 16 a chunk for counting).
    Each chunk is filled with filler lines to about ``chunk_tokens`` tokens
    (``counter``, :class:`~ctxwise.tokens.CharCounter` by default); a chunk never
    gets more handover lines than fit in ``chunk_tokens``. The examples are drawn
    from a separate stream (other ids, times and pairings; no line of the log),
    ``examples_per_template`` per handover and filler template.

    Raises:
        RelayError: (reason ``"workload"``) an unknown variant, a setting out of
            range, or more handover lines than ``chunks`` chunks of about
            ``chunk_tokens`` tokens can hold.
    """
    if variant not in VARIANTS:
        raise RelayError("workload", f"unknown variant {variant!r}; choose needles or counting")
    shape = dict(VARIANTS[variant])
    for name, value, low in (
        ("chunks", chunks, 1),
        ("chunk_tokens", chunk_tokens, 100),
        ("needles", needles, 0),
        ("assets", assets, 1),
        ("examples_per_template", examples_per_template, 1),
    ):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < low
        ):
            raise RelayError("workload", f"{name} must be a whole number ≥ {low}, not {value!r}")
    if needles is not None:
        shape["needles"] = needles
        shape["low"] = min(shape["low"], needles // chunks)
        shape["high"] = max(shape["high"], -(-needles // chunks))
    else:
        shape["needles"] = _default_needles(variant, chunks)
    if assets is not None:
        shape["assets"] = assets
    tc = counter if counter is not None else CharCounter()
    rng = random.Random(seed)
    people = _people(rng, 48)
    asset_names = _assets(rng, shape["assets"])
    # How many handover lines a chunk can hold, measured on a stream of its own
    # (so the log's draws are the same as without the check).
    needle_probe = _Log(random.Random(f"probe-handover-{seed}"), people, asset_names)
    needle_tokens = sum(tc.count(needle_probe.handover()[0] + "\n") for _ in range(200)) / 200
    fit = int(chunk_tokens // needle_tokens)
    if shape["needles"] > fit * chunks:
        raise RelayError(
            "workload",
            f"{shape['needles']} handovers do not fit {chunks} chunks of about "
            f"{chunk_tokens} tokens (a handover line is about {needle_tokens:.0f} tokens, "
            f"so at most {fit} a chunk)",
        )
    shape["high"] = min(shape["high"], fit)
    shape["low"] = min(shape["low"], shape["high"])
    log = _Log(rng, people, asset_names)
    per_chunk = _spread(rng, shape["needles"], chunks, shape["low"], shape["high"])
    counts = dict.fromkeys(asset_names, 0)
    probe = _Log(random.Random(f"probe-{seed}"), people, asset_names)
    line_tokens = sum(tc.count(probe.filler() + "\n") for _ in range(200)) / 200
    texts: list[str] = []
    found: list[NeedleLine] = []
    for c in range(chunks):
        n = per_chunk[c]
        kinds = [True] * n + [False] * max(0, round(chunk_tokens / line_tokens) - n)
        rng.shuffle(kinds)
        lines: list[str] = []
        used = 0
        for is_needle in kinds:
            if is_needle:
                text, a, _g, _r = log.handover()
                counts[a] += 1
                found.append(NeedleLine(chunk=c, line=len(lines), text=text))
            else:
                text = log.filler()
            lines.append(text)
            used += tc.count(text + "\n")
        while used < chunk_tokens:
            text = log.filler()
            lines.append(text)
            used += tc.count(text + "\n")
        texts.append("\n".join(lines) + "\n")
    ex_rng = random.Random(f"examples-{seed}")
    ex_log = _Log(ex_rng, people, asset_names)
    keep: list[str] = []
    skip: list[str] = []
    for _ in range(examples_per_template):
        for template in HANDOVER_TEMPLATES:
            a = ex_rng.choice(asset_names)
            g = ex_log.holder[a]
            r = ex_log._other(g)
            ex_log.holder[a] = r
            keep.append(ex_log._prefix() + template.format(g=g, r=r, a=a))
        for template in (*_FILLER_ROUTINE, *_FILLER_NEAR_MISS):
            a = ex_rng.choice(asset_names)
            h = ex_log.holder[a]
            p = ex_rng.choice(people)
            q = ex_log._other(p, h)
            body = template.format(p=p, q=q, a=a, h=h, n=ex_rng.randrange(2, 9999), t="42.0")
            skip.append(ex_log._prefix() + body)
    table = TableSpec(
        key="asset",
        columns={
            "asset": ColumnSpec(type="str"),
            "holder": ColumnSpec(type="str"),
            "handovers": ColumnSpec(type="int", counter=True),
        },
        rows=tuple({"asset": a, "holder": log.initial[a], "handovers": 0} for a in asset_names),
    )
    answers = Answers(
        needles=tuple(found),
        table=tuple(
            {"asset": a, "holder": log.holder[a], "handovers": counts[a]} for a in asset_names
        ),
    )
    return Workload(
        instruction=_INSTRUCTION,
        chunks=tuple(texts),
        examples=Examples(keep=tuple(keep), skip=tuple(skip)),
        table=table,
        answers=answers,
        name=f"equipment-log-{variant}-seed{seed}",
        generator={
            "name": "ctxwise.relay.workload.generate",
            "seed": seed,
            "variant": variant,
            "chunks": chunks,
            "chunk_tokens": chunk_tokens,
            "needles": shape["needles"],
            "assets": shape["assets"],
        },
    )


# -- a deterministic step for the synthetic log -------------------------------


def _template_pattern(template: str) -> re.Pattern[str]:
    out = ""
    for part in re.split(r"(\{[gra]\})", template):
        if part in ("{g}", "{r}"):
            out += rf"(?P<{part[1]}>[A-Z][a-z]+ [A-Z][a-z]+)"
        elif part == "{a}":
            out += r"(?P<a>[a-z]+ [A-Z]+-\d+)"
        else:
            out += re.escape(part)
    return re.compile(r"^day \d+ \d\d:\d\d \[[A-Z0-9]{6}\] hall [A-F], bay \d\d: " + out + "$")


@dataclass(frozen=True, slots=True)
class HandoverParser:
    """A deterministic :class:`~ctxwise.relay.Step` for :func:`generate`'s logs: it
    parses the handover lines of a chunk with the generator's own templates and
    moves each asset to its new holder, adding one to its count.

    It knows this workload's phrasing (it is a parser, not a reader) and serves to
    test the relay machinery: the table, its invariants, resume. Each result says how
    many handover lines it parsed (:attr:`~ctxwise.relay.StepResult.recognised`), so
    a log written with other phrasings shows up as unrecognised chunks in the run's
    report rather than as a table that silently never changes.
    """

    key: str = "asset"
    holder: str = "holder"
    count: str = "handovers"
    _patterns: tuple[re.Pattern[str], ...] = field(
        default=tuple(_template_pattern(t) for t in HANDOVER_TEMPLATES), repr=False
    )

    @classmethod
    def for_table(cls, table: TableSpec | None) -> HandoverParser:
        """A parser writing into ``table``'s columns: its key, its first counter and
        its first other text column (the holder).

        Raises:
            RelayError: (``"spec"``) there is no table, or it lacks such columns
                (the parser only understands :func:`generate`'s logs; another job
                needs a step of its own, or the ``none`` step).
        """
        if table is None:
            raise RelayError("spec", "the parser step needs a state table; this job has none")
        counters = [c for c, col in table.columns.items() if col.counter]
        texts = [
            c
            for c, col in table.columns.items()
            if c != table.key and not col.counter and col.type == "str"
        ]
        if not counters or not texts:
            raise RelayError(
                "spec",
                "the parser step needs a table with a key, a text column (the holder) "
                f"and a counter; this one has {', '.join(table.columns)}",
            )
        return cls(key=table.key, holder=texts[0], count=counters[0])

    def parse(self, chunk: str) -> list[tuple[str, str, str]]:
        """The (asset, giver, receiver) of every handover line in ``chunk``, in order."""
        out = []
        for line in chunk.split("\n"):
            for pattern in self._patterns:
                m = pattern.match(line)
                if m:
                    out.append((m["a"], m["g"], m["r"]))
                    break
        return out

    def __call__(self, request: Any) -> Any:
        from ctxwise.relay.step import StepResult

        rows = {str(row[self.key]): dict(row) for row in request.table}
        parsed = self.parse(request.chunk)
        for asset, _giver, receiver in parsed:
            row = rows.setdefault(asset, {self.key: asset, self.holder: receiver, self.count: 0})
            row[self.holder] = receiver
            row[self.count] = int(row[self.count]) + 1
        return StepResult(table=tuple(rows.values()), recognised=len(parsed))
