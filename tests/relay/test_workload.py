"""The synthetic equipment log and the workload folder format."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from ctxwise.errors import RelayError
from ctxwise.relay import HandoverParser, Workload, generate, line_shape, load_workload
from ctxwise.relay import write_workload as write
from ctxwise.tokens import CharCounter
from tests.relay.conftest import small_counting, small_needles

PREFIX = re.compile(r"^day \d{3} \d\d:\d\d \[[A-Z2-9]{6}\] hall [A-F], bay \d\d: ")


@pytest.fixture(scope="module")
def default() -> Workload:
    return generate(0)


@pytest.fixture(scope="module")
def counting() -> Workload:
    return generate(0, variant="counting")


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _lines(w: Workload) -> list[list[str]]:
    return [c.split("\n")[:-1] for c in w.chunks]


# -- generate ------------------------------------------------------------------


def test_the_same_seed_gives_the_same_bytes_and_another_seed_others(tmp_path: Path) -> None:
    a = write(generate(3, chunks=10, needles=50), tmp_path / "a")
    b = write(generate(3, chunks=10, needles=50), tmp_path / "b")
    c = write(generate(4, chunks=10, needles=50), tmp_path / "c")
    fa, fb, fc = _files(a), _files(b), _files(c)
    assert fa == fb
    assert set(fa) == set(fc)
    assert fa["chunks/0000.txt"] != fc["chunks/0000.txt"]
    assert fa["answers.json"] != fc["answers.json"]


def test_default_variant_has_497_needles_over_96_chunks_2_to_8_each(default: Workload) -> None:
    assert default.answers is not None
    assert len(default.chunks) == 96
    assert len(default.answers.needles) == 497
    per_chunk = Counter(n.chunk for n in default.answers.needles)
    assert set(per_chunk) == set(range(96))
    assert min(per_chunk.values()) >= 2
    assert max(per_chunk.values()) <= 8


def test_counting_variant_has_1536_handovers_over_40_assets(counting: Workload) -> None:
    assert counting.answers is not None and counting.table is not None
    assert len(counting.answers.needles) == 1536
    assert len(counting.answers.table) == 40
    assert len({r["asset"] for r in counting.answers.table}) == 40
    assert sum(r["handovers"] for r in counting.answers.table) == 1536
    assert [r["asset"] for r in counting.table.rows] == [r["asset"] for r in counting.answers.table]
    assert all(r["handovers"] == 0 for r in counting.table.rows)


@pytest.mark.parametrize("which", ["default", "counting"])
def test_every_needle_is_at_its_chunk_and_line(which: str, request: pytest.FixtureRequest) -> None:
    w: Workload = request.getfixturevalue(which)
    assert w.answers is not None
    lines = _lines(w)
    for n in w.answers.needles:
        assert lines[n.chunk][n.line] == n.text
    assert len({(n.chunk, n.line) for n in w.answers.needles}) == len(w.answers.needles)


def test_the_parser_finds_exactly_the_needles_and_ends_on_the_answers(counting: Workload) -> None:
    assert counting.answers is not None and counting.table is not None
    parser = HandoverParser()
    needle_texts = [n.text for n in counting.answers.needles]
    holders = {r["asset"]: r["holder"] for r in counting.table.rows}
    counts = dict.fromkeys(holders, 0)
    found: list[str] = []
    for chunk in counting.chunks:
        for asset, giver, receiver in parser.parse(chunk):
            assert holders[asset] == giver
            holders[asset] = receiver
            counts[asset] += 1
        found.extend(line for line in chunk.split("\n") if parser.parse(line))
    assert found == needle_texts
    assert [{"asset": a, "holder": holders[a], "handovers": counts[a]} for a in holders] == list(
        counting.answers.table
    )


def test_chunks_are_about_4000_tokens_and_140_lines(default: Workload) -> None:
    counter = CharCounter()
    for chunk in default.chunks:
        assert 3900 <= counter.count(chunk) <= 4100
        assert 125 <= chunk.count("\n") <= 160
        assert chunk.endswith("\n") and not chunk.endswith("\n\n")


def test_every_line_has_the_same_prefix_shape(default: Workload) -> None:
    for lines in _lines(default):
        for line in lines:
            assert PREFIX.match(line), line


def test_filler_names_assets_and_people(default: Workload) -> None:
    assert default.answers is not None and default.table is not None
    assets = {r["asset"] for r in default.answers.table}
    people = {r["holder"] for r in default.table.rows} | {
        r["holder"] for r in default.answers.table
    }
    needles = {(n.chunk, n.line) for n in default.answers.needles}
    filler = [
        line
        for c, lines in enumerate(_lines(default))
        for i, line in enumerate(lines)
        if (c, i) not in needles
    ]
    naming_asset = [f for f in filler if any(a in f for a in assets)]
    naming_both = [f for f in naming_asset if any(p in f for p in people)]
    assert len(naming_asset) == len(filler)  # every filler line is about an asset
    assert len(naming_both) > len(filler) // 4
    # near misses: filler that uses handover words
    assert any("handover" in f for f in filler)
    assert any("take over" in f for f in filler)
    assert any(" handed " in f for f in filler)


def test_no_word_but_names_and_ids_is_in_half_of_the_needle_lines(default: Workload) -> None:
    assert default.answers is not None
    bodies = [PREFIX.sub("", n.text) for n in default.answers.needles]
    shaped: Counter[str] = Counter()
    plain: Counter[str] = Counter()
    for body in bodies:
        shaped.update({t for t in line_shape(body) if t[:1].isalpha() and t != "<cap>"})
        plain.update({w.lower() for w in re.findall(r"[A-Za-z']+", body) if not w[0].isupper()})
    half = len(bodies) / 2
    assert shaped and plain
    assert shaped.most_common(1)[0][1] < half, shaped.most_common(3)
    assert plain.most_common(1)[0][1] < half, plain.most_common(3)
    # and the phrasings are many: at least 20 distinct sentence shapes
    shapes = {" ".join(t for t in line_shape(b) if t not in ("#",)) for b in bodies}
    kinds = {"pump", "compressor", "forklift", "generator", "chiller"}
    kinds |= {"boiler", "crane", "conveyor", "press", "mixer"}
    masked = {" ".join("<kind>" if t in kinds else t for t in s.split()) for s in shapes}
    assert len(masked) >= 20


def test_examples_contain_no_line_of_the_log(default: Workload) -> None:
    log = {line for lines in _lines(default) for line in lines}
    assert default.examples.keep and default.examples.skip
    assert not set(default.examples.keep) & log
    assert not set(default.examples.skip) & log


def test_unknown_variant_or_needles_that_do_not_fit_are_refused() -> None:
    with pytest.raises(RelayError) as err:
        generate(0, variant="other")  # type: ignore[arg-type]
    assert err.value.reason == "workload"
    with pytest.raises(RelayError) as err:
        generate(0, chunks=8, needles=5000)  # 625 lines a chunk of 4,000 tokens
    assert err.value.reason == "workload"
    assert "5000 handovers do not fit 8 chunks of about 4000 tokens" in str(err.value)


@pytest.mark.parametrize(("chunks", "needles"), [(1, 5), (3, 16), (8, 41), (96, 497), (200, 1035)])
def test_the_default_needles_scale_with_the_chunks(chunks: int, needles: int) -> None:
    w = generate(1, chunks=chunks)
    assert w.answers is not None and len(w.answers.needles) == needles
    assert w.generator is not None and w.generator["needles"] == needles
    counting = generate(1, chunks=chunks, variant="counting")
    assert counting.answers is not None and len(counting.answers.needles) == 16 * chunks


def test_a_chunk_never_gets_more_handovers_than_fit_its_tokens() -> None:
    # 8 handover lines a chunk would be about 200 tokens; these chunks hold about 100
    w = generate(2, chunks=8, chunk_tokens=100, needles=20)
    assert w.answers is not None and len(w.answers.needles) == 20
    per_chunk = [0] * 8
    for needle in w.answers.needles:
        per_chunk[needle.chunk] += 1
    assert max(per_chunk) <= 3
    assert all(len(text) / 4 < 100 + 60 for text in w.chunks)
    with pytest.raises(RelayError, match="do not fit"):
        generate(2, chunks=2, chunk_tokens=100, needles=1000, variant="counting", assets=1)


# -- the folder format -----------------------------------------------------------


def test_write_then_load_round_trips(tmp_path: Path) -> None:
    w = small_counting(1, chunks=8)
    folder = write(w, tmp_path / "w")
    assert sorted(p.name for p in (folder / "chunks").iterdir()) == [
        f"{i:04d}.txt" for i in range(8)
    ]
    back = load_workload(folder)
    assert back == w
    assert back.chunks == w.chunks


def test_round_trip_keeps_unusual_bytes(tmp_path: Path) -> None:
    chunks = ("caf\u00e9 \u2014 \U0001f600  \r\nline two \t\n", "\r\n\n  trailing   ", "x")
    w = Workload(instruction="keep all", chunks=chunks)
    back = load_workload(write(w, tmp_path / "w"))
    assert back.chunks == chunks
    assert back.answers is None and back.table is None


def test_write_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "x").write_text("x")
    with pytest.raises(RelayError) as err:
        write(small_needles(chunks=4), tmp_path / "w")
    assert err.value.reason == "workload"


def _folder(tmp_path: Path) -> Path:
    return write(small_counting(2, chunks=4), tmp_path / "w")


def _edit_meta(folder: Path, **changes: object) -> None:
    meta = json.loads((folder / "workload.json").read_text())
    meta.update(changes)
    (folder / "workload.json").write_text(json.dumps(meta))


def _break_missing_folder(folder: Path) -> None:
    for p in sorted(folder.rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() else p.unlink()
    folder.rmdir()


def _break_no_meta(folder: Path) -> None:
    (folder / "workload.json").unlink()


def _break_meta_not_json(folder: Path) -> None:
    (folder / "workload.json").write_text("{not json")


def _break_unknown_key(folder: Path) -> None:
    _edit_meta(folder, colour="blue")


def _break_format(folder: Path) -> None:
    _edit_meta(folder, format="some-other-format")


def _break_missing_chunk(folder: Path) -> None:
    (folder / "chunks" / "0002.txt").unlink()


def _break_extra_chunk(folder: Path) -> None:
    (folder / "chunks" / "0004.txt").write_text("one more\n")


def _break_not_utf8(folder: Path) -> None:
    (folder / "chunks" / "0001.txt").write_bytes(b"ok line\n\xff\xfe bad\n")


def _break_answers(folder: Path) -> None:
    (folder / "answers.json").write_text('{"needles": [{"chunk": -1, "line": 0, "text": "x"}]}')


def _break_answers_not_json(folder: Path) -> None:
    (folder / "answers.json").write_text("[1, 2")


def _break_table_key(folder: Path) -> None:
    meta = json.loads((folder / "workload.json").read_text())
    meta["table"]["key"] = "serial"
    (folder / "workload.json").write_text(json.dumps(meta))


BREAKS = {
    "missing folder": (_break_missing_folder, "not a folder"),
    "no workload.json": (_break_no_meta, "workload.json"),
    "workload.json not JSON": (_break_meta_not_json, "workload.json"),
    "unknown key": (_break_unknown_key, "colour"),
    "wrong format": (_break_format, "format"),
    "missing chunk": (_break_missing_chunk, "chunks/0002.txt"),
    "extra chunk": (_break_extra_chunk, "chunks/0004.txt"),
    "chunk not UTF-8": (_break_not_utf8, "chunks/0001.txt"),
    "answers invalid": (_break_answers, "answers.json"),
    "answers not JSON": (_break_answers_not_json, "answers.json"),
    "table.key not a column": (_break_table_key, "serial"),
}


@pytest.mark.parametrize("case", list(BREAKS))
def test_a_folder_in_the_wrong_shape_is_a_workload_error(tmp_path: Path, case: str) -> None:
    folder = _folder(tmp_path)
    load_workload(folder)  # fine before it is broken
    damage, named = BREAKS[case]
    damage(folder)
    with pytest.raises(RelayError) as err:
        load_workload(folder)
    assert err.value.reason == "workload"
    assert named in str(err.value)
    assert err.value.path == str(folder)


def test_hidden_files_in_chunks_are_ignored(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "chunks" / ".DS_Store").write_bytes(b"\x00\x01")
    assert len(load_workload(folder).chunks) == 4


def test_a_chunk_that_is_a_folder_is_a_workload_error(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "chunks" / "0003.txt").unlink()
    (folder / "chunks" / "0003.txt").mkdir()
    with pytest.raises(RelayError) as err:
        load_workload(folder)
    assert err.value.reason == "workload"


def _break_counter_type(folder: Path) -> None:
    meta = json.loads((folder / "workload.json").read_text())
    meta["table"]["columns"]["holder"]["counter"] = True
    (folder / "workload.json").write_text(json.dumps(meta))


def test_a_counter_that_is_not_a_number_is_a_workload_error(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    _break_counter_type(folder)
    with pytest.raises(RelayError) as err:
        load_workload(folder)
    assert err.value.reason == "workload"
    assert "holder" in str(err.value)


@pytest.mark.parametrize(
    "settings",
    [
        {"chunks": 0},
        {"chunks": True},
        {"chunk_tokens": 50},
        {"assets": 0},
        {"needles": -1},
        {"examples_per_template": 0},
        {"chunks": 2.5},
    ],
)
def test_generate_refuses_settings_out_of_range(settings: dict[str, object]) -> None:
    with pytest.raises(RelayError) as err:
        generate(0, **settings)  # type: ignore[arg-type]
    assert err.value.reason == "workload"


def test_generate_overrides_needles_and_assets() -> None:
    w = generate(5, chunks=6, needles=30, assets=7, examples_per_template=2)
    assert w.answers is not None and w.table is not None
    assert len(w.answers.needles) == 30
    assert len(w.table.rows) == 7 and len(w.answers.table) == 7
    assert len(w.examples.keep) == 2 * 24
    assert w.generator is not None and w.generator["assets"] == 7


def test_score_run_needs_answers(tmp_path: Path) -> None:
    from ctxwise.relay import Relay, keep_state, score_run

    w = Workload(instruction="keep lines about pumps", chunks=("pump one\n", "crane two\n"))
    result = Relay(w, keep_state, runs=tmp_path).run("x")
    with pytest.raises(RelayError) as err:
        score_run(result, w)
    assert err.value.reason == "workload"


def test_a_write_sweeps_the_folders_a_killed_write_left(tmp_path: Path) -> None:
    import os

    now = 2_000_000_000.0
    stale = [tmp_path / ".w.ctxwise-0123abcd.tmp", tmp_path / ".w.89abcdef.tmp"]  # new, old
    fresh = tmp_path / ".w.ctxwise-00000001.tmp"
    for folder, mtime in [(stale[0], now - 3601), (stale[1], now - 3601), (fresh, now - 5)]:
        (folder / "chunks").mkdir(parents=True)
        (folder / "chunks" / "0000.txt").write_text("part")
        os.utime(folder, (mtime, mtime))
    write(small_counting(1, chunks=2), tmp_path / "w", clock=lambda: now)
    assert sorted(p.name for p in tmp_path.iterdir()) == [fresh.name, "w"]
